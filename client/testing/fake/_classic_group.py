"""The fake broker's classic groups: the group model behind the broker's clock.

Each :class:`ClassicGroup` holds one
:class:`~kgroup.testing.groups.ClassicGroupCoordinator`, the model the
simulator runs too (JoinGroup rounds held until every member rejoined or the
rebalance timeout passed, the leader's SyncGroup, static members, session
timeouts, as Apache Kafka 4.x's coordinator). What is the fake's own: the
model's timers on the broker's clock (run by :meth:`ClassicGroup.expire`),
member ids made as Kafka makes them (the client id and a UUID), no initial
rebalance delay (``group.initial.rebalance.delay.ms`` 0, so that a test's
first round does not wait), and a read view for tests. No I/O and no kio:
:mod:`._cluster` decodes requests into the model's values and encodes its
answers.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping

from kgroup.membership import (
    ClassicAssignment,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kgroup.testing.fake._timers import Timers
from kgroup.testing.groups import (
    ClassicCoordinatorConfig,
    ClassicGroupCoordinator,
    ClassicGroupState,
)

__all__ = ["ClassicGroup", "ClassicState"]

ClassicState = ClassicGroupState
"""The classic group's states (the model's enum, under the fake's name)."""


class ClassicGroup:
    """One classic group of the fake broker.

    Requests and timers run under the broker's lock (``lock``); the views
    take it themselves, so a test may read them from any thread.
    """

    def __init__(self, group_id: str, *, lock: threading.RLock, now: float) -> None:
        self.group_id = group_id
        self._lock = lock
        self._timers = Timers(now)
        self._client_id = "consumer"
        self._removed: list[str] = []
        self.coordinator = ClassicGroupCoordinator(
            group_id,
            ClassicCoordinatorConfig(initial_rebalance_delay_ms=0),
            schedule=self._timers.schedule,
            clock=self._timers.clock,
            new_member_id=self._new_member_id,
            on_removed=lambda member_id, _why: self._removed.append(member_id),
        )

    def _new_member_id(self) -> str:
        return f"{self._client_id}-{uuid.uuid4()}"

    # ------------------------------------------------------------- requests

    def join(
        self,
        request: JoinGroupRequest,
        client_id: str,
        now: float,
        reply: Callable[[JoinGroupResponse], None],
    ) -> None:
        """Handle a JoinGroup; ``reply`` gets the answer, now or when the round completes."""
        self._timers.advance(now)
        self._client_id = client_id or "consumer"
        self.coordinator.join(request, reply)

    def sync(
        self, request: SyncGroupRequest, now: float, reply: Callable[[SyncGroupResponse], None]
    ) -> None:
        """Handle a SyncGroup; ``reply`` gets the answer, now or once the leader's arrives."""
        self._timers.advance(now)
        self.coordinator.sync(request, reply)

    def heartbeat(
        self, member_id: str, instance_id: str | None, generation_id: int, now: float
    ) -> int:
        """Handle a Heartbeat; the error code."""
        self._timers.advance(now)
        return self.coordinator.heartbeat(generation_id, member_id, instance_id)

    def leave(self, member_id: str, instance_id: str | None, now: float) -> int:
        """Handle one member of a LeaveGroup; the error code."""
        self._timers.advance(now)
        return self.coordinator.leave(member_id, instance_id)

    def commit_error(self, member_id: str, instance_id: str | None, generation: int) -> int:
        """The error for an OffsetCommit with this identity (0: accepted)."""
        return self.coordinator.commit_error(member_id, generation, instance_id)

    def remove(self, member_id: str, now: float) -> None:
        """Remove a member as if its session expired, and rebalance the rest."""
        self._timers.advance(now)
        self.coordinator.remove(member_id, "removed by the test")

    def expire(self, now: float) -> list[str]:
        """Run the model's timers due by ``now``; the ids of the members removed."""
        self._removed.clear()
        self._timers.run_due(now)
        return list(self._removed)

    # ------------------------------------------------------------------ views

    @property
    def members(self) -> Mapping[str, ClassicAssignment]:
        """Each member's assignment in the current generation, by member id."""
        with self._lock:
            return dict(self.coordinator.members)

    @property
    def state(self) -> ClassicGroupState:
        """Where the group stands in its rebalance."""
        with self._lock:
            return self.coordinator.state

    @property
    def generation_id(self) -> int:
        """The current generation."""
        with self._lock:
            return self.coordinator.generation

    @property
    def protocol_name(self) -> str | None:
        """The protocol (assignor) the last round chose."""
        with self._lock:
            return self.coordinator.protocol_name

    @property
    def leader(self) -> str | None:
        """The member id of the last round's leader."""
        with self._lock:
            return self.coordinator.leader
