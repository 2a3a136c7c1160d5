"""JSON form of telemetry events: one flat object per event, one event per line.

The field names are the schema's contract (the report and any other reader
depend on them)::

    {"v": 1, "kind": "fetch_started", "ts": 1763720000.123456, "mono": 8123.004,
     "seq": 17, "group": "orders", "member_id": "Zx3...", "instance_id": null,
     "client_id": "billing", "host": "web-3", "pid": 4711, "protocol": "consumer",
     "partitions": [{"topic": "orders", "partition": 3}], "epoch": 12}

Header fields come first, then the body's fields under their dataclass names.
Partitions are ``{"topic", "partition"}`` objects, commit offsets
``{"topic", "partition", "offset"}`` objects, enums their ``value``. Absent
optional fields decode as ``None``; unknown fields are ignored (a newer writer
of the same major schema may add some); a newer ``v`` is refused.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from collections.abc import Callable, Mapping
from types import NoneType, UnionType
from typing import Any

from kgroup.errors import TelemetryDecodeError
from kgroup.telemetry.events import (
    BODY_TYPES,
    SCHEMA_VERSION,
    CommittedOffset,
    EventBody,
    EventHeader,
    EventKind,
    TelemetryEvent,
)
from kgroup.types import TopicPartition

__all__ = ["HEADER_FIELDS", "decode", "encode", "from_dict", "to_dict"]

_Encoder = Callable[[Any], Any]
_Decoder = Callable[[Any, str], Any]


def _encode_partitions(value: tuple[TopicPartition, ...]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in value]


def _encode_offsets(value: tuple[CommittedOffset, ...]) -> list[dict[str, Any]]:
    return [{"topic": o.topic, "partition": o.partition, "offset": o.offset} for o in value]


def _fail(name: str, expected: str, value: object) -> TelemetryDecodeError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return TelemetryDecodeError(f"field {name!r} must be {expected}, got {shown}")


def _decode_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(name, "an integer", value)
    return value


def _decode_float(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(name, "a number", value)
    return float(value)


def _decode_str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise _fail(name, "a string", value)
    return value


def _decode_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(name, "true or false", value)
    return value


def _decode_list(value: Any, name: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise _fail(name, "a list of objects", value)
    return value


def _decode_partitions(value: Any, name: str) -> tuple[TopicPartition, ...]:
    return tuple(
        TopicPartition(
            _decode_str(item.get("topic"), f"{name}[{i}].topic"),
            _decode_int(item.get("partition"), f"{name}[{i}].partition"),
        )
        for i, item in enumerate(_decode_list(value, name))
    )


def _decode_offsets(value: Any, name: str) -> tuple[CommittedOffset, ...]:
    return tuple(
        CommittedOffset(
            _decode_str(item.get("topic"), f"{name}[{i}].topic"),
            _decode_int(item.get("partition"), f"{name}[{i}].partition"),
            _decode_int(item.get("offset"), f"{name}[{i}].offset"),
        )
        for i, item in enumerate(_decode_list(value, name))
    )


def _enum_codec(cls: type[enum.Enum]) -> tuple[_Encoder, _Decoder]:
    valid = ", ".join(repr(m.value) for m in cls)

    def dec(value: Any, name: str) -> enum.Enum:
        try:
            return cls(value)
        except ValueError:
            raise _fail(name, f"one of {valid}", value) from None

    return (lambda v: v.value), dec


def _identity(value: Any) -> Any:
    return value


_SIMPLE: dict[object, tuple[_Encoder, _Decoder]] = {
    int: (_identity, _decode_int),
    float: (_identity, _decode_float),
    str: (_identity, _decode_str),
    bool: (_identity, _decode_bool),
    tuple[TopicPartition, ...]: (_encode_partitions, _decode_partitions),
    tuple[CommittedOffset, ...]: (_encode_offsets, _decode_offsets),
}


def _codec(hint: object) -> tuple[_Encoder, _Decoder, bool]:
    """(encoder, decoder, optional) for one annotated field type."""
    optional = False
    if isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not NoneType]
        if len(args) != 1:
            raise TypeError(f"unsupported telemetry field type {hint!r}")
        hint, optional = args[0], True
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        enc, dec = _enum_codec(hint)
        return enc, dec, optional
    if hint in _SIMPLE:
        enc, dec = _SIMPLE[hint]
        return enc, dec, optional
    raise TypeError(f"unsupported telemetry field type {hint!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    encode: _Encoder
    decode: _Decoder
    optional: bool
    has_default: bool


def _fields(cls: type[Any]) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        enc, dec, optional = _codec(hints[f.name])
        out.append(
            _Field(f.name, enc, dec, optional, f.default is not dataclasses.MISSING),
        )
    return tuple(out)


_HEADER = _fields(EventHeader)
_BODIES = {kind: (cls, _fields(cls)) for kind, cls in BODY_TYPES.items()}

HEADER_FIELDS: tuple[str, ...] = ("v", "kind", *(f.name for f in _HEADER))
"""The JSON fields every event has, in the order they are written."""

# A body field named like a header field would be ambiguous in the flat form.
for _kind, (_cls, _body_fields) in _BODIES.items():
    _clash = {f.name for f in _body_fields} & set(HEADER_FIELDS)
    if _clash:  # pragma: no cover - a schema bug caught at import time
        raise TypeError(f"{_cls.__name__} reuses header field names {sorted(_clash)}")


def to_dict(event: TelemetryEvent) -> dict[str, Any]:
    """The JSON-ready dict of ``event`` (the flat form described in the module doc)."""
    out: dict[str, Any] = {"v": SCHEMA_VERSION, "kind": event.body.KIND.value}
    header = event.header
    for f in _HEADER:
        value = getattr(header, f.name)
        out[f.name] = None if value is None else f.encode(value)
    _, body_fields = _BODIES[event.body.KIND]
    for f in body_fields:
        value = getattr(event.body, f.name)
        out[f.name] = None if value is None else f.encode(value)
    return out


def encode(event: TelemetryEvent) -> str:
    """``event`` as one line of JSON (no trailing newline)."""
    return json.dumps(to_dict(event), separators=(",", ":"), ensure_ascii=False)


def _read(fields: tuple[_Field, ...], raw: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in fields:
        value = raw.get(f.name)
        if value is None:
            if f.optional:
                values[f.name] = None
                continue
            if f.has_default and f.name not in raw:
                continue
            raise TelemetryDecodeError(f"field {f.name!r} is missing")
        values[f.name] = f.decode(value, f.name)
    return values


def from_dict(raw: Mapping[str, Any]) -> TelemetryEvent:
    """Rebuild an event from its flat dict form.

    Raises:
        TelemetryDecodeError: not an object, a newer schema version, an unknown
            kind, or a field missing or of the wrong type (the message names it).
    """
    if not isinstance(raw, Mapping):
        raise TelemetryDecodeError(f"a telemetry event is a JSON object, got {type(raw).__name__}")
    version = raw.get("v")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise TelemetryDecodeError(f"field 'v' (schema version) must be >= 1, got {version!r}")
    if version > SCHEMA_VERSION:
        raise TelemetryDecodeError(
            f"event has schema version {version}; this kgroup reads up to {SCHEMA_VERSION}. "
            "Upgrade kgroup to read it."
        )
    kind_name = raw.get("kind")
    try:
        kind = EventKind(kind_name)
    except ValueError:
        valid = ", ".join(k.value for k in EventKind)
        raise TelemetryDecodeError(f"unknown event kind {kind_name!r}; known: {valid}") from None
    body_cls, body_fields = _BODIES[kind]
    header = EventHeader(**_read(_HEADER, raw))
    body: EventBody = body_cls(**_read(body_fields, raw))
    return TelemetryEvent(header, body)


def decode(line: str | bytes) -> TelemetryEvent:
    """Parse one JSON line written by :func:`encode`.

    Raises:
        TelemetryDecodeError: not JSON, or not a telemetry event (see :func:`from_dict`).
    """
    try:
        raw = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TelemetryDecodeError(f"not a JSON line: {exc}") from None
    return from_dict(raw)
