"""The collector's middle pass runs before a take, not inside it (kgroup.dataplane._young_pass).

A pass over the middle generation inside a take finds the batch's records
alive and moves them to the oldest generation, which is what schedules the
full passes over the whole process. Here librdkafka's consumer is replaced by
one that builds real ``confluent_kafka.Message`` objects (tracked by the
collector as librdkafka's are), and ``gc.callbacks`` records where each pass
falls. No broker.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import confluent_kafka
import pytest

from kgroup.config import ConsumerConfig
from kgroup.dataplane._young_pass import young_pass_before_take, young_pass_due
from kgroup.dataplane.librdkafka import DataPlane

DEFAULT = (700, 10, 10)  # CPython's thresholds
BATCH = 1000
TAKES = 200


class _Passes:
    """The collector's passes over the middle generation, inside a take and outside."""

    def __init__(self) -> None:
        self.taking = False
        self.inside = 0
        self.outside = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 1:
            if self.taking:
                self.inside += 1
            else:
                self.outside += 1


@contextmanager
def _watching(thresholds: tuple[int, int, int] = DEFAULT) -> Iterator[_Passes]:
    passes = _Passes()
    saved, enabled = gc.get_threshold(), gc.isenabled()
    gc.collect()  # every count from 0: what comes next decides where the passes fall
    gc.set_threshold(*thresholds)
    gc.enable()
    gc.callbacks.append(passes)
    try:
        yield passes
    finally:
        gc.callbacks.remove(passes)
        gc.set_threshold(*saved)
        (gc.enable if enabled else gc.disable)()


class _Librdkafka:
    """librdkafka's consumer as far as a take goes: a batch of new records."""

    passes: _Passes
    queued = BATCH  # records a take finds at most

    def __init__(self, conf: dict[str, Any]) -> None:
        self.next = 0

    def consume(self, num_messages: int, timeout: float) -> list[confluent_kafka.Message]:
        self.passes.taking = True
        try:
            start = self.next
            self.next += min(num_messages, self.queued)
            return [
                confluent_kafka.Message(topic="t", partition=0, offset=o, value=b"x" * 100)
                for o in range(start, self.next)
            ]
        finally:
            self.passes.taking = False

    def close(self) -> None:
        pass


def _take(passes: _Passes, count: int) -> list[confluent_kafka.Message]:
    passes.taking = True
    try:
        return [confluent_kafka.Message(topic="t", partition=0, offset=o) for o in range(count)]
    finally:
        passes.taking = False


@pytest.mark.parametrize("before", [False, True], ids=["alone", "young pass before each"])
def test_where_the_middle_pass_falls_in_a_loop_of_takes(before: bool) -> None:
    """The control (no pass run before the takes) shows the passes do fall inside."""
    with _watching() as passes:
        for _ in range(TAKES):
            if before:
                young_pass_before_take(BATCH)
            batch = _take(passes, BATCH)
            del batch  # handed out and dropped, as a consume loop does
    # Enough passes that none inside is no accident (about one per 12 batches:
    # a freed batch gives its count back, so fewer than one per 11 x 700 records).
    assert passes.outside + passes.inside >= 10
    if before:
        assert passes.inside == 0
    else:
        assert passes.inside > 0


def test_the_data_plane_runs_the_pass_before_its_take(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confluent_kafka, "Consumer", _Librdkafka)
    plane = DataPlane(ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "group.id": "g"}))
    try:
        with _watching() as passes:
            _Librdkafka.passes = passes
            for _ in range(TAKES):
                batch = plane.consume(BATCH, 0)
                assert len(plane.deliver(batch, len(batch))) == BATCH
                del batch
        assert passes.inside == 0
        assert passes.outside >= 10
    finally:
        plane.close()


def test_a_trickle_at_a_large_limit_runs_no_pass_on_every_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aiokafka's getmany() asks for up to 10,000: the expected take follows the last
    one, or every call would run a middle pass (and move what is alive)."""
    monkeypatch.setattr(confluent_kafka, "Consumer", _Librdkafka)
    monkeypatch.setattr(_Librdkafka, "queued", 5)
    plane = DataPlane(ConsumerConfig.from_dict({"bootstrap.servers": "x:1", "group.id": "g"}))
    try:
        with _watching() as passes:
            _Librdkafka.passes = passes
            for _ in range(TAKES):
                batch = plane.consume(10_000, 0)
                assert len(plane.deliver(batch, len(batch))) == 5
                del batch
        assert passes.outside + passes.inside <= TAKES // 10
    finally:
        plane.close()


def test_a_collector_turned_off_is_left_alone() -> None:
    with _watching() as passes:
        gc.disable()
        for _ in range(20):
            gc.collect(0)  # the middle generation's count far past its threshold
        young_pass_before_take(BATCH)
        assert passes.outside == 0
        with _watching((0, 10, 10)) as by_threshold:
            young_pass_before_take(BATCH)
        assert by_threshold.outside == 0


@pytest.mark.parametrize(
    ("counts", "thresholds", "max_records", "due"),
    [
        # 1,000 records make one or two first-generation passes; the middle
        # pass comes at the first that finds more than 10 of them counted.
        ((0, 10, 0), DEFAULT, 1000, False),
        ((0, 11, 0), DEFAULT, 1000, True),
        ((650, 10, 0), DEFAULT, 1000, True),
        ((650, 9, 0), DEFAULT, 1000, False),
        # One record: only when a first-generation pass is that close.
        ((690, 11, 0), DEFAULT, 1, True),
        ((100, 11, 0), DEFAULT, 1, False),
        ((0, 0, 0), DEFAULT, 10_000, True),
        ((0, 0, 0), (700, 30, 10), 10_000, False),
        ((700, 40, 0), (0, 10, 10), 1000, False),
        ((0, 11, 0), DEFAULT, 0, False),
    ],
)
def test_when_the_middle_pass_is_due(
    counts: tuple[int, int, int], thresholds: tuple[int, int, int], max_records: int, due: bool
) -> None:
    assert young_pass_due(counts, thresholds, max_records) is due
