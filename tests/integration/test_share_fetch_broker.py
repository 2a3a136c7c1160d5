"""The share data path against a real broker: ShareFetch and ShareAcknowledge on the wire.

Share members (:class:`share_helpers.ShareDriver`: a ShareMember heartbeating in
its own task, ShareSession, InFlight and the request modules) fetch and
acknowledge records; the broker's answers are checked: every record delivered
once, released records back with delivery count 2, rejected ones never, an
unacknowledged record back to another member after its lock expires, every
codec decoded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest
from share_helpers import ShareDriver, produce_records

from kgroup.admin.share import LOCK_DURATION, set_share_auto_offset_reset, set_share_group_config
from kgroup.dataplane.share.acknowledgements import AcknowledgeType
from kgroup.dataplane.share.inflight import AcknowledgementMode
from kgroup.dataplane.share.records import ShareRecord
from kgroup.dataplane.share.session import AcquireMode, FetchLimits
from kgroup.error_codes import ErrorCode
from kgroup.errors import GroupConfigRefusedError
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport.client import KafkaClient
from kgroup.types import TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

# Joining takes two heartbeats (the broker assigns between them, 5 s apart by default).
WAIT = 60.0


@asynccontextmanager
async def members(
    client: KafkaClient,
    group: str,
    topic: str,
    count: int,
    *,
    mode: AcknowledgementMode = AcknowledgementMode.EXPLICIT,
    limits: FetchLimits | None = None,
) -> AsyncIterator[list[ShareDriver]]:
    """``count`` share members of ``group`` subscribed to ``topic``, each fetching its
    partition 0, closed on the way out."""
    drivers = [ShareDriver(client, group, mode=mode, limits=limits) for _ in range(count)]
    async with anyio.create_task_group() as tg:
        for driver in drivers:
            tg.start_soon(driver.run, [topic])
        with anyio.fail_after(WAIT):
            for driver in drivers:
                await driver.wait_until(
                    lambda d=driver: TopicPartition(topic, 0) in d.fetching  # type: ignore[misc]
                )
        yield drivers
        with anyio.fail_after(WAIT):
            for driver in drivers:
                await driver.close()
    for driver in drivers:
        assert driver.fatal == []
        assert driver.partition_errors == []


async def fetch_until(
    driver: ShareDriver, condition: Callable[[list[ShareRecord]], bool]
) -> list[ShareRecord]:
    """Fetch (handing each poll's records to ``condition``'s list) until it holds."""
    got: list[ShareRecord] = []
    while not condition(got):
        got += await driver.fetch()
    return got


def _values(count: int, prefix: str = "r") -> list[tuple[bytes, bytes, None]]:
    return [(f"k{i}".encode(), f"{prefix}{i}".encode(), None) for i in range(count)]


async def test_two_members_share_a_partition_each_record_delivered_once(
    anyio_backend: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    total = 200
    # A strict record limit makes each fetch acquire 10, so both members get some.
    limits = FetchLimits(max_wait_ms=300, max_records=10, acquire_mode=AcquireMode.RECORD_LIMIT)
    async with KafkaClient(kafka_bootstrap_servers) as client:
        await set_share_auto_offset_reset(client, group, "earliest")
        await anyio.to_thread.run_sync(
            lambda: produce_records(kafka_bootstrap_servers, topic, _values(total))
        )
        async with members(client, group, topic, 2, limits=limits) as drivers:
            got: dict[int, list[ShareRecord]] = {0: [], 1: []}
            with anyio.fail_after(WAIT):
                while sum(len(v) for v in got.values()) < total:
                    for i, driver in enumerate(drivers):
                        records = await driver.fetch()
                        assert len(records) <= 10
                        driver.acknowledge(records, AcknowledgeType.ACCEPT)
                        got[i] += records
                for driver in drivers:
                    await driver.commit()
    offsets = sorted(r.offset() for records in got.values() for r in records)
    assert offsets == list(range(total))  # every record, none twice
    assert got[0]
    assert got[1]
    every = got[0] + got[1]
    assert {r.delivery_count() for r in every} == {1}
    assert {r.value() for r in every} == {f"r{i}".encode() for i in range(total)}
    for driver in drivers:
        assert driver.results
        assert all(o.succeeded for o in driver.results), driver.results


async def test_a_released_record_comes_back_with_delivery_count_two(
    anyio_backend: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    async with KafkaClient(kafka_bootstrap_servers) as client:
        await set_share_auto_offset_reset(client, group, "earliest")
        await anyio.to_thread.run_sync(
            lambda: produce_records(kafka_bootstrap_servers, topic, _values(5))
        )
        async with members(client, group, topic, 1) as (driver,):
            with anyio.fail_after(WAIT):
                first = await fetch_until(driver, lambda got: len(got) >= 5)
                driver.acknowledge(first, AcknowledgeType.RELEASE)
                again = await fetch_until(driver, lambda got: len(got) >= 5)
                driver.acknowledge(again, AcknowledgeType.ACCEPT)
                await driver.commit()
    assert [(r.offset(), r.delivery_count()) for r in first] == [(i, 1) for i in range(5)]
    assert [(r.offset(), r.delivery_count()) for r in again] == [(i, 2) for i in range(5)]
    assert [r.value() for r in again] == [f"r{i}".encode() for i in range(5)]
    assert driver.results
    assert all(o.succeeded for o in driver.results)


async def test_a_rejected_record_never_comes_back(
    anyio_backend: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    async with KafkaClient(kafka_bootstrap_servers) as client:
        await set_share_auto_offset_reset(client, group, "earliest")
        await anyio.to_thread.run_sync(
            lambda: produce_records(kafka_bootstrap_servers, topic, _values(6))
        )
        async with members(client, group, topic, 1) as (driver,):
            with anyio.fail_after(WAIT):
                first = await fetch_until(driver, lambda got: len(got) >= 6)
                driver.acknowledge(first[:3], AcknowledgeType.REJECT)
                driver.acknowledge(first[3:], AcknowledgeType.RELEASE)
                # Released records come back at the next fetches, in offset order; a
                # rejected record that came back would come with them or before them.
                again = await fetch_until(driver, lambda got: len(got) >= 3)
                driver.acknowledge(again, AcknowledgeType.ACCEPT)
                # Nothing is left to acquire: a further fetch brings nothing back.
                after = await driver.fetch()
                await driver.commit()
    assert [r.offset() for r in first] == list(range(6))
    assert [(r.offset(), r.delivery_count()) for r in again] == [(3, 2), (4, 2), (5, 2)]
    assert after == ()
    assert driver.results
    assert all(o.succeeded for o in driver.results)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_unacknowledged_record_goes_to_another_member_when_its_lock_expires(
    anyio_backend: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    async with KafkaClient(kafka_bootstrap_servers) as client:
        await set_share_auto_offset_reset(client, group, "earliest")
        # The broker bounds a group's lock by group.share.min.record.lock.duration.ms
        # (15 s by default, 1 s on the harness's broker) and says so when asked for less.
        with pytest.raises(GroupConfigRefusedError, match="1000") as refused:
            await set_share_group_config(client, group, LOCK_DURATION, "500")
        assert refused.value.key == LOCK_DURATION
        assert (refused.value.error.code, refused.value.error.name) == (40, "INVALID_CONFIG")
        await set_share_group_config(client, group, LOCK_DURATION, "3000")
        await anyio.to_thread.run_sync(
            lambda: produce_records(kafka_bootstrap_servers, topic, _values(3))
        )
        async with members(client, group, topic, 2) as (holder, other):
            with anyio.fail_after(WAIT):
                held = await fetch_until(holder, lambda got: len(got) >= 3)
                acquired_at = anyio.current_time()
                # The other member finds nothing until the holder's lock expires.
                taken = await fetch_until(other, lambda got: len(got) >= 3)
                taken_after = anyio.current_time() - acquired_at
                # The holder's late acknowledgement is refused: the other member holds them.
                holder.acknowledge(held, AcknowledgeType.ACCEPT)
                late = await holder.commit()
                other.acknowledge(taken, AcknowledgeType.ACCEPT)
                await other.commit()
    assert holder.lock_timeouts_ms[-1] == 3_000
    assert [(r.offset(), r.delivery_count()) for r in held] == [(0, 1), (1, 1), (2, 1)]
    assert [(r.offset(), r.delivery_count()) for r in taken] == [(0, 2), (1, 2), (2, 2)]
    assert taken_after > 2.0
    assert [o.error_code for o in late] == [ErrorCode.INVALID_RECORD_STATE]
    assert other.results
    assert all(o.succeeded for o in other.results)


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


async def test_every_codecs_batches_decode(
    anyio_backend: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    per = 20
    async with KafkaClient(kafka_bootstrap_servers) as client:
        await set_share_auto_offset_reset(client, group, "earliest")
        for codec in CODECS:
            records = [
                (
                    f"{codec}-{i}".encode(),
                    (codec * 50).encode() + bytes([i]),
                    [("codec", codec.encode()), ("i", str(i).encode())],
                )
                for i in range(per)
            ]
            await anyio.to_thread.run_sync(
                lambda r=records, c=codec: produce_records(  # type: ignore[misc]
                    kafka_bootstrap_servers, topic, r, compression_type=c
                )
            )
        implicit = AcknowledgementMode.IMPLICIT
        async with members(client, group, topic, 1, mode=implicit) as (driver,):
            with anyio.fail_after(WAIT):
                got = await fetch_until(driver, lambda got: len(got) >= per * len(CODECS))
                await driver.commit()
    assert [r.offset() for r in got] == list(range(per * len(CODECS)))
    for record in got:
        key = record.key()
        assert key is not None
        codec, i = key.decode().rsplit("-", 1)
        assert record.value() == (codec * 50).encode() + bytes([int(i)])
        assert record.headers() == [("codec", codec.encode()), ("i", i.encode())]
        assert record.delivery_count() == 1
        assert record.timestamp()[1] > 1_700_000_000_000
    assert driver.results
    assert all(o.succeeded for o in driver.results)
