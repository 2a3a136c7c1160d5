"""Actions both members return: what ``handle(event, now)`` asks the runtime to do, in order.

All actions are frozen dataclasses. Partition sets are frozensets; the runtime
performs the actions in list order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kgroup.membership.common.events import CallbackKind
from kgroup.types import TopicPartition

__all__ = [
    "Closed",
    "CommitOffsets",
    "CommonAction",
    "LeaveComplete",
    "RaiseCallbackError",
    "RediscoverCoordinator",
    "ReportFatalError",
    "RunCallback",
    "SendRequest",
    "StartFetching",
    "StopFetching",
]


_Request = TypeVar("_Request")


@dataclass(frozen=True, slots=True)
class SendRequest(Generic[_Request]):
    """The base of every "send this coordinator request" action.

    The runtime sends ``request`` and feeds back its outcome echoing ``seq``:
    the protocol's :class:`~kgroup.membership.common.events.ResponseReceived`
    subclass for the API, or
    :class:`~kgroup.membership.common.events.RequestFailed`.
    """

    seq: int
    request: _Request


@dataclass(frozen=True, slots=True)
class StopFetching:
    """Stop fetching these partitions and drop their buffered records."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class StartFetching:
    """Start fetching these (newly assigned) partitions."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class CommitOffsets:
    """Commit the consumed offsets of ``partitions`` before they are revoked.

    The runtime fills in the offsets, commits with ``member_epoch`` (retrying
    STALE_MEMBER_EPOCH) until ``deadline``, and answers with CommitCompleted
    carrying ``token``. The member stops waiting at ``deadline`` on its own.

    The classic member sets ``member_epoch`` to its generation id (the same
    OffsetCommit field, GenerationIdOrMemberEpoch) and fills ``member_id``
    and ``instance_id``; it answers refusals with
    :class:`~kgroup.membership.classic.CommitFailed`. ``offsets``,
    when given, are explicit offsets for some of ``partitions`` (a commit
    retried after a rebalance); the runtime fills in the others.
    """

    token: int
    partitions: frozenset[TopicPartition]
    member_epoch: int
    deadline: float
    member_id: str | None = None
    instance_id: str | None = None
    offsets: Mapping[TopicPartition, int] | None = field(default=None, hash=False)


@dataclass(frozen=True, slots=True)
class RunCallback:
    """Run a rebalance listener method in the application's context (inside poll).

    Answer with CallbackCompleted(kind, token, error). ``kind`` is REVOKED,
    ASSIGNED or LOST; ``partitions`` are the partitions that changed.
    """

    kind: CallbackKind
    token: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class RaiseCallbackError:
    """A rebalance callback raised: raise ``error`` from the application's poll."""

    kind: CallbackKind
    error: BaseException = field(compare=False)


@dataclass(frozen=True, slots=True)
class RediscoverCoordinator:
    """Look the group coordinator up again; answer with CoordinatorRediscovered."""


@dataclass(frozen=True, slots=True)
class ReportFatalError:
    """The member failed for good; raise a typed error from poll from now on.

    ``protocol_unsupported`` marks UNSUPPORTED_VERSION of the new protocol's
    heartbeat: with ``group.protocol=auto`` the runtime falls back to the
    classic protocol.
    """

    code: int
    name: str
    message: str | None
    protocol_unsupported: bool = False


@dataclass(frozen=True, slots=True)
class LeaveComplete:
    """An unsubscribe finished: the leave request was answered, failed or not sendable."""


@dataclass(frozen=True, slots=True)
class Closed:
    """The close finished (``timed_out`` when its deadline cut it short)."""

    timed_out: bool = False


CommonAction = (
    StopFetching
    | StartFetching
    | CommitOffsets
    | RunCallback
    | RaiseCallbackError
    | RediscoverCoordinator
    | ReportFatalError
    | LeaveComplete
    | Closed
)
"""The actions both members return."""
