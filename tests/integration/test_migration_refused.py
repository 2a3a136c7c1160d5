"""Migrations the broker refuses, and the migration policies, on real brokers (issue 12).

A consumer-protocol member joining a live classic group the coordinator will
not convert gets GROUP_ID_NOT_FOUND on its first heartbeat; kgroup raises
:class:`~kgroup.errors.UpgradeRefusedError` from ``poll`` with the broker's
reason and what to do, within 20 s, and the classic group goes on unchanged.

``group.consumer.migration.policy`` cannot be changed at run time
(IncrementalAlterConfigs answers "Cannot update these configs dynamically"),
so each policy case starts a broker of its own with the policy set.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
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
    consumer_conf,
    converged,
    partitions_of,
    wait_until,
)

from kgroup import Consumer, TopicPartition
from kgroup.admin import describe_group
from kgroup.errors import GroupIdNotFoundError, UpgradeRefusedError
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.testing.topics import create_topic
from kgroup.transport import KafkaClient

pytestmark = pytest.mark.integration

REFUSED_WITHIN_S = 20.0
"""The acceptance bound: a refused migration is a typed error within 20 s."""


class _Confluent(PollingThread):
    """A librdkafka classic member (cooperative-sticky), polling in its own thread."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(name, "peer")
        self.consumer = ConfluentConsumer(classic_conf(bootstrap, group, "cooperative-sticky"))
        self.consumer.subscribe([topic])
        self.assigned: frozenset[TopicPartition] = frozenset()
        self.start()

    def poll_once(self) -> None:
        self.consumer.consume(100, 0.2)
        # Read here, in the polling thread: librdkafka's assignment() from
        # another thread waits for the poll.
        self.assigned = frozenset(
            TopicPartition(tp.topic, tp.partition) for tp in self.consumer.assignment()
        )

    def close_consumer(self) -> None:
        self.consumer.close()

    def assignment(self) -> frozenset[TopicPartition]:
        return self.assigned


def _shape(bootstrap: str, group: str) -> tuple[str, tuple[str, ...]]:
    async def describe() -> Any:
        async with KafkaClient(bootstrap) as client:
            return await describe_group(client, group)

    found = anyio.run(describe)
    return found.group_type.value, tuple(sorted(m.protocol.value for m in found.members))


def _refused(bootstrap: str, group: str, topic: str) -> tuple[UpgradeRefusedError, float]:
    """Join ``group`` on the consumer protocol; the error poll raised, and after how long."""
    consumer = Consumer(consumer_conf(bootstrap, group, group_protocol="consumer"))
    try:
        consumer.subscribe([topic])
        started = time.monotonic()
        with pytest.raises(UpgradeRefusedError) as info:
            _poll_for(consumer, REFUSED_WITHIN_S + 10)
        took = time.monotonic() - started
    finally:
        consumer.close(5)
    return info.value, took


def _poll_for(consumer: Consumer, seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        consumer.poll(0.2)


def _classic_group(
    make: Callable[[str], Any], members: int, topic: str, partitions: int
) -> list[Any]:
    """Start ``members`` one after the other, each once the group settled (several rebalances)."""
    started: list[Any] = []
    for i in range(members):
        started.append(make(f"classic-{i}"))
        wait_until(
            lambda: (
                converged(started, partitions_of(topic, partitions))
                and all(m.assignment() for m in started)
            ),
            30,
            f"the classic group of {len(started)}",
        )
    return started


# ------------------------------------------------------ refused: user data


@pytest.mark.parametrize("leader", ["custom-assignor", "librdkafka-cooperative-sticky"])
def test_upgrade_of_a_group_whose_assignments_carry_user_data_is_refused_with_the_fix(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, leader: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=4), make_group_id()
    log = EventLog()

    def make(name: str) -> Any:
        if leader == "custom-assignor":
            conf = classic_conf(bootstrap, group, [TaggingAssignor()])
            return Runner(conf, [topic], log, name)
        # librdkafka's leader copies each member's subscription user data
        # (cooperative-sticky's generation) into its assignment: the broker
        # takes that for a custom assignor's state (finding of this suite).
        return _Confluent(name, bootstrap, group, topic)

    members = _classic_group(make, 2, topic, 4)
    try:
        held = [m.assignment() for m in members]
        error, took = _refused(bootstrap, group, topic)
        assert took < REFUSED_WITHIN_S
        assert isinstance(error, GroupIdNotFoundError)
        text = str(error)
        assert "custom assignor" in text  # the broker's reason
        assert "user data" in text  # what it means
        assert "migrate offline" in text  # and what to do
        # The classic group goes on as it was.
        assert _shape(bootstrap, group) == ("classic", ("classic", "classic"))
        assert [m.assignment() for m in members] == held
    finally:
        for member in members:
            member.stop()


# ------------------------------------------------------------- the policies


@pytest.fixture
def policy_broker(request: pytest.FixtureRequest) -> Iterator[KafkaBroker]:
    policy = request.param
    with KafkaBroker(overrides={"group.consumer.migration.policy": policy}) as broker:
        yield broker


def _classic_runners(bootstrap: str, group: str, topic: str, log: EventLog, n: int) -> list[Runner]:
    conf = classic_conf(bootstrap, group, "cooperative-sticky")
    return _classic_group(lambda name: Runner(conf, [topic], log, name), n, topic, 4)


@pytest.mark.parametrize("policy_broker", ["disabled"], indirect=True)
def test_disabled_policy_refuses_the_upgrade_within_20_s_and_says_which_setting(
    policy_broker: KafkaBroker,
) -> None:
    bootstrap = policy_broker.bootstrap_servers
    create_topic(bootstrap, "orders", partitions=4)
    log = EventLog()
    runners = _classic_runners(bootstrap, "disabled-g", "orders", log, 2)
    try:
        error, took = _refused(bootstrap, "disabled-g", "orders")
        assert took < REFUSED_WITHIN_S
        text = str(error)
        assert "online upgrade is disabled" in text
        assert "group.consumer.migration.policy" in text
        assert _shape(bootstrap, "disabled-g") == ("classic", ("classic", "classic"))
        assert converged(runners, partitions_of("orders", 4))
    finally:
        for runner in runners:
            runner.stop()
    # An empty group converts under any policy: its offsets carry over.
    with Consumer(consumer_conf(bootstrap, "disabled-g", group_protocol="consumer")) as consumer:
        consumer.subscribe(["orders"])
        wait_until(
            lambda: (
                consumer.consume(10, 0.2) is not None
                and consumer.assignment() == partitions_of("orders", 4)
            ),
            30,
            "the emptied group taken over on the consumer protocol",
        )
        assert _shape(bootstrap, "disabled-g") == ("consumer", ("consumer",))


@pytest.mark.parametrize("policy_broker", ["upgrade"], indirect=True)
def test_upgrade_policy_converts_up_but_never_back(policy_broker: KafkaBroker) -> None:
    bootstrap = policy_broker.bootstrap_servers
    create_topic(bootstrap, "orders", partitions=4)
    log = EventLog()
    runners = _classic_runners(bootstrap, "up-g", "orders", log, 2)
    conf = consumer_conf(bootstrap, "up-g", group_protocol="consumer")
    upgraded = Runner(conf, ["orders"], log, "consumer")
    try:
        wait_until(
            lambda: (
                converged([*runners, upgraded], partitions_of("orders", 4))
                and all(r.assignment() for r in [*runners, upgraded])
            ),
            30,
            "the converted group",
        )
        assert _shape(bootstrap, "up-g") == ("consumer", ("classic", "classic", "consumer"))
        upgraded.stop()
        # The last consumer-protocol member left: no downgrade under this policy;
        # the classic members stay in the consumer group.
        assert _shape(bootstrap, "up-g") == ("consumer", ("classic", "classic"))
        # Finding (Kafka 4.4.0, librdkafka classic members alike): the coordinator
        # bumps the group epoch but goes on answering the classic members'
        # heartbeats with NONE, so none of them rejoins and the departed member's
        # partitions stay unowned until a classic member rejoins for another
        # reason. docs/migration.md says to roll a group under this policy with
        # at least one consumer-protocol member left in it.
    finally:
        for runner in runners:
            runner.stop()


@pytest.mark.parametrize("policy_broker", ["downgrade"], indirect=True)
def test_downgrade_policy_converts_back_but_refuses_upgrades(policy_broker: KafkaBroker) -> None:
    bootstrap = policy_broker.bootstrap_servers
    create_topic(bootstrap, "orders", partitions=4)
    log = EventLog()
    # Upgrades are refused...
    runners = _classic_runners(bootstrap, "down-up-g", "orders", log, 1)
    try:
        error, took = _refused(bootstrap, "down-up-g", "orders")
        assert took < REFUSED_WITHIN_S
        assert "online upgrade is disabled" in str(error)
    finally:
        for runner in runners:
            runner.stop()
    # ...a consumer group takes classic members and converts back when its
    # last consumer-protocol member leaves.
    conf = consumer_conf(bootstrap, "down-g", group_protocol="consumer")
    first = Runner(conf, ["orders"], log, "consumer")
    # The consumer-protocol member creates the group first: a classic JoinGroup
    # arriving before its first heartbeat would create a classic group, which
    # this policy refuses to upgrade (a CI run lost that race).
    try:
        wait_until(
            lambda: converged([first], partitions_of("orders", 4)),
            30,
            "the consumer-protocol member owns the topic",
        )
    except BaseException:
        first.stop()
        raise
    classic = Runner(classic_conf(bootstrap, "down-g", "cooperative-sticky"), ["orders"], log, "c")
    try:
        wait_until(
            lambda: (
                converged([first, classic], partitions_of("orders", 4))
                and bool(classic.assignment())
            ),
            30,
            "a classic member in the consumer group",
        )
        assert _shape(bootstrap, "down-g") == ("consumer", ("classic", "consumer"))
        first.stop()
        wait_until(lambda: converged([classic], partitions_of("orders", 4)), 30, "take-over")
        assert _shape(bootstrap, "down-g") == ("classic", ("classic",))
    finally:
        classic.stop()
