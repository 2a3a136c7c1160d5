"""One connection to one broker: correlation ids, a reader task, timeouts.

A :class:`BrokerConnection` multiplexes any number of concurrent requests on
one stream. Writes are serialised by a lock; a single reader task reads frames
and hands each to the request waiting for its correlation id, in whatever
order they arrive. On connect it performs the ApiVersions handshake and keeps
the negotiated versions.
"""

from __future__ import annotations

import enum
import itertools
import logging
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream
from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload, ResponsePayload

import kgroup
from kgroup.errors import (
    KafkaConnectionError,
    KafkaProtocolError,
    KgroupError,
    MalformedResponseConnectionError,
    MalformedResponseError,
    RequestTimeoutError,
)
from kgroup.protocol import apis
from kgroup.protocol.errors import broker_error
from kgroup.protocol.framing import (
    SIZE_PREFIX,
    api_label,
    decode_response_payload,
    encode_request,
    frame_size,
    peek_correlation_id,
)
from kgroup.protocol.negotiation import (
    API_VERSIONS_FIRST_VERSION,
    NegotiatedVersions,
    api_versions_request,
    api_versions_retry_version,
    broker_ranges,
    negotiate,
)
from kgroup.transport._tasks import OwnedTaskGroup
from kgroup.transport.security import Authenticator, SecurityConfig, open_stream

__all__ = ["BrokerConnection", "ConnectionState", "connect"]

log = logging.getLogger("kgroup.transport.connection")

_MAX_CORRELATION_ID = 2**31 - 1


class ConnectionState(enum.Enum):
    """Life cycle of a :class:`BrokerConnection`."""

    HANDSHAKE = "handshake"
    READY = "ready"
    CLOSED = "closed"


@dataclass(slots=True, eq=False)
class _InFlight:
    """A request waiting for its response; filled in by the reader task."""

    response_cls: type[ResponsePayload]
    label: str
    done: anyio.Event = field(default_factory=anyio.Event)
    response: ResponsePayload | None = None
    error: KgroupError | None = None


class BrokerConnection:
    """A connection to one broker. Open it with :meth:`open` or :func:`connect`.

    Safe to use from many tasks at once. Once closed (by :meth:`aclose` or by the
    peer) every waiting and future request fails with
    :class:`~kgroup.errors.KafkaConnectionError`.
    """

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        *,
        host: str,
        port: int,
        node_id: int | None,
        client_id: str | None,
        request_timeout: float,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self._stream = stream
        self._reader = BufferedByteReceiveStream(stream)
        self._write_lock = anyio.Lock()
        self._ids = itertools.count()
        self._in_flight: dict[int, _InFlight] = {}
        self._state = ConnectionState.HANDSHAKE
        self._close_reason = "closed"
        self._versions: NegotiatedVersions | None = None
        self._reader_scope = anyio.CancelScope()
        self._reader_done = anyio.Event()

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        task_group: anyio.abc.TaskGroup,
        node_id: int | None = None,
        client_id: str | None = "kgroup",
        security: SecurityConfig | None = None,
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        authenticator: Authenticator | None = None,
    ) -> BrokerConnection:
        """Connect, start the reader task in ``task_group``, negotiate versions, authenticate.

        Raises:
            ConfigError: an unsupported security protocol.
            KafkaConnectionError: connecting failed or the connection dropped.
            RequestTimeoutError: the broker did not answer ApiVersions in time.
            BrokerError: the broker answered ApiVersions with an error.
        """
        stream = await open_stream(
            host, port, security or SecurityConfig(), timeout=connect_timeout
        )
        conn = cls(
            stream,
            host=host,
            port=port,
            node_id=node_id,
            client_id=client_id,
            request_timeout=request_timeout,
        )
        await task_group.start(conn._read_loop)
        try:
            await conn._handshake()
            if authenticator is not None:
                await authenticator(conn)
        except BaseException:
            await conn.aclose()
            raise
        log.debug("connected to %s, versions %s", conn, dict(conn.versions.chosen))
        return conn

    def __repr__(self) -> str:
        node = "bootstrap" if self.node_id is None else f"node {self.node_id}"
        return f"<BrokerConnection {node} {self.host}:{self.port} {self._state.value}>"

    @property
    def state(self) -> ConnectionState:
        """Where the connection is in its life cycle."""
        return self._state

    @property
    def closed(self) -> bool:
        """Whether the connection can no longer carry requests."""
        return self._state is ConnectionState.CLOSED

    @property
    def in_flight(self) -> int:
        """How many requests await a response."""
        return len(self._in_flight)

    @property
    def versions(self) -> NegotiatedVersions:
        """The versions negotiated with this broker by the ApiVersions handshake."""
        if self._versions is None:
            raise RuntimeError(f"{self} has not negotiated versions yet")
        return self._versions

    async def request(
        self, request: RequestPayload, *, timeout: float | None = None
    ) -> ResponsePayload:
        """Send ``request`` and wait for its response.

        ``timeout`` (default: the connection's ``request_timeout``) bounds the
        whole wait, queueing for the write included. A timeout closes the
        connection: the broker answers in order, so the requests behind this one
        are stuck too, and they fail with :class:`~kgroup.errors.KafkaConnectionError`.
        A request cancelled by its caller leaves the connection open; its
        response, if one comes, is discarded.

        Raises:
            UnsupportedVersionError: the broker does not support the request's version.
            KafkaConnectionError: the connection is closed or drops before the response.
            RequestTimeoutError: no response within ``timeout``; the connection is closed.
            MalformedResponseConnectionError: the response did not decode; the
                connection is closed (both a MalformedResponseError and a
                KafkaConnectionError).
        """
        if self._versions is not None:
            self._versions.check(request)
        return await self._request(request, self.request_timeout if timeout is None else timeout)

    def abort(self, reason: str) -> None:
        """Close the connection now, without waiting: every request in flight fails
        with :class:`~kgroup.errors.KafkaConnectionError` naming ``reason``, the
        reader task stops and closes the stream. Idempotent."""
        self._shut_down(reason)
        self._reader_scope.cancel()

    async def aclose(self) -> None:
        """Close the connection, failing every request still waiting. Idempotent."""
        self._shut_down("closed by the client")
        self._reader_scope.cancel()
        with anyio.CancelScope(shield=True):
            await self._stream.aclose()
            await self._reader_done.wait()

    # --- internals ----------------------------------------------------------------

    def _next_correlation_id(self) -> int:
        value = next(self._ids)
        if value >= _MAX_CORRELATION_ID:
            # Kafka's correlation id is an int32; wrap before it would overflow.
            self._ids = itertools.count(1)
            value = 0
        return value

    async def _request(self, request: RequestPayload, timeout: float) -> ResponsePayload:
        label = api_label(request)
        if self.closed:
            raise KafkaConnectionError(f"{label} to {self}: {self._close_reason}")
        correlation_id = self._next_correlation_id()
        frame = encode_request(request, correlation_id, self.client_id)
        waiter = _InFlight(
            response_cls=apis.response_class(request.__api_key__, request.__version__),
            label=label,
        )
        self._in_flight[correlation_id] = waiter
        try:
            with anyio.fail_after(timeout):
                async with self._write_lock:
                    await self._write(frame, label)
                await waiter.done.wait()
        except TimeoutError:
            # A broker answers the requests of one connection in order, so no answer
            # in time means the broker is stuck or the path to it is gone (a half-open
            # TCP connection looks exactly like this) and the requests queued behind
            # this one are stuck too. Close it, failing them, so the next request
            # opens a fresh connection instead of waiting on a zombie; the Java client
            # disconnects such a node the same way.
            message = f"{label} to {self}: no response within {timeout:g}s"
            self.abort(f"{label} timed out after {timeout:g}s")
            raise RequestTimeoutError(message) from None
        finally:
            # From here on the reader discards a response to this id as unknown.
            self._in_flight.pop(correlation_id, None)
        if waiter.error is not None:
            raise waiter.error
        assert waiter.response is not None
        return waiter.response

    async def _write(self, frame: bytes, label: str) -> None:
        if self.closed:
            raise KafkaConnectionError(f"{label} to {self}: {self._close_reason}")
        # A write cancelled half-way would leave a partial frame on the wire and
        # every later frame misread by the broker, so a write is never cancelled;
        # one that cannot finish in time ends the connection instead.
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(self.request_timeout) as scope:
                try:
                    await self._stream.send(frame)
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                    self._shut_down(f"write failed: {exc!r}")
                    raise KafkaConnectionError(f"{label} to {self}: write failed") from exc
            if scope.cancelled_caught:
                self._shut_down("a write did not complete in time")
                self._reader_scope.cancel()
                raise KafkaConnectionError(f"{label} to {self}: write did not complete in time")

    async def _handshake(self) -> None:
        version = API_VERSIONS_FIRST_VERSION
        while True:
            request = api_versions_request(version, "kgroup", kgroup.__version__)
            response = await self._request(request, self.request_timeout)
            retry = api_versions_retry_version(response, version)
            if retry is None:
                break
            log.debug("%s does not support ApiVersions v%d; retrying v%d", self, version, retry)
            version = retry
        code = getattr(response, "error_code", ErrorCode.none)
        if code != ErrorCode.none:
            raise broker_error(code)
        self._versions = negotiate(broker_ranges(response))
        if self._state is ConnectionState.HANDSHAKE:
            self._state = ConnectionState.READY

    def _shut_down(self, reason: str) -> None:
        if self._state is ConnectionState.CLOSED:
            return
        self._state = ConnectionState.CLOSED
        self._close_reason = reason
        waiting = list(self._in_flight.values())
        self._in_flight.clear()
        if waiting:
            log.info("%s: %s; failing %d in-flight requests", self, reason, len(waiting))
        for waiter in waiting:
            waiter.error = KafkaConnectionError(f"{waiter.label} to {self}: {reason}")
            waiter.done.set()

    async def _read_loop(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            with self._reader_scope:
                task_status.started()
                try:
                    while True:
                        size = frame_size(await self._reader.receive_exactly(SIZE_PREFIX))
                        self._dispatch(await self._reader.receive_exactly(size))
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    self._shut_down("connection closed by the broker")
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                    self._shut_down(f"connection lost: {exc!r}")
                except KafkaProtocolError as exc:
                    # A bad size prefix means framing is lost; nothing after it can be
                    # read. A malformed response (see _dispatch) ends the connection too.
                    self._shut_down(f"unreadable frame: {exc}")
                    log.warning("%s: %s", self, exc)
                except Exception as exc:
                    # A reader that raised would tear down the owner's whole task
                    # group; failing this one connection is the contained outcome.
                    log.exception("%s: reader failed", self)
                    self._shut_down(f"reader failed: {exc!r}")
        finally:
            self._shut_down("connection closed")
            with anyio.CancelScope(shield=True):
                await self._stream.aclose()
            self._reader_done.set()

    def _dispatch(self, payload: bytes) -> None:
        correlation_id = peek_correlation_id(payload)
        waiter = self._in_flight.pop(correlation_id, None)
        if waiter is None:
            # Its request timed out or was cancelled; the caller is gone.
            log.debug("%s: discarding response to correlation id %d", self, correlation_id)
            return
        try:
            waiter.response = decode_response_payload(
                payload, waiter.response_cls, correlation_id
            ).response
        except MalformedResponseError as exc:
            # Bytes that are not what a broker sends: whatever produced them (a
            # broken broker or proxy, corruption) may have garbled more than this
            # frame. The request fails retriably and the reader's handler of
            # KafkaProtocolError closes the connection, failing the others.
            error = MalformedResponseConnectionError(f"{exc}; closing {self}")
            error.__cause__ = exc
            waiter.error = error
            waiter.done.set()
            raise
        waiter.done.set()


class _Connect:
    """The async context manager :func:`connect` returns."""

    def __init__(self, host: str, port: int, options: dict[str, Any]) -> None:
        self._host = host
        self._port = port
        self._options = options
        self._tasks = OwnedTaskGroup()
        self._conn: BrokerConnection | None = None

    async def __aenter__(self) -> BrokerConnection:
        task_group = await self._tasks.enter()
        try:
            self._conn = await BrokerConnection.open(
                self._host, self._port, task_group=task_group, **self._options
            )
        except BaseException:
            await self._tasks.leave()
            raise
        return self._conn

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._conn is not None:
            await self._conn.aclose()
        await self._tasks.leave()


def connect(
    host: str,
    port: int,
    *,
    client_id: str | None = "kgroup",
    security: SecurityConfig | None = None,
    connect_timeout: float = 10.0,
    request_timeout: float = 30.0,
    authenticator: Authenticator | None = None,
) -> AbstractAsyncContextManager[BrokerConnection]:
    """A stand-alone :class:`BrokerConnection` with its own reader task, closed on exit.

    Use as ``async with connect(host, port) as conn``. Entering raises as
    :meth:`BrokerConnection.open`.
    """
    return _Connect(
        host,
        port,
        {
            "client_id": client_id,
            "security": security,
            "connect_timeout": connect_timeout,
            "request_timeout": request_timeout,
            "authenticator": authenticator,
        },
    )
