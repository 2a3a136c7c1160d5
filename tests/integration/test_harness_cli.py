"""The ``kgroup`` command end to end, in subprocesses like a user's shell.

``broker up/status/down`` (pinned state, and one broker per working
directory), ``topics create/produce`` read back by a kgroup consumer,
``--version``, and the demo's graceful stop.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from helpers import consumer_conf, run_python

import kgroup as kgroup_sdk
from kgroup.cli.state import broker_state_dir
from kgroup.cli.topics import record_value

pytestmark = pytest.mark.integration


def kgroup(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "kgroup.cli", *args, env=env, timeout=240)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    # An orphan nobody reaps yet is dead for our purposes.
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


@pytest.mark.timeout(300)
def test_up_status_down(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {**os.environ, "KGROUP_STATE_DIR": str(state)}

    up = kgroup(env, "broker", "up", "--override", "num.partitions=3")
    assert up.returncode == 0, up.stderr
    bootstrap = up.stdout.strip()
    # Only the bootstrap servers on stdout, so $(kgroup broker up) works.
    assert re.fullmatch(r"127\.0\.0\.1:\d+\n", up.stdout), up.stdout
    record = json.loads((state / "broker.json").read_text())
    pids = [node["pid"] for node in record["nodes"]]
    try:
        assert record["bootstrap_servers"] == bootstrap
        # The broker outlived the CLI and runs in a session of its own.
        assert all(alive(pid) and os.getsid(pid) == pid for pid in pids)
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        assert set(metadata.brokers) == {1}
        assert (
            "num.partitions=3\n" in (state / "broker" / "node-1" / "server.properties").read_text()
        )

        status = kgroup(env, "broker", "status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.splitlines()[0] == "running"
        assert bootstrap in status.stdout
        assert str(pids[0]) in status.stdout

        again = kgroup(env, "broker", "up")
        assert again.returncode == 0
        assert again.stdout == up.stdout
        assert "already up" in again.stderr
    finally:
        down = kgroup(env, "broker", "down")
    assert down.returncode == 0, down.stderr
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in pids)
    assert not (state / "broker.json").exists()
    assert not (state / "broker").exists()

    after = kgroup(env, "broker", "status")
    assert after.returncode == 1
    assert after.stdout == "not running\n"


# ------------------------------------------------------- one broker per working directory


def clean_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user's shell: no pinned state, no broker named by the environment."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"KGROUP_STATE_DIR", "KAFKA_BOOTSTRAP_SERVERS", "KGROUP_BROKER_BACKEND"}
    }
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg")
    return env


def kgroup_in(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``kgroup *args`` run in directory ``cwd``, as a user in that project would."""
    return subprocess.run(
        [sys.executable, "-m", "kgroup.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def recorded_pids(env: dict[str, str], cwd: Path) -> list[int]:
    state = broker_state_dir(cwd=cwd, environ=env)
    record = json.loads((state / "broker.json").read_text())
    return [node["pid"] for node in record["nodes"]]


def topic_names(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


@pytest.mark.timeout(420)
def test_two_directories_have_two_brokers_that_do_not_interfere(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    a, b = tmp_path / "project-a", tmp_path / "project-b"
    a.mkdir()
    b.mkdir()

    up_a = kgroup_in(a, env, "broker", "up")
    assert up_a.returncode == 0, up_a.stderr
    bootstrap_a = up_a.stdout.strip()
    pids_a = recorded_pids(env, a)
    try:
        # Nothing is up for b: status and down there say so and leave a's broker be.
        status_b = kgroup_in(b, env, "broker", "status")
        assert status_b.returncode == 1
        assert status_b.stdout == "not running\n"
        down_b = kgroup_in(b, env, "broker", "down")
        assert down_b.returncode == 0
        assert "no broker is up" in down_b.stderr
        assert all(alive(pid) for pid in pids_a)
        assert kgroup_in(a, env, "broker", "status").returncode == 0

        up_b = kgroup_in(b, env, "broker", "up")
        assert up_b.returncode == 0, up_b.stderr
        bootstrap_b = up_b.stdout.strip()
        pids_b = recorded_pids(env, b)
        try:
            assert bootstrap_b != bootstrap_a
            assert set(pids_b).isdisjoint(pids_a)

            # Without a flag, `topics` uses the broker of the directory it runs in.
            created = kgroup_in(a, env, "topics", "create", "only-in-a", "--partitions", "2")
            assert created.returncode == 0, created.stderr
            assert bootstrap_a in created.stdout
            assert "only-in-a" in topic_names(bootstrap_a)
            assert "only-in-a" not in topic_names(bootstrap_b)
        finally:
            down_b = kgroup_in(b, env, "broker", "down")
        assert down_b.returncode == 0, down_b.stderr
        # A graceful stop, and said so: not a kill.
        assert re.search(r"stopped broker pid \d+ \(clean shutdown in \d+\.\d s\)", down_b.stderr)
        assert "SIGKILL" not in down_b.stderr
        assert not any(alive(pid) for pid in pids_b)
        assert all(alive(pid) for pid in pids_a), "down in b stopped a's broker"
        assert kgroup_in(a, env, "broker", "status").returncode == 0
    finally:
        down_a = kgroup_in(a, env, "broker", "down")
    assert down_a.returncode == 0, down_a.stderr
    assert not any(alive(pid) for pid in pids_a)
    assert kgroup_in(a, env, "broker", "status").returncode == 1


# ------------------------------------------------------------- topics, --version, demo


def test_topics_create_and_produce_then_a_kgroup_consumer_reads_every_record(
    kafka_bootstrap_servers: str, make_group_id: Callable[[str], str]
) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    where = ("--bootstrap-servers", kafka_bootstrap_servers)
    created = kgroup(dict(os.environ), "topics", "create", topic, "--partitions", "3", *where)
    assert created.returncode == 0, created.stderr
    assert created.stdout == (
        f"created topic {topic} with 3 partitions (replication factor 1) at "
        f"{kafka_bootstrap_servers}\n"
    )
    again = kgroup(dict(os.environ), "topics", "create", topic, *where)
    assert again.returncode == 1
    assert "exists already" in again.stderr

    produced = kgroup(
        dict(os.environ), "topics", "produce", topic, "--count", "50", "--size", "32", *where
    )
    assert produced.returncode == 0, produced.stderr
    assert produced.stdout.startswith(f"produced 50 records of 32 B to {topic} (3 partitions)")

    listed = kgroup(dict(os.environ), "topics", "list", "--json", *where)
    assert listed.returncode == 0, listed.stderr
    assert {"topic": topic, "partitions": 3} in json.loads(listed.stdout)
    table = kgroup(dict(os.environ), "topics", "list", *where)
    assert table.stdout.splitlines()[0].split() == ["TOPIC", "PARTITIONS"]
    assert [topic, "3"] in [line.split() for line in table.stdout.splitlines()]

    seen: dict[str, bytes] = {}
    config = consumer_conf(kafka_bootstrap_servers, make_group_id("cli"))
    with kgroup_sdk.Consumer(config) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(seen) < 50 and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.2):
                key = message.key()
                value = message.value()
                assert isinstance(key, bytes)
                assert isinstance(value, bytes)
                seen[key.decode()] = value
    assert seen == {f"key-{i}": record_value(i, 32) for i in range(50)}


def test_produce_to_a_missing_topic_is_refused(kafka_bootstrap_servers: str) -> None:
    topic = f"cli-missing-{uuid.uuid4().hex[:8]}"
    result = kgroup(
        dict(os.environ), "topics", "produce", topic, "--bootstrap-servers", kafka_bootstrap_servers
    )
    assert result.returncode == 1
    assert f"`kgroup topics create {topic}`" in result.stderr
    # Refused before producing: the broker did not auto-create it.
    assert topic not in topic_names(kafka_bootstrap_servers)


def test_version() -> None:
    result = kgroup(dict(os.environ), "--version")
    assert result.returncode == 0
    assert result.stdout == f"kgroup {importlib.metadata.version('kgroup')}\n"


@pytest.mark.timeout(300)
def test_the_demo_stops_its_broker_gracefully_and_says_so(tmp_path: Path) -> None:
    env = {**clean_env(tmp_path), "KGROUP_BROKER_BACKEND": "process"}
    result = kgroup_in(tmp_path, env, "demo", "--partitions", "3", "--records", "30")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "[demo] stopping the broker (controlled shutdown)" in result.stdout
    assert re.search(r"stopped Kafka node 1 pid \d+ \(clean shutdown in \d+\.\d s\)", output)
    assert "SIGKILL" not in output
