"""Group members in separate processes: SIGKILL, static membership, SIGSTOP fencing.

Each member is ``member_process.py`` in a child process, reporting its
listener calls, epochs, records and (optionally) commit attempts as JSON
lines. The session broker runs the harness's fast settings: heartbeat 500 ms,
session timeout 6 s.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import consumer_conf, partitions_of, wait_until
from process_helpers import (
    MemberProcess,
    SteadyProducer,
    assignments_balanced,
    assignments_converged,
    tps,
)

from kgroup import Consumer, TopicPartition
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration

SESSION_TIMEOUT = 6.0  # group.consumer.session.timeout.ms of the test broker
HEARTBEAT = 0.5  # group.consumer.heartbeat.interval.ms

Spawn = Callable[..., MemberProcess]


def _conf(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    # Commits every 500 ms: what a killed member loses to its successor stays small.
    return consumer_conf(bootstrap, group, auto_commit_interval_ms=500, **extra)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    started: list[MemberProcess] = []

    def make(
        name: str, conf: dict[str, Any], topics: list[str], *, trace_commits: bool = False
    ) -> MemberProcess:
        member = MemberProcess(name, conf, topics, tmp_path, trace_commits=trace_commits)
        started.append(member)
        return member

    yield make
    for member in started:
        member.cleanup()


def _consumed(members: list[MemberProcess]) -> set[tuple[str, int, int]]:
    seen: set[tuple[str, int, int]] = set()
    for member in members:
        seen |= member.records
    return seen


def _first_assigned(member: MemberProcess, tp: TopicPartition, after: float) -> float | None:
    for event in member.of("assigned"):
        if event.t >= after and tp in event.partitions:
            return event.t
    return None


def test_sigkilled_member_loses_its_partitions_after_the_session_timeout_and_nothing_is_lost(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, spawn: Spawn
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=6)
    everything = partitions_of(topic, 6)
    conf = _conf(bootstrap, make_group_id())
    producer = SteadyProducer(bootstrap, topic, 6, 0.05)
    try:
        members = [spawn(name, conf, [topic]) for name in ("a", "b", "c")]
        wait_until(lambda: assignments_balanced(members, everything), 30, "three members share")
        victim = members[1]
        survivors = [members[0], members[2]]
        doomed = victim.assignment()
        # The victim consumed some of its own partitions' records before dying.
        victim.wait_for(
            lambda: any(TopicPartition(t, p) in doomed for t, p, _ in victim.records),
            10,
            "records of its partitions",
        )
        killed_at = time.monotonic()
        victim.signal(signal.SIGKILL)
        assert victim.wait_exit(5) == -signal.SIGKILL
        wait_until(
            lambda: assignments_converged(survivors, everything),
            SESSION_TIMEOUT + 15,
            "the survivors take the victim's partitions",
        )
        takeover = {
            tp: min(t for m in survivors if (t := _first_assigned(m, tp, killed_at)) is not None)
            - killed_at
            for tp in doomed
        }
        # Not before the session timeout (no leave was sent; the last heartbeat
        # was at most one interval before the kill), and soon after it.
        assert all(
            SESSION_TIMEOUT - HEARTBEAT - 0.5 < d < SESSION_TIMEOUT + 5 for d in takeover.values()
        ), takeover
        # The survivors never gave anything up meanwhile.
        assert not [e for m in survivors for e in m.of("revoked", "lost") if e.t >= killed_at]
        # The victim held its share to the end and never left.
        assert victim.assignment() == doomed
        assert not victim.of("closed")
    finally:
        delivered = producer.stop()
    wait_until(lambda: _consumed(members) >= delivered, 30, "every produced record consumed")
    assert {(t, p) for t, p, _ in delivered} == {(tp.topic, tp.partition) for tp in everything}
    for member in survivors:
        assert member.close() == 0


def test_static_member_restarted_in_a_new_process_gets_its_partitions_back_and_a_twin_fails(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, spawn: Spawn
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=4)
    everything = partitions_of(topic, 4)
    group = make_group_id()
    static = _conf(bootstrap, group, group_instance_id="static-x")
    first = spawn("static-1", static, [topic])
    other = spawn("dynamic", _conf(bootstrap, group), [topic])
    wait_until(lambda: assignments_balanced([first, other], everything), 30, "two members share")
    kept = first.assignment()
    others_share = other.assignment()
    others_events = len(other.of("assigned", "revoked", "lost"))

    # close() leaves with epoch -2: the broker keeps the assignment for the instance id.
    assert first.close() == 0
    closed_at = first.of("closed")[0].t
    assert first.of("revoked")[-1].partitions == kept
    second = spawn("static-2", static, [topic])
    back_at = second.wait_for(
        lambda: second.assignment() == kept, SESSION_TIMEOUT, "the same partitions back"
    )
    assert back_at - closed_at < SESSION_TIMEOUT
    # It got them in one step, and nothing else.
    assert [e.partitions for e in second.of("assigned") if e.partitions] == [kept]
    # The other member was never revoked, assigned or lost anything meanwhile.
    assert len(other.of("assigned", "revoked", "lost")) == others_events
    assert other.assignment() == others_share

    # A second live process with the same instance id: a typed fatal error
    # from poll; the process reports it and exits non-zero.
    twin = spawn("static-twin", static, [topic])
    twin.wait_for(lambda: bool(twin.of("error")), 20, "the twin's fatal error")
    error = twin.of("error")[0]
    assert error.data["type"] == "UnreleasedInstanceIdError", error.data
    assert twin.wait_exit(10) == 2
    assert twin.assignment() == frozenset()
    # The live static member and the other one are unaffected.
    assert second.assignment() == kept
    assert not second.of("revoked", "lost")
    assert len(other.of("assigned", "revoked", "lost")) == others_events
    assert second.close() == 0
    assert other.close() == 0


class _CommittedWatcher:
    """Reads the group's committed offsets every 100 ms; notes any that went backwards."""

    def __init__(self, bootstrap: str, group: str, partitions: frozenset[TopicPartition]) -> None:
        self._probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        self._partitions = partitions
        self.latest: dict[TopicPartition, int] = {}
        self.backwards: list[tuple[TopicPartition, int, int]] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.1):
                for tp, offset in self._probe.committed(self._partitions).items():
                    if offset is None:
                        continue
                    before = self.latest.get(tp)
                    if before is not None and offset < before:
                        self.backwards.append((tp, before, offset))
                    self.latest[tp] = offset
        except BaseException as exc:
            self.errors.append(exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)
        self._probe.close(5)
        assert not self.errors, self.errors


@pytest.mark.provokes_double_ownership(
    "SIGSTOP freezes the member past its session: in its own view it fetches its partitions "
    "until it runs again and notices, while the broker has given them to the other member"
)
def test_frozen_member_is_fenced_rejoins_with_its_id_and_commits_nothing_it_lost(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, spawn: Spawn
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=4)
    everything = partitions_of(topic, 4)
    group = make_group_id()
    conf = _conf(bootstrap, group)
    producer = SteadyProducer(bootstrap, topic, 4, 0.05)
    watcher = _CommittedWatcher(bootstrap, group, everything)
    try:
        frozen = spawn("frozen", conf, [topic], trace_commits=True)
        other = spawn("other", conf, [topic])
        members = [frozen, other]
        wait_until(lambda: assignments_balanced(members, everything), 30, "two members share")
        lost = frozen.assignment()
        identity = frozen.epoch()
        assert identity is not None
        member_id, epoch_before = identity
        assert epoch_before > 0
        # Its auto-commits work before the freeze.
        frozen.wait_for(
            lambda: any(
                not e.data["errors"] and e.data["failed"] is None
                for e in frozen.of("commit_attempt")
            ),
            10,
            "a successful auto-commit",
        )

        stopped_at = time.monotonic()
        frozen.signal(signal.SIGSTOP)
        # The broker fences it after the session timeout and gives its
        # partitions to the other member (the freeze lasts until then).
        taken_at = other.wait_for(
            lambda: other.assignment() == everything,
            SESSION_TIMEOUT + 15,
            "the other member to take everything",
        )
        assert taken_at - stopped_at > SESSION_TIMEOUT - HEARTBEAT - 0.5
        resumed_at = time.monotonic()
        frozen.signal(signal.SIGCONT)

        frozen.wait_for(
            lambda: any(e.t >= resumed_at for e in frozen.of("lost")), 15, "on_partitions_lost"
        )
        lost_event = next(e for e in frozen.of("lost") if e.t >= resumed_at)
        assert lost_event.partitions == lost
        # Rejoins with the same member id and a new epoch, and gets a share again.
        frozen.wait_for(
            lambda: any(
                e.t >= lost_event.t and e.data["member_id"] == member_id and e.data["epoch"] > 0
                for e in frozen.of("epoch")
            ),
            15,
            "a rejoin with the same member id",
        )
        wait_until(lambda: assignments_converged(members, everything), 30, "the two share again")
        assert {e.data["member_id"] for e in frozen.of("epoch")} == {member_id}
        # Let the rejoined member auto-commit a few times.
        rejoined_at = time.monotonic()
        frozen.wait_for(
            lambda: any(
                e.data["sent"] > rejoined_at and not e.data["errors"] and e.data["failed"] is None
                for e in frozen.of("commit_attempt")
            ),
            10,
            "a successful auto-commit after rejoining",
        )
    finally:
        delivered = producer.stop()
        watcher.stop()

    # No commit for a lost partition: after resuming, every OffsetCommit the
    # frozen member sent that the broker accepted for a partition it had lost
    # came after that partition was assigned to it again.
    reassigned: dict[TopicPartition, float] = {}
    for event in frozen.of("assigned"):
        if event.t >= lost_event.t:
            for tp in event.partitions:
                reassigned.setdefault(tp, event.t)
    after_resume = [e for e in frozen.of("commit_attempt") if e.data["sent"] >= stopped_at]
    accepted_lost: list[tuple[float, TopicPartition]] = []
    attempted_after_lost: list[tuple[float, TopicPartition]] = []
    for attempt in after_resume:
        for tp in tps(attempt.data["offsets"]) & lost:
            own_again = reassigned.get(tp)
            if own_again is not None and own_again <= attempt.data["sent"]:
                continue
            if attempt.data["sent"] >= lost_event.t:
                attempted_after_lost.append((attempt.data["sent"], tp))
            rejected = (
                attempt.data["failed"] is not None
                or f"{tp.topic}:{tp.partition}" in (attempt.data["errors"])
            )
            if not rejected:
                accepted_lost.append((attempt.data["sent"], tp))
    assert not accepted_lost, (accepted_lost, [e.data for e in after_resume])
    # kgroup itself sends nothing for them once it knows they are lost.
    assert not attempted_after_lost, (attempted_after_lost, [e.data for e in after_resume])
    # Nobody's commit ever moved a committed offset backwards (a stale commit
    # of the frozen member would have).
    assert not watcher.backwards, watcher.backwards

    wait_until(lambda: _consumed(members) >= delivered, 30, "every produced record consumed")
    assert frozen.close() == 0
    assert other.close() == 0
    # Both committed what they consumed on close: the group's offsets are at the end.
    ends: dict[TopicPartition, int] = {}
    for t, p, offset in delivered:
        tp = TopicPartition(t, p)
        ends[tp] = max(ends.get(tp, 0), offset + 1)
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group}) as probe:
        assert probe.committed(everything) == ends
