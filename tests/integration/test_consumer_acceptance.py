"""Acceptance tests of the new-protocol consumer (issue 3) against real brokers.

- a fourth member joining revokes only the partitions that move, while the
  others keep being consumed; a member leaving with close() hands over fast;
- a missing group authorization is a typed fatal error from poll;
- a bootstrap server that never answers fails within the configured timeouts.

The session broker runs the harness's fast settings: heartbeat 500 ms,
session timeout 6 s, no assignment batching.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from confluent_kafka import Message
from confluent_kafka.admin import AdminClient

# confluent-kafka's typed package does not re-export these from confluent_kafka.admin.
from confluent_kafka.admin._acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
)
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from helpers import EventLog, PollingThread, consumer_conf, partitions_of, produce, text, wait_until
from process_helpers import SteadyProducer

from kgroup import Consumer, TopicPartition
from kgroup.errors import GroupAuthorizationFailedError, NoBrokersAvailableError
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic, create_topic

pytestmark = pytest.mark.integration

HEARTBEAT = 0.5  # group.consumer.heartbeat.interval.ms of the test brokers


def _where(message: Message) -> tuple[TopicPartition, int]:
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None
    assert partition is not None
    assert offset is not None
    return TopicPartition(topic, partition), offset


class TimedRunner(PollingThread):
    """A blocking consumer polling in a thread, noting when it got each record."""

    def __init__(self, conf: dict[str, Any], topic: str, log: EventLog, name: str) -> None:
        super().__init__(name, "runner")
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic], log.listener(name))
        self.got: list[tuple[float, TopicPartition, int]] = []
        self._lock = threading.Lock()
        self.start()

    def poll_once(self) -> None:
        batch = self.consumer.consume(500, 0.05)
        now = time.monotonic()
        got = [(now, *_where(m)) for m in batch]
        with self._lock:
            self.got.extend(got)

    def close_consumer(self) -> None:
        self.consumer.close(15)

    def assignment(self) -> frozenset[TopicPartition]:
        return self.consumer.assignment()

    def records(self) -> list[tuple[float, TopicPartition, int]]:
        with self._lock:
            return list(self.got)


def _settled(runners: Iterable[TimedRunner], log: EventLog, expected: set[TopicPartition]) -> bool:
    """Disjoint, complete, non-empty shares that the listeners were told about."""
    seen: list[TopicPartition] = []
    for runner in runners:
        held = runner.assignment()
        if not held or log.held(runner.name) != held:
            return False
        seen.extend(held)
    return len(seen) == len(set(seen)) and set(seen) == expected


def _one_epoch(runners: Iterable[TimedRunner]) -> bool:
    return len({r.consumer.member_epoch for r in runners}) == 1


def _consuming(runner: TimedRunner, partitions: frozenset[TopicPartition], within: float) -> bool:
    """``runner`` got records of each of ``partitions`` in the last ``within`` seconds."""
    since = time.monotonic() - within
    recent = {tp for at, tp, _ in runner.records() if at >= since}
    return partitions <= recent


def _first_assigned(log: EventLog, member: str, tp: TopicPartition, after: float) -> float:
    return min(
        e.at / 1e9 for e in log.of(member, "assigned") if e.at / 1e9 >= after and tp in e.partitions
    )


def test_fourth_member_moves_only_what_it_takes_and_a_closing_member_hands_over_fast(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=12)
    everything = set(partitions_of(topic, 12))
    conf = consumer_conf(bootstrap, make_group_id(), auto_commit_interval_ms=500)
    log = EventLog()
    # 20 records a second on every partition, from before the first member
    # joins until the end: a partition that keeps being consumed shows it.
    producer = SteadyProducer(bootstrap, topic, 12, 0.05)
    runners: list[TimedRunner] = []
    try:
        runners = [TimedRunner(conf, topic, log, name) for name in ("a", "b", "c")]
        # Settled and at one epoch at the same moment: a member reaches the new
        # epoch while partitions it is assigned are still being released by
        # another (it gets them on a later heartbeat), and shares settled at an
        # older epoch (before the last revocation) are not the final ones. The
        # members whose share did not change learn the new epoch on their next
        # heartbeat.
        wait_until(
            lambda: _settled(runners, log, everything) and _one_epoch(runners),
            30,
            "three members converge at one epoch",
        )
        assert runners[0].consumer.member_epoch > 0
        assert all(len(r.assignment()) == 4 for r in runners)
        before = {r.name: r.assignment() for r in runners}
        # Steady state first: every partition is being consumed (a partition
        # starts delivering a moment after it is assigned).
        wait_until(
            lambda: all(_consuming(r, before[r.name], 0.3) for r in runners),
            15,
            "every partition consumed",
        )

        join_started = time.monotonic()
        fourth = TimedRunner(conf, topic, log, "d")
        runners.append(fourth)
        wait_until(
            lambda: _settled(runners, log, everything) and _one_epoch(runners),
            30,
            "four members converge at one epoch",
        )
        after = {r.name: r.assignment() for r in runners}
        first_assigned = min(e.at / 1e9 for e in log.of("d", "assigned"))
        wait_until(lambda: _consuming(fourth, after["d"], 0.3), 15, "the fourth member consuming")
        settled_at = time.monotonic()

        # Only the partitions that moved were revoked, each from its old owner
        # once, and they are exactly what the new member got.
        moved: set[TopicPartition] = set()
        for name in ("a", "b", "c"):
            assert after[name] <= before[name], (name, before[name], after[name])
            revoked = [e.partitions for e in log.of(name, "revoked") if e.at / 1e9 >= join_started]
            assert set().union(*revoked) == before[name] - after[name], (name, revoked)
            assert sum(len(p) for p in revoked) == len(before[name] - after[name])
            moved |= before[name] - after[name]
        assert moved == after["d"]
        assert len(after["d"]) == 3
        assert not [e for e in log.events if e.kind == "lost"]

        # The partitions that did not move kept being consumed throughout: by
        # their owner, while the new member waited for its share, with no gap
        # anywhere near the length of the rebalance.
        window = (join_started, first_assigned)
        gaps: dict[TopicPartition, float] = {}
        for runner in runners[:3]:
            times: dict[TopicPartition, list[float]] = {}
            for at, tp, _ in runner.records():
                if join_started <= at <= settled_at:
                    times.setdefault(tp, []).append(at)
            for tp in after[runner.name]:
                seen = sorted(times.get(tp, []))
                assert any(window[0] < at < window[1] for at in seen), (
                    f"{tp} ({runner.name}) not consumed during the rebalance {window}"
                )
                edges = [join_started, *seen, settled_at]
                gaps[tp] = max(b - a for a, b in itertools.pairwise(edges))
        rebalance = first_assigned - join_started
        # A moved partition was not consumed for a while: the time from its
        # last record at the old owner to the first at the new one.
        handover = {}
        for tp in moved:
            old = next(n for n in ("a", "b", "c") if tp in before[n])
            last_old = max(
                at for at, p, _ in runners[("a", "b", "c").index(old)].records() if p == tp
            )
            first_new = min(at for at, p, _ in fourth.records() if p == tp)
            handover[tp] = first_new - last_old
        assert max(gaps.values()) < 1.0, (gaps, handover, rebalance)

        # One member leaves with close(): its partitions move to the others
        # within a few heartbeat intervals.
        leaving = runners.pop(0)
        leaving_share = leaving.assignment()
        close_started = time.monotonic()
        leaving.stop()
        closed = time.monotonic()
        wait_until(lambda: _settled(runners, log, everything), 10, "the others take over")
        moved_at = max(
            _first_assigned(log, r.name, tp, close_started)
            for tp in leaving_share
            for r in runners
            if tp in r.assignment()
        )
        assert moved_at - closed < 4 * HEARTBEAT, (moved_at - closed, closed - close_started)
        assert moved_at - close_started < 10 * HEARTBEAT
        assert [e.partitions for e in log.of("a", "revoked") if e.at / 1e9 >= close_started] == [
            leaving_share
        ]

        # And nothing was lost on the way.
        delivered = producer.stop()

        def missing() -> set[tuple[str, int, int]]:
            return delivered - {
                (tp.topic, tp.partition, o) for r in [leaving, *runners] for _, tp, o in r.records()
            }

        wait_until(lambda: not missing(), 20, "every produced record consumed")
    finally:
        producer.stop()
        for runner in runners:
            runner.stop()
    log.check_handover_order()


# ------------------------------------------------------------ authorization


@pytest.fixture(scope="module")
def authorizing_broker() -> Iterator[KafkaBroker]:
    """A broker with the standard authorizer: everything is allowed unless an ACL says otherwise.

    kgroup's transport speaks PLAINTEXT only, so clients, the controller and
    inter-broker traffic are all ``User:ANONYMOUS``; with
    ``allow.everyone.if.no.acl.found`` the broker's own traffic (no ACLs on the
    cluster) goes on, and a DENY ACL on groups takes the group away from clients.
    """
    overrides = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    with KafkaBroker(overrides) as broker:
        yield broker


def _group_acls(bootstrap: str, group_prefix: str, operation: AclOperation) -> None:
    """Deny ``operation`` on groups starting with ``group_prefix`` to every client.

    A resource with ACLs is no longer covered by ``allow.everyone.if.no.acl.found``:
    what no ACL allows is denied. So a READ denial comes with a DESCRIBE grant
    (FindCoordinator needs DESCRIBE), leaving exactly READ missing.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def acl(op: AclOperation, permission: AclPermissionType) -> AclBinding:
        return AclBinding(
            ResourceType.GROUP,
            group_prefix,
            ResourcePatternType.PREFIXED,
            "User:ANONYMOUS",
            "*",
            op,
            permission,
        )

    bindings = [acl(operation, AclPermissionType.DENY)]
    if operation is not AclOperation.ALL:
        bindings.append(acl(AclOperation.DESCRIBE, AclPermissionType.ALLOW))
    for future in admin.create_acls(bindings).values():
        future.result(30)
    query = AclBindingFilter(
        ResourceType.GROUP,
        group_prefix,
        ResourcePatternType.PREFIXED,
        None,  # type: ignore[arg-type]  # None matches any principal (documented)
        None,  # type: ignore[arg-type]  # and any host
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    # ACLs reach the authorizer through the metadata log: wait until the broker lists them.
    wait_until(lambda: set(bindings) <= set(admin.describe_acls(query).result(10)), 10, "the ACLs")


def _first_poll_error(consumer: Consumer, timeout: float) -> tuple[BaseException, float]:
    """The first exception poll raised, and after how many seconds; fails on a hang."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            consumer.poll(0.1)
        except Exception as exc:
            return exc, time.monotonic() - started
    raise AssertionError(f"poll raised nothing within {timeout}s")


def _check_control_group(bootstrap: str, topic: str, group: str) -> None:
    """A group no ACL covers works on the authorizing broker."""
    values = produce(bootstrap, topic, 2, 10)
    with Consumer(consumer_conf(bootstrap, group)) as allowed:
        allowed.subscribe([topic])
        got: set[str] = set()
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            got.update(text(m) for m in allowed.consume(100, 0.2))
        assert got == values


def test_missing_group_read_authorization_is_a_typed_fatal_error_from_poll(
    authorizing_broker: KafkaBroker, make_group_id: MakeGroupId
) -> None:
    bootstrap = authorizing_broker.bootstrap_servers
    topic = f"auth-{make_group_id('')}"
    create_topic(bootstrap, topic, partitions=2)
    denied = f"denied-{make_group_id('')}"
    _group_acls(bootstrap, denied, AclOperation.READ)
    _check_control_group(bootstrap, topic, make_group_id("allowed"))

    # FindCoordinator (DESCRIBE) passes; ConsumerGroupHeartbeat (READ) is refused.
    with Consumer(consumer_conf(bootstrap, f"{denied}-app")) as consumer:
        consumer.subscribe([topic])
        error, after = _first_poll_error(consumer, 20)
        assert isinstance(error, GroupAuthorizationFailedError), repr(error)
        assert after < 10
        # Fatal: raised again by every later poll, nothing assigned.
        with pytest.raises(GroupAuthorizationFailedError):
            consumer.poll(0)
        assert consumer.assignment() == frozenset()


def test_no_access_to_the_group_at_all_is_a_typed_fatal_error_from_the_first_failing_poll(
    authorizing_broker: KafkaBroker, make_group_id: MakeGroupId
) -> None:
    bootstrap = authorizing_broker.bootstrap_servers
    topic = f"auth-{make_group_id('')}"
    create_topic(bootstrap, topic, partitions=2)
    denied = f"denied-{make_group_id('')}"
    _group_acls(bootstrap, denied, AclOperation.ALL)
    _check_control_group(bootstrap, topic, make_group_id("allowed"))

    # FindCoordinator itself is refused. Several members in a row, each
    # subscribing a moment after it was created (as an application that sets
    # up before subscribing): the failure is a race between kgroup's heartbeat
    # and the lookup librdkafka starts when the consumer is created.
    for attempt in range(4):
        with Consumer(consumer_conf(bootstrap, f"{denied}-app{attempt}")) as consumer:
            time.sleep(1.0)
            consumer.subscribe([topic])
            error, after = _first_poll_error(consumer, 20)
            # Never a hang, and the typed error from the polls after it.
            assert after < 10
            again, _ = _first_poll_error(consumer, 10)
            assert isinstance(again, GroupAuthorizationFailedError), repr(again)
            # The bug: the first one can be librdkafka's DataPlaneError.
            assert isinstance(error, GroupAuthorizationFailedError), repr(error)


# ---------------------------------------------------------------- bootstrap


@contextlib.contextmanager
def _silent_server(kind: str) -> Iterator[str]:
    """A local address that never answers Kafka.

    ``silent``: accepts TCP connections (the kernel completes the handshake)
    and never replies. ``blackhole``: its accept queue is full, so the kernel
    drops further SYNs and a connect never completes, like a filtered host.
    """
    server = socket.socket()
    fillers: list[socket.socket] = []
    try:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        if kind == "blackhole":
            for _ in range(3):
                filler = socket.socket()
                filler.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", port))
                fillers.append(filler)
            probe = socket.socket()
            probe.settimeout(0.5)
            with pytest.raises(TimeoutError), probe:
                probe.connect(("127.0.0.1", port))
        yield f"127.0.0.1:{port}"
    finally:
        for s in [*fillers, server]:
            s.close()


@pytest.mark.parametrize(
    ("kind", "extra", "limit"),
    [
        ("silent", {"request.timeout.ms": 2000}, 2.0),
        ("blackhole", {"request.timeout.ms": 2000}, 2.0),
        ("blackhole", {"socket.connection.setup.timeout.ms": 1500}, 1.5),
    ],
)
def test_bootstrap_server_that_never_answers_fails_within_the_configured_timeout(
    kind: str, extra: dict[str, Any], limit: float
) -> None:
    # test_consumer.py covers a refused connection (fails at once); these
    # servers never answer, so only the configured timeouts end the wait.
    with _silent_server(kind) as address:
        started = time.monotonic()
        with Consumer({"bootstrap.servers": address, "group.id": "g", **extra}) as consumer:
            consumer.subscribe(["t"])
            with pytest.raises(NoBrokersAvailableError, match=address):
                consumer.poll(30)
            failed_after = time.monotonic() - started
    assert limit - 0.1 < failed_after < limit + 1.5, failed_after
