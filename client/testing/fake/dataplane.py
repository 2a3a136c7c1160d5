"""An in-memory data plane: per-partition record lists instead of librdkafka.

:class:`RecordLog` holds the records of every partition (a test appends to
it, possibly from another thread); :class:`FakeDataPlane` is what the runtime
drives instead of :class:`kgroup.dataplane.librdkafka.DataPlane`: assign at
offsets (``None``: ``auto.offset.reset``), unassign, pause, resume, seek,
positions, and ``consume(n, timeout)``. Records are real
``confluent_kafka.Message`` objects, so application code sees the accessors
it sees in production (``topic()``, ``partition()``, ``offset()``,
``value()``, ``key()``, ``headers()``, ``timestamp()``, ``error()``).

``consume`` is synchronous like librdkafka's: it returns at once when records
are ready and otherwise waits on a :class:`threading.Condition` for at most
``timeout`` seconds. The async consumer calls it with a zero timeout on the
event loop and with a wait only in a worker thread, so the loop never blocks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import confluent_kafka

from kgroup.config import AutoOffsetReset
from kgroup.dataplane._in_hand import InHand
from kgroup.dataplane.librdkafka import DataPlane, DataPlaneError, Record
from kgroup.errors import KgroupError
from kgroup.types import TopicPartition

__all__ = ["DataPlaneCall", "FakeDataPlane", "RecordLog"]

_TIMESTAMP_CREATE_TIME = 1  # librdkafka's TIMESTAMP_CREATE_TIME


class RecordLog:
    """Records per partition, shared by every :class:`FakeDataPlane` that reads them.

    Thread-safe: appending wakes data planes waiting in ``consume``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)
        """Notified on every append (data planes wait on it)."""
        self._records: dict[TopicPartition, list[Record]] = {}

    def create(self, topic: str, partitions: int) -> None:
        """Make room for ``partitions`` partitions of ``topic`` (existing ones are kept)."""
        with self._lock:
            for p in range(partitions):
                self._records.setdefault(TopicPartition(topic, p), [])

    def append(
        self,
        topic: str,
        partition: int,
        value: bytes | None,
        *,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> int:
        """Append one record and return its offset.

        Raises:
            KgroupError: the partition was never created (use :meth:`create` first).
        """
        tp = TopicPartition(topic, partition)
        with self._lock:
            records = self._records.get(tp)
            if records is None:
                raise KgroupError(f"{tp} does not exist in the record log; create its topic first")
            offset = len(records)
            records.append(
                confluent_kafka.Message(
                    topic=topic,
                    partition=partition,
                    offset=offset,
                    key=key,
                    value=value,
                    headers=list(headers) if headers is not None else None,
                    timestamp=(_TIMESTAMP_CREATE_TIME, int(time.time() * 1000)),
                )
            )
            self.changed.notify_all()
        return offset

    def truncate(self, partition: TopicPartition, offset: int) -> None:
        """Drop the records of ``partition`` from ``offset`` on (an unclean leader election).

        Raises:
            KgroupError: ``offset`` is negative or beyond the end of the partition.
        """
        with self._lock:
            records = self._records.get(partition)
            if records is None or not 0 <= offset <= len(records):
                end = 0 if records is None else len(records)
                raise KgroupError(
                    f"cannot truncate {partition} at {offset}: its log holds offsets 0-{end - 1}"
                )
            del records[offset:]

    def end_offset(self, partition: TopicPartition) -> int:
        """The offset the next appended record of ``partition`` gets."""
        with self._lock:
            return len(self._records.get(partition, ()))

    def exists(self, partition: TopicPartition) -> bool:
        """Whether ``partition`` was created."""
        with self._lock:
            return partition in self._records

    def read(self, partition: TopicPartition, start: int, stop: int) -> list[Record]:
        """Copies of the records of ``partition`` at offsets ``start`` to ``stop - 1``."""
        with self._lock:
            return self._read(partition, start, max(0, stop - start))

    def _read(self, partition: TopicPartition, offset: int, limit: int) -> list[Record]:
        # Caller holds the lock. Copies: a consumer sets a deserialized key and
        # value on the records it hands out, which must not change the log.
        records = self._records.get(partition, [])
        return [_copy(record) for record in records[offset : offset + limit]]


def _copy(record: Record) -> Record:
    return confluent_kafka.Message(
        topic=record.topic(),
        partition=record.partition(),
        offset=record.offset(),
        key=record.key(),
        value=record.value(),
        headers=record.headers(),
        timestamp=record.timestamp(),
    )


@dataclass(frozen=True, slots=True)
class DataPlaneCall:
    """One call the runtime made on a :class:`FakeDataPlane` (for assertions)."""

    method: str
    partitions: frozenset[TopicPartition]


class FakeDataPlane(DataPlane):
    """The runtime's data plane, in memory, reading a :class:`RecordLog`.

    A subclass of the librdkafka :class:`~kgroup.dataplane.librdkafka.DataPlane`
    only so that it fits where the runtime expects one; it shares no state or
    code with it (it never creates a librdkafka consumer). ``calls`` records
    the assign / unassign / pause / resume / seek calls in order.
    """

    def __init__(
        self,
        log: RecordLog,
        *,
        auto_offset_reset: AutoOffsetReset | str = AutoOffsetReset.EARLIEST,
    ) -> None:
        # Deliberately not calling DataPlane.__init__: it opens a librdkafka consumer.
        self._log = log
        self._reset = AutoOffsetReset(auto_offset_reset)
        self._fetch: dict[TopicPartition, int] = {}  # next offset to hand out
        self._position: dict[TopicPartition, int] = {}  # after the last handed out / seek
        self._paused_set: set[TopicPartition] = set()
        self._rotation = 0
        self._in_hand = InHand()
        self._last_take = threading.local()
        self._withheld: set[TopicPartition] = set()
        self._closed = False
        self.calls: list[DataPlaneCall] = []
        """assign / unassign / pause / resume / seek calls, oldest first."""
        self.consumed: list[Record] = []
        """Every record handed out, in order."""
        self.leader_epoch: int | None = 0
        """The leader epoch of every record (the fake's partitions keep their first
        leader); None makes the data plane know no epochs."""
        self.start_epochs: dict[TopicPartition, int] = {}
        """The leader epoch each partition was last assigned with (KIP-320)."""
        self.settled: list[bool] = []
        """What the driver said through :meth:`group_settled`, oldest first."""

    def group_settled(self, settled: bool) -> None:
        """Recorded only: the fake's waits are not chunked."""
        self.settled.append(settled)

    def warm(self, partitions: Iterable[TopicPartition]) -> None:
        """Nothing to connect to: the fake's log is in memory."""

    def _note(self, method: str, partitions: Iterable[TopicPartition]) -> None:
        self.calls.append(DataPlaneCall(method, frozenset(partitions)))

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the fake data plane is closed")

    @property
    def assigned(self) -> frozenset[TopicPartition]:
        """Partitions currently fetching (or paused)."""
        with self._log.changed:
            return frozenset(self._fetch)

    @property
    def paused(self) -> frozenset[TopicPartition]:
        """Assigned partitions currently paused."""
        with self._log.changed:
            return frozenset(self._paused_set)

    def assign(
        self,
        offsets: Mapping[TopicPartition, int | None],
        leader_epochs: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Start fetching at the given offsets (None or negative: ``auto.offset.reset``).

        The fake's partitions never change leader, so ``leader_epochs`` needs no
        validation; the last one given per partition is kept in :attr:`start_epochs`.
        """
        self._check_open()
        self.start_epochs.update(leader_epochs or {})
        fresh = {tp: o for tp, o in offsets.items() if tp not in self._fetch}
        if not fresh:
            return
        starts: dict[TopicPartition, int] = {}
        for tp, offset in sorted(fresh.items()):
            if offset is not None and offset >= 0:
                starts[tp] = offset
            elif self._reset is AutoOffsetReset.ERROR:
                raise DataPlaneError(
                    f"{tp} has no committed offset and auto.offset.reset=error; "
                    "commit or seek an offset for it, or choose earliest/latest"
                )
            elif self._reset is AutoOffsetReset.LATEST:
                starts[tp] = self._log.end_offset(tp)
            else:
                starts[tp] = 0
        with self._log.changed:
            self._fetch.update(starts)
        self._note("assign", starts)

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching ``partitions``; their positions are forgotten."""
        gone = set(partitions) & set(self._fetch)
        if not gone:
            return
        with self._log.changed:
            for tp in gone:
                del self._fetch[tp]
                self._position.pop(tp, None)
            self._paused_set.difference_update(gone)
            self._in_hand.moved(gone)
            self._withheld.difference_update(gone)
        self._note("unassign", gone)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop handing out records of ``partitions`` until resumed."""
        chosen = set(partitions)
        with self._log.changed:
            self._paused_set.update(chosen & set(self._fetch))
        self._note("pause", chosen)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Resume partitions paused with :meth:`pause`."""
        chosen = set(partitions)
        with self._log.changed:
            self._paused_set.difference_update(chosen)
            self._log.changed.notify_all()
        self._note("resume", chosen)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Make the next record of ``partition`` the one at ``offset``."""
        with self._log.changed:
            if partition not in self._fetch:
                raise DataPlaneError(f"cannot seek {partition}: it is not assigned")
            self._fetch[partition] = offset
            self._position[partition] = offset
            self._in_hand.moved((partition,))
            self._log.changed.notify_all()
        self._note("seek", (partition,))

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The offset of the next record to hand out, for partitions something was handed from
        (a batch :meth:`consume` returned counts once :meth:`deliver` settled it)."""
        with self._log.changed:
            held = self._in_hand.starts() if self._in_hand else {}
            return {
                tp: min(self._position[tp], held.get(tp, self._position[tp]))
                for tp in partitions
                if tp in self._position
            }

    def withhold(self, partitions: Iterable[TopicPartition]) -> None:
        """Hand out no record of ``partitions`` until they are unassigned."""
        with self._log.changed:
            self._withheld |= set(partitions) & set(self._fetch)

    def hold(self, owner: object, records: list[Record]) -> None:
        """Count ``records`` as not handed out until ``owner`` holds others (or none)."""
        with self._log.changed:
            self._in_hand.hold(owner, records)

    def deliver(self, batch: list[Record], count: int) -> list[Record]:
        """Settle ``batch`` as the librdkafka data plane does: the first ``count`` records
        are returned, the rest go back (their partitions read from the first again)."""
        self._last_take.key = None
        with self._log.changed:
            records, back = self._in_hand.settle(batch, count)
            self._read_again(back)
        return records

    def abandon_take(self) -> None:
        """Put back this thread's last batch if it is still in hand (see the librdkafka one)."""
        key = getattr(self._last_take, "key", None)
        self._last_take.key = None
        if key is not None:
            with self._log.changed:
                self._read_again(self._in_hand.abandon(key))

    def _read_again(self, offsets: Mapping[TopicPartition, int]) -> None:
        # Caller holds the log's lock.
        for tp, offset in offsets.items():
            if tp in self._fetch:
                self._fetch[tp] = offset
                self._position[tp] = offset
        if offsets:
            self._log.changed.notify_all()

    def leader_epochs(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Leader epochs of positions: :attr:`leader_epoch` for every partition with a position
        at that offset (the fake's partitions keep one leader; None: no epochs, as a peer
        without KIP-320)."""
        if self.leader_epoch is None:
            return {}
        with self._log.changed:
            return {
                tp: self.leader_epoch for tp, o in offsets.items() if self._position.get(tp) == o
            }

    def cached_log_ends(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The end of each assigned partition's log (the fake fetches at once)."""
        with self._log.changed:
            assigned = [tp for tp in partitions if tp in self._fetch]
        return {tp: self._log.end_offset(tp) for tp in assigned}

    def consume(self, max_records: int, timeout: float) -> list[Record]:
        """Up to ``max_records`` records, waiting at most ``timeout`` seconds for the first."""
        self._check_open()
        deadline = time.monotonic() + max(0.0, timeout)
        with self._log.changed:
            while True:
                batch = self._take(max_records)
                remaining = deadline - time.monotonic()
                if batch or remaining <= 0:
                    break
                self._log.changed.wait(remaining)
            self._in_hand.add(batch)
            if batch:
                self._last_take.key = id(batch)
        self.consumed.extend(batch)
        return batch

    def _take(self, max_records: int) -> list[Record]:
        # Caller holds the log's lock. Partitions take turns, so one busy
        # partition cannot starve the others.
        ready = sorted(
            tp for tp in self._fetch if tp not in self._paused_set and tp not in self._withheld
        )
        if not ready:
            return []
        self._rotation = (self._rotation + 1) % len(ready)
        order = ready[self._rotation :] + ready[: self._rotation]
        batch: list[Record] = []
        for tp in order:
            want = max_records - len(batch)
            if want <= 0:
                break
            records = self._log._read(tp, self._fetch[tp], want)
            if records:
                batch.extend(records)
                self._fetch[tp] += len(records)
                self._position[tp] = self._fetch[tp]
        return batch

    def close(self) -> None:
        """Stop; later ``consume`` calls raise. Idempotent."""
        self._closed = True
