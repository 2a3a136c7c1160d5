"""Decode the record bytes of one ShareFetch partition into :class:`ShareRecord` values.

A ShareFetch response carries, per partition, the raw record batches (magic v2)
as the log stores them, possibly compressed with any codec Kafka supports:
gzip, snappy (raw, or Kafka's Java producer's xerial framing), lz4 (the LZ4
frame format) and zstd; all four are decompressed with ``cramjam``.

The fixed-size batch header is unpacked here and its CRC-32C checked; the
records are read with kio's byte readers (varints, nullable byte strings,
headers). kio's own ``read_batch``/``read_record`` are not used because they
know no compression and they round timestamps down to whole seconds, while a
record's timestamp is in milliseconds.

Control batches (transaction markers) hold no application records: their
offsets are reported, so the acquired-records bookkeeping can acknowledge them
as gaps. Bytes that do not decode (bad checksum, a batch cut short, a codec
failure, lengths that do not add up) end decoding at that batch with a
:class:`~kgroup.errors.CorruptRecordError` naming topic, partition and offset:
the records decoded before it are kept, and the caller decides what happens to
the rest (the Java client rejects a corrupt batch's records).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import cramjam
from crc32c import crc32c
from kio.records.readers import read_header
from kio.serial.errors import DecodeError
from kio.serial.readers import read_signed_varint, read_signed_varlong

from kgroup.errors import CorruptRecordError

__all__ = [
    "Compression",
    "DecodedRecords",
    "ShareRecord",
    "TimestampType",
    "decode_records",
]


class TimestampType(enum.IntEnum):
    """What a record's timestamp means, numbered as librdkafka numbers them (so
    :meth:`ShareRecord.timestamp` returns what ``kgroup.Consumer``'s records do)."""

    NOT_AVAILABLE = 0
    CREATE_TIME = 1
    LOG_APPEND_TIME = 2


class Compression(enum.IntEnum):
    """The codec in a batch's attributes (its low three bits)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareRecord:
    """One record a share consumer hands out.

    Read it with the methods ``kgroup.Consumer``'s records (librdkafka messages)
    offer, named as they are: :meth:`topic`, :meth:`partition`, :meth:`offset`,
    :meth:`key`, :meth:`value`, :meth:`headers`, :meth:`timestamp`,
    :meth:`leader_epoch`, :meth:`len`, :meth:`error`, :meth:`latency`; plus :meth:`delivery_count`,
    how many times the broker has delivered it (1 the first time). The fields
    are private because the methods take their names.
    """

    _topic: str
    _partition: int
    _offset: int
    _key: bytes | None
    _value: bytes | None
    _headers: tuple[tuple[str, bytes | None], ...]
    _timestamp_type: TimestampType
    _timestamp: int
    _leader_epoch: int | None
    _delivery_count: int

    def topic(self) -> str:
        """The topic's name."""
        return self._topic

    def partition(self) -> int:
        """The partition index."""
        return self._partition

    def offset(self) -> int:
        """The record's offset in its partition."""
        return self._offset

    def key(self) -> bytes | None:
        """The key, or ``None``."""
        return self._key

    def value(self) -> bytes | None:
        """The value, or ``None`` (a tombstone)."""
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        """The headers as ``(key, value)`` pairs in order, or ``None`` when there are
        none (as librdkafka's messages answer)."""
        return list(self._headers) if self._headers else None

    def timestamp(self) -> tuple[int, int]:
        """``(timestamp type, milliseconds since the epoch)``; the type is a
        :class:`TimestampType` value (librdkafka's numbering)."""
        return (int(self._timestamp_type), self._timestamp)

    def leader_epoch(self) -> int | None:
        """The partition leader epoch the record was written in, or ``None`` if unknown."""
        return self._leader_epoch

    def len(self) -> int:
        """The value's length in bytes (0 for ``None``), as librdkafka's ``len()``."""
        return 0 if self._value is None else len(self._value)

    def error(self) -> None:
        """Always ``None``: a share record is never an error event (errors are raised)."""
        return None

    def latency(self) -> None:
        """Always ``None``: librdkafka reports a latency for produced messages only."""
        return None

    def delivery_count(self) -> int:
        """How many times the broker has delivered this record, this delivery included."""
        return self._delivery_count

    def size_in_bytes(self) -> int:
        """What the record holds in memory, roughly: key, value and headers' bytes.

        The measure the in-flight bound counts (not Python's object overhead).
        """
        size = len(self._key or b"") + len(self._value or b"")
        for name, value in self._headers:
            size += len(name) + len(value or b"")
        return size


@dataclass(frozen=True, slots=True)
class DecodedRecords:
    """What one partition's record bytes decoded to.

    Attributes:
        records: the application records in offset order (delivery count 0: the
            acquired ranges give the counts, see :mod:`.inflight`).
        control_offsets: offsets of transaction markers, which are not records.
        error: why decoding stopped early, or ``None`` if every byte decoded.
    """

    records: tuple[ShareRecord, ...]
    control_offsets: frozenset[int]
    error: CorruptRecordError | None


# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordCount.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH_PREFIX = 12  # baseOffset and batchLength: what batchLength does not count
_CRC_FROM = 21  # the CRC covers attributes to the batch's end
_COMPRESSION_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_CONTROL = 0x20
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic, version, compatible version


class _BadBatchError(Exception):
    """Internal: a batch's bytes are bad; the caller adds topic, partition and offset."""


def decode_records(
    topic: str,
    partition: int,
    data: bytes | bytearray | memoryview,
    *,
    delivery_counts: Mapping[int, int] | None = None,
) -> DecodedRecords:
    """Decode every batch of a ShareFetch partition's ``records`` bytes.

    Never raises for bad bytes: the result's ``error`` says where and why
    decoding stopped, and ``records`` holds what came before.
    ``delivery_counts``: each acquired offset's delivery count (the response's
    acquired ranges), given to the records as they are built; 0 for others.
    """
    counts: Mapping[int, int] = delivery_counts or {}
    view = memoryview(data)
    records: list[ShareRecord] = []
    control: set[int] = set()
    position = 0
    # Where the next batch should start: what a batch too short to hold its own
    # base offset is reported at (-1 when no batch decoded before it).
    expected = -1
    while position < len(view):
        if len(view) - position < _LENGTH_PREFIX:
            return _stopped(
                topic, partition, expected, "a batch cut short", records=records, control=control
            )
        base_offset, batch_length = struct.unpack_from(">qi", view, position)
        end = position + _LENGTH_PREFIX + batch_length
        if batch_length < _HEADER.size - _LENGTH_PREFIX:
            return _stopped(
                topic,
                partition,
                base_offset,
                f"batch length {batch_length}",
                records=records,
                control=control,
            )
        if end > len(view):
            return _stopped(
                topic,
                partition,
                base_offset,
                f"a batch cut short ({len(view) - position} of {end - position} bytes)",
                records=records,
                control=control,
            )
        try:
            # A batch's records count only if the whole batch decodes.
            decoded, expected = _decode_batch(topic, partition, view[position:end], control, counts)
        except _BadBatchError as bad:
            return _stopped(
                topic, partition, base_offset, str(bad), records=records, control=control
            )
        records.extend(decoded)
        position = end
    return DecodedRecords(tuple(records), frozenset(control), None)


def _stopped(
    topic: str,
    partition: int,
    offset: int,
    reason: str,
    *,
    records: Sequence[ShareRecord],
    control: set[int],
) -> DecodedRecords:
    error = CorruptRecordError(topic=topic, partition=partition, offset=offset, reason=reason)
    return DecodedRecords(tuple(records), frozenset(control), error)


def _decode_batch(
    topic: str,
    partition: int,
    batch: memoryview,
    control: set[int],
    counts: Mapping[int, int],
) -> tuple[list[ShareRecord], int]:
    """The batch's records and the offset after its last (``lastOffsetDelta`` counts
    records compacted away too)."""
    (
        base_offset,
        _length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        _producer_id,
        _producer_epoch,
        _base_sequence,
        count,
    ) = _HEADER.unpack_from(batch, 0)
    if magic != 2:
        raise _BadBatchError(f"record batch magic {magic} (only magic 2 is read)")
    if crc32c(batch[_CRC_FROM:]) != crc:
        raise _BadBatchError("checksum mismatch")
    if attributes & _CONTROL:
        control.update(range(base_offset, base_offset + last_offset_delta + 1))
        return [], base_offset + last_offset_delta + 1
    if count < 0:
        raise _BadBatchError(f"record count {count}")
    body = _decompress(attributes & _COMPRESSION_MASK, batch[_HEADER.size :])
    if attributes & _LOG_APPEND_TIME:
        timestamp_type = TimestampType.LOG_APPEND_TIME
    else:
        timestamp_type = TimestampType.CREATE_TIME
    epoch = None if leader_epoch < 0 else leader_epoch
    position = 0
    records: list[ShareRecord] = []
    try:
        for _ in range(count):
            length, size = read_signed_varint(body, position)
            start = position + size
            position = start + 1  # attributes: unused by magic 2 records
            timestamp_delta, size = read_signed_varlong(body, position)
            position += size
            offset_delta, size = read_signed_varint(body, position)
            position += size
            key, position = _nullable_bytes(body, position)
            value, position = _nullable_bytes(body, position)
            header_count, size = read_signed_varint(body, position)
            position += size
            headers: list[tuple[str, bytes | None]] = []
            for _ in range(header_count):
                header, size = read_header(body, position)
                position += size
                if header.key is None:
                    raise _BadBatchError("a header without a key")
                headers.append((header.key.decode(), header.value))
            if position != start + length or position > len(body):
                raise _BadBatchError("a record's length does not match its fields")
            record_offset = base_offset + offset_delta
            records.append(
                ShareRecord(
                    _topic=topic,
                    _partition=partition,
                    _offset=record_offset,
                    _key=key,
                    _value=value,
                    _headers=tuple(headers),
                    _timestamp_type=timestamp_type,
                    _timestamp=(
                        max_timestamp
                        if timestamp_type is TimestampType.LOG_APPEND_TIME
                        else base_timestamp + timestamp_delta
                    ),
                    _leader_epoch=epoch,
                    _delivery_count=counts.get(record_offset, 0),
                )
            )
    except _BadBatchError:
        raise
    except (DecodeError, ValueError, IndexError, UnicodeDecodeError) as bad:
        # kio's readers raise BufferUnderflow (a DecodeError) past the end.
        raise _BadBatchError(f"records do not decode ({bad})") from None
    if position != len(body):
        raise _BadBatchError(f"{len(body) - position} bytes left after {count} records")
    return records, base_offset + last_offset_delta + 1


def _nullable_bytes(body: bytes, position: int) -> tuple[bytes | None, int]:
    length, size = read_signed_varint(body, position)
    position += size
    if length < 0:
        if length != -1:
            raise _BadBatchError(f"byte string length {length}")
        return None, position
    end = position + length
    if end > len(body):
        raise _BadBatchError("a byte string runs past the batch")
    return bytes(body[position:end]), end


def _decompress(codec: int, payload: memoryview) -> bytes:
    try:
        compression = Compression(codec)
    except ValueError:
        raise _BadBatchError(f"unknown compression codec {codec}") from None
    try:
        if compression is Compression.NONE:
            return bytes(payload)
        if compression is Compression.GZIP:
            return bytes(cramjam.gzip.decompress(payload))
        if compression is Compression.SNAPPY:
            return _snappy(payload)
        if compression is Compression.LZ4:
            return bytes(cramjam.lz4.decompress(payload))
        return bytes(cramjam.zstd.decompress(payload))
    except _BadBatchError:
        raise
    except Exception as bad:  # cramjam raises its own DecompressionError and others
        raise _BadBatchError(
            f"{compression.name.lower()} payload does not decompress ({bad})"
        ) from None


def _snappy(payload: memoryview) -> bytes:
    # The Java producer writes snappy in xerial's framing (a magic header, then
    # length-prefixed raw blocks); librdkafka and others write one raw block.
    if bytes(payload[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(payload))
    out = bytearray()
    position = _XERIAL_HEADER
    while position < len(payload):
        if len(payload) - position < 4:
            raise _BadBatchError("a xerial snappy block length cut short")
        (length,) = struct.unpack_from(">i", payload, position)
        position += 4
        if length < 0 or position + length > len(payload):
            raise _BadBatchError("a xerial snappy block runs past the batch")
        out += cramjam.snappy.decompress_raw(payload[position : position + length])
        position += length
    return bytes(out)
