"""Errors built as kgroup's runtime raises them, for the unit tests of their translations."""

from __future__ import annotations

from kgroup.errors import CommitFailedError, broker_error


def refused_commit(code: int) -> CommitFailedError:
    """A commit the broker refused with ``code`` because the group moved on: the
    runtime's ``CommitFailedError``, the broker's error as its ``__cause__``."""
    try:
        raise CommitFailedError("commit refused") from broker_error(code)
    except CommitFailedError as exc:
        return exc
