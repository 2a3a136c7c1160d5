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


@pytest.mark.parametrize("turn", ["control", "lookup"])
def test_control_waits_for_the_record_wait_in_progress(turn: str) -> None:
    gate = _Gate()
    entered = threading.Event()

    def control() -> None:
        with getattr(gate, turn)():
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


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_record_waits_are_short_until_the_group_is_settled_and_the_handle_quiet() -> None:
    clock = _Clock()
    gate = _Gate(clock)
    # A new handle: the join's calls are coming, however long the join takes.
    assert gate.chunk() == librdkafka.WAIT_CHUNK
    clock.now += 60
    assert gate.chunk() == librdkafka.WAIT_CHUNK
    gate.settled = True
    assert gate.chunk() == librdkafka.IDLE_CHUNK
    with gate.control():
        pass
    # The rest of a burst of calls may follow.
    assert gate.chunk() == librdkafka.WAIT_CHUNK
    clock.now += librdkafka.QUIET_AFTER - 0.01
    assert gate.chunk() == librdkafka.WAIT_CHUNK
    clock.now += 0.02
    assert gate.chunk() == librdkafka.IDLE_CHUNK
    # A record wait is not a control call: it does not shorten the chunks.
    with gate.fetch():
        pass
    assert gate.chunk() == librdkafka.IDLE_CHUNK
    # A rebalance step under way: short chunks again at once.
    gate.settled = False
    assert gate.chunk() == librdkafka.WAIT_CHUNK


class _WaitingConsumer:
    """confluent-kafka's consumer with nothing to hand out: each wait passes on the clock."""

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    def consume(self, num_messages: int, timeout: float) -> list[object]:
        if timeout:
            self.waits.append(round(timeout, 6))
            self.clock.now += timeout
        return []

    def pause(self, partitions: list[confluent_kafka.TopicPartition]) -> None:
        pass


def test_an_idle_poll_slice_of_a_settled_member_is_one_librdkafka_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The idle member's CPU: every call into librdkafka costs 60-90 us; a 100 ms
    # poll slice in 30 ms chunks made four of them.
    clock = _Clock()
    waiting = _WaitingConsumer(clock)
    monkeypatch.setattr(confluent_kafka, "Consumer", lambda conf: waiting)
    config = ConsumerConfig.from_dict({"bootstrap.servers": "localhost:9092", "group.id": "g"})
    plane = librdkafka.DataPlane(config, clock=clock)
    short = [0.03, 0.03, 0.03, 0.01]
    assert plane.consume(1, 0.1) == []
    assert waiting.waits == short  # not settled yet
    plane.group_settled(True)
    waiting.waits.clear()
    assert plane.consume(1, 0.1) == []
    assert waiting.waits == [0.1]
    # A control call (here a pause) brings the short chunks back for a while.
    plane.pause([])
    clock.now += 0.01  # past the grace period after a control call
    waiting.waits.clear()
    assert plane.consume(1, 0.1) == []
    assert waiting.waits == short
    clock.now += librdkafka.QUIET_AFTER
    plane.group_settled(False)
    waiting.waits.clear()
    assert plane.consume(1, 0.1) == []
    assert waiting.waits == short


def test_a_lookup_keeps_the_chunks_short_only_for_the_rest_of_its_burst() -> None:
    # A settled idle member looks up its positions every auto.commit.interval.ms;
    # a second of 30 ms chunks after each made a fifth of its polls four calls.
    clock = _Clock()
    gate = _Gate(clock)
    gate.settled = True
    with gate.lookup():
        pass
    assert gate.chunk() == librdkafka.WAIT_CHUNK
    clock.now += librdkafka.LOOKUP_QUIET_AFTER + 0.01
    assert gate.chunk() == librdkafka.IDLE_CHUNK
    # A lookup within a control call's quiet period does not end it early.
    clock.now += 10
    with gate.control():
        pass
    with gate.lookup():
        pass
    clock.now += librdkafka.LOOKUP_QUIET_AFTER + 0.01
    assert gate.chunk() == librdkafka.WAIT_CHUNK
    clock.now += librdkafka.QUIET_AFTER
    assert gate.chunk() == librdkafka.IDLE_CHUNK


def test_a_record_wait_does_not_wait_for_the_handle_past_its_deadline() -> None:
    # A driver's call that holds the handle long (the connections a subscription
    # opens ahead) must not keep the application's thread from its callbacks.
    gate = _Gate()
    held = threading.Event()
    release = threading.Event()

    def long_control() -> None:
        with gate.control():
            held.set()
            release.wait(10)

    worker = threading.Thread(target=long_control)
    worker.start()
    held.wait(10)
    started = time.monotonic()
    assert gate.begin_fetch(time.monotonic() + 0.02) is False
    assert time.monotonic() - started < 5  # returned at its deadline, not at the release
    assert gate._busy  # the control call still holds the handle
    release.set()
    worker.join(10)
    # Free again (after the grace period): the record wait gets the handle.
    assert gate.begin_fetch(time.monotonic() + 10) is True
    gate.end_fetch()


def test_a_record_wait_gets_the_handle_freed_before_its_deadline() -> None:
    gate = _Gate()
    got: list[bool] = []

    def record_wait() -> None:
        got.append(gate.begin_fetch(time.monotonic() + 10))
        gate.end_fetch()

    with gate.control():
        worker = threading.Thread(target=record_wait)
        worker.start()
        _until(lambda: len(gate._cond._waiters) == 1, "the record wait to wait")  # type: ignore[attr-defined]
    worker.join(10)
    assert got == [True]


def test_a_non_blocking_take_skips_a_handle_held_past_the_grace_period() -> None:
    clock = _Clock()
    gate = _Gate(clock)
    with gate.control():
        pass
    # In the grace period after a control call: a deadline already passed gives up.
    assert gate.begin_fetch(clock.now) is False
    clock.now += 1
    assert gate.begin_fetch(clock.now) is True
    gate.end_fetch()


def test_a_record_wait_waiting_for_another_gets_the_handle_when_it_ends() -> None:
    # end_fetch wakes waiters only when there are some: a record wait of another
    # thread (an AsyncConsumer's worker and a blocking poll) must still be woken.
    gate = _Gate()
    assert gate.begin_fetch() is True
    got: list[bool] = []

    def record_wait() -> None:
        got.append(gate.begin_fetch())  # no deadline: only a notification ends the wait
        gate.end_fetch()

    worker = threading.Thread(target=record_wait)
    worker.start()
    _until(lambda: len(gate._cond._waiters) == 1, "the second record wait to wait")  # type: ignore[attr-defined]
    gate.end_fetch()
    worker.join(10)
    assert not worker.is_alive()
    assert got == [True]
