"""The fake cluster's topics: names, ids and partition counts (created by the test)."""

from __future__ import annotations

import uuid

from kgroup.errors import KgroupError
from kgroup.testing._topics import Topic
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = ["FakeTopic", "Topics"]


# The fake broker's topics are the simulator's: one value type, two public names.
FakeTopic = Topic


class Topics:
    """Topics by name and by id. Not thread-safe: the broker's lock guards it.

    ``version`` grows with every change: the group model notices a subscribed
    topic that appeared, grew or went on a member's next heartbeat, as the
    broker's coordinator does.
    """

    def __init__(self) -> None:
        self.by_name: dict[str, FakeTopic] = {}
        self.by_id: dict[uuid.UUID, FakeTopic] = {}
        self.version = 0

    def create(self, name: str, partitions: int, topic_id: uuid.UUID | None = None) -> FakeTopic:
        """Create ``name``, or grow it to ``partitions`` (Kafka never shrinks a topic).

        Raises:
            KgroupError: an empty name, fewer than one partition, or fewer
                partitions than the topic already has.
        """
        if not name:
            raise KgroupError("a topic needs a name")
        if partitions < 1:
            raise KgroupError(f"topic {name!r} needs at least one partition, got {partitions}")
        known = self.by_name.get(name)
        if known is not None:
            if partitions < known.partitions:
                raise KgroupError(
                    f"topic {name!r} has {known.partitions} partitions; Kafka cannot shrink it "
                    f"to {partitions}"
                )
            topic = FakeTopic(name, known.topic_id, partitions)
        else:
            topic = FakeTopic(name, topic_id or uuid.uuid4(), partitions)
        self.by_name[name] = topic
        self.by_id[topic.topic_id] = topic
        self.version += 1
        return topic

    def delete(self, name: str) -> FakeTopic | None:
        """Forget topic ``name`` (its id becomes unknown); the topic, if there was one."""
        topic = self.by_name.pop(name, None)
        if topic is not None:
            self.by_id.pop(topic.topic_id, None)
            self.version += 1
        return topic

    def name_of(self, partition: TopicIdPartition) -> TopicPartition | None:
        """The named form of ``partition``, None if its topic is unknown."""
        topic = self.by_id.get(partition.topic_id)
        return None if topic is None else TopicPartition(topic.name, partition.partition)
