"""Share groups against the real broker, on every front end: the queue's promises.

More members than partitions all get work; a record whose acquisition lock
runs out goes to another member with its delivery count raised; a member
killed in the middle of a batch loses nothing. Each scenario runs on
:class:`kgroup.ShareConsumer` (threads) and :class:`kgroup.AsyncShareConsumer`
on asyncio and on trio (:mod:`share_fronts`). The harness's broker lets a
group's record lock be as short as 1 s (``group.share.min.record.lock.duration.ms``),
so lock expiry is waited for in seconds.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from confluent_kafka import Producer
from share_fronts import FRONTS, Member, backend_of, open_member, prepare_group, share_config

import kgroup
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration

WAIT = 60.0
CHILD = Path(__file__).with_name("share_member_process.py")


@pytest.fixture(params=FRONTS)
def front(request: pytest.FixtureRequest) -> str:
    chosen: str = request.param
    return chosen


@pytest.fixture
def anyio_backend(front: str) -> str:
    return backend_of(front)


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    """Produce ``values`` to partition 0, each in a batch of its own (flushed one by one),
    so that no single fetch can acquire them all at once."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value.encode(), partition=0)
        assert producer.flush(30) == 0


def _values(member: Member) -> list[str]:
    return [bytes(r.value() or b"").decode() for r in member.received]


async def test_more_members_than_partitions_all_receive_records(
    front: str,
    anyio_backend: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    await prepare_group(kafka_bootstrap_servers, group)
    config = share_config(kafka_bootstrap_servers, group, max_poll_records=5)
    produced: list[str] = []
    async with (
        open_member(front, config, [topic]) as one,
        open_member(front, config, [topic]) as two,
        open_member(front, config, [topic]) as three,
    ):
        members = (one, two, three)
        with anyio.fail_after(WAIT):
            for member in members:
                await member.wait_assigned()
            # One partition, three members: all hold it.
            assert all(m.assignment() == {kgroup.TopicPartition(topic, 0)} for m in members)

            def everyone_served() -> bool:
                return all(m.received for m in members)

            def all_consumed() -> bool:
                seen = {v for m in members for v in _values(m)}
                return seen >= set(produced)

            def finished() -> bool:
                return everyone_served() and all_consumed()

            async with anyio.create_task_group() as tg:
                for member in members:
                    tg.start_soon(functools.partial(member.consume_until, finished, num_messages=5))
                # Rounds of records until every member got some: which waiting
                # fetch the broker answers first is its choice, not the test's.
                while not everyone_served():
                    batch = [f"{topic}:{len(produced) + i}" for i in range(10)]
                    produced += batch
                    await anyio.to_thread.run_sync(_produce, kafka_bootstrap_servers, topic, batch)
                    while not all_consumed():
                        await anyio.sleep(0.05)
            # Implicit mode: commit() accepts the last batch each member got.
            results = [await m.commit() for m in members]
    got = [v for m in members for v in _values(m)]
    assert sorted(got) == sorted(produced), "every record once, none lost, none twice"
    assert all(m.received for m in members)
    assert all(error is None for result in results for error in result.values())


async def test_an_unacknowledged_record_goes_to_another_member_when_its_lock_expires(
    front: str,
    anyio_backend: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    await prepare_group(kafka_bootstrap_servers, group, lock_ms=2000)
    values = [f"{topic}:{i}" for i in range(3)]
    await anyio.to_thread.run_sync(_produce, kafka_bootstrap_servers, topic, values)
    explicit = share_config(kafka_bootstrap_servers, group, share_acknowledgement_mode="explicit")
    async with (
        open_member(front, explicit, [topic]) as holder,
        open_member(front, explicit, [topic]) as other,
    ):
        with anyio.fail_after(WAIT):
            # The holder takes one batch and sits on it (explicit mode: no
            # further consume() until it is acknowledged).
            await holder.consume_until(lambda: bool(holder.received))
            acquired_at = anyio.current_time()
            held = {r.offset() for r in holder.received}
            # The other member gets the rest at once, the holder's records only
            # once the holder's lock ran out.
            seen: dict[int, tuple[int, float]] = {}
            batches: list[list[kgroup.ShareRecord]] = []
            while not held <= set(seen):
                if batches:  # explicit mode: the last batch settled before the next
                    for record in batches[-1]:
                        other.acknowledge(record, kgroup.AcknowledgeType.ACCEPT)
                batches.append(await other.consume(10, 0.2))
                for record in batches[-1]:
                    waited = anyio.current_time() - acquired_at
                    seen[record.offset()] = (record.delivery_count(), waited)
            # The holder's acknowledgement comes too late: the other member holds
            # the records now.
            for record in holder.received:
                holder.acknowledge(record, kgroup.AcknowledgeType.ACCEPT)
            late = await holder.commit()
            for record in batches[-1]:
                other.acknowledge(record, kgroup.AcknowledgeType.ACCEPT)
            accepted = await other.commit()
    assert all(r.delivery_count() == 1 for r in holder.received)
    for offset in held:
        count, waited = seen[offset]
        # The second delivery: the holder, sitting on its batch, fetched no more.
        assert count == 2, f"offset {offset} came back as delivery {count}"
        assert waited > 1.0, f"offset {offset} came back after {waited:.2f} s, under the lock"
    assert list(accepted.values()) == [None]
    assert late, "the late acknowledgement has a result"
    assert all(isinstance(e, kgroup.KgroupError) for e in late.values()), late


async def test_a_member_killed_mid_batch_loses_nothing(
    front: str,
    anyio_backend: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    await prepare_group(kafka_bootstrap_servers, group, lock_ms=2000)
    values = [f"{topic}:{i}" for i in range(20)]
    await anyio.to_thread.run_sync(_produce, kafka_bootstrap_servers, topic, values)
    spec = {
        "conf": share_config(kafka_bootstrap_servers, group),
        "topics": [topic],
        "want": 10,
    }
    child = subprocess.Popen(
        [sys.executable, str(CHILD), front, json.dumps(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(CHILD.parent)},
    )
    try:
        assert child.stdout is not None
        stdout = child.stdout
        with anyio.fail_after(WAIT):
            line = await anyio.to_thread.run_sync(stdout.readline)
        held = {offset for _, offset in json.loads(line)["offsets"]}
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    assert held, "the child reported the records it held"
    config = share_config(kafka_bootstrap_servers, group, share_acknowledgement_mode="explicit")
    async with open_member(front, config, [topic]) as survivor:
        with anyio.fail_after(WAIT):
            while {r.offset() for r in survivor.received} < set(range(len(values))):
                for record in await survivor.consume(100, 0.2):
                    survivor.acknowledge(record, kgroup.AcknowledgeType.ACCEPT)
            results = await survivor.commit()
    counts = {r.offset(): r.delivery_count() for r in survivor.received}
    assert sorted(counts) == list(range(len(values))), "every record reached the survivor"
    assert len(survivor.received) == len(values), "and once"
    # The killed member's records came back after its lock ran out (with any
    # it had fetched and not yet handed out).
    assert held <= {o for o, n in counts.items() if n == 2}
    assert all(n <= 2 for n in counts.values())
    assert all(error is None for error in results.values())


async def test_a_renewed_lock_keeps_records_from_the_other_members(
    front: str,
    anyio_backend: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic, group = make_topic(partitions=1), make_group_id()
    await prepare_group(kafka_bootstrap_servers, group, lock_ms=2000)
    values = [f"{topic}:{i}" for i in range(3)]
    await anyio.to_thread.run_sync(_produce, kafka_bootstrap_servers, topic, values)
    explicit = share_config(kafka_bootstrap_servers, group, share_acknowledgement_mode="explicit")
    async with (
        open_member(front, explicit, [topic]) as holder,
        open_member(front, explicit, [topic]) as other,
    ):
        with anyio.fail_after(WAIT):
            await holder.consume_until(lambda: bool(holder.received))
            held = {r.offset() for r in holder.received}
            renewals = []
            # Work that outlasts the 2 s lock three times over, renewing it each second
            # (KIP-1222): the records stay the holder's.
            for _ in range(6):
                for record in holder.received:
                    holder.acknowledge(record, kgroup.AcknowledgeType.RENEW)
                renewals.append(await holder.commit())
                for record in await other.consume(10, 1.0):
                    other.acknowledge(record, kgroup.AcknowledgeType.ACCEPT)
            stolen = {r.offset() for r in other.received} & held
            for record in holder.received:
                holder.acknowledge(record, kgroup.AcknowledgeType.ACCEPT)
            accepted = await holder.commit()
    assert all(e is None for result in renewals for e in result.values()), renewals
    assert stolen == set(), "no renewed record reached the other member"
    assert all(r.delivery_count() == 1 for r in holder.received)
    assert list(accepted.values()) == [None]
