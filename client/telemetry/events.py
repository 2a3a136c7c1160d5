"""The telemetry event schema: typed, frozen, versioned.

An event is a :class:`TelemetryEvent`: an :class:`EventHeader` (who emitted it
and when) and a body, one frozen dataclass per :class:`EventKind`. Bodies and
the header share no field names, so the JSON form (see
:mod:`kgroup.telemetry.codec`) is one flat object.

Versioning: :data:`SCHEMA_VERSION` is written into every event (``"v"``). A
version only ever *adds* fields or kinds; a reader ignores fields it does not
know and refuses an event whose version is newer than its own, so nothing is
silently misread. Kinds are a closed enum (a reader must know what an event
means); states, triggers and error names are open strings, because they come
from two protocol machines and the broker's error table, which grow.

Times: ``ts`` is the wall clock (Unix seconds, float) and is what orders events
of different processes; ``mono`` is the emitting process's monotonic clock, for
exact durations within one process. Durations and latencies are seconds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

from kgroup.types import TopicPartition

__all__ = [
    "BODY_TYPES",
    "SCHEMA_VERSION",
    "CallbackCompleted",
    "CallbackKind",
    "CommitCompleted",
    "CommittedOffset",
    "EpochChanged",
    "EventBody",
    "EventHeader",
    "EventKind",
    "Fenced",
    "FetchStarted",
    "FetchStopped",
    "HeartbeatFailed",
    "LeaveReason",
    "MemberJoined",
    "MemberLeft",
    "PartitionsAssigned",
    "PartitionsLost",
    "PartitionsRevoked",
    "RebalanceEnded",
    "RebalanceStarted",
    "StateChanged",
    "StopReason",
    "TelemetryEvent",
    "TelemetryProtocol",
]

SCHEMA_VERSION = 1
"""The version of the event schema this kgroup writes and the newest it reads."""


class EventKind(enum.Enum):
    """What happened. The value is the ``kind`` field of the JSON form."""

    MEMBER_JOINED = "member_joined"
    MEMBER_LEFT = "member_left"
    STATE_CHANGED = "state_changed"
    EPOCH_CHANGED = "epoch_changed"
    PARTITIONS_ASSIGNED = "partitions_assigned"
    PARTITIONS_REVOKED = "partitions_revoked"
    PARTITIONS_LOST = "partitions_lost"
    FETCH_STARTED = "fetch_started"
    FETCH_STOPPED = "fetch_stopped"
    COMMIT = "commit"
    HEARTBEAT_ERROR = "heartbeat_error"
    FENCED = "fenced"
    CALLBACK = "callback"
    REBALANCE_STARTED = "rebalance_started"
    REBALANCE_ENDED = "rebalance_ended"


class TelemetryProtocol(enum.Enum):
    """The group protocol the member actually speaks (never ``auto``)."""

    CONSUMER = "consumer"
    CLASSIC = "classic"


class StopReason(enum.Enum):
    """Why a member stopped fetching partitions."""

    REVOKED = "revoked"
    """Reconciliation took them away (another member is to get them)."""
    LOST = "lost"
    """Fenced, session expired or poll timeout: the member may no longer own them."""
    CLOSED = "closed"
    """The member is closing or unsubscribing."""


class LeaveReason(enum.Enum):
    """Why a member left the group."""

    CLOSED = "closed"
    UNSUBSCRIBED = "unsubscribed"
    POLL_TIMEOUT = "poll_timeout"
    FENCED = "fenced"
    FATAL = "fatal"


class CallbackKind(enum.Enum):
    """Which rebalance listener callback ran."""

    ASSIGNED = "on_partitions_assigned"
    REVOKED = "on_partitions_revoked"
    LOST = "on_partitions_lost"


@dataclass(frozen=True, slots=True, kw_only=True)
class EventHeader:
    """Who emitted an event, and when."""

    ts: float
    """Wall clock, Unix seconds."""
    mono: float
    """The emitting process's monotonic clock, seconds."""
    seq: int
    """Per-emitter sequence number from 0; a gap means the sink dropped events."""
    group: str
    member_id: str
    """The member id at the time of the event; empty before the member has one."""
    instance_id: str | None
    """``group.instance.id`` of a static member, else ``None``."""
    client_id: str
    host: str
    pid: int
    protocol: TelemetryProtocol


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One partition's offset in a commit."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberJoined:
    """The member got a member id and a first epoch (generation) from the coordinator."""

    KIND: ClassVar[EventKind] = EventKind.MEMBER_JOINED
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberLeft:
    """The member left the group (sent its leave, or was removed by fencing)."""

    KIND: ClassVar[EventKind] = EventKind.MEMBER_LEFT
    reason: LeaveReason
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StateChanged:
    """The membership state machine moved; states and triggers are the machine's enum names."""

    KIND: ClassVar[EventKind] = EventKind.STATE_CHANGED
    old_state: str
    new_state: str
    trigger: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochChanged:
    """The member epoch (new protocol) or generation (classic) changed."""

    KIND: ClassVar[EventKind] = EventKind.EPOCH_CHANGED
    old_epoch: int
    new_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _PartitionsAtEpoch:
    """The fields of every body about a set of partitions at an epoch (a base, no kind)."""

    partitions: tuple[TopicPartition, ...]
    epoch: int


# The bodies below differ from their base only in their kind (and docs); each
# is its own class so that events of different kinds never compare equal.


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsAssigned(_PartitionsAtEpoch):
    """Partitions added to the member's assignment at ``epoch``."""

    KIND: ClassVar[EventKind] = EventKind.PARTITIONS_ASSIGNED


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsRevoked(_PartitionsAtEpoch):
    """Partitions removed from the member's assignment by reconciliation, at ``epoch``."""

    KIND: ClassVar[EventKind] = EventKind.PARTITIONS_REVOKED


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsLost(_PartitionsAtEpoch):
    """Partitions the member gave up without a hand-over (fenced, session expired)."""

    KIND: ClassVar[EventKind] = EventKind.PARTITIONS_LOST
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchStarted(_PartitionsAtEpoch):
    """The data plane started fetching these partitions (added to librdkafka's assignment).

    Pausing does not stop fetching in this sense: a paused partition is still
    owned and resumes without a hand-over.
    """

    KIND: ClassVar[EventKind] = EventKind.FETCH_STARTED


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchStopped(_PartitionsAtEpoch):
    """The data plane stopped fetching these partitions (removed from librdkafka's assignment)."""

    KIND: ClassVar[EventKind] = EventKind.FETCH_STOPPED
    reason: StopReason


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitCompleted:
    """An offset commit finished; ``error`` is ``None`` when it succeeded."""

    KIND: ClassVar[EventKind] = EventKind.COMMIT
    offsets: tuple[CommittedOffset, ...]
    epoch: int
    latency_s: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the commit succeeded."""
        return self.error is None


@dataclass(frozen=True, slots=True, kw_only=True)
class _ErrorAtEpoch:
    """The fields of every body about an error the coordinator answered (a base, no kind)."""

    error: str
    """The broker's error name (``COORDINATOR_NOT_AVAILABLE``), or kgroup's name of a
    failure with no answer (``TIMEOUT``, ``DISCONNECTED``)."""
    error_code: int | None
    """Kafka's error code; None when there was no answer."""
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatFailed(_ErrorAtEpoch):
    """A heartbeat (or JoinGroup / SyncGroup) got an error, or no answer."""

    KIND: ClassVar[EventKind] = EventKind.HEARTBEAT_ERROR
    retriable: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Fenced(_ErrorAtEpoch):
    """The coordinator fenced the member; its partitions are lost."""

    KIND: ClassVar[EventKind] = EventKind.FENCED


@dataclass(frozen=True, slots=True, kw_only=True)
class CallbackCompleted:
    """A rebalance listener callback returned (or raised: ``error`` names the exception)."""

    KIND: ClassVar[EventKind] = EventKind.CALLBACK
    callback: CallbackKind
    partitions: tuple[TopicPartition, ...]
    duration_s: float
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceStarted:
    """The member's assignment is about to change, or it (re)joins.

    ``trigger`` is an open string; kgroup writes ``join``, ``rejoin``,
    ``assignment_changed``, ``subscription_changed``, ``fenced``,
    ``poll_timeout``.
    """

    KIND: ClassVar[EventKind] = EventKind.REBALANCE_STARTED
    trigger: str
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceEnded:
    """The member finished reconciling (``error`` set if the rebalance failed)."""

    KIND: ClassVar[EventKind] = EventKind.REBALANCE_ENDED
    epoch: int
    duration_s: float
    error: str | None = None


EventBody = (
    MemberJoined
    | MemberLeft
    | StateChanged
    | EpochChanged
    | PartitionsAssigned
    | PartitionsRevoked
    | PartitionsLost
    | FetchStarted
    | FetchStopped
    | CommitCompleted
    | HeartbeatFailed
    | Fenced
    | CallbackCompleted
    | RebalanceStarted
    | RebalanceEnded
)
"""Any event body."""

BODY_TYPES: dict[EventKind, type[EventBody]] = {
    cls.KIND: cls
    for cls in (
        MemberJoined,
        MemberLeft,
        StateChanged,
        EpochChanged,
        PartitionsAssigned,
        PartitionsRevoked,
        PartitionsLost,
        FetchStarted,
        FetchStopped,
        CommitCompleted,
        HeartbeatFailed,
        Fenced,
        CallbackCompleted,
        RebalanceStarted,
        RebalanceEnded,
    )
}
"""The body class of every kind."""


@dataclass(frozen=True, slots=True)
class TelemetryEvent:
    """One telemetry event: who and when (``header``), what (``body``)."""

    header: EventHeader
    body: EventBody

    @property
    def kind(self) -> EventKind:
        """The kind of the body."""
        return self.body.KIND
