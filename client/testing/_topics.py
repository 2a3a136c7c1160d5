"""A topic as the in-process clusters model it: the fake broker's and the simulator's."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kgroup.types import TopicIdPartition

__all__ = ["Topic"]


@dataclass(frozen=True, slots=True)
class Topic:
    """One topic of an in-process cluster (:mod:`kgroup.testing.fake`, :mod:`kgroup.testing.sim`).

    Exported as ``kgroup.testing.fake.FakeTopic`` and ``kgroup.testing.sim.Topic``.
    """

    name: str
    topic_id: uuid.UUID
    partitions: int

    def id_partitions(self) -> frozenset[TopicIdPartition]:
        """Every partition of the topic, by id."""
        return frozenset(TopicIdPartition(self.topic_id, p) for p in range(self.partitions))
