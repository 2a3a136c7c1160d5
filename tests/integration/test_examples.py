"""Every example in examples/ runs against a real broker and does what it says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import produce_values, run_python

from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RECORDS = 20


def produce(bootstrap: str, topic: str, count: int) -> None:
    produce_values(bootstrap, topic, (f"example {i}" for i in range(count)))


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_python(str(EXAMPLES / script), *args)


@pytest.mark.parametrize(
    ("script", "extra"),
    [
        ("basic_consumer.py", ()),
        ("async_consumer.py", ("--backend", "asyncio")),
        ("async_consumer.py", ("--backend", "trio")),
        ("consumer.py", ()),
    ],
)
def test_consumer_example_reads_every_record(
    script: str,
    extra: tuple[str, ...],
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic = make_topic(partitions=3)
    # Twice as many as asked for: an example stops at --max-records exactly.
    produce(kafka_bootstrap_servers, topic, 2 * RECORDS)
    result = run(
        script,
        kafka_bootstrap_servers,
        topic,
        make_group_id(),
        *extra,
        "--max-records",
        str(RECORDS),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    printed = result.stdout + result.stderr
    assert f"consumed {RECORDS} records" in printed
    if script == "async_consumer.py":
        assert "assigned [" in result.stderr  # the async listener ran


_WITH_CTRL_C = (
    "import runpy, signal, sys; "
    # Python installs its Ctrl-C handler only if SIGINT is not ignored at start,
    # and a child of a non-interactive shell's background job starts so.
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def test_the_basic_example_without_max_records_runs_until_ctrl_c(
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic = make_topic(partitions=3)
    produce(kafka_bootstrap_servers, topic, RECORDS)
    argv = [kafka_bootstrap_servers, topic, make_group_id()]
    child = subprocess.Popen(
        [sys.executable, "-u", "-c", _WITH_CTRL_C, str(EXAMPLES / "basic_consumer.py"), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        printed = 0
        # One "partition@offset: value" line per record: read them all.
        for line in child.stdout:
            if "@" in line:
                printed += 1
            if printed == RECORDS:
                break
        assert printed == RECORDS, f"the example stopped after {printed} records"
        assert child.poll() is None, "the example exited by itself"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert f"consumed {RECORDS} records" in out + err


def test_static_member_example_leaves_temporarily_and_rejoins_under_its_instance_id(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic = make_topic(partitions=2)
    group = make_group_id()
    produce(kafka_bootstrap_servers, topic, 2)
    first = run(
        "static_member.py", kafka_bootstrap_servers, topic, "worker-1", group, "--max-records", "2"
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert "leaving temporarily" in first.stderr
    produce(kafka_bootstrap_servers, topic, 2)
    # Within the session timeout the same instance id takes its assignment over.
    second = run(
        "static_member.py", kafka_bootstrap_servers, topic, "worker-1", group, "--max-records", "2"
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assigned = [line for line in first.stderr.splitlines() if line.startswith("assigned")]
    again = [line for line in second.stderr.splitlines() if line.startswith("assigned")]
    assert assigned
    assert assigned == again
    assert "instance worker-1" in second.stderr


def test_custom_assignor_example_prints_an_assignment() -> None:
    result = run("custom_assignor.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "partition.assignment.strategy" in result.stdout


def test_wire_tour_example_talks_to_the_broker(kafka_bootstrap_servers: str) -> None:
    result = run_python(
        str(EXAMPLES / "wire_tour.py"),
        env={**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap_servers},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "negotiated ConsumerGroupHeartbeat v1" in result.stdout
    assert "through kgroup's data plane" in result.stdout


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_share_consumer_example_reads_every_record(
    backend: str, kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, RECORDS)
    result = run(
        "async_share_consumer.py",
        kafka_bootstrap_servers,
        topic,
        make_group_id(),
        "--backend",
        backend,
        "--max-records",
        str(RECORDS),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"settled {RECORDS} records on {backend}" in result.stderr
    assert len(set(result.stdout.splitlines())) == RECORDS
