"""The blocking Consumer's telemetry to a JSON Lines directory, and its ``metrics()``.

The fake broker runs in a thread of its own, on the backend under test.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kgroup import Consumer
from kgroup.dataplane import Record
from kgroup.telemetry import FetchStarted, FetchStopped, StopReason, decode
from kgroup.testing.fake import FakeBroker

from .helpers import DEADLINE, consumer_config, tps


@pytest.fixture(params=["asyncio", "trio"])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def test_blocking_consumer_writes_json_lines_and_counts(backend: str, tmp_path: Path) -> None:
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 2)
        for value in (b"a", b"b", b"c"):
            broker.produce("orders", 0, value)
        config = consumer_config(
            broker, "blocking-telemetry", **{"telemetry.sink": f"jsonl:{tmp_path}/"}
        )
        got: list[Record] = []
        with Consumer(config, backend=backend, dataplane=broker.dataplane()) as consumer:
            consumer.subscribe(["orders"])
            deadline = time.monotonic() + DEADLINE
            while len(got) < 3:
                assert time.monotonic() < deadline, "records not consumed in time"
                got.extend(consumer.consume(100, 0.01))
            metrics = consumer.metrics()
            member = consumer.member_id

    assert metrics.records == 3
    assert metrics.rebalances == 1
    assert metrics.telemetry is not None
    assert metrics.telemetry.dropped == metrics.telemetry.failed == 0
    # close() flushed the sink: the file holds every event, fetch start to close.
    (path,) = tmp_path.glob("*.jsonl")
    events = [decode(line) for line in path.read_text().splitlines()]
    assert {e.header.member_id for e in events} == {member}
    started = [e.body for e in events if isinstance(e.body, FetchStarted)]
    stopped = [e.body for e in events if isinstance(e.body, FetchStopped)]
    assert frozenset().union(*(s.partitions for s in started)) == tps("orders", 0, 1)
    assert [(frozenset(s.partitions), s.reason) for s in stopped] == [
        (tps("orders", 0, 1), StopReason.CLOSED)
    ]
