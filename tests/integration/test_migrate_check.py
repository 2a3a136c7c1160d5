"""``kgroup migrate check`` / ``plan`` against purpose-built groups on a real broker.

Each incompatibility is built for real and must be flagged: a custom assignor
whose assignments carry user data, a member whose regex RE2 rejects, a
librdkafka member whose partial-match regex picks topics the broker's full
match would not, a broker whose migration policy is ``disabled``. Where the
checker says the upgrade would be refused, a probe ConsumerGroupHeartbeat at
epoch 0 shows the broker does refuse it (and, being refused, changes nothing).
A clean group passes with exit code 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from helpers import (
    EventLog,
    PollingThread,
    Runner,
    TaggingAssignor,
    classic_conf,
    converged,
    partitions_of,
    run_python,
    wait_until,
)
from kio.schema.errors import ErrorCode

from kgroup.admin import GroupDescription, describe_group
from kgroup.membership import HeartbeatRequest, HeartbeatResponse
from kgroup.protocol.requests import consumer_group_heartbeat
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.testing.topics import create_topic
from kgroup.transport import KafkaClient
from kgroup.types import TopicPartition

pytestmark = pytest.mark.integration


def kgroup_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kgroup ARGS --bootstrap-servers BOOTSTRAP`` in a subprocess, as a user runs it."""
    env = {**os.environ, "KGROUP_STATE_DIR": str(Path("/nonexistent-kgroup-state"))}
    return run_python(
        "-m", "kgroup.cli", *args, "--bootstrap-servers", bootstrap, env=env, timeout=120
    )


def check(bootstrap: str, group: str, *extra: str) -> tuple[int, dict[str, Any]]:
    """``kgroup migrate check GROUP --json``: the exit code and the report."""
    done = kgroup_cli(bootstrap, "migrate", "check", group, "--json", *extra)
    assert done.returncode in (0, 1), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def codes(report: dict[str, Any], severity: str) -> set[str]:
    return {f["code"] for f in report["findings"] if f["severity"] == severity}


def finding(report: dict[str, Any], code: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [f for f in report["findings"] if f["code"] == code]
    assert len(found) == 1, report
    return found[0]


def probe_upgrade(bootstrap: str, group: str, topic: str) -> HeartbeatResponse:
    """A consumer-protocol member's first heartbeat (epoch 0) to ``group``.

    Only for groups the checker says cannot be converted: an accepted probe
    would convert the group and join it.
    """

    async def main() -> HeartbeatResponse:
        async with KafkaClient(bootstrap) as client:
            request = HeartbeatRequest(
                group_id=group,
                member_id=str(uuid.uuid4()),
                member_epoch=0,
                rebalance_timeout_ms=10_000,
                subscribed_topic_names=(topic,),
                topic_partitions=frozenset(),
            )
            response = await client.coordinator_request(
                group, lambda v: consumer_group_heartbeat.build(v, request)
            )
            return consumer_group_heartbeat.parse(consumer_group_heartbeat.narrow(response))

    return anyio.run(main)


def classic_group(
    bootstrap: str, topic: str, group: str, *names: str, **extra: Any
) -> list[Runner]:
    """kgroup classic members (cooperative-sticky) of ``group`` on ``topic``, converged."""
    log = EventLog()
    runners = [
        Runner(classic_conf(bootstrap, group, "cooperative-sticky", **extra), [topic], log, n)
        for n in names
    ]
    _settle(bootstrap, group, runners, frozenset(TopicPartition(topic, p) for p in range(4)))
    return runners


def _settle(
    bootstrap: str, group: str, runners: list[Runner], partitions: frozenset[TopicPartition]
) -> None:
    """Wait until every member holds a share of ``partitions`` and the broker says Stable.

    Converged alone also holds while the first member still owns everything and
    the next round, which hands the second its share, is about to start; and
    converged on the members' side can still be inside the cooperative second
    round, where the broker describes the group PreparingRebalance with no
    protocol (assignor) yet. The checks read the group as it is described: a
    check run in between judged a rebalancing group.
    """
    wait_until(
        lambda: converged(runners, partitions) and all(r.assignment() for r in runners),
        60,
        f"{group} balanced",
    )
    wait_until(lambda: _broker_says_stable(bootstrap, group), 60, f"{group} Stable")


def _broker_says_stable(bootstrap: str, group: str) -> bool:
    async def describe() -> GroupDescription:
        async with KafkaClient(bootstrap) as client:
            return await describe_group(client, group)

    return anyio.run(describe).state == "Stable"


# ------------------------------------------------------------------ clean group


def test_a_clean_classic_group_passes_with_exit_0(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=4), make_group_id()
    runners = classic_group(bootstrap, topic, group, "a", "b")
    try:
        rc, report = check(bootstrap, group)
        assert rc == 0, report
        assert report["safe"] is True
        assert codes(report, "blocker") == set()
        assert {"broker-ready", "policy-allows-upgrade", "assignment-movement"} <= codes(
            report, "info"
        )
        text = kgroup_cli(bootstrap, "migrate", "check", group)
        assert text.returncode == 0, text.stdout + text.stderr
        assert "safe to roll" in text.stdout.splitlines()[0]

        plan = kgroup_cli(bootstrap, "migrate", "plan", group, "--json")
        assert plan.returncode == 0, plan.stderr
        steps = json.loads(plan.stdout)["steps"]
        ids = {r.consumer.member_id for r in runners}
        assert {s["member_id"] for s in steps} == ids
        assert json.loads(plan.stdout)["set_keys"]["group.protocol"] == "consumer"
    finally:
        for runner in runners:
            runner.stop()


# --------------------------------------------------------- custom assignor data


def test_assignment_user_data_is_a_blocker_the_broker_enforces(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=4), make_group_id()
    log = EventLog()
    runners = [
        Runner(classic_conf(bootstrap, group, [TaggingAssignor()]), [topic], log, n)
        for n in ("a", "b")
    ]
    try:
        _settle(bootstrap, group, runners, partitions_of(topic, 4))
        rc, report = check(bootstrap, group)
        assert rc == 1
        assert report["safe"] is False
        blocker = finding(report, "custom-assignor-user-data")
        assert blocker["severity"] == "blocker"
        for runner in runners:
            assert runner.consumer.member_id in blocker["what"]
        assert "KAFKA-18134" in blocker["why"]
        assert blocker["fix"]
        # The assignor has no server-side counterpart either.
        assert "custom-classic-assignor" in codes(report, "warning")

        described = kgroup_cli(bootstrap, "groups", "describe", group)
        assert described.returncode == 0, described.stderr
        assert "assignor tagging" in described.stdout
        assert "5 bytes" in described.stdout  # b"tag-0", b"tag-1"

        refused = probe_upgrade(bootstrap, group, topic)
        assert refused.error_code == ErrorCode.group_id_not_found
        assert "custom assignor" in (refused.error_message or "")
        # Refused: the group is still the same classic group with both members.
        assert converged(runners, partitions_of(topic, 4))
        plan = kgroup_cli(bootstrap, "migrate", "plan", group)
        assert plan.returncode == 1
        assert "resolve them before rolling" in plan.stdout
    finally:
        for runner in runners:
            runner.stop()


# -------------------------------------------------------------------- regexes


class _ConfluentClassic(PollingThread):
    """A librdkafka classic member subscribing with a regex (partial match)."""

    def __init__(self, bootstrap: str, group: str, pattern: str) -> None:
        super().__init__("confluent", "peer")
        self.consumer = ConfluentConsumer(classic_conf(bootstrap, group, "cooperative-sticky"))
        self.consumer.subscribe([pattern])
        self.assigned: frozenset[TopicPartition] = frozenset()
        self.start()

    def poll_once(self) -> None:
        self.consumer.consume(100, 0.2)
        self.assigned = frozenset(
            TopicPartition(tp.topic, tp.partition) for tp in self.consumer.assignment()
        )

    def close_consumer(self) -> None:
        self.consumer.close()


def test_a_partial_match_regex_that_would_drop_topics_is_a_blocker(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    base = make_topic(partitions=1)
    eu = make_topic(partitions=1, name=f"{base}-eu")
    us = make_topic(partitions=1, name=f"{base}-us")
    group = make_group_id()
    pattern = f"^{base}"
    member = _ConfluentClassic(bootstrap, group, pattern)
    try:
        wanted = {TopicPartition(t, 0) for t in (base, eu, us)}
        wait_until(lambda: member.assigned == wanted, 60, "librdkafka matched all three")
        rc, report = check(bootstrap, group, "--regex", pattern)
        assert rc == 1
        dropped = finding(report, "regex-drops-topics")
        assert dropped["severity"] == "blocker"
        assert eu in dropped["what"]
        assert us in dropped["what"]
        assert f"'{pattern}.*'" in dropped["fix"]
        # The suggested rewrite passes the same check.
        rc, fixed = check(bootstrap, group, "--regex", f"{pattern}.*")
        assert rc == 0, fixed
        assert "regex-same-topics" in codes(fixed, "info")
        plan = kgroup_cli(bootstrap, "migrate", "plan", group, "--regex", pattern, "--json")
        assert json.loads(plan.stdout)["subscription_changes"] == {pattern: f"{pattern}.*"}
    finally:
        member.stop()


def test_a_regex_re2_rejects_is_a_blocker(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    base = make_topic(partitions=1)
    make_topic(partitions=1, name=f"{base}-eu")
    make_topic(partitions=1, name=f"{base}-test")
    group = make_group_id()
    # Python's re (kgroup's classic members) has lookahead; RE2 has not.
    pattern = f"^{base}(?!-test).*"
    log = EventLog()
    runner = Runner(classic_conf(bootstrap, group, "cooperative-sticky"), pattern, log, "re")
    try:
        wanted = {TopicPartition(base, 0), TopicPartition(f"{base}-eu", 0)}
        wait_until(lambda: runner.assignment() == wanted, 60, "the lookahead regex resolved")
        rc, report = check(bootstrap, group, "--regex", pattern)
        assert rc == 1
        rejected = finding(report, "regex-rejected")
        assert rejected["severity"] == "blocker"
        assert "INVALID_REGULAR_EXPRESSION" in rejected["why"]
    finally:
        runner.stop()


# ------------------------------------------------------------- disabled policy


@pytest.fixture(scope="module")
def no_migration_broker() -> Iterator[KafkaBroker]:
    with KafkaBroker(overrides={"group.consumer.migration.policy": "disabled"}) as broker:
        yield broker


def test_the_disabled_policy_is_a_blocker_the_broker_enforces(
    no_migration_broker: KafkaBroker,
) -> None:
    bootstrap = no_migration_broker.bootstrap_servers
    topic, group = "migrate-disabled", "g-migrate-disabled"
    create_topic(bootstrap, topic, partitions=4)
    runners = classic_group(bootstrap, topic, group, "a")
    try:
        rc, report = check(bootstrap, group)
        assert rc == 1
        blocker = finding(report, "upgrade-refused-by-policy")
        assert blocker["severity"] == "blocker"
        assert "disabled" in blocker["what"]
        # Rolling back would be offline too.
        assert "rollback-offline-only" in codes(report, "warning")
        refused = probe_upgrade(bootstrap, group, topic)
        assert refused.error_code == ErrorCode.group_id_not_found
        assert "disabled" in (refused.error_message or "")
    finally:
        for runner in runners:
            runner.stop()
    # Once empty, the group converts under any policy: nothing blocks.
    rc, report = check(bootstrap, group)
    assert rc == 0, report
    assert "empty-group-converts" in codes(report, "info")
