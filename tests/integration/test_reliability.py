"""Reliability fixes of issue 10 against a real Kafka broker, both protocols."""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers import (
    classic_conf,
    consumer_conf,
    drain,
    drain_async,
    partitions_of,
    produce,
    text,
)

from kgroup import AsyncConsumer, Consumer, TopicPartition
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration


def _conf(protocol: str, bootstrap: str, group: str) -> dict[str, Any]:
    if protocol == "classic":
        return classic_conf(bootstrap, group, "cooperative-sticky", enable_auto_commit=False)
    return consumer_conf(bootstrap, group, enable_auto_commit=False)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_commit_in_revoke_callback_during_close_is_accepted_and_a_new_member_resumes_after_it(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, protocol: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=3)
    group = make_group_id()
    first = produce(bootstrap, topic, 3, 90)
    committed: list[dict[TopicPartition, int] | None] = []
    conf = _conf(protocol, bootstrap, group)

    consumer = Consumer(conf)

    class CommitOnRevoke:
        def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
            committed.append(consumer.commit())

    consumer.subscribe([topic], CommitOnRevoke())
    assert set(drain(consumer, len(first), 30)) == first
    consumer.close()

    assert committed == [{tp: 30 for tp in partitions_of(topic, 3)}]
    second = produce(bootstrap, topic, 3, 30, start=90)
    with Consumer(conf) as again:
        again.subscribe([topic])
        values = drain(again, len(second), 30)
        # Resumes after the close's commit: nothing of the first batch again.
        assert sorted(values) == sorted(second)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("protocol", ["consumer", "classic"])
async def test_async_commit_in_revoke_callback_during_close_is_accepted(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, protocol: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=3)
    group = make_group_id()
    first = produce(bootstrap, topic, 3, 60)
    committed: list[dict[TopicPartition, int]] = []
    conf = _conf(protocol, bootstrap, group)

    async with AsyncConsumer(conf) as consumer:

        class CommitOnRevoke:
            async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                committed.append(await consumer.commit())

        consumer.subscribe([topic], CommitOnRevoke())
        assert set(await drain_async(consumer, len(first), 30)) == first

    assert committed == [{tp: 20 for tp in partitions_of(topic, 3)}]
    async with AsyncConsumer(conf) as again:
        assert await again.committed(sorted(partitions_of(topic, 3))) == {
            tp: 20 for tp in partitions_of(topic, 3)
        }


RECORDS = 100_000
WORK_S = 0.0005


def _busy(seconds: float) -> None:
    """Synchronous work holding the event loop (time-busy, not a sleep)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class _Told:
    """Every listener call, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("assigned", partitions))

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("revoked", partitions))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("lost", partitions))


@pytest.mark.timeout(280)
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("protocol", ["consumer", "classic"])
async def test_asyncio_loop_doing_half_a_millisecond_of_sync_work_per_record_is_never_fenced(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, protocol: str
) -> None:
    # Issue 10's acceptance: 100,000 records at 0.5 ms of synchronous work each
    # (50 s, many session timeouts of 6 s), the loop awaiting nothing but
    # poll() itself, whose records are mostly buffered. Before the fix the
    # member starved its own heartbeats and was fenced.
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=4)
    group = make_group_id()
    chunk = RECORDS // 5
    produced: set[str] = set()
    for start in range(0, RECORDS, chunk):
        produced |= produce(bootstrap, topic, 4, chunk, start=start)
    assert len(produced) == RECORDS
    conf = {**_conf(protocol, bootstrap, group), "enable.auto.commit": True}
    told = _Told()
    seen: set[str] = set()
    count = 0

    async with AsyncConsumer(conf) as consumer:
        consumer.subscribe([topic], told)
        first = await consumer.poll(30.0)
        assert first is not None
        identity = (consumer.member_id, consumer.member_epoch)
        record: Any = first
        while record is not None:
            seen.add(text(record))
            count += 1
            _busy(WORK_S)
            if count == RECORDS:
                break
            record = await consumer.poll(10.0)
        # Never fenced: the same member id and epoch (or generation) throughout,
        # one assignment, no revocation, no loss.
        assert (consumer.member_id, consumer.member_epoch) == identity
        assert told.calls == [("assigned", partitions_of(topic, 4))]
    # Every record, exactly once.
    assert count == RECORDS
    assert seen == produced
    # And the broker still knew the member at the end: the close's commit was accepted.
    with Consumer(_conf(protocol, bootstrap, group)) as reader:
        assert reader.committed(sorted(partitions_of(topic, 4))) == {
            tp: RECORDS // 4 for tp in partitions_of(topic, 4)
        }
