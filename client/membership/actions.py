"""Actions: what :meth:`ConsumerMember.handle` asks the runtime to do, in order.

All actions are frozen dataclasses. Partition sets are frozensets; the runtime
performs the actions in list order.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kgroup.membership.events import CallbackKind
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = [
    "Action",
    "AssignorOnAssignment",
    "Closed",
    "CommitOffsets",
    "HeartbeatRequest",
    "LeaveComplete",
    "RaiseCallbackError",
    "RediscoverCoordinator",
    "ReportError",
    "ReportFatalError",
    "RequestMetadata",
    "RunCallback",
    "SendHeartbeat",
    "StartFetching",
    "StopFetching",
]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """The fields of one ConsumerGroupHeartbeat request.

    None means null on the wire ("unchanged"). ``topic_partitions`` are the
    owned partitions by topic id: empty when joining, None when unchanged,
    the full owned set in a full heartbeat or an acknowledgement.
    ``subscribed_topic_names`` is sorted.
    """

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: frozenset[TopicIdPartition] | None = None

    def topic_partitions_by_id(self) -> dict[uuid.UUID, list[int]] | None:
        """``topic_partitions`` in the wire's shape: topic id -> sorted partitions."""
        if self.topic_partitions is None:
            return None
        out: dict[uuid.UUID, list[int]] = {}
        for tip in sorted(self.topic_partitions):
            out.setdefault(tip.topic_id, []).append(tip.partition)
        return out


@dataclass(frozen=True, slots=True)
class SendHeartbeat:
    """Send ``request``; report the outcome with ``seq``.

    ``leave`` marks the leave heartbeat (epoch -1 / -2): it is sent even if
    another heartbeat is in flight and is never retried.
    """

    seq: int
    request: HeartbeatRequest
    leave: bool = False


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
    :class:`~kgroup.membership.classic_events.CommitFailed`. ``offsets``,
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
class RequestMetadata:
    """Refresh metadata: these topic ids of the target assignment have no known name."""

    topic_ids: frozenset[uuid.UUID]


@dataclass(frozen=True, slots=True)
class RediscoverCoordinator:
    """Look the group coordinator up again; answer with CoordinatorRediscovered."""


@dataclass(frozen=True, slots=True)
class ReportError:
    """A non-fatal broker error to raise from poll; the member keeps going."""

    code: int
    name: str
    message: str | None


@dataclass(frozen=True, slots=True)
class ReportFatalError:
    """The member failed for good; raise a typed error from poll from now on.

    ``protocol_unsupported`` marks UNSUPPORTED_VERSION: with
    ``group.protocol=auto`` the runtime falls back to the classic protocol.
    """

    code: int
    name: str
    message: str | None
    protocol_unsupported: bool = False


@dataclass(frozen=True, slots=True)
class AssignorOnAssignment:
    """Forward to a new-protocol PartitionAssignor's on_assignment: once per epoch."""

    member_epoch: int
    assignment: frozenset[TopicIdPartition]


@dataclass(frozen=True, slots=True)
class LeaveComplete:
    """An unsubscribe finished: the leave heartbeat was answered, failed or not sendable."""


@dataclass(frozen=True, slots=True)
class Closed:
    """The close finished (``timed_out`` when its deadline cut it short)."""

    timed_out: bool = False


Action = (
    SendHeartbeat
    | StopFetching
    | StartFetching
    | CommitOffsets
    | RunCallback
    | RaiseCallbackError
    | RequestMetadata
    | RediscoverCoordinator
    | ReportError
    | ReportFatalError
    | AssignorOnAssignment
    | LeaveComplete
    | Closed
)
