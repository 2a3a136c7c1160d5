"""The fake broker's share partitions and share sessions (KIP-932's data path).

Per (group, topic-partition) a share partition keeps a start offset and the
state of every record it has handed out: ``AVAILABLE`` (to be acquired),
``ACQUIRED`` (locked to one member until it acknowledges or the acquisition
lock times out), ``ACKNOWLEDGED`` (accepted) or ``ARCHIVED`` (rejected, a gap,
or delivered too often), with a delivery count that grows with every
acquisition. Records past the last one touched are available with count 0.
The start offset is set the first time the group touches the partition, by
the group's ``share.auto.offset.reset`` (``latest`` unless set), and moves on
past records that are acknowledged or archived.

As in Apache Kafka 4.x's ``SharePartition``:

- a record released by its member (RELEASE) or whose lock times out becomes
  available again, unless its delivery count reached the limit
  (``share.delivery.count.limit``, 5 by default): then it is archived;
- a record still acquired when its member's share session closes (epoch -1,
  the member leaving or expiring, its connection closing) is released without
  counting that delivery;
- acknowledging a record this member has not acquired (or no longer holds) is
  ``INVALID_RECORD_STATE``, and nothing of that partition's acknowledgements
  is applied.

Share sessions are kept per node, group and member, with the epoch rules of
``SharePartitionManager.newContext``: epoch 0 opens (replacing an open one),
then each request must carry the session's epoch, and -1 closes.

No I/O and no kio (record batches are encoded here as bytes); the lock
timeouts run on :class:`~kgroup.testing.fake._timers.Timers`, driven by the
broker's sweep. The broker's lock guards everything.
"""

from __future__ import annotations

import datetime
import enum
import io
import re
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from crc32c import crc32c
from kio.schema.errors import ErrorCode
from kio.serial.writers import write_signed_varint, write_signed_varlong

from kgroup.dataplane.librdkafka import Record
from kgroup.errors import KgroupError
from kgroup.testing.fake._timers import Timers
from kgroup.testing.fake._topics import Topics
from kgroup.testing.fake.dataplane import RecordLog
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = [
    "AUTO_OFFSET_RESET",
    "DELIVERY_COUNT_LIMIT",
    "LOCK_DURATION",
    "AckBatch",
    "RecordState",
    "ShareData",
    "ShareGroupConfig",
    "SharePartitionView",
    "ShareRecordState",
    "ShareSessionView",
    "encode_batch",
]

AUTO_OFFSET_RESET = "share.auto.offset.reset"
LOCK_DURATION = "share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
GROUP_CONFIG_KEYS = frozenset(
    {
        AUTO_OFFSET_RESET,
        LOCK_DURATION,
        DELIVERY_COUNT_LIMIT,
        "share.isolation.level",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
    }
)
"""The group configs the fake accepts; it acts on the first three."""

_GAP, _ACCEPT, _RELEASE, _REJECT, _RENEW = 0, 1, 2, 3, 4
_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)


class RecordState(enum.Enum):
    """Where one record of a share partition stands."""

    AVAILABLE = "available"
    ACQUIRED = "acquired"
    ACKNOWLEDGED = "acknowledged"
    ARCHIVED = "archived"


@dataclass(frozen=True, slots=True)
class ShareRecordState:
    """One record's state, delivery count and (while acquired) the member holding it."""

    state: RecordState
    delivery_count: int
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class SharePartitionView:
    """A share partition at the moment it was read.

    ``records`` holds every offset the group has touched (acquired at least
    once); offsets from :attr:`start_offset` on that are not in it are
    available and never delivered.
    """

    group_id: str
    partition: TopicPartition
    start_offset: int
    records: Mapping[int, ShareRecordState]

    def state(self, offset: int) -> ShareRecordState:
        """The state of ``offset`` (an untouched one: available, count 0)."""
        return self.records.get(offset, ShareRecordState(RecordState.AVAILABLE, 0))


@dataclass(frozen=True, slots=True)
class ShareSessionView:
    """One share session as a node keeps it."""

    node_id: int
    group_id: str
    member_id: str
    epoch: int
    """The epoch the next request must carry."""
    partitions: frozenset[TopicIdPartition]
    connection_id: int


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    """What a share group's configs come to: where it starts, the lock, the limit."""

    auto_offset_reset: str = "latest"
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5


@dataclass(frozen=True, slots=True)
class AckBatch:
    """Offsets ``first..last`` acknowledged with one type, or one type per offset."""

    first: int
    last: int
    types: tuple[int, ...]


@dataclass(eq=False, slots=True)
class _Entry:
    state: RecordState
    count: int
    member: str | None = None
    acquisition: int = 0
    """Which acquisition holds it: a lock timer of an earlier one finds it moved on."""


@dataclass(eq=False, slots=True)
class _Partition:
    start: int
    entries: dict[int, _Entry] = field(default_factory=dict)

    def advance(self) -> None:
        while (entry := self.entries.get(self.start)) is not None and entry.state in (
            RecordState.ACKNOWLEDGED,
            RecordState.ARCHIVED,
        ):
            self.start += 1


@dataclass(eq=False, slots=True)
class _Session:
    node_id: int
    group_id: str
    member_id: str
    epoch: int
    partitions: set[TopicIdPartition]
    connection_id: int

    def view(self) -> ShareSessionView:
        return ShareSessionView(
            self.node_id,
            self.group_id,
            self.member_id,
            self.epoch,
            frozenset(self.partitions),
            self.connection_id,
        )


SessionKey = tuple[int, str, str]


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareData:
    """Every share partition and share session of a fake cluster."""

    def __init__(
        self,
        *,
        topics: Topics,
        records: RecordLog,
        record_lock_duration_ms: int,
        delivery_count_limit: int,
        now: float,
    ) -> None:
        self._topics = topics
        self.records = records
        self.defaults = ShareGroupConfig(
            record_lock_duration_ms=record_lock_duration_ms,
            delivery_count_limit=delivery_count_limit,
        )
        self.configs: dict[str, dict[str, str]] = {}
        """Each group's configs as set (IncrementalAlterConfigs or the test), by key."""
        self._overrides: dict[str, ShareGroupConfig] = {}
        self._partitions: dict[tuple[str, TopicPartition], _Partition] = {}
        self.sessions: dict[SessionKey, _Session] = {}
        self._timers = Timers(now)
        self._acquisitions = 0
        self._releases = 0

    # ---------------------------------------------------------------- configs

    def config(self, group_id: str) -> ShareGroupConfig:
        """What ``group_id``'s configs come to."""
        base = self._overrides.get(group_id, self.defaults)
        raw = self.configs.get(group_id, {})
        return ShareGroupConfig(
            auto_offset_reset=raw.get(AUTO_OFFSET_RESET, base.auto_offset_reset),
            record_lock_duration_ms=int(raw.get(LOCK_DURATION, base.record_lock_duration_ms)),
            delivery_count_limit=int(raw.get(DELIVERY_COUNT_LIMIT, base.delivery_count_limit)),
        )

    def override(self, group_id: str, config: ShareGroupConfig) -> None:
        """Make ``config`` ``group_id``'s, whatever was set before (the test's direct API)."""
        self.configs.pop(group_id, None)
        self._overrides[group_id] = config

    # ------------------------------------------------------------- partitions

    def _partition(self, group_id: str, tp: TopicPartition, now: float) -> _Partition:
        key = (group_id, tp)
        found = self._partitions.get(key)
        if found is None:
            found = self._partitions[key] = _Partition(self._initial_offset(group_id, tp))
        return found

    def _initial_offset(self, group_id: str, tp: TopicPartition) -> int:
        reset = self.config(group_id).auto_offset_reset
        end = self.records.end_offset(tp)
        if reset == "earliest":
            return 0
        if reset.startswith("by_duration:"):
            since = time.time() - _seconds(reset.removeprefix("by_duration:"))
            for record in self.records.read(tp, 0, end):
                if record.timestamp()[1] >= since * 1000:
                    return int(record.offset() or 0)
        return end

    def view(self, group_id: str, tp: TopicPartition) -> SharePartitionView | None:
        """``tp``'s share partition in ``group_id``, None if the group never touched it."""
        found = self._partitions.get((group_id, tp))
        if found is None:
            return None
        return SharePartitionView(
            group_id,
            tp,
            found.start,
            {
                o: ShareRecordState(e.state, e.count, e.member)
                for o, e in sorted(found.entries.items())
            },
        )

    def _available(self, part: _Partition, tp: TopicPartition) -> Iterable[int]:
        """The offsets of ``tp`` that may be acquired, in order (no record is copied)."""
        for offset in range(part.start, self.records.end_offset(tp)):
            entry = part.entries.get(offset)
            if entry is None or entry.state is RecordState.AVAILABLE:
                yield offset

    def _record(self, tp: TopicPartition, offset: int) -> Record:
        (record,) = self.records.read(tp, offset, offset + 1)
        return record

    def available_bytes(
        self, group_id: str, partitions: Iterable[TopicPartition], now: float, enough: int
    ) -> int:
        """How many bytes ``partitions`` hold for acquiring (what min_bytes weighs),
        counted until ``enough``."""
        total = 0
        for tp in partitions:
            part = self._partition(group_id, tp, now)
            for offset in self._available(part, tp):
                total += _size(self._record(tp, offset))
                if total >= enough:
                    return total
        return total

    def acquire(
        self,
        group_id: str,
        member_id: str,
        partitions: Sequence[tuple[TopicIdPartition, TopicPartition]],
        *,
        max_records: int,
        max_bytes: int,
        now: float,
    ) -> dict[TopicIdPartition, list[tuple[int, int]]]:
        """Acquire available records of ``partitions`` (in that order) for ``member_id``:
        at most ``max_records`` in all and, past the first, about ``max_bytes``.
        Returns (offset, delivery count) per partition that gave any."""
        lock_ms = self.config(group_id).record_lock_duration_ms
        out: dict[TopicIdPartition, list[tuple[int, int]]] = {}
        taken = size = 0
        for tip, tp in partitions:
            part = self._partition(group_id, tp, now)
            for offset in self._available(part, tp):
                if taken >= max_records or (taken and size >= max_bytes):
                    return out
                entry = part.entries.setdefault(offset, _Entry(RecordState.AVAILABLE, 0))
                self._acquisitions += 1
                entry.state = RecordState.ACQUIRED
                entry.count += 1
                entry.member = member_id
                entry.acquisition = self._acquisitions
                self._timers.schedule(
                    now + lock_ms / 1000,
                    self._lock_expired,
                    (group_id, tp, offset, entry.acquisition),
                )
                out.setdefault(tip, []).append((offset, entry.count))
                taken += 1
                size += _size(self._record(tp, offset))
        return out

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        tp: TopicPartition,
        batches: Sequence[AckBatch],
        *,
        renew_allowed: bool,
        now: float,
    ) -> tuple[ErrorCode, str | None]:
        """Apply ``member_id``'s acknowledgements of ``tp``, all or none."""
        part = self._partition(group_id, tp, now)
        wanted: dict[int, int] = {}
        for batch in batches:
            if batch.first > batch.last or batch.first < 0:
                return ErrorCode.invalid_request, f"bad acknowledgement range {batch}"
            count = batch.last - batch.first + 1
            if len(batch.types) not in (1, count):
                return (
                    ErrorCode.invalid_request,
                    f"{len(batch.types)} acknowledge types for {count} offsets",
                )
            for i, offset in enumerate(range(batch.first, batch.last + 1)):
                kind = batch.types[0] if len(batch.types) == 1 else batch.types[i]
                if kind not in (_GAP, _ACCEPT, _RELEASE, _REJECT, _RENEW):
                    return ErrorCode.invalid_request, f"unknown acknowledge type {kind}"
                if kind == _RENEW and not renew_allowed:
                    return ErrorCode.invalid_request, "RENEW needs is_renew_ack (v2)"
                wanted[offset] = kind
        for offset in wanted:
            entry = part.entries.get(offset)
            if (
                entry is None
                or entry.state is not RecordState.ACQUIRED
                or entry.member != member_id
            ):
                return (
                    ErrorCode.invalid_record_state,
                    f"offset {offset} of {tp} is not acquired by member {member_id}",
                )
        limit = self.config(group_id).delivery_count_limit
        lock_ms = self.config(group_id).record_lock_duration_ms
        for offset, kind in wanted.items():
            entry = part.entries[offset]
            if kind == _RENEW:
                self._acquisitions += 1
                entry.acquisition = self._acquisitions
                self._timers.schedule(
                    now + lock_ms / 1000,
                    self._lock_expired,
                    (group_id, tp, offset, entry.acquisition),
                )
                continue
            entry.member = None
            if kind == _ACCEPT:
                entry.state = RecordState.ACKNOWLEDGED
            elif kind == _RELEASE:
                entry.state = (
                    RecordState.ARCHIVED if entry.count >= limit else RecordState.AVAILABLE
                )
            else:
                entry.state = RecordState.ARCHIVED
        part.advance()
        return ErrorCode.none, None

    def _lock_expired(self, arg: tuple[str, TopicPartition, int, int]) -> None:
        group_id, tp, offset, acquisition = arg
        part = self._partitions.get((group_id, tp))
        entry = None if part is None else part.entries.get(offset)
        if entry is None or entry.acquisition != acquisition:
            return
        if entry.state is RecordState.ACQUIRED:
            self._release(group_id, part, entry, counted=True)  # type: ignore[arg-type]

    def _release(self, group_id: str, part: _Partition, entry: _Entry, *, counted: bool) -> None:
        self._releases += 1
        entry.member = None
        entry.acquisition = 0
        if not counted:
            # Acquired but, as far as the broker knows, never delivered: the
            # delivery does not count (Kafka's DeliveryCountOps.DECREASE).
            entry.count = max(0, entry.count - 1)
            entry.state = RecordState.AVAILABLE
        elif entry.count >= self.config(group_id).delivery_count_limit:
            entry.state = RecordState.ARCHIVED
        else:
            entry.state = RecordState.AVAILABLE
        part.advance()

    def release_member(
        self, group_id: str, member_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> int:
        """Release what ``member_id`` holds (of ``partitions`` only, if given) as a closing
        session does; how many records."""
        chosen = None if partitions is None else set(partitions)
        released = 0
        for (group, tp), part in self._partitions.items():
            if group != group_id or (chosen is not None and tp not in chosen):
                continue
            for entry in part.entries.values():
                if entry.state is RecordState.ACQUIRED and entry.member == member_id:
                    self._release(group_id, part, entry, counted=False)
                    released += 1
        return released

    def expire_locks(self, group_id: str | None, now: float) -> int:
        """Time out every acquisition lock (of ``group_id`` only, if given) now; how many."""
        expired = 0
        for (group, _tp), part in self._partitions.items():
            if group_id is not None and group != group_id:
                continue
            for entry in part.entries.values():
                if entry.state is RecordState.ACQUIRED:
                    self._release(group, part, entry, counted=True)
                    expired += 1
        self._timers.advance(now)
        return expired

    def run_timers(self, now: float) -> bool:
        """Run the lock timeouts due by ``now``; whether any record was released."""
        before = self._releases
        self._timers.run_due(now)
        return self._releases != before

    def forget_topic(self, name: str) -> None:
        """Drop every share partition of topic ``name`` (deleted)."""
        for key in [k for k in self._partitions if k[1].topic == name]:
            del self._partitions[key]

    # --------------------------------------------------------------- sessions

    def fetch_session(
        self,
        key: SessionKey,
        epoch: int,
        *,
        named: Sequence[TopicIdPartition],
        forgotten: Sequence[TopicIdPartition],
        has_acks: bool,
        fetches: bool,
        connection_id: int,
    ) -> tuple[ErrorCode, str | None, _Session | None]:
        """The session a ShareFetch at ``epoch`` uses, updated; or its error."""
        session = self.sessions.get(key)
        if epoch == -1:
            if fetches:
                return ErrorCode.invalid_request, "a ShareFetch at epoch -1 fetches nothing", None
            if session is None:
                return ErrorCode.share_session_not_found, None, None
            return ErrorCode.none, None, session
        if epoch == 0:
            if has_acks:
                return (
                    ErrorCode.invalid_request,
                    "Acknowledge data present in Initial Fetch Request",
                    None,
                )
            session = self.sessions[key] = _Session(
                key[0], key[1], key[2], 1, set(named), connection_id
            )
            return ErrorCode.none, None, session
        if session is None:
            return ErrorCode.share_session_not_found, None, None
        if session.epoch != epoch:
            return (
                ErrorCode.invalid_share_session_epoch,
                f"expected epoch {session.epoch}, got {epoch}",
                None,
            )
        session.partitions |= set(named)
        session.partitions -= set(forgotten)
        session.epoch = _next_epoch(session.epoch)
        session.connection_id = connection_id
        return ErrorCode.none, None, session

    def acknowledge_session(
        self, key: SessionKey, epoch: int
    ) -> tuple[ErrorCode, str | None, _Session | None]:
        """The session a ShareAcknowledge at ``epoch`` uses, moved on; or its error."""
        if epoch == 0:
            return ErrorCode.invalid_share_session_epoch, "ShareAcknowledge cannot open", None
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.share_session_not_found, None, None
        if epoch == -1:
            return ErrorCode.none, None, session
        if session.epoch != epoch:
            return (
                ErrorCode.invalid_share_session_epoch,
                f"expected epoch {session.epoch}, got {epoch}",
                None,
            )
        session.epoch = _next_epoch(session.epoch)
        return ErrorCode.none, None, session

    def close_session(self, key: SessionKey) -> None:
        """Remove a session; what its member still holds of its partitions is released."""
        session = self.sessions.pop(key, None)
        if session is None:
            return
        named = [self._topics.name_of(p) for p in session.partitions]
        self.release_member(session.group_id, session.member_id, [n for n in named if n])

    def member_gone(self, group_id: str, member_id: str) -> None:
        """``member_id`` left ``group_id``: its sessions close, its records are released."""
        for key in [k for k in self.sessions if k[1] == group_id and k[2] == member_id]:
            self.close_session(key)
        self.release_member(group_id, member_id)

    def evict(self, group_id: str, member_id: str | None, *, release: bool) -> int:
        """Drop ``group_id``'s sessions (``member_id``'s only, if given) as a full session
        cache evicts them; ``release``: release what their members hold too. How many."""
        keys = [k for k in self.sessions if k[1] == group_id and member_id in (None, k[2])]
        for key in keys:
            if release:
                self.close_session(key)
            else:
                del self.sessions[key]
        return len(keys)

    def connection_closed(self, connection_id: int) -> None:
        """A client connection closed: the sessions last used on it close."""
        for key, session in list(self.sessions.items()):
            if session.connection_id == connection_id:
                self.close_session(key)


def _seconds(iso: str) -> float:
    match = _DURATION.fullmatch(iso)
    if match is None:
        raise KgroupError(f"not an ISO-8601 duration: {iso!r}")
    parts = {k: float(v) for k, v in match.groupdict().items() if v}
    return datetime.timedelta(
        days=parts.get("d", 0),
        hours=parts.get("h", 0),
        minutes=parts.get("m", 0),
        seconds=parts.get("s", 0),
    ).total_seconds()


def valid_reset(value: str) -> bool:
    """Whether ``value`` is a ``share.auto.offset.reset`` Kafka accepts."""
    if value in ("earliest", "latest"):
        return True
    return value.startswith("by_duration:") and bool(
        _DURATION.fullmatch(value.removeprefix("by_duration:"))
    )


def encode_batch(records: Sequence[Record], leader_epoch: int = 0) -> bytes:
    """One uncompressed record batch (magic 2) holding ``records`` (of consecutive
    offsets, from the record log), as a log stores it."""
    base_offset = int(records[0].offset() or 0)
    stamps = [int(r.timestamp()[1]) for r in records]
    base_ts = min(stamps)
    body = io.BytesIO()
    for i, record in enumerate(records):
        one = io.BytesIO()
        one.write(b"\x00")  # record attributes
        write_signed_varlong(one, stamps[i] - base_ts)
        write_signed_varint(one, i)
        _write_bytes(one, _as_bytes(record.key()))
        _write_bytes(one, _as_bytes(record.value()))
        headers = record.headers() or []
        write_signed_varint(one, len(headers))
        for header in headers:
            _write_bytes(one, str(header[0]).encode())
            _write_bytes(one, _as_bytes(header[1]))
        raw = one.getvalue()
        write_signed_varint(body, len(raw))
        body.write(raw)
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,  # attributes: no codec, create time, not transactional, not control
            len(records) - 1,
            base_ts,
            max(stamps),
            -1,  # producer id
            -1,  # producer epoch
            -1,  # base sequence
            len(records),
        )
        + body.getvalue()
    )
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, the rest
    return (
        struct.pack(">qiibI", base_offset, length, leader_epoch, 2, crc32c(after_crc)) + after_crc
    )


def _as_bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise KgroupError(f"the fake's record log holds a {type(value).__name__}, not bytes")


def _write_bytes(out: io.BytesIO, value: bytes | None) -> None:
    if value is None:
        write_signed_varint(out, -1)
        return
    write_signed_varint(out, len(value))
    out.write(value)


def _size(record: Record) -> int:
    return 1 + len(_as_bytes(record.key()) or b"") + len(_as_bytes(record.value()) or b"")


def runs(acquired: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(first, last, delivery count) runs of consecutive offsets with one count."""
    out: list[tuple[int, int, int]] = []
    for offset, count in acquired:
        if out and out[-1][1] == offset - 1 and out[-1][2] == count:
            out[-1] = (out[-1][0], offset, count)
        else:
            out.append((offset, offset, count))
    return out
