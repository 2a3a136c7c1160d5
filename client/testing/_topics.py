"""Topics and partitions as the in-process clusters (fake broker, simulator) model them."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from kgroup.types import TopicIdPartition

__all__ = ["Topic", "by_topic_id"]


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


def by_topic_id(partitions: Iterable[TopicIdPartition]) -> dict[uuid.UUID, frozenset[int]]:
    """``partitions`` grouped by topic: topic id -> partition numbers.

    The topics come in ascending (topic id, partition) order of their partitions,
    whatever the order of ``partitions``: a set's order changes from one process
    to the next (string hashing), and an assignor that reads the topics in the
    order given must not (a simulator seed has to replay the same in any process).
    """
    grouped: dict[uuid.UUID, set[int]] = {}
    for tip in sorted(partitions):
        grouped.setdefault(tip.topic_id, set()).add(tip.partition)
    return {t: frozenset(ps) for t, ps in grouped.items()}
