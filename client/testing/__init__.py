"""kgroup.testing."""
