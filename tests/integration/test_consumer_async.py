"""kgroup.AsyncConsumer on asyncio and trio against a real Kafka broker."""

from __future__ import annotations

import anyio
import pytest
from helpers import (
    AsyncRecorder,
    EventLog,
    consumer_conf,
    drain_async,
    partitions_of,
    produce,
    text,
)

from kgroup import AsyncConsumer, Consumer
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def test_async_member_consumes_commits_and_a_new_member_resumes(
    anyio_backend: str,
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=4)
    group = make_group_id()
    first = produce(bootstrap, topic, 4, 200)
    log = EventLog()
    async with AsyncConsumer(consumer_conf(bootstrap, group)) as consumer:
        consumer.subscribe([topic], AsyncRecorder(log, "a"))
        values = await drain_async(consumer, len(first), 30)
        assert set(values) == first
        assert consumer.assignment() == partitions_of(topic, 4)
        assert await consumer.commit() == {tp: 50 for tp in partitions_of(topic, 4)}
        assert await consumer.committed(partitions_of(topic, 4)) == {
            tp: 50 for tp in partitions_of(topic, 4)
        }
    assert [e.kind for e in log.of("a")] == ["assigned", "revoked"]

    second = produce(bootstrap, topic, 4, 40, start=200)
    async with AsyncConsumer(consumer_conf(bootstrap, group)) as consumer:
        consumer.subscribe([topic])
        received = []
        with anyio.fail_after(30):
            async for message in consumer:
                received.append(text(message))
                if len(received) == len(second):
                    break
        assert set(received) == second


async def test_async_members_split_the_topic_and_take_over_on_close(
    anyio_backend: str,
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=4)
    group = make_group_id()
    everything = produce(bootstrap, topic, 4, 200)
    config = consumer_conf(bootstrap, group, auto_commit_interval_ms=200)
    log = EventLog()
    values: dict[str, list[str]] = {"a": [], "b": []}
    leave_b = anyio.Event()
    all_partitions = partitions_of(topic, 4)
    consumers: dict[str, AsyncConsumer] = {}

    async def member(name: str, stop: anyio.Event) -> None:
        async with AsyncConsumer(config) as consumer:
            consumers[name] = consumer
            consumer.subscribe([topic], AsyncRecorder(log, name))
            while not stop.is_set():
                batch = await consumer.consume(100, 0.1)
                values[name].extend(text(m) for m in batch)

    def split() -> bool:
        a, b = consumers["a"].assignment(), consumers["b"].assignment()
        return bool(a) and bool(b) and not a & b and a | b == all_partitions

    stop_a = anyio.Event()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(member, "a", stop_a)
            tg.start_soon(member, "b", leave_b)
            while len(consumers) < 2 or not split():
                await anyio.sleep(0.05)
            leave_b.set()
            while consumers["a"].assignment() != all_partitions:
                await anyio.sleep(0.05)
            everything |= produce(bootstrap, topic, 4, 100, start=200)
            while not set(values["a"]) | set(values["b"]) >= everything:
                await anyio.sleep(0.05)
            stop_a.set()
    assert set(values["a"]) | set(values["b"]) == everything
    log.check_handover_order()


def test_blocking_consumer_runs_its_loop_on_trio(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    expected = produce(bootstrap, topic, 2, 20)
    with Consumer(consumer_conf(bootstrap, make_group_id()), backend="trio") as consumer:
        consumer.subscribe(topic)
        got: list[str] = []
        for message in consumer:
            got.append(text(message))
            if len(got) == len(expected):
                break
        assert set(got) == expected
