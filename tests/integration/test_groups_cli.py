"""``kgroup groups list | describe | lag`` against a real broker, as a user runs them.

The mixed group is converted for real: a librdkafka classic member forms it,
then a kgroup consumer-protocol member joins and the coordinator converts it;
``describe`` must show both members with their protocols.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import anyio
import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentPartition
from helpers import (
    EventLog,
    PollingThread,
    Runner,
    classic_conf,
    consumer_conf,
    produce,
    run_python,
    wait_until,
)

from kgroup import admin
from kgroup.errors import GroupIdNotFoundError
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport import KafkaClient
from kgroup.types import TopicPartition

pytestmark = pytest.mark.integration


def kgroup_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kgroup ARGS`` in a subprocess, the broker given through the environment."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    return run_python("-m", "kgroup.cli", *args, env=env, timeout=120)


def cli_json(bootstrap: str, *args: str) -> Any:
    done = kgroup_cli(bootstrap, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def describe(bootstrap: str, group: str) -> admin.GroupDescription:
    async def main() -> admin.GroupDescription:
        async with KafkaClient(bootstrap) as client:
            return await admin.describe_group(client, group)

    return anyio.run(main)


class _ConfluentClassic(PollingThread):
    """A librdkafka member on the classic protocol, polling in its own thread."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__("confluent", "peer")
        self.consumer = ConfluentConsumer(classic_conf(bootstrap, group, "cooperative-sticky"))
        self.consumer.subscribe([topic])
        self.start()

    def poll_once(self) -> None:
        self.consumer.consume(100, 0.2)

    def close_consumer(self) -> None:
        self.consumer.close()


def test_list_shows_each_groups_type_protocol_type_and_state(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    classic_group, consumer_group = make_group_id("classic"), make_group_id("consumer")
    log = EventLog()
    runners = [
        Runner(classic_conf(bootstrap, classic_group, "range"), [topic], log, "c"),
        Runner(consumer_conf(bootstrap, consumer_group), [topic], log, "n"),
    ]
    try:
        wait_until(lambda: all(len(r.assignment()) == 2 for r in runners), 60, "both assigned")
        listed = {g["group_id"]: g for g in cli_json(bootstrap, "groups", "list")}
        assert listed[classic_group]["group_type"] == "classic"
        assert listed[consumer_group]["group_type"] == "consumer"
        for group in (classic_group, consumer_group):
            assert listed[group]["protocol_type"] == "consumer"
            assert listed[group]["state"] == "Stable"
            assert listed[group]["coordinator"] == 1
        only_consumer = {
            g["group_id"] for g in cli_json(bootstrap, "groups", "list", "--type", "consumer")
        }
        assert consumer_group in only_consumer
        assert classic_group not in only_consumer
        text = kgroup_cli(bootstrap, "groups", "list").stdout
        row = next(line for line in text.splitlines() if line.startswith(classic_group))
        assert row.split()[1:4] == ["classic", "consumer", "Stable"]
    finally:
        for runner in runners:
            runner.stop()


def test_describe_shows_a_mixed_groups_members_with_their_protocols(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=4), make_group_id()
    everything = frozenset(TopicPartition(topic, p) for p in range(4))
    classic = _ConfluentClassic(bootstrap, group, topic)
    runner: Runner | None = None
    try:

        def formed() -> bool:
            try:
                members = describe(bootstrap, group).members
            except GroupIdNotFoundError:
                return False  # the member has not joined yet
            return len(members) == 1 and members[0].assignment == everything

        wait_until(formed, 60, "the classic member owns every partition")
        assert describe(bootstrap, group).group_type is admin.GroupType.CLASSIC
        # The consumer-protocol member's first heartbeat converts the group.
        runner = Runner(consumer_conf(bootstrap, group), [topic], EventLog(), "kgroup")

        def mixed() -> bool:
            group_now = describe(bootstrap, group)
            owned = [tp for m in group_now.members for tp in m.assignment]
            return (
                group_now.group_type is admin.GroupType.CONSUMER
                and {m.protocol for m in group_now.members}
                == {admin.MemberProtocol.CLASSIC, admin.MemberProtocol.CONSUMER}
                and len(owned) == len(set(owned))
                and set(owned) == everything
                and all(m.assignment for m in group_now.members)
            )

        wait_until(mixed, 60, "a converted group of one classic and one consumer member")
        data = cli_json(bootstrap, "groups", "describe", group)
        assert data["group_type"] == "consumer"
        assert data["group_epoch"] >= 1
        by_protocol = {m["protocol"]: m for m in data["members"]}
        assert by_protocol["consumer"]["member_id"] == runner.consumer.member_id
        assert by_protocol["classic"]["client_id"] == "rdkafka"
        for member in data["members"]:
            assert member["member_epoch"] >= 1
            assert member["assignment"]

        text = kgroup_cli(bootstrap, "groups", "describe", group).stdout
        assert "1 on the consumer protocol, 1 classic" in text
        row = next(line for line in text.splitlines() if line.startswith(runner.consumer.member_id))
        assert "consumer" in row.split()
        classic_rows = [
            line for line in text.splitlines() if " rdkafka " in f" {line} " and "classic" in line
        ]
        assert len(classic_rows) == 1
    finally:
        if runner is not None:
            runner.stop()
        classic.stop()


def test_lag_per_partition_from_committed_and_log_end_offsets(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=3), make_group_id()
    produce(bootstrap, topic, 3, 30)  # 10 records in each partition
    # Offsets committed by a client that assigned itself partitions (no membership).
    committer = ConfluentConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        committer.commit(
            offsets=[ConfluentPartition(topic, 0, 4), ConfluentPartition(topic, 1, 10)],
            asynchronous=False,
        )
    finally:
        committer.close()

    data = cli_json(bootstrap, "groups", "lag", group)
    rows = {p["partition"]["partition"]: p for p in data["partitions"]}
    # Partition 2 has no committed offset and no owner: nothing to report.
    assert set(rows) == {0, 1}
    assert (rows[0]["committed"], rows[0]["log_end"], rows[0]["lag"]) == (4, 10, 6)
    assert (rows[1]["committed"], rows[1]["log_end"], rows[1]["lag"]) == (10, 10, 0)
    assert rows[0]["member_id"] is None
    assert data["total"] == 6
    assert data["group"]["state"] == "Empty"

    text = kgroup_cli(bootstrap, "groups", "lag", group).stdout
    assert "total lag 6" in text
    line = next(row for row in text.splitlines() if row.startswith(f"{topic}  0"))
    assert line.split()[:5] == [topic, "0", "4", "10", "6"]


def test_describing_an_unknown_group_fails_with_exit_2_naming_it(
    kafka_broker: KafkaBroker, make_group_id: MakeGroupId
) -> None:
    group = make_group_id("missing")
    done = kgroup_cli(kafka_broker.bootstrap_servers, "groups", "describe", group)
    assert done.returncode == 2
    assert "GROUP_ID_NOT_FOUND" in done.stderr
    assert group in done.stderr
