"""``kgroup broker up/status/down`` end to end, in subprocesses like a user's shell."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from helpers import run_python

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
