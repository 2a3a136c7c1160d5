"""kgroup share members and Apache Kafka's ``KafkaShareConsumer``s in one share group.

On the real broker, members of both kinds share one topic: the Java members
run ``tests/peers/java/SharePeer.java`` (:mod:`peers.share_peer`), the kgroup
members run kgroup's share member and data path (:class:`KgroupMember`).
Checked: the work is shared (both kinds get records), nothing is lost, every
record is accepted, nothing is delivered twice in a calm run, and a record one
kind releases comes back to the other kind with a higher delivery count.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from confluent_kafka import Producer
from share_helpers import ShareDriver

from kgroup.admin.share import set_share_auto_offset_reset
from kgroup.dataplane.share.acknowledgements import AcknowledgeType
from kgroup.dataplane.share.inflight import AcknowledgementMode
from kgroup.dataplane.share.session import AcquireMode, FetchLimits
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport.client import KafkaClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from peers.share_peer import JavaSharePeer, SharedRecord, SharePeerGroup

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

# Joining takes two heartbeats (the broker assigns between them, 5 s apart by default).
WAIT = 60.0
ROUND = 100  # records produced per round of the mixed test


def produce_keys(bootstrap: str, topic: str, partitions: int, start: int, count: int) -> set[str]:
    """Produce records keyed ``k<i>`` for i in [start, start + count), round-robin over the
    partitions, waiting for every ack; their keys."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    keys = set()
    for i in range(start, start + count):
        key = f"k{i}"
        producer.produce(topic, b"v" * 100, key.encode(), partition=i % partitions)
        keys.add(key)
    assert producer.flush(30) == 0
    return keys


class KgroupMember:
    """A kgroup share member: a heartbeating :class:`ShareDriver` and a consume loop that
    acknowledges every record with ``kind`` (explicit mode) or lets the next fetch accept
    it (implicit mode), and commits after each batch."""

    def __init__(
        self,
        client: KafkaClient,
        group: str,
        name: str,
        mode: AcknowledgementMode,
        kind: AcknowledgeType = AcknowledgeType.ACCEPT,
    ) -> None:
        self.name = name
        self.mode = mode
        self.kind = kind if mode is AcknowledgementMode.EXPLICIT else AcknowledgeType.ACCEPT
        # A record limit per fetch, so one member does not take a whole round at once.
        limits = FetchLimits(max_wait_ms=300, max_records=25, acquire_mode=AcquireMode.RECORD_LIMIT)
        self.driver = ShareDriver(client, group, mode=mode, limits=limits)
        self.got: list[SharedRecord] = []

    async def consume(self, stop: anyio.Event, until: int | None = None) -> None:
        """Fetch, acknowledge and commit until ``stop`` is set (or ``until`` records came)."""
        while not stop.is_set() and (until is None or len(self.got) < until):
            if not self.driver.fetching:
                await anyio.sleep(0.05)  # polling cadence while unassigned, not a sync point
                continue
            records = await self.driver.fetch(25)
            for record in records:
                key = record.key()
                self.got.append(
                    SharedRecord(
                        self.name,
                        record.topic(),
                        record.partition(),
                        record.offset(),
                        record.delivery_count(),
                        None if key is None else key.decode(),
                        self.kind.name.lower(),
                        0,
                    )
                )
            if self.mode is AcknowledgementMode.EXPLICIT:
                self.driver.acknowledge(records, self.kind)
            # Acknowledgements go ahead of the next fetch (implicit: the batch just handed out).
            await self.driver.commit()

    def answered(self) -> set[tuple[int, int]]:
        """(partition, offset) of every record whose acknowledgement the broker applied."""
        done: set[tuple[int, int]] = set()
        for outcome in self.driver.results:
            if outcome.succeeded:
                done |= {(outcome.partition.partition, o) for o in outcome.offsets}
        return done


@asynccontextmanager
async def kgroup_members(
    client: KafkaClient, group: str, topic: str, members: Sequence[KgroupMember]
) -> AsyncIterator[Sequence[KgroupMember]]:
    """``members`` joined to ``group`` subscribed to ``topic``; closed on the way out."""
    async with anyio.create_task_group() as tg:
        for member in members:
            tg.start_soon(member.driver.run, [topic])
        with anyio.fail_after(WAIT):
            for member in members:
                await member.driver.wait_until(lambda m=member: bool(m.driver.fetching))  # type: ignore[misc]
        yield members
        with anyio.fail_after(WAIT):
            for member in members:
                await member.driver.close()
    for member in members:
        assert member.driver.fatal == []
        assert member.driver.partition_errors == []
        assert [o for o in member.driver.results if not o.succeeded] == []


def java_acked(peer: JavaSharePeer) -> int:
    """Offsets the member's acknowledgement-commit callback reported answered."""
    return sum(int(e.fields[0]) for e in peer.snapshot() if e.name == "acked")


async def test_kgroup_and_java_share_members_share_a_topic_and_lose_nothing(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    """Two kgroup and two Java share members (explicit and implicit acks each) on a
    2-partition topic: both kinds get records, every produced record is delivered and
    accepted, and, nobody's lock expiring, none is delivered twice."""
    bootstrap = kafka_bootstrap_servers
    topic, group = make_topic(partitions=2), make_group_id("share-mixed")
    async with KafkaClient(bootstrap) as client:
        await set_share_auto_offset_reset(client, group, "earliest")
        with SharePeerGroup(bootstrap) as peers:
            java = await anyio.to_thread.run_sync(
                lambda: peers.start_shares(
                    group,
                    ["explicit", "implicit"],
                    names=["java-explicit", "java-implicit"],
                    topic=topic,
                )
            )
            ours = [
                KgroupMember(client, group, "kgroup-explicit", AcknowledgementMode.EXPLICIT),
                KgroupMember(client, group, "kgroup-implicit", AcknowledgementMode.IMPLICIT),
            ]

            def delivered() -> list[SharedRecord]:
                return [r for m in ours for r in m.got] + peers.shared()

            produced: set[str] = set()
            async with kgroup_members(client, group, topic, ours):
                stop = anyio.Event()
                async with anyio.create_task_group() as tg:
                    for member in ours:
                        tg.start_soon(member.consume, stop)
                    # Whoever fetches first takes a round: produce rounds until both kinds
                    # got some, each round drained before the next.
                    with anyio.fail_after(3 * WAIT):
                        while True:
                            start = len(produced)
                            produced |= await anyio.to_thread.run_sync(
                                produce_keys, bootstrap, topic, 2, start, ROUND
                            )
                            while {r.key for r in delivered()} < produced:
                                await anyio.sleep(0.05)  # condition poll under fail_after
                            kinds = {r.member.split("-")[0] for r in delivered()}
                            if kinds == {"java", "kgroup"}:
                                break
                    stop.set()
            # Closing the Java members settles what they still owe (implicit: the last batch).
            for peer in java:
                await anyio.to_thread.run_sync(peer.close)

    records = delivered()
    assert {r.key for r in records} == produced, "a produced record was never delivered"
    by_member = Counter(r.member for r in records)
    assert {m.split("-")[0] for m in by_member} == {"java", "kgroup"}, by_member
    twice = [k for k, n in Counter((r.partition, r.offset) for r in records).items() if n > 1]
    assert twice == [], f"delivered twice with no lock expiring: {twice}"
    assert {r.delivery_count for r in records} == {1}
    for member in ours:
        # The member acknowledged with ACCEPT only (implicit: by the rule), all applied.
        assert member.answered() >= {(r.partition, r.offset) for r in member.got}, member.name
    for peer in java:
        assert peer.commit_failures() == [], peer.name
        assert {r.ack for r in peer.shared()} <= {"accept"}
        assert java_acked(peer) == peer.record_count(), f"{peer.name} left records unacknowledged"


async def test_records_released_by_one_kind_come_back_to_the_other_with_a_higher_count(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    """A Java member releases 20 records and leaves; a kgroup member gets them with delivery
    count 2 or more, releases them and leaves; a Java member gets them with one more."""
    bootstrap = kafka_bootstrap_servers
    total = 20
    topic, group = make_topic(partitions=1), make_group_id("share-release")
    async with KafkaClient(bootstrap) as client:
        await set_share_auto_offset_reset(client, group, "earliest")
        keys = await anyio.to_thread.run_sync(produce_keys, bootstrap, topic, 1, 0, total)
        with SharePeerGroup(bootstrap) as peers:

            def java_releases() -> JavaSharePeer:
                (peer,) = peers.start_shares(group, ["explicit"], names=["java-release"])
                peer.ack("release")
                peer.limit(total)
                peer.subscribe(topic)
                peer.wait_consumed(WAIT)
                # Closing settles the releases, and releases anything fetched meanwhile.
                peer.close()
                return peer

            first = await anyio.to_thread.run_sync(java_releases)
            ours = KgroupMember(
                client,
                group,
                "kgroup-release",
                AcknowledgementMode.EXPLICIT,
                AcknowledgeType.RELEASE,
            )
            async with kgroup_members(client, group, topic, [ours]):
                with anyio.fail_after(WAIT):
                    await ours.consume(anyio.Event(), until=total)

            def java_accepts() -> JavaSharePeer:
                (peer,) = peers.start_shares(
                    group, ["implicit"], names=["java-accept"], topic=topic, budget=total
                )
                peer.wait_consumed(WAIT)
                peer.close()
                return peer

            last = await anyio.to_thread.run_sync(java_accepts)

    def counts(records: Sequence[SharedRecord]) -> dict[str, int]:
        return {r.key or "": r.delivery_count for r in records}

    assert counts(first.shared()) == dict.fromkeys(keys, 1)
    assert {r.ack for r in first.shared()} == {"release"}
    # At least 2, not exactly: KafkaShareConsumer fetches ahead of poll, so its next
    # ShareFetch may acquire the released records again (count 2) before close hands
    # them back unseen. Every acquisition counts, whoever makes it.
    middle = counts(ours.got)
    assert middle.keys() == keys
    assert min(middle.values()) >= 2, middle
    assert {r.ack for r in ours.got} == {"release"}
    assert ours.answered() == {(0, o) for o in range(total)}, "a release was not applied"
    # The kgroup member fetches only when asked, so nothing acquires them in between.
    assert counts(last.shared()) == {key: n + 1 for key, n in middle.items()}
    for peer in (first, last):
        assert peer.commit_failures() == [], peer.name


async def test_records_rejected_by_java_never_reach_a_kgroup_member(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    """A Java member rejects 10 records and leaves; 10 more are produced: a kgroup member
    gets those 10 only (the broker hands out the lowest available offsets first, so a
    rejected record still available would have come first)."""
    bootstrap = kafka_bootstrap_servers
    total = 10
    topic, group = make_topic(partitions=1), make_group_id("share-reject")
    async with KafkaClient(bootstrap) as client:
        await set_share_auto_offset_reset(client, group, "earliest")
        rejected = await anyio.to_thread.run_sync(produce_keys, bootstrap, topic, 1, 0, total)
        with SharePeerGroup(bootstrap) as peers:

            def java_rejects() -> JavaSharePeer:
                (peer,) = peers.start_shares(group, ["explicit"], names=["java-reject"])
                peer.ack("reject")
                peer.limit(total)
                peer.subscribe(topic)
                peer.wait_consumed(WAIT)
                peer.close()
                return peer

            first = await anyio.to_thread.run_sync(java_rejects)
        later = await anyio.to_thread.run_sync(produce_keys, bootstrap, topic, 1, total, total)
        ours = KgroupMember(client, group, "kgroup-accept", AcknowledgementMode.EXPLICIT)
        async with kgroup_members(client, group, topic, [ours]):
            with anyio.fail_after(WAIT):
                await ours.consume(anyio.Event(), until=total)

    assert {r.key: r.ack for r in first.shared()} == dict.fromkeys(rejected, "reject")
    assert first.commit_failures() == []
    assert {r.key: r.delivery_count for r in ours.got} == dict.fromkeys(later, 1)
