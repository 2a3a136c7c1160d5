"""kgroup.transport."""
