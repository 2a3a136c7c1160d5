"""kgroup share consumers and Apache Kafka's ``KafkaShareConsumer``s in one share group.

On the real broker, members of both kinds share one topic: the Java members
run ``tests/peers/java/SharePeer.java`` (:mod:`peers.share_peer`), the kgroup
members are ``kgroup.ShareConsumer`` (each on a thread of its own) or
``kgroup.AsyncShareConsumer`` (tasks on the test's event loop, asyncio and
trio). Checked: the work is shared (both kinds get records), nothing is lost,
every record is accepted, nothing is delivered twice in a calm run, and a
record one kind releases comes back to the other kind with a higher delivery
count.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from confluent_kafka import Producer

import kgroup
from kgroup.admin.share import set_share_auto_offset_reset
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport.client import KafkaClient
from kgroup.types import TopicIdPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from peers.share_peer import JavaSharePeer, SharedRecord, SharePeerGroup

pytestmark = pytest.mark.integration

# Joining takes two heartbeats (the broker assigns between them, 5 s apart by default).
WAIT = 60.0
ROUND = 100  # records produced per round of the mixed test
BATCH = 25  # max.poll.records: small, so one member does not take a whole round at once

Mode = Literal["implicit", "explicit"]


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


async def earliest(bootstrap: str, group: str) -> None:
    async with KafkaClient(bootstrap) as client:
        await set_share_auto_offset_reset(client, group, "earliest")


def set_earliest(bootstrap: str, group: str) -> None:
    anyio.run(earliest, bootstrap, group)


class Member:
    """What a kgroup member got and what the broker answered for its acknowledgements.

    Explicit mode: every record is acknowledged with ``kind``; implicit mode: the
    next consume accepts it. Either way the member commits after each batch."""

    def __init__(
        self, bootstrap: str, group: str, name: str, mode: Mode, kind: str = "accept"
    ) -> None:
        self.name = name
        self.mode = mode
        self.kind = kind if mode == "explicit" else "accept"
        self.config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": mode,
            "max.poll.records": BATCH,
        }
        self.got: list[SharedRecord] = []
        self.applied: set[tuple[int, int]] = set()
        self.failures: list[kgroup.KgroupError] = []
        self.joined = False

    def on_commit(
        self, offsets: Mapping[TopicIdPartition, frozenset[int]], error: kgroup.KgroupError | None
    ) -> None:
        if error is not None:
            self.failures.append(error)
            return
        for tp, done in offsets.items():
            self.applied |= {(tp.partition, o) for o in done}

    def took(self, records: Sequence[Any]) -> None:
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
                    self.kind,
                    time.monotonic_ns(),
                )
            )

    def keys(self) -> set[str]:
        return {r.key or "" for r in self.got}


class ThreadMember(Member):
    """A ``kgroup.ShareConsumer`` driven by a thread of its own, from creation to close."""

    def start(self, topic: str, until: Callable[[Member], bool] | None = None) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(topic, until), name=self.name)
        self.thread.start()

    def _run(self, topic: str, until: Callable[[Member], bool] | None) -> None:
        try:
            with kgroup.ShareConsumer(self.config, on_acknowledgement_commit=self.on_commit) as c:
                c.subscribe([topic])
                while not self.stop.is_set() and not (until and until(self)):
                    records = c.consume(BATCH, 0.2)
                    self.joined = self.joined or bool(c.assignment())
                    self.took(records)
                    if self.mode == "explicit":
                        for record in records:
                            c.acknowledge(record, kgroup.AcknowledgeType[self.kind.upper()])
                    if records:
                        c.commit()
        except BaseException as exc:
            self.error = exc

    def finish(self) -> None:
        """Stop consuming, close (settling what is owed) and re-raise what the thread raised."""
        self.stop.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), f"{self.name} did not close within {WAIT} s"
        if self.error is not None:
            raise self.error


class TaskMember(Member):
    """A ``kgroup.AsyncShareConsumer`` in a task on the test's event loop."""

    async def run(
        self, topic: str, stop: anyio.Event, until: Callable[[Member], bool] | None = None
    ) -> None:
        async with kgroup.AsyncShareConsumer(
            self.config, on_acknowledgement_commit=self.on_commit
        ) as c:
            await c.subscribe([topic])
            while not stop.is_set() and not (until and until(self)):
                records = await c.consume(BATCH, 0.2)
                self.joined = self.joined or bool(c.assignment())
                self.took(records)
                if self.mode == "explicit":
                    for record in records:
                        c.acknowledge(record, kgroup.AcknowledgeType[self.kind.upper()])
                if records:
                    await c.commit()


def java_acked(peer: JavaSharePeer) -> int:
    """Offsets the member's acknowledgement-commit callback reported answered."""
    return sum(int(e.fields[0]) for e in peer.snapshot() if e.name == "acked")


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(0.05)  # condition poll under a deadline


def check_shared(ours: Sequence[Member], java: Sequence[JavaSharePeer], produced: set[str]) -> None:
    """Both kinds got records, the union is what was produced, each delivered once and
    acknowledged as its member meant."""
    records = [r for m in ours for r in m.got] + [r for p in java for r in p.shared()]
    assert {r.key for r in records} == produced, "a produced record was never delivered"
    by_member = Counter(r.member for r in records)
    assert {m.split("-")[0] for m in by_member} == {"java", "kgroup"}, by_member
    twice = [k for k, n in Counter((r.partition, r.offset) for r in records).items() if n > 1]
    assert twice == [], f"delivered twice with no lock expiring: {twice}"
    assert {r.delivery_count for r in records} == {1}
    for member in ours:
        assert member.failures == [], member.name
        # ACCEPT only (implicit: by the rule), every one applied.
        assert member.applied >= {(r.partition, r.offset) for r in member.got}, member.name
    for peer in java:
        assert peer.commit_failures() == [], peer.name
        assert {r.ack for r in peer.shared()} <= {"accept"}
        assert java_acked(peer) == peer.record_count(), f"{peer.name} left records unacknowledged"


def produce_until_shared(
    bootstrap: str,
    topic: str,
    delivered: Callable[[], list[SharedRecord]],
    produced: set[str],
    deadline: float,
) -> None:
    """Whoever fetches first takes a round: produce rounds until both kinds got some,
    each round delivered before the next."""
    while True:
        assert time.monotonic() < deadline, "both kinds never got records: " + str(
            Counter(r.member for r in delivered())
        )
        produced |= produce_keys(bootstrap, topic, 2, len(produced), ROUND)
        while {r.key for r in delivered()} < produced:
            assert time.monotonic() < deadline, "produced records were not delivered in time"
            time.sleep(0.05)  # condition poll under a deadline
        if {r.member.split("-")[0] for r in delivered()} == {"java", "kgroup"}:
            return


def test_share_consumers_on_threads_and_java_share_a_topic_and_lose_nothing(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    """Two ``kgroup.ShareConsumer``s and two Java share members (explicit and implicit
    acks each) on a 2-partition topic: both kinds get records, every produced record is
    delivered and accepted, and, nobody's lock expiring, none is delivered twice."""
    bootstrap = kafka_bootstrap_servers
    topic, group = make_topic(partitions=2), make_group_id("share-mixed")
    set_earliest(bootstrap, group)
    ours = [
        ThreadMember(bootstrap, group, "kgroup-explicit", "explicit"),
        ThreadMember(bootstrap, group, "kgroup-implicit", "implicit"),
    ]
    produced: set[str] = set()
    with SharePeerGroup(bootstrap) as peers:
        java = peers.start_shares(
            group, ["explicit", "implicit"], names=["java-explicit", "java-implicit"], topic=topic
        )
        for member in ours:
            member.start(topic)
        try:
            wait_for(lambda: all(m.joined for m in ours), WAIT, "the kgroup members to join")
            produce_until_shared(
                bootstrap,
                topic,
                lambda: [r for m in ours for r in m.got] + peers.shared(),
                produced,
                time.monotonic() + 3 * WAIT,
            )
        finally:
            for member in ours:
                member.finish()
        for peer in java:  # closing settles what they still owe (implicit: the last batch)
            peer.close()
    check_shared(ours, java, produced)


@pytest.mark.anyio
async def test_async_share_consumers_and_java_share_a_topic_and_lose_nothing(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    """As the threads' test, with two ``kgroup.AsyncShareConsumer``s on the test's loop."""
    bootstrap = kafka_bootstrap_servers
    topic, group = make_topic(partitions=2), make_group_id("share-mixed-async")
    await earliest(bootstrap, group)
    ours = [
        TaskMember(bootstrap, group, "kgroup-explicit", "explicit"),
        TaskMember(bootstrap, group, "kgroup-implicit", "implicit"),
    ]
    produced: set[str] = set()
    with SharePeerGroup(bootstrap) as peers:
        java = await anyio.to_thread.run_sync(
            lambda: peers.start_shares(
                group,
                ["explicit", "implicit"],
                names=["java-explicit", "java-implicit"],
                topic=topic,
            )
        )
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            for member in ours:
                tg.start_soon(member.run, topic, stop)
            with anyio.fail_after(WAIT):
                while not all(m.joined for m in ours):
                    await anyio.sleep(0.05)  # condition poll under fail_after
            await anyio.to_thread.run_sync(
                lambda: produce_until_shared(
                    bootstrap,
                    topic,
                    lambda: [r for m in ours for r in m.got] + peers.shared(),
                    produced,
                    time.monotonic() + 3 * WAIT,
                )
            )
            stop.set()
        for peer in java:
            await anyio.to_thread.run_sync(peer.close)
    check_shared(ours, java, produced)


def test_records_released_by_one_kind_come_back_to_the_other_with_a_higher_count(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    """A Java member releases 20 records and leaves; a ``kgroup.ShareConsumer`` gets them
    with delivery count 2 or more, releases them and leaves; a Java member gets them with
    a higher count still."""
    bootstrap = kafka_bootstrap_servers
    total = 20
    topic, group = make_topic(partitions=1), make_group_id("share-release")
    set_earliest(bootstrap, group)
    keys = produce_keys(bootstrap, topic, 1, 0, total)
    with SharePeerGroup(bootstrap) as peers:
        (first,) = peers.start_shares(group, ["explicit"], names=["java-release"])
        first.ack("release")
        first.limit(total)
        first.subscribe(topic)
        first.wait_consumed(WAIT)
        # Closing settles the releases, and releases anything fetched meanwhile.
        first.close()

        ours = ThreadMember(bootstrap, group, "kgroup-release", "explicit", "release")
        ours.start(topic, until=lambda m: m.keys() == keys)
        ours.thread.join(WAIT)
        ours.finish()

        (last,) = peers.start_shares(
            group, ["implicit"], names=["java-accept"], topic=topic, budget=total
        )
        last.wait_consumed(WAIT)
        last.close()

    assert {r.key: r.delivery_count for r in first.shared()} == dict.fromkeys(keys, 1)
    assert {r.ack for r in first.shared()} == {"release"}
    # At least 2, not exactly: a share consumer fetches ahead of the application, so
    # a member's next ShareFetch may acquire released records again before its close
    # hands them back unseen. Every acquisition counts, whoever makes it.
    seen: dict[str, int] = {}
    for record in ours.got:
        seen[record.key or ""] = max(seen.get(record.key or "", 0), record.delivery_count)
    assert seen.keys() == keys
    assert min(seen.values()) >= 2, seen
    assert ours.failures == []
    assert ours.applied >= {(0, o) for o in range(total)}, "a release was not applied"
    back = {r.key or "": r.delivery_count for r in last.shared()}
    assert back.keys() == keys
    assert all(back[k] > seen[k] for k in keys), (seen, back)
    for peer in (first, last):
        assert peer.commit_failures() == [], peer.name


def test_records_rejected_by_java_never_reach_a_kgroup_member(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    """A Java member rejects 10 records and leaves; 10 more are produced: a
    ``kgroup.ShareConsumer`` gets those 10 only (the broker hands out the lowest
    available offsets first, so a rejected record still available would have come first)."""
    bootstrap = kafka_bootstrap_servers
    total = 10
    topic, group = make_topic(partitions=1), make_group_id("share-reject")
    set_earliest(bootstrap, group)
    rejected = produce_keys(bootstrap, topic, 1, 0, total)
    with SharePeerGroup(bootstrap) as peers:
        (first,) = peers.start_shares(group, ["explicit"], names=["java-reject"])
        first.ack("reject")
        first.limit(total)
        first.subscribe(topic)
        first.wait_consumed(WAIT)
        first.close()
    later = produce_keys(bootstrap, topic, 1, total, total)
    ours = ThreadMember(bootstrap, group, "kgroup-accept", "explicit")
    ours.start(topic, until=lambda m: len(m.got) >= total)
    ours.thread.join(WAIT)
    ours.finish()

    assert {r.key: r.ack for r in first.shared()} == dict.fromkeys(rejected, "reject")
    assert first.commit_failures() == []
    assert {r.key: r.delivery_count for r in ours.got} == dict.fromkeys(later, 1)
    assert ours.failures == []
