"""aiokafka's value types, as :mod:`kgroup.aiokafka` takes and returns them.

``TopicPartition`` and ``OffsetAndMetadata`` are named tuples as aiokafka's
are, so they compare and hash equal to aiokafka's own: a dict keyed by
either finds the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

from kgroup import types

__all__ = [
    "ConsumerRecord",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "TopicPartition",
]

KT = TypeVar("KT")
VT = TypeVar("VT")


class TopicPartition(NamedTuple):
    """A topic and partition (aiokafka's namedtuple)."""

    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    """An offset to commit with its metadata string."""

    offset: int
    metadata: str


class OffsetAndTimestamp(NamedTuple):
    """What ``offsets_for_times`` finds; ``timestamp`` is None (see docs/porting-aiokafka.md)."""

    offset: int
    timestamp: int | None


@dataclass(frozen=True, slots=True)
class ConsumerRecord(Generic[KT, VT]):
    """One record, with aiokafka's attributes."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: KT | None
    value: VT | None
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    headers: Sequence[tuple[str, bytes | None]]


def to_kgroup(tp: object, what: str) -> types.TopicPartition:
    """An aiokafka-style ``(topic, partition)`` tuple (either library's) as kgroup's."""
    if isinstance(tp, types.TopicPartition):
        return tp
    if (
        isinstance(tp, tuple)
        and len(tp) == 2
        and isinstance(tp[0], str)
        and isinstance(tp[1], int)
        and not isinstance(tp[1], bool)
    ):
        return types.TopicPartition(tp[0], tp[1])
    raise TypeError(f"{what}: expected a TopicPartition(topic, partition), got {tp!r}")


def from_kgroup(tp: types.TopicPartition) -> TopicPartition:
    return TopicPartition(tp.topic, tp.partition)
