"""Share-group peers: Apache Kafka's ``KafkaShareConsumer`` members driven from Python tests.

Each member is a JVM running ``java/SharePeer.java`` (compiled with
``Peer.java`` by :func:`peers.java_classpath`), speaking the line protocol
that file's header describes. :class:`SharePeerGroup` starts them, and
collects every record they report as a :class:`SharedRecord`, so a test can
check what the group as a whole delivered: which member got which record,
with which delivery count, and how the member acknowledged it.

Every wait has a deadline; a member that exits, goes silent or reports an
error fails the wait with the tail of its stderr.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from peers import (
    DEFAULT_JVM_OPTIONS,
    JAVA_LOG_CONFIG,
    Event,
    Peer,
    PeerError,
    PeerGroup,
    java_classpath,
)

__all__ = ["DrainResult", "JavaSharePeer", "SharePeerGroup", "SharedRecord"]

AckMode = Literal["implicit", "explicit"]
AckKind = Literal["accept", "release", "reject"]


@dataclass(frozen=True)
class SharedRecord:
    """One record a share member handed to its application, as the member reported it."""

    member: str
    topic: str
    partition: int
    offset: int
    delivery_count: int
    key: str | None
    ack: str
    """How the member acknowledged it: ``accept``, ``release`` or ``reject``."""
    at: int
    """The member's CLOCK_MONOTONIC stamp (ns) of the report."""


@dataclass(frozen=True)
class DrainResult:
    """What a ``drain`` measured inside the JVM."""

    count: int
    bytes: int
    first_ns: int
    last_ns: int

    @property
    def window(self) -> float:
        """Seconds from the first record handed out to the last."""
        return (self.last_ns - self.first_ns) / 1e9


class JavaSharePeer(Peer):
    """One ``KafkaShareConsumer`` process. Create through :meth:`SharePeerGroup.start_share`."""

    def __init__(
        self,
        name: str,
        mode: AckMode,
        argv: Sequence[str],
        condition: threading.Condition,
        log_dir: Path,
    ) -> None:
        self.mode = mode
        self._shared: list[SharedRecord] = []
        self._limit_mark = 0
        super().__init__(name, "java-share", argv, condition, log_dir)

    def _digest(self, event: Event) -> None:
        if event.name == "rec":
            topic, partition, offset, count, key, ack = event.fields
            self._shared.append(
                SharedRecord(
                    self.name,
                    topic,
                    int(partition),
                    int(offset),
                    int(count),
                    None if key == "-" else key,
                    ack,
                    event.at,
                )
            )

    # ---- commands

    def limit(self, count: int, timeout: float = 30.0) -> None:
        """Stop polling once ``count`` more records were handed out (-1: no limit), without
        waiting for them: :meth:`wait_consumed` does. Before ``subscribe`` it keeps the
        member from handing out any record beyond ``count``."""
        mark = len(self.events)
        self.send(f"consume {count}")
        self.wait_event("ok", timeout, after=mark)
        self._limit_mark = mark

    def wait_consumed(self, timeout: float = 60.0) -> int:
        """Wait until the budget of the last :meth:`limit` is used up; records handed out."""
        return int(self.wait_event("consumed", timeout, after=self._limit_mark).fields[0])

    def ack(self, kind: AckKind, timeout: float = 30.0) -> None:
        """Explicit mode: acknowledge every later record with ``kind``."""
        mark = len(self.events)
        self.send(f"ack {kind}")
        self.wait_event("ok", timeout, after=mark)

    def commit(self, timeout: float = 30.0) -> dict[int, int]:
        """``commitSync``: {0: partitions answered, 1: of them failed}."""
        mark = len(self.events)
        self.send("commit")
        answered, failed = self.wait_event("committed", timeout, after=mark).fields
        return {0: int(answered), 1: int(failed)}

    def drain(self, count: int, seconds: float) -> DrainResult:
        """Poll without reporting records until ``count`` were handed out (at most
        ``seconds``), accepting them; the JVM's own timing of it."""
        mark = len(self.events)
        self.send(f"drain {count} {seconds}")
        fields = self.wait_event("drained", seconds + 60, after=mark).fields
        got, nbytes, first, last = (int(f) for f in fields)
        return DrainResult(got, nbytes, first, last)

    # ---- what it reported

    def shared(self) -> list[SharedRecord]:
        """Every record handed out so far, in order."""
        with self._condition:
            return list(self._shared)

    def record_count(self) -> int:
        with self._condition:
            return len(self._shared)

    def commit_failures(self) -> list[Event]:
        """Acknowledgement-commit callbacks that reported an exception."""
        return [e for e in self.snapshot() if e.name == "acked" and e.fields[1] != "-"]


class SharePeerGroup(PeerGroup):
    """A :class:`PeerGroup` that also starts ``KafkaShareConsumer`` members."""

    def start_share(
        self,
        group: str,
        mode: AckMode = "implicit",
        *,
        name: str | None = None,
        config: dict[str, str] | None = None,
        topic: str | None = None,
        budget: int | None = None,
        ready_timeout: float = 60.0,
        jvm_options: Sequence[str] = DEFAULT_JVM_OPTIONS,
    ) -> JavaSharePeer:
        """Start a Java share member, wait until it runs, subscribe it to ``topic`` if given."""
        (peer,) = self.start_shares(
            group,
            [mode],
            names=None if name is None else [name],
            config=config,
            topic=topic,
            budget=budget,
            ready_timeout=ready_timeout,
            jvm_options=jvm_options,
        )
        return peer

    def start_shares(
        self,
        group: str,
        modes: Sequence[AckMode],
        *,
        names: Sequence[str] | None = None,
        config: dict[str, str] | None = None,
        topic: str | None = None,
        budget: int | None = None,
        ready_timeout: float = 60.0,
        jvm_options: Sequence[str] = DEFAULT_JVM_OPTIONS,
    ) -> list[JavaSharePeer]:
        """Start one Java share member per mode of ``modes`` (their JVMs start side by side),
        give each a ``budget`` (:meth:`JavaSharePeer.limit`) and subscribe it to ``topic``."""
        java = shutil.which("java")
        if java is None:
            raise PeerError("java is not on PATH: the Java share peer needs a JDK 17+")
        classpath = java_classpath(self.java_version)
        extra = [f"{k}={v}" for k, v in (config or {}).items()]
        started: list[JavaSharePeer] = []
        for i, mode in enumerate(modes):
            name = names[i] if names is not None else f"java-share-{len(self.peers)}"
            argv = [
                java,
                *jvm_options,
                f"-Dlog4j2.configurationFile={JAVA_LOG_CONFIG}",
                "-cp",
                classpath,
                "SharePeer",
                self.bootstrap,
                group,
                mode,
                *extra,
            ]
            peer = JavaSharePeer(name, mode, argv, self.condition, self.log_dir)
            self.peers.append(peer)
            started.append(peer)
        for peer in started:
            peer.wait_event("ready", ready_timeout)
            if budget is not None:
                peer.limit(budget)
            if topic is not None:
                peer.subscribe(topic)
        return started

    def share_peers(self) -> list[JavaSharePeer]:
        return [p for p in self.peers if isinstance(p, JavaSharePeer)]

    def shared(self) -> list[SharedRecord]:
        """Every record any Java share member handed out."""
        return [r for p in self.share_peers() for r in p.shared()]
