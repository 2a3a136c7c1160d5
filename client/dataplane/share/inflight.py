"""Acquired records: matched to the decoded records, handed out, acknowledged, bounded.

A ShareFetch response gives, per partition, the record batches and the ranges
of offsets this member *acquired* (first offset, last offset, delivery count).
Batches are whole log batches, so they may hold records another member
acquired: only acquired records are handed to the application, each with its
range's delivery count (:func:`match_acquired`). An acquired offset with no
record (compacted away, a transaction marker) is acknowledged as a gap at once,
without the application seeing it. When the bytes stop decoding
(:class:`~kgroup.errors.CorruptRecordError`), the acquired offsets from the bad
batch on are rejected, as the Java client rejects a batch that fails its
checksum: redelivering bytes that do not decode would only fail again.

:class:`InFlight` is one consumer's working set: records fetched and not yet
handed out, records handed out and not yet acknowledged, and the
acknowledgements owed (a :class:`~.acknowledgements.PendingAcknowledgements`).
What happens to the records the previous poll handed out when the next poll
(or a commit) runs is the acknowledgement mode's rule (Java's
``share.acknowledgement.mode``):

- ``implicit`` (the default): each of them not acknowledged otherwise is
  accepted; :meth:`InFlight.acknowledge` is refused (Java's "Implicit
  acknowledgement of delivery is being used").
- ``explicit``: each must have been acknowledged (accept, release or reject;
  renewing the lock does not count) before the next poll, else that poll
  raises :class:`~kgroup.errors.UnacknowledgedRecordsError` and hands out
  nothing (Java's ``IllegalStateException``: "All records must be acknowledged
  in explicit acknowledgement mode."); a commit sends only what was
  acknowledged.

On close only what was acknowledged is sent, as Java does: records still held
are acquired by this member's session, and the broker releases them when the
session closes (or their locks expire).

Acquisition locks: a response's records are locked to this member until its
``acquisition_lock_timeout`` runs out (30 s by default), counted from when the
response arrived, on whatever clock the caller uses (it passes times in). The
broker releases a record whose lock expired; its acknowledgement then fails
with ``INVALID_RECORD_STATE``. :meth:`InFlight.expiring` lists the records
handed out whose locks end soon, for an application (explicit mode) to RENEW
(KIP-1222); a renewal's answer carries the new timeout
(:meth:`InFlight.extend_locks`). Records are handed out whether or not their
lock has run out, as the Java client does: the broker, not the client, knows
whether another member has them.

Memory is bounded in bytes (:meth:`ShareRecord.size_in_bytes`): records held,
fetched or handed out and unacknowledged, count against ``max_bytes`` and the
fetch path asks :meth:`InFlight.has_room` before fetching more.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from kgroup.dataplane.share.acknowledgements import AcknowledgeType, PendingAcknowledgements
from kgroup.dataplane.share.records import DecodedRecords, ShareRecord
from kgroup.errors import (
    CorruptRecordError,
    InvalidAcknowledgementError,
    UnacknowledgedRecordsError,
)
from kgroup.types import TopicIdPartition

__all__ = [
    "AcknowledgementMode",
    "AcquiredBatch",
    "AcquiredRange",
    "InFlight",
    "delivery_counts",
    "match_acquired",
]


class AcknowledgementMode(enum.Enum):
    """``share.acknowledgement.mode``."""

    IMPLICIT = "implicit"
    EXPLICIT = "explicit"


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """Offsets ``first_offset..last_offset`` (inclusive) acquired with ``delivery_count``."""

    first_offset: int
    last_offset: int
    delivery_count: int

    def __post_init__(self) -> None:
        if self.last_offset < self.first_offset or self.delivery_count < 1:
            raise ValueError(f"not an acquired range: {self}")


@dataclass(frozen=True, slots=True)
class AcquiredBatch:
    """One partition's share of a ShareFetch response, matched.

    Attributes:
        partition: the partition.
        node: the leader it was fetched from (where its acknowledgements go).
        records: the acquired records, in offset order, with delivery counts.
        automatic: acknowledgements owed without the application: GAP for
            acquired offsets holding no record, REJECT for those of bytes that
            did not decode.
        error: why decoding stopped early, or ``None``.
        lock_deadline: when the records' acquisition locks end, on the caller's
            clock (the response's arrival plus its acquisition lock timeout);
            ``inf`` when not known.
    """

    partition: TopicIdPartition
    node: int
    records: tuple[ShareRecord, ...]
    automatic: Mapping[int, AcknowledgeType]
    error: CorruptRecordError | None
    lock_deadline: float = float("inf")


def delivery_counts(acquired: Sequence[AcquiredRange]) -> dict[int, int]:
    """Each acquired offset's delivery count (for :func:`~.records.decode_records`)."""
    counts: dict[int, int] = {}
    for r in acquired:
        for offset in range(r.first_offset, r.last_offset + 1):
            counts[offset] = r.delivery_count
    return counts


def match_acquired(
    partition: TopicIdPartition,
    node: int,
    decoded: DecodedRecords,
    acquired: Sequence[AcquiredRange],
    *,
    lock_deadline: float = float("inf"),
) -> AcquiredBatch:
    """Keep the decoded records this member acquired, with their delivery counts.

    ``lock_deadline``: when their acquisition locks end, on the caller's clock.
    """
    counts = delivery_counts(acquired)
    records = tuple(
        # Decoded with decode_records(delivery_counts=...), a record has its count
        # already: a copy per record cost more than decoding it.
        record
        if record.delivery_count() == counts[record.offset()]
        else dataclasses.replace(record, _delivery_count=counts[record.offset()])
        for record in decoded.records
        if record.offset() in counts
    )
    held = {record.offset() for record in records}
    reject_from = _reject_from(decoded)
    automatic = {
        offset: AcknowledgeType.REJECT if offset >= reject_from else AcknowledgeType.GAP
        for offset in counts
        if offset not in held
    }
    return AcquiredBatch(
        partition, node, records, MappingProxyType(automatic), decoded.error, lock_deadline
    )


def _reject_from(decoded: DecodedRecords) -> float:
    if decoded.error is None:
        return float("inf")
    claimed = decoded.error.offset
    good = [r.offset() for r in decoded.records] + list(decoded.control_offsets)
    if not good:
        # Nothing decoded: trust the failing batch's base offset if it read one.
        return claimed if claimed >= 0 else float("-inf")
    # The bad bytes may have garbled the base offset they claim: never below
    # the end of what decoded.
    return max(claimed, max(good) + 1)


_Key = tuple[str, int, int]


def _key(record: ShareRecord) -> _Key:
    return (record.topic(), record.partition(), record.offset())


@dataclass(slots=True)
class _Held:
    node: int
    partition: TopicIdPartition
    record: ShareRecord
    lock_deadline: float


class InFlight:
    """One share consumer's fetched, handed-out and owed records (see the module)."""

    def __init__(
        self,
        mode: AcknowledgementMode,
        max_bytes: int,
        pending: PendingAcknowledgements | None = None,
    ) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.mode = mode
        self.max_bytes = max_bytes
        self.pending = pending if pending is not None else PendingAcknowledgements()
        """The acknowledgements owed, which the fetch path sends."""
        self._buffered: deque[_Held] = deque()
        self._delivered: dict[_Key, _Held] = {}
        self._bytes = 0
        self._errors: list[CorruptRecordError] = []

    @property
    def held_bytes(self) -> int:
        """Bytes of the records fetched or handed out and not yet acknowledged."""
        return self._bytes

    @property
    def buffered(self) -> int:
        """Records fetched, not yet handed out."""
        return len(self._buffered)

    @property
    def delivered(self) -> int:
        """Records handed out, not yet acknowledged (RENEW keeps a record here)."""
        return len(self._delivered)

    def has_room(self) -> bool:
        """Whether the fetch path may fetch more: fewer than ``max_bytes`` held. A fetch
        may go past the bound once (a batch is not split), never start past it."""
        return self._bytes < self.max_bytes

    def add(self, batch: AcquiredBatch) -> None:
        """Take a matched partition response: its records wait to be handed out, its
        automatic acknowledgements are owed at once, its decode error is kept for
        :meth:`take_errors`."""
        for offset, kind in batch.automatic.items():
            self.pending.add(batch.node, batch.partition, offset, kind)
        for record in batch.records:
            self._buffered.append(_Held(batch.node, batch.partition, record, batch.lock_deadline))
            self._bytes += record.size_in_bytes()
        if batch.error is not None:
            self._errors.append(batch.error)

    def take_errors(self) -> tuple[CorruptRecordError, ...]:
        """The decode errors met since last asked (their records were rejected)."""
        errors, self._errors = tuple(self._errors), []
        return errors

    def poll(self, max_records: int) -> tuple[ShareRecord, ...]:
        """Settle the previous poll's records (the mode's rule), then hand out up to
        ``max_records`` fetched records, oldest first.

        Raises:
            UnacknowledgedRecordsError: explicit mode, and a record the previous
                poll handed out is unacknowledged (nothing is handed out).
        """
        if max_records < 1:
            raise ValueError(f"max_records must be at least 1, got {max_records}")
        self._settle()
        out: list[ShareRecord] = []
        while self._buffered and len(out) < max_records:
            held = self._buffered.popleft()
            self._delivered[_key(held.record)] = held
            out.append(held.record)
        return tuple(out)

    def acknowledge(self, record: ShareRecord, kind: AcknowledgeType) -> None:
        """Acknowledge a record the last poll handed out (explicit mode).

        ACCEPT, RELEASE and REJECT settle it; RENEW extends its lock and leaves
        it waiting for one of those.

        Raises:
            InvalidAcknowledgementError: implicit mode, GAP (not an application's
                choice), or the record is not waiting for an acknowledgement.
        """
        if self.mode is AcknowledgementMode.IMPLICIT:
            raise InvalidAcknowledgementError(
                "acknowledge() needs share.acknowledgement.mode=explicit: implicit "
                "acknowledgement accepts each poll's records at the next poll or commit"
            )
        if kind is AcknowledgeType.GAP:
            raise InvalidAcknowledgementError("GAP is not an acknowledgement of a record")
        held = self._delivered.get(_key(record))
        if held is None:
            raise InvalidAcknowledgementError(
                f"{record.topic()}[{record.partition()}] offset {record.offset()} is not "
                "waiting for an acknowledgement (not handed out by this consumer's last "
                "poll, or already acknowledged)"
            )
        self.pending.add(held.node, held.partition, record.offset(), kind)
        if kind is not AcknowledgeType.RENEW:
            del self._delivered[_key(record)]
            self._bytes -= record.size_in_bytes()

    def expiring(self, now: float, within: float) -> tuple[ShareRecord, ...]:
        """The records handed out and unacknowledged whose acquisition locks end by
        ``now + within`` (times on the caller's clock), oldest deadline first."""
        soon = [h for h in self._delivered.values() if h.lock_deadline <= now + within]
        soon.sort(key=lambda h: (h.lock_deadline, _key(h.record)))
        return tuple(h.record for h in soon)

    def extend_locks(
        self, partition: TopicIdPartition, offsets: Iterable[int], lock_deadline: float
    ) -> None:
        """A renewal of ``offsets`` of ``partition`` succeeded: their locks now end at
        ``lock_deadline``. Offsets no longer held are ignored (acknowledged since)."""
        wanted = set(offsets)
        for held in self._delivered.values():
            if held.partition == partition and held.record.offset() in wanted:
                held.lock_deadline = lock_deadline

    def prepare_commit(self) -> None:
        """Before a commit: in implicit mode the records handed out are accepted (Java's
        ``commitSync`` does so); in explicit mode only what was acknowledged is sent."""
        if self.mode is AcknowledgementMode.IMPLICIT:
            self._accept_delivered()

    def close(self) -> None:
        """Drop every record held; what was acknowledged stays owed (for the closing
        ShareAcknowledge). The broker releases the rest when the session closes."""
        self._buffered.clear()
        self._delivered.clear()
        self._bytes = 0

    def _settle(self) -> None:
        if self.mode is AcknowledgementMode.IMPLICIT:
            self._accept_delivered()
        elif self._delivered:
            raise UnacknowledgedRecordsError(
                f"all records must be acknowledged in explicit acknowledgement mode: "
                f"{len(self._delivered)} handed out by the last poll are not"
            )

    def _accept_delivered(self) -> None:
        for held in self._delivered.values():
            self.pending.add(
                held.node, held.partition, held.record.offset(), AcknowledgeType.ACCEPT
            )
            self._bytes -= held.record.size_in_bytes()
        self._delivered.clear()
