"""Value types shared across kgroup's layers. All are frozen and hashable."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

__all__ = ["TopicIdPartition", "TopicPartition"]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A partition named by its topic's name."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True, order=True)
class TopicIdPartition:
    """A partition named by its topic's id, as the new protocol names them on the wire."""

    topic_id: uuid.UUID
    partition: int

    def __str__(self) -> str:
        return f"{self.topic_id}:{self.partition}"
