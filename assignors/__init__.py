"""Partition assignors: pure code, no I/O."""
