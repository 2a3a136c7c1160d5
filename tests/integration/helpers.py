"""Helpers shared by the integration tests.

Configs, producing and consuming, waiting, scripts in subprocesses, rebalance
listeners that record what they were told, and threads running consumers. The
``anyio_backend`` fixture is in ``conftest.py``; child-process members are in
``process_helpers.py``.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Message, Producer

import kgroup
from kgroup import TopicPartition
from kgroup.assignors import (
    Assignment,
    Cluster,
    GroupAssignment,
    GroupMetadata,
    GroupSubscription,
    RebalanceProtocol,
)
from kgroup.testing import KafkaBroker, NodeState
from kgroup.testing.topics import create_topic, delete_topics
from kgroup.transport import BrokerAddress, KafkaClient

# ---------------------------------------------------------------- configs


def _dotted(extra: Mapping[str, Any]) -> dict[str, Any]:
    # Keyword arguments cannot hold dots; ``session_timeout_ms`` stands for
    # ``session.timeout.ms`` (no Kafka key has an underscore).
    return {key.replace("_", "."): value for key, value in extra.items()}


def consumer_conf(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    """A kgroup consumer config reading from the earliest offset, plus ``extra`` keys.

    ``extra`` names keys with ``_`` for ``.``: ``group_instance_id="a"``.
    """
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        **_dotted(extra),
    }


def classic_conf(bootstrap: str, group: str, strategy: object, **extra: Any) -> dict[str, Any]:
    """A classic-protocol member: ``strategy`` as ``partition.assignment.strategy``.

    The 500 ms heartbeat and 6 s session timeout match the new protocol's
    settings on the test brokers, so both kinds of group react as fast.
    """
    return {
        **consumer_conf(
            bootstrap,
            group,
            group_protocol="classic",
            partition_assignment_strategy=strategy,
            heartbeat_interval_ms=500,
            session_timeout_ms=6000,
        ),
        **_dotted(extra),
    }


# ------------------------------------------------------ producing, consuming


def produce_values(bootstrap: str, topic: str, records: Iterable[str | tuple[int, str]]) -> None:
    """Produce each record and wait for every acknowledgement.

    A record is a value, which the producer's partitioner places, or a
    ``(partition, value)`` pair.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for record in records:
        if isinstance(record, str):
            producer.produce(topic, record.encode())
        else:
            partition, value = record
            producer.produce(topic, value.encode(), partition=partition)
    assert producer.flush(30) == 0


def produce(bootstrap: str, topic: str, partitions: int, count: int, start: int = 0) -> set[str]:
    """Produce ``count`` records round-robin over the partitions; their values."""
    values = [(i % partitions, f"{topic}:{i}") for i in range(start, start + count)]
    produce_values(bootstrap, topic, values)
    return {value for _, value in values}


def text(message: Message) -> str:
    """A record's value as text."""
    value = message.value()
    assert isinstance(value, bytes)
    return value.decode()


def consume(
    bootstrap: str, topic: str, group_id: str, count: int, timeout: float = 30.0
) -> list[str]:
    """Up to ``count`` values read by a confluent-kafka member of ``group_id`` (new protocol).

    A consumer written by others, to check what the harness's brokers hold.
    """
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    values: list[str] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(text(message))
    finally:
        consumer.close()
    return values


def drain(consumer: kgroup.Consumer, want: int, timeout: float) -> list[str]:
    """Consume until ``want`` values arrived or ``timeout`` seconds passed; the values."""
    values: list[str] = []
    deadline = time.monotonic() + timeout
    while len(values) < want and time.monotonic() < deadline:
        values.extend(text(m) for m in consumer.consume(500, 0.2))
    return values


async def drain_async(consumer: kgroup.AsyncConsumer, want: int, timeout: float) -> list[str]:
    """:func:`drain` for an :class:`~kgroup.AsyncConsumer`."""
    values: list[str] = []
    with anyio.move_on_after(timeout):
        while len(values) < want:
            values.extend(text(m) for m in await consumer.consume(500, 0.2))
    return values


# ---------------------------------------------------------------- waiting


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def state_of(broker: KafkaBroker) -> NodeState:
    """The broker's state.

    A call, not an attribute: mypy would otherwise keep the state narrowed
    across stop()/kill() calls that change it.
    """
    return broker.state


async def coordinator_moved(client: KafkaClient, group_id: str, away_from: int) -> BrokerAddress:
    """The coordinator of ``group_id`` once it is another node than ``away_from`` (60 s at most)."""
    with anyio.fail_after(60):
        while True:
            current = await client.coordinator(group_id, refresh=True, timeout=30)
            if current.node_id != away_from:
                return current
            # Leadership moves once the dead node's session expires (3 s).
            await anyio.sleep(0.5)


# ------------------------------------------------------------- subprocesses


def run_python(
    *args: str, timeout: float = 120, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python *args`` with this interpreter, output captured; fails only on ``timeout``."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else dict(env),
    )


# -------------------------------------------------- partitions, listeners


def partitions_of(topic: str, count: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in range(count))


@dataclass(frozen=True)
class ListenerEvent:
    at: int  # time.monotonic_ns()
    member: str
    kind: str
    partitions: frozenset[TopicPartition]


@dataclass
class EventLog:
    """Listener calls of every member of a test, in the order they happened."""

    events: list[ListenerEvent] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def listener(self, member: str) -> Recorder:
        return Recorder(self, member)

    def add(self, member: str, kind: str, partitions: frozenset[TopicPartition]) -> None:
        with self.lock:
            self.events.append(ListenerEvent(time.monotonic_ns(), member, kind, partitions))

    def of(self, member: str, kind: str | None = None) -> list[ListenerEvent]:
        with self.lock:
            return [
                e for e in self.events if e.member == member and (kind is None or e.kind == kind)
            ]

    def held(self, member: str) -> frozenset[TopicPartition]:
        """What the member's listener was told it holds now."""
        held: set[TopicPartition] = set()
        for event in self.of(member):
            if event.kind == "assigned":
                held |= event.partitions
            else:
                held -= event.partitions
        return frozenset(held)

    def check_handover_order(self) -> None:
        """A partition assigned to a member after another held it was revoked (or lost) first."""
        holder: dict[TopicPartition, str] = {}
        with self.lock:
            events = sorted(self.events, key=lambda e: e.at)
        for event in events:
            for tp in event.partitions:
                if event.kind == "assigned":
                    previous = holder.get(tp)
                    assert previous is None, (
                        f"{tp} assigned to {event.member} while {previous} still held it: "
                        + "; ".join(
                            f"{e.at} {e.member} {e.kind} {sorted(e.partitions)}" for e in events
                        )
                    )
                    holder[tp] = event.member
                else:
                    assert holder.get(tp) == event.member, f"{event} for a partition not held"
                    del holder[tp]


class Recorder:
    """A rebalance listener writing to an :class:`EventLog`."""

    def __init__(self, log: EventLog, member: str) -> None:
        self.log = log
        self.member = member

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        if partitions:
            self.log.add(self.member, "assigned", partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        if partitions:
            self.log.add(self.member, "revoked", partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        if partitions:
            self.log.add(self.member, "lost", partitions)


class AsyncRecorder:
    """An async rebalance listener (coroutine methods) writing to an :class:`EventLog`."""

    def __init__(self, log: EventLog, member: str) -> None:
        self.log = log
        self.member = member

    async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        await anyio.sleep(0)
        if partitions:
            self.log.add(self.member, "assigned", partitions)

    async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        await anyio.sleep(0)
        if partitions:
            self.log.add(self.member, "revoked", partitions)


# ------------------------------------------------------ consumers in threads


class PollingThread:
    """Calls :meth:`poll_once` in a daemon thread until stopped, then :meth:`close_consumer`.

    What either raises is kept in :attr:`errors`; :meth:`stop` fails the test
    with it. A subclass sets up its consumer, then calls :meth:`start`.
    """

    def __init__(self, name: str, thread_prefix: str) -> None:
        self.name = name
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"{thread_prefix}-{name}", daemon=True
        )

    def poll_once(self) -> None:
        raise NotImplementedError

    def close_consumer(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.poll_once()
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            try:
                self.close_consumer()
            except BaseException as exc:
                self.errors.append(exc)

    def stop(self) -> None:
        """Close the consumer (from its thread: revoke callback, leave) and wait for it."""
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        assert not self.errors, f"{self.name} failed: {self.errors!r}"


class Runner(PollingThread):
    """A blocking kgroup consumer polling in its own thread, keeping every record it got."""

    def __init__(
        self,
        conf: dict[str, Any],
        topics: Iterable[str] | str,
        log: EventLog,
        name: str,
    ) -> None:
        super().__init__(name, "runner")
        self.consumer = kgroup.Consumer(conf)
        self.consumer.subscribe(
            topics if isinstance(topics, str) else list(topics), log.listener(name)
        )
        self.values: list[str] = []
        self.start()

    def poll_once(self) -> None:
        batch: list[Message] = self.consumer.consume(200, 0.2)
        self.values.extend(text(m) for m in batch)

    def close_consumer(self) -> None:
        self.consumer.close(15)

    def assignment(self) -> frozenset[TopicPartition]:
        return self.consumer.assignment()


class HasAssignment(Protocol):
    def assignment(self) -> frozenset[TopicPartition]: ...


def converged(members: Iterable[HasAssignment], expected: frozenset[TopicPartition]) -> bool:
    """Assignments are pairwise disjoint and cover ``expected`` exactly."""
    seen: list[TopicPartition] = []
    for member in members:
        seen.extend(member.assignment())
    return len(seen) == len(set(seen)) and set(seen) == expected


# ------------------------------------------------------- fault-suite checks


@dataclass(frozen=True)
class Delivery:
    """One record a member's application was handed, and when (``time.monotonic_ns()``)."""

    at: int
    member: str
    topic: str
    partition: int
    offset: int


class TimedRunner(Runner):
    """A :class:`Runner` that also keeps when each record reached the application."""

    def __init__(
        self, conf: dict[str, Any], topics: Iterable[str] | str, log: EventLog, name: str
    ) -> None:
        self.deliveries: list[Delivery] = []
        self._deliveries_lock = threading.Lock()
        super().__init__(conf, topics, log, name)

    def poll_once(self) -> None:
        batch: list[Message] = self.consumer.consume(200, 0.2)
        # Stamped after consume() returned: a listener call made inside the same
        # consume() is already in the event log, so "owned at this moment" holds.
        now = time.monotonic_ns()
        with self._deliveries_lock:
            for m in batch:
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                assert topic is not None
                assert partition is not None
                assert offset is not None
                self.deliveries.append(Delivery(now, self.name, topic, partition, offset))

    def delivered(self) -> list[Delivery]:
        with self._deliveries_lock:
            return list(self.deliveries)


def held_at(log: EventLog, member: str, at: int) -> frozenset[TopicPartition]:
    """What ``member``'s listener had been told it holds at ``at`` (monotonic ns)."""
    held: set[TopicPartition] = set()
    for event in log.of(member):
        if event.at > at:
            break
        if event.kind == "assigned":
            held |= event.partitions
        else:
            held -= event.partitions
    return frozenset(held)


def deliveries_not_owned(log: EventLog, deliveries: Iterable[Delivery]) -> list[Delivery]:
    """Deliveries of a partition the member's listener did not say it held at that moment."""
    return [
        d
        for d in deliveries
        if TopicPartition(d.topic, d.partition) not in held_at(log, d.member, d.at)
    ]


def missing_records(
    produced: Iterable[tuple[str, int, int]], deliveries: Iterable[Delivery]
) -> set[tuple[str, int, int]]:
    """Produced (topic, partition, offset) that no member's application was handed."""
    seen = {(d.topic, d.partition, d.offset) for d in deliveries}
    return set(produced) - seen


def log_end_offsets(produced: Iterable[tuple[str, int, int]]) -> dict[TopicPartition, int]:
    """The log end offset of each partition when ``produced`` is everything written to it."""
    ends: dict[TopicPartition, int] = {}
    for topic, partition, offset in produced:
        tp = TopicPartition(topic, partition)
        ends[tp] = max(ends.get(tp, 0), offset + 1)
    return ends


def live_overlaps(
    log: EventLog, not_live: Mapping[str, Iterable[tuple[int, int]]] | None = None
) -> list[str]:
    """Moments a partition was assigned to a member while another live member held it.

    ``not_live`` gives, per member, the (start, end) monotonic-ns windows when it
    was cut off (partitioned, stopped): a cut member tells its application
    ``lost`` at its next poll, so its listener may still show a partition the
    broker has already handed on; that is not two live owners.
    """
    windows = {name: list(spans) for name, spans in (not_live or {}).items()}

    def live(member: str, at: int) -> bool:
        return not any(start <= at <= end for start, end in windows.get(member, []))

    holders: dict[TopicPartition, set[str]] = {}
    found: list[str] = []
    with log.lock:
        events = sorted(log.events, key=lambda e: e.at)
    for event in events:
        for tp in event.partitions:
            owners = holders.setdefault(tp, set())
            if event.kind == "assigned":
                for other in owners - {event.member}:
                    if live(other, event.at) and live(event.member, event.at):
                        found.append(f"{tp} assigned to {event.member} while {other} held it")
                owners.add(event.member)
            else:
                owners.discard(event.member)
    return found


class TaggingAssignor:
    """A custom eager assignor that hands every member a tag in its assignment's user data
    (as assignors carrying state to the members do); the broker refuses to convert a group
    whose assignments carry user data (KAFKA-18134)."""

    name = "tagging"
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        return None

    def assign(self, cluster: Cluster, subscriptions: GroupSubscription) -> GroupAssignment:
        members = sorted(subscriptions.subscriptions)
        topics = sorted({t for s in subscriptions.subscriptions.values() for t in s.topics})
        dealt: dict[str, list[TopicPartition]] = {m: [] for m in members}
        partitions = [
            TopicPartition(t, p) for t in topics for p in range(cluster.partitions_for(t) or 0)
        ]
        for i, tp in enumerate(partitions):
            dealt[members[i % len(members)]].append(tp)
        return GroupAssignment(
            {
                m: Assignment(tuple(ps), user_data=f"tag-{i}".encode())
                for i, (m, ps) in enumerate(dealt.items())
            }
        )

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:
        pass


# ------------------------------------------------------- topic recreation

RECREATED_PARTITIONS = 2
"""Partitions of the topic :func:`consume_across_recreation` deletes and creates again."""


def consume_across_recreation(bootstrap: str, topic: str, group: str, protocol: str) -> None:
    """A member reads ``topic`` (20 records per partition); the topic is deleted and
    created again with 3 records per partition; the member reads those, closes (committing),
    and the next member starts right after them: none of the new records skipped.

    ``committed()`` right after the recreation answers at once and names no offset
    past the new records (the group's offsets went with the old topic).
    """
    # Auto-commit every 200 ms: the commit that would carry the old position
    # comes while the member reads the new topic, as in an application.
    if protocol == "classic":
        conf = classic_conf(bootstrap, group, "cooperative-sticky", auto_commit_interval_ms=200)
    else:
        conf = consumer_conf(bootstrap, group, auto_commit_interval_ms=200)
    partitions = partitions_of(topic, RECREATED_PARTITIONS)
    produce(bootstrap, topic, RECREATED_PARTITIONS, 40)
    with kgroup.Consumer(conf) as consumer:
        consumer.subscribe([topic])
        assert len(drain(consumer, 40, 30)) == 40

        delete_topics(bootstrap, [topic])
        create_topic(bootstrap, topic, partitions=RECREATED_PARTITIONS)
        new = produce(bootstrap, topic, RECREATED_PARTITIONS, 6, start=1000)

        started = time.monotonic()
        before = consumer.committed(partitions, timeout=20)
        assert time.monotonic() - started < 10
        assert all(offset is None or offset <= 3 for offset in before.values()), before

        # Read the new records (again, where the member fetched anew) until the
        # position says what was read.
        read: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            read.extend(text(m) for m in consumer.consume(100, 0.2))
            if new <= set(read) and consumer.position(partitions) == dict.fromkeys(partitions, 3):
                break
        assert set(read) == new
        positions = consumer.position(partitions)
        assert positions == dict.fromkeys(partitions, 3), positions
    # close() committed the positions.

    later = produce(bootstrap, topic, RECREATED_PARTITIONS, 60, start=2000)
    with kgroup.Consumer(conf) as consumer:
        assert consumer.committed(partitions) == dict.fromkeys(partitions, 3)
        consumer.subscribe([topic])
        values = drain(consumer, len(later), 30)
    assert sorted(values) == sorted(later)


# ------------------------------------------------------- outages and restarts


class PacedProducer:
    """Writes numbered records to every partition until stopped; keeps the acknowledged ones."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, **settings: Any) -> None:
        self.acked: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                **_dotted(settings),
            }
        )
        self._thread = threading.Thread(target=self._run, args=(topic, partitions), daemon=True)
        self._thread.start()

    def _acked(self, error: object, message: Message) -> None:
        if error is None:
            with self._lock:
                self.acked.add(text(message))

    def _run(self, topic: str, partitions: int) -> None:
        n = 0
        while not self._stop.is_set():
            self._producer.produce(
                topic, value=f"r{n}".encode(), partition=n % partitions, on_delivery=self._acked
            )
            n += 1
            # Pacing the writes (not a wait for an event): ~200 records/s.
            self._producer.poll(0.005)

    def stop(self) -> set[str]:
        """Stop writing; every record written is acknowledged first. Idempotent."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(30)
            assert self._producer.flush(120) == 0, "records left undelivered"
        with self._lock:
            return set(self.acked)


def read_by(members: Iterable[Runner]) -> set[str]:
    """Every record value the members' applications got."""
    return {v for r in members for v in list(r.values)}


class BothProtocols:
    """A group of each protocol (two :class:`Runner` members each) on ``topic``, fed by a
    :class:`PacedProducer`; a context manager that stops them all.

    ``make_group_id`` names the groups; ``producer`` settings go to the producer.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        make_group_id: Callable[[], str],
        **producer: Any,
    ) -> None:
        self.log = EventLog()
        self.everything = partitions_of(topic, partitions)
        confs = {
            "consumer": consumer_conf(bootstrap, make_group_id()),
            "classic": classic_conf(bootstrap, make_group_id(), "cooperative-sticky"),
        }
        self.runners = {
            name: [Runner(conf, topic, self.log, f"{name}-{n}") for n in (1, 2)]
            for name, conf in confs.items()
        }
        self.producer = PacedProducer(bootstrap, topic, partitions, **producer)

    def __enter__(self) -> BothProtocols:
        return self

    def __exit__(self, *exc: object) -> None:
        self.producer.stop()
        for members in self.runners.values():
            for r in members:
                r.stop()

    def balanced(self) -> bool:
        """Each group covers every partition, each member holds some, and every
        listener was told of it (callbacks run in a later poll)."""
        return all(
            converged(members, self.everything)
            and all(m.assignment() and self.log.held(m.name) == m.assignment() for m in members)
            for members in self.runners.values()
        )

    def mark(self) -> dict[str, int]:
        """How many listener calls each member has had so far."""
        return {r.name: len(self.log.of(r.name)) for rs in self.runners.values() for r in rs}

    def calls_since(self, mark: Mapping[str, int], protocol: str) -> dict[str, list[ListenerEvent]]:
        """The listener calls of ``protocol``'s members since ``mark``."""
        return {r.name: self.log.of(r.name)[mark[r.name] :] for r in self.runners[protocol]}

    def read_every_record(self, timeout: float) -> None:
        """Stop producing; wait until each group has read every acknowledged record."""
        acked = self.producer.stop()
        for name, members in self.runners.items():
            wait_until(
                lambda members=members: acked <= read_by(members),  # type: ignore[misc]
                timeout,
                f"the {name} group to read every acknowledged record",
            )
