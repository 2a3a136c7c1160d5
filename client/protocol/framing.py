"""Kafka frames: a 4-byte big-endian size, a header, and a kio-encoded payload.

kio encodes headers and payloads; this module adds what kio leaves out: the
size prefix, which header version goes with which payload, correlation ids,
and turning undecodable bytes into :class:`~kgroup.errors.MalformedResponseError`.
Pure functions over bytes; no I/O.

Bytes are never handed to kio's native reader unchecked: kio reserves memory
from the lengths it reads, and a huge one aborts the process (see
:mod:`kgroup.protocol.structure`). Every decode first walks the bytes with
:func:`~kgroup.protocol.structure.check`; whatever fails, the walk or kio, is a
:class:`~kgroup.errors.MalformedResponseError` naming the API, the version and,
where it can be found, the field.
"""

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass
from typing import Final, TypeVar

import kio.schema.request_header.v1.header as request_header_v1
import kio.schema.request_header.v2.header as request_header_v2
import kio.schema.response_header.v0.header as response_header_v0
import kio.schema.response_header.v1.header as response_header_v1
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32
from kio.static.protocol import (
    Entity,
    Payload,
    RequestHeader,
    RequestPayload,
    ResponseHeader,
    ResponsePayload,
)

from kgroup.errors import KafkaProtocolError, MalformedResponseError
from kgroup.protocol.apis import ApiKey, request_class, response_class
from kgroup.protocol.structure import StructureError, check, locate, strip_unknown_tags

__all__ = [
    "MAX_FRAME_SIZE",
    "SIZE_PREFIX",
    "FrameCodec",
    "RequestFrame",
    "ResponseFrame",
    "api_label",
    "decode_request",
    "decode_response",
    "decode_response_payload",
    "encode_request",
    "encode_response",
    "frame_size",
    "peek_correlation_id",
    "read_entity",
    "request_header_class",
    "response_header_class",
]

SIZE_PREFIX: Final = 4
"""Bytes of the size prefix in front of every frame."""

MAX_FRAME_SIZE: Final = 100 * 1024 * 1024
"""Largest frame kgroup accepts (the broker's default socket.request.max.bytes)."""

_SIZE = struct.Struct(">i")
_ERROR_CODE = struct.Struct(">h")

_E = TypeVar("_E", bound=Entity)

RequestHeaderClass = type[request_header_v1.RequestHeader] | type[request_header_v2.RequestHeader]
ResponseHeaderClass = (
    type[response_header_v0.ResponseHeader] | type[response_header_v1.ResponseHeader]
)


@dataclass(frozen=True, slots=True)
class RequestFrame:
    """A decoded request: its header and its payload."""

    header: RequestHeader
    request: RequestPayload


@dataclass(frozen=True, slots=True)
class ResponseFrame:
    """A decoded response: its header and its payload."""

    header: ResponseHeader
    response: ResponsePayload


def api_label(payload: Payload | type[Payload]) -> str:
    """``Metadata v12``: the API name and version of a kio payload, for messages."""
    return _label(int(payload.__api_key__), payload.__version__)


@functools.cache
def _label(key: int, version: int) -> str:
    # Every request names itself (for errors and logs): a few dozen distinct
    # labels in a process's life, one per request sent.
    try:
        name = ApiKey(key).api_name
    except ValueError:
        name = f"api key {key}"
    return f"{name} v{version}"


def request_header_class(request: RequestPayload | type[RequestPayload]) -> RequestHeaderClass:
    """The request header for a request: v2 when its API version is flexible, else v1."""
    if request.__flexible__:
        return request_header_v2.RequestHeader
    return request_header_v1.RequestHeader


def response_header_class(
    response: ResponsePayload | type[ResponsePayload],
) -> ResponseHeaderClass:
    """The response header for a response: v1 when flexible, else v0.

    ApiVersions responses always use v0 (KIP-511): a client that does not yet
    know which versions the broker speaks must be able to read the header.
    """
    if response.__flexible__ and int(response.__api_key__) != ApiKey.API_VERSIONS:
        return response_header_v1.ResponseHeader
    return response_header_v0.ResponseHeader


def _with_size_prefix(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


def encode_request(request: RequestPayload, correlation_id: int, client_id: str | None) -> bytes:
    """Encode a whole request frame: size prefix, header, payload."""
    header_cls = request_header_class(request)
    header = header_cls(
        request_api_key=i16(request.__api_key__),
        request_api_version=i16(request.__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    entity_writer(header_cls)(buf, header)
    entity_writer(type(request))(buf, request)
    frame = buf.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - SIZE_PREFIX)
    return bytes(frame)


_MEMO_MAX: Final = 4096
"""Largest response payload (bytes) :class:`FrameCodec` keeps to recognise the next one."""

_HEADER_START = struct.Struct(">ihhi")  # size prefix, API key, version, correlation id


class FrameCodec:
    """Encodes one connection's requests and decodes its responses, sparing repeats.

    An idle member sends the same heartbeat every interval and gets the same
    answer but for the correlation id; every encode and decode of those (kio's
    writers, the structural walk, kio's reader) was Python run cold after a
    quiet spell, most of a heartbeat's CPU. So the request body last encoded is
    reused for an equal request, the header is packed around it, and a response
    whose bytes after the correlation id equal those of the last response of its
    class is the same (frozen) response, not decoded again. Responses over
    :data:`_MEMO_MAX` bytes are not kept. Not thread-safe: one per connection.
    """

    __slots__ = ("_client_id", "_header_tails", "_last_body", "_last_request", "_responses")

    def __init__(self, client_id: str | None) -> None:
        self._client_id = client_id
        self._header_tails: dict[RequestHeaderClass, bytes] = {}
        self._last_request: RequestPayload | None = None
        self._last_body = b""
        self._responses: dict[type[ResponsePayload], tuple[bytes, ResponsePayload]] = {}

    def encode(self, request: RequestPayload, correlation_id: int) -> bytes:
        """The whole frame of ``request`` (as :func:`encode_request`)."""
        header_cls = request_header_class(request)
        tail = self._header_tails.get(header_cls)
        if tail is None:
            # The header after its fixed start (key, version, correlation id):
            # the client id, and the tag count of a flexible header; by kio, once.
            header = header_cls(
                request_api_key=i16(0),
                request_api_version=i16(0),
                correlation_id=i32(0),
                client_id=self._client_id,
            )
            buf = io.BytesIO()
            entity_writer(header_cls)(buf, header)
            tail = self._header_tails[header_cls] = buf.getvalue()[
                _HEADER_START.size - SIZE_PREFIX :
            ]
        if request is self._last_request or request == self._last_request:
            body = self._last_body
        else:
            body = _encode_body(request)
            self._last_request, self._last_body = request, body
        size = _HEADER_START.size - SIZE_PREFIX + len(tail) + len(body)
        start = _HEADER_START.pack(
            size, int(request.__api_key__), int(request.__version__), correlation_id
        )
        return b"".join((start, tail, body))

    def decode(
        self, payload: bytes, response_cls: type[ResponsePayload], correlation_id: int
    ) -> ResponsePayload:
        """The response in ``payload`` (as :func:`decode_response_payload`).

        Raises:
            MalformedResponseError: as :func:`decode_response_payload`.
        """
        rest = payload[4:]  # every response header starts with the correlation id
        last = self._responses.get(response_cls)
        if last is not None and last[0] == rest and peek_correlation_id(payload) == correlation_id:
            return last[1]
        response = decode_response_payload(payload, response_cls, correlation_id).response
        if len(payload) <= _MEMO_MAX:
            self._responses[response_cls] = (rest, response)
        return response


def _encode_body(request: RequestPayload) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(request))(buf, request)
    return buf.getvalue()


def encode_response(response: ResponsePayload, correlation_id: int) -> bytes:
    """Encode a whole response frame (what a broker sends); used by tests and fakes."""
    header_cls = response_header_class(response)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    entity_writer(header_cls)(buf, header_cls(correlation_id=i32(correlation_id)))
    entity_writer(type(response))(buf, response)
    frame = buf.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - SIZE_PREFIX)
    return bytes(frame)


def frame_size(prefix: bytes) -> int:
    """The payload size announced by a 4-byte size prefix.

    Raises:
        KafkaProtocolError: the size is negative or above :data:`MAX_FRAME_SIZE`.
    """
    if len(prefix) != SIZE_PREFIX:
        raise KafkaProtocolError(f"a size prefix has 4 bytes, got {len(prefix)}")
    (size,) = _SIZE.unpack(prefix)
    if not 0 <= size <= MAX_FRAME_SIZE:
        raise KafkaProtocolError(f"frame size {size} outside 0..{MAX_FRAME_SIZE}")
    return int(size)


def peek_correlation_id(payload: bytes) -> int:
    """The correlation id of a response payload (the bytes after the size prefix).

    Every response header version starts with it, so it can be read before
    knowing which request the response answers.

    Raises:
        KafkaProtocolError: fewer than four bytes.
    """
    if len(payload) < 4:
        raise KafkaProtocolError(f"a response has at least 4 bytes, got {len(payload)}")
    return int(_SIZE.unpack_from(payload)[0])


def _split_frame(frame: bytes) -> bytes:
    size = frame_size(frame[:SIZE_PREFIX])
    if size != len(frame) - SIZE_PREFIX:
        raise KafkaProtocolError(
            f"size prefix says {size} bytes, frame has {len(frame) - SIZE_PREFIX}"
        )
    return frame[SIZE_PREFIX:]


def read_entity(
    what: str, cls: type[_E], data: bytes, offset: int = 0, *, request_header: bool = False
) -> tuple[_E, int]:
    """Decode ``cls`` from ``data`` at ``offset``: the entity and where it ends.

    The bytes pass the structural walk first (:func:`kgroup.protocol.structure.check`),
    so kio never reads an unchecked length. Tagged fields the schema lacks are
    skipped, as Kafka requires (kio alone refuses them). ``what`` names the bytes in errors
    (``"Metadata v12 response"``).

    Raises:
        KafkaProtocolError: the bytes do not decode; the message starts with
            ``what`` and names the field where it can.
    """
    removed = 0
    try:
        end = check(cls, data, offset, request_header=request_header)
    except StructureError as exc:
        if exc.unknown_tag is None:
            raise KafkaProtocolError(f"{what}: {exc}") from None
        # Tagged fields a newer peer added: Kafka says skip them, kio refuses them.
        try:
            data, removed = strip_unknown_tags(cls, data, offset, request_header=request_header)
            end = check(cls, data, offset, request_header=request_header)
        except StructureError as again:
            raise KafkaProtocolError(f"{what}: {again}") from None
    try:
        entity, _ = entity_reader(cls)(data, offset)
    except Exception as exc:  # kio raises assorted errors for values it refuses
        raise _undecodable(what, cls, data, offset, request_header=request_header, exc=exc) from exc
    except BaseException as exc:
        # A Rust panic inside kio surfaces as pyo3's PanicException, which derives
        # from BaseException; it is a decode failure like any other. Everything
        # else (KeyboardInterrupt ...) passes.
        if type(exc).__name__ != "PanicException":
            raise
        raise _undecodable(what, cls, data, offset, request_header=request_header, exc=exc) from exc
    # ``end`` in the caller's bytes: what was stripped lay before it.
    return entity, end + removed


def _undecodable(
    what: str,
    cls: type[Entity],
    payload: bytes,
    offset: int,
    *,
    request_header: bool,
    exc: BaseException,
) -> KafkaProtocolError:
    # The thorough walk names the field kio refused where it can (UTF-8, booleans,
    # error codes, timestamps); otherwise kio's own words are the best there is.
    found = locate(cls, payload, offset, request_header=request_header)
    if found is not None:
        return KafkaProtocolError(f"{what}: {found}")
    return KafkaProtocolError(f"undecodable {what}: {exc!r}")


def decode_request(frame: bytes) -> RequestFrame:
    """Decode a whole request frame (what a broker receives); used by tests and fakes.

    Raises:
        KafkaProtocolError: the bytes are not a complete request of a known API version.
    """
    payload = _split_frame(frame)
    if len(payload) < 4:
        raise KafkaProtocolError("a request starts with its API key and version")
    api_key, version = struct.unpack_from(">hh", payload)
    try:
        cls = request_class(api_key, version)
    except KeyError as exc:
        raise KafkaProtocolError(str(exc)) from None
    header_cls = request_header_class(cls)
    label = f"{api_label(cls)} request"
    header, header_size = read_entity(
        label + " header", header_cls, payload, 0, request_header=True
    )
    request, end = read_entity(label, cls, payload, header_size)
    if end != len(payload):
        raise KafkaProtocolError(f"{label} has trailing bytes")
    return RequestFrame(header=header, request=request)


def _api_versions_fallback(payload: bytes, header_size: int) -> type[ResponsePayload] | None:
    # A broker that does not support the ApiVersions version we sent answers in
    # v0 with UNSUPPORTED_VERSION (KIP-511); the error code leads both layouts.
    if len(payload) < header_size + 2:
        return None
    (code,) = _ERROR_CODE.unpack_from(payload, header_size)
    if code == ErrorCode.unsupported_version:
        return response_class(ApiKey.API_VERSIONS, 0)
    return None


def decode_response_payload(
    payload: bytes, response_cls: type[ResponsePayload], correlation_id: int
) -> ResponseFrame:
    """Decode a response payload (the bytes after the size prefix) as ``response_cls``.

    An ApiVersions response carrying UNSUPPORTED_VERSION is decoded as v0,
    whatever version was asked for, because that is how brokers send it.

    Raises:
        MalformedResponseError: wrong correlation id, bytes that do not decode
            as ``response_cls``, or bytes left over after it; the message names the
            API and version.
    """
    label = api_label(response_cls)
    header_cls = response_header_class(response_cls)
    try:
        header, header_size = read_entity(f"{label} response header", header_cls, payload)
    except KafkaProtocolError as exc:
        raise MalformedResponseError(str(exc)) from exc.__cause__
    if header.correlation_id != correlation_id:
        raise MalformedResponseError(
            f"{label} response has correlation id {header.correlation_id}, "
            f"expected {correlation_id}"
        )
    if int(response_cls.__api_key__) == ApiKey.API_VERSIONS and response_cls.__version__ > 0:
        response_cls = _api_versions_fallback(payload, header_size) or response_cls
    try:
        response, end = read_entity(f"{label} response", response_cls, payload, header_size)
        extra = len(payload) - end
        if extra:
            raise KafkaProtocolError(f"{label} response has {extra} trailing bytes")
    except KafkaProtocolError as exc:
        raise MalformedResponseError(str(exc)) from exc.__cause__
    return ResponseFrame(header=header, response=response)


def decode_response(
    frame: bytes, response_cls: type[ResponsePayload], correlation_id: int
) -> ResponseFrame:
    """Decode a whole response frame (size prefix included); see :func:`decode_response_payload`.

    Raises:
        MalformedResponseError: as :func:`decode_response_payload`, or a size
            prefix that does not match the frame.
    """
    try:
        payload = _split_frame(frame)
    except KafkaProtocolError as exc:
        raise MalformedResponseError(f"{api_label(response_cls)} response: {exc}") from None
    return decode_response_payload(payload, response_cls, correlation_id)
