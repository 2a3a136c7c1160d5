"""Work the runtime hands to the application's context, and its typed errors.

The driver never runs application code on its own event loop task: listener
callbacks, errors to raise, the outcome of an asynchronous commit and the
release of a revocation commit are queued as :data:`AppWork` and carried out
by the consumer front end inside ``poll()`` / ``consume()`` / ``close()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# NotAssignedError lives in kgroup.errors; named here too for the driver's ``work.``.
from kgroup.errors import NotAssignedError
from kgroup.membership import CallbackKind
from kgroup.types import TopicPartition

__all__ = [
    "AppWork",
    "CallbackWork",
    "CommitCallback",
    "CommitResultWork",
    "ErrorWork",
    "NotAssignedError",
    "RevocationCommitWork",
]

CommitCallback = Callable[[Mapping[TopicPartition, int], BaseException | None], object]
"""Called with the offsets committed and None, or the offsets asked for and the error."""


@dataclass(frozen=True, slots=True)
class CallbackWork:
    """Run the listener's method for ``kind`` with ``partitions``; report with ``token``."""

    kind: CallbackKind
    token: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class ErrorWork:
    """Raise ``error`` from the application's poll."""

    error: BaseException = field(compare=False)


@dataclass(frozen=True, slots=True)
class RevocationCommitWork:
    """Release the commit before a revocation (the application is done with its records)."""

    token: int


@dataclass(frozen=True, slots=True)
class CommitResultWork:
    """Tell an asynchronous commit's callback how it went."""

    callback: CommitCallback = field(compare=False)
    offsets: Mapping[TopicPartition, int]
    error: BaseException | None = field(compare=False)


AppWork = CallbackWork | ErrorWork | RevocationCommitWork | CommitResultWork
"""Work the runtime queues for the application's context."""
