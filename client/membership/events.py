"""Events: things that happened, fed to :meth:`ConsumerMember.handle`.

All events are frozen dataclasses. Heartbeat outcomes echo the ``seq`` of the
:class:`~kgroup.membership.actions.SendHeartbeat` they answer; callback and
commit outcomes echo the ``token`` of the action that asked for them. Outcomes
whose ``seq`` / ``token`` the member no longer waits for (an aborted
reconciliation, a request sent before a fence) are ignored.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

__all__ = [
    "CallbackCompleted",
    "CallbackKind",
    "CloseRequested",
    "CommitCompleted",
    "CoordinatorRediscovered",
    "Event",
    "FailureKind",
    "HeartbeatFailed",
    "HeartbeatResponse",
    "HeartbeatResponseReceived",
    "MetadataUpdated",
    "PollCalled",
    "SubscriptionChanged",
    "TimerTick",
    "Unsubscribe",
]


class CallbackKind(enum.Enum):
    """Which rebalance listener method a callback action asks for."""

    REVOKED = "on_partitions_revoked"
    ASSIGNED = "on_partitions_assigned"
    LOST = "on_partitions_lost"


class FailureKind(enum.Enum):
    """Why a heartbeat request got no response."""

    TIMEOUT = "timeout"
    DISCONNECTED = "disconnected"
    # The broker supports no version of ConsumerGroupHeartbeat (learned from
    # ApiVersions): the trigger of the classic fallback with group.protocol=auto.
    UNSUPPORTED_VERSION = "unsupported version"


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    """The fields of a ConsumerGroupHeartbeat response the member needs.

    ``assignment`` is None when the response carries no Assignment (no
    change); otherwise it is the complete target, topic id -> partitions.
    """

    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 5000
    assignment: Mapping[uuid.UUID, Collection[int]] | None = None


@dataclass(frozen=True, slots=True)
class SubscriptionChanged:
    """The application subscribed to topic names or a (RE2J) regex.

    No names and no pattern means "subscribed to nothing", as :class:`Unsubscribe`.
    """

    topics: frozenset[str] = frozenset()
    pattern: str | None = None


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """The application unsubscribed: release the assignment and leave."""


@dataclass(frozen=True, slots=True)
class PollCalled:
    """The application called poll (resets the max.poll.interval.ms timer)."""


@dataclass(frozen=True, slots=True)
class HeartbeatResponseReceived:
    """A response arrived for the heartbeat sent with ``seq``."""

    seq: int
    response: HeartbeatResponse


@dataclass(frozen=True, slots=True)
class HeartbeatFailed:
    """The heartbeat sent with ``seq`` got no response (transport error or timeout)."""

    seq: int
    kind: FailureKind
    detail: str = ""


@dataclass(frozen=True, slots=True)
class MetadataUpdated:
    """Topic ids and names learned from metadata (merged into what the member knows)."""

    topic_names: Mapping[uuid.UUID, str]


@dataclass(frozen=True, slots=True)
class CallbackCompleted:
    """The callback asked for with ``token`` returned (``error`` None) or raised."""

    kind: CallbackKind
    token: int
    error: BaseException | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class CommitCompleted:
    """The commit asked for with ``token`` succeeded (``error`` None) or failed for good."""

    token: int
    error: BaseException | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class CloseRequested:
    """The application is closing the consumer; give up waiting at ``deadline``."""

    deadline: float


@dataclass(frozen=True, slots=True)
class TimerTick:
    """A deadline from :meth:`ConsumerMember.next_deadline` was reached."""


@dataclass(frozen=True, slots=True)
class CoordinatorRediscovered:
    """After a RediscoverCoordinator action: the coordinator is known again."""


Event = (
    SubscriptionChanged
    | Unsubscribe
    | PollCalled
    | HeartbeatResponseReceived
    | HeartbeatFailed
    | MetadataUpdated
    | CallbackCompleted
    | CommitCompleted
    | CloseRequested
    | TimerTick
    | CoordinatorRediscovered
)
