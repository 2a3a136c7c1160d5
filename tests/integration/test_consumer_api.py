"""The confluent-kafka-shaped consumer API on a real broker, blocking and async.

One test per row of issue 16's API list, each once with :class:`kgroup.Consumer`
and once with :class:`kgroup.AsyncConsumer` (on asyncio; the async shell's code
is the same on trio and is run there by test_consumer_async.py):
confluent-kafka ``TopicPartition`` / ``Message`` arguments, ``subscription()``,
``paused()``, manual assignment, watermarks / offsets by time / topics,
``store_offsets()``, ``wakeup()`` and ``consumer_group_metadata()`` with a
transactional producer.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import anyio
import confluent_kafka as ck
import process_helpers
import pytest
from helpers import classic_conf, consumer_conf, produce, produce_values, text, wait_until
from process_helpers import MemberProcess

from kgroup import (
    AlreadyAssignedError,
    AsyncConsumer,
    ConfigError,
    Consumer,
    MixedAssignmentError,
    NotAssignedError,
    TopicPartition,
    WakeupError,
)
from kgroup._frontend import encode_group_metadata
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ---------------------------------------------------------------- helpers


def _poll_until(consumer: Consumer, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        assert consumer.poll(0.1) is None, "a record arrived while waiting"


async def _poll_until_async(
    consumer: AsyncConsumer, condition: Callable[[], bool], what: str
) -> None:
    with anyio.fail_after(30):
        while not condition():
            assert await consumer.poll(0.1) is None, f"a record arrived waiting for {what}"


def _take(consumer: Consumer, count: int) -> list[ck.Message]:
    records: list[ck.Message] = []
    deadline = time.monotonic() + 30
    while len(records) < count and time.monotonic() < deadline:
        records.extend(consumer.consume(count - len(records), 0.2))
    assert len(records) == count, f"got {len(records)} of {count} records"
    return records


async def _take_async(consumer: AsyncConsumer, count: int) -> list[ck.Message]:
    records: list[ck.Message] = []
    with anyio.fail_after(30):
        while len(records) < count:
            records.extend(await consumer.consume(count - len(records), 0.2))
    return records


def _values(records: list[ck.Message]) -> list[str]:
    return [text(m) for m in records]


def _two_partitions(bootstrap: str, topic: str) -> None:
    produce_values(bootstrap, topic, [(0, f"a{i}") for i in range(10)])
    produce_values(bootstrap, topic, [(1, f"b{i}") for i in range(10)])


# ---------------------------------------- confluent-kafka TopicPartition, paused()


def test_confluent_topic_partitions_everywhere(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    ck0, ck1 = ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)
    conf = consumer_conf(bootstrap, make_group_id(), enable_auto_commit=False)
    with Consumer(conf) as consumer:
        consumer.subscribe([topic])
        assert consumer.subscription() == [topic]
        _poll_until(consumer, lambda: consumer.assignment() == {tp0, tp1}, "the assignment")

        consumer.pause([ck0])
        assert consumer.paused() == {tp0}
        _two_partitions(bootstrap, topic)
        assert sorted(_values(_take(consumer, 10))) == sorted(f"b{i}" for i in range(10))
        assert consumer.poll(0.5) is None  # partition 0 stays paused
        assert consumer.position([ck0, ck1]) == {tp1: 10}

        consumer.resume([ck0])
        assert consumer.paused() == frozenset()
        assert _values(_take(consumer, 10)) == [f"a{i}" for i in range(10)]

        consumer.seek(ck.TopicPartition(topic, 0, 3))
        records = _take(consumer, 7)
        assert _values(records) == [f"a{i}" for i in range(3, 10)]

        assert consumer.commit(records[-1]) == {tp0: 10}  # positional message
        assert consumer.commit(offsets=[ck.TopicPartition(topic, 1, 4)]) == {tp1: 4}
        assert consumer.committed([ck0, ck1]) == {tp0: 10, tp1: 4}

        with pytest.raises(TypeError, match="TopicPartition"):
            consumer.pause(topic)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="carries no offset"):
            consumer.commit(offsets=[tp0])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="seek"):
            consumer.seek(tp0)
        consumer.unsubscribe()
        assert consumer.subscription() == []


@pytest.mark.anyio
async def test_confluent_topic_partitions_everywhere_async(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    ck0, ck1 = ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)
    conf = consumer_conf(bootstrap, make_group_id(), enable_auto_commit=False)
    async with AsyncConsumer(conf) as consumer:
        consumer.subscribe(f"^{topic}$")
        assert consumer.subscription() == [f"^{topic}$"]
        await _poll_until_async(
            consumer, lambda: consumer.assignment() == {tp0, tp1}, "the assignment"
        )
        consumer.pause(ck0)
        assert consumer.paused() == {tp0}
        _two_partitions(bootstrap, topic)
        assert sorted(_values(await _take_async(consumer, 10))) == sorted(
            f"b{i}" for i in range(10)
        )
        assert consumer.position([ck0, ck1]) == {tp1: 10}
        consumer.resume([ck0])
        assert consumer.paused() == frozenset()
        assert _values(await _take_async(consumer, 10)) == [f"a{i}" for i in range(10)]
        consumer.seek(ck.TopicPartition(topic, 0, 8))
        records = await _take_async(consumer, 2)
        assert _values(records) == ["a8", "a9"]
        assert await consumer.commit(records[0]) == {tp0: 9}
        assert await consumer.commit(offsets=[ck.TopicPartition(topic, 1, 6)]) == {tp1: 6}
        assert await consumer.committed([ck0, ck1]) == {tp0: 9, tp1: 6}
        with pytest.raises(TypeError, match="carries no offset"):
            await consumer.commit(offsets=[tp1])  # type: ignore[list-item]


# -------------------------------------------------------- manual assignment


def test_manual_assignment_commits_as_a_simple_consumer(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=3)
    tps = [TopicPartition(topic, p) for p in range(3)]
    produce_values(bootstrap, topic, [(p, f"{p}:{i}") for p in range(3) for i in range(5)])
    conf = consumer_conf(bootstrap, make_group_id(), enable_auto_commit=False)
    with Consumer(conf) as consumer:
        consumer.assign(
            [ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING), ck.TopicPartition(topic, 1, 3)]
        )
        assert consumer.assignment() == {tps[0], tps[1]}
        assert sorted(_values(_take(consumer, 7))) == sorted(
            [f"0:{i}" for i in range(5)] + ["1:3", "1:4"]
        )
        consumer.incremental_assign([ck.TopicPartition(topic, 2)])  # no commit: earliest
        with pytest.raises(AlreadyAssignedError):
            consumer.incremental_assign([tps[2]])
        assert _values(_take(consumer, 5)) == [f"2:{i}" for i in range(5)]
        assert consumer.commit() == {tp: 5 for tp in tps}

        consumer.incremental_unassign([ck.TopicPartition(topic, 2)])
        assert consumer.assignment() == {tps[0], tps[1]}
        with pytest.raises(MixedAssignmentError, match="unassign"):
            consumer.subscribe([topic])
        consumer.unassign()
        assert consumer.assignment() == frozenset()
        with pytest.raises(NotAssignedError):
            consumer.incremental_unassign([tps[0]])

    produce_values(bootstrap, topic, [(0, "0:5"), (1, "1:5")])
    with Consumer(conf) as consumer:
        consumer.assign([tps[0], ck.TopicPartition(topic, 1)])  # from the committed offsets
        assert sorted(_values(_take(consumer, 2))) == ["0:5", "1:5"]
        assert consumer.committed(tps) == {tp: 5 for tp in tps}

    with Consumer(conf) as consumer:
        consumer.subscribe([topic])
        with pytest.raises(MixedAssignmentError, match="subscribed"):
            consumer.assign([tps[0]])


@pytest.mark.anyio
async def test_manual_assignment_async(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    _two_partitions(bootstrap, topic)
    conf = consumer_conf(bootstrap, make_group_id())  # auto-commit: close commits
    async with AsyncConsumer(conf) as consumer:
        consumer.assign({tp0: 6})
        assert _values(await _take_async(consumer, 4)) == ["a6", "a7", "a8", "a9"]
        consumer.incremental_assign([ck.TopicPartition(topic, 1, ck.OFFSET_END)])
        assert consumer.assignment() == {tp0, tp1}
        with pytest.raises(MixedAssignmentError):
            consumer.subscribe([topic])
        # Partition 1 starts at its end: nothing more to read.
        assert await consumer.poll(1.0) is None
    async with AsyncConsumer(conf) as consumer:
        assert await consumer.committed([tp0]) == {tp0: 10}
        consumer.assign([tp0])
        produce_values(bootstrap, topic, [(0, "a10")])
        assert _values(await _take_async(consumer, 1)) == ["a10"]
        consumer.unassign()
        assert consumer.assignment() == frozenset()


# -------------------------------------------- watermarks, offsets by time, topics


def _timestamped(bootstrap: str, topic: str) -> int:
    """Three records one second apart (record timestamps), the first's timestamp (ms)."""
    base = int(time.time() * 1000) - 60_000
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, f"r{i}".encode(), partition=0, timestamp=base + 1000 * i)
    assert producer.flush(30) == 0
    return base


def test_watermarks_offsets_for_times_and_topics(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    base = _timestamped(bootstrap, topic)
    with Consumer(consumer_conf(bootstrap, make_group_id())) as consumer:
        assert consumer.get_watermark_offsets(ck.TopicPartition(topic, 0)) == (0, 3)
        assert consumer.get_watermark_offsets(tp, timeout=10) == (0, 3)
        assert consumer.offsets_for_times([ck.TopicPartition(topic, 0, base + 500)]) == {tp: 1}
        assert consumer.offsets_for_times({tp: base + 60_000}) == {tp: None}
        metadata = consumer.list_topics(topic)
        assert list(metadata.topics) == [topic]
        assert len(metadata.topics[topic].partitions) == 1
        assert topic in consumer.list_topics().topics

        consumer.assign([tp])
        _take(consumer, 2)
        _low, high = consumer.get_watermark_offsets(tp, cached=True)
        assert high == 3
        assert high - consumer.position([tp])[tp] == 1  # the lag


@pytest.mark.anyio
async def test_watermarks_offsets_for_times_and_topics_async(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    base = _timestamped(bootstrap, topic)
    async with AsyncConsumer(consumer_conf(bootstrap, make_group_id())) as consumer:
        assert await consumer.get_watermark_offsets(tp) == (0, 3)
        consumer.assign([ck.TopicPartition(topic, 0, 1)])
        assert len(await _take_async(consumer, 2)) == 2
        _low, high = await consumer.get_watermark_offsets(tp, cached=True)
        assert high - consumer.position([tp])[tp] == 0  # the lag: all read
        assert await consumer.offsets_for_times({tp: base + 1000}) == {tp: 1}
        assert await consumer.offsets_for_times([ck.TopicPartition(topic, 0, base)]) == {tp: 0}
        metadata = await consumer.list_topics(topic, timeout=10)
        assert len(metadata.topics[topic].partitions) == 1


# ------------------------------------------------------------ store_offsets


def test_store_offsets_decides_what_commits_cover(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    group = make_group_id()
    produce_values(bootstrap, topic, [f"v{i}" for i in range(10)])
    conf = consumer_conf(bootstrap, group, enable_auto_offset_store=False)
    with Consumer(conf) as consumer:
        consumer.subscribe([topic])
        records = _take(consumer, 10)
        consumer.store_offsets(records[3])
        assert consumer.commit() == {tp: 4}  # not the position, 10
        consumer.store_offsets(offsets=[ck.TopicPartition(topic, 0, 7)])
        with pytest.raises(NotAssignedError):
            consumer.store_offsets(offsets={TopicPartition(topic, 5): 1})
        with pytest.raises(TypeError, match="exactly one"):
            consumer.store_offsets()
    # close (auto-commit) committed the stored 7, not the position 10
    with Consumer(consumer_conf(bootstrap, group)) as other:
        assert other.committed([tp]) == {tp: 7}
        with pytest.raises(ConfigError, match=r"enable\.auto\.offset\.store=false"):
            other.store_offsets(offsets={tp: 1})


@pytest.mark.anyio
async def test_store_offsets_async(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    produce_values(bootstrap, topic, [f"v{i}" for i in range(5)])
    conf = consumer_conf(
        bootstrap, make_group_id(), enable_auto_offset_store="false", enable_auto_commit=False
    )
    async with AsyncConsumer(conf) as consumer:
        consumer.subscribe([topic])
        records = await _take_async(consumer, 5)
        assert await consumer.commit() == {}  # nothing stored yet
        consumer.store_offsets(records[1])
        assert await consumer.commit() == {tp: 2}
        assert await consumer.committed([tp]) == {tp: 2}


# ------------------------------------------------------------------ wakeup


def test_wakeup_interrupts_a_blocked_poll(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic = make_topic(partitions=1)
    conf = consumer_conf(kafka_broker.bootstrap_servers, make_group_id())
    with Consumer(conf) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        started = time.monotonic()
        waker = threading.Timer(0.5, consumer.wakeup)  # another thread, while poll blocks
        waker.start()
        with pytest.raises(WakeupError):
            consumer.poll(30)
        assert time.monotonic() - started < 10
        waker.join()
        consumer.wakeup()  # none blocked: the next call raises, once
        with pytest.raises(WakeupError):
            list(consumer)
        assert consumer.poll(0.2) is None


@pytest.mark.anyio
async def test_wakeup_interrupts_a_blocked_poll_async(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic = make_topic(partitions=1)
    conf = consumer_conf(kafka_broker.bootstrap_servers, make_group_id())
    async with AsyncConsumer(conf) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        started = anyio.current_time()
        async with anyio.create_task_group() as tg:

            async def wake_soon() -> None:
                await anyio.sleep(0.5)
                consumer.wakeup()

            tg.start_soon(wake_soon)
            with pytest.raises(WakeupError):
                await consumer.poll(30)
        assert anyio.current_time() - started < 10
        assert await consumer.poll(0.2) is None


# ------------------------------------- consumer_group_metadata, transactions


def _transact(
    bootstrap: str, group_metadata: bytes, records: list[ck.Message], out: str, tx_id: str
) -> None:
    """Copy ``records`` to ``out`` and commit their offsets in one transaction."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tx_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    for record in records:
        producer.produce(out, record.value())
    last = records[-1]
    topic, partition, offset = last.topic(), last.partition(), last.offset()
    assert topic is not None
    assert partition is not None
    assert offset is not None
    offsets = [ck.TopicPartition(topic, partition, offset + 1)]
    producer.send_offsets_to_transaction(offsets, group_metadata, 30)
    producer.commit_transaction(30)


def _fenced(bootstrap: str, group_metadata: bytes, topic: str, tx_id: str) -> ck.KafkaError:
    """The error of a transaction whose offsets carry ``group_metadata`` (aborted)."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tx_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    with pytest.raises(ck.KafkaException) as caught:
        producer.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 1)], group_metadata, 30)
    producer.abort_transaction(30)
    error: ck.KafkaError = caught.value.args[0]
    return error


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_group_metadata_works_with_a_transactional_producer(
    protocol: str, kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, sink = make_topic(partitions=1), make_topic(partitions=1)
    group = make_group_id()
    tp = TopicPartition(source, 0)
    produce_values(bootstrap, source, [f"v{i}" for i in range(5)])
    if protocol == "classic":  # member_epoch is the generation, member_id the coordinator's
        conf = classic_conf(bootstrap, group, "range", enable_auto_commit=False)
    else:
        conf = consumer_conf(bootstrap, group, enable_auto_commit=False)
    with Consumer(conf) as consumer:
        consumer.subscribe([source])
        records = _take(consumer, 5)
        metadata = consumer.consumer_group_metadata()
        assert consumer.member_epoch > 0
        assert metadata == encode_group_metadata(
            group, consumer.member_epoch, consumer.member_id, None
        )
        _transact(bootstrap, metadata, records, sink, f"tx-{group}")
        assert consumer.committed([tp]) == {tp: 5}
        # The broker checks the member: someone else's id is refused.
        stranger = encode_group_metadata(group, consumer.member_epoch, "stranger", None)
        error = _fenced(bootstrap, stranger, source, f"tx2-{group}")
        assert error.code() == ck.KafkaError.UNKNOWN_MEMBER_ID, error
        assert consumer.committed([tp]) == {tp: 5}


@pytest.mark.anyio
async def test_group_metadata_works_with_a_transactional_producer_async(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, sink = make_topic(partitions=1), make_topic(partitions=1)
    group = make_group_id()
    tp = TopicPartition(source, 0)
    produce_values(bootstrap, source, [f"v{i}" for i in range(3)])
    conf = consumer_conf(bootstrap, group, enable_auto_commit=False)
    async with AsyncConsumer(conf) as consumer:
        consumer.subscribe([source])
        records = await _take_async(consumer, 3)
        metadata = consumer.consumer_group_metadata()
        await anyio.to_thread.run_sync(_transact, bootstrap, metadata, records, sink, f"tx-{group}")
        assert await consumer.committed([tp]) == {tp: 3}


# ------------------------------------- exactly-once with members killed mid-transaction

EOS_SCRIPT = Path(__file__).with_name("eos_process.py")
KILLS = 10


def _read_committed(bootstrap: str, topic: str) -> list[str]:
    """Every committed value of partition 0 of ``topic`` as a read_committed reader sees it."""
    reader = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-reader",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    values: list[str] = []
    try:
        reader.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == ck.KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(f"reader failed: {error}")
            values.append(text(message))
        raise AssertionError(f"the reader did not reach the end of {topic}")
    finally:
        reader.close()


def _has_assignment(member: MemberProcess) -> Callable[[], bool]:
    return lambda: bool(member.assignment())


def _armed(member: MemberProcess) -> Callable[[], bool]:
    return lambda: bool(member.of("hold_armed"))


def _holds(member: MemberProcess) -> Callable[[], bool]:
    return lambda: bool(member.of("holding"))


def test_exactly_once_with_members_killed_mid_transaction(
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    tmp_path: Path,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, sink = make_topic(partitions=4), make_topic(partitions=1)
    group = make_group_id()
    tps = [TopicPartition(source, p) for p in range(4)]

    def start(slot: str) -> MemberProcess:
        conf = consumer_conf(bootstrap, group, enable_auto_commit=False)
        producer = {"transactional.id": f"{group}-{slot}", "transaction.timeout.ms": 60000}
        with mock.patch.object(process_helpers, "SCRIPT", EOS_SCRIPT):
            return MemberProcess(
                slot, {**conf, "_eos": {"out": sink, "producer": producer}}, [source], tmp_path
            )

    members = {slot: start(slot) for slot in ("a", "b")}
    produced: set[str] = set()
    held = 0
    try:
        for kill in range(KILLS):
            slot = "ab"[kill % 2]
            victim = members[slot]
            victim.wait_for(_has_assignment(victim), 60, "an assignment")
            victim.send("hold")
            victim.wait_for(_armed(victim), 30, "the hold command read")
            # Round-robin over every partition: the victim owns some of them.
            produced |= produce(bootstrap, source, 4, 100, start=kill * 100)
            victim.wait_for(_holds(victim), 60, "a held transaction")
            held += victim.of("holding")[0].data["records"]
            victim.signal(signal.SIGKILL)
            victim.wait_exit(10)
            victim.cleanup()
            members[slot] = start(slot)  # same transactional.id: aborts the open transaction
        produced |= produce(bootstrap, source, 4, 100, start=KILLS * 100)

        with Consumer(consumer_conf(bootstrap, group)) as observer:
            end = {tp: len(produced) // 4 for tp in tps}
            wait_until(lambda: observer.committed(tps) == end, 180, "every input record committed")
        for member in members.values():
            assert member.close(30) == 0, member.tail()
    finally:
        for member in members.values():
            member.cleanup()

    values = _read_committed(bootstrap, sink)
    duplicates = len(values) - len(set(values))
    assert held > 0  # records of killed transactions were written, then aborted
    assert duplicates == 0, f"{duplicates} duplicates in {len(values)} records"
    assert set(values) == produced
