"""kgroup.ShareConsumer and kgroup.AsyncShareConsumer against the real broker.

Every test runs on both front ends: ``thread`` is :class:`kgroup.ShareConsumer`
(its calls made from a worker thread, its background loop on the test's anyio
backend), ``async`` is :class:`kgroup.AsyncShareConsumer` on the test's loop;
each on asyncio and on trio.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from helpers import run_python
from share_helpers import produce_records

import kgroup
from kgroup.admin.share import set_share_auto_offset_reset
from kgroup.telemetry import CommitCompleted, EventKind, TelemetryEvent
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport.client import KafkaClient
from kgroup.types import TopicIdPartition, TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

# Joining takes two heartbeats (the broker assigns between them, 5 s apart by default).
WAIT = 60.0

Callback = Callable[[Mapping[TopicIdPartition, frozenset[int]], kgroup.KgroupError | None], None]


@pytest.fixture(params=["thread", "async"])
def front(request: pytest.FixtureRequest) -> str:
    """Which share consumer the test drives."""
    name: str = request.param
    return name


class Member:
    """One share consumer behind async calls, whichever front end it is."""

    def __init__(self, consumer: kgroup.ShareConsumer | kgroup.AsyncShareConsumer) -> None:
        self.consumer = consumer

    async def _call(self, name: str, *args: Any) -> Any:
        method = getattr(self.consumer, name)
        if isinstance(self.consumer, kgroup.ShareConsumer):
            return await anyio.to_thread.run_sync(functools.partial(method, *args))
        return await method(*args)

    async def subscribe(self, topics: list[str]) -> None:
        await self._call("subscribe", topics)

    async def consume(self, count: int, timeout: float) -> list[kgroup.ShareRecord]:
        records: list[kgroup.ShareRecord] = await self._call("consume", count, timeout)
        return records

    async def acknowledge(self, record: kgroup.ShareRecord, kind: kgroup.AcknowledgeType) -> None:
        if isinstance(self.consumer, kgroup.ShareConsumer):
            # The blocking consumer's methods are for threads, not an event loop.
            await anyio.to_thread.run_sync(self.consumer.acknowledge, record, kind)
        else:
            self.consumer.acknowledge(record, kind)

    async def commit(self) -> dict[TopicIdPartition, kgroup.KgroupError | None]:
        results: dict[TopicIdPartition, kgroup.KgroupError | None] = await self._call("commit")
        return results

    async def assignment(self) -> frozenset[TopicPartition]:
        if isinstance(self.consumer, kgroup.ShareConsumer):
            return await anyio.to_thread.run_sync(self.consumer.assignment)
        return self.consumer.assignment()

    async def commit_async(self) -> None:
        if isinstance(self.consumer, kgroup.ShareConsumer):
            await anyio.to_thread.run_sync(self.consumer.commit_async)
        else:
            self.consumer.commit_async()

    async def metrics(self) -> dict[str, object]:
        if isinstance(self.consumer, kgroup.ShareConsumer):
            return await anyio.to_thread.run_sync(self.consumer.metrics)
        return self.consumer.metrics()

    async def close(self, timeout: float = 30.0) -> None:
        await self._call("close", timeout)

    async def consume_until(
        self, count: int, *, ack: kgroup.AcknowledgeType | None = None
    ) -> list[kgroup.ShareRecord]:
        """Consume until ``count`` records arrived (acknowledging each as ``ack``)."""
        got: list[kgroup.ShareRecord] = []
        with anyio.fail_after(WAIT):
            while len(got) < count:
                batch = await self.consume(500, 1.0)
                if ack is not None:
                    for record in batch:
                        await self.acknowledge(record, ack)
                got += batch
        return got


@asynccontextmanager
async def member(
    front: str,
    backend: str,
    bootstrap: str,
    group: str,
    topic: str,
    *,
    on_commit: Callback | None = None,
    extra: Mapping[str, object] | None = None,
) -> AsyncIterator[Member]:
    """A share consumer of ``group`` subscribed to ``topic`` (``extra``: more config),
    closed on the way out."""
    config = {"bootstrap.servers": bootstrap, "group.id": group, **(extra or {})}
    if front == "thread":
        consumer = await anyio.to_thread.run_sync(
            lambda: kgroup.ShareConsumer(
                config, backend=backend, on_acknowledgement_commit=on_commit
            )
        )
        one = Member(consumer)
        try:
            await one.subscribe([topic])
            yield one
        finally:
            await one.close()
    else:
        async with kgroup.AsyncShareConsumer(
            config, on_acknowledgement_commit=on_commit
        ) as async_consumer:
            one = Member(async_consumer)
            await one.subscribe([topic])
            yield one


async def _prepare(bootstrap: str, group: str, topic: str, count: int) -> None:
    """Start ``group`` at the earliest offset and produce ``count`` records to ``topic``."""
    async with KafkaClient(bootstrap) as client:
        await set_share_auto_offset_reset(client, group, "earliest")
    values = [(f"k{i}".encode(), f"r{i}".encode(), None) for i in range(count)]
    await anyio.to_thread.run_sync(lambda: produce_records(bootstrap, topic, values))


async def test_implicit_mode_consumes_and_accepts_every_record_once(
    anyio_backend: str,
    front: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    total = 300
    await _prepare(kafka_bootstrap_servers, group, topic, total)
    answered: list[tuple[Mapping[TopicIdPartition, frozenset[int]], object]] = []
    events: list[TelemetryEvent] = []
    async with member(
        front,
        anyio_backend,
        kafka_bootstrap_servers,
        group,
        topic,
        on_commit=lambda offsets, error: answered.append((offsets, error)),
        extra={"telemetry.callback": events.append},
    ) as one:
        got = await one.consume_until(total)
        results = await one.commit()
        metrics = await one.metrics()
        assert await one.assignment() == {TopicPartition(topic, 0)}
    assert sorted(r.offset() for r in got) == list(range(total))
    assert {r.delivery_count() for r in got} == {1}
    assert [r.value() for r in sorted(got, key=lambda r: r.offset())] == [
        f"r{i}".encode() for i in range(total)
    ]
    assert list(results.values()) == [None]
    assert [tp.partition for tp in results] == [0]
    accepted = {o for offsets, error in answered if error is None for o in offsets_of(offsets)}
    assert accepted == set(range(total))
    assert all(error is None for _, error in answered)
    assert metrics["records_delivered"] == total
    assert metrics["records_acknowledged"] == {"ACCEPT": total}
    kinds = [e.body.KIND for e in events]
    assert kinds[:2] == [EventKind.MEMBER_JOINED, EventKind.PARTITIONS_ASSIGNED]
    assert kinds[-1] is EventKind.MEMBER_LEFT
    commits = [e.body for e in events if isinstance(e.body, CommitCompleted)]
    assert commits
    assert all(c.error is None for c in commits)
    assert max(o.offset for c in commits for o in c.offsets) == total


def offsets_of(offsets: Mapping[TopicIdPartition, frozenset[int]]) -> set[int]:
    return {o for part in offsets.values() for o in part}


async def test_two_members_share_the_records_each_delivered_once(
    anyio_backend: str,
    front: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=2), make_group_id()
    total = 400
    async with KafkaClient(kafka_bootstrap_servers) as client:
        await set_share_auto_offset_reset(client, group, "earliest")
    async with (
        member(front, anyio_backend, kafka_bootstrap_servers, group, topic) as one,
        member(front, anyio_backend, kafka_bootstrap_servers, group, topic) as two,
    ):
        # Produced once both consume, so that either may acquire any of them.
        values = [(f"k{i}".encode(), f"r{i}".encode(), None) for i in range(total)]
        await anyio.to_thread.run_sync(
            lambda: produce_records(kafka_bootstrap_servers, topic, values)
        )
        got: list[kgroup.ShareRecord] = []
        with anyio.fail_after(WAIT):
            while len(got) < total:
                got += await one.consume(50, 0.2)
                got += await two.consume(50, 0.2)
        await one.commit()
        await two.commit()
    assert sorted(r.value() or b"" for r in got) == sorted(v for _, v, _ in values)
    assert {r.delivery_count() for r in got} == {1}


async def test_a_second_consumer_gets_no_accepted_record(
    anyio_backend: str,
    front: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    """Accepted records stay accepted: a member joining after the close gets nothing."""
    topic, group = make_topic(partitions=1), make_group_id()
    await _prepare(kafka_bootstrap_servers, group, topic, 20)
    async with member(front, anyio_backend, kafka_bootstrap_servers, group, topic) as one:
        got = await one.consume_until(20)
        await one.consume(1, 0.0)  # accepts the batch
    assert sorted(r.offset() for r in got) == list(range(20))
    async with member(front, anyio_backend, kafka_bootstrap_servers, group, topic) as two:
        # Joining takes a heartbeat interval; then a fetch would hand out anything left.
        with anyio.fail_after(WAIT):
            while not await two.assignment():
                assert await two.consume(10, 0.5) == []
        assert await two.consume(10, 2.0) == []


async def test_explicit_release_comes_back_and_reject_never(
    anyio_backend: str,
    front: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    await _prepare(kafka_bootstrap_servers, group, topic, 10)
    release, reject = kgroup.AcknowledgeType.RELEASE, kgroup.AcknowledgeType.REJECT
    accept = kgroup.AcknowledgeType.ACCEPT
    async with member(
        front,
        anyio_backend,
        kafka_bootstrap_servers,
        group,
        topic,
        extra={"share.acknowledgement.mode": "explicit"},
    ) as one:
        first: list[kgroup.ShareRecord] = []
        with anyio.fail_after(WAIT):
            while len(first) < 10:
                batch = await one.consume(500, 1.0)
                for record in batch:
                    # Even offsets released, odd ones rejected.
                    await one.acknowledge(record, release if record.offset() % 2 == 0 else reject)
                first += batch
        results = await one.commit()
        assert list(results.values()) == [None]
        again = await one.consume_until(5, ack=accept)
        await one.commit()
        # Nothing else comes back: the rejected records are gone for good.
        assert await one.consume(10, 2.0) == []
    assert sorted((r.offset(), r.delivery_count()) for r in first) == [(i, 1) for i in range(10)]
    assert sorted((r.offset(), r.delivery_count()) for r in again) == [
        (i, 2) for i in range(0, 10, 2)
    ]


async def test_explicit_consume_with_unacknowledged_records_raises(
    anyio_backend: str,
    front: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    await _prepare(kafka_bootstrap_servers, group, topic, 3)
    async with member(
        front,
        anyio_backend,
        kafka_bootstrap_servers,
        group,
        topic,
        extra={"share.acknowledgement.mode": "explicit"},
    ) as one:
        with anyio.fail_after(WAIT):
            batch: list[kgroup.ShareRecord] = []
            while not batch:
                batch = await one.consume(500, 1.0)
        with pytest.raises(kgroup.UnacknowledgedRecordsError):
            await one.consume(10, 0.1)
        for record in batch:
            await one.acknowledge(record, kgroup.AcknowledgeType.ACCEPT)
        await one.consume(10, 0.1)  # acknowledged: no error any more


async def test_close_during_a_fetch_is_prompt_and_releases_to_the_next_member(
    anyio_backend: str,
    front: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    await _prepare(kafka_bootstrap_servers, group, topic, 10)
    explicit = {"share.acknowledgement.mode": "explicit", "fetch.max.wait.ms": 5000}
    async with member(
        front, anyio_backend, kafka_bootstrap_servers, group, topic, extra=explicit
    ) as one:
        got = await one.consume_until(10)
        # Every record is held unacknowledged; the next fetch long-polls (5 s) when
        # close starts.
        started = time.monotonic()
        await one.close()
        closed_in = time.monotonic() - started
    assert sorted(r.offset() for r in got) == list(range(10))
    assert closed_in < 8.0
    async with member(front, anyio_backend, kafka_bootstrap_servers, group, topic) as two:
        again = await two.consume_until(10)
    assert sorted((r.offset(), r.delivery_count()) for r in again) == [(i, 2) for i in range(10)]


async def test_commit_async_reports_through_the_callback_in_a_later_call(
    anyio_backend: str,
    front: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    await _prepare(kafka_bootstrap_servers, group, topic, 5)
    answered: list[tuple[Mapping[TopicIdPartition, frozenset[int]], object]] = []
    async with member(
        front,
        anyio_backend,
        kafka_bootstrap_servers,
        group,
        topic,
        on_commit=lambda offsets, error: answered.append((offsets, error)),
        extra={"share.acknowledgement.mode": "explicit"},
    ) as one:
        got = await one.consume_until(5, ack=kgroup.AcknowledgeType.ACCEPT)
        await one.commit_async()
        with anyio.fail_after(WAIT):
            # The callback runs inside the application's calls: consume until it has.
            while {o for offsets, _ in answered for o in offsets_of(offsets)} != set(range(5)):
                assert await one.consume(10, 0.2) == []
    assert sorted(r.offset() for r in got) == list(range(5))
    assert all(error is None for _, error in answered)


def test_the_share_consumer_example_accepts_text_and_rejects_the_rest(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    values: list[tuple[bytes | None, bytes | None, None]] = [
        (None, f"text {i}".encode(), None) for i in range(5)
    ]
    values.insert(2, (None, b"\xff\xfe", None))
    produce_records(kafka_bootstrap_servers, topic, values)
    example = Path(__file__).resolve().parents[2] / "examples" / "share_consumer.py"
    args = [kafka_bootstrap_servers, topic, group, "--earliest", "--max-records", "5"]
    done = run_python(str(example), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "consumed 5 records" in done.stderr
    assert "rejecting 0@2" in done.stderr
    assert [line.split(": ", 1)[1] for line in done.stdout.splitlines()] == [
        f"text {i}" for i in range(5)
    ]


async def test_an_unreachable_cluster_never_hangs_consume_or_close(
    anyio_backend: str, front: str, make_group_id: MakeGroupId
) -> None:
    """Bootstrap is retried in the background (as the consumer does): consume waits
    its timeout and returns nothing, close returns at once."""
    unused = "127.0.0.1:1"
    with anyio.fail_after(20):
        async with member(front, anyio_backend, unused, make_group_id(), "t") as one:
            started = time.monotonic()
            assert await one.consume(10, 1.0) == []
            assert 0.9 <= time.monotonic() - started < 5.0
            started = time.monotonic()
            await one.close()
            assert time.monotonic() - started < 5.0


def test_bad_config_raises_config_error_naming_the_key() -> None:
    base = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
    with pytest.raises(kgroup.ConfigError, match="auto.offset.reset.*set_share_auto_offset_reset"):
        kgroup.ShareConsumer({**base, "auto.offset.reset": "earliest"})
    with pytest.raises(kgroup.ConfigError, match="group.protocol"):
        kgroup.AsyncShareConsumer({**base, "group.protocol": "consumer"})
    with pytest.raises(kgroup.ConfigError, match="share.acknowledgement.mode"):
        kgroup.ShareConsumer({**base, "share.acknowledgement.mode": "sometimes"})
    with pytest.raises(kgroup.ConfigError, match="fetch.max.wait"):
        kgroup.ShareConsumer({**base, "fetch.max.wait": 10})
    with pytest.raises(kgroup.ConfigError, match="group.id"):
        kgroup.ShareConsumer({"bootstrap.servers": "127.0.0.1:1"})
