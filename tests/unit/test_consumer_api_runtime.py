"""The runtime bookkeeping behind issue 16's calls, on the fake cluster (no JVM).

What a real broker cannot show a test: the wire fields of a manual
assignment's commits (a simple consumer's: no member id, generation -1, no
instance id, no heartbeat ever sent), which offsets a commit covers with
``enable.auto.offset.store=false``, and the bookkeeping of ``paused()`` and
``wakeup()``. The same calls against a real broker are in
tests/integration/test_consumer_api.py.
"""

from __future__ import annotations

import anyio
import pytest

from kgroup import (
    AsyncConsumer,
    ConfigError,
    MixedAssignmentError,
    NotAssignedError,
    TopicPartition,
    WakeupError,
)
from kgroup.dataplane import Record
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker

pytestmark = pytest.mark.anyio

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)


async def _take(consumer: AsyncConsumer, count: int) -> list[Record]:
    records: list[Record] = []
    with anyio.fail_after(10):
        while len(records) < count:
            records.extend(await consumer.consume(count - len(records), 0.1))
    return records


def _broker_with_records(broker: FakeBroker) -> None:
    broker.create_topic("orders", 2)
    for partition in (0, 1):
        for i in range(5):
            broker.produce("orders", partition, f"{partition}:{i}".encode())


async def test_manual_assignment_commits_as_a_simple_consumer_on_the_wire(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker:
        _broker_with_records(broker)
        config = {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "g",
            "group.instance.id": "static-1",  # never sent by a simple consumer
            "enable.auto.commit": False,
        }
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
            consumer.assign({TP0: 2, TP1: None})
            assert consumer.assignment() == {TP0, TP1}
            values = sorted(m.value() or b"" for m in await _take(consumer, 8))
            assert values == sorted(
                [f"0:{i}".encode() for i in range(2, 5)] + [f"1:{i}".encode() for i in range(5)]
            )
            assert await consumer.commit() == {TP0: 5, TP1: 5}
            with pytest.raises(MixedAssignmentError):
                consumer.subscribe(["orders"])
            metadata = consumer.consumer_group_metadata()
        commits = broker.requests_of(ApiKey.OFFSET_COMMIT)
        assert commits
        for seen in commits:
            assert seen.request.member_id == ""
            assert seen.request.generation_id_or_member_epoch == -1
            assert seen.request.group_instance_id is None
        assert not broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        assert metadata == b"CGMDv2:\xff\xff\xff\xffg\x00\x00\x01"


async def test_store_offsets_decides_what_commits_cover(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        _broker_with_records(broker)
        config = {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "g",
            "enable.auto.offset.store": False,
            "enable.auto.commit": False,
        }
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
            consumer.assign([TP0, TP1])
            records = await _take(consumer, 10)
            assert await consumer.commit() == {}  # handed out, but nothing stored
            last_of_0 = [m for m in records if m.partition() == 0][-1]  # in offset order
            consumer.store_offsets(last_of_0)
            consumer.store_offsets(offsets={TP1: 2})
            assert await consumer.commit() == {TP0: 5, TP1: 2}
            consumer.incremental_unassign([TP1])
            # Forgotten with the partition: assigned again, nothing is stored for it.
            consumer.incremental_assign([TP1])
            assert await consumer.commit() == {TP0: 5}
            with pytest.raises(NotAssignedError):
                consumer.store_offsets(offsets={TopicPartition("orders", 7): 1})


async def test_store_offsets_needs_the_config(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        _broker_with_records(broker)
        config = {"bootstrap.servers": broker.bootstrap_servers, "group.id": "g"}
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
            consumer.assign([TP0])
            with pytest.raises(ConfigError, match="enable.auto.offset.store=false"):
                consumer.store_offsets(offsets={TP0: 1})
    with pytest.raises(ConfigError, match="enable.auto.offset.store must be true or false"):
        AsyncConsumer({"bootstrap.servers": "x:1", "group.id": "g", "enable.auto.offset.store": 3})


async def test_paused_includes_partitions_paused_before_they_start(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        _broker_with_records(broker)
        config = {"bootstrap.servers": broker.bootstrap_servers, "group.id": "g"}
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
            consumer.assign([TP0, TP1])
            consumer.pause([TP1])  # owned; maybe not fetching yet: held until it starts
            assert consumer.paused() == {TP1}
            records = await _take(consumer, 5)
            assert {m.partition() for m in records} == {0}
            assert await consumer.poll(0.3) is None
            consumer.resume([TP1])
            assert consumer.paused() == frozenset()
            assert {m.partition() for m in await _take(consumer, 5)} == {1}


async def test_wakeup_is_raised_once_and_the_consumer_goes_on(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        _broker_with_records(broker)
        config = {"bootstrap.servers": broker.bootstrap_servers, "group.id": "g"}
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
            consumer.assign([TP0])
            consumer.wakeup()
            with pytest.raises(WakeupError):
                await consumer.consume(5, 10)
            assert len(await _take(consumer, 5)) == 5


async def test_the_revocation_commit_takes_offsets_stored_after_the_partitions_stopped(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker:
        _broker_with_records(broker)
        config = {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "g",
            "enable.auto.offset.store": False,
        }
        revoked: list[frozenset[TopicPartition]] = []

        class Listener:
            def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                revoked.append(partitions)

        async with AsyncConsumer(config, dataplane=broker.dataplane()) as first:
            first.subscribe(["orders"], Listener())
            records = await _take(first, 10)
            assert first.assignment() == {TP0, TP1}
            async with AsyncConsumer(config, dataplane=broker.dataplane()) as second:
                second.subscribe(["orders"])
                # The broker takes a partition from the first member; it stops
                # fetching at once, while the application still holds its records.
                with anyio.fail_after(10):
                    while len(first._driver.core.fetch.fetching) == 2:
                        assert await second.poll(0.05) is None
                (moving,) = {TP0, TP1} - first._driver.core.fetch.fetching
                last = [m for m in records if m.partition() == moving.partition][-1]
                first.store_offsets(last)  # done with it only now
                with anyio.fail_after(10):
                    while not revoked:
                        assert await first.poll(0.05) is None
                assert revoked == [frozenset({moving})]
                assert (await second.committed([moving]))[moving] == 5
