"""The simulated cluster's topic metadata: names, ids and partition counts."""

from __future__ import annotations

import random
import uuid

from kgroup.testing._topics import Topic
from kgroup.testing.sim.errors import ScenarioError
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = ["SimCluster", "Topic"]


class SimCluster:
    """Topics by name and by id; ``version`` grows with every change.

    Topic ids come from the simulation's seeded random source, so a run is
    reproducible. Topics are never deleted (a recreated topic would need a new
    id, which the simulator does not model yet).
    """

    __slots__ = ("_by_id", "_by_name", "_rng", "version")

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self.version = 0

    def create(self, name: str, partitions: int) -> Topic:
        """Create topic ``name`` with ``partitions`` partitions."""
        if not name:
            raise ScenarioError("a topic needs a non-empty name")
        if partitions < 1:
            raise ScenarioError(f"topic {name!r} needs at least one partition, got {partitions}")
        if name in self._by_name:
            raise ScenarioError(f"topic {name!r} exists already; use add_partitions to grow it")
        topic = Topic(name, uuid.UUID(int=self._rng.getrandbits(128), version=4), partitions)
        self._by_name[name] = topic
        self._by_id[topic.topic_id] = topic
        self.version += 1
        return topic

    def add_partitions(self, name: str, count: int) -> Topic:
        """Grow topic ``name`` by ``count`` partitions (Kafka never shrinks a topic)."""
        old = self._by_name.get(name)
        if old is None:
            raise ScenarioError(f"cannot add partitions to unknown topic {name!r}")
        if count < 1:
            raise ScenarioError(f"add_partitions needs a positive count, got {count}")
        topic = Topic(name, old.topic_id, old.partitions + count)
        self._by_name[name] = topic
        self._by_id[topic.topic_id] = topic
        self.version += 1
        return topic

    def get(self, name: str) -> Topic | None:
        """The topic called ``name``, or None."""
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        """The topic with id ``topic_id``, or None."""
        return self._by_id.get(topic_id)

    def names(self) -> list[str]:
        """Every topic name, sorted."""
        return sorted(self._by_name)

    def topics(self) -> list[Topic]:
        """Every topic, sorted by name."""
        return [self._by_name[n] for n in sorted(self._by_name)]

    def id_to_name(self) -> dict[uuid.UUID, str]:
        """Topic id -> name, for every topic (what a metadata response tells a member)."""
        return {t.topic_id: t.name for t in self._by_id.values()}

    def to_id(self, tp: TopicPartition) -> TopicIdPartition | None:
        """``tp`` by topic id, or None if the topic or partition does not exist."""
        topic = self._by_name.get(tp.topic)
        if topic is None or not 0 <= tp.partition < topic.partitions:
            return None
        return TopicIdPartition(topic.topic_id, tp.partition)

    def to_name(self, tip: TopicIdPartition) -> TopicPartition:
        """``tip`` by topic name (the topic must exist)."""
        return TopicPartition(self._by_id[tip.topic_id].name, tip.partition)
