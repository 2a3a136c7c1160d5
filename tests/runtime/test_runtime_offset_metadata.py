"""Offset metadata: committed with explicit offsets, read back with the offsets.

confluent-kafka's TopicPartition carries ``metadata`` and the Java client's
OffsetAndMetadata does too; kgroup dropped it from commits (then refused it).
Both protocols, asyncio and trio, through the fake broker.
"""

from __future__ import annotations

from collections.abc import Mapping

import confluent_kafka as ck
import pytest

from kgroup import AsyncConsumer, OffsetAndMetadata
from kgroup.dataplane import Record
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

from .helpers import consumer_config, drive, tps

pytestmark = pytest.mark.anyio

PROTOCOLS = [
    pytest.param({}, id="consumer"),
    pytest.param({"group.protocol": "classic", "heartbeat.interval.ms": 100}, id="classic"),
]
T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


@pytest.mark.parametrize("extra", PROTOCOLS)
async def test_metadata_is_committed_and_read_back_with_its_offset(
    broker: FakeBroker, group_id: str, extra: dict[str, object]
) -> None:
    broker.create_topic("t", 3)
    for p in range(3):
        for i in range(4):
            broker.produce("t", p, f"{p}-{i}".encode())
    got: list[Record] = []
    config = consumer_config(broker, group_id, **{"enable.auto.commit": False, **extra})
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["t"])
        await drive(consumer, until=lambda: len(got) >= 12, sink={consumer: got})
        done = await consumer.commit(
            [
                ck.TopicPartition("t", 0, 4, metadata="file-17:line-300"),
                ck.TopicPartition("t", 1, 2),
            ]
        )
        assert done == {T0: 4, T1: 2}
        assert broker.committed_metadata(group_id) == {T0: "file-17:line-300", T1: ""}

        read = await consumer.committed_with_metadata(tps("t", 0, 1, 2))
        assert read == {
            T0: OffsetAndMetadata(4, "file-17:line-300"),
            T1: OffsetAndMetadata(2, ""),
            T2: None,
        }
        # The plain read is unchanged.
        assert await consumer.committed(tps("t", 0, 1, 2)) == {T0: 4, T1: 2, T2: None}

        # A commit of the positions carries no metadata (the Java client's too).
        await consumer.commit()
        assert broker.committed_metadata(group_id) == {T0: "", T1: "", T2: ""}

        # commit_async carries it as well; its outcome comes with a later poll.
        outcomes: list[tuple[Mapping[TopicPartition, int], BaseException | None]] = []
        consumer.commit_async(
            {T2: OffsetAndMetadata(4, '{"batch": 9}')},
            callback=lambda offsets, error: outcomes.append((offsets, error)),
        )
        await drive(consumer, until=lambda: bool(outcomes))
        assert outcomes == [({T2: 4}, None)]
        assert broker.committed_metadata(group_id)[T2] == '{"batch": 9}'


async def test_another_member_reads_the_metadata(broker: FakeBroker, group_id: str) -> None:
    broker.create_topic("t", 1)
    async with AsyncConsumer(
        consumer_config(broker, group_id), dataplane=broker.dataplane()
    ) as first:
        first.subscribe(["t"])
        await drive(first, until=lambda: first.assignment() == tps("t", 0))
        await first.commit({T0: OffsetAndMetadata(0, "checkpoint-1")})
    async with AsyncConsumer(
        consumer_config(broker, group_id), dataplane=broker.dataplane()
    ) as second:
        assert await second.committed_with_metadata([T0]) == {
            T0: OffsetAndMetadata(0, "checkpoint-1")
        }
