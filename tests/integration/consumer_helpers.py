"""Helpers shared by the consumer integration tests: producing, waiting, recording."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Message, Producer

import kgroup
from kgroup import TopicPartition


def produce(bootstrap: str, topic: str, partitions: int, count: int, start: int = 0) -> set[str]:
    """Produce ``count`` records round-robin over the partitions; their values."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = set()
    for i in range(start, start + count):
        value = f"{topic}:{i}"
        producer.produce(topic, value.encode(), partition=i % partitions)
        values.add(value)
    assert producer.flush(30) == 0
    return values


def text(message: Message) -> str:
    """A record's value as text."""
    value = message.value()
    assert isinstance(value, bytes)
    return value.decode()


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def partitions_of(topic: str, count: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in range(count))


@dataclass(frozen=True)
class ListenerEvent:
    at: int  # time.monotonic_ns()
    member: str
    kind: str
    partitions: frozenset[TopicPartition]


@dataclass
class EventLog:
    """Listener calls of every member of a test, in the order they happened."""

    events: list[ListenerEvent] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def listener(self, member: str) -> Recorder:
        return Recorder(self, member)

    def add(self, member: str, kind: str, partitions: frozenset[TopicPartition]) -> None:
        with self.lock:
            self.events.append(ListenerEvent(time.monotonic_ns(), member, kind, partitions))

    def of(self, member: str, kind: str | None = None) -> list[ListenerEvent]:
        with self.lock:
            return [
                e for e in self.events if e.member == member and (kind is None or e.kind == kind)
            ]

    def held(self, member: str) -> frozenset[TopicPartition]:
        """What the member's listener was told it holds now."""
        held: set[TopicPartition] = set()
        for event in self.of(member):
            if event.kind == "assigned":
                held |= event.partitions
            else:
                held -= event.partitions
        return frozenset(held)

    def check_handover_order(self) -> None:
        """A partition assigned to a member after another held it was revoked (or lost) first."""
        holder: dict[TopicPartition, str] = {}
        with self.lock:
            events = sorted(self.events, key=lambda e: e.at)
        for event in events:
            for tp in event.partitions:
                if event.kind == "assigned":
                    previous = holder.get(tp)
                    assert previous is None, (
                        f"{tp} assigned to {event.member} while {previous} still held it: "
                        + "; ".join(
                            f"{e.at} {e.member} {e.kind} {sorted(e.partitions)}" for e in events
                        )
                    )
                    holder[tp] = event.member
                else:
                    assert holder.get(tp) == event.member, f"{event} for a partition not held"
                    del holder[tp]


class Recorder:
    """A rebalance listener writing to an :class:`EventLog`."""

    def __init__(self, log: EventLog, member: str) -> None:
        self.log = log
        self.member = member

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        if partitions:
            self.log.add(self.member, "assigned", partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        if partitions:
            self.log.add(self.member, "revoked", partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        if partitions:
            self.log.add(self.member, "lost", partitions)


class Runner:
    """A blocking consumer polling in its own thread, keeping every record it got."""

    def __init__(
        self,
        conf: dict[str, Any],
        topics: Iterable[str] | str,
        log: EventLog,
        name: str,
    ) -> None:
        self.name = name
        self.consumer = kgroup.Consumer(conf)
        self.consumer.subscribe(
            topics if isinstance(topics, str) else list(topics), log.listener(name)
        )
        self.values: list[str] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"runner-{name}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                batch: list[Message] = self.consumer.consume(200, 0.2)
                self.values.extend(text(m) for m in batch)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            try:
                self.consumer.close(15)
            except BaseException as exc:
                self.errors.append(exc)

    def assignment(self) -> frozenset[TopicPartition]:
        return self.consumer.assignment()

    def stop(self) -> None:
        """Close the consumer (from its thread) and wait for it."""
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        assert not self.errors, f"{self.name} failed: {self.errors!r}"


def converged(runners: Iterable[Runner], expected: frozenset[TopicPartition]) -> bool:
    """Assignments are pairwise disjoint and cover ``expected`` exactly."""
    seen: list[TopicPartition] = []
    for runner in runners:
        seen.extend(runner.assignment())
    return len(seen) == len(set(seen)) and set(seen) == expected
