"""Mixed classic groups: kgroup members with confluent-kafka and kafka-python members.

All members of a group must advertise one common assignor name; each case
starts its designated leader first (the coordinator keeps the first member
as leader), so kgroup, librdkafka and kafka-python each lead a
cooperative-sticky group, and librdkafka also leads an eager (range) one.
Everyone converges to a complete, disjoint assignment and every record is
consumed at least once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from helpers import (
    EventLog,
    PollingThread,
    Runner,
    classic_conf,
    partitions_of,
    produce,
    text,
    wait_until,
)
from kafka import KafkaConsumer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor

from kgroup import TopicPartition
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration

_KAFKA_PYTHON_ASSIGNORS: dict[str, Any] = {
    "range": RangePartitionAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}


class _Peer(PollingThread):
    """A consumer written by others, polling in its own thread."""

    def __init__(
        self,
        name: str,
        poll: Callable[[], list[str]],
        assignment: Callable[[], Any],
        close: Callable[[], None],
    ) -> None:
        super().__init__(name, "peer")
        self.values: list[str] = []
        self.assigned: frozenset[TopicPartition] = frozenset()
        self._poll, self._assignment, self._close = poll, assignment, close
        self.start()

    def poll_once(self) -> None:
        self.values.extend(self._poll())
        self.assigned = frozenset(
            TopicPartition(tp.topic, tp.partition) for tp in self._assignment()
        )

    def close_consumer(self) -> None:
        self._close()

    def assignment(self) -> frozenset[TopicPartition]:
        return self.assigned


def _confluent(bootstrap: str, group: str, topic: str, strategy: str) -> _Peer:
    consumer = ConfluentConsumer(classic_conf(bootstrap, group, strategy))
    consumer.subscribe([topic])

    def poll() -> list[str]:
        return [text(m) for m in consumer.consume(100, 0.2) if m.error() is None]

    return _Peer("confluent", poll, consumer.assignment, consumer.close)


def _kafka_python(bootstrap: str, group: str, topic: str, strategy: str) -> _Peer:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        partition_assignment_strategy=[_KAFKA_PYTHON_ASSIGNORS[strategy]],
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )

    def poll() -> list[str]:
        batches = consumer.poll(timeout_ms=200)
        return [r.value.decode() for records in batches.values() for r in records]

    return _Peer("kafka-python", poll, consumer.assignment, consumer.close)


@pytest.mark.parametrize(
    ("leader", "strategy"),
    [
        ("kgroup", "cooperative-sticky"),
        ("confluent", "cooperative-sticky"),
        ("confluent", "range"),
        ("kafka-python", "cooperative-sticky"),
    ],
)
def test_mixed_group_converges_and_consumes_everything(
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    leader: str,
    strategy: str,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=6)
    group = make_group_id()
    first = produce(bootstrap, topic, 6, 300)
    log = EventLog()
    kgroup_conf = classic_conf(bootstrap, group, strategy)
    starters: dict[str, Callable[[], Any]] = {
        "kgroup": lambda: Runner(kgroup_conf, [topic], log, "kgroup-1"),
        "confluent": lambda: _confluent(bootstrap, group, topic, strategy),
        "kafka-python": lambda: _kafka_python(bootstrap, group, topic, strategy),
    }
    order = [leader] + [name for name in starters if name != leader]
    members: list[Any] = []
    try:
        members.append(starters[order[0]]())
        wait_until(
            lambda: members[0].assignment() == partitions_of(topic, 6), 30, f"{leader} leads"
        )
        for name in order[1:]:
            members.append(starters[name]())
        members.append(Runner(kgroup_conf, [topic], log, "kgroup-2"))

        def converged() -> bool:
            seen = [tp for m in members for tp in m.assignment()]
            return (
                len(seen) == len(set(seen)) == 6
                and set(seen) == partitions_of(topic, 6)
                and all(m.assignment() for m in members)
            )

        wait_until(converged, 60, "four members of three clients converged")
        second = produce(bootstrap, topic, 6, 300, start=300)
        wanted = first | second
        wait_until(
            lambda: wanted <= set().union(*(set(m.values) for m in members)),
            30,
            "every record consumed at least once",
        )
        time.sleep(0.2)
    finally:
        for member in members:
            member.stop()
