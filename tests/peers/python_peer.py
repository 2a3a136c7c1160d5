"""A consumer-group member in a process of its own, driven over stdin / stdout.

    python tests/peers/python_peer.py KIND BOOTSTRAP GROUP [key=value ...]

KIND is ``kgroup`` (``kgroup.Consumer``) or ``librdkafka`` (a plain
``confluent_kafka.Consumer`` with ``group.protocol=consumer``, librdkafka's
KIP-848 member). ``tests/peers/java/Peer.java`` speaks the same protocol for
the Java client. Every member starts from ``auto.offset.reset=earliest`` and
the client's default auto-commit; ``key=value`` arguments add or replace
configuration keys, except ``peer.read.assignment=true``, which makes the peer
read the consumer's assignment before every poll. ``KGROUP_PEER_TRACE=<dir>``
writes a kgroup member's DEBUG log there, stamped like its events.

The line protocol
-----------------

Events, on stdout, one per line: ``<t> <event> <fields...>`` where ``<t>``
is the sender's CLOCK_MONOTONIC in nanoseconds (Python's
``time.monotonic_ns()``, Java's ``System.nanoTime()``), so events of
different processes on one machine can be ordered. Partitions are numbers
of the one subscribed topic; a list is comma-separated, ``-`` when empty.

- ``ready <kind> <pid>`` once the process runs;
- ``ok subscribe`` / ``ok consume <n>`` acknowledging a command;
- ``assigned <epoch> <partitions>``, ``revoked <epoch> <partitions>``,
  ``lost <epoch> <partitions>``: a rebalance-listener call (always the
  delta), stamped inside the callback, before the client acknowledges it to
  the group. ``<epoch>`` is the member epoch the client reports there
  (kgroup ``member_epoch``, Java ``groupMetadata().generationId()``; -1
  where the client does not expose it: librdkafka's Python binding);
- ``recs <p>:<offset>,...``: records handed to the application by one poll;
- ``consumed <n>``: the budget of a ``consume`` command is used up;
- ``committed <p>:<offset>,...``: a synchronous commit of the positions of
  every assigned partition succeeded;
- ``epoch <n>``: answer to ``epoch``;
- ``closed``: after a clean ``close``; the process then exits 0;
- ``error <type> <message>``: something raised; the process exits 3.

Commands, on stdin, one per line:

- ``subscribe <topic>``: join the group; from then on the member polls
  continuously (100 ms at a time) and reports what it gets;
- ``consume <n>``: hand out at most ``n`` more records, then pause every
  assigned partition (and those assigned later) while still polling, so the
  member stays in the group; ``consume -1`` removes the limit (the default);
- ``commit``, ``epoch``: as above;
- ``close``: leave cleanly (revocation callback, commit, leave) and exit 0;
- ``crash``: exit at once with status 1, without leaving the group
  (``os._exit`` / ``Runtime.halt``).

End of input acts as ``close``: a peer never outlives its driver's pipe.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

_EOF = "\x00eof"
READ_ASSIGNMENT = "peer.read.assignment"
"""A ``key=value`` argument of the peer itself, not of the client: ``true`` reads the
consumer's assignment before every poll (the idle-footprint benchmark's second loop)."""


_trace = logging.getLogger("kgroup.peer")


def _emit(line: str) -> None:
    sys.stdout.write(f"{time.monotonic_ns()} {line}\n")
    sys.stdout.flush()
    if not line.startswith("recs "):
        _trace.debug("event %s", line)


def _where(message: Any) -> tuple[int, int]:
    """(partition, offset) of a confluent-kafka message (both set on a record)."""
    partition, offset = message.partition(), message.offset()
    assert partition is not None
    assert offset is not None
    return partition, offset


def _parts(partitions: Iterable[int]) -> str:
    return ",".join(str(p) for p in sorted(partitions)) or "-"


class _Member:
    """What the main loop needs from a client; one subclass per client."""

    kind = ""

    def subscribe(self, topic: str) -> None:
        raise NotImplementedError

    def poll(self, max_records: int) -> list[tuple[int, int]]:
        """Up to ``max_records`` records as (partition, offset), waiting at most 100 ms."""
        raise NotImplementedError

    def assignment(self) -> set[int]:
        raise NotImplementedError

    def pause(self, partitions: Collection[int]) -> None:
        raise NotImplementedError

    def resume_all(self) -> None:
        raise NotImplementedError

    def seek(self, partition: int, offset: int) -> None:
        raise NotImplementedError

    def commit(self) -> dict[int, int]:
        raise NotImplementedError

    def epoch(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _KgroupMember(_Member):
    kind = "kgroup"

    def __init__(self, config: dict[str, Any], paused: Callable[[], bool]) -> None:
        import kgroup  # noqa: PLC0415 - only the kgroup peer needs it

        self._kgroup = kgroup
        self._consumer = kgroup.Consumer(config)
        self._paused = paused
        self._topic = ""

    def _tp(self, p: int) -> Any:
        return self._kgroup.TopicPartition(self._topic, p)

    def subscribe(self, topic: str) -> None:
        self._topic = topic
        outer = self

        class Listener:
            def on_partitions_assigned(self, partitions: frozenset[Any]) -> None:
                if outer._paused() and partitions:
                    outer._consumer.pause(partitions)
                _emit(f"assigned {outer.epoch()} {_parts(tp.partition for tp in partitions)}")

            def on_partitions_revoked(self, partitions: frozenset[Any]) -> None:
                _emit(f"revoked {outer.epoch()} {_parts(tp.partition for tp in partitions)}")

            def on_partitions_lost(self, partitions: frozenset[Any]) -> None:
                _emit(f"lost {outer.epoch()} {_parts(tp.partition for tp in partitions)}")

        self._consumer.subscribe([topic], Listener())

    def poll(self, max_records: int) -> list[tuple[int, int]]:
        batch = self._consumer.consume(max_records, 0.1)
        return [_where(m) for m in batch]

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self._consumer.assignment()}

    def pause(self, partitions: Collection[int]) -> None:
        self._consumer.pause([self._tp(p) for p in partitions])

    def resume_all(self) -> None:
        self._consumer.resume(self._consumer.assignment())

    def seek(self, partition: int, offset: int) -> None:
        self._consumer.seek(self._tp(partition), offset)

    def commit(self) -> dict[int, int]:
        committed = self._consumer.commit() or {}
        return {tp.partition: offset for tp, offset in committed.items()}

    def epoch(self) -> int:
        return int(self._consumer.member_epoch)

    def close(self) -> None:
        self._consumer.close(30)


class _LibrdkafkaMember(_Member):
    kind = "librdkafka"

    def __init__(self, config: dict[str, Any], paused: Callable[[], bool]) -> None:
        from confluent_kafka import Consumer  # noqa: PLC0415

        self._consumer = Consumer({"group.protocol": "consumer", **config})
        self._paused = paused
        self._topic = ""

    def _tp(self, p: int) -> Any:
        from confluent_kafka import TopicPartition  # noqa: PLC0415

        return TopicPartition(self._topic, p)

    def subscribe(self, topic: str) -> None:
        self._topic = topic

        def on_assign(consumer: Any, partitions: list[Any]) -> None:
            # Not assigning here lets confluent-kafka do the incremental assign itself.
            if self._paused() and partitions:
                consumer.incremental_assign(partitions)
                consumer.pause(partitions)
            _emit(f"assigned -1 {_parts(tp.partition for tp in partitions)}")

        def on_revoke(consumer: Any, partitions: list[Any]) -> None:
            _emit(f"revoked -1 {_parts(tp.partition for tp in partitions)}")

        def on_lost(consumer: Any, partitions: list[Any]) -> None:
            _emit(f"lost -1 {_parts(tp.partition for tp in partitions)}")

        self._consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    def poll(self, max_records: int) -> list[tuple[int, int]]:
        out = []
        for message in self._consumer.consume(max_records, 0.1):
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise RuntimeError(str(error))
                continue
            out.append(_where(message))
        return out

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self._consumer.assignment()}

    def pause(self, partitions: Collection[int]) -> None:
        self._consumer.pause([self._tp(p) for p in partitions])

    def resume_all(self) -> None:
        self._consumer.resume(self._consumer.assignment())

    def seek(self, partition: int, offset: int) -> None:
        from confluent_kafka import TopicPartition  # noqa: PLC0415

        self._consumer.seek(TopicPartition(self._topic, partition, offset))

    def commit(self) -> dict[int, int]:
        positions = [
            tp for tp in self._consumer.position(self._consumer.assignment()) if tp.offset >= 0
        ]
        if not positions:
            return {}
        committed = self._consumer.commit(offsets=positions, asynchronous=False) or []
        return {tp.partition: tp.offset for tp in committed}

    def epoch(self) -> int:
        return -1

    def close(self) -> None:
        self._consumer.close()


class _Peer:
    def __init__(self, kind: str, config: dict[str, Any], *, read_assignment: bool = False) -> None:
        self.read_assignment = read_assignment
        self.budget = -1  # records still to hand out; negative: no limit
        self.handed = 0
        self.subscribed = False
        self.commands: queue.Queue[str] = queue.Queue()
        member_class = {"kgroup": _KgroupMember, "librdkafka": _LibrdkafkaMember}[kind]
        self.member: _Member = member_class(config, lambda: self.budget == 0)

    def read_stdin(self) -> None:
        try:
            for line in sys.stdin:
                self.commands.put(line.strip())
        finally:
            self.commands.put(_EOF)

    def run(self) -> None:
        threading.Thread(target=self.read_stdin, name="stdin-reader", daemon=True).start()
        _emit(f"ready {self.member.kind} {os.getpid()}")
        while True:
            try:
                command = self.commands.get(timeout=None if not self.subscribed else 0)
            except queue.Empty:
                command = ""
            if command and not self.handle(command):
                return
            if self.subscribed:
                self.poll_once()

    def handle(self, command: str) -> bool:
        words = command.split()
        if words[0] == "subscribe":
            self.member.subscribe(words[1])
            self.subscribed = True
            _emit("ok subscribe")
        elif words[0] == "consume":
            self.budget, self.handed = int(words[1]), 0
            if self.budget == 0:
                self.member.pause(self.member.assignment())
            else:
                self.member.resume_all()
            _emit(f"ok consume {self.budget}")
        elif words[0] == "commit":
            offsets = self.member.commit()
            _emit("committed " + (",".join(f"{p}:{o}" for p, o in sorted(offsets.items())) or "-"))
        elif words[0] == "epoch":
            _emit(f"epoch {self.member.epoch()}")
        elif words[0] == "crash":
            sys.stdout.flush()
            os._exit(1)
        elif words[0] in ("close", _EOF):
            self.member.close()
            _emit("closed")
            return False
        else:
            _emit(f"error BadCommand {command}")
        return True

    def poll_once(self) -> None:
        if self.read_assignment:
            self.member.assignment()  # as a loop that checks what it owns every poll
        if self.budget == 0:
            # Everything is paused; polling keeps the rebalance callbacks going.
            self.give_back(self.member.poll(1))
            return
        before = self.budget
        records = self.member.poll(self.budget if self.budget > 0 else 500)
        if records:
            _emit("recs " + ",".join(f"{p}:{o}" for p, o in records))
            self.handed += len(records)
            if self.budget > 0:
                self.budget -= len(records)
        if before > 0 and self.budget == 0:
            self.member.pause(self.member.assignment())
            _emit(f"consumed {self.handed}")

    def give_back(self, records: list[tuple[int, int]]) -> None:
        """Records returned although their partition should be paused: not handed out.

        kgroup ignores ``pause`` from ``on_partitions_assigned`` (the partitions
        do not fetch yet; see tests/integration/test_interop_findings.py), so a
        partition assigned while the budget is used up can still deliver. The
        peer rewinds it to its first such record and pauses it, as the Java
        peer does with records over its budget.
        """
        first: dict[int, int] = {}
        for p, o in records:
            first.setdefault(p, o)
        for p, o in first.items():
            self.member.seek(p, o)
        if first:
            self.member.pause(first)


def _trace_to(path: Path) -> None:
    """kgroup's DEBUG log to ``path``, stamped like the events (CLOCK_MONOTONIC ns).

    For finding where a rebalance's time goes (``KGROUP_PEER_TRACE=<dir>``).
    A librdkafka member's own ``cgrp`` debug lines go to the same file (see
    ``_trace_librdkafka``).
    """
    handler = logging.FileHandler(path)
    handler.setFormatter(_MonotonicFormatter("%(created_ns)s %(threadName)s %(name)s %(message)s"))
    root = logging.getLogger("kgroup")
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)


def _trace_librdkafka(path: Path, config: dict[str, Any]) -> None:
    """librdkafka's ``cgrp`` debug log into ``path``, next to the peer's own lines.

    librdkafka writes its log to stderr stamped with the wall clock in
    milliseconds; the first line written here pairs that clock with
    CLOCK_MONOTONIC so a reader can put both on the events' time line.
    """
    config.setdefault("debug", "cgrp")
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, f"clock wall_ns={time.time_ns()} monotonic_ns={time.monotonic_ns()}\n".encode())
    os.dup2(fd, 2)
    os.close(fd)


class _MonotonicFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        record.created_ns = time.monotonic_ns()
        return super().format(record)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    kind, bootstrap, group, *extra = argv
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
    }
    for item in extra:
        key, _, value = item.partition("=")
        config[key] = value
    read_assignment = config.pop(READ_ASSIGNMENT, "false") == "true"
    trace = os.environ.get("KGROUP_PEER_TRACE")
    if trace:
        _trace_to(Path(trace) / f"{kind}-{os.getpid()}.log")
        if kind == "librdkafka":
            _trace_librdkafka(Path(trace) / f"{kind}-{os.getpid()}.log", config)
    try:
        _Peer(kind, config, read_assignment=read_assignment).run()
    except BaseException as exc:
        _emit(f"error {type(exc).__name__} {' '.join(str(exc).split()) or '-'}")
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(3)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
