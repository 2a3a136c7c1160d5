"""A kgroup Consumer in a process of its own, driven over stdin / stdout.

Run as ``python member_process.py SPEC`` where SPEC is a JSON object::

    {"conf": {...kgroup config...}, "topics": ["t"], "trace_commits": false,
     "commit_each_batch": false}

The process subscribes, then polls in a loop (``consume(500, 0.1)``) and
reports on stdout, one JSON object per line, each with ``"t"`` (the sender's
``time.monotonic()``; CLOCK_MONOTONIC, comparable across processes on Linux):

- ``{"ev": "started", "pid": N}`` after subscribing (with ``"wait_to_subscribe"``:
  ``{"ev": "ready"}`` first, and the subscription waits for a ``subscribe`` command);
- ``{"ev": "epoch", "member_id": s, "epoch": n}`` whenever the member id or
  epoch it sees between polls (or in a listener call) changed;
- ``{"ev": "assigned" | "revoked" | "lost", "partitions": [[topic, p], ...],
  "epoch": n}`` from the rebalance listener (assigned also when empty);
- ``{"ev": "records", "records": [[topic, p, offset], ...]}`` per non-empty batch;
- ``{"ev": "committed", "offsets": [[topic, p, offset], ...]}`` after a
  ``commit`` command;
- with ``trace_commits``: ``{"ev": "commit_attempt", "sent": t, "epoch": n,
  "offsets": [...], "errors": {"topic:p": "ERROR_NAME"}, "failed": null | "ExcType"}``
  for every OffsetCommit request the consumer sent (test instrumentation of
  kgroup's private ``OffsetManager._commit_once``: the public API has no hook);
- with ``commit_each_batch``: ``{"ev": "commit_refused", "message": s}`` when the
  synchronous commit the loop makes after every non-empty batch raised
  :class:`kgroup.CommitFailedError` (documented as retriable: the loop goes on,
  as an application following the docs would);
- with ``commit_on_revoke``: the revoked callback commits the positions
  (``commit()``); a refusal is reported as ``commit_refused`` too;
- ``{"ev": "error", "type": "ExcName", "message": s}`` when poll / consume /
  commit raised; the process then exits with status 2 (without leaving);
- ``{"ev": "closed"}`` after ``close``; exit status 0;
- ``{"ev": "slow_start" | "slow_end", "kind": "assigned" | "revoked" | "lost"}``
  around a rebalance callback made slow by the ``slow_callback`` command;
- ``{"ev": "malformed", "message": s}`` each time one of kgroup's connections
  was closed because a response did not decode (a ``MalformedResponseError``
  the consumer recovered from: read from kgroup's connection log, the only
  place it is visible; the request is retried on a new connection).

With ``"keep_fetching": [[topic, p], ...]`` the member misbehaves on purpose
(a test-only switch of kgroup's private ``FetchState.stop``): it never stops
fetching those partitions, not even after they were revoked, so its telemetry
shows it fetching them while their next owner does (the fleet report must
flag that as double ownership).

Commands on stdin, one per line: ``commit`` (synchronous commit of the
positions), ``switch PROTOCOL`` (``switch_protocol(PROTOCOL)``), ``close``
(``close()`` then exit 0), ``exit`` (exit 0 at once, without leaving the group),
``slow_callback SECONDS`` (the next rebalance callback, whatever its kind, sleeps
that long before returning: a callback longer than ``max.poll.interval.ms``),
``hold_callback`` (the next rebalance callback returns only after a ``release``
command, or 300 s: a callback as long as the test needs, whatever the machine's
speed).
End of input is ``close``: the process never outlives its parent's pipe.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Collection, Mapping
from typing import Any

import kgroup
from kgroup import TopicPartition
from kgroup.errors import MalformedResponseError

_out_lock = threading.Lock()
_RELEASED = threading.Event()
"""Set by a ``release`` command: ends a callback held by ``hold_callback``."""


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"ev": event, "t": time.monotonic(), **fields})
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _tps(partitions: Collection[TopicPartition]) -> list[list[Any]]:
    return [[tp.topic, tp.partition] for tp in sorted(partitions)]


def _offsets(offsets: Mapping[TopicPartition, int]) -> list[list[Any]]:
    return [[tp.topic, tp.partition, o] for tp, o in sorted(offsets.items())]


class _Listener:
    def __init__(self, member: _Member) -> None:
        self._member = member

    def _report(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        self._member.report_epoch()
        emit(kind, partitions=_tps(partitions), epoch=self._member.consumer.member_epoch)
        slow, self._member.slow_next = self._member.slow_next, None
        if slow is not None:
            # The application's own slow work inside the callback (not a
            # synchronisation sleep): the consumer must cope with it.
            emit("slow_start", kind=kind)
            if slow == math.inf:
                _RELEASED.wait(300)  # held until the test's "release"
            else:
                time.sleep(slow)
            emit("slow_end", kind=kind)

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self._report("assigned", partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self._report("revoked", partitions)
        if self._member.commit_on_revoke:
            # What an application that saves its progress before giving
            # partitions up does (the issue 29 roll): a refused commit is
            # reported, not raised, as such an application logs it and goes on.
            try:
                self._member.consumer.commit()
            except kgroup.KgroupError as exc:
                emit("commit_refused", message=str(exc))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self._report("lost", partitions)


class _Member:
    def __init__(
        self, conf: dict[str, Any], topics: list[str], *, commit_on_revoke: bool = False
    ) -> None:
        self.commit_on_revoke = commit_on_revoke
        self.consumer = kgroup.Consumer(conf)
        self._seen: tuple[str, int] | None = None
        self.slow_next: float | None = None
        self.topics = topics

    def subscribe(self) -> None:
        self.consumer.subscribe(self.topics, _Listener(self))

    def report_epoch(self) -> None:
        now = (self.consumer.member_id, self.consumer.member_epoch)
        if now != self._seen:
            self._seen = now
            emit("epoch", member_id=now[0], epoch=now[1])


def _trace_commits() -> None:
    from kgroup.offsets import OffsetManager  # noqa: PLC0415 - instrumentation only

    original = OffsetManager._commit_once

    async def traced(
        self: OffsetManager,
        offsets: Mapping[TopicPartition, int],
        epoch: int,
        deadline: float,
        metadata: Mapping[TopicPartition, str] | None,
    ) -> dict[TopicPartition, Any]:
        sent = time.monotonic()
        fields: dict[str, Any] = {"sent": sent, "epoch": epoch, "offsets": _offsets(offsets)}
        try:
            errors = await original(self, offsets, epoch, deadline, metadata)
        except BaseException as exc:
            emit("commit_attempt", errors={}, failed=type(exc).__name__, **fields)
            raise
        emit(
            "commit_attempt",
            errors={f"{tp.topic}:{tp.partition}": e.name for tp, e in errors.items()},
            failed=None,
            **fields,
        )
        return errors

    OffsetManager._commit_once = traced  # type: ignore[method-assign]


class _MalformedSeen(logging.Handler):
    """Reports each connection kgroup closed on a response that did not decode."""

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if any(isinstance(a, MalformedResponseError) for a in args):
            emit("malformed", message=record.getMessage())


def _keep_fetching(keep: Collection[TopicPartition]) -> None:
    from kgroup.runtime.fetch_state import FetchOp, FetchState  # noqa: PLC0415 - test only

    original = FetchState.stop
    kept = frozenset(keep)

    def stop(self: FetchState, partitions: Collection[TopicPartition]) -> list[FetchOp]:
        return original(self, [tp for tp in partitions if tp not in kept])

    FetchState.stop = stop  # type: ignore[method-assign]


def _read_commands(commands: queue.Queue[str]) -> None:
    for line in sys.stdin:
        if line.strip() == "release":
            _RELEASED.set()  # read here: the main thread may be in the held callback
        elif line.strip():
            commands.put(line.strip())
    commands.put("close")


def main(spec: dict[str, Any]) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    logging.getLogger("kgroup.transport.connection").addHandler(_MalformedSeen())
    if spec.get("trace_commits"):
        _trace_commits()
    if spec.get("keep_fetching"):
        _keep_fetching([TopicPartition(t, p) for t, p in spec["keep_fetching"]])
    commands: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_commands, args=(commands,), daemon=True).start()
    member = _Member(
        dict(spec["conf"]),
        list(spec["topics"]),
        commit_on_revoke=bool(spec.get("commit_on_revoke")),
    )
    if spec.get("wait_to_subscribe"):
        # Joins the group on the test's word: several processes, started one by
        # one (Python's start-up is slow), then join within the same rebalance.
        # A committed-offset read first connects to the group's coordinator, so
        # the join goes out at once when told.
        member.consumer.committed([TopicPartition(spec["topics"][0], 0)], timeout=30)
        emit("ready")
        while (word := commands.get()) != "subscribe":
            if word == "close":
                member.consumer.close(20)
                return 0
    member.subscribe()
    consumer = member.consumer
    emit("started", pid=os.getpid())
    try:
        while True:
            try:
                command = commands.get_nowait()
            except queue.Empty:
                command = None
            if command == "close":
                consumer.close(20)
                member.report_epoch()
                emit("closed")
                return 0
            if command == "exit":
                return 0
            if command == "hold_callback":
                member.slow_next = math.inf
            if command is not None and command.startswith("slow_callback "):
                member.slow_next = float(command.split()[1])
            if command is not None and command.startswith("switch "):
                consumer.switch_protocol(command.split()[1])
            if command == "commit":
                emit("committed", offsets=_offsets(consumer.commit() or {}))
            batch = consumer.consume(500, 0.1)
            member.report_epoch()
            if batch:
                emit(
                    "records",
                    records=[[m.topic(), m.partition(), m.offset()] for m in batch],
                )
                if spec.get("commit_each_batch"):
                    try:
                        consumer.commit()
                    except kgroup.CommitFailedError as exc:
                        emit("commit_refused", message=str(exc))
    except Exception as exc:
        emit("error", type=type(exc).__name__, message=str(exc))
        return 2


if __name__ == "__main__":
    status = main(json.loads(sys.argv[1]))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: after "exit" or an error the consumer's threads
    # are still running, and leaving without closing it is the point.
    os._exit(status)
