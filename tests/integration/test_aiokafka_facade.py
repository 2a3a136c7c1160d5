"""An aiokafka application's usual calls, run the same way on aiokafka and on kgroup.aiokafka.

Each scenario runs against ``aiokafka.AIOKafkaConsumer`` (the control, classic
protocol) and ``kgroup.aiokafka.AIOKafkaConsumer`` on the classic and the
consumer protocol, with the same assertions. The partitions, listener and
offsets are aiokafka's own types, as an unchanged application passes them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiokafka
import aiokafka.errors
import anyio
import anyio.lowlevel
import pytest
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from confluent_kafka import Producer
from helpers import run_python

import kgroup.aiokafka
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

KINDS = ["aiokafka", "kgroup-classic", "kgroup-consumer"]
PER_PARTITION = 10
WAIT = 60
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def make(kind: str, *topics: str, **keywords: Any) -> Any:
    """The consumer under test: the control or the facade on one protocol."""
    if kind == "aiokafka":
        return aiokafka.AIOKafkaConsumer(*topics, **keywords)
    protocol = kind.removeprefix("kgroup-")
    return kgroup.aiokafka.AIOKafkaConsumer(*topics, group_protocol=protocol, **keywords)


@dataclass(frozen=True)
class Cluster:
    """The test's broker, topics and groups: one place for the setup every scenario shares."""

    bootstrap: str
    make_topic: MakeTopic
    make_group_id: MakeGroupId

    def topic(self, partitions: int = 2, *, records: bool = False) -> str:
        """A new topic; with ``records``, ``PER_PARTITION`` keyed records in each partition."""
        topic = self.make_topic(partitions=partitions)
        if records:
            produce_keyed(self.bootstrap, topic, partitions)
        return topic

    def two_partitions(self) -> tuple[str, TopicPartition, TopicPartition]:
        """A new topic with records (see :meth:`topic`) and its partitions 0 and 1."""
        topic = self.topic(records=True)
        return topic, TopicPartition(topic, 0), TopicPartition(topic, 1)

    def consumer(self, kind: str, *topics: str, from_start: bool = False, **keywords: Any) -> Any:
        """``make(kind, ...)`` in a new group; ``from_start``: earliest, no auto-commit."""
        if from_start:
            keywords = {"auto_offset_reset": "earliest", "enable_auto_commit": False, **keywords}
        group_id = keywords.pop("group_id", None) or self.make_group_id()
        return make(kind, *topics, bootstrap_servers=self.bootstrap, group_id=group_id, **keywords)


@pytest.fixture
def cluster(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> Cluster:
    return Cluster(kafka_bootstrap_servers, make_topic, make_group_id)


def produce_keyed(bootstrap: str, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(partitions):
        for i in range(PER_PARTITION):
            producer.produce(
                topic,
                f"value-{partition}-{i}".encode(),
                key=f"k{i}".encode(),
                partition=partition,
                headers=[("h", f"{i}".encode())],
            )
    assert producer.flush(30) == 0


class Recorder(ConsumerRebalanceListener):  # type: ignore[misc]
    """aiokafka's listener with async methods: every call in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, set[TopicPartition]]] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.calls.append(("revoked", set(revoked)))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.calls.append(("assigned", set(assigned)))


def assert_whole_sets(calls: list[tuple[str, set[TopicPartition]]]) -> None:
    """aiokafka's contract: each revoke names everything assigned before it, then a full assign."""
    owned: set[TopicPartition] = set()
    kinds = [kind for kind, _ in calls]
    assert kinds == ["revoked", "assigned"] * (len(calls) // 2), calls
    for kind, partitions in calls:
        if kind == "revoked":
            assert partitions == owned, calls
        else:
            owned = partitions


async def take(
    consumer: Any, count: int, *partitions: TopicPartition, exactly: bool = False
) -> list[Any]:
    """At least ``count`` records (of ``partitions`` if given); ``exactly``: no more."""
    records: list[Any] = []
    with anyio.fail_after(WAIT):
        while len(records) < count:
            limit = count - len(records) if exactly else None
            batch = await consumer.getmany(*partitions, timeout_ms=200, max_records=limit)
            for got in batch.values():
                records.extend(got)
    return records


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", KINDS)
async def test_usual_calls_behave_as_on_aiokafka(
    kind: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    topic, tp0, tp1 = cluster.two_partitions()
    listener = Recorder()
    consumer = cluster.consumer(kind, from_start=True, value_deserializer=bytes.decode)
    consumer.subscribe(topics=[topic], listener=listener)
    await consumer.start()
    try:
        records = await take(consumer, 2 * PER_PARTITION)
        assert len(records) == 2 * PER_PARTITION
        first = min((r for r in records if r.partition == 1), key=lambda r: r.offset)
        assert (first.topic, first.partition, first.offset) == (topic, 1, 0)
        assert first.key == b"k0"
        assert first.value == "value-1-0"
        assert first.headers == (("h", b"0"),)
        assert first.timestamp_type == 0  # CreateTime
        assert first.timestamp > 0
        assert first.serialized_key_size == 2
        assert first.serialized_value_size == len("value-1-0")
        assert sorted(r.offset for r in records if r.partition == 0) == list(range(PER_PARTITION))

        assert consumer.assignment() == {tp0, tp1}
        assert consumer.subscription() == frozenset({topic})
        assert_whole_sets(listener.calls)
        assert listener.calls[0] == ("revoked", set())
        assert listener.calls[-1] == ("assigned", {tp0, tp1})

        assert await consumer.position(tp0) == PER_PARTITION
        assert consumer.highwater(tp0) == PER_PARTITION
        assert await consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert await consumer.end_offsets([tp0, tp1]) == {
            tp0: PER_PARTITION,
            tp1: PER_PARTITION,
        }
        found = await consumer.offsets_for_times({tp0: 0})
        assert found[tp0] is not None
        assert found[tp0].offset == 0
        assert consumer.partitions_for_topic(topic) == {0, 1}
        assert topic in await consumer.topics()

        assert await consumer.committed(tp0) is None
        await consumer.commit({tp0: 4})
        assert await consumer.committed(tp0) == 4
        await consumer.commit({tp0: OffsetAndMetadata(5, "meta")})
        assert await consumer.committed(tp0) == 5
        mistakes: tuple[Any, ...] = ([], {})
        for mistake in mistakes:  # a mistake, not a no-op
            with pytest.raises(ValueError, match=r"\[\]|\{\}"):
                await consumer.commit(mistake)
        await consumer.commit()
        assert await consumer.committed(tp1) == PER_PARTITION

        consumer.seek(tp0, 2)
        again = await consumer.getone(tp0)
        assert (again.partition, again.offset, again.value) == (0, 2, "value-0-2")
        await consumer.seek_to_beginning(tp1)
        restarted = await take(consumer, 1, tp1)
        assert restarted[0].offset == 0
        assert restarted[0].partition == 1

        consumer.pause(tp0)
        assert consumer.paused() == {tp0}
        consumer.resume(tp0)
        assert consumer.paused() == set()

        with pytest.raises(aiokafka.errors.IllegalStateError):
            consumer.seek(TopicPartition(topic, 7), 0)
    finally:
        await consumer.stop()
    with pytest.raises(aiokafka.errors.ConsumerStoppedError):
        await consumer.getone()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_second_member_splits_the_partitions_with_whole_set_callbacks(
    kind: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    topic = cluster.topic(partitions=4)
    group = cluster.make_group_id()
    everything = {TopicPartition(topic, p) for p in range(4)}
    listeners = [Recorder(), Recorder()]
    members = [cluster.consumer(kind, group_id=group) for _ in listeners]

    async def drive(member: Any, until: Callable[[], bool]) -> None:
        with anyio.fail_after(WAIT):
            while not until():
                await member.getmany(timeout_ms=100)

    def split() -> bool:
        a, b = (m.assignment() for m in members)
        return bool(a) and bool(b) and not (a & b) and (a | b) == everything

    for member, listener in zip(members, listeners, strict=True):
        member.subscribe(topics=[topic], listener=listener)
    await members[0].start()
    try:
        await drive(members[0], lambda: members[0].assignment() == everything)
        await members[1].start()
        try:
            async with anyio.create_task_group() as tg:
                for member in members:
                    tg.start_soon(drive, member, split)
            for member, listener in zip(members, listeners, strict=True):
                assert_whole_sets(listener.calls)
                assert listener.calls[-1] == ("assigned", member.assignment())
            # The first member gave up part of what it had: a revoke naming all four.
            assert ("revoked", everything) in listeners[0].calls
        finally:
            await members[1].stop()
    finally:
        await members[0].stop()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", KINDS)
async def test_stop_commits_and_leaves_without_calling_the_listener(
    kind: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    # aiokafka's stop() makes its last auto-commit and leaves; the listener hears
    # nothing (an application's revoke handler that commits would find the
    # consumer stopping). The facade keeps that, though kgroup's own consumers
    # run the revoke callback on close.
    topic = cluster.topic(partitions=2, records=True)
    group = cluster.make_group_id()
    listener = Recorder()
    member = cluster.consumer(
        kind, group_id=group, auto_offset_reset="earliest", enable_auto_commit=True
    )
    member.subscribe(topics=[topic], listener=listener)
    await member.start()
    try:
        await take(member, 2 * PER_PARTITION)
    finally:
        heard = len(listener.calls)
        await member.stop()
    assert listener.calls[heard:] == []
    assert listener.calls[-1][0] == "assigned"
    # The last auto-commit covered what was read.
    check = cluster.consumer(kind, group_id=group)
    await check.start()
    try:
        committed = {p: await check.committed(TopicPartition(topic, p)) for p in range(2)}
    finally:
        await check.stop()
    assert committed == {0: PER_PARTITION, 1: PER_PARTITION}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_rebalance_deltas_opt_in_gives_the_listener_only_what_changed(
    protocol: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    topic = cluster.topic()
    listener = Recorder()
    everything = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    consumer = cluster.consumer(f"kgroup-{protocol}", topic, rebalance_deltas=True)
    async with consumer:
        consumer.subscribe(topics=[topic], listener=listener)
        with anyio.fail_after(WAIT):
            while consumer.assignment() != everything:
                await consumer.getmany(timeout_ms=100)
        consumer.unsubscribe()
        assert listener.calls == [("assigned", everything)]


@pytest.mark.parametrize("anyio_backend", ["trio"])
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_the_facade_runs_on_trio(
    protocol: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    topic = cluster.topic(records=True)
    tp0 = TopicPartition(topic, 0)
    listener = Recorder()
    async with cluster.consumer(f"kgroup-{protocol}", from_start=True) as consumer:
        consumer.subscribe(topics=[topic], listener=listener)
        seen = []
        with anyio.fail_after(WAIT):
            async for record in consumer:
                seen.append(record)
                if len(seen) == 2 * PER_PARTITION:
                    break
        assert {r.value for r in seen} == {
            f"value-{p}-{i}".encode() for p in range(2) for i in range(PER_PARTITION)
        }
        await consumer.commit()
        assert await consumer.committed(tp0) == PER_PARTITION
        assert listener.calls[-1][0] == "assigned"


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_dropin_example_reads_every_record(protocol: str, cluster: Cluster) -> None:
    topic = cluster.topic(records=True)
    result = run_python(
        str(EXAMPLES / "aiokafka_dropin.py"),
        cluster.bootstrap,
        topic,
        cluster.make_group_id(),
        "--protocol",
        protocol,
        "--max-records",
        str(2 * PER_PARTITION),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"consumed {2 * PER_PARTITION} records" in result.stderr
    assert "'value-1-9'" in result.stdout
    assert f"assigned [TopicPartition(topic='{topic}', partition=0)" in result.stderr


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", KINDS)
async def test_manual_assignment_reads_and_commits_only_its_partitions(
    kind: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    topic = cluster.topic(records=True)
    tp1 = TopicPartition(topic, 1)
    consumer = cluster.consumer(kind, from_start=True)
    async with consumer:
        consumer.assign([tp1])
        assert consumer.assignment() == {tp1}
        records = await take(consumer, PER_PARTITION)
        assert {r.partition for r in records} == {1}
        assert [r.offset for r in records] == list(range(PER_PARTITION))
        await consumer.commit({tp1: 7})
        assert await consumer.committed(tp1) == 7
        # Not unsubscribe() here: aiokafka 0.14's stop() then never returns (the control hangs).


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_pattern_subscription_is_assigned_the_matching_topic(
    kind: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    topic = cluster.topic()
    everything = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    consumer = cluster.consumer(kind)
    async with consumer:
        consumer.subscribe(pattern=re.escape(topic))
        with anyio.fail_after(WAIT):
            while consumer.assignment() != everything:
                await consumer.getmany(timeout_ms=100)
        assert consumer.subscription() == frozenset({topic})


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", KINDS)
async def test_polling_getmany_without_a_timeout_loses_no_record(
    kind: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    topic = cluster.topic(records=True)
    consumer = cluster.consumer(kind, topic, auto_offset_reset="earliest")
    offsets: dict[int, list[int]] = {0: [], 1: []}
    async with consumer:
        with anyio.fail_after(WAIT):
            while sum(map(len, offsets.values())) < 2 * PER_PARTITION:
                for tp, records in (await consumer.getmany()).items():  # timeout_ms=0
                    offsets[tp.partition].extend(r.offset for r in records)
                # aiokafka's getmany(timeout_ms=0) may not suspend: a loop of it
                # alone starves aiokafka's own fetcher (the control never ends).
                await anyio.lowlevel.checkpoint()
    assert offsets == {0: list(range(PER_PARTITION)), 1: list(range(PER_PARTITION))}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", KINDS)
async def test_commit_after_reading_one_partition_does_not_pass_the_others_records(
    kind: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    # getmany(tp0) with tp1's records fetched too: the facade holds those, but
    # librdkafka's position of tp1 had passed them, and commit() committed it.
    topic, tp0, tp1 = cluster.two_partitions()
    consumer = cluster.consumer(kind, topic, from_start=True)
    async with consumer:
        got = await take(consumer, PER_PARTITION, tp0)
        assert [(r.partition, r.offset) for r in got] == [(0, i) for i in range(PER_PARTITION)]
        await consumer.commit()
        assert await consumer.committed(tp0) == PER_PARTITION
        assert await consumer.committed(tp1) in (None, 0)
        rest = await take(consumer, PER_PARTITION)
        assert [(r.partition, r.offset) for r in rest] == [(1, i) for i in range(PER_PARTITION)]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_revocation_does_not_commit_past_records_held_for_another_call(
    kind: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    # getmany(tp0) with tp1's records fetched too, then a subscription change:
    # the commit before the revocation took librdkafka's position of tp1, past
    # the records the facade held, and tp1's next owner started after them.
    (topic, tp0, tp1), other = cluster.two_partitions(), cluster.topic(partitions=1)
    consumer = cluster.consumer(
        kind, topic, auto_offset_reset="earliest", auto_commit_interval_ms=600_000
    )
    async with consumer:
        got = await take(consumer, PER_PARTITION, tp0)
        assert {r.partition for r in got} == {0}
        consumer.subscribe([other])
        # Polls that ask for the new partition only: tp1's records stay held.
        with anyio.fail_after(WAIT):
            while consumer.assignment() != {TopicPartition(other, 0)}:
                await consumer.getmany(TopicPartition(other, 0), timeout_ms=100)
        assert await consumer.committed(tp0) == PER_PARTITION
        assert await consumer.committed(tp1) in (None, 0)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", KINDS)
async def test_an_auto_commit_does_not_pass_records_held_for_another_call(
    kind: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    topic, tp0, tp1 = cluster.two_partitions()
    consumer = cluster.consumer(
        kind, topic, auto_offset_reset="earliest", auto_commit_interval_ms=100
    )
    async with consumer:
        await take(consumer, PER_PARTITION, tp0)
        with anyio.fail_after(WAIT):
            while await consumer.committed(tp0) != PER_PARTITION:
                await consumer.getmany(tp0, timeout_ms=100)
        assert await consumer.committed(tp1) in (None, 0)
        rest = await take(consumer, PER_PARTITION)
        assert [(r.partition, r.offset) for r in rest] == [(1, i) for i in range(PER_PARTITION)]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", ["kgroup-classic", "kgroup-consumer"])
async def test_a_value_deserializer_failing_mid_batch_loses_no_record(
    kind: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    # The facade only: aiokafka raises at the bad record without returning the
    # ones before it in the same batch. The facade threw the whole batch away
    # (taken from librdkafka: positions and commits passed all of it).
    topic = cluster.topic(partitions=1, records=True)
    tp = TopicPartition(topic, 0)

    def value_of(data: bytes) -> str:
        if data.endswith(b"-5"):
            raise ValueError("cannot decode record 5")
        return data.decode()

    consumer = cluster.consumer(kind, topic, from_start=True, value_deserializer=value_of)
    async with consumer:
        values: list[str] = []
        with anyio.fail_after(WAIT), pytest.raises(ValueError, match="record 5"):
            await _read_all(consumer, values)
        assert values == [f"value-0-{i}" for i in range(5)]
        assert await consumer.position(tp) == 5
        with pytest.raises(ValueError, match="record 5"):  # again, as aiokafka does
            await consumer.getmany(timeout_ms=2000)
        await consumer.commit()
        assert await consumer.committed(tp) == 5


async def _read_all(consumer: Any, values: list[str]) -> None:
    while True:
        for records in (await consumer.getmany(timeout_ms=200)).values():
            values.extend(r.value for r in records)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", KINDS)
async def test_seek_to_end_then_commit_skips_the_backlog(
    kind: str,
    anyio_backend: str,
    cluster: Cluster,
) -> None:
    # "Skip the backlog": the facade's logical seek left position() at the old
    # offset and commit() committed nothing, so a restart read the backlog again.
    topic = cluster.topic(partitions=1, records=True)
    tp = TopicPartition(topic, 0)
    consumer = cluster.consumer(kind, topic, from_start=True)
    async with consumer:
        assert [r.offset for r in await take(consumer, 4, exactly=True)] == [0, 1, 2, 3]
        assert await consumer.seek_to_end(tp) is True
        assert await consumer.position(tp) == PER_PARTITION
        await consumer.commit()
        assert await consumer.committed(tp) == PER_PARTITION
        assert await consumer.seek_to_beginning(tp) is True
        assert await consumer.position(tp) == 0
        assert [r.offset for r in await take(consumer, 2)][:2] == [0, 1]
