"""What both protocol sessions share: a member, its event queue, the split of its actions.

A session owns one member and the member's event queue. The driver feeds it
the events every member takes (:data:`~kgroup.runtime.interfaces.DriverEvent`)
and gets back, from :meth:`SessionBase.handle_next`, the actions every member
returns (:data:`~kgroup.runtime.interfaces.DriverAction`); the session itself
performs the rest — its own protocol's actions — in :meth:`SessionBase._perform`.

:class:`SessionBase` is protocol-neutral: the consumer protocol's and the
classic protocol's sessions each extend it, never each other.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Protocol, TypeVar

from kgroup.membership import TimerTick
from kgroup.runtime.events import EventQueue
from kgroup.runtime.interfaces import DRIVER_ACTIONS, DriverAction, DriverEvent, Host
from kgroup.telemetry.recorder import ConsumerTelemetry
from kgroup.types import TopicPartition

SESSION_MARGIN_MS = 250
"""How much sooner than the session timeout a member gives its session up.

Stopping its partitions takes the data plane up to one record wait (100 ms
while the group is settled, see ``kgroup.dataplane.librdkafka.IDLE_CHUNK``)
plus the unassign. Without a margin the member's timer, counted from when its
last successful heartbeat was sent, ran out only a round trip before the
broker's, and another member that heartbeated at once had started fetching
the partitions 34 ms before this one stopped (a CI run's fleet report, the
classic protocol, a member cut off from the coordinator).
"""

__all__ = ["FinishedCommit", "Member", "SessionBase"]

E = TypeVar("E")
A = TypeVar("A")
E_contra = TypeVar("E_contra", contravariant=True)
A_co = TypeVar("A_co", covariant=True)


class Member(Protocol[E_contra, A_co]):
    """A sans-IO member taking events ``E`` (and every driver event), returning actions ``A``."""

    @property
    def member_id(self) -> str: ...

    @property
    def assignment(self) -> frozenset[TopicPartition]: ...

    @property
    def closed(self) -> bool: ...

    @property
    def state(self) -> enum.Enum: ...

    def handle(self, event: DriverEvent | E_contra, now: float) -> Sequence[A_co]: ...

    def next_deadline(self) -> float | None: ...

    def poll_deadline(self) -> float | None: ...

    @property
    def session_expiry(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class FinishedCommit:
    """A commit a member asked for (``CommitOffsets``) ended."""

    token: int
    offsets: Mapping[TopicPartition, int]
    error: BaseException | None = field(compare=False)
    generation: int
    """The member's generation or epoch when the commit started."""


class SessionBase(Generic[E, A]):
    """Drives a :class:`Member` for a :class:`~kgroup.runtime.interfaces.Host`."""

    def __init__(self, host: Host, member: Member[E, A]) -> None:
        self._host = host
        self._member = member
        self._events: EventQueue[DriverEvent | E] = EventQueue(host.wake)
        # Heartbeat round trips, errors and fencing are seen here (the driver
        # sees neither the events nor the session's own actions).
        self._telemetry: ConsumerTelemetry | None = getattr(host, "telemetry", None)

    @property
    def member_id(self) -> str:
        """The member id."""
        return self._member.member_id

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The installed assignment (what commits may cover)."""
        return self._member.assignment

    @property
    def closed(self) -> bool:
        """The member is closed: the driver's loop ends."""
        return self._member.closed

    @property
    def state_name(self) -> str:
        """The member's state, for logs."""
        return self._member.state.name

    stable_state: ClassVar[enum.Enum]
    """The member's state of holding its assignment with no rebalance step under way."""

    @property
    def settled(self) -> bool:
        """The member holds its assignment and no rebalance step is under way."""
        return self._member.state is self.stable_state

    def post(self, event: DriverEvent | E) -> None:
        """Queue ``event`` for the member."""
        self._events.post(event)

    def has_events(self) -> bool:
        """Events wait for the member."""
        return bool(self._events)

    def next_deadline(self) -> float | None:
        """The member's next timer."""
        return self._member.next_deadline()

    def poll_deadline(self) -> float | None:
        """When the member's poll timer expires, or None (not in the group)."""
        return self._member.poll_deadline()

    def session_expiry(self) -> float | None:
        """When the member's session surely ran out unless a heartbeat succeeds first."""
        return self._member.session_expiry

    def handle_next(self, now: float) -> list[DriverAction]:
        """Feed the oldest event (a timer tick if none) to the member; perform its own actions.

        Returns the actions for the driver, in order.
        """
        event = self._events.pop()
        telemetry = self._telemetry
        if telemetry is not None and event is not None:
            telemetry.session_event(event)
        rest: list[DriverAction] = []
        for action in self._member.handle(TimerTick() if event is None else event, now):
            if isinstance(action, DRIVER_ACTIONS):
                rest.append(action)
            else:
                if telemetry is not None:
                    telemetry.session_action(action)
                self._perform(action)
        return rest

    def _perform(self, action: A) -> None:
        """Perform one of the member's own protocol's actions."""
        raise NotImplementedError

    def topics_deleted(self, topics: frozenset[str]) -> None:
        """A commit found ``topics`` deleted while the member owns partitions of them.

        Nothing by default: a consumer-protocol coordinator revokes them itself.
        """

    def topics_appeared(self, topics: frozenset[str]) -> None:
        """A subscribed topic among ``topics`` that was missing exists now.

        Nothing by default: a consumer-protocol coordinator assigns it itself.
        """

    def start(self) -> None:
        """The driver is connected: start background work (none by default)."""
