"""What the group model reads of a cluster's topics.

The simulator's :class:`~kgroup.testing.sim.SimCluster` and the fake broker's
topics both answer it, so the coordinators need neither.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from kgroup.testing._topics import Topic
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = ["TopicCatalog"]


class TopicCatalog(Protocol):
    """Topics by name and by id; ``version`` changes whenever any topic does."""

    @property
    def version(self) -> int:
        """Grows with every change: a coordinator caches what it read until it moves."""
        ...

    def get(self, name: str) -> Topic | None:
        """The topic called ``name``, or None."""
        ...

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        """The topic with id ``topic_id``, or None."""
        ...

    def names(self) -> list[str]:
        """Every topic name, sorted."""
        ...

    def to_id(self, tp: TopicPartition) -> TopicIdPartition | None:
        """``tp`` by topic id, or None if the topic or partition does not exist."""
        ...

    def to_name(self, tip: TopicIdPartition) -> TopicPartition:
        """``tip`` by topic name (the topic must exist)."""
        ...
