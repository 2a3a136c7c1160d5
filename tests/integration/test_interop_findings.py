"""Where kgroup behaves differently from the Java client and librdkafka (found by the interop work).

Each finding is a test stating the behaviour the other clients have, with the
peers' behaviour checked by a plain test next to it. A finding kgroup does not
meet yet is marked ``xfail(strict=True)`` so that its fix is noticed (XPASS).
Found so far: a ``pause()`` from ``on_partitions_assigned`` was ignored (fixed).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer as CkConsumer
from helpers import consumer_conf, produce

import kgroup
from kgroup import TopicPartition
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration


def test_kgroup_pause_in_on_partitions_assigned_holds_the_partitions(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=3)
    produce(bootstrap, topic, 3, 30)
    config = consumer_conf(bootstrap, make_group_id("pause-in-assign"))
    assigned: list[frozenset[TopicPartition]] = []
    with kgroup.Consumer(config) as consumer:

        class PauseOnAssign:
            def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
                consumer.pause(partitions)
                assigned.append(partitions)

        consumer.subscribe([topic], PauseOnAssign())
        handed: list[Any] = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            handed.extend(consumer.consume(100, 0.2))
        assert frozenset().union(*assigned) == {TopicPartition(topic, p) for p in range(3)}
        assert handed == [], f"{len(handed)} records handed out from paused partitions"


def test_librdkafka_pause_in_on_assign_holds_the_partitions(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    """The control: librdkafka (new protocol) honours a pause made in its assign callback."""
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=3)
    produce(bootstrap, topic, 3, 30)
    consumer = CkConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": make_group_id("pause-in-assign-rdk"),
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    assigned: list[int] = []

    def on_assign(c: Any, partitions: list[Any]) -> None:
        c.incremental_assign(partitions)
        c.pause(partitions)
        assigned.extend(tp.partition for tp in partitions)

    try:
        consumer.subscribe([topic], on_assign=on_assign)
        handed: list[Any] = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            handed.extend(m for m in consumer.consume(100, 0.2) if m.error() is None)
        assert sorted(assigned) == [0, 1, 2]
        assert handed == []
    finally:
        consumer.close()
