"""kgroup.dataplane.share.records: ShareFetch record bytes decoded, every codec.

Batches are built here by hand (kio's varint writers for the records, the
batch header packed as Kafka's v2 format lays it out, the records section
compressed with cramjam), so each codec's framing is what a broker returns.
"""

from __future__ import annotations

import io
import pickle
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial.writers import write_signed_varint, write_signed_varlong

from kgroup.dataplane.share.records import (
    Compression,
    ShareRecord,
    TimestampType,
    decode_records,
)
from kgroup.errors import CorruptRecordError, KgroupError, MalformedResponseError

TOPIC = "orders"
PARTITION = 3


@dataclass(frozen=True)
class Rec:
    offset_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_delta: int = 0


def _bytes(out: io.BytesIO, value: bytes | None) -> None:
    if value is None:
        write_signed_varint(out, -1)
    else:
        write_signed_varint(out, len(value))
        out.write(value)


def _record(rec: Rec) -> bytes:
    body = io.BytesIO()
    body.write(b"\x00")  # attributes
    write_signed_varlong(body, rec.timestamp_delta)
    write_signed_varint(body, rec.offset_delta)
    _bytes(body, rec.key)
    _bytes(body, rec.value)
    write_signed_varint(body, len(rec.headers))
    for name, value in rec.headers:
        _bytes(body, name.encode())
        _bytes(body, value)
    out = io.BytesIO()
    write_signed_varint(out, len(body.getvalue()))
    out.write(body.getvalue())
    return out.getvalue()


def _xerial(raw: bytes) -> bytes:
    # Kafka's Java producer: xerial's header, then length-prefixed raw snappy
    # blocks (two here, to read more than one).
    half = len(raw) // 2
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for part in (raw[:half], raw[half:]):
        block = bytes(cramjam.snappy.compress_raw(part))
        out += struct.pack(">i", len(block)) + block
    return out


def _streamed(compressor: cramjam.zstd.Compressor | cramjam.lz4.Compressor, raw: bytes) -> bytes:
    # Streaming compressors (as the Java producer's zstd-jni and lz4 streams
    # write) leave the content size out of the frame header.
    compressor.compress(raw)
    return bytes(compressor.finish())


CODECS: dict[str, tuple[Compression, Callable[[bytes], bytes]]] = {
    "none": (Compression.NONE, lambda raw: raw),
    "gzip": (Compression.GZIP, lambda raw: bytes(cramjam.gzip.compress(raw))),
    "snappy-raw": (Compression.SNAPPY, lambda raw: bytes(cramjam.snappy.compress_raw(raw))),
    "snappy-xerial": (Compression.SNAPPY, _xerial),
    "lz4-frame": (Compression.LZ4, lambda raw: bytes(cramjam.lz4.compress(raw))),
    "lz4-streamed": (Compression.LZ4, lambda raw: _streamed(cramjam.lz4.Compressor(), raw)),
    "zstd": (Compression.ZSTD, lambda raw: bytes(cramjam.zstd.compress(raw))),
    "zstd-streamed": (Compression.ZSTD, lambda raw: _streamed(cramjam.zstd.Compressor(), raw)),
}


def batch(
    base_offset: int,
    records: Sequence[Rec],
    *,
    codec: str = "none",
    base_timestamp: int = 1_700_000_000_123,
    leader_epoch: int = 7,
    log_append_time: int | None = None,
    control: bool = False,
    last_offset_delta: int | None = None,
) -> bytes:
    """One v2 record batch as a broker stores it."""
    compression, compress = CODECS[codec]
    payload = compress(b"".join(_record(r) for r in records))
    attributes = int(compression)
    if log_append_time is not None:
        attributes |= 0x08
    if control:
        attributes |= 0x20
    if last_offset_delta is None:
        last_offset_delta = max((r.offset_delta for r in records), default=0)
    max_timestamp = (
        log_append_time
        if log_append_time is not None
        else base_timestamp + max((r.timestamp_delta for r in records), default=0)
    )
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            -1,
            -1,
            -1,
            len(records),
        )
        + payload
    )
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, the rest
    return (
        struct.pack(">qiibI", base_offset, length, leader_epoch, 2, crc32c(after_crc)) + after_crc
    )


THREE = [
    Rec(0, b"k0", b"v0", (("trace", b"abc"), ("empty", None))),
    Rec(1, None, b"v1", timestamp_delta=5),
    Rec(2, b"k2", None, timestamp_delta=9),
]


@pytest.mark.parametrize("codec", list(CODECS))
def test_each_codec_decodes_every_field(codec: str) -> None:
    decoded = decode_records(TOPIC, PARTITION, batch(40, THREE, codec=codec))

    assert decoded.error is None
    assert [r.offset() for r in decoded.records] == [40, 41, 42]
    first, second, third = decoded.records
    assert (first.topic(), first.partition()) == (TOPIC, PARTITION)
    assert first.key() == b"k0"
    assert first.value() == b"v0"
    assert first.headers() == [("trace", b"abc"), ("empty", None)]
    assert second.headers() is None
    assert second.key() is None
    assert third.value() is None
    assert third.len() == 0
    assert first.len() == 2
    # Milliseconds kept (kio's own reader rounds to seconds).
    assert first.timestamp() == (TimestampType.CREATE_TIME, 1_700_000_000_123)
    assert second.timestamp() == (1, 1_700_000_000_128)
    assert first.leader_epoch() == 7
    assert first.error() is None  # type: ignore[func-returns-value]
    assert first.latency() is None  # type: ignore[func-returns-value]


def test_several_batches_decode_in_order_and_each_keeps_its_codec() -> None:
    data = (
        batch(0, [Rec(0, None, b"a"), Rec(1, None, b"b")], codec="gzip")
        + batch(2, [Rec(0, None, b"c")], codec="zstd")
        + batch(3, [Rec(0, None, b"d")], codec="snappy-xerial")
    )
    decoded = decode_records(TOPIC, PARTITION, data)
    assert decoded.error is None
    assert [(r.offset(), r.value()) for r in decoded.records] == [
        (0, b"a"),
        (1, b"b"),
        (2, b"c"),
        (3, b"d"),
    ]


def test_log_append_time_gives_every_record_the_batch_timestamp() -> None:
    decoded = decode_records(TOPIC, PARTITION, batch(0, THREE, log_append_time=1_800_000_000_001))
    assert {r.timestamp() for r in decoded.records} == {
        (TimestampType.LOG_APPEND_TIME, 1_800_000_000_001)
    }


def test_unknown_leader_epoch_reads_as_none() -> None:
    decoded = decode_records(TOPIC, PARTITION, batch(0, THREE, leader_epoch=-1))
    assert decoded.records[0].leader_epoch() is None


def test_a_control_batch_yields_its_offsets_and_no_records() -> None:
    data = (
        batch(0, [Rec(0, None, b"a")])
        + batch(1, [Rec(0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], control=True)
        + batch(2, [Rec(0, None, b"b")])
    )
    decoded = decode_records(TOPIC, PARTITION, data)
    assert [r.offset() for r in decoded.records] == [0, 2]
    assert decoded.control_offsets == frozenset({1})
    assert decoded.error is None


def test_records_start_with_no_delivery_count_and_report_their_size() -> None:
    record = decode_records(TOPIC, PARTITION, batch(0, THREE)).records[0]
    assert record.delivery_count() == 0  # the acquired ranges set it (inflight)
    assert record.size_in_bytes() == len(b"k0v0traceabcempty")


def test_empty_bytes_decode_to_nothing() -> None:
    decoded = decode_records(TOPIC, PARTITION, b"")
    assert decoded.records == ()
    assert decoded.error is None


def _corrupt(good: bytes, bad: bytes) -> CorruptRecordError:
    decoded = decode_records(TOPIC, PARTITION, good + bad)
    assert [r.offset() for r in decoded.records] == [0, 1, 2]  # what came before is kept
    assert decoded.error is not None
    return decoded.error


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


def test_a_corrupt_batch_is_a_typed_error_naming_topic_partition_offset() -> None:
    bad = _flip(batch(3, THREE), -2)  # a byte of the last record's body
    error = _corrupt(batch(0, THREE), bad)
    assert (error.topic, error.partition, error.offset) == (TOPIC, PARTITION, 3)
    assert "checksum" in error.reason
    assert isinstance(error, MalformedResponseError)
    assert isinstance(error, KgroupError)
    assert "orders[3] at offset 3" in str(error)


@pytest.mark.parametrize("cut", [5, 30, 70, -1])
def test_a_truncated_batch_is_a_typed_error(cut: int) -> None:
    bad = batch(3, THREE, codec="lz4-frame")[:cut]
    error = _corrupt(batch(0, THREE), bad)
    assert error.partition == PARTITION
    assert "cut short" in error.reason
    # The offset is the failing batch's when its first bytes survived.
    assert error.offset == (2 + 1 if cut < 12 else 3)


@pytest.mark.parametrize("codec", ["gzip", "snappy-raw", "snappy-xerial", "lz4-frame", "zstd"])
def test_a_payload_that_does_not_decompress_is_a_typed_error(codec: str) -> None:
    compression, _ = CODECS[codec]
    garbage = [Rec(0, None, b"x")]
    good = batch(3, garbage, codec="none")
    # Same header, codec bits set, payload left uncompressed: the codec fails.
    after_crc = struct.pack(">h", int(compression)) + good[23:]
    bad = good[:17] + struct.pack(">I", crc32c(after_crc)) + after_crc
    error = _corrupt(batch(0, THREE), bad)
    assert error.offset == 3
    assert "decompress" in error.reason or "decode" in error.reason


def test_an_unknown_codec_is_a_typed_error() -> None:
    good = batch(3, [Rec(0, None, b"x")])
    after_crc = struct.pack(">h", 6) + good[23:]
    bad = good[:17] + struct.pack(">I", crc32c(after_crc)) + after_crc
    assert "codec 6" in _corrupt(batch(0, THREE), bad).reason


def test_a_wrong_magic_is_a_typed_error() -> None:
    good = batch(3, [Rec(0, None, b"x")])
    bad = good[:16] + b"\x01" + good[17:]
    assert "magic 1" in _corrupt(batch(0, THREE), bad).reason


def test_a_record_count_that_overstates_the_records_is_a_typed_error() -> None:
    good = batch(3, [Rec(0, None, b"x")])
    after_crc = good[21:57] + struct.pack(">i", 2) + good[61:]
    bad = good[:17] + struct.pack(">I", crc32c(after_crc)) + after_crc
    assert "decode" in _corrupt(batch(0, THREE), bad).reason


def test_the_error_pickles_with_its_fields() -> None:
    error = CorruptRecordError(topic="t", partition=1, offset=2, reason="r")
    again = pickle.loads(pickle.dumps(error))
    assert (again.topic, again.partition, again.offset, again.reason) == ("t", 1, 2, "r")
    assert str(again) == str(error)


_BYTES = st.none() | st.binary(max_size=40)
_RECORDS = st.lists(
    st.tuples(
        _BYTES,
        _BYTES,
        st.lists(st.tuples(st.text(max_size=8), _BYTES), max_size=3),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(records=_RECORDS, codec=st.sampled_from(list(CODECS)), base=st.integers(0, 2**40))
def test_whatever_is_written_reads_back(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: str,
    base: int,
) -> None:
    recs = [
        Rec(i, key, value, tuple(headers), delta)
        for i, (key, value, headers, delta) in enumerate(records)
    ]
    decoded = decode_records(TOPIC, 0, batch(base, recs, codec=codec))
    assert decoded.error is None
    assert decoded.records == tuple(
        ShareRecord(
            _topic=TOPIC,
            _partition=0,
            _offset=base + r.offset_delta,
            _key=r.key,
            _value=r.value,
            _headers=r.headers,
            _timestamp_type=TimestampType.CREATE_TIME,
            _timestamp=1_700_000_000_123 + r.timestamp_delta,
            _leader_epoch=7,
            _delivery_count=0,
        )
        for r in recs
    )


_FIRST = batch(0, THREE, codec="gzip")
_GOOD = _FIRST + batch(3, THREE, codec="zstd")


@settings(max_examples=300, deadline=None)
@given(
    cut=st.integers(0, len(_GOOD)),
    flips=st.lists(st.tuples(st.integers(0, len(_GOOD) - 1), st.integers(1, 255)), max_size=3),
)
def test_damaged_bytes_never_raise_and_never_invent_records(
    cut: int, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(_GOOD)
    for at, mask in flips:
        data[at] ^= mask
    decoded = decode_records(TOPIC, PARTITION, bytes(data[:cut]))
    good = decode_records(TOPIC, PARTITION, _GOOD).records
    # Whatever decodes is a prefix of what the undamaged bytes hold, whole
    # batches only; anything else is reported, not raised. (A flip inside the
    # first 21 bytes of a batch - offset, length, epoch, magic - is outside
    # the CRC, so only the offsets may differ there.)
    assert len(decoded.records) in {0, 3, 6}
    starts = (0, len(_FIRST))
    if not any(start <= at < start + 21 for at, _ in flips for start in starts):
        assert decoded.records == good[: len(decoded.records)]
    if decoded.error is None:
        # Clean ends only at batch boundaries.
        assert cut in {0, len(_FIRST), len(_GOOD)}
