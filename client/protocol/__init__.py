"""kgroup.protocol."""
