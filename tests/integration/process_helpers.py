"""Driving ``member_process.py`` children, and a producer writing at a steady rate."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from confluent_kafka import Producer
from helpers import HasAssignment

from kgroup import TopicPartition

SCRIPT = Path(__file__).with_name("member_process.py")


def tps(raw: Iterable[list[Any]]) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(str(t), int(p)) for t, p, *_ in raw)


@dataclass(frozen=True)
class Event:
    """One line a member process reported."""

    kind: str
    t: float  # the child's time.monotonic() (CLOCK_MONOTONIC: same clock as ours)
    data: dict[str, Any]

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return tps(self.data.get("partitions", []))


class EventViews:
    """What a member's reported events say, for members that append them under ``_cond``."""

    events: list[Event]
    _cond: threading.Condition

    def of(self, *kinds: str) -> list[Event]:
        with self._cond:
            return [e for e in self.events if e.kind in kinds]

    def assignment(self) -> frozenset[TopicPartition]:
        """What the listener was told the member holds now."""
        held: set[TopicPartition] = set()
        for event in self.of("assigned", "revoked", "lost"):
            if event.kind == "assigned":
                held |= event.partitions
            else:
                held -= event.partitions
        return frozenset(held)


class MemberProcess(EventViews):
    """A kgroup Consumer in a child process (``member_process.py``).

    Every wait has a deadline; :meth:`cleanup` kills what is still running.
    """

    def __init__(
        self,
        name: str,
        conf: dict[str, Any],
        topics: list[str],
        log_dir: Path,
        *,
        trace_commits: bool = False,
        commit_each_batch: bool = False,
        commit_on_revoke: bool = False,
        wait_to_subscribe: bool = False,
        keep_fetching: Iterable[TopicPartition] = (),
    ) -> None:
        self.name = name
        self.log_path = log_dir / f"member-{name}.log"
        spec = {
            "conf": conf,
            "topics": topics,
            "trace_commits": trace_commits,
            "commit_each_batch": commit_each_batch,
            "commit_on_revoke": commit_on_revoke,
            "wait_to_subscribe": wait_to_subscribe,
            "keep_fetching": [[tp.topic, tp.partition] for tp in keep_fetching],
        }
        self._log: IO[bytes] = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(SCRIPT), json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
        )
        self.events: list[Event] = []
        self.records: set[tuple[str, int, int]] = set()
        self._cond = threading.Condition()
        self._eof = False
        self._reader = threading.Thread(target=self._read, name=f"read-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                continue
            event = Event(raw.pop("ev"), raw.pop("t"), raw)
            with self._cond:
                self.events.append(event)
                if event.kind == "records":
                    self.records.update((t, p, o) for t, p, o in raw["records"])
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    # ---------------------------------------------------------------- views

    def epoch(self) -> tuple[str, int] | None:
        """The last (member id, epoch) reported."""
        reported = self.of("epoch")
        if not reported:
            return None
        return reported[-1].data["member_id"], reported[-1].data["epoch"]

    def tail(self, lines: int = 30) -> str:
        self._log.flush()
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    # ---------------------------------------------------------------- waits

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> float:
        """Wait until ``condition()``; when it became true. Fails after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0 or (self._eof and not condition()):
                    break
                self._cond.wait(min(left, 0.1))
            if condition():
                return time.monotonic()
        state = "exited" if self._eof else "running"
        raise AssertionError(
            f"{self.name} ({state}): timed out after {timeout}s waiting for {what}; "
            f"last events {[(e.kind, e.data) for e in self.events[-5:]]}\n"
            f"--- its log ---\n{self.tail()}"
        )

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} did not exit within {timeout}s\n{self.tail()}"
            ) from None

    # ------------------------------------------------------------- commands

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def close(self, timeout: float = 30.0) -> int:
        """``close()`` the consumer in the child; its exit status."""
        self.send("close")
        return self.wait_exit(timeout)

    def signal(self, sig: signal.Signals) -> None:
        os.kill(self.proc.pid, sig)

    def cleanup(self) -> None:
        """Kill the child if it still runs (resuming it first if stopped)."""
        if self.proc.poll() is None:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(self.proc.pid, sig)
                except ProcessLookupError:
                    break
            self.proc.wait(10)
        self._reader.join(5)
        if self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        self._log.close()


def assignments_converged(
    members: Iterable[HasAssignment], expected: frozenset[TopicPartition]
) -> bool:
    """Listener-reported assignments are non-empty, pairwise disjoint and cover ``expected``."""
    seen: list[TopicPartition] = []
    for member in members:
        held = member.assignment()
        if not held:
            return False
        seen.extend(held)
    return len(seen) == len(set(seen)) and set(seen) == expected


def assignments_balanced(
    members: Iterable[HasAssignment], expected: frozenset[TopicPartition]
) -> bool:
    """As :func:`assignments_converged`, and no member holds two partitions more than another.

    The broker's assignors balance the counts of one topic, so a group that
    only looks converged while a member still has a partition to hand over
    (a 3-2-1 split of six partitions on its way to 2-2-2) is not taken as
    settled: a test that starts a fault then would see that hand-over as its
    fault's doing. kgroup's members get there sooner since they heartbeat more
    often after the group moved, which made that window easy to hit.
    """
    members = list(members)
    if not assignments_converged(members, expected):
        return False
    sizes = [len(member.assignment()) for member in members]
    return max(sizes) - min(sizes) <= 1


class SteadyProducer:
    """Produces one record to every partition every ``interval`` seconds, in a thread.

    :attr:`delivered` is every (topic, partition, offset) the broker acknowledged.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topic = topic
        self._partitions = partitions
        self._interval = interval
        self.delivered: set[tuple[str, int, int]] = set()
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)
        self._thread.start()

    def _on_delivery(self, error: Any, message: Any) -> None:
        with self._lock:
            if error is not None:
                self.failures.append(str(error))
            else:
                self.delivered.add((message.topic(), message.partition(), message.offset()))

    def _run(self) -> None:
        i = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            for p in range(self._partitions):
                self._producer.produce(
                    self._topic, f"{i}".encode(), partition=p, on_delivery=self._on_delivery
                )
            i += 1
            self._producer.poll(0)
            next_at += self._interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> set[tuple[str, int, int]]:
        """Stop, wait for every acknowledgement; what was delivered."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(10)
        assert self._producer.flush(30) == 0
        assert not self.failures, self.failures
        with self._lock:
            return set(self.delivered)
