"""``kgroup groups describe --all-groups`` and ``lag --all-groups`` against a real broker.

The broker is shared with other tests, so the assertions look at this test's own
groups inside the listing, never at its length.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentPartition
from helpers import EventLog, Runner, classic_conf, consumer_conf, produce, run_python, wait_until

from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration


def kgroup_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    return run_python("-m", "kgroup.cli", *args, env=env, timeout=120)


def cli_json(bootstrap: str, *args: str) -> Any:
    done = kgroup_cli(bootstrap, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_all_groups_describes_and_measures_every_consumer_group(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    produce(bootstrap, topic, 2, 20)
    classic, consumer, idle = (make_group_id(n) for n in ("classic", "consumer", "idle"))
    committer = ConfluentConsumer(
        {"bootstrap.servers": bootstrap, "group.id": idle, "enable.auto.commit": False}
    )
    try:
        committer.commit(offsets=[ConfluentPartition(topic, 0, 3)], asynchronous=False)
    finally:
        committer.close()
    log = EventLog()
    runners = [
        Runner(classic_conf(bootstrap, classic, "range"), [topic], log, "c"),
        Runner(consumer_conf(bootstrap, consumer), [topic], log, "n"),
    ]
    try:
        wait_until(lambda: all(len(r.assignment()) == 2 for r in runners), 60, "both assigned")

        described = {
            g["group_id"]: g for g in cli_json(bootstrap, "groups", "describe", "--all-groups")
        }
        assert described[classic]["group_type"] == "classic"
        assert described[consumer]["group_type"] == "consumer"
        assert described[idle]["state"] == "Empty"
        for group in (classic, consumer):
            (member,) = described[group]["members"]
            assert len(member["assignment"]) == 2
        assert described[idle]["members"] == []

        text = kgroup_cli(bootstrap, "groups", "describe", "--all-groups").stdout
        for group, kind in ((classic, "classic"), (consumer, "consumer"), (idle, "classic")):
            assert f"Group {group}: {kind} group" in text

        lags = {
            g["group"]["group_id"]: g for g in cli_json(bootstrap, "groups", "lag", "--all-groups")
        }
        assert [
            (p["partition"]["partition"], p["committed"], p["lag"])
            for p in lags[idle]["partitions"]
        ] == [(0, 3, 7)]
        assert lags[idle]["total"] == 7
        assert {p["partition"]["partition"] for p in lags[consumer]["partitions"]} == {0, 1}
        text = kgroup_cli(bootstrap, "groups", "lag", "--all-groups").stdout
        assert f"Group {idle}: classic group, state Empty, 0 member(s), total lag 7" in text
    finally:
        for runner in runners:
            runner.stop()


def test_describe_takes_a_group_or_all_groups_not_both_nor_neither(
    kafka_broker: KafkaBroker, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    for command in ("describe", "lag"):
        for args in ((), (make_group_id(), "--all-groups")):
            done = kgroup_cli(bootstrap, "groups", command, *args)
            assert done.returncode == 2
            assert "name a GROUP or pass --all-groups" in done.stderr
