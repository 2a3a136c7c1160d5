"""Every example in examples/ runs against a real broker and does what it says."""

from __future__ import annotations

import os
import subprocess
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
    produce(kafka_bootstrap_servers, topic, RECORDS)
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
