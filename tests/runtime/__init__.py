"""Runtime tests: the real consumers and runtime against kgroup.testing.fake (no JVM)."""
