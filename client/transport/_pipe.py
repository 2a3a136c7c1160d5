"""A plaintext connection's bytes on asyncio, without a reader task.

On asyncio a :class:`~kgroup.transport.BrokerConnection` to a plaintext
listener (``PLAINTEXT`` or ``SASL_PLAINTEXT``) runs on an
:class:`asyncio.Protocol`: every chunk the socket delivers is split into
frames inside the event loop's read callback, and each frame is handed to the
connection there, which wakes the request waiting for it. Writes are the
transport's own (they never block: the transport buffers what the socket does
not take at once).

Through an anyio byte stream the same round trip took three more passes
through the event loop (the reader task's wake-up, the writer's checkpoint
after the write, the heartbeat task's wake-up by the reader) and two more
system calls (the stream resumes and pauses reading around every wait), which
was most of an idle member's CPU between heartbeats. TLS connections and
every connection on trio keep the anyio stream and its reader task: asyncio's
own TLS reports alerts and unclean closes differently, and those are what the
TLS error messages are built from.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kgroup.errors import KafkaConnectionError

__all__ = ["FrameSink", "Pipe", "open_pipe", "running_asyncio_loop"]

FrameSink = Callable[[memoryview, int, int], int]
"""Called with the receive buffer and the span of bytes received and not yet read
(``start``, ``end``); reads the whole frames at the front and returns where the
unread bytes now start."""

_INITIAL_BUFFER = 64 * 1024
"""Bytes the receive buffer starts with; it doubles for a larger frame and shrinks
back once that frame is read."""


def running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running event loop when the caller is a task of asyncio's own loop, else None.

    None on trio, also when trio runs as a guest on an asyncio loop (its code
    then runs in the loop's callbacks, never in an asyncio task), where
    asyncio transports must not be used; and on other loop implementations
    (uvloop ...), whose connection options differ: those keep anyio's streams.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    if not isinstance(loop, asyncio.BaseEventLoop) or asyncio.current_task(loop) is None:
        return None
    return loop


class Pipe(asyncio.BufferedProtocol):
    """One TCP connection's protocol: bytes in to a :data:`FrameSink`, bytes out.

    The socket reads into one buffer kept for the connection's life: asyncio's
    plain protocols allocate 256 KiB for every read (a memory map and unmap per
    heartbeat answer). Until :meth:`attach` names the sink, received bytes are
    kept (a broker speaks only when asked, so nothing is expected before).
    """

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray(_INITIAL_BUFFER)
        self._view = memoryview(self._buffer)
        self._start = 0  # received bytes not read yet: [_start, _end)
        self._end = 0
        self._sink: FrameSink | None = None
        self._on_lost: Callable[[BaseException | None], None] | None = None
        self._lost_error: BaseException | None = None
        self._gone = False

    # --- asyncio.BufferedProtocol --------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._end == len(self._buffer):
            self._make_room()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        if self._sink is not None:
            self._read()

    def eof_received(self) -> bool:
        return False  # the transport closes itself; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone = True
        self._lost_error = exc
        if self._on_lost is not None:
            self._on_lost(exc)

    # --- the buffer ----------------------------------------------------------------

    def _make_room(self) -> None:
        """The buffer is full: move the unread bytes to its front, or double it.

        Never resized in place: the transport may still hold a view of it.
        """
        start, end = self._start, self._end
        if start:
            self._buffer[: end - start] = self._view[start:end]
        else:
            bigger = bytearray(2 * len(self._buffer))
            bigger[:end] = self._view[:end]
            self._buffer, self._view = bigger, memoryview(bigger)
        self._start, self._end = 0, end - start

    def _read(self) -> None:
        assert self._sink is not None
        start = self._sink(self._view, self._start, self._end)
        if start < self._end:
            self._start = start
            return
        self._start = self._end = 0
        if len(self._buffer) > _INITIAL_BUFFER:
            # A large response is read: give its memory back.
            self._buffer = bytearray(_INITIAL_BUFFER)
            self._view = memoryview(self._buffer)

    # --- for the connection --------------------------------------------------------

    def attach(self, sink: FrameSink, on_lost: Callable[[BaseException | None], None]) -> None:
        """Hand received bytes to ``sink`` from now on, and the end of the connection
        (None: closed by the peer or by :meth:`abort`; else the socket's error) to
        ``on_lost``."""
        self._sink = sink
        self._on_lost = on_lost
        if self._end > self._start:
            self._read()
        if self._gone:
            on_lost(self._lost_error)

    @property
    def closing(self) -> bool:
        """The transport is closed or closing: writes are dropped."""
        return self._gone or self._transport is None or self._transport.is_closing()

    def write(self, frame: bytes) -> None:
        """Queue ``frame`` on the socket (the transport sends what it can at once).

        Raises:
            KafkaConnectionError: the connection is closed.
        """
        if self.closing:
            raise KafkaConnectionError("the connection is closed")
        assert self._transport is not None
        self._transport.write(frame)

    def abort(self) -> None:
        """Close at once, dropping unsent bytes; ``on_lost(None)`` follows. Idempotent."""
        if self._transport is not None and not self._transport.is_closing():
            self._transport.abort()


async def open_pipe(loop: asyncio.AbstractEventLoop, host: str, port: int) -> Pipe:
    """Connect to ``host:port`` (each resolved address in turn, a second one
    started 250 ms after the first as RFC 8305 suggests); the caller bounds the time.

    Raises:
        OSError: no address accepted the connection.
    """
    _, pipe = await loop.create_connection(Pipe, host, port, happy_eyeballs_delay=0.25)
    return pipe
