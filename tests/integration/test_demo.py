"""`kgroup demo` against the session broker: the group forms, rebalances, loses nothing."""

from __future__ import annotations

import pytest
from helpers import run_python

from kgroup.demo import run_demo

pytestmark = pytest.mark.integration


def test_demo_converges_rebalances_and_consumes_every_record(kafka_bootstrap_servers: str) -> None:
    lines: list[str] = []
    run_demo(kafka_bootstrap_servers, partitions=6, records=300, say=lines.append, timeout=60)
    text = "\n".join(lines)
    assert "the group is stable" in text
    assert "member-2 leaves the group" in text
    assert "rebalanced in" in text
    assert "every one of the 300 records was consumed by the group" in text


def test_demo_command_exits_zero_on_a_named_broker(kafka_bootstrap_servers: str) -> None:
    result = run_python(
        "-m",
        "kgroup.cli",
        "demo",
        "--bootstrap-servers",
        kafka_bootstrap_servers,
        "--partitions",
        "3",
        "--records",
        "90",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[demo] every one of the 90 records was consumed by the group" in result.stdout
