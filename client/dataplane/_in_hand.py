"""Records taken from the fetcher that have not reached the application yet.

The fetcher's position of a partition moves past a batch the moment the
consumer's front end takes it, but the front end may still put the batch back
(a deserializer fails, the session lapsed during the wait, the caller was
cancelled or interrupted) or drop part of it. Meanwhile the event loop's thread
reads positions for commits at any moment: a revocation's commit, or the stop
of partitions that are revoked or lost. A position read then must not count
the batch, or the commit passes records that the application never got and
that the put-back cannot return any more (the partition may have moved to
another member by then).

So a data plane keeps every taken batch here until the front end settles it
(:meth:`InHand.settle`): its positions are never past a batch still in hand. A
partition that stops fetching or is seeked while a batch is in hand is marked
moved in that batch: its records there are neither handed out (the stop's
commit does not cover them, so they are another owner's to read again) nor put
back (the fetcher no longer reads that partition from there).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import confluent_kafka

from kgroup.types import TopicPartition

__all__ = ["InHand", "first_offsets"]


def first_offsets(records: Iterable[confluent_kafka.Message]) -> dict[TopicPartition, int]:
    """The lowest offset of each partition among ``records`` (error events skipped)."""
    first: dict[TopicPartition, int] = {}
    for record in records:
        topic, partition, offset = record.topic(), record.partition(), record.offset()
        if topic is None or partition is None or offset is None or offset < 0:
            continue
        tp = TopicPartition(topic, partition)
        known = first.get(tp)
        if known is None or offset < known:
            first[tp] = offset
    return first


class _Taken:
    """One batch in hand and the partitions that moved since it was taken."""

    __slots__ = ("batch", "moved", "starts")

    def __init__(self, batch: list[confluent_kafka.Message]) -> None:
        self.batch = batch
        self.moved: set[TopicPartition] | None = None  # made on the first move (rare)
        # Computed on the first position read that finds the batch in hand (rare:
        # the usual batch is settled long before the loop reads a position).
        self.starts: dict[TopicPartition, int] | None = None


class InHand:
    """The batches a data plane handed to its front end and the front end has not settled.

    Thread-safe: the application's thread (or a worker) takes and settles, the
    event loop's thread reads positions and stops or seeks partitions. Keyed by
    the batch list's identity: ``settle`` takes the very list ``add`` was given.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken: dict[int, _Taken] = {}

    def add(self, batch: list[confluent_kafka.Message]) -> None:
        """``batch`` was just taken from the fetcher (call before anyone can read a position)."""
        if batch:
            with self._lock:
                self._taken[id(batch)] = _Taken(batch)

    def hold(self, owner: object, records: list[confluent_kafka.Message]) -> None:
        """``records`` are what ``owner`` holds now, settled but not given to the
        application yet (the aiokafka facade's records of partitions not asked
        for): counted as in hand until ``owner`` holds other records (or none)."""
        with self._lock:
            if records:
                self._taken[id(owner)] = _Taken(records)
            else:
                self._taken.pop(id(owner), None)

    def swap(
        self, batch: list[confluent_kafka.Message], records: list[confluent_kafka.Message]
    ) -> None:
        """``records`` (``batch`` without its error events) is what the front end will settle."""
        with self._lock:
            taken = self._taken.pop(id(batch), None)
            if taken is not None and records:
                taken.batch = records
                self._taken[id(records)] = taken

    def __bool__(self) -> bool:
        return bool(self._taken)

    def starts(self) -> dict[TopicPartition, int]:
        """Per partition, the first offset among the batches in hand (moved ones left out)."""
        result: dict[TopicPartition, int] = {}
        with self._lock:
            for taken in self._taken.values():
                if taken.starts is None:
                    taken.starts = first_offsets(taken.batch)
                moved = taken.moved or ()
                for tp, offset in taken.starts.items():
                    if tp in moved:
                        continue
                    known = result.get(tp)
                    if known is None or offset < known:
                        result[tp] = offset
        return result

    def moved(self, partitions: Iterable[TopicPartition]) -> None:
        """``partitions`` stopped fetching or were seeked: their records in hand are stale."""
        with self._lock:
            if not self._taken:
                return
            chosen = set(partitions)
            for taken in self._taken.values():
                taken.moved = chosen | (taken.moved or set())

    def settle(
        self, batch: list[confluent_kafka.Message], count: int
    ) -> tuple[list[confluent_kafka.Message], dict[TopicPartition, int]]:
        """The front end is done with ``batch``: its first ``count`` records go to the
        application, the rest back to the fetcher.

        Returns the records to hand out (without those of moved partitions) and,
        per partition not moved, the offset the fetcher must read again from
        (the first record not handed out). A batch not in hand (taken by a data
        plane before it was added, or settled already) is settled as given.
        """
        with self._lock:
            taken = self._taken.pop(id(batch), None)
        moved = taken.moved if taken is not None else None
        if count >= len(batch) and not moved:
            return batch, {}  # the usual case: all of it, as taken (no copy)
        head = batch[:count]
        if moved:
            head = [r for r in head if _partition_of(r) not in moved]
        back = first_offsets(batch[count:])
        if moved:
            back = {tp: o for tp, o in back.items() if tp not in moved}
        return head, back

    def abandon(self, key: int) -> dict[TopicPartition, int]:
        """The batch whose ``id`` is ``key`` never reached its front end (an exception
        right after the take): if it is still in hand it leaves, and all of it
        goes back. Returns the offset each partition reads again from (moved
        ones left out); nothing if the batch is not in hand."""
        with self._lock:
            taken = self._taken.pop(key, None)
        if taken is None:
            return {}
        back = first_offsets(taken.batch)
        if taken.moved:
            back = {tp: o for tp, o in back.items() if tp not in taken.moved}
        return back

    def holds(self, key: int) -> bool:
        """Whether the batch whose ``id`` is ``key`` is in hand."""
        return key in self._taken


def _partition_of(record: confluent_kafka.Message) -> TopicPartition:
    return TopicPartition(record.topic() or "", record.partition() or 0)
