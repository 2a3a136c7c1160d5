"""``kgroup groups`` / ``migrate`` / ``topics`` against a secured broker with ``--command-config``.

A SASL_SSL (SCRAM-SHA-512) listener with ACLs: the command reads its security
settings from a properties file, as ``kafka-consumer-groups.sh`` does, and sees
the group (or creates a topic and produces to it); without the file it cannot
talk to the listener at all.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from helpers import consume, run_python

from kgroup import Consumer
from kgroup.testing import create_topic
from kgroup.testing.pytest_plugin import MakeGroupId
from kgroup.testing.security import SecuredKafkaBroker

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


def test_describe_and_check_read_security_settings_from_a_command_config(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId, tmp_path: Path
) -> None:
    conf = secured.client_config("sasl-scram", user="alice", mechanism="SCRAM-SHA-512")
    group, topic = make_group_id(), "cli-secured"
    create_topic(secured.bootstrap_servers, topic, partitions=2)
    secured.allow("alice", group=group, topic=topic)
    password = str(conf["sasl.password"])
    properties = tmp_path / "alice.properties"
    properties.write_text(
        "# kgroup groups --command-config\n"
        + "".join(f"{key}={value}\n" for key, value in conf.items()),
        encoding="utf-8",
    )
    with Consumer({**conf, "group.id": group, "group.protocol": "classic"}) as member:
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        assert member.assignment()

        code, out, err = _cli("groups", "describe", group, "--command-config", str(properties))
        assert code == 0, err
        assert member.member_id in out
        assert "classic" in out
        assert password not in out + err

        # The same file with the servers given on the command line instead.
        servers = str(conf["bootstrap.servers"])
        lines = [ln for ln in properties.read_text().splitlines() if "bootstrap" not in ln]
        properties.write_text("\n".join(lines) + "\n", encoding="utf-8")
        code, out, err = _cli(
            "groups", "describe", group, "--bootstrap-servers", servers,
            "--command-config", str(properties),
        )  # fmt: skip
        assert code == 0, err
        assert member.member_id in out

        # Without the file the SASL_SSL listener does not talk to the command.
        code, out, err = _cli("groups", "describe", group, "--bootstrap-servers", servers)
        assert code == 2
        assert password not in out + err


def test_topics_create_and_produce_through_a_command_config(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId, tmp_path: Path
) -> None:
    conf = secured.client_config("sasl-scram", user="alice", mechanism="SCRAM-SHA-512")
    topic = "cli-secured-topics"
    # alice may create the topic and write to it, nothing else: the broker
    # accepts the commands only if they authenticated as her.
    secured.allow("alice", topic=topic, operations=("CREATE", "WRITE"))
    password = str(conf["sasl.password"])
    properties = tmp_path / "alice.properties"
    properties.write_text(
        "".join(f"{key}={value}\n" for key, value in conf.items()), encoding="utf-8"
    )
    config = ("--command-config", str(properties))

    code, out, err = _cli("topics", "create", topic, "--partitions", "2", *config)
    assert code == 0, err
    assert f"created topic {topic} with 2 partitions" in out
    # -v shows librdkafka's own log lines too: none may carry the password.
    code, out, err = _cli("-v", "topics", "produce", topic, "--count", "20", *config)
    assert code == 0, err
    assert f"produced 20 records of 64 B to {topic}" in out
    assert password not in out + err

    # Read back on the harness's open listener, by a consumer kgroup did not configure.
    admin = AdminClient({"bootstrap.servers": secured.bootstrap_servers})
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2
    values = consume(secured.bootstrap_servers, topic, make_group_id(), 20)
    assert sorted(values) == sorted(f"record {i} ".ljust(64, ".") for i in range(20))

    # A wrong password is refused by the broker, and said so at once.
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(properties.read_text().replace(password, "not-the-password"), encoding="utf-8")
    started = time.monotonic()
    code, out, err = _cli("topics", "produce", topic, "--command-config", str(wrong))
    assert code == 2
    assert "SASL SCRAM-SHA-512 authentication with" in err
    assert "invalid credentials" in err
    assert "not-the-password" not in err
    assert time.monotonic() - started < 10, "waited for --timeout instead"

    # The same command without the file cannot talk to the SASL_SSL listener.
    servers = str(conf["bootstrap.servers"])
    code, out, err = _cli(
        "topics", "produce", topic, "--bootstrap-servers", servers, "--timeout", "3"
    )
    assert code == 3
    assert f"no broker answered at {servers}" in err
