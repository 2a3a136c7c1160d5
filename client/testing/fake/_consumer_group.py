"""The fake broker's consumer-protocol groups: the group model behind the broker's clock.

Each :class:`ConsumerGroup` holds one
:class:`~kgroup.testing.groups.ConsumerGroupCoordinator`, the model the
simulator runs too (epochs, target assignment, reconciliation, timeouts, as
Apache Kafka 4.x's coordinator). What is the fake's own is only what the wire
and the broker's real time need: the coordinator's timers kept in a heap that
:meth:`ConsumerGroup.expire` runs on the broker's sweep, the fake's topics
read through the model's :class:`~kgroup.testing.groups.TopicCatalog`, the
client id a member sent (ConsumerGroupDescribe shows it), and a read view
for tests (:attr:`ConsumerGroup.members`, the epochs, the target). No I/O and
no kio: :mod:`._cluster` translates requests into these calls.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kgroup.membership import HeartbeatRequest, HeartbeatResponse
from kgroup.testing._topics import Topic
from kgroup.testing.fake._timers import Timers
from kgroup.testing.fake._topics import Topics
from kgroup.testing.groups import (
    AssignmentState,
    ConsumerGroupCoordinator,
    CoordinatorConfig,
    ErrorCode,
    MemberRecord,
)
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = ["ConsumerGroup", "ConsumerMember"]

log = logging.getLogger("kgroup.testing.fake")


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    """One member as the coordinator keeps it, at the moment it was read.

    ``revoking`` is what the member must still give up (the coordinator's
    pending revocation); ``state`` where it stands in its reconciliation.
    """

    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    subscribed_names: tuple[str, ...]
    regex: str | None
    epoch: int
    previous_epoch: int
    state: AssignmentState
    assigned: frozenset[TopicIdPartition]
    revoking: frozenset[TopicIdPartition]

    @classmethod
    def of(cls, rec: MemberRecord, client_id: str) -> ConsumerMember:
        """The view of ``rec``."""
        return cls(
            member_id=rec.member_id,
            instance_id=rec.instance_id,
            rack_id=rec.rack_id,
            client_id=client_id,
            subscribed_names=rec.subscribed_topic_names,
            regex=rec.subscribed_topic_regex,
            epoch=rec.epoch,
            previous_epoch=rec.previous_epoch,
            state=rec.state,
            assigned=rec.assigned,
            revoking=rec.pending_revocation,
        )


class _Catalog:
    """The fake's topics as the group model reads them."""

    __slots__ = ("_topics",)

    def __init__(self, topics: Topics) -> None:
        self._topics = topics

    @property
    def version(self) -> int:
        return self._topics.version

    def get(self, name: str) -> Topic | None:
        return self._topics.by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._topics.by_id.get(topic_id)

    def names(self) -> list[str]:
        return sorted(self._topics.by_name)

    def to_id(self, tp: TopicPartition) -> TopicIdPartition | None:
        topic = self._topics.by_name.get(tp.topic)
        if topic is None or not 0 <= tp.partition < topic.partitions:
            return None
        return TopicIdPartition(topic.topic_id, tp.partition)

    def to_name(self, tip: TopicIdPartition) -> TopicPartition:
        return TopicPartition(self._topics.by_id[tip.topic_id].name, tip.partition)


class _Observer:
    """What the fake keeps of the model's notices: the members removed by its timers."""

    def __init__(self) -> None:
        self.removed_ids: list[str] = []

    def released(self, member_id: str, partitions: frozenset[TopicIdPartition], why: str) -> None:
        pass

    def removed(self, member_id: str, why: str) -> None:
        self.removed_ids.append(member_id)
        log.debug("member %s removed: %s", member_id, why)

    def commit_accepted(
        self, record: MemberRecord, epoch: int, partitions: frozenset[TopicPartition]
    ) -> None:
        pass

    def illegal_assignment(self, message: str) -> None:
        # The fake runs the built-in server assignors only: this is a model bug.
        log.error("the fake's server assignor broke the rules: %s", message)

    def note(self, text: str) -> None:
        pass


class ConsumerGroup:
    """One consumer-protocol group of the fake broker.

    Reads and writes happen under the broker's lock (``lock``); the views below
    take it themselves, so a test may read them from any thread.
    """

    def __init__(
        self,
        group_id: str,
        *,
        heartbeat_interval_ms: int,
        session_timeout_ms: int,
        topics: Topics,
        lock: threading.RLock,
        now: float,
    ) -> None:
        self.group_id = group_id
        self._lock = lock
        self._timers = Timers(now)
        self._observer = _Observer()
        self._client_ids: dict[str, str] = {}
        self.coordinator = ConsumerGroupCoordinator(
            group_id,
            CoordinatorConfig(
                heartbeat_interval_ms=heartbeat_interval_ms,
                session_timeout_ms=session_timeout_ms,
                rejoin_starts_over=True,
            ),
            _Catalog(topics),
            schedule=self._timers.schedule,
            clock=self._timers.clock,
            observer=self._observer,
        )

    # ----------------------------------------------------------------- timers

    def expire(self, now: float) -> list[str]:
        """Run the coordinator's timers due by ``now``; the ids of the members removed."""
        self._observer.removed_ids.clear()
        self._timers.run_due(now)
        gone = list(self._observer.removed_ids)
        self._forget_client_ids()
        return gone

    # ------------------------------------------------------------- requests

    def heartbeat(self, request: HeartbeatRequest, client_id: str, now: float) -> HeartbeatResponse:
        """Handle one ConsumerGroupHeartbeat at ``now`` (the broker's clock, seconds)."""
        self._timers.advance(now)
        response = self.coordinator.heartbeat(request, self._timers.now)
        if response.error_code == ErrorCode.NONE and request.member_epoch >= 0:
            self._client_ids[request.member_id] = client_id
        self._forget_client_ids()
        return response

    def commit_error(self, member_id: str, member_epoch: int) -> ErrorCode:
        """The error of an OffsetCommit from ``member_id`` at ``member_epoch``."""
        return self.coordinator.commit_error(member_id, member_epoch)

    def fetch_error(self, member_id: str, member_epoch: int) -> ErrorCode:
        """The error of an OffsetFetch naming ``member_id`` at ``member_epoch``."""
        return self.coordinator.fetch_error(member_id, member_epoch)

    def remove(self, member_id: str) -> None:
        """Remove a member as if its session expired (it learns on its next heartbeat)."""
        self.coordinator.remove(member_id, "removed by the test")
        self._forget_client_ids()

    def _forget_client_ids(self) -> None:
        members = self.coordinator.members
        for gone in [m for m in self._client_ids if m not in members]:
            del self._client_ids[gone]

    # ------------------------------------------------------------------ views

    @property
    def members(self) -> dict[str, ConsumerMember]:
        """Every member, by member id, as it stands now."""
        with self._lock:
            return {
                mid: ConsumerMember.of(rec, self._client_ids.get(mid, ""))
                for mid, rec in self.coordinator.members.items()
            }

    def member_epoch(self, member_id: str) -> int | None:
        """The epoch of ``member_id``, None if it is not a member."""
        with self._lock:
            rec = self.coordinator.members.get(member_id)
            return None if rec is None else rec.epoch

    @property
    def state(self) -> str:
        """``Empty``, ``Assigning``, ``Reconciling`` or ``Stable``, as ConsumerGroupDescribe."""
        with self._lock:
            return self.coordinator.state

    @property
    def epoch(self) -> int:
        """The group epoch."""
        with self._lock:
            return self.coordinator.group_epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        with self._lock:
            self.coordinator.group_epoch = value

    @property
    def assignment_epoch(self) -> int:
        """The epoch of the target assignment."""
        with self._lock:
            return self.coordinator.assignment_epoch

    @assignment_epoch.setter
    def assignment_epoch(self, value: int) -> None:
        with self._lock:
            self.coordinator.assignment_epoch = value

    @property
    def target(self) -> Mapping[str, frozenset[TopicIdPartition]]:
        """The target assignment, by member id."""
        with self._lock:
            return {mid: self.coordinator.target(mid) for mid in self.coordinator.members}

    @target.setter
    def target(self, value: Mapping[str, frozenset[TopicIdPartition]]) -> None:
        # A test staging a target no assignor computed (what a conversion leaves).
        with self._lock:
            self.coordinator.replace_targets(value)
