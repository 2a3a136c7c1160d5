"""Helpers of the runtime tests (fixtures are in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio

from kgroup import AsyncConsumer
from kgroup.dataplane import Record
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

DEADLINE = 5.0
"""Seconds any one condition may take; the scenarios need a fraction of that."""


def consumer_config(broker: FakeBroker, group_id: str, **extra: Any) -> dict[str, Any]:
    """A consumer config with short retry and request timeouts, for fast tests."""
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": group_id,
        "retry.backoff.ms": 10,
        "retry.backoff.max.ms": 50,
        "request.timeout.ms": 2_000,
        **extra,
    }


def tps(topic: str, *partitions: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in partitions)


class Recorder:
    """A rebalance listener that records every callback, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append(("assigned", partitions))

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append(("revoked", partitions))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append(("lost", partitions))

    def of(self, kind: str) -> list[frozenset[TopicPartition]]:
        return [partitions for k, partitions in self.events if k == kind]

    def owned(self) -> frozenset[TopicPartition]:
        """What the application was told it owns: assigned minus revoked and lost."""
        owned: frozenset[TopicPartition] = frozenset()
        for kind, partitions in self.events:
            owned = owned | partitions if kind == "assigned" else owned - partitions
        return owned


def told(consumer: AsyncConsumer, listener: Recorder, expected: int | None = None) -> bool:
    """The listener's callbacks have caught up with the consumer's assignment
    (of ``expected`` partitions, if given): callbacks run in a later poll."""
    assignment = consumer.assignment()
    if expected is not None and len(assignment) != expected:
        return False
    return listener.owned() == assignment


async def drive(
    *consumers: AsyncConsumer,
    until: Callable[[], bool],
    timeout: float = DEADLINE,
    sink: Mapping[AsyncConsumer, list[Record]] | None = None,
) -> None:
    """Poll every consumer in turn (as their applications would) until ``until()`` holds.

    Records go to ``sink[consumer]`` when given. Raises TimeoutError at ``timeout``.
    """
    with anyio.fail_after(timeout):
        while not until():
            for consumer in consumers:
                batch = await consumer.consume(100, 0.01)
                if sink is not None:
                    sink[consumer].extend(batch)


class SharedLog:
    """One timeline of several consumers' callbacks: (consumer name, kind, partitions)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, frozenset[TopicPartition]]] = []

    def listener(self, name: str) -> NamedRecorder:
        return NamedRecorder(self, name)

    def index(self, name: str, kind: str, partition: TopicPartition) -> int:
        """Position of the first ``kind`` callback of ``name`` that included ``partition``."""
        return next(
            i
            for i, (who, what, parts) in enumerate(self.events)
            if who == name and what == kind and partition in parts
        )

    def of(self, name: str, kind: str) -> list[frozenset[TopicPartition]]:
        return [p for who, what, p in self.events if who == name and what == kind]


class NamedRecorder(Recorder):
    """A :class:`Recorder` that also writes to a :class:`SharedLog`."""

    def __init__(self, shared: SharedLog, name: str) -> None:
        super().__init__()
        self._shared = shared
        self._name = name

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        super().on_partitions_assigned(partitions)
        self._shared.events.append((self._name, "assigned", partitions))

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        super().on_partitions_revoked(partitions)
        self._shared.events.append((self._name, "revoked", partitions))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        super().on_partitions_lost(partitions)
        self._shared.events.append((self._name, "lost", partitions))


def produce_each(broker: FakeBroker, topic: str, partitions: int, count: int) -> None:
    """``count`` records in every partition, valued ``<partition>-<n>``."""
    for p in range(partitions):
        for n in range(count):
            broker.produce(topic, p, f"{p}-{n}".encode())


def next_offsets(records: list[Record]) -> dict[TopicPartition, int]:
    """Per partition, the offset after the last of ``records`` (what to commit)."""
    result: dict[TopicPartition, int] = {}
    for r in records:
        topic, partition, offset = r.topic(), r.partition(), r.offset()
        assert topic is not None
        assert partition is not None
        assert offset is not None
        tp = TopicPartition(topic, partition)
        result[tp] = max(result.get(tp, 0), offset + 1)
    return result
