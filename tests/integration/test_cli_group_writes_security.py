"""``kgroup groups`` writes against a secured broker with ``--command-config``.

A SASL_SSL (SCRAM-SHA-512) listener with ACLs: alice may read and delete one
group and read one topic. Each command authenticates from the properties file;
the test sets up and reads back on the harness's open listener, so what it sees
is what the broker stored, not what the command printed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentPartition
from helpers import produce, run_python

from kgroup import admin
from kgroup.testing import create_topic
from kgroup.testing.pytest_plugin import MakeGroupId
from kgroup.testing.security import SecuredKafkaBroker
from kgroup.transport import KafkaClient
from kgroup.types import TopicPartition

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured() -> Iterator[SecuredKafkaBroker]:
    with SecuredKafkaBroker(users=("alice",)) as broker:
        yield broker


def _cli(*args: str) -> tuple[int, str, str]:
    env = {**os.environ, "KGROUP_STATE_DIR": "/nonexistent-kgroup-state"}
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    done = run_python("-m", "kgroup.cli", *args, env=env, timeout=120)
    return done.returncode, done.stdout, done.stderr


def _committed(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    async def main() -> dict[TopicPartition, int]:
        async with KafkaClient(bootstrap) as client:
            return await admin.committed_offsets(client, group)

    return anyio.run(main)


def test_reset_delete_offsets_and_delete_through_a_command_config(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId, tmp_path: Path
) -> None:
    conf = secured.client_config("sasl-scram", user="alice", mechanism="SCRAM-SHA-512")
    group, forbidden, topic = make_group_id(), make_group_id("forbidden"), "cli-secured-writes"
    open_listener = secured.bootstrap_servers
    create_topic(open_listener, topic, partitions=2)
    produce(open_listener, topic, 2, 10)
    secured.allow("alice", group=group, operations=("READ", "DELETE"))
    secured.allow("alice", topic=topic)
    for each in (group, forbidden):
        committer = ConfluentConsumer(
            {"bootstrap.servers": open_listener, "group.id": each, "enable.auto.commit": False}
        )
        try:
            committer.commit(
                offsets=[ConfluentPartition(topic, 0, 2), ConfluentPartition(topic, 1, 2)],
                asynchronous=False,
            )
        finally:
            committer.close()
    password = str(conf["sasl.password"])
    properties = tmp_path / "alice.properties"
    properties.write_text(
        "".join(f"{key}={value}\n" for key, value in conf.items()), encoding="utf-8"
    )
    config = ("--command-config", str(properties))

    code, out, err = _cli(
        "groups", "reset-offsets", group, "--topic", topic, "--to-latest", "--execute", "--json",
        *config,
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["executed"] is True
    assert _committed(open_listener, group) == {
        TopicPartition(topic, 0): 5,
        TopicPartition(topic, 1): 5,
    }
    assert password not in out + err

    # alice may not touch the other group: the broker says so, nothing changes.
    code, out, err = _cli(
        "groups", "reset-offsets", forbidden, "--all-topics", "--to-earliest", "--execute", *config
    )
    assert code == 2
    assert "AUTHORIZATION" in err.upper()
    assert _committed(open_listener, forbidden) == {
        TopicPartition(topic, 0): 2,
        TopicPartition(topic, 1): 2,
    }

    # ListGroups shows alice only the groups she may describe.
    code, out, err = _cli("groups", "lag", "--all-groups", "--json", *config)
    assert code == 0, err
    listed = {g["group"]["group_id"]: g["total"] for g in json.loads(out)}
    assert listed == {group: 0}

    code, out, err = _cli("groups", "delete-offsets", group, "--topic", f"{topic}:0", *config)
    assert code == 0, err
    assert _committed(open_listener, group) == {TopicPartition(topic, 1): 5}
    code, out, err = _cli("groups", "delete", group, *config)
    assert code == 0, err
    assert out.strip() == f"{group}: deleted"
    assert _committed(open_listener, group) == {}

    # Without the file the SASL_SSL listener does not talk to the command.
    servers = str(conf["bootstrap.servers"])
    code, out, err = _cli(
        "groups", "delete", forbidden, "--bootstrap-servers", servers, "--timeout", "3"
    )
    assert code != 0
    assert _committed(open_listener, forbidden) != {}
