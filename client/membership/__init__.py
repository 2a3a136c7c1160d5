"""kgroup.membership."""
