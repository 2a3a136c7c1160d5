"""One connection to one broker: correlation ids, a reader task, timeouts.

A :class:`BrokerConnection` multiplexes any number of concurrent requests on
one stream. Writes are serialised by a lock; a single reader task reads frames
and hands each to the request waiting for its correlation id, in whatever
order they arrive. On connect it performs the ApiVersions handshake and keeps
the negotiated versions, then runs the authenticator (SASL) if any, and again
before the session the broker granted expires (KIP-368); while it
re-authenticates, other requests wait.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import random
import ssl
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

import anyio
import anyio.abc
from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup._version import __version__
from kgroup.config_keys import CLIENT_ID, REQUEST_TIMEOUT_MS, SOCKET_CONNECTION_SETUP_TIMEOUT_MS
from kgroup.config_security import SecurityConfig
from kgroup.errors import (
    KafkaConnectionError,
    KafkaProtocolError,
    KgroupError,
    MalformedResponseConnectionError,
    MalformedResponseError,
    RequestTimeoutError,
    SecurityError,
    broker_error,
)
from kgroup.protocol import apis
from kgroup.protocol.framing import (
    SIZE_PREFIX,
    FrameCodec,
    api_label,
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
from kgroup.transport._pipe import Pipe, open_pipe, running_asyncio_loop
from kgroup.transport._tasks import OwnedTaskGroup, TaskGroupOwner
from kgroup.transport.security import (
    Authenticator,
    client_certificate_refusal,
    explain_tls_on_plaintext,
    looks_like_tls,
    open_stream,
)

__all__ = [
    "BrokerConnection",
    "ConnectionSettings",
    "ConnectionState",
    "connect",
    "open_connection",
]

log = logging.getLogger("kgroup.transport.connection")

_MAX_CORRELATION_ID = 2**31 - 1

# Re-authenticate at a random point between 85% and 95% of the session lifetime,
# as the Java client does, so that many connections do not all do it at once.
_REAUTH_WINDOW = (0.85, 0.95)

# The consumer config's defaults, for connections opened without one (tools, tests).
_CONNECT_TIMEOUT = SOCKET_CONNECTION_SETUP_TIMEOUT_MS.default / 1000
_REQUEST_TIMEOUT = REQUEST_TIMEOUT_MS.default / 1000


class ConnectionState(enum.Enum):
    """Life cycle of a :class:`BrokerConnection`."""

    HANDSHAKE = "handshake"
    READY = "ready"
    CLOSED = "closed"


@dataclass(slots=True, eq=False)
class _InFlight:
    """A request waiting for its response; filled in by the reader.

    ``done`` is an anyio event for a connection on a byte stream, a future of
    the loop for one on an asyncio :class:`~kgroup.transport._pipe.Pipe`, or
    the callback of :meth:`BrokerConnection.send_now` (with the timer that
    bounds its wait). Whoever finishes a waiter has taken it out of the
    connection's table first, so each is finished once.
    """

    response_cls: type[ResponsePayload]
    label: str
    done: anyio.Event | asyncio.Future[None] | Callable[[_InFlight], None]
    response: ResponsePayload | None = None
    error: KgroupError | None = None
    timer: asyncio.TimerHandle | None = None
    sent: float = 0.0

    def finish(self) -> None:
        """Wake the request (its response or error is set)."""
        done = self.done
        if isinstance(done, anyio.Event):
            done.set()
        elif isinstance(done, asyncio.Future):
            if not done.done():  # a request cancelled by its caller cancelled it
                done.set_result(None)
        else:
            if self.timer is not None:
                self.timer.cancel()
            try:
                done(self)
            except Exception:
                # The callback runs in the reader's or a timer's context, where
                # nobody would see its exception.
                log.exception("callback of %s failed", self.label)


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """How every connection of one client is opened; see :meth:`BrokerConnection.open`.

    A :class:`~kgroup.transport.KafkaClient` builds one and opens each pooled
    connection with it, so the SSL context (loading CAs and keys is the slow part
    of a TLS connect) and the authenticator are made once per client.
    """

    client_id: str | None = CLIENT_ID.default
    security: SecurityConfig = field(default_factory=SecurityConfig)
    connect_timeout: float = _CONNECT_TIMEOUT
    request_timeout: float = _REQUEST_TIMEOUT
    authenticator: Authenticator | None = None
    ssl_context: ssl.SSLContext | None = None


class BrokerConnection:
    """A connection to one broker. Open it with :meth:`open` or :func:`connect`.

    Safe to use from many tasks at once. Once closed (by :meth:`aclose` or by the
    peer) every waiting and future request fails with
    :class:`~kgroup.errors.KafkaConnectionError`.
    """

    def __init__(
        self,
        stream: anyio.abc.ByteStream | None,
        *,
        host: str,
        port: int,
        node_id: int | None,
        settings: ConnectionSettings,
        pipe: Pipe | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = settings.client_id
        self.request_timeout = settings.request_timeout
        # Exactly one of the two carries the bytes: a pipe (plaintext on asyncio,
        # read in the loop's callback) or a byte stream read by _read_loop.
        self._stream = stream
        self._pipe = pipe
        self._loop = None if pipe is None else asyncio.get_running_loop()
        self._codec = FrameCodec(settings.client_id)
        # Uncontended (the usual case), taking it does not yield to the event loop.
        self._write_lock = anyio.Lock(fast_acquire=True)
        self._ids = itertools.count()
        self._in_flight: dict[int, _InFlight] = {}
        self._state = ConnectionState.HANDSHAKE
        self._close_reason = "closed"
        self._versions: NegotiatedVersions | None = None
        self._reader_scope = anyio.CancelScope()
        self._reader_done = anyio.Event()
        self._security = settings.security
        self._close_error: KgroupError | None = None
        self._answered = 0
        # Set while the connection re-authenticates: other requests wait for it.
        self._auth_busy: anyio.Event | None = None
        self._reauth_scope = anyio.CancelScope()
        self.reauthentications = 0
        """How many times the session was renewed (KIP-368)."""

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        task_group: anyio.abc.TaskGroup,
        node_id: int | None = None,
        client_id: str | None = CLIENT_ID.default,
        security: SecurityConfig | None = None,
        connect_timeout: float = _CONNECT_TIMEOUT,
        request_timeout: float = _REQUEST_TIMEOUT,
        authenticator: Authenticator | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> BrokerConnection:
        """Connect, start the reader task in ``task_group``, negotiate versions, authenticate.

        The TLS handshake, ApiVersions and authentication together must finish
        within ``connect_timeout``: a broker that accepts the connection and
        then says nothing is an error, not a stall.

        Raises:
            ConfigError: the TLS settings do not load.
            KafkaConnectionError: connecting failed or the connection dropped.
            RequestTimeoutError: the broker did not answer ApiVersions in time.
            BrokerError: the broker answered ApiVersions with an error.
            SecurityError: TLS or SASL failed (:class:`~kgroup.errors.TlsError`,
                :class:`~kgroup.errors.AuthenticationError` ...), or the listener
                speaks another security protocol.
        """
        settings = ConnectionSettings(
            client_id=client_id,
            security=security or SecurityConfig(),
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            authenticator=authenticator,
            ssl_context=ssl_context,
        )
        return await open_connection(host, port, settings, task_group=task_group, node_id=node_id)

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

    def send_now(
        self,
        request: RequestPayload,
        on_done: Callable[[ResponsePayload | None, KgroupError | None], None],
        *,
        timeout: float | None = None,
    ) -> bool:
        """Send ``request`` at once, without a task: ``on_done(response, None)`` or
        ``on_done(None, error)`` is called on the event loop when it ends (errors as
        :meth:`request` raises them; a timeout closes the connection).

        Only a connection on asyncio's own transport (plaintext, see
        :mod:`kgroup.transport._pipe`) that is ready and not re-authenticating
        can: False (nothing sent) otherwise, and the caller uses :meth:`request`.
        A heartbeat goes out this way: a task per request cost an idle member a
        fifth of its event loop's time.

        Raises:
            UnsupportedVersionError: the broker does not support the request's version.
        """
        pipe, loop = self._pipe, self._loop
        if (
            pipe is None
            or loop is None
            or self._state is not ConnectionState.READY
            or self._auth_busy is not None
            or pipe.closing
        ):
            return False
        assert self._versions is not None
        self._versions.check(request)
        wait = self.request_timeout if timeout is None else timeout

        def finished(waiter: _InFlight) -> None:
            if waiter.error is not None:
                on_done(None, self._answer_error(waiter, loop.time()))
            else:
                on_done(self._answer(waiter, waiter.sent, loop.time()), None)

        correlation_id = self._next_correlation_id()
        frame = self._codec.encode(request, correlation_id)
        waiter = _InFlight(
            response_cls=apis.response_class(request.__api_key__, request.__version__),
            label=api_label(request),
            done=finished,
            sent=loop.time(),
        )
        waiter.timer = loop.call_at(waiter.sent + wait, self._expire, correlation_id, waiter, wait)
        self._in_flight[correlation_id] = waiter
        pipe.write(frame)
        return True

    def abort(self, reason: str) -> None:
        """Close the connection now, without waiting: every request in flight fails
        with :class:`~kgroup.errors.KafkaConnectionError` naming ``reason``, the
        reader task stops and closes the stream. Idempotent."""
        self._shut_down(reason)
        self._stop_reading()

    async def authentication_request(
        self, request: RequestPayload, *, timeout: float | None = None
    ) -> ResponsePayload:
        """As :meth:`request`, for an :data:`Authenticator`'s SaslHandshake / SaslAuthenticate.

        These go out while other requests are held back for a re-authentication.
        """
        if self._versions is not None:
            self._versions.check(request)
        return await self._request(
            request, self.request_timeout if timeout is None else timeout, auth=True
        )

    async def aclose(self) -> None:
        """Close the connection, failing every request still waiting. Idempotent."""
        self._shut_down("closed by the client")
        self._stop_reading()
        self._reauth_scope.cancel()
        with anyio.CancelScope(shield=True):
            if self._stream is not None:
                await self._stream.aclose()
            await self._reader_done.wait()

    # --- internals ----------------------------------------------------------------

    def _stop_reading(self) -> None:
        """End the reader: cancel the stream's reader task (it closes the stream), or
        abort the pipe (it reports the end, see _pipe_lost)."""
        if self._pipe is not None:
            self._pipe.abort()
        else:
            self._reader_scope.cancel()

    def _next_correlation_id(self) -> int:
        value = next(self._ids)
        if value >= _MAX_CORRELATION_ID:
            # Kafka's correlation id is an int32; wrap before it would overflow.
            self._ids = itertools.count(1)
            value = 0
        return value

    async def _request(
        self, request: RequestPayload, timeout: float, *, auth: bool = False
    ) -> ResponsePayload:
        if self._pipe is not None:
            return await self._pipe_request(request, timeout, auth)
        label = api_label(request)
        if self.closed:
            raise self._closed_error(label)
        correlation_id = self._next_correlation_id()
        frame = self._codec.encode(request, correlation_id)
        waiter = _InFlight(
            response_cls=apis.response_class(request.__api_key__, request.__version__),
            label=label,
            done=anyio.Event(),
        )
        self._in_flight[correlation_id] = waiter
        sent = anyio.current_time()
        try:
            with anyio.fail_after(timeout):
                while True:
                    busy = self._auth_busy
                    if busy is not None and not auth:
                        # A re-authentication is under way; the broker would read
                        # this request as a SASL message.
                        await busy.wait()
                        continue
                    async with self._write_lock:
                        if self._auth_busy is not None and not auth:
                            continue
                        await self._write(frame, label)
                    break
                assert isinstance(waiter.done, anyio.Event)
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
        return self._answer(waiter, sent, anyio.current_time())

    def _answer_error(self, waiter: _InFlight, now: float) -> KgroupError:
        """The error a finished request ended with (logged as :meth:`_answer` does)."""
        try:
            self._answer(waiter, waiter.sent, now)
        except KgroupError as exc:
            return exc
        raise AssertionError("the request had no error")

    def _answer(self, waiter: _InFlight, sent: float, now: float) -> ResponsePayload:
        if log.isEnabledFor(logging.DEBUG):
            # Where a rebalance's time goes: every request's round trip.
            log.debug(
                "%s: %s answered in %.1f ms%s",
                self,
                waiter.label,
                (now - sent) * 1000.0,
                "" if waiter.error is None else f" ({waiter.error})",
            )
        if waiter.error is not None:
            raise waiter.error
        assert waiter.response is not None
        return waiter.response

    async def _pipe_request(
        self, request: RequestPayload, timeout: float, auth: bool
    ) -> ResponsePayload:
        """:meth:`_request` on a pipe: the write never blocks and the response wakes
        this task from the loop's read callback; a timer of the loop, not a cancel
        scope, bounds the wait (see _expire)."""
        pipe, loop = self._pipe, self._loop
        assert pipe is not None
        assert loop is not None
        label = api_label(request)
        if self.closed:
            raise self._closed_error(label)
        correlation_id = self._next_correlation_id()
        frame = self._codec.encode(request, correlation_id)
        done: asyncio.Future[None] = loop.create_future()
        waiter = _InFlight(
            response_cls=apis.response_class(request.__api_key__, request.__version__),
            label=label,
            done=done,
        )
        self._in_flight[correlation_id] = waiter
        sent = loop.time()
        timer = loop.call_at(sent + timeout, self._expire, correlation_id, waiter, timeout)
        try:
            while not auth and not done.done() and (busy := self._auth_busy) is not None:
                # A re-authentication is under way; the broker would read this
                # request as a SASL message. The timer still bounds the wait.
                with anyio.move_on_after(sent + timeout - loop.time()):
                    await busy.wait()
                if loop.time() >= sent + timeout:
                    self._expire(correlation_id, waiter, timeout)
            if not done.done():
                if self.closed:
                    raise self._closed_error(label)
                try:
                    pipe.write(frame)
                except KafkaConnectionError:
                    self._shut_down("write failed: the socket is closed")
                    raise KafkaConnectionError(f"{label} to {self}: write failed") from None
            await done
        finally:
            timer.cancel()
            # From here on a response to this id is discarded as unknown.
            self._in_flight.pop(correlation_id, None)
        return self._answer(waiter, sent, loop.time())

    def _expire(self, correlation_id: int, waiter: _InFlight, timeout: float) -> None:
        """A pipe request's timer: no response in time closes the connection (see _request)."""
        if self._in_flight.pop(correlation_id, None) is None:
            return  # answered, failed or cancelled meanwhile
        waiter.error = RequestTimeoutError(
            f"{waiter.label} to {self}: no response within {timeout:g}s"
        )
        waiter.finish()
        self.abort(f"{waiter.label} timed out after {timeout:g}s")

    def _closed_error(self, label: str) -> KgroupError:
        if self._close_error is not None:
            return self._close_error
        return KafkaConnectionError(f"{label} to {self}: {self._close_reason}")

    async def _write(self, frame: bytes, label: str) -> None:
        if self.closed:
            raise self._closed_error(label)
        # A write cancelled half-way would leave a partial frame on the wire and
        # every later frame misread by the broker, so a write is never cancelled;
        # one that cannot finish in time ends the connection instead.
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(self.request_timeout) as scope:
                try:
                    assert self._stream is not None  # a pipe writes in _pipe_request
                    await self._stream.send(frame)
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                    self._shut_down(f"write failed: {exc!r}")
                    raise KafkaConnectionError(f"{label} to {self}: write failed") from exc
            if scope.cancelled_caught:
                self._shut_down("a write did not complete in time")
                self._stop_reading()
                raise KafkaConnectionError(f"{label} to {self}: write did not complete in time")

    async def _handshake(self) -> None:
        version = API_VERSIONS_FIRST_VERSION
        while True:
            request = api_versions_request(version, "kgroup", __version__)
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

    def _shut_down(self, reason: str, error: KgroupError | None = None) -> None:
        if self._state is ConnectionState.CLOSED:
            return
        self._state = ConnectionState.CLOSED
        self._close_reason = reason
        self._close_error = error
        self._reauth_scope.cancel()
        waiting = list(self._in_flight.values())
        self._in_flight.clear()
        if waiting:
            log.info("%s: %s; failing %d in-flight requests", self, reason, len(waiting))
        for waiter in waiting:
            waiter.error = error or KafkaConnectionError(f"{waiter.label} to {self}: {reason}")
            waiter.finish()

    def _closed_by_broker_reason(self) -> str:
        protocol = self._security.protocol
        if (
            self._versions is not None
            and self._answered == 0
            and not protocol.uses_sasl
            and self._state is ConnectionState.READY
        ):
            # A SASL listener answers ApiVersions, then drops any other request
            # that is not SASL: the usual sign of a missing SASL configuration.
            return (
                "connection closed by the broker after ApiVersions; if its listener uses "
                "SASL, set security.protocol=SASL_PLAINTEXT (or SASL_SSL) and sasl.mechanism"
            )
        return "connection closed by the broker"

    async def _reauthenticate_loop(self, authenticator: Authenticator, lifetime: float) -> None:
        with self._reauth_scope:
            while True:
                await anyio.sleep(lifetime * random.uniform(*_REAUTH_WINDOW))
                if self.closed:
                    return
                busy = anyio.Event()
                self._auth_busy = busy
                try:
                    async with self._write_lock:
                        pass  # a write in progress finishes first
                    renewed = await authenticator(self)
                except SecurityError as exc:
                    log.warning("%s: re-authentication failed: %s", self, exc)
                    self._shut_down(f"re-authentication failed: {exc}", exc)
                    self._stop_reading()
                    return
                except KgroupError as exc:
                    log.info("%s: re-authentication failed: %s", self, exc)
                    self._shut_down(f"re-authentication failed: {exc}")
                    self._stop_reading()
                    return
                finally:
                    self._auth_busy = None
                    busy.set()
                self.reauthentications += 1
                log.debug("%s: re-authenticated (session lifetime %.1fs)", self, renewed or 0.0)
                if not renewed:
                    return
                lifetime = renewed

    async def _read_loop(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            with self._reader_scope:
                task_status.started()
                try:
                    # Whatever arrived is read at once and split into frames here:
                    # asking the stream for the 4-byte prefix and then for the rest
                    # cost a second pass through the event loop for every response.
                    buffer = bytearray()
                    assert self._stream is not None  # only a stream has a reader task
                    receive = self._stream.receive
                    while True:
                        while len(buffer) < SIZE_PREFIX:
                            buffer += await receive()
                        size = self._payload_size(bytes(buffer[:SIZE_PREFIX]))
                        if size is None:
                            break
                        end = SIZE_PREFIX + size
                        while len(buffer) < end:
                            buffer += await receive()
                        payload = bytes(buffer[SIZE_PREFIX:end])
                        del buffer[:end]
                        self._dispatch(payload)
                except anyio.EndOfStream:
                    self._shut_down(self._closed_by_broker_reason())
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                    refusal = client_certificate_refusal(
                        f"{self.host}:{self.port}", exc, self._security
                    )
                    self._shut_down(str(refusal or f"connection lost: {exc!r}"), refusal)
                except Exception as exc:
                    # A reader that raised would tear down the owner's whole task
                    # group; failing this one connection is the contained outcome.
                    self._unreadable(exc)
        finally:
            self._shut_down("connection closed")
            with anyio.CancelScope(shield=True):
                assert self._stream is not None
                await self._stream.aclose()
            self._reader_done.set()

    def _payload_size(self, prefix: bytes) -> int | None:
        """The payload size a frame's 4-byte prefix announces; None when the bytes are
        a TLS record (a plaintext client on a TLS listener): the connection is shut
        down, saying so.

        Raises:
            KafkaProtocolError: the size is not one a broker sends.
        """
        if not self._security.protocol.uses_tls and looks_like_tls(prefix):
            broker = f"{self.host}:{self.port}"
            error = explain_tls_on_plaintext(broker, self._security.protocol)
            self._shut_down(str(error), error)
            return None
        return frame_size(prefix)

    def _unreadable(self, exc: Exception) -> None:
        """Reading failed with ``exc`` (call from its ``except`` block): end the connection."""
        if isinstance(exc, KafkaProtocolError):
            # A bad size prefix means framing is lost; nothing after it can be
            # read. A malformed response (see _dispatch) ends the connection too.
            self._shut_down(f"unreadable frame: {exc}")
            log.warning("%s: %s", self, exc)
        else:
            log.exception("%s: reader failed", self)
            self._shut_down(f"reader failed: {exc!r}")

    def _pipe_frames(self, view: memoryview, start: int, end: int) -> int:
        """The pipe's read callback (a :data:`~kgroup.transport._pipe.FrameSink`):
        dispatch every whole frame in ``view[start:end]``, return where the rest starts.

        As :meth:`_read_loop`, without a task: the response's request wakes here.
        """
        try:
            while end - start >= SIZE_PREFIX:
                size = self._payload_size(bytes(view[start : start + SIZE_PREFIX]))
                if size is None:
                    break
                stop = start + SIZE_PREFIX + size
                if stop > end:
                    return start
                payload = bytes(view[start + SIZE_PREFIX : stop])
                start = stop
                self._dispatch(payload)
            else:
                return start
        except Exception as exc:
            # Raised into the loop's callback it would only be logged by asyncio,
            # with the requests left waiting: fail this connection instead.
            self._unreadable(exc)
        # Nothing after a frame that ended the connection is read.
        self._stop_reading()
        return end

    def _pipe_lost(self, exc: BaseException | None) -> None:
        """The pipe's socket is gone (``exc`` None: closed by the broker, or by us)."""
        if exc is None:
            self._shut_down(self._closed_by_broker_reason())
        else:
            refusal = client_certificate_refusal(f"{self.host}:{self.port}", exc, self._security)
            self._shut_down(str(refusal or f"connection lost: {exc!r}"), refusal)
        self._reader_done.set()

    def _dispatch(self, payload: bytes) -> None:
        correlation_id = peek_correlation_id(payload)
        waiter = self._in_flight.pop(correlation_id, None)
        if waiter is None:
            # Its request timed out or was cancelled; the caller is gone.
            log.debug("%s: discarding response to correlation id %d", self, correlation_id)
            return
        try:
            waiter.response = self._codec.decode(payload, waiter.response_cls, correlation_id)
            if self._state is ConnectionState.READY:
                self._answered += 1
        except MalformedResponseError as exc:
            # Bytes that are not what a broker sends: whatever produced them (a
            # broken broker or proxy, corruption) may have garbled more than this
            # frame. The request fails retriably and the reader's handler of
            # KafkaProtocolError closes the connection, failing the others.
            error = MalformedResponseConnectionError(f"{exc}; closing {self}")
            error.__cause__ = exc
            waiter.error = error
            waiter.finish()
            raise
        waiter.finish()


async def open_connection(
    host: str,
    port: int,
    settings: ConnectionSettings,
    *,
    task_group: anyio.abc.TaskGroup,
    node_id: int | None = None,
) -> BrokerConnection:
    """:meth:`BrokerConnection.open` with the settings built once (by a client's pool)."""
    loop = None if settings.security.protocol.uses_tls else running_asyncio_loop()
    if loop is not None:
        pipe = await _connect_pipe(loop, host, port, settings.connect_timeout)
        conn = BrokerConnection(
            None, host=host, port=port, node_id=node_id, settings=settings, pipe=pipe
        )
        pipe.attach(conn._pipe_frames, conn._pipe_lost)
    else:
        stream = await open_stream(
            host,
            port,
            settings.security,
            timeout=settings.connect_timeout,
            ssl_context=settings.ssl_context,
        )
        conn = BrokerConnection(stream, host=host, port=port, node_id=node_id, settings=settings)
        await task_group.start(conn._read_loop)
    authenticator = settings.authenticator
    try:
        with anyio.fail_after(max(settings.connect_timeout, 0.001)):
            await conn._handshake()
            lifetime = await authenticator(conn) if authenticator is not None else None
    except TimeoutError:
        await conn.aclose()
        raise RequestTimeoutError(
            f"{conn}: the broker did not complete the connection handshake "
            f"(ApiVersions{' and authentication' if authenticator else ''}) "
            f"within {settings.connect_timeout:g}s"
        ) from None
    except BaseException:
        await conn.aclose()
        raise
    if authenticator is not None and lifetime:
        task_group.start_soon(conn._reauthenticate_loop, authenticator, lifetime)
    log.debug("connected to %s, versions %s", conn, dict(conn.versions.chosen))
    return conn


async def _connect_pipe(
    loop: asyncio.AbstractEventLoop, host: str, port: int, timeout: float
) -> Pipe:
    """A plaintext connection on asyncio, with :func:`open_stream`'s errors."""
    broker = f"{host}:{port}"
    try:
        with anyio.fail_after(timeout):
            return await open_pipe(loop, host, port)
    except TimeoutError:
        raise KafkaConnectionError(f"connecting to {broker} timed out after {timeout}s") from None
    except OSError as exc:
        raise KafkaConnectionError(f"connecting to {broker} failed: {exc}") from exc


@dataclass(eq=False, slots=True)
class _Connect(TaskGroupOwner[BrokerConnection]):
    """The async context manager :func:`connect` returns."""

    host: str
    port: int
    settings: ConnectionSettings
    _tasks: OwnedTaskGroup = field(default_factory=OwnedTaskGroup, init=False)
    _conn: BrokerConnection | None = field(default=None, init=False)

    async def _start(self, task_group: anyio.abc.TaskGroup) -> BrokerConnection:
        self._conn = await open_connection(
            self.host, self.port, self.settings, task_group=task_group
        )
        return self._conn

    async def _stop(self, exc: BaseException | None) -> None:
        if self._conn is not None:
            await self._conn.aclose()
        await self._tasks.leave()


def connect(
    host: str,
    port: int,
    *,
    client_id: str | None = CLIENT_ID.default,
    security: SecurityConfig | None = None,
    connect_timeout: float = _CONNECT_TIMEOUT,
    request_timeout: float = _REQUEST_TIMEOUT,
    authenticator: Authenticator | None = None,
) -> AbstractAsyncContextManager[BrokerConnection]:
    """A stand-alone :class:`BrokerConnection` with its own reader task, closed on exit.

    Use as ``async with connect(host, port) as conn``. Entering raises as
    :meth:`BrokerConnection.open`.
    """
    return _Connect(
        host,
        port,
        ConnectionSettings(
            client_id=client_id,
            security=security or SecurityConfig(),
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            authenticator=authenticator,
        ),
    )
