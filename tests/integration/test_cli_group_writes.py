"""``kgroup groups reset-offsets | delete | delete-offsets`` against a real broker.

Each command runs as a user runs it (a subprocess); what it wrote is read back
as a non-member would (``kgroup.admin.committed_offsets``), not from its output.
The refusals are checked on both group types with live members: a librdkafka
classic member and a kgroup consumer-protocol member.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
from collections.abc import Mapping
from typing import Any

import anyio
import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from helpers import EventLog, Runner, classic_conf, consumer_conf, produce, run_python, wait_until

from kgroup import admin
from kgroup.errors import GroupIdNotFoundError
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport import KafkaClient
from kgroup.types import TopicPartition

pytestmark = pytest.mark.integration


def kgroup_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    return run_python("-m", "kgroup.cli", *args, env=env, timeout=120)


def cli_json(bootstrap: str, *args: str) -> Any:
    done = kgroup_cli(bootstrap, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def commit(bootstrap: str, group: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Commit ``offsets`` for ``group`` from a client that is no member (an empty group)."""
    committer = ConfluentConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        committer.commit(
            offsets=[ConfluentPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()],
            asynchronous=False,
        )
    finally:
        committer.close()


def committed(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    async def main() -> dict[TopicPartition, int]:
        async with KafkaClient(bootstrap) as client:
            return await admin.committed_offsets(client, group)

    return anyio.run(main)


def plan_of(data: Any) -> dict[int, tuple[int | None, int]]:
    """A ``--json`` plan as partition -> (current, new)."""
    return {p["partition"]["partition"]: (p["current"], p["new"]) for p in data["partitions"]}


def reset(bootstrap: str, group: str, *args: str) -> dict[int, tuple[int | None, int]]:
    return plan_of(cli_json(bootstrap, "groups", "reset-offsets", group, *args))


def _three_by_ten(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> tuple[str, str, str]:
    """A topic of 3 partitions with 10 records each, and a group that committed 4, 10, 0."""
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=3), make_group_id()
    produce(bootstrap, topic, 3, 30)
    commit(
        bootstrap,
        group,
        {TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 10, TopicPartition(topic, 2): 0},
    )
    return bootstrap, topic, group


def test_reset_offsets_plans_each_target_without_writing(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap, topic, group = _three_by_ten(kafka_broker, make_topic, make_group_id)
    before = committed(bootstrap, group)
    t = ("--topic", topic)
    assert reset(bootstrap, group, *t, "--to-earliest") == {0: (4, 0), 1: (10, 0), 2: (0, 0)}
    assert reset(bootstrap, group, *t, "--to-latest") == {0: (4, 10), 1: (10, 10), 2: (0, 10)}
    # An offset past the log end is clamped to it.
    assert reset(bootstrap, group, *t, "--to-offset", "7") == {0: (4, 7), 1: (10, 7), 2: (0, 7)}
    assert reset(bootstrap, group, *t, "--to-offset", "99") == {
        0: (4, 10),
        1: (10, 10),
        2: (0, 10),
    }
    assert reset(bootstrap, group, *t, "--shift-by", "3") == {0: (4, 7), 1: (10, 10), 2: (0, 3)}
    assert reset(bootstrap, group, *t, "--shift-by", "-5") == {0: (4, 0), 1: (10, 5), 2: (0, 0)}
    # --dry-run is the default: saying it changes nothing.
    assert reset(bootstrap, group, *t, "--shift-by", "-5", "--dry-run") == {
        0: (4, 0),
        1: (10, 5),
        2: (0, 0),
    }
    assert committed(bootstrap, group) == before

    text = kgroup_cli(bootstrap, "groups", "reset-offsets", group, *t, "--to-offset", "7")
    assert text.returncode == 0, text.stderr
    assert "dry run, nothing written" in text.stdout
    row = next(line for line in text.stdout.splitlines() if line.startswith(f"{topic}  0"))
    assert row.split() == [topic, "0", "4", "7"]
    assert committed(bootstrap, group) == before


def test_reset_offsets_shift_clamps_to_the_log_start_after_deleted_records(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap, topic, group = _three_by_ten(kafka_broker, make_topic, make_group_id)
    # Kept in a name: a collected AdminClient never completes its futures.
    admin_client = AdminClient({"bootstrap.servers": bootstrap})
    deleted = admin_client.delete_records([ConfluentPartition(topic, 0, 3)])
    for future in deleted.values():
        future.result(30)
    # Partition 0's log now starts at 3: 4 - 5 stops there, as --to-earliest does.
    assert reset(bootstrap, group, "--topic", f"{topic}:0", "--shift-by", "-5") == {0: (4, 3)}
    assert reset(bootstrap, group, "--topic", f"{topic}:0", "--to-earliest") == {0: (4, 3)}
    assert reset(bootstrap, group, "--topic", f"{topic}:0", "--to-offset", "1") == {0: (4, 3)}


def test_reset_offsets_to_a_time_finds_the_first_record_at_or_after_it(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap, topic, group = kafka_broker.bootstrap_servers, make_topic(), make_group_id()
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    # Record i is stamped (10 - i) hours ago: record 0 ten hours ago, record 9 one hour ago.
    stamps = [now - datetime.timedelta(hours=10 - i) for i in range(10)]
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, stamp in enumerate(stamps):
        producer.produce(
            topic, f"r{i}".encode(), partition=0, timestamp=int(stamp.timestamp() * 1000)
        )
    assert producer.flush(30) == 0
    commit(bootstrap, group, {TopicPartition(topic, 0): 0})

    at_four = stamps[4].strftime("%Y-%m-%dT%H:%M:%S")  # no zone: UTC
    assert reset(bootstrap, group, "--topic", topic, "--to-datetime", at_four) == {0: (0, 4)}
    between = (stamps[4] + datetime.timedelta(minutes=30)).isoformat()
    assert reset(bootstrap, group, "--topic", topic, "--to-datetime", between) == {0: (0, 5)}
    # After the last record: the log end, where a consumer would wait for new ones.
    later = (now + datetime.timedelta(hours=1)).isoformat()
    assert reset(bootstrap, group, "--topic", topic, "--to-datetime", later) == {0: (0, 10)}
    # 5.5 hours ago falls between record 4 (6 h) and record 5 (5 h).
    assert reset(bootstrap, group, "--topic", topic, "--by-duration", "PT5H30M") == {0: (0, 5)}
    assert reset(bootstrap, group, "--topic", topic, "--by-duration", "P1D") == {0: (0, 0)}


def test_reset_offsets_execute_commits_the_plan_of_the_partitions_named(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap, topic, group = _three_by_ten(kafka_broker, make_topic, make_group_id)
    other = make_topic(partitions=2)
    produce(bootstrap, other, 2, 4)
    data = cli_json(
        bootstrap,
        "groups",
        "reset-offsets",
        group,
        "--topic",
        f"{topic}:0,2",
        "--topic",
        other,
        "--to-offset",
        "1",
        "--execute",
    )
    assert data["executed"] is True
    assert {
        (p["partition"]["topic"], p["partition"]["partition"]): (p["current"], p["new"])
        for p in data["partitions"]
    } == {(topic, 0): (4, 1), (topic, 2): (0, 1), (other, 0): (None, 1), (other, 1): (None, 1)}
    assert committed(bootstrap, group) == {
        TopicPartition(topic, 0): 1,
        TopicPartition(topic, 1): 10,
        TopicPartition(topic, 2): 1,
        TopicPartition(other, 0): 1,
        TopicPartition(other, 1): 1,
    }
    # --all-topics: every partition the group has an offset for.
    done = kgroup_cli(
        bootstrap, "groups", "reset-offsets", group, "--all-topics", "--to-latest", "--execute"
    )
    assert done.returncode == 0, done.stderr
    assert "5 partition(s), reset" in done.stdout
    assert committed(bootstrap, group) == {
        TopicPartition(topic, 0): 10,
        TopicPartition(topic, 1): 10,
        TopicPartition(topic, 2): 10,
        TopicPartition(other, 0): 2,
        TopicPartition(other, 1): 2,
    }


def test_reset_offsets_of_a_group_without_offsets_creates_them(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap, topic, group = kafka_broker.bootstrap_servers, make_topic(), make_group_id()
    produce(bootstrap, topic, 1, 6)
    data = cli_json(
        bootstrap, "groups", "reset-offsets", group, "--topic", topic, "--to-latest", "--execute"
    )
    assert plan_of(data) == {0: (None, 6)}
    assert committed(bootstrap, group) == {TopicPartition(topic, 0): 6}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_writes_are_refused_while_the_group_has_a_live_member(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, protocol: str
) -> None:
    bootstrap, topic, group = (
        kafka_broker.bootstrap_servers,
        make_topic(partitions=2),
        make_group_id(),
    )
    produce(bootstrap, topic, 2, 10)
    conf = (
        classic_conf(bootstrap, group, "range", enable_auto_commit=False)
        if protocol == "classic"
        else consumer_conf(bootstrap, group, enable_auto_commit=False)
    )
    runner = Runner(conf, [topic], EventLog(), protocol)
    try:
        wait_until(lambda: len(runner.assignment()) == 2, 60, "the member owns both partitions")
        runner.consumer.commit(
            offsets={TopicPartition(topic, 0): 3, TopicPartition(topic, 1): 3}, asynchronous=False
        )
        before = committed(bootstrap, group)
        assert before == {TopicPartition(topic, 0): 3, TopicPartition(topic, 1): 3}

        for mode in ("--dry-run", "--execute"):
            done = kgroup_cli(
                bootstrap, "groups", "reset-offsets", group, "--all-topics", "--to-earliest", mode
            )
            assert done.returncode == 2
            assert "1 live member(s)" in done.stderr
            assert "stop its consumers first" in done.stderr
            assert done.stdout == ""
        assert committed(bootstrap, group) == before

        # The broker's own refusal, named as the broker names it.
        done = kgroup_cli(bootstrap, "groups", "delete", group)
        assert done.returncode == 2
        assert f"{group}: not deleted" in done.stdout
        assert "NON_EMPTY_GROUP" in done.stdout
        deleted = cli_json_failing(bootstrap, "groups", "delete-offsets", group, "--topic", topic)
        assert {(d["partition"], d["deleted"]) for d in deleted} == {(0, False), (1, False)}
        assert all("GROUP_SUBSCRIBED_TO_TOPIC" in d["error"] for d in deleted)
        assert committed(bootstrap, group) == before
    finally:
        runner.stop()


def cli_json_failing(bootstrap: str, *args: str) -> Any:
    """``--json`` output of a command that reports a refusal (exit 2)."""
    done = kgroup_cli(bootstrap, *args, "--json")
    assert done.returncode == 2, (done.stdout, done.stderr)
    return json.loads(done.stdout)


def test_delete_removes_an_empty_group_and_its_offsets(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap, _topic, group = _three_by_ten(kafka_broker, make_topic, make_group_id)
    missing = make_group_id("never")
    done = kgroup_cli(bootstrap, "groups", "delete", group)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{group}: deleted"
    assert committed(bootstrap, group) == {}

    async def gone() -> None:
        async with KafkaClient(bootstrap) as client:
            with pytest.raises(GroupIdNotFoundError):
                await admin.describe_group(client, group)

    anyio.run(gone)
    # A group that does not exist: refused with the broker's reason, exit 2.
    data = cli_json_failing(bootstrap, "groups", "delete", missing)
    assert data == [{"group_id": missing, "deleted": False, "error": data[0]["error"]}]
    assert "GROUP_ID_NOT_FOUND" in data[0]["error"]


def test_delete_offsets_removes_one_topics_offsets_of_an_empty_group(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap, topic, group = _three_by_ten(kafka_broker, make_topic, make_group_id)
    kept = make_topic()
    produce(bootstrap, kept, 1, 2)
    commit(bootstrap, group, {TopicPartition(kept, 0): 2})
    data = cli_json(bootstrap, "groups", "delete-offsets", group, "--topic", f"{topic}:0,1")
    assert {(d["partition"], d["deleted"]) for d in data} == {(0, True), (1, True)}
    assert committed(bootstrap, group) == {TopicPartition(topic, 2): 0, TopicPartition(kept, 0): 2}
    done = kgroup_cli(bootstrap, "groups", "delete-offsets", group, "--topic", topic)
    assert done.returncode == 0, done.stderr
    assert committed(bootstrap, group) == {TopicPartition(kept, 0): 2}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_reset_offsets_of_a_group_whose_members_left(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, protocol: str
) -> None:
    """A group of either type that had members and is now empty takes the admin's commit."""
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=2), make_group_id()
    produce(bootstrap, topic, 2, 10)
    conf = (
        classic_conf(bootstrap, group, "range", enable_auto_commit=False)
        if protocol == "classic"
        else consumer_conf(bootstrap, group, enable_auto_commit=False)
    )
    runner = Runner(conf, [topic], EventLog(), protocol)
    try:
        wait_until(lambda: len(runner.assignment()) == 2, 60, "the member owns both partitions")
        runner.consumer.commit(
            offsets={TopicPartition(topic, 0): 1, TopicPartition(topic, 1): 1}, asynchronous=False
        )
    finally:
        runner.stop()

    async def state() -> admin.GroupDescription:
        async with KafkaClient(bootstrap) as client:
            return await admin.describe_group(client, group)

    wait_until(lambda: not anyio.run(state).members, 30, "the member has left")
    assert anyio.run(state).group_type.value == protocol
    data = cli_json(
        bootstrap, "groups", "reset-offsets", group, "--all-topics", "--shift-by", "2", "--execute"
    )
    assert plan_of(data) == {0: (1, 3), 1: (1, 3)}
    assert committed(bootstrap, group) == {TopicPartition(topic, 0): 3, TopicPartition(topic, 1): 3}
