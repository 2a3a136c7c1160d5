"""The consumer's own commits of positions leave out offsets already committed.

librdkafka's auto-commit sends only the partitions whose position moved past
the committed offset (and no request when none did); kgroup's sent every
position every interval, as the Java client does: an idle member rewrote the
same offsets to ``__consumer_offsets`` every ``auto.commit.interval.ms``, a
revocation of partitions nothing was read from since their last commit waited
for a commit round trip, and an auto-commit replaced the metadata an
application had committed with an offset by none. Both protocols, asyncio
and trio, through the fake broker.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from kgroup import AsyncConsumer, OffsetAndMetadata
from kgroup.dataplane import Record
from kgroup.protocol import ApiKey, VersionRange
from kgroup.testing.fake import FakeBroker, SeenRequest
from kgroup.types import TopicPartition

from .helpers import Recorder, consumer_config, drive, told, tps

pytestmark = pytest.mark.anyio

CLASSIC = {"group.protocol": "classic", "heartbeat.interval.ms": 100, "session.timeout.ms": 2_000}
PROTOCOLS = [pytest.param({}, id="consumer"), pytest.param(CLASSIC, id="classic")]
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
SKIPPED = "again: unchanged since committed"


def commits(broker: FakeBroker) -> list[dict[TopicPartition, int]]:
    """Every OffsetCommit the broker received: the offsets it named, oldest first."""
    return [_offsets(seen, broker) for seen in broker.requests_of(ApiKey.OFFSET_COMMIT)]


def _offsets(seen: SeenRequest, broker: FakeBroker) -> dict[TopicPartition, int]:
    names = {broker.topic("t").topic_id: "t"}
    return {
        TopicPartition(
            topic.name if seen.version < 10 else names[topic.topic_id], int(p.partition_index)
        ): int(p.committed_offset)
        for topic in seen.request.topics
        for p in topic.partitions
    }


def skips(caplog: pytest.LogCaptureFixture) -> int:
    """How many times the consumer decided not to commit unchanged offsets."""
    return sum(SKIPPED in r.getMessage() for r in caplog.records)


def produce(broker: FakeBroker, counts: Mapping[int, int]) -> None:
    for partition, count in counts.items():
        for i in range(count):
            broker.produce("t", partition, f"{partition}-{i}".encode())


@contextlib.asynccontextmanager
async def reading(
    broker: FakeBroker, group_id: str, extra: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> AsyncIterator[tuple[AsyncConsumer, dict[AsyncConsumer, list[Record]]]]:
    """A consumer auto-committing every 20 ms, subscribed to ``t`` (2 records a partition)."""
    caplog.set_level(logging.DEBUG, logger="kgroup.runtime")
    broker.create_topic("t", 2)
    produce(broker, {0: 2, 1: 2})
    config = consumer_config(broker, group_id, **{"auto.commit.interval.ms": 20, **extra})
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["t"])
        yield consumer, {consumer: []}


async def idle_intervals(
    consumer: AsyncConsumer,
    sink: dict[AsyncConsumer, list[Record]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Poll through several auto-commit intervals in which nothing is read."""
    before = skips(caplog)
    await drive(consumer, until=lambda: skips(caplog) >= before + 3, sink=sink)


@pytest.mark.parametrize("extra", PROTOCOLS)
async def test_auto_commit_sends_only_offsets_that_moved(
    broker: FakeBroker, group_id: str, extra: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    async with reading(broker, group_id, extra, caplog) as (consumer, sink):
        await drive(consumer, until=lambda: broker.committed(group_id) == {T0: 2, T1: 2}, sink=sink)
        sent = len(commits(broker))
        # Each interval decides to send nothing.
        await idle_intervals(consumer, sink, caplog)
        assert len(commits(broker)) == sent
        # A record on partition 0 only: the next commit names partition 0 only.
        produce(broker, {0: 1})
        await drive(consumer, until=lambda: broker.committed(group_id)[T0] == 3, sink=sink)
    assert len(sink[consumer]) == 5
    assert commits(broker)[sent] == {T0: 3}


@pytest.mark.parametrize("extra", PROTOCOLS)
async def test_revoking_partitions_committed_already_sends_no_commit(
    broker: FakeBroker, group_id: str, extra: dict[str, Any]
) -> None:
    broker.create_topic("t", 2)
    produce(broker, {0: 2, 1: 2})
    # Only the commits the test makes and those before a revocation.
    config = consumer_config(broker, group_id, **{"auto.commit.interval.ms": 600_000, **extra})
    first_listener, second_listener = Recorder(), Recorder()
    got: list[Record] = []
    async with (
        AsyncConsumer(config, dataplane=broker.dataplane()) as first,
        AsyncConsumer(config, dataplane=broker.dataplane()) as second,
    ):
        first.subscribe(["t"], listener=first_listener)
        await drive(first, until=lambda: len(got) == 4, sink={first: got})
        assert await first.commit() == {T0: 2, T1: 2}
        sent = len(commits(broker))

        second.subscribe(["t"], listener=second_listener)
        await drive(
            first,
            second,
            until=lambda: told(first, first_listener, 1) and told(second, second_listener, 1),
        )
        # The revoked partition's position was committed: no commit before handing it over.
        assert len(commits(broker)) == sent
        assert first_listener.of("revoked") != []
        assert first.assignment() | second.assignment() == tps("t", 0, 1)
    assert broker.committed(group_id) == {T0: 2, T1: 2}


@pytest.mark.parametrize("extra", PROTOCOLS)
async def test_auto_commit_keeps_the_metadata_committed_with_an_unchanged_offset(
    broker: FakeBroker, group_id: str, extra: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    async with reading(broker, group_id, extra, caplog) as (consumer, sink):
        await drive(consumer, until=lambda: len(sink[consumer]) == 4, sink=sink)
        await consumer.commit({T0: OffsetAndMetadata(2, "checkpoint-7"), T1: OffsetAndMetadata(2)})
        await idle_intervals(consumer, sink, caplog)
        assert broker.committed_metadata(group_id)[T0] == "checkpoint-7"
        read = await consumer.committed_with_metadata([T0])
    assert read == {T0: OffsetAndMetadata(2, "checkpoint-7")}


BY_NAME = {ApiKey.OFFSET_COMMIT: VersionRange(7, 9), ApiKey.OFFSET_FETCH: VersionRange(8, 9)}
"""A broker that names topics in offset requests (as Kafka 4.0 and 4.1)."""


@pytest.mark.parametrize("offsets_by", ["id", "name"])
async def test_an_unchanged_position_in_a_recreated_topic_still_reaches_the_commit_that_notices(
    anyio_backend: str, group_id: str, offsets_by: str
) -> None:
    # The data plane's position in a topic deleted and created again stays at
    # the old topic's (librdkafka's), which is the offset committed before:
    # unchanged, yet the auto-commit must still run, since it is where a
    # classic member learns of the new topic and fetches it from the start.
    async with FakeBroker(versions=BY_NAME if offsets_by == "name" else None) as broker:
        broker.create_topic("t", 1)
        produce(broker, {0: 5})
        config = consumer_config(broker, group_id, **CLASSIC, **{"auto.commit.interval.ms": 20})
        got: list[Record] = []
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
            consumer.subscribe(["t"])
            await drive(consumer, until=lambda: len(got) == 5, sink={consumer: got})
            assert await consumer.commit() == {T0: 5}
            broker.recreate_topic("t")
            for n in range(2):
                broker.produce("t", 0, f"new-{n}".encode())
            await drive(consumer, until=lambda: len(got) == 7, sink={consumer: got})
            await drive(consumer, until=lambda: broker.committed(group_id) == {T0: 2})
    assert [r.value() for r in got[5:]] == [b"new-0", b"new-1"]
