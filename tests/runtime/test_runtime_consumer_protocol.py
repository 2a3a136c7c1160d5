"""The KIP-848 consumer protocol end to end through the fake broker, asyncio and trio."""

from __future__ import annotations

import pytest
from runtime_helpers import Recorder, consumer_config, drive, tps

from kgroup import AsyncConsumer
from kgroup.dataplane import Record
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

pytestmark = pytest.mark.anyio


async def test_join_and_consume(broker: FakeBroker, group_id: str) -> None:
    broker.create_topic("orders", 2)
    for i in range(3):
        broker.produce("orders", 0, f"a{i}".encode())
    for i in range(2):
        broker.produce("orders", 1, f"b{i}".encode())
    listener = Recorder()
    got: list[Record] = []
    async with AsyncConsumer(
        consumer_config(broker, group_id), dataplane=broker.dataplane()
    ) as consumer:
        consumer.subscribe(["orders"], listener=listener)
        await drive(consumer, until=lambda: len(got) >= 5, sink={consumer: got})

        assert sorted((r.partition(), r.offset(), r.value()) for r in got) == [
            (0, 0, b"a0"),
            (0, 1, b"a1"),
            (0, 2, b"a2"),
            (1, 0, b"b0"),
            (1, 1, b"b1"),
        ]
        assert consumer.assignment() == tps("orders", 0, 1)
        assert listener.events == [("assigned", tps("orders", 0, 1))]
        group = broker.consumer_group(group_id)
        assert group is not None
        assert group.member_epoch(consumer.member_id) == consumer.member_epoch > 0
