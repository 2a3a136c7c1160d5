"""Events both members take: things that happened, fed to ``handle(event, now)``.

All events are frozen dataclasses. Request outcomes echo the ``seq`` of the
action that sent the request; callback and commit outcomes echo the ``token``
of the action that asked for them. Outcomes whose ``seq`` / ``token`` a member
no longer waits for (an aborted reconciliation, a request of an abandoned
round, a request sent before a fence) are ignored.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Generic, TypeVar

# Part of the members' event vocabulary (CallbackCompleted.kind), defined with
# the public values so that the listener can name it without importing us.
from kgroup.types import CallbackKind

__all__ = [
    "CallbackCompleted",
    "CallbackKind",
    "CloseRequested",
    "CommitCompleted",
    "CommonEvent",
    "CoordinatorRediscovered",
    "ErrorCodeReceived",
    "FailureKind",
    "PollCalled",
    "RejoinRequested",
    "RequestFailed",
    "ResponseReceived",
    "SubscriptionChanged",
    "TimerTick",
    "Unsubscribe",
]


class FailureKind(enum.Enum):
    """Why a request got no response."""

    TIMEOUT = "timeout"
    DISCONNECTED = "disconnected"
    # The broker supports no version of the API (learned from ApiVersions); for
    # ConsumerGroupHeartbeat the trigger of the classic fallback of group.protocol=auto.
    UNSUPPORTED_VERSION = "unsupported version"


@dataclass(frozen=True, slots=True)
class SubscriptionChanged:
    """The application subscribed to topic names or a (RE2J) regex.

    No names and no pattern means "subscribed to nothing", as :class:`Unsubscribe`.
    The classic member takes topic names only: the runtime resolves a pattern
    against metadata and reports the matching names.
    """

    topics: frozenset[str] = frozenset()
    pattern: str | None = None


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """The application unsubscribed: release the assignment and leave."""


@dataclass(frozen=True, slots=True)
class RejoinRequested:
    """The group looks stuck: join again so that the coordinator assigns (``runtime.liveness``).

    ``as_new``: partitions of the subscription are owned by nobody in a settled
    group. A settled member leaves for good (epoch -1 / LeaveGroup, a static
    member too) and joins again as a new member, which makes the coordinator
    compute a new assignment; one that owns partitions releases them first, as
    for a close (commit, revoke callback). Apache Kafka leaves a group so when a
    static member's replacement converts a classic group between the two
    rounds of a cooperative rebalance. The runtime asks a member that owns
    partitions only when no member holding fewer repaired the group.

    Not ``as_new``: the group's assignment waits for a group epoch that nobody
    asks the coordinator to assign (a converted group with classic members
    only). A settled classic member joins again, keeping its member id; a
    consumer-protocol member ignores it (its heartbeats ask already).
    """

    reason: str
    as_new: bool = True


@dataclass(frozen=True, slots=True)
class PollCalled:
    """The application called poll (resets the max.poll.interval.ms timer).

    ``at``: when it did, on the member's clock, if it was before this event is
    handled (a runtime that passes on polls it noted earlier); None: now.
    """

    at: float | None = None


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """The coordinator request sent with ``seq`` got no response (transport error or timeout).

    The new-protocol member knows it as
    :data:`~kgroup.membership.consumer.HeartbeatFailed` (its only request is
    the heartbeat); the classic member's requests are JoinGroup, SyncGroup,
    Heartbeat and LeaveGroup.
    """

    seq: int
    kind: FailureKind
    detail: str = ""


_Response = TypeVar("_Response")


@dataclass(frozen=True, slots=True)
class ResponseReceived(Generic[_Response]):
    """The base of every "a response arrived for the request sent with ``seq``" event.

    Each protocol's response events subclass it with their parsed response
    type (and add fields where the API has more to say); a request that got
    no response is :class:`RequestFailed` instead, with the same ``seq``.
    """

    seq: int
    response: _Response


@dataclass(frozen=True, slots=True)
class ErrorCodeReceived:
    """The base of the response events whose response is an error code alone (0: success)."""

    seq: int
    error_code: int = 0


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
    """A deadline from the member's ``next_deadline()`` was reached."""


@dataclass(frozen=True, slots=True)
class CoordinatorRediscovered:
    """After a RediscoverCoordinator action: the coordinator is known again."""


CommonEvent = (
    SubscriptionChanged
    | Unsubscribe
    | RejoinRequested
    | PollCalled
    | RequestFailed
    | CallbackCompleted
    | CommitCompleted
    | CloseRequested
    | TimerTick
    | CoordinatorRediscovered
)
"""The events both members take."""
