"""Where telemetry events go: one :class:`TelemetrySink` interface, several sinks.

The contract every sink keeps: :meth:`TelemetrySink.emit` never blocks on I/O
and never raises. Telemetry is an observer; a slow disk or an unreachable
broker must not stall a consumer's heartbeats or its poll loop. Sinks that do
I/O (:class:`JsonLinesSink`, :class:`~kgroup.telemetry.kafka.KafkaTopicSink`)
put events on a bounded queue that a background thread drains; when the queue
is full, the event is dropped and counted (:attr:`SinkStats.dropped`), and the
emitter's ``seq`` numbers show the gap to a reader.
"""

from __future__ import annotations

import abc
import contextlib
import itertools
import logging
import os
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kgroup.errors import ConfigError
from kgroup.telemetry.codec import encode
from kgroup.telemetry.events import TelemetryEvent

__all__ = [
    "DEFAULT_QUEUE_SIZE",
    "CallbackSink",
    "JsonLinesSink",
    "QueuedSink",
    "SinkStats",
    "TelemetrySink",
]

_log = logging.getLogger("kgroup.telemetry")

DEFAULT_QUEUE_SIZE = 10_000
"""Events a queued sink holds before it drops new ones."""

_BATCH = 500


@dataclass(frozen=True, slots=True)
class SinkStats:
    """Counters of a sink since it was created."""

    emitted: int
    """Events handed to :meth:`TelemetrySink.emit`."""
    written: int
    """Events the sink delivered (written to the file, acknowledged by Kafka, returned
    from the callback)."""
    dropped: int
    """Events discarded because the sink's queue was full or the sink was closed."""
    failed: int
    """Events lost to an error (a write error, a delivery failure, a raising callback)."""


class TelemetrySink(abc.ABC):
    """Receives telemetry events. :meth:`emit` must never block on I/O nor raise."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._emitted = 0
        self._written = 0
        self._dropped = 0
        self._failed = 0

    @abc.abstractmethod
    def emit(self, event: TelemetryEvent) -> None:
        """Take ``event``; returns at once whatever happens to it."""

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait up to ``timeout`` seconds until every accepted event is delivered.

        Returns whether everything was delivered in time.
        """
        return True

    @abc.abstractmethod
    def close(self, timeout: float = 5.0) -> None:
        """Deliver what can be delivered within ``timeout`` seconds, then release resources.

        Events emitted after ``close`` are dropped. Calling it twice is harmless.
        """

    @property
    def stats(self) -> SinkStats:
        """A snapshot of the sink's counters."""
        with self._lock:
            return SinkStats(self._emitted, self._written, self._dropped, self._failed)

    def _count(
        self, *, emitted: int = 0, written: int = 0, dropped: int = 0, failed: int = 0
    ) -> None:
        with self._lock:
            self._emitted += emitted
            self._written += written
            self._dropped += dropped
            self._failed += failed


class CallbackSink(TelemetrySink):
    """Calls ``callback(event)`` in the emitting thread.

    The callback runs inline, inside the consumer's runtime: it must be quick
    (append to a list, put on a queue). An exception it raises is logged and
    counted as ``failed``; it never reaches the consumer.
    """

    def __init__(self, callback: Callable[[TelemetryEvent], object]) -> None:
        super().__init__()
        if not callable(callback):
            raise ConfigError(f"telemetry callback must be callable, got {callback!r}")
        self._callback = callback
        self._closed = False

    def emit(self, event: TelemetryEvent) -> None:
        if self._closed:
            self._count(emitted=1, dropped=1)
            return
        try:
            self._callback(event)
        except Exception:
            self._count(emitted=1, failed=1)
            _log.warning("telemetry callback raised on a %s event", event.kind.value, exc_info=True)
        else:
            self._count(emitted=1, written=1)

    def close(self, timeout: float = 5.0) -> None:
        self._closed = True


class QueuedSink(TelemetrySink):
    """Base of sinks that do I/O: a bounded queue drained by one daemon thread.

    Subclasses implement :meth:`_deliver` (called in the worker thread with up
    to a few hundred events at a time) and may override :meth:`_release`.
    """

    def __init__(self, *, queue_size: int = DEFAULT_QUEUE_SIZE, name: str = "sink") -> None:
        super().__init__()
        if queue_size < 1:
            raise ConfigError(f"telemetry queue size must be >= 1, got {queue_size}")
        self._queue: queue.Queue[TelemetryEvent] = queue.Queue(maxsize=queue_size)
        # Accepted but not yet delivered (queued or in the worker's hands), so
        # flush() knows when it is done.
        self._pending = 0
        self._idle = threading.Condition(self._lock)
        self._closing = threading.Event()
        self._close_deadline = float("inf")
        self._closed = False
        self._warned_full = False
        self._worker = threading.Thread(
            target=self._run, name=f"kgroup-telemetry-{name}", daemon=True
        )
        self._worker.start()

    def emit(self, event: TelemetryEvent) -> None:
        with self._lock:
            self._emitted += 1
            if self._closed:
                self._dropped += 1
                return
            try:
                self._queue.put_nowait(event)
            except queue.Full:
                self._dropped += 1
                warn = not self._warned_full
                self._warned_full = True
            else:
                self._pending += 1
                return
        if warn:
            _log.warning(
                "telemetry sink %s is not keeping up: its queue of %d events is full; "
                "dropping events (counted in the sink's stats.dropped)",
                type(self).__name__,
                self._queue.maxsize,
            )

    def _run(self) -> None:
        while True:
            try:
                first = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._closing.is_set():
                    return
                self._idle_tick()
                continue
            batch = [first]
            with contextlib.suppress(queue.Empty):
                while len(batch) < _BATCH:
                    batch.append(self._queue.get_nowait())
            try:
                delivered = self._deliver(batch)
            except Exception:
                _log.warning(
                    "telemetry sink %s failed to deliver %d events",
                    type(self).__name__,
                    len(batch),
                    exc_info=True,
                )
                delivered = 0
            with self._lock:
                self._written += delivered
                self._failed += len(batch) - delivered
                self._pending -= len(batch)
                if self._pending == 0:
                    self._idle.notify_all()

    @abc.abstractmethod
    def _deliver(self, events: Sequence[TelemetryEvent]) -> int:
        """Deliver ``events`` (worker thread); return how many were delivered."""

    def _give_up(self) -> bool:
        """Whether a delivery waiting for room downstream should give up (worker thread)."""
        return self._closing.is_set() and time.monotonic() >= self._close_deadline

    def _idle_tick(self) -> None:
        """Called by the worker when it has waited 0.1 s for events (worker thread)."""

    def _release(self, timeout: float) -> None:
        """Release resources after the worker stopped (the closing thread)."""

    def flush(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        deadline = time.monotonic() + timeout
        # The worker drains the queue before it stops; a delivery stuck on a
        # full downstream buffer gives up once the deadline has passed.
        self._close_deadline = deadline
        self._closing.set()
        self.flush(timeout)
        # A little grace past the deadline so that a delivery giving up is
        # counted before the stats are read.
        self._worker.join(max(0.0, deadline - time.monotonic()) + 0.5)
        # Whatever the worker could not take in time is dropped, and said so.
        left = 0
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()
                left += 1
        if left:
            self._count(dropped=left)
            with self._lock:
                self._pending -= left
            _log.warning("telemetry sink %s closed with %d events undelivered", self, left)
        self._release(max(0.0, deadline - time.monotonic()))


_instance_counter = itertools.count(1)
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class JsonLinesSink(QueuedSink):
    """Appends events as JSON Lines to a file, rotating it by size.

    ``path`` is either a file (``.../telemetry.jsonl``; give each consumer its
    own) or a directory (an existing one, or a path ending in ``/``), in which
    each sink writes its own file, ``kgroup-<host>-<pid>-<n>.jsonl``, so that
    many consumers can share one directory.

    When the active file reaches ``max_bytes`` it is renamed to
    ``<stem>.<k>.jsonl`` (``k`` = 1, 2, ...: the order of writing) and a new
    one begins; only the newest ``keep_files`` rotated files are kept (0 keeps
    all). Every file stays a valid JSON Lines file, so a reader may take the
    whole directory (``*.jsonl``). Each batch is flushed to the OS at once: a
    process killed with SIGKILL loses only what was still queued.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_bytes: int = 64 * 1024 * 1024,
        keep_files: int = 20,
        queue_size: int = DEFAULT_QUEUE_SIZE,
    ) -> None:
        if max_bytes < 0:
            raise ConfigError(
                f"telemetry.jsonl.max.bytes must be >= 0 (0: never rotate), got {max_bytes}"
            )
        if keep_files < 0:
            raise ConfigError(
                f"telemetry.jsonl.keep.files must be >= 0 (0: keep all), got {keep_files}"
            )
        text = os.fspath(path)
        target = Path(text)
        if text.endswith(("/", os.sep)) or target.is_dir():
            host = _SAFE.sub("_", socket.gethostname()) or "host"
            target = target / f"kgroup-{host}-{os.getpid()}-{next(_instance_counter)}.jsonl"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._file: IO[str] = target.open("a", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot open telemetry file {target}: {exc}") from exc
        self.path = target
        """The active file."""
        self._max_bytes = max_bytes
        self._keep = keep_files
        self._size = self._file.tell()
        self._next_index = self._last_rotated_index() + 1
        super().__init__(queue_size=queue_size, name="jsonl")

    def _rotated(self) -> list[tuple[int, Path]]:
        stem = self.path.name.removesuffix(".jsonl")
        pattern = re.compile(re.escape(stem) + r"\.(\d+)\.jsonl$")
        found = []
        for candidate in self.path.parent.iterdir():
            match = pattern.match(candidate.name)
            if match:
                found.append((int(match.group(1)), candidate))
        return sorted(found)

    def _last_rotated_index(self) -> int:
        rotated = self._rotated()
        return rotated[-1][0] if rotated else 0

    def _deliver(self, events: Sequence[TelemetryEvent]) -> int:
        data = "".join(encode(e) + "\n" for e in events)
        if self._max_bytes and self._size and self._size + len(data) > self._max_bytes:
            self._rotate()
        self._file.write(data)
        self._file.flush()
        # Characters, not bytes, for non-ASCII text: close enough for a size limit.
        self._size += len(data)
        return len(events)

    def _rotate(self) -> None:
        self._file.close()
        stem = self.path.name.removesuffix(".jsonl")
        self.path.rename(self.path.with_name(f"{stem}.{self._next_index}.jsonl"))
        self._next_index += 1
        self._file = self.path.open("a", encoding="utf-8")
        self._size = 0
        if self._keep:
            for _, old in self._rotated()[: -self._keep]:
                with contextlib.suppress(OSError):
                    old.unlink()

    def _release(self, timeout: float) -> None:
        self._file.close()

    def __repr__(self) -> str:
        return f"JsonLinesSink({str(self.path)!r})"
