"""``kgroup produce`` and ``kgroup consume`` against a real broker, as a user runs them:
lines in with keys and headers, records out as a format string or JSON lines.

The last test needs a secured broker of its own (``SecuredKafkaBroker``, a
local JVM with TLS, SASL and ACLs), as ``test_migration_cli_security.py`` does.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import wait_until

from kgroup import admin
from kgroup.testing import KafkaBroker, create_topic
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.testing.security import SecuredKafkaBroker
from kgroup.transport import KafkaClient
from kgroup.types import TopicPartition

pytestmark = pytest.mark.integration

TIMEOUT = 60.0
"""Seconds a command may take: a hang is a failure, never a wait forever."""


def kgroup(bootstrap: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """``kgroup ARGS`` in a subprocess with ``stdin``, the broker named on the command line."""
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    return subprocess.run(
        [sys.executable, "-m", "kgroup.cli", *args, "--bootstrap-servers", bootstrap],
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
        env=env,
    )


def ok(done: subprocess.CompletedProcess[bytes]) -> bytes:
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


def json_lines(done: subprocess.CompletedProcess[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ok(done).decode().splitlines()]


def committed(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    async def main() -> dict[TopicPartition, int]:
        async with KafkaClient(bootstrap) as client:
            return await admin.committed_offsets(client, group)

    return anyio.run(main)


def test_lines_with_keys_and_headers_come_back_in_a_format_string(
    kafka_broker: KafkaBroker, make_topic: MakeTopic
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    lines = b"k1:hello\nk2:wor:ld\nno key here\n:empty key\n"
    produced = kgroup(
        bootstrap,
        *("produce", topic, "--key-separator", ":"),
        *("--header", "trace=t-1", "--header", "app=cli"),
        stdin=lines,
    )
    ok(produced)
    assert f"produced 4 records to {topic}" in produced.stderr.decode()

    out = kgroup(
        bootstrap,
        *("consume", topic, "--from-beginning", "--exit-at-end"),
        *("--format", "%t|%p|%o|%k|%s|%h|%K|%S\\n"),
    )
    assert ok(out).decode().splitlines() == [
        f"{topic}|0|0|k1|hello|trace=t-1,app=cli|2|5",
        f"{topic}|0|1|k2|wor:ld|trace=t-1,app=cli|2|6",
        f"{topic}|0|2||no key here|trace=t-1,app=cli|-1|11",  # no separator: no key
        f"{topic}|0|3||empty key|trace=t-1,app=cli|0|9",
    ]


def test_json_lines_carry_every_field_and_base64_for_bytes_that_are_not_utf8(
    kafka_broker: KafkaBroker, make_topic: MakeTopic
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    binary = b"\xff\xfe\x00\x01"
    ok(
        kgroup(
            bootstrap,
            *("produce", topic, "--key-separator", "=", "--header", "h=v"),
            stdin=b"key=caf\xc3\xa9\nbin=" + binary + b"\n",
        )
    )
    records = json_lines(
        kgroup(bootstrap, "consume", topic, "--from-beginning", "--exit-at-end", "--json")
    )
    assert len(records) == 2
    for offset, record in enumerate(records):
        assert isinstance(record.pop("timestamp"), int)
        assert (record.pop("topic"), record.pop("partition"), record.pop("offset")) == (
            topic,
            0,
            offset,
        )
        assert record.pop("headers") == [{"key": "h", "value": "v", "value_base64": False}]
    assert records[0] == {"key": "key", "key_base64": False, "value": "café", "value_base64": False}
    assert records[1] == {
        "key": "bin",
        "key_base64": False,
        "value": base64.b64encode(binary).decode(),
        "value_base64": True,
    }
    # The format string prints the bytes as they are.
    raw = kgroup(bootstrap, "consume", topic, "--offset", "1", "--exit-at-end", "--format", "%s")
    assert ok(raw) == binary


def test_count_offset_and_partition_choose_what_is_printed(
    kafka_broker: KafkaBroker, make_topic: MakeTopic
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    for partition in (0, 1):
        lines = "".join(f"p{partition}-{i}\n" for i in range(10)).encode()
        ok(kgroup(bootstrap, "produce", topic, "--partition", str(partition), stdin=lines))

    def values(*args: str) -> list[str]:
        return ok(kgroup(bootstrap, "consume", topic, *args)).decode().splitlines()

    # --count stops early though records remain (no --exit-at-end: it would wait otherwise).
    three = values("--from-beginning", "--partition", "1", "--count", "3")
    assert three == ["p1-0", "p1-1", "p1-2"]
    assert values("--offset", "7", "--partition", "0", "--exit-at-end") == ["p0-7", "p0-8", "p0-9"]
    # A negative offset: the last N records of each partition.
    last = values("--offset", "-2", "--exit-at-end")
    assert sorted(last) == ["p0-8", "p0-9", "p1-8", "p1-9"]
    # Past the end: nothing yet, and --exit-at-end does not wait for more.
    assert values("--offset", "99", "--exit-at-end") == []
    everything = values("--from-beginning", "--exit-at-end", "--format", "%p %o\\n")
    assert sorted(everything) == sorted(f"{p} {o}" for p in (0, 1) for o in range(10))


def test_a_group_commits_what_it_printed_and_resumes_there(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    group = make_group_id("tail")
    ok(kgroup(bootstrap, "produce", topic, stdin=b"".join(b"r%d\n" % i for i in range(8))))

    first = ok(
        kgroup(bootstrap, "consume", topic, "--group", group, "--from-beginning", "--count", "3")
    )
    assert first.decode().splitlines() == ["r0", "r1", "r2"]
    assert committed(bootstrap, group) == {TopicPartition(topic, 0): 3}

    rest = ok(kgroup(bootstrap, "consume", topic, "--group", group, "--exit-at-end"))
    assert rest.decode().splitlines() == [f"r{i}" for i in range(3, 8)]
    assert committed(bootstrap, group) == {TopicPartition(topic, 0): 8}


def test_without_a_group_nothing_is_committed(
    kafka_broker: KafkaBroker, make_topic: MakeTopic
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    ok(kgroup(bootstrap, "produce", topic, stdin=b"a\nb\n"))
    ok(kgroup(bootstrap, "consume", topic, "--from-beginning", "--exit-at-end"))

    async def groups_with_offsets() -> list[str]:
        async with KafkaClient(bootstrap) as client:
            listings = await admin.list_groups(client)
            found = []
            for listing in listings:
                offsets = await admin.committed_offsets(client, listing.group_id)
                if any(tp.topic == topic for tp in offsets):
                    found.append(listing.group_id)
            return found

    assert anyio.run(groups_with_offsets) == []


@pytest.mark.parametrize("command", ["consume", "produce"])
def test_an_unknown_topic_is_a_clear_error_not_a_hang(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, command: str
) -> None:
    topic = f"{make_topic()}-missing"
    done = kgroup(kafka_broker.bootstrap_servers, command, topic, stdin=b"x\n")
    assert done.returncode == 1
    assert f"topic {topic!r} does not exist" in done.stderr.decode()
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["consume", "produce"])
def test_an_unknown_partition_is_refused_naming_those_that_exist(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, command: str
) -> None:
    topic = make_topic(partitions=2)
    done = kgroup(kafka_broker.bootstrap_servers, command, topic, "--partition", "5", stdin=b"x\n")
    assert done.returncode == 1
    assert "has partitions 0-1; no partition 5" in done.stderr.decode()


def test_a_failed_delivery_exits_non_zero_naming_the_error(
    kafka_broker: KafkaBroker, make_topic: MakeTopic
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1, config={"max.message.bytes": "1000"})
    # One record: a batch holding it and smaller ones is refused as a whole.
    done = kgroup(bootstrap, "produce", topic, stdin=b"x" * 5000 + b"\n")
    assert done.returncode == 2
    error = done.stderr.decode()
    assert f"0 of 1 records reached {topic}" in error
    assert "1 failed" in error
    assert "too large" in error.lower()


# 5,000: the tail is writing when the reader goes; 3: all is written, it waits for more.
@pytest.mark.parametrize("records", [5000, 3])
def test_a_reader_that_goes_away_ends_the_tail_quietly(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, records: int
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    ok(
        kgroup(
            bootstrap, "produce", topic, stdin=b"".join(b"line %d\n" % i for i in range(records))
        )
    )
    # As `kgroup consume ... | head -1`: the tail would run forever (no --count,
    # no --exit-at-end) unless the closed pipe ends it.
    tail = subprocess.Popen(
        [
            *(sys.executable, "-m", "kgroup.cli", "consume", topic, "--from-beginning"),
            *("--bootstrap-servers", bootstrap),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert tail.stdout is not None
    assert tail.stderr is not None
    assert tail.stdout.readline() == b"line 0\n"
    tail.stdout.close()
    try:
        code = tail.wait(TIMEOUT)
    finally:
        tail.kill()
    error = tail.stderr.read()
    tail.stderr.close()
    assert code == 0, error
    assert b"Traceback" not in error


def test_ctrl_c_ends_a_group_tail_cleanly_with_what_it_printed_committed(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    group = make_group_id("tail")
    ok(kgroup(bootstrap, "produce", topic, stdin=b"a\nb\nc\n"))
    tail = subprocess.Popen(
        [
            *(sys.executable, "-m", "kgroup.cli", "consume", topic),
            *("--group", group, "--from-beginning", "--bootstrap-servers", bootstrap),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert tail.stdout is not None
        assert [tail.stdout.readline() for _ in range(3)] == [b"a\n", b"b\n", b"c\n"]
        # Committed while it runs (every second), not only when it ends.
        wait_until(
            lambda: committed(bootstrap, group) == {TopicPartition(topic, 0): 3},
            TIMEOUT,
            "the tail's commit of the three records it printed",
        )
        tail.send_signal(signal.SIGINT)
        _, error = tail.communicate(timeout=TIMEOUT)
    finally:
        tail.kill()
    assert tail.returncode == 130, error
    assert b"Traceback" not in error
    assert committed(bootstrap, group) == {TopicPartition(topic, 0): 3}


# ------------------------------------------------------------ a secured cluster


@pytest.fixture(scope="module")
def secured() -> Iterator[SecuredKafkaBroker]:
    with SecuredKafkaBroker(users=("alice",)) as broker:
        yield broker


def test_secured_produce_and_consume_through_a_command_config(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId, tmp_path: Path
) -> None:
    conf = secured.client_config("sasl-scram", user="alice", mechanism="SCRAM-SHA-512")
    topic, group = f"cli-tail-{make_group_id('t')}", make_group_id("tail")
    create_topic(secured.bootstrap_servers, topic, partitions=1)
    # The broker accepts the commands only if they authenticated as alice.
    secured.allow("alice", topic=topic, operations=("READ", "WRITE"))
    secured.allow("alice", group=group)
    password = str(conf["sasl.password"])
    properties = tmp_path / "alice.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in conf.items()), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    env["KGROUP_STATE_DIR"] = "/nonexistent-kgroup-state"  # only the file names the broker

    def cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "kgroup.cli", *args],
            input=stdin,
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
            env=env,
        )

    config = ("--command-config", str(properties))
    done = cli("-v", "produce", topic, "--key-separator", ":", *config, stdin=b"k:v1\nk:v2\n")
    assert ok(done) == b""
    assert password.encode() not in done.stderr
    plain = cli(
        "consume", topic, "--from-beginning", "--exit-at-end", "--format", "%k=%s\\n", *config
    )
    assert ok(plain) == b"k=v1\nk=v2\n"
    member = cli("consume", topic, "--group", group, "--from-beginning", "--count", "2", *config)
    assert ok(member) == b"v1\nv2\n"
    assert committed(secured.bootstrap_servers, group) == {TopicPartition(topic, 0): 2}

    # A wrong password is refused by the broker, and said so at once.
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(properties.read_text().replace(password, "not-the-password"))
    for command in ("consume", "produce"):
        started = time.monotonic()
        refused = cli(command, topic, "--command-config", str(wrong), stdin=b"x\n")
        error = refused.stderr.decode()
        assert refused.returncode == 2, error
        assert "SASL SCRAM-SHA-512 authentication with" in error
        assert "not-the-password" not in error
        assert time.monotonic() - started < 10, "waited for --timeout instead"
