"""kgroup.dataplane."""
