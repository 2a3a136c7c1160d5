"""Telemetry sinks and the emitter: delivery, rotation, and never blocking the consumer."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from kgroup.errors import ConfigError
from kgroup.telemetry import (
    CallbackSink,
    EventKind,
    FetchStarted,
    JsonLinesSink,
    MemberJoined,
    QueuedSink,
    TelemetryEmitter,
    TelemetryEvent,
    TelemetryProtocol,
    decode,
)
from kgroup.types import TopicPartition


def make_emitter(sink: object, **kwargs: object) -> TelemetryEmitter:
    ticks = iter(range(1_000_000))
    return TelemetryEmitter(
        sink,  # type: ignore[arg-type]
        group="g",
        client_id="c",
        protocol=TelemetryProtocol.CONSUMER,
        host="h",
        pid=42,
        clock=lambda: 1000.0 + next(ticks),
        monotonic=lambda: 5.0,
        **kwargs,  # type: ignore[arg-type]
    )


def test_emitter_stamps_headers_in_sequence() -> None:
    seen: list[TelemetryEvent] = []
    emitter = make_emitter(CallbackSink(seen.append), instance_id="i-1")
    emitter.emit(MemberJoined(epoch=1))
    emitter.member_id = "m-9"
    emitter.protocol = TelemetryProtocol.CLASSIC
    emitter.emit(FetchStarted(partitions=(TopicPartition("t", 0),), epoch=1))
    assert [e.header.seq for e in seen] == [0, 1]
    assert [e.header.ts for e in seen] == [1000.0, 1001.0]
    first, second = (e.header for e in seen)
    assert (first.member_id, first.protocol) == ("", TelemetryProtocol.CONSUMER)
    assert (second.member_id, second.protocol) == ("m-9", TelemetryProtocol.CLASSIC)
    assert (second.group, second.client_id, second.host, second.pid, second.instance_id) == (
        "g",
        "c",
        "h",
        42,
        "i-1",
    )
    assert emitter.stats.written == 2


def test_a_raising_callback_never_reaches_the_consumer() -> None:
    def boom(event: TelemetryEvent) -> None:
        raise RuntimeError("user bug")

    emitter = make_emitter(CallbackSink(boom))
    emitter.emit(MemberJoined(epoch=1))
    stats = emitter.stats
    assert (stats.emitted, stats.written, stats.failed) == (1, 0, 1)


def test_callback_sink_drops_after_close() -> None:
    seen: list[TelemetryEvent] = []
    emitter = make_emitter(CallbackSink(seen.append))
    emitter.close()
    emitter.emit(MemberJoined(epoch=1))
    assert seen == []
    assert emitter.stats.dropped == 1


def test_callback_must_be_callable() -> None:
    with pytest.raises(ConfigError, match="callable"):
        CallbackSink("print")  # type: ignore[arg-type]


class GatedSink(QueuedSink):
    """Delivery blocks until ``gate`` is set: a sink slower than the consumer."""

    def __init__(self, queue_size: int) -> None:
        self.gate = threading.Event()
        self.busy = threading.Event()
        self.delivered: list[TelemetryEvent] = []
        super().__init__(queue_size=queue_size, name="gated")

    def _deliver(self, events: Sequence[TelemetryEvent]) -> int:
        self.busy.set()
        self.gate.wait(30)
        self.delivered.extend(events)
        return len(events)


def test_a_slow_sink_drops_and_counts_instead_of_blocking() -> None:
    sink = GatedSink(queue_size=10)
    emitter = make_emitter(sink)
    emitter.emit(MemberJoined(epoch=0))
    assert sink.busy.wait(10)  # the worker holds event 0 and is stuck delivering it
    started = time.monotonic()
    for epoch in range(1, 16):
        emitter.emit(MemberJoined(epoch=epoch))
    elapsed = time.monotonic() - started
    stats = sink.stats
    assert (stats.emitted, stats.dropped) == (16, 5)
    # Fifteen emits against a stuck sink: no waiting on it (a blocking put would
    # hang here until the 30 s gate timeout).
    assert elapsed < 1.0
    sink.gate.set()
    assert sink.flush(10)
    assert [e.body.epoch for e in sink.delivered] == list(range(11))  # type: ignore[union-attr]
    assert sink.stats.written == 11
    sink.close()


def test_queued_sink_close_drops_later_events() -> None:
    sink = GatedSink(queue_size=10)
    sink.gate.set()
    sink.close()
    make_emitter(sink).emit(MemberJoined(epoch=0))
    assert sink.stats.dropped == 1
    sink.close()  # twice is harmless


def test_queued_sink_counts_a_failed_delivery() -> None:
    class Broken(QueuedSink):
        def _deliver(self, events: Sequence[TelemetryEvent]) -> int:
            raise OSError("disk full")

    sink = Broken(queue_size=5)
    make_emitter(sink).emit(MemberJoined(epoch=0))
    assert sink.flush(10)
    assert sink.stats.failed == 1
    sink.close()


def read_lines(path: Path) -> list[TelemetryEvent]:
    return [decode(line) for line in path.read_text().splitlines()]


def test_jsonl_sink_writes_decodable_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    sink = JsonLinesSink(path)
    emitter = make_emitter(sink)
    for epoch in range(5):
        emitter.emit(MemberJoined(epoch=epoch))
    sink.close()
    events = read_lines(path)
    assert [e.kind for e in events] == [EventKind.MEMBER_JOINED] * 5
    assert [e.header.seq for e in events] == list(range(5))
    assert sink.stats.written == 5


def test_jsonl_sink_in_a_directory_gives_each_sink_its_own_file(tmp_path: Path) -> None:
    first = JsonLinesSink(f"{tmp_path}/telemetry/")
    second = JsonLinesSink(tmp_path / "telemetry")  # now an existing directory
    assert first.path.parent == second.path.parent == tmp_path / "telemetry"
    assert first.path != second.path
    assert first.path.name.startswith(f"kgroup-{socket.gethostname()}"[:10])
    make_emitter(first).emit(MemberJoined(epoch=1))
    make_emitter(second).emit(MemberJoined(epoch=2))
    first.close()
    second.close()
    assert [e.body for e in read_lines(first.path)] == [MemberJoined(epoch=1)]
    assert [e.body for e in read_lines(second.path)] == [MemberJoined(epoch=2)]


def test_jsonl_sink_rotates_and_keeps_the_newest_files(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    sink = JsonLinesSink(path, max_bytes=600, keep_files=2)
    emitter = make_emitter(sink)
    for epoch in range(40):
        emitter.emit(MemberJoined(epoch=epoch))
        # One event per batch, so every write is a rotation opportunity.
        assert sink.flush(10)
    sink.close()
    rotated = sorted(tmp_path.glob("t.*.jsonl"))
    assert len(rotated) == 2
    indices = sorted(int(p.name.split(".")[1]) for p in rotated)
    assert indices[1] == indices[0] + 1
    for file in [*rotated, path]:
        assert file.stat().st_size <= 600
    # The kept files plus the active one hold the newest events, in order, without gaps.
    ordered = [tmp_path / f"t.{i}.jsonl" for i in indices] + [path]
    seqs = [e.header.seq for file in ordered for e in read_lines(file)]
    assert seqs == list(range(40 - len(seqs), 40))


def test_jsonl_sink_continues_the_numbering_of_an_earlier_run(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    (tmp_path / "t.7.jsonl").write_text("")
    path.write_text("x" * 700 + "\n")
    sink = JsonLinesSink(path, max_bytes=600, keep_files=0)
    make_emitter(sink).emit(MemberJoined(epoch=1))
    sink.close()
    assert (tmp_path / "t.8.jsonl").read_text() == "x" * 700 + "\n"
    assert [e.body for e in read_lines(path)] == [MemberJoined(epoch=1)]


def test_jsonl_sink_refuses_an_unwritable_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="cannot open telemetry file"):
        JsonLinesSink(blocker / "t.jsonl")


def test_kafka_sink_never_blocks_on_an_unreachable_broker() -> None:
    from kgroup.telemetry import KafkaTopicSink  # noqa: PLC0415

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sink = KafkaTopicSink(
        "telemetry",
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "queue.buffering.max.messages": "5",
            "message.timeout.ms": "2000",
        },
        queue_size=5,
    )
    emitter = make_emitter(sink)
    started = time.monotonic()
    for epoch in range(200):
        emitter.emit(MemberJoined(epoch=epoch))
    assert time.monotonic() - started < 1.0
    sink.close(timeout=1.0)
    stats = sink.stats
    assert stats.emitted == 200
    assert stats.dropped >= 190  # librdkafka holds 5, the queue 5
    assert stats.written == 0
    assert stats.emitted == stats.dropped + stats.failed


def test_kafka_sink_needs_bootstrap_servers() -> None:
    from kgroup.telemetry import KafkaTopicSink  # noqa: PLC0415

    with pytest.raises(ConfigError, match="bootstrap.servers"):
        KafkaTopicSink("t", {})
    with pytest.raises(ConfigError, match="invalid telemetry producer configuration"):
        KafkaTopicSink("t", {"bootstrap.servers": "x:1", "no.such.setting": "1"})
