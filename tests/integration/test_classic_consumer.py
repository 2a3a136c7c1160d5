"""kgroup consumers on the classic protocol (JoinGroup / SyncGroup) against a real broker.

The session broker runs the harness's fast settings (no initial rebalance
delay, 1 s minimum session timeout); the members here use a 500 ms heartbeat
and a 6 s session timeout.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions
from helpers import (
    EventLog,
    Runner,
    classic_conf,
    converged,
    partitions_of,
    produce,
    run_python,
    wait_until,
)

from kgroup import Consumer, GroupProtocol, TopicPartition
from kgroup.errors import FencedInstanceIdError
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.testing.topics import create_topic

pytestmark = pytest.mark.integration


def _consumed_all(runners: list[Runner], values: set[str]) -> bool:
    seen: set[str] = set()
    for runner in runners:
        seen.update(runner.values)
    return values <= seen


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_share_the_topic(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, strategy: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=6)
    group = make_group_id()
    values = produce(bootstrap, topic, 6, 300)
    log = EventLog()
    runners = [
        Runner(classic_conf(bootstrap, group, strategy), [topic], log, name) for name in "abc"
    ]
    try:
        wait_until(
            lambda: (
                converged(runners, partitions_of(topic, 6))
                and all(len(r.assignment()) == 2 for r in runners)
            ),
            30,
            "three members with two partitions each",
        )
        wait_until(lambda: _consumed_all(runners, values), 30, "every record consumed")
        for runner in runners:
            assert runner.consumer.group_protocol is GroupProtocol.CLASSIC
            assert runner.consumer.member_epoch > 0  # the generation id
        log.check_handover_order()
    finally:
        for runner in runners:
            runner.stop()


def test_cooperative_join_revokes_only_moving_partitions(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=8)
    group = make_group_id()
    log = EventLog()
    conf = classic_conf(bootstrap, group, "cooperative-sticky")
    runners = [Runner(conf, [topic], log, name) for name in "abc"]
    try:
        wait_until(
            lambda: (
                converged(runners, partitions_of(topic, 8))
                and all(len(r.assignment()) >= 2 for r in runners)
            ),
            30,
            "three converged",
        )
        before = {r.name: r.assignment() for r in runners}
        revoked_before = {r.name: len(log.of(r.name, "revoked")) for r in runners}
        first = produce(bootstrap, topic, 8, 400)
        wait_until(lambda: _consumed_all(runners, first), 30, "records before the join")

        runners.append(Runner(conf, [topic], log, "d"))
        wait_until(
            lambda: (
                converged(runners, partitions_of(topic, 8))
                and all(len(r.assignment()) == 2 for r in runners)
            ),
            30,
            "four converged",
        )
        second = produce(bootstrap, topic, 8, 400, start=400)
        wait_until(lambda: _consumed_all(runners, second), 30, "records after the join")

        moved: set[object] = set()
        for runner in runners[:3]:
            after = runner.assignment()
            assert after <= before[runner.name], "a kept member gained a partition"
            revoked = [e.partitions for e in log.of(runner.name, "revoked")]
            revoked = revoked[revoked_before[runner.name] :]
            lost = before[runner.name] - after
            # Only what moved was revoked, and exactly once.
            assert frozenset().union(*revoked) == lost if revoked else not lost
            assert all(p <= lost for p in revoked)
            moved |= lost
        assert moved == set(runners[3].assignment())
        log.check_handover_order()
    finally:
        for runner in runners:
            runner.stop()


def test_static_member_bounce_within_the_session_timeout_causes_no_rebalance(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=6)
    group = make_group_id()
    log = EventLog()

    def conf(name: str) -> dict[str, Any]:
        return classic_conf(bootstrap, group, "range", group_instance_id=f"static-{name}")

    runners = [Runner(conf(name), [topic], log, name) for name in "abc"]
    try:
        wait_until(
            lambda: (
                converged(runners, partitions_of(topic, 6))
                and all(len(r.assignment()) == 2 for r in runners)
            ),
            30,
            "three static members converged",
        )
        time.sleep(1.0)  # past the last heartbeat round of the first generation
        generations = {r.name: r.consumer.member_epoch for r in runners}
        events_before = {r.name: len(log.of(r.name)) for r in runners}
        held = runners[2].assignment()

        runners[2].stop()  # a static member does not leave: no rebalance yet
        runners[2] = Runner(conf("c"), [topic], log, "c2")
        wait_until(lambda: runners[2].assignment() == held, 20, "the bounced member is back")
        values = produce(bootstrap, topic, 6, 120)
        wait_until(lambda: _consumed_all(runners, values), 30, "every record consumed")
        time.sleep(1.5)  # several heartbeats: a rebalance would show now
        for runner in runners[:2]:
            assert runner.consumer.member_epoch == generations[runner.name]
            assert len(log.of(runner.name)) == events_before[runner.name], log.of(runner.name)
        assert runners[2].consumer.member_epoch == generations["c"]
    finally:
        for runner in runners:
            runner.stop()


@pytest.mark.provokes_double_ownership(
    "the broker hands the twin the first member's partitions at once; the first fetches "
    "them until its next heartbeat is answered FENCED_INSTANCE_ID"
)
def test_duplicate_live_instance_id_is_a_fatal_fenced_error(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    conf = classic_conf(bootstrap, make_group_id(), "range", group_instance_id="twin")
    with Consumer(conf) as first:
        first.subscribe([topic])
        wait_until(lambda: (first.poll(0.1), len(first.assignment()) == 2)[1], 20, "first joined")
        with Consumer(conf) as second:
            second.subscribe([topic])
            deadline = time.monotonic() + 20
            with pytest.raises(FencedInstanceIdError):  # noqa: PT012 - polls until fenced
                while time.monotonic() < deadline:
                    first.poll(0.1)
                    second.poll(0.1)


def _add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, total)]).values():
        future.result(30)


def test_leader_rebalances_when_partitions_are_added_or_a_topic_appears(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    later = f"{topic}-later"
    group = make_group_id()
    log = EventLog()
    conf = classic_conf(bootstrap, group, "cooperative-sticky", metadata_max_age_ms=500)
    runners = [Runner(conf, [topic, later], log, name) for name in "ab"]
    try:
        wait_until(
            lambda: (
                converged(runners, partitions_of(topic, 2)) and all(r.assignment() for r in runners)
            ),
            30,
            "two members on the first topic",
        )
        _add_partitions(bootstrap, topic, 4)
        wait_until(
            lambda: (
                converged(runners, partitions_of(topic, 4))
                and all(len(r.assignment()) == 2 for r in runners)
            ),
            20,
            "the added partitions assigned",
        )
        create_topic(bootstrap, later, partitions=2)
        expected = partitions_of(topic, 4) | partitions_of(later, 2)
        wait_until(lambda: converged(runners, expected), 20, "the new topic assigned")
        values = produce(bootstrap, topic, 4, 40) | produce(bootstrap, later, 2, 20)
        wait_until(lambda: _consumed_all(runners, values), 30, "every record consumed")
    finally:
        for runner in runners:
            runner.stop()


def test_regex_subscription_follows_new_topics(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    other = f"{topic}-second"
    conf = classic_conf(bootstrap, make_group_id(), "range", metadata_max_age_ms=500)
    with Consumer(conf) as consumer:
        consumer.subscribe(pattern=f"{topic}.*")
        wait_until(
            lambda: (consumer.poll(0.1), consumer.assignment() == partitions_of(topic, 2))[1],
            20,
            "the matching topic assigned",
        )
        create_topic(bootstrap, other, partitions=1)
        wait_until(
            lambda: (consumer.poll(0.1), TopicPartition(other, 0) in consumer.assignment())[1],
            20,
            "the new matching topic assigned",
        )


@pytest.mark.parametrize("extra", [(), ("--capacity", "3")])
def test_classic_consumer_example_reads_every_record(
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    extra: tuple[str, ...],
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=3)
    produce(bootstrap, topic, 3, 30)
    script = Path(__file__).resolve().parents[2] / "examples" / "classic_consumer.py"
    result = run_python(
        str(script), bootstrap, topic, make_group_id(), *extra, "--max-records", "30"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "group protocol: classic" in result.stdout
    assert "assigned [" in result.stdout
    assert "consumed 30 records" in result.stdout


def test_eager_group_moves_to_cooperative_with_two_rolling_bounces(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    """KIP-429's upgrade: bounce 1 advertises both assignors, bounce 2 drops range.

    During the second bounce the group is cooperative: members that stay keep
    consuming, none has everything it holds revoked at once.
    """
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=6)
    group = make_group_id()
    log = EventLog()
    everything = partitions_of(topic, 6)
    closing: dict[str, int] = {}
    runners: list[Runner] = []

    def balanced() -> bool:
        return converged(runners, everything) and all(len(r.assignment()) == 2 for r in runners)

    def bounce(strategy: str, tag: str) -> None:
        for i in range(3):
            old = runners[i]
            closing[old.name] = time.monotonic_ns()
            old.stop()
            runners[i] = Runner(classic_conf(bootstrap, group, strategy), [topic], log, f"{tag}{i}")
            wait_until(balanced, 30, f"balanced after bouncing {old.name}")

    try:
        for i in range(3):
            runners.append(Runner(classic_conf(bootstrap, group, "range"), [topic], log, f"e{i}"))
        wait_until(balanced, 30, "an eager group of three")
        bounce("cooperative-sticky,range", "both")
        second_started = time.monotonic_ns()
        bounce("cooperative-sticky", "coop")
        values = produce(bootstrap, topic, 6, 120)
        wait_until(lambda: _consumed_all(runners, values), 30, "every record consumed")

        with log.lock:
            events = sorted(log.events, key=lambda e: e.at)
        held: dict[str, set[object]] = {}
        for event in events:
            mine = held.setdefault(event.member, set())
            if event.kind == "assigned":
                mine |= event.partitions
                continue
            stays = event.at < closing.get(event.member, 2**63)
            if event.at >= second_started and stays:
                assert event.partitions != mine, (
                    f"{event.member} had everything revoked during the second bounce"
                )
            mine -= event.partitions
        log.check_handover_order()
    finally:
        for runner in runners:
            runner.stop()
