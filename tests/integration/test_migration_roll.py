"""Rolling migration of a live group between the classic and the consumer protocol (issue 12).

The shape of Apache Kafka's ``consumer_protocol_migration_test``: a group of
kgroup members, each in a process of its own (``member_process.py``), starts on
the classic protocol while a producer writes to every partition throughout.
One member at a time is closed and restarted with ``group.protocol=consumer``
(the rolling upgrade: the first consumer-protocol heartbeat converts the group,
and the classic members go on as followers of the coordinator's assignment),
then rolled back to ``classic`` the same way (the rolling downgrade: the group
converts back when its last consumer-protocol member leaves). Dynamic and
static members, range and cooperative-sticky; kgroup members alone, and with a
confluent-kafka (librdkafka) or a Java ``KafkaConsumer`` member rolled the same
way. The same group also moves across and back with ``switch_protocol()``
called in each live member, without restarts.

Checks at the end: every record produced was consumed by some member; no
partition was held by two live members at once (from the members' listener
calls, in time order); the committed offsets are at the log end; every
``close()`` returned within its timeout; no member's application loop saw an
exception.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from helpers import (
    EventLog,
    ListenerEvent,
    classic_conf,
    consumer_conf,
    live_overlaps,
    partitions_of,
    wait_until,
)
from process_helpers import (
    Event,
    EventViews,
    MemberProcess,
    SteadyProducer,
    assignments_balanced,
)

from kgroup import Consumer, TopicPartition
from kgroup.admin import GroupDescription, describe_group
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport import KafkaClient

# The Java member comes from the peer harness in tests/peers (as test_interop.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from peers import PeerGroup

pytestmark = pytest.mark.integration

PARTITIONS = 6
MEMBERS = 3
CLOSE_TIMEOUT_S = 20.0
"""What ``member_process.py`` passes to ``close()``."""
CONVERGE_S = 30.0
"""Bound on a group settling after one member is rolled (session timeouts are 6 s)."""

_REMOTE_ASSIGNOR = {"range": "range", "cooperative-sticky": "uniform"}
"""The consumer-protocol counterpart of each classic strategy, as Apache Kafka's test pairs them."""


def member_conf(
    protocol: str, bootstrap: str, group: str, strategy: str, instance: str | None
) -> dict[str, Any]:
    # Auto-commit every 500 ms: a member rolled out hands over offsets close to
    # what it consumed, and the final commits (on close) land at the log end.
    extra: dict[str, Any] = {"auto_commit_interval_ms": 500}
    if instance is not None:
        extra["group_instance_id"] = instance
    if protocol == "classic":
        return classic_conf(bootstrap, group, strategy, **extra)
    return consumer_conf(
        bootstrap,
        group,
        group_protocol="consumer",
        group_remote_assignor=_REMOTE_ASSIGNOR[strategy],
        **extra,
    )


class ConfluentMember(EventViews):
    """A confluent-kafka (librdkafka) consumer polling in a thread, reporting like a member process.

    Its rebalance callbacks and records become :class:`Event` objects with the
    same kinds and the same clock (``time.monotonic()``) as a kgroup member
    process's reports, so one checker reads both. librdkafka assigns what its
    callbacks are given on its own (the Python binding does it when a callback
    did not), eagerly or incrementally as the protocol says.
    """

    def __init__(self, name: str, conf: dict[str, Any], topic: str) -> None:
        self.name = name
        self.events: list[Event] = []
        self.records: set[tuple[str, int, int]] = set()
        self._cond = threading.Condition()
        self._consumer = ConfluentConsumer(conf)
        self._consumer.subscribe(
            [topic],
            on_assign=lambda _c, ps: self._add("assigned", ps),
            on_revoke=lambda _c, ps: self._add("revoked", ps),
            on_lost=lambda _c, ps: self._add("lost", ps),
        )
        self._stop = threading.Event()
        self._status: int | None = None
        self._thread = threading.Thread(target=self._run, name=f"confluent-{name}", daemon=True)
        self._thread.start()

    def _emit(self, kind: str, **data: Any) -> None:
        with self._cond:
            self.events.append(Event(kind, time.monotonic(), data))
            self._cond.notify_all()

    def _add(self, kind: str, partitions: list[Any]) -> None:
        self._emit(kind, partitions=[[tp.topic, tp.partition] for tp in partitions])

    def _run(self) -> None:
        status = 0
        try:
            while not self._stop.is_set():
                batch = self._consumer.consume(500, 0.1)
                got = [(m.topic(), m.partition(), m.offset()) for m in batch if m.error() is None]
                errors = [e for m in batch if (e := m.error()) is not None]
                fatal = [e for e in errors if e.fatal()]
                if fatal:
                    raise RuntimeError(f"fatal librdkafka error: {fatal[0]}")
                if got:
                    with self._cond:
                        self.records.update(got)  # type: ignore[arg-type]
                    self._emit("records", records=[list(r) for r in got])
            self._consumer.close()
            self._emit("closed")
        except Exception as exc:
            self._emit("error", type=type(exc).__name__, message=str(exc))
            status = 2
        self._status = status

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> float:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not condition() and time.monotonic() < deadline:
                self._cond.wait(0.1)
            if condition():
                return time.monotonic()
        raise AssertionError(f"{self.name}: timed out after {timeout}s waiting for {what}")

    def close(self, timeout: float) -> int:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.name} did not close within {timeout}s"
        assert self._status is not None
        return self._status

    def cleanup(self) -> None:
        if self._thread.is_alive():
            self.close(CLOSE_TIMEOUT_S + 10)


def confluent_conf(
    protocol: str, bootstrap: str, group: str, strategy: str, instance: str | None
) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "auto.commit.interval.ms": 500,
        "group.protocol": protocol,
    }
    if instance is not None:
        conf["group.instance.id"] = instance
    if protocol == "classic":
        conf |= {
            "partition.assignment.strategy": strategy,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    else:
        conf["group.remote.assignor"] = _REMOTE_ASSIGNOR[strategy]
    return conf


class JavaMember:
    """Apache Kafka's Java ``KafkaConsumer`` (``tests/peers``), reporting like a member process.

    The peer's line events (CLOCK_MONOTONIC ns) become :class:`Event` objects
    with the kinds and clock (seconds) of a kgroup member process, so one
    checker reads all three clients.
    """

    def __init__(self, name: str, peers: PeerGroup, group: str, conf: dict[str, str], topic: str):
        self.name = name
        self._topic = topic
        self._cond = peers.condition
        self.peer = peers.start("java", group, name=name, config=conf, topic=topic)

    @property
    def events(self) -> list[Event]:
        out = []
        for e in self.peer.snapshot():
            t = e.at / 1e9
            if e.name in ("assigned", "revoked", "lost"):
                parts = [[self._topic, p] for p in sorted(e.partitions())]
                out.append(Event(e.name, t, {"partitions": parts}))
            elif e.name == "recs":
                recs = [[self._topic, p, o] for p, o in e.offsets()]
                out.append(Event("records", t, {"records": recs}))
            elif e.name in ("closed", "error"):
                out.append(Event(e.name, t, {"fields": list(e.fields)}))
        return out

    @property
    def records(self) -> set[tuple[str, int, int]]:
        return {(self._topic, p, o) for p, o, _ in self.peer.records()}

    def of(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(TopicPartition(self._topic, p) for p in self.peer.held())

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> float:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: timed out after {timeout}s waiting for {what}")
            with self._cond:
                self._cond.wait(0.1)
        return time.monotonic()

    def close(self, timeout: float) -> int:
        self.peer.close(timeout)
        return self.peer.process.returncode

    def cleanup(self) -> None:
        self.peer.kill()
        self.peer.release()


_JAVA_CLASSIC = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}


def java_conf(protocol: str, strategy: str, instance: str | None) -> dict[str, str]:
    conf = {"group.protocol": protocol, "auto.commit.interval.ms": "500"}
    if instance is not None:
        conf["group.instance.id"] = instance
    if protocol == "classic":
        conf |= {
            "partition.assignment.strategy": _JAVA_CLASSIC[strategy],
            "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "500",
        }
    else:
        conf["group.remote.assignor"] = _REMOTE_ASSIGNOR[strategy]
    return conf


Member = MemberProcess | ConfluentMember | JavaMember


@dataclass
class Roll:
    """A group of member processes, and everything each one ever was."""

    bootstrap: str
    group: str
    topic: str
    strategy: str
    static: bool
    spawn_dir: Path
    producer: SteadyProducer
    kinds: tuple[str, ...] = ("kgroup",) * MEMBERS
    """Which client each slot runs: ``kgroup`` (a member process), ``confluent`` or ``java``."""
    peers: PeerGroup | None = None
    live: dict[int, Member] = field(default_factory=dict)
    everyone: list[Member] = field(default_factory=list)
    close_times: list[tuple[str, float]] = field(default_factory=list)
    exit_codes: list[tuple[str, int]] = field(default_factory=list)

    def start(self, slot: int, protocol: str) -> Member:
        instance = f"{self.group}-i{slot}" if self.static else None
        name = f"{slot}-{self.kinds[slot]}-{protocol}-{len(self.everyone)}"
        if self.kinds[slot] == "java":
            if self.peers is None:
                self.peers = PeerGroup(self.bootstrap)
            java = JavaMember(
                name,
                self.peers,
                self.group,
                java_conf(protocol, self.strategy, instance),
                self.topic,
            )
            self.everyone.append(java)
            self.live[slot] = java
            return java
        if self.kinds[slot] == "confluent":
            peer = ConfluentMember(
                name,
                confluent_conf(protocol, self.bootstrap, self.group, self.strategy, instance),
                self.topic,
            )
            self.everyone.append(peer)
            self.live[slot] = peer
            return peer
        conf = member_conf(protocol, self.bootstrap, self.group, self.strategy, instance)
        # Each member also commits synchronously after every batch, as many
        # applications do: a classic member's commit refused by a rebalance must
        # surface as the retriable CommitFailedError, never as a fatal error.
        member = MemberProcess(
            name,
            conf,
            [self.topic],
            self.spawn_dir,
            commit_each_batch=True,
            trace_commits=True,
        )
        self.everyone.append(member)
        self.live[slot] = member
        return member

    def stop(self, slot: int) -> None:
        """Close the slot's member; note how long ``close()`` took and how it exited."""
        member = self.live.pop(slot)
        asked = time.monotonic()
        code = member.close(CLOSE_TIMEOUT_S + 10)
        if code == 0:
            # The child may exit before our reader thread took its last line.
            member.wait_for(lambda: bool(member.of("closed")), 5, "its closed report")
        closed = member.of("closed")
        self.exit_codes.append((member.name, code))
        self.close_times.append((member.name, closed[0].t - asked if closed else float("inf")))

    def converged(self) -> bool:
        # As docs/migration.md's "between steps": every partition owned once, and
        # the broker reports no rebalance under way. A step taken during a
        # cooperative second round (the moving partitions not yet handed on) can
        # convert the group with them unowned: a static replacement does not
        # bump the converted group's epoch, so nothing hands them out. Balanced
        # counts too: between a cooperative first round's sync and the rejoin of
        # the member that revoked, the group is Stable and every partition owned
        # once (3-2-1 on its way to 2-2-2), and a CI run rolled a Java member
        # in that window; every member then owned something, the case the
        # liveness repair leaves alone (docs/reliability.md).
        everything = partitions_of(self.topic, PARTITIONS)
        if not assignments_balanced(self.live.values(), everything):
            return False
        return self.describe().state == "Stable"

    def wait_converged(self, what: str) -> None:
        try:
            wait_until(self.converged, CONVERGE_S, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.story()}") from None

    def wait_progress(self, what: str) -> None:
        """Every live member's application gets records from now on (none is starved)."""
        since = time.monotonic()
        for member in self.live.values():
            member.wait_for(
                lambda m=member: any(e.t > since for e in m.of("records")),  # type: ignore[misc]
                CONVERGE_S,
                f"records after {what}",
            )

    def describe(self) -> GroupDescription:
        """The group as the broker describes it."""

        async def describe() -> GroupDescription:
            async with KafkaClient(self.bootstrap) as client:
                return await describe_group(client, self.group)

        return anyio.run(describe)

    def shape(self) -> tuple[str, tuple[str, ...]]:
        """The group's type on the broker and its members' protocols (sorted)."""
        group = self.describe()
        return group.group_type.value, tuple(sorted(m.protocol.value for m in group.members))

    def consumed(self) -> set[tuple[str, int, int]]:
        seen: set[tuple[str, int, int]] = set()
        for member in self.everyone:
            seen |= member.records
        return seen

    def log(self) -> EventLog:
        """Every member's listener calls as one event log (monotonic ns)."""
        log = EventLog()
        for member in self.everyone:
            for event in member.of("assigned", "revoked", "lost"):
                log.events.append(
                    ListenerEvent(int(event.t * 1e9), member.name, event.kind, event.partitions)
                )
        return log

    def story(self) -> str:
        lines = []
        events = sorted(
            (e.t, m.name, e.kind, e.data)
            for m in self.everyone
            for e in m.events
            # Records and per-batch commit attempts would crowd out the rebalance story.
            if e.kind not in ("records", "commit_attempt")
        )
        start = events[0][0] if events else 0.0
        for t, name, kind, data in events:
            lines.append(f"{t - start:7.2f}s {name} {kind} {data}")
        return "\n".join(lines[-80:])

    def commit_story(
        self, committed: Mapping[TopicPartition, int | None], ends: Mapping[TopicPartition, int]
    ) -> str:
        """The last commit attempts of each partition whose committed offset is short."""
        short = {(tp.topic, tp.partition) for tp in ends if committed.get(tp) != ends[tp]}
        lines = []
        for member in self.everyone:
            for e in member.of("commit_attempt", "commit_refused", "closed", "revoked"):
                offsets = [o for o in e.data.get("offsets", []) if (o[0], o[1]) in short]
                if e.kind != "commit_attempt" or offsets:
                    lines.append(
                        f"{e.t:.2f} {member.name} {e.kind} {offsets} {e.data.get('errors')}"
                        f" {e.data.get('failed')} {e.data.get('epoch')}"
                    )
        return "\n".join(sorted(lines)[-40:])

    def errors(self) -> list[tuple[str, dict[str, Any]]]:
        return [(m.name, e.data) for m in self.everyone for e in m.of("error")]

    def cleanup(self) -> None:
        for member in self.everyone:
            member.cleanup()
        if self.peers is not None:
            self.peers.kill_all()
        self.producer.stop()


@pytest.fixture
def make_roll(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, tmp_path: Path
) -> Iterator[Callable[..., Roll]]:
    made: list[Roll] = []

    def make(**kwargs: Any) -> Roll:
        bootstrap = kafka_broker.bootstrap_servers
        topic = make_topic(partitions=PARTITIONS)
        # The producer writes throughout, from before the first member starts.
        producer = SteadyProducer(bootstrap, topic, PARTITIONS, 0.05)
        roll = Roll(
            bootstrap=bootstrap,
            group=make_group_id(),
            topic=topic,
            spawn_dir=tmp_path,
            producer=producer,
            **kwargs,
        )
        made.append(roll)
        return roll

    yield make
    for roll in made:
        roll.cleanup()


def roll_one_by_one(roll: Roll, to: str) -> list[tuple[str, tuple[str, ...]]]:
    """Close each member in turn and start it again on ``to``; the group settles after each.

    Returns the group's shape (type, members' protocols) after each step.
    """
    shapes = []
    for slot in sorted(roll.live):
        roll.stop(slot)
        roll.start(slot, to)
        what = f"member {slot} moved to {to}"
        roll.wait_converged(f"the group settles after {what}")
        roll.wait_progress(what)
        shapes.append(roll.shape())
    return shapes


def finish(roll: Roll, final_protocol: str) -> None:
    """Stop producing and check everything the acceptance of issue 12 names."""
    produced = roll.producer.stop()
    assert produced
    try:
        wait_until(lambda: roll.consumed() >= produced, 30, "every produced record consumed")
    except AssertionError:
        missing = produced - roll.consumed()
        raise AssertionError(
            f"{len(missing)} of {len(produced)} records never consumed, e.g. "
            f"{sorted(missing)[:5]}\n{roll.story()}"
        ) from None
    assert live_overlaps(roll.log()) == [], roll.story()
    for slot in sorted(roll.live):
        roll.stop(slot)
    # close() takes its revoke callback's commit with it: committed at the log end.
    ends: dict[TopicPartition, int] = {}
    for topic, partition, offset in produced:
        tp = TopicPartition(topic, partition)
        ends[tp] = max(ends.get(tp, 0), offset + 1)
    conf = member_conf(final_protocol, roll.bootstrap, roll.group, roll.strategy, None)
    with Consumer(conf) as reader:
        committed = reader.committed(sorted(ends))
    assert committed == ends, roll.commit_story(committed, ends)
    assert roll.errors() == []
    assert all(code == 0 for _, code in roll.exit_codes), roll.exit_codes
    slow = [(name, took) for name, took in roll.close_times if took > CLOSE_TIMEOUT_S]
    assert slow == [], roll.close_times


@pytest.mark.parametrize(
    ("strategy", "static"),
    [
        ("cooperative-sticky", False),
        ("cooperative-sticky", True),
        ("range", False),
        ("range", True),
    ],
    ids=["cooperative-dynamic", "cooperative-static", "range-dynamic", "range-static"],
)
def test_rolling_upgrade_then_rolling_downgrade_loses_nothing_and_never_double_owns(
    make_roll: Callable[..., Roll], strategy: str, static: bool
) -> None:
    roll = make_roll(strategy=strategy, static=static)
    for slot in range(MEMBERS):
        roll.start(slot, "classic")
    roll.wait_converged("the classic group settles")
    roll.wait_progress("the classic group settled")
    assert roll.shape() == ("classic", ("classic",) * 3)
    # The first consumer-protocol member converts the group; the classic members
    # stay in it, as followers of the coordinator's assignment.
    assert roll_one_by_one(roll, "consumer") == [
        ("consumer", ("classic", "classic", "consumer")),
        ("consumer", ("classic", "consumer", "consumer")),
        ("consumer", ("consumer",) * 3),
    ]
    # Classic members join the consumer group; the last consumer-protocol
    # member's departure converts it back.
    assert roll_one_by_one(roll, "classic") == [
        ("consumer", ("classic", "consumer", "consumer")),
        ("consumer", ("classic", "classic", "consumer")),
        ("classic", ("classic",) * 3),
    ]
    finish(roll, "classic")


@pytest.mark.parametrize(
    ("strategy", "static", "peer"),
    [
        ("cooperative-sticky", False, "confluent"),
        ("range", True, "confluent"),
        ("cooperative-sticky", True, "java"),
        ("range", False, "java"),
    ],
    ids=[
        "confluent-cooperative-dynamic",
        "confluent-range-static",
        "java-cooperative-static",
        "java-range-dynamic",
    ],
)
def test_rolling_migration_of_a_group_mixed_with_confluent_kafka_and_java_members(
    make_roll: Callable[..., Roll], strategy: str, static: bool, peer: str
) -> None:
    # A librdkafka or Java member rolls with the kgroup ones (group.protocol
    # classic -> consumer -> classic in its own config), first in both directions.
    roll = make_roll(strategy=strategy, static=static, kinds=(peer, "kgroup", "kgroup"))
    # The kgroup members start first, so one of them leads the classic group.
    # A librdkafka leader copies each member's subscription user data into its
    # assignment (cooperative-sticky's generation included), and the broker
    # refuses to upgrade a group whose assignments carry user data ("custom
    # assignor"): test_migration_refused.py covers that case.
    for slot in (1, 2, 0):
        roll.start(slot, "classic")
        if slot == 1:
            roll.live[1].wait_for(lambda: bool(roll.live[1].assignment()), CONVERGE_S, "lead")
    roll.wait_converged("the classic group settles")
    roll.wait_progress("the classic group settled")
    assert roll_one_by_one(roll, "consumer")[-1] == ("consumer", ("consumer",) * 3)
    assert roll_one_by_one(roll, "classic")[-1] == ("classic", ("classic",) * 3)
    finish(roll, "classic")


def switch_one_by_one(roll: Roll, to: str) -> list[tuple[str, tuple[str, ...]]]:
    """``switch_protocol(to)`` in each live member in turn; the group settles after each."""
    shapes = []
    for slot in sorted(roll.live):
        member = roll.live[slot]
        assert isinstance(member, MemberProcess)
        before = member.epoch()
        assert before is not None
        member.send(f"switch {to}")
        what = f"member {slot} switched to {to}"
        # A switched member is a new member of the group: a new member id.
        member.wait_for(
            lambda m=member, old=before[0]: (m.epoch() or (old, 0))[0] not in (old, ""),  # type: ignore[misc]
            CONVERGE_S,
            f"a new member id after {what}",
        )
        roll.wait_converged(f"the group settles after {what}")
        roll.wait_progress(what)
        shapes.append(roll.shape())
    return shapes


@pytest.mark.parametrize(
    ("strategy", "static"),
    [("cooperative-sticky", False), ("range", True)],
    ids=["cooperative-dynamic", "range-static"],
)
def test_switch_protocol_moves_live_members_across_and_back_under_load(
    make_roll: Callable[..., Roll], strategy: str, static: bool
) -> None:
    # The same group and checks as the rolling test, but no process restarts:
    # each member calls switch_protocol() in place.
    roll = make_roll(strategy=strategy, static=static)
    for slot in range(MEMBERS):
        # One config serves both protocols: the classic keys go with classic
        # members; a consumer-protocol member takes the broker's defaults.
        roll.start(slot, "classic")
    roll.wait_converged("the classic group settles")
    roll.wait_progress("the classic group settled")
    assert switch_one_by_one(roll, "consumer") == [
        ("consumer", ("classic", "classic", "consumer")),
        ("consumer", ("classic", "consumer", "consumer")),
        ("consumer", ("consumer",) * 3),
    ]
    assert switch_one_by_one(roll, "classic") == [
        ("consumer", ("classic", "consumer", "consumer")),
        ("consumer", ("classic", "classic", "consumer")),
        ("classic", ("classic",) * 3),
    ]
    # Every member process lived through both switches: nothing restarted.
    assert len(roll.everyone) == MEMBERS
    finish(roll, "classic")
