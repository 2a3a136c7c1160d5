"""A structural check of Kafka bytes against a kio schema, before kio reads them.

kio's native reader trusts the lengths it reads: an array count of two billion
makes it reserve memory for two billion items before reading the first, and
when the allocation fails Rust aborts the whole process (no ``except`` can
catch that). Fourteen bytes from a broker, a proxy or a bit flip are enough.

:func:`check` walks the bytes the way kio's reader will — the same fields in the
same order, the same encodings — reading every length and checking it against
the bytes that remain, without allocating anything. Only bytes that pass are
handed to kio, so every length kio reads has already been found to fit. It is
also stricter than kio where kio would accept what Kafka forbids:

- a null array where the schema does not allow one (kio returns ``None`` and the
  caller later fails with ``TypeError``);
- an array count larger than the bytes left (Kafka's generated Java readers
  refuse the same), so even items of zero size cannot make the walk long;
- a tagged field whose value does not take exactly the size its header states.

A failure is a :class:`StructureError` carrying the path of the field
(``assignment.topic_partitions[3].partitions``) and what is wrong with it; the
framing layer turns it into :class:`~kgroup.errors.MalformedResponseError`.

There are two walks. :func:`check` is the fast one on every response: runs of
fixed-size fields are skipped in one step and strings are not decoded.
:func:`locate` is the thorough one, run only after something failed, to name the
field: it also checks UTF-8, booleans, error codes and timestamps, the values
kio refuses while reading.

The schema is read from kio's dataclass field metadata with kio's own
classification helpers (``kio.serial._introspect``), the ones kio's reader is
compiled from, so the two cannot disagree on a field's encoding; kio is pinned
below 0.7 and a unit test walks every response version kgroup negotiates.
"""

from __future__ import annotations

import codecs
import dataclasses
import struct
from typing import Any, Final

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.protocol import Entity

__all__ = [
    "StructureError",
    "UnknownTag",
    "check",
    "encode_uvarint",
    "locate",
    "strip_unknown_tags",
]


class StructureError(Exception):
    """Bytes that do not have the structure of the entity they should encode.

    Attributes:
        field: the path of the offending field (``topics[2].partitions``), or
            ``""`` for the entity as a whole.
        detail: what is wrong, in words.
        unknown_tag: for a tagged field the schema lacks (and nothing else wrong
            before it), where it is; :func:`strip_unknown_tags` removes such fields.
    """

    def __init__(self, field: str, detail: str, unknown_tag: UnknownTag | None = None) -> None:
        self.field = field
        self.detail = detail
        self.unknown_tag = unknown_tag
        super().__init__(f"field {field}: {detail}" if field else detail)


@dataclasses.dataclass(frozen=True, slots=True)
class UnknownTag:
    """Where a tagged field unknown to the schema sits in the bytes.

    Attributes:
        tag: its tag number.
        count_at, count_size, count: the entity's tagged-field count varint.
        start, stop: the field's bytes (tag, size and value).
    """

    tag: int
    count_at: int
    count_size: int
    count: int
    start: int
    stop: int


class _FaultError(Exception):
    """Raised inside the walk; each enclosing level adds its part of the path."""

    def __init__(self, detail: str, unknown_tag: UnknownTag | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.path: list[str] = []
        self.unknown_tag = unknown_tag

    def error(self) -> StructureError:
        parts: list[str] = []
        for part in reversed(self.path):
            if part.startswith("[") or not parts:
                parts.append(part)
            else:
                parts.append("." + part)
        return StructureError("".join(parts), self.detail, self.unknown_tag)


# Operation kinds. An operation is a tuple (kind, argument, nullable, field name).
_FIXED: Final = 0  # argument: size in bytes
_LEN16: Final = 1  # legacy string: int16 length; argument: check UTF-8
_LEN32: Final = 2  # legacy bytes: int32 length
_LENV: Final = 3  # compact string or bytes: uvarint length + 1; argument: check UTF-8
_ENTITY: Final = 4  # argument: _Schema
_ARR32: Final = 5  # legacy array: int32 count; argument: the element's operation
_ARRV: Final = 6  # compact array: uvarint count + 1; argument: the element's operation
_BOOL: Final = 7  # thorough walk only: 0 or 1
_ERROR_CODE: Final = 8  # thorough walk only: a code kio knows
_TIMESTAMP: Final = 9  # thorough walk only: int64 milliseconds, not negative (-1: null)

_Op = tuple[int, Any, bool, str]

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_KNOWN_ERROR_CODES: Final = frozenset(int(code) for code in ErrorCode)

_FIXED_SIZES: Final = {
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float64": 8,
    "uuid": 16,
    "bool": 1,
    "error_code": 2,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
}
_THOROUGH_KINDS: Final = {"bool": _BOOL, "error_code": _ERROR_CODE, "datetime_i64": _TIMESTAMP}


@dataclasses.dataclass(slots=True, eq=False)
class _Schema:
    """One entity class compiled for one walk (fast or thorough)."""

    name: str
    flexible: bool
    nullable: bool
    ops: tuple[_Op, ...] = ()
    tagged: dict[int, _Op] = dataclasses.field(default_factory=dict)
    min_size: int = 0


_schemas: dict[tuple[type[Entity], bool, bool, bool], _Schema] = {}


def _primitive(kafka_type: str, flexible: bool, nullable: bool, name: str, thorough: bool) -> _Op:
    if kafka_type in _FIXED_SIZES:
        if thorough and kafka_type in _THOROUGH_KINDS:
            return (_THOROUGH_KINDS[kafka_type], _FIXED_SIZES[kafka_type], nullable, name)
        return (_FIXED, _FIXED_SIZES[kafka_type], False, name)
    text = kafka_type == "string"
    if kafka_type not in ("string", "bytes", "records"):
        raise TypeError(f"kio type {kafka_type!r} of field {name} has no known encoding")
    if flexible:
        return (_LENV, text and thorough, nullable, name)
    if text:
        return (_LEN16, thorough, nullable, name)
    return (_LEN32, False, nullable, name)


def _field_op(
    field: dataclasses.Field[Any], flexible: bool, request_header: bool, thorough: bool
) -> _Op:
    tagged = get_field_tag(field) is not None
    name = field.name
    if request_header and name == "client_id":
        # Kafka writes the request header's client id as a legacy string, always.
        return (_LEN16, thorough, True, name)
    kind = classify_field(field)
    element: _Op
    if isinstance(kind, PrimitiveField):
        # kio reads tagged primitives as non-nullable: absence is the tag's absence.
        nullable = is_optional(field) and not tagged
        return _primitive(get_schema_field_type(field), flexible, nullable, name, thorough)
    if isinstance(kind, EntityField):
        return (_ENTITY, _compile(kind.type_, is_optional(field), False, thorough), False, name)
    if isinstance(kind, PrimitiveTupleField):
        element = _primitive(get_schema_field_type(field), flexible, False, name, thorough)
    elif isinstance(kind, EntityTupleField):
        element = (_ENTITY, _compile(kind.type_, False, False, thorough), False, name)
    else:  # pragma: no cover - kio's classification has four cases
        raise TypeError(f"field {name} has an unknown kio classification {kind!r}")
    return (_ARRV if flexible else _ARR32, element, is_optional(field), name)


def _min_size(op: _Op) -> int:
    kind, arg, _, _ = op
    if kind == _ENTITY:
        schema: _Schema = arg
        return 1 if schema.nullable else schema.min_size
    if kind in (_FIXED, _BOOL, _ERROR_CODE, _TIMESTAMP):
        size: int = arg
        return size
    return {_LEN16: 2, _LEN32: 4, _LENV: 1, _ARR32: 4, _ARRV: 1}[kind]


def _merge_fixed(ops: list[_Op]) -> tuple[_Op, ...]:
    # Consecutive fixed-size fields are one step of the fast walk.
    merged: list[_Op] = []
    for op in ops:
        if op[0] == _FIXED and merged and merged[-1][0] == _FIXED:
            size, name = merged[-1][1], merged[-1][3]
            merged[-1] = (_FIXED, size + op[1], False, f"{name}, {op[3]}")
        else:
            merged.append(op)
    return tuple(merged)


def _compile(cls: type[Entity], nullable: bool, request_header: bool, thorough: bool) -> _Schema:
    key = (cls, nullable, request_header, thorough)
    schema = _schemas.get(key)
    if schema is not None:
        return schema
    flexible = bool(cls.__flexible__)
    schema = _Schema(name=cls.__name__, flexible=flexible, nullable=nullable)
    ops: list[_Op] = []
    for field in dataclasses.fields(cls):
        op = _field_op(field, flexible, request_header, thorough)
        tag = get_field_tag(field)
        if tag is None:
            ops.append(op)
        else:
            schema.tagged[int(tag)] = op
    schema.min_size = sum(_min_size(op) for op in ops) + (1 if flexible else 0)
    schema.ops = tuple(ops) if thorough else _merge_fixed(ops)
    _schemas[key] = schema
    return schema


# --- the walk -----------------------------------------------------------------------


def _short(need: int, pos: int, end: int) -> _FaultError:
    return _FaultError(f"needs {need} bytes, {max(0, end - pos)} left")


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos >= end:
        raise _short(1, pos, end)
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        if shift == 35:
            # kio (like Kafka) reads at most five bytes of an unsigned varint.
            raise _FaultError("unsigned varint longer than 5 bytes")
        if pos >= end:
            raise _FaultError("truncated unsigned varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def _text(buf: bytes, start: int, stop: int) -> None:
    try:
        codecs.utf_8_decode(memoryview(buf)[start:stop], "strict", True)
    except UnicodeDecodeError as exc:
        raise _FaultError(f"string is not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _value(op: _Op, buf: bytes, pos: int, end: int) -> int:
    kind = op[0]
    if kind == _FIXED:
        size: int = op[1]
        if pos + size > end:
            raise _short(size, pos, end)
        return pos + size
    if kind == _ENTITY:
        return _entity(op[1], buf, pos, end)
    if kind == _LENV:
        length, pos = _uvarint(buf, pos, end)
        if length == 0:
            if not op[2]:
                raise _FaultError("null where the schema requires a value")
            return pos
        stop = pos + length - 1
        if stop > end:
            raise _FaultError(f"length {length - 1} exceeds the {end - pos} bytes left")
        if op[1]:
            _text(buf, pos, stop)
        return stop
    if kind in (_ARRV, _ARR32):
        if kind == _ARRV:
            count, pos = _uvarint(buf, pos, end)
            count -= 1
        else:
            if pos + 4 > end:
                raise _short(4, pos, end)
            count = int(_I32.unpack_from(buf, pos)[0])
            pos += 4
            if count < -1:
                raise _FaultError(f"negative array length {count}")
        if count == -1:
            if not op[2]:
                raise _FaultError("null array where the schema requires one")
            return pos
        element: _Op = op[1]
        if element[0] == _FIXED:
            item_size: int = element[1]
            if pos + count * item_size > end:
                raise _FaultError(
                    f"array of {count} x {item_size} bytes exceeds the {end - pos} bytes left"
                )
            return pos + count * item_size
        if count * max(_min_size(element), 1) > end - pos:
            raise _FaultError(f"array length {count} exceeds the {end - pos} bytes left")
        index = 0
        try:
            if element[0] == _ENTITY:
                schema: _Schema = element[1]
                for index in range(count):  # noqa: B007 - the index names the failing item
                    pos = _entity(schema, buf, pos, end)
            else:
                for index in range(count):  # noqa: B007
                    pos = _value(element, buf, pos, end)
        except _FaultError as fault:
            fault.path.append(f"[{index}]")
            raise
        return pos
    if kind in (_LEN16, _LEN32):
        width = 2 if kind == _LEN16 else 4
        if pos + width > end:
            raise _short(width, pos, end)
        length = int((_I16 if kind == _LEN16 else _I32).unpack_from(buf, pos)[0])
        pos += width
        if length == -1:
            if not op[2]:
                raise _FaultError("null where the schema requires a value")
            return pos
        if length < 0:
            raise _FaultError(f"negative length {length}")
        stop = pos + length
        if stop > end:
            raise _FaultError(f"length {length} exceeds the {end - pos} bytes left")
        if op[1]:
            _text(buf, pos, stop)
        return stop
    return _checked_value(op, buf, pos, end)


def _checked_value(op: _Op, buf: bytes, pos: int, end: int) -> int:
    """The values only the thorough walk looks at."""
    kind, size_arg, nullable, _ = op
    size: int = size_arg
    if pos + size > end:
        raise _short(size, pos, end)
    if kind == _BOOL:
        if buf[pos] > 1:
            raise _FaultError(f"boolean byte {buf[pos]} is neither 0 nor 1")
    elif kind == _ERROR_CODE:
        code = _I16.unpack_from(buf, pos)[0]
        if code not in _KNOWN_ERROR_CODES:
            raise _FaultError(f"error code {code} is unknown to kio")
    elif kind == _TIMESTAMP:
        millis = _I64.unpack_from(buf, pos)[0]
        if millis < 0 and not (nullable and millis == -1):
            raise _FaultError(f"negative timestamp {millis}")
    else:  # pragma: no cover - every kind is handled above
        raise AssertionError(f"unknown operation kind {kind}")
    return pos + size


def _entity(schema: _Schema, buf: bytes, pos: int, end: int) -> int:
    if schema.nullable:
        if pos >= end:
            raise _short(1, pos, end)
        marker = buf[pos]
        pos += 1
        if marker == 0xFF:  # int8 -1: null (KIP-893); kio reads any other marker as present
            return pos
    name = ""
    try:
        for op in schema.ops:
            name = op[3]
            pos = _value(op, buf, pos, end)
    except _FaultError as fault:
        fault.path.append(name)
        raise
    if schema.flexible:
        if pos < end and buf[pos] == 0:
            return pos + 1  # no tagged fields: the common case, without a call
        pos = _tagged_fields(schema, buf, pos, end)
    return pos


def _tagged_fields(schema: _Schema, buf: bytes, pos: int, end: int) -> int:
    count_at = pos
    try:
        count, pos = _uvarint(buf, pos, end)
    except _FaultError as fault:
        fault.path.append("(tagged fields)")
        raise
    if count * 2 > end - pos:
        too_many = _FaultError(f"{count} tagged fields exceed the {end - pos} bytes left")
        too_many.path.append("(tagged fields)")
        raise too_many
    count_size = pos - count_at
    for _ in range(count):
        start = pos
        try:
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
        except _FaultError as fault:
            fault.path.append("(tagged fields)")
            raise
        op = schema.tagged.get(tag)
        label = f"(tag {tag})" if op is None else f"{op[3]} (tag {tag})"
        try:
            if size > end - pos:
                raise _FaultError(f"size {size} exceeds the {end - pos} bytes left")
            if op is None:
                # Kafka says skip it; kio 0.6 raises instead. The caller may strip it
                # (strip_unknown_tags) and walk again.
                where = UnknownTag(tag, count_at, count_size, count, start, pos + size)
                raise _FaultError("unknown tagged field", where)
            try:
                stop = _value(op, buf, pos, pos + size)
            except _FaultError as inner:
                # Stripping a field inside a tag's value would change the tag's size.
                inner.unknown_tag = None
                raise
            if stop != pos + size:
                raise _FaultError(f"value takes {stop - pos} of its {size} bytes")
        except _FaultError as fault:
            fault.path.append(label)
            raise
        pos = stop
    return pos


def _walk(cls: type[Entity], buf: bytes, offset: int, request_header: bool, thorough: bool) -> int:
    schema = _compile(cls, False, request_header, thorough)
    try:
        return _entity(schema, buf, offset, len(buf))
    except _FaultError as fault:
        raise fault.error() from None


def check(cls: type[Entity], buf: bytes, offset: int = 0, *, request_header: bool = False) -> int:
    """Check that ``buf[offset:]`` starts with an encoded ``cls``; return where it ends.

    Reads no more than ``buf`` holds and allocates nothing in proportion to a
    length read from ``buf``. ``request_header`` marks a request header class,
    whose client id Kafka always writes as a legacy string.

    Raises:
        StructureError: a length that does not fit, a null where the schema
            forbids one, a varint too long, an unknown or mis-sized tagged field.
    """
    return _walk(cls, buf, offset, request_header, thorough=False)


def locate(
    cls: type[Entity], buf: bytes, offset: int = 0, *, request_header: bool = False
) -> StructureError | None:
    """The first thing wrong with ``buf[offset:]`` as an encoded ``cls``, or None.

    The thorough walk: what :func:`check` checks, and also that strings are
    UTF-8, booleans 0 or 1, error codes known to kio and timestamps not
    negative. Slower; meant for naming the field after a decode failed.
    """
    try:
        _walk(cls, buf, offset, request_header, thorough=True)
    except StructureError as error:
        return error
    return None


def encode_uvarint(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint, the length and count prefix of flexible versions."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_MAX_STRIPPED: Final = 64


def strip_unknown_tags(
    cls: type[Entity], buf: bytes, offset: int = 0, *, request_header: bool = False
) -> tuple[bytes, int]:
    """``buf`` without the tagged fields ``cls``'s schema lacks, and how many bytes went.

    Kafka's rule is that a reader skips tagged fields it does not know (a newer
    broker may send more of them); kio 0.6 raises on them instead. Each one is
    cut out and its entity's tagged-field count lowered, until :func:`check`
    passes.

    Raises:
        StructureError: something else is wrong, an unknown field sits inside a
            known tagged field's value, or there are more than 64 of them.
    """
    removed = 0
    for _ in range(_MAX_STRIPPED + 1):
        try:
            check(cls, buf, offset, request_header=request_header)
        except StructureError as error:
            where = error.unknown_tag
            if where is None:
                raise
            count = encode_uvarint(where.count - 1)
            buf = (
                buf[: where.count_at]
                + count
                + buf[where.count_at + where.count_size : where.start]
                + buf[where.stop :]
            )
            removed += where.stop - where.start + where.count_size - len(count)
            continue
        return buf, removed
    raise StructureError("", f"more than {_MAX_STRIPPED} unknown tagged fields")
