"""kgroup in consumer groups with members written by others, on a real broker.

The peers (``tests/peers``) are processes: ``kgroup.Consumer``, confluent-kafka's
librdkafka consumer and Apache Kafka's Java ``KafkaConsumer``, all with
``group.protocol=consumer``, in the same group on the same topic. The session
broker runs the harness's fast settings (heartbeat 0.5 s, session 6 s, no
assignment batching) and the broker's default ``uniform`` assignor.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from helpers import produce

from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from peers import Peer, PeerGroup, balanced, check_exclusive

pytestmark = pytest.mark.integration

Record = tuple[int, int]  # (partition, offset)


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (admin OffsetFetch, outside the group); negative: none."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [CkTopicPartition(topic, p) for p in range(partitions)]
    )
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def consumed(peers: list[Peer]) -> Counter[Record]:
    """How often each record was handed out, across the members."""
    return Counter((p, o) for peer in peers for p, o, _ in peer.records())


def expected(partitions: int, per_partition: int) -> set[Record]:
    return {(p, o) for p in range(partitions) for o in range(per_partition)}


def test_mixed_group_converges_to_disjoint_assignments_and_consumes_everything_once(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    """Two members of each kind split 12 partitions; clean closes commit what was consumed."""
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=12), make_group_id("interop-mixed")
    produce(bootstrap, topic, 12, 12 * 50)
    with PeerGroup(bootstrap) as peers:
        members = [
            peers.start(kind, group, name=f"{kind}-{i}", topic=topic)
            for i in range(2)
            for kind in ("kgroup", "librdkafka", "java")
        ]
        peers.wait(lambda: balanced(members, 12), 60, "6 members to split 12 partitions")
        assert all(len(m.held()) == 2 for m in members)
        want = expected(12, 50)
        peers.wait(lambda: set(consumed(members)) >= want, 60, "every record to be consumed")
        for member in members:
            member.close()
        counts = consumed(members)
        assert set(counts) == want
        assert [r for r, n in counts.items() if n > 1] == [], "a record was handed out twice"
        check_exclusive(members)
        # Each closing member committed what it had consumed before leaving.
        assert committed_offsets(bootstrap, group, topic, 12) == dict.fromkeys(range(12), 50)


def history(peers: list[Peer], partitions: set[int]) -> str:
    """Who owned ``partitions`` when, how that ended, and the last offset each handed out."""
    lines = []
    for peer in peers:
        for i in peer.intervals():
            if i.partition in partitions:
                last = max(
                    (
                        o
                        for p, o, at in peer.records()
                        if p == i.partition and i.start <= at <= i.end
                    ),
                    default=None,
                )
                how = "revoked" if i.clean else ("open" if i.end == float("inf") else "lost/crash")
                lines.append(
                    f"{peer.name}({peer.kind}) p{i.partition} {i.start}..{i.end} {how} last={last}"
                )
    return "; ".join(sorted(lines, key=lambda line: line.split()[2]))


def first_offsets(peer: Peer, since: int = 0) -> dict[int, int]:
    """The first offset the member handed out per partition (records stamped >= ``since``)."""
    out: dict[int, int] = {}
    for p, o, at in peer.records():
        if at >= since:
            out.setdefault(p, o)
    return out


def last_offsets(peer: Peer) -> dict[int, int]:
    out: dict[int, int] = {}
    for p, o, _ in peer.records():
        out[p] = max(o, out.get(p, -1))
    return out


def test_members_leave_join_and_crash_in_sequence(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    """Joins, clean leaves and a crash of every kind; each step converges and loses nothing.

    Records are produced before every step, so partitions move while they have
    data. A partition released cleanly is picked up exactly after the last
    record its owner handed out (the release committed it: no gap, no
    re-delivery); only partitions of the crashed members may be read twice.
    After the last members close, the committed offsets are at the log end.
    """
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=12), make_group_id("interop-churn")
    per_step = 10
    produced = 0

    def feed() -> None:
        nonlocal produced
        produce(bootstrap, topic, 12, 12 * per_step)
        produced += per_step

    with PeerGroup(bootstrap) as peers:

        def settle(what: str) -> None:
            live = peers.live()
            peers.wait(lambda: balanced(live, 12), 60, what)
            want = expected(12, produced)
            peers.wait(lambda: set(consumed(peers.peers)) >= want, 60, f"records after {what}")

        feed()
        k1 = peers.start("kgroup", group, name="kgroup-1", topic=topic)
        r1 = peers.start("librdkafka", group, name="librdkafka-1", topic=topic)
        j1 = peers.start("java", group, name="java-1", topic=topic)
        settle("three members of three kinds")
        feed()
        j2 = peers.start("java", group, name="java-2", topic=topic)
        settle("java-2 joined")
        feed()
        k1.close()
        settle("kgroup-1 left")
        feed()
        k2 = peers.start("kgroup", group, name="kgroup-2", topic=topic)
        settle("kgroup-2 joined")
        feed()
        r1.close()
        settle("librdkafka-1 left")
        feed()
        crashed = j1.held()
        j1.crash()
        settle("java-1 crashed (session timeout 6 s)")
        feed()
        r2 = peers.start("librdkafka", group, name="librdkafka-2", topic=topic)
        settle("librdkafka-2 joined")
        feed()
        k3 = peers.start("kgroup", group, name="kgroup-3", topic=topic)
        settle("kgroup-3 joined")
        feed()
        crashed |= k2.held()
        k2.crash()
        # Fresh records make the crashed member's successors read through what it
        # had consumed past its last commit, so their closing commits cover it.
        feed()
        settle("kgroup-2 crashed")
        for member in (j2, r2, k3):
            member.close()

        counts = consumed(peers.peers)
        assert set(counts) == expected(12, produced)
        twice = {r for r, n in counts.items() if n > 1}
        assert {p for p, _ in twice} <= crashed, f"records read twice outside crashes: {twice}"
        check_exclusive(peers.peers)
        # Clean handovers continue exactly where the previous owner stopped.
        for peer in peers.peers:
            for interval in peer.intervals():
                if not interval.clean:
                    continue
                last = max(
                    (
                        o
                        for p, o, at in peer.records()
                        if p == interval.partition and at <= interval.end
                    ),
                    default=None,
                )
                successors = [
                    (first_offsets(other, int(interval.end)).get(interval.partition), other.name)
                    for other in peers.peers
                    if other is not peer
                ]
                nexts = [(o, n) for o, n in successors if o is not None]
                if last is not None and nexts and interval.partition not in crashed:
                    assert min(nexts)[0] == last + 1, (
                        f"{peer.name} released partition {interval.partition} after offset "
                        f"{last}; the next owner started at {min(nexts)}"
                    )
        stored = committed_offsets(bootstrap, group, topic, 12)
        behind = {p: o for p, o in stored.items() if o != produced}
        assert not behind, (
            f"committed offsets {behind} after every member closed, {produced} produced; "
            + history(peers.peers, set(behind))
        )


@pytest.mark.parametrize(
    ("first", "second"),
    [(("java", "java"), ("kgroup", "kgroup")), (("kgroup", "kgroup"), ("librdkafka", "java"))],
    ids=["java-to-kgroup", "kgroup-to-peers"],
)
def test_group_handed_over_resumes_where_the_previous_members_stopped(
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    first: tuple[str, str],
    second: tuple[str, str],
) -> None:
    """Members of one kind consume part of the topic, commit and leave; the next ones resume.

    The first two members take 150 of the 600 records each (``consume 150``:
    the peer pauses after exactly that many), commit synchronously, and close.
    The committed offsets are what they handed out; the members of the other
    kind then read exactly the rest: nothing twice, nothing skipped.
    """
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=6), make_group_id("interop-handover")
    produce(bootstrap, topic, 6, 6 * 200)
    with PeerGroup(bootstrap) as peers:
        olds = [peers.start(kind, group, name=f"old-{kind}-{i}") for i, kind in enumerate(first)]
        for old in olds:
            old.consume(0)  # nothing handed out until told
            old.subscribe(topic)
        peers.wait(lambda: balanced(olds, 6), 60, "the first members to split the topic")
        for old in olds:
            old.consume(150)
        committed: dict[int, int] = {}
        for old in olds:
            committed |= old.commit()
        for old in olds:
            old.close()
        handed_out = consumed(olds)
        assert sum(handed_out.values()) == 300
        assert max(handed_out.values()) == 1
        lasts = {p: o for old in olds for p, o in last_offsets(old).items()}
        stored = committed_offsets(bootstrap, group, topic, 6)
        assert {p: stored[p] for p in lasts} == {p: o + 1 for p, o in lasts.items()}
        # A partition nobody read from: position 0 committed, or nothing (negative).
        assert all(stored[p] <= 0 for p in range(6) if p not in lasts), (stored, lasts)
        assert {p: o for p, o in committed.items() if p in lasts} == {
            p: o + 1 for p, o in lasts.items()
        }

        news = [
            peers.start(kind, group, name=f"new-{kind}-{i}", topic=topic)
            for i, kind in enumerate(second)
        ]
        peers.wait(
            lambda: set(consumed(olds + news)) >= expected(6, 200), 60, "the rest to be read"
        )
        for new in news:
            new.close()
        counts = consumed(olds + news)
        assert set(counts) == expected(6, 200)
        assert [r for r, n in counts.items() if n > 1] == []
        starts: dict[int, int] = {}
        for new in news:
            for p, o in first_offsets(new).items():
                starts[p] = min(o, starts.get(p, o))
        assert starts == {p: lasts.get(p, -1) + 1 for p in starts}
        check_exclusive(olds + news)
