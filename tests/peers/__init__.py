"""Peer harness: consumer-group members written by others, driven from Python tests.

Three kinds of member, each in a process of its own, all speaking the line
protocol documented in ``tests/peers/python_peer.py``:

- ``kgroup``: ``kgroup.Consumer`` (``python_peer.py``);
- ``librdkafka``: ``confluent_kafka.Consumer`` with ``group.protocol=consumer``
  (``python_peer.py``);
- ``java``: Apache Kafka's ``KafkaConsumer`` with ``group.protocol=consumer``
  (``java/Peer.java``, compiled once per process against the jars
  ``kgroup.testing.resolve_kafka_libs()`` resolves from Maven Central).

A :class:`PeerGroup` starts members, records every event they report with the
member's own CLOCK_MONOTONIC stamp, waits on those events with deadlines, and
kills whatever is still running when it closes. From the events it derives
what each member held and when, so tests can check that no partition was
ever owned by two members at once and that every record was handed out by the
member owning its partition at that moment.

Every wait has a deadline; a member that exits or goes silent fails the wait
with the tail of its stderr.

Share-group members (Apache Kafka's ``KafkaShareConsumer``, ``java/SharePeer.java``,
compiled together with ``Peer.java``) are started by ``peers.share_peer.SharePeerGroup``.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from kgroup.testing import resolve_kafka_libs

__all__ = [
    "KINDS",
    "Event",
    "Interval",
    "Peer",
    "PeerError",
    "PeerGroup",
    "java_classpath",
]

PEERS_DIR = Path(__file__).resolve().parent
PYTHON_PEER = PEERS_DIR / "python_peer.py"
JAVA_SOURCE = PEERS_DIR / "java" / "Peer.java"
# Compiled together: the share-group member (tests/peers/share_peer.py drives it).
JAVA_SOURCES = (JAVA_SOURCE, PEERS_DIR / "java" / "SharePeer.java")
JAVA_LOG_CONFIG = PEERS_DIR / "java" / "log4j2.properties"
KINDS = ("kgroup", "librdkafka", "java")
# Quick start-up over peak speed: these members mostly heartbeat.
DEFAULT_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m")

_compile_lock = threading.Lock()
_classpaths: dict[str, str] = {}


class PeerError(AssertionError):
    """A peer did not do what was asked in time, exited, or reported an error."""


def java_classpath(version: str = "4.4.0") -> str:
    """Compile ``Peer.java`` and ``SharePeer.java`` (once per source and version) and
    return the class path to run either."""
    with _compile_lock:
        if version in _classpaths:
            return _classpaths[version]
        libs = resolve_kafka_libs(version)
        sources = b"".join(source.read_bytes() for source in JAVA_SOURCES)
        digest = hashlib.sha256(sources + version.encode()).hexdigest()[:16]
        classes = Path(tempfile.gettempdir()) / f"kgroup-java-peer-{digest}"
        if not all((classes / f"{source.stem}.class").exists() for source in JAVA_SOURCES):
            javac = shutil.which("javac")
            if javac is None:
                raise PeerError("javac is not on PATH: the Java peer needs a JDK 17+")
            staging = Path(tempfile.mkdtemp(prefix="kgroup-java-peer-"))
            result = subprocess.run(
                [
                    javac,
                    "-nowarn",
                    "-cp",
                    f"{libs}/*",
                    "-d",
                    str(staging),
                    *(str(source) for source in JAVA_SOURCES),
                ],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if result.returncode != 0:
                raise PeerError(f"javac failed:\n{result.stderr}")
            with contextlib.suppress(OSError):  # another process won the race: use its copy
                staging.rename(classes)
            shutil.rmtree(staging, ignore_errors=True)
        _classpaths[version] = f"{classes}{os.pathsep}{libs}/*"
        return _classpaths[version]


@dataclass(frozen=True)
class Event:
    """One line a peer reported: its CLOCK_MONOTONIC stamp (ns), the event and its fields."""

    at: int
    name: str
    fields: tuple[str, ...]

    def partitions(self) -> frozenset[int]:
        """Partitions of an assigned / revoked / lost event (its last field)."""
        text = self.fields[-1]
        return frozenset() if text == "-" else frozenset(int(p) for p in text.split(","))

    def offsets(self) -> list[tuple[int, int]]:
        """(partition, offset) pairs of a recs / committed event."""
        text = self.fields[0]
        if text == "-":
            return []
        pairs = (item.split(":") for item in text.split(","))
        return [(int(p), int(o)) for p, o in pairs]


@dataclass(frozen=True)
class Interval:
    """A member owned a partition from ``start`` to ``end`` (ns; ``end`` math.inf: still)."""

    member: str
    partition: int
    start: int
    end: float
    clean: bool  # ended by a revocation (not lost, crashed or still open)


class Peer:
    """One member process. Create through :meth:`PeerGroup.start`."""

    def __init__(
        self,
        name: str,
        kind: str,
        argv: Sequence[str],
        condition: threading.Condition,
        log_dir: Path,
    ) -> None:
        self.name = name
        self.kind = kind
        self.events: list[Event] = []
        self.crashed_at: int | None = None  # when the driver crashed or killed it
        self._condition = condition
        self.stderr_path = log_dir / f"{name}.stderr"
        self._stderr: IO[bytes] = self.stderr_path.open("wb")
        self.process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
        )
        self._eof = False
        # Kept up to date by the reader, so waits can check them cheaply on every event.
        self._held: set[int] = set()
        self._records: list[tuple[int, int, int]] = []
        self._reader = threading.Thread(target=self._read, name=f"peer-{name}", daemon=True)
        self._reader.start()

    # ---- plumbing

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        for line in stream:
            words = line.split()
            if len(words) < 2 or not words[0].isdigit():
                continue  # not a protocol line
            event = Event(int(words[0]), words[1], tuple(words[2:]))
            with self._condition:
                self.events.append(event)
                self._digest(event)
                self._condition.notify_all()
        with self._condition:
            self._eof = True
            self._condition.notify_all()

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stderr_tail(self, lines: int = 30) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def send(self, command: str) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(command + "\n")
            stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise PeerError(f"{self.name} ({self.kind}) cannot take {command!r}: {exc}") from exc

    def wait_event(
        self,
        name: str,
        timeout: float,
        *,
        after: int = 0,
        where: Callable[[Event], bool] | None = None,
    ) -> Event:
        """The first event ``name`` at index >= ``after`` (matching ``where``); PeerError if none.

        Fails early when the peer reports ``error`` or its output ends.
        """
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                for event in self.events[after:]:
                    if event.name == name and (where is None or where(event)):
                        return event
                    if event.name == "error" and name != "error":
                        raise PeerError(
                            f"{self.name} ({self.kind}) failed: {event.fields}\n"
                            f"{self.stderr_tail()}"
                        )
                if self._eof:
                    raise PeerError(
                        f"{self.name} ({self.kind}) ended (status {self.process.poll()}) "
                        f"while waiting for {name!r}\n{self.stderr_tail()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PeerError(
                        f"{self.name} ({self.kind}): no {name!r} within {timeout:.0f} s; "
                        f"last events {self.events[-5:]}\n{self.stderr_tail()}"
                    )
                self._condition.wait(left)

    # ---- commands

    def subscribe(self, topic: str, timeout: float = 30.0) -> None:
        mark = len(self.events)
        self.send(f"subscribe {topic}")
        self.wait_event("ok", timeout, after=mark)

    def consume(self, count: int, timeout: float = 60.0) -> None:
        """Hand out ``count`` more records and pause; returns once they were handed out."""
        mark = len(self.events)
        self.send(f"consume {count}")
        self.wait_event("ok", timeout, after=mark)
        if count > 0:
            self.wait_event("consumed", timeout, after=mark)

    def unlimited(self, timeout: float = 30.0) -> None:
        """Consume without limit again (the default)."""
        mark = len(self.events)
        self.send("consume -1")
        self.wait_event("ok", timeout, after=mark)

    def commit(self, timeout: float = 30.0) -> dict[int, int]:
        """Synchronously commit the positions of every assigned partition; what was committed."""
        mark = len(self.events)
        self.send("commit")
        return dict(self.wait_event("committed", timeout, after=mark).offsets())

    def epoch(self, timeout: float = 30.0) -> int:
        mark = len(self.events)
        self.send("epoch")
        return int(self.wait_event("epoch", timeout, after=mark).fields[0])

    def close(self, timeout: float = 45.0) -> None:
        """Leave the group cleanly and wait for the process to exit 0."""
        mark = len(self.events)
        self.send("close")
        self.wait_event("closed", timeout, after=mark)
        status = self.process.wait(timeout)
        if status != 0:
            raise PeerError(f"{self.name} exited with {status}\n{self.stderr_tail()}")

    def crash(self, timeout: float = 15.0) -> None:
        """Exit at once without leaving the group (``os._exit`` / ``Runtime.halt``)."""
        self.send("crash")
        self.process.wait(timeout)
        self.crashed_at = time.monotonic_ns()

    def kill(self) -> None:
        """SIGKILL (teardown, or a crash the peer does not see coming)."""
        if self.alive():
            self.process.kill()
            self.crashed_at = time.monotonic_ns()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)

    def release(self) -> None:
        """Close the pipes and the stderr file (after the process ended)."""
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._reader.join(5)
        self._stderr.close()

    # ---- what it reported

    def snapshot(self) -> list[Event]:
        with self._condition:
            return list(self.events)

    def _digest(self, event: Event) -> None:
        if event.name == "assigned":
            self._held |= event.partitions()
        elif event.name in ("revoked", "lost"):
            self._held -= event.partitions()
        elif event.name == "closed":
            self._held.clear()
        elif event.name == "recs":
            self._records.extend((p, o, event.at) for p, o in event.offsets())

    def held(self) -> frozenset[int]:
        """Partitions the member's listener was last told it holds (empty once it ended)."""
        if self.crashed_at is not None or (self._eof and not self.alive()):
            return frozenset()
        with self._condition:
            return frozenset(self._held)

    def records(self) -> list[tuple[int, int, int]]:
        """(partition, offset, stamp) of every record handed out, in order."""
        with self._condition:
            return list(self._records)

    def record_count(self) -> int:
        with self._condition:
            return len(self._records)

    def consumed_from(self, partitions: Iterable[int], since: int = 0) -> bool:
        """Whether a record of each of ``partitions`` was handed out at or after ``since`` (ns)."""
        wanted = set(partitions)
        for p, _, at in self.records():
            if at >= since:
                wanted.discard(p)
        return not wanted

    def intervals(self) -> list[Interval]:
        """Ownership intervals per partition, from the listener events."""
        out: list[Interval] = []
        start: dict[int, int] = {}
        events = self.snapshot()
        for event in events:
            if event.name == "assigned":
                for p in event.partitions():
                    start.setdefault(p, event.at)
            elif event.name in ("revoked", "lost"):
                for p in event.partitions():
                    if p in start:
                        out.append(
                            Interval(self.name, p, start.pop(p), event.at, event.name == "revoked")
                        )
        end: float = math.inf
        if self.crashed_at is not None:
            end = self.crashed_at
        elif self._eof and events:
            end = events[-1].at
        out.extend(Interval(self.name, p, at, end, False) for p, at in start.items())
        return out


class PeerGroup:
    """Starts peers that share one condition variable; kills the survivors on exit."""

    def __init__(self, bootstrap: str, *, java_version: str = "4.4.0") -> None:
        self.bootstrap = bootstrap
        self.java_version = java_version
        self.peers: list[Peer] = []
        self.condition = threading.Condition()
        self.log_dir = Path(tempfile.mkdtemp(prefix="kgroup-peers-"))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill_all()
        if exc_type is None:  # on failure the members' stderr stays for a look
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def kill_all(self) -> None:
        for peer in self.peers:
            peer.kill()
            peer.release()

    def command(
        self,
        kind: str,
        group: str,
        config: dict[str, str] | None = None,
        jvm_options: Sequence[str] = DEFAULT_JVM_OPTIONS,
    ) -> list[str]:
        """The command line that runs a peer of ``kind``."""
        extra = [f"{k}={v}" for k, v in (config or {}).items()]
        if kind == "java":
            java = shutil.which("java") or "java"
            return [
                java,
                *jvm_options,
                f"-Dlog4j2.configurationFile={JAVA_LOG_CONFIG}",
                "-cp",
                java_classpath(self.java_version),
                "Peer",
                self.bootstrap,
                group,
                *extra,
            ]
        if kind in ("kgroup", "librdkafka"):
            return [sys.executable, "-u", str(PYTHON_PEER), kind, self.bootstrap, group, *extra]
        raise ValueError(f"unknown peer kind {kind!r}; one of {KINDS}")

    def start(
        self,
        kind: str,
        group: str,
        *,
        name: str | None = None,
        config: dict[str, str] | None = None,
        topic: str | None = None,
        ready_timeout: float = 60.0,
    ) -> Peer:
        """Start a peer, wait until it runs, and subscribe it to ``topic`` if given."""
        peer = self.launch(kind, group, name=name, config=config)
        peer.wait_event("ready", ready_timeout)
        if topic is not None:
            peer.subscribe(topic)
        return peer

    def launch(
        self,
        kind: str,
        group: str,
        *,
        name: str | None = None,
        config: dict[str, str] | None = None,
        jvm_options: Sequence[str] = DEFAULT_JVM_OPTIONS,
    ) -> Peer:
        """Start a peer's process without waiting for it (then ``wait_event("ready", ...)``)."""
        name = name or f"{kind}-{len(self.peers)}"
        argv = self.command(kind, group, config, jvm_options)
        peer = Peer(name, kind, argv, self.condition, self.log_dir)
        self.peers.append(peer)
        return peer

    def wait(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait until ``condition()`` (checked whenever a peer reports); PeerError on timeout."""
        with self.condition:
            if not self.condition.wait_for(condition, timeout):
                raise PeerError(
                    f"timed out after {timeout:.0f} s waiting for {what}: " + self.state()
                )

    def state(self) -> str:
        return "; ".join(
            f"{p.name}[{p.kind}{'' if p.alive() else ' ended'}] holds {sorted(p.held())}"
            for p in self.peers
        )

    def live(self) -> list[Peer]:
        return [p for p in self.peers if p.alive() and p.crashed_at is None]


def balanced(peers: Sequence[Peer], partitions: int) -> bool:
    """The members' assignments are disjoint, cover ``range(partitions)`` and differ by <= 1."""
    held = [p.held() for p in peers]
    sizes = [len(h) for h in held]
    union: set[int] = set().union(*held)
    return (
        sum(sizes) == partitions
        and union == set(range(partitions))
        and max(sizes) - min(sizes) <= 1
    )


def check_exclusive(peers: Iterable[Peer]) -> None:
    """No partition was owned by two members at once, and each record came from its owner.

    A member whose ownership ended without a revocation (lost, crash) may overlap
    its successor: the group gave the partition away after the session expired.
    """
    intervals: dict[int, list[Interval]] = {}
    peers = list(peers)
    for peer in peers:
        for interval in peer.intervals():
            intervals.setdefault(interval.partition, []).append(interval)
    for partition, spans in intervals.items():
        spans.sort(key=lambda i: i.start)
        for before, after in itertools.pairwise(spans):
            if before.clean or before.end == math.inf:
                assert before.end <= after.start, (
                    f"partition {partition} owned by {before.member} and {after.member} at once: "
                    f"{before} / {after}"
                )
    for peer in peers:
        mine = peer.intervals()
        for p, offset, at in peer.records():
            assert any(i.partition == p and i.start <= at <= i.end for i in mine), (
                f"{peer.name} handed out {p}:{offset} at {at} while not owning partition {p}"
            )
