"""The data plane's gate: the driver's calls on the librdkafka handle are not starved by waits.

confluent-kafka serialises calls on one consumer, unfairly; the gate in
kgroup.dataplane.librdkafka gives the driver's control calls (assign, pause,
position ...) the handle before the next record wait. Threads here meet on
observable gate state, never on sleeps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import confluent_kafka
import pytest

from kgroup.config import ConsumerConfig
from kgroup.dataplane import librdkafka
from kgroup.dataplane.librdkafka import DATAPLANE_DEFAULTS, _Gate


def _until(condition: Callable[[], bool], what: str) -> None:
    # Waits for a state another thread reaches; bounded so a bug fails the test.
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


def test_control_waits_for_the_record_wait_in_progress() -> None:
    gate = _Gate()
    entered = threading.Event()

    def control() -> None:
        with gate.control():
            entered.set()

    with gate.fetch():
        worker = threading.Thread(target=control)
        worker.start()
        _until(lambda: gate._control_waiting == 1, "the control call to wait")
        assert not entered.is_set()
    worker.join(10)
    assert entered.is_set()


def test_a_waiting_control_call_goes_before_the_next_record_wait() -> None:
    gate = _Gate()
    order: list[str] = []

    def control() -> None:
        with gate.control():
            order.append("control")

    with gate.fetch():
        worker = threading.Thread(target=control)
        worker.start()
        _until(lambda: gate._control_waiting == 1, "the control call to wait")
    # The consuming thread comes straight back, as a poll loop does.
    with gate.fetch():
        order.append("fetch")
    worker.join(10)
    assert order == ["control", "fetch"]


def test_user_settings_win_over_the_data_plane_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    captured: dict[str, object] = {}

    class Probe:
        def __init__(self, conf: dict[str, object]) -> None:
            captured.update(conf)

    monkeypatch.setattr(confluent_kafka, "Consumer", Probe)
    config = ConsumerConfig.from_dict(
        {"bootstrap.servers": "localhost:9092", "group.id": "g", "fetch.queue.backoff.ms": "250"}
    )
    librdkafka.DataPlane(config)
    assert captured["fetch.queue.backoff.ms"] == "250"
    assert (
        captured["queued.max.messages.kbytes"] == DATAPLANE_DEFAULTS["queued.max.messages.kbytes"]
    )
