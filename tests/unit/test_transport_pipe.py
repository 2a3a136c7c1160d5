"""The asyncio protocol under plaintext connections (kgroup.transport._pipe), fed by hand.

The transport is a stand-in that records writes; bytes arrive the way asyncio
delivers them to a buffered protocol: ``get_buffer``, then ``buffer_updated``.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from kgroup.errors import KafkaConnectionError
from kgroup.transport._pipe import Pipe, running_asyncio_loop


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class _Frames:
    """A sink that reads whole size-prefixed frames, as BrokerConnection's does."""

    def __init__(self) -> None:
        self.payloads: list[bytes] = []

    def __call__(self, view: memoryview, start: int, end: int) -> int:
        while end - start >= 4:
            (size,) = struct.unpack(">i", view[start : start + 4])
            if end - start < 4 + size:
                break
            self.payloads.append(bytes(view[start + 4 : start + 4 + size]))
            start += 4 + size
        return start


def _receive(pipe: Pipe, data: bytes, *, chunk: int | None = None) -> None:
    """Deliver ``data`` as asyncio would, at most ``chunk`` bytes (or a buffer's worth) a read."""
    while data:
        buffer = pipe.get_buffer(-1)
        n = min(len(buffer), len(data), chunk or len(data))
        buffer[:n] = data[:n]
        pipe.buffer_updated(n)
        data = data[n:]


def _pipe() -> tuple[Pipe, _Transport, _Frames, list[BaseException | None]]:
    pipe, transport, frames = Pipe(), _Transport(), _Frames()
    lost: list[BaseException | None] = []
    pipe.connection_made(transport)
    pipe.attach(frames, lost.append)
    return pipe, transport, frames, lost


def test_frames_split_across_reads_and_several_in_one_read() -> None:
    pipe, _, frames, _ = _pipe()
    data = _frame(b"first") + _frame(b"second") + _frame(b"")
    _receive(pipe, data, chunk=3)
    assert frames.payloads == [b"first", b"second", b""]
    _receive(pipe, _frame(b"x") + _frame(b"y"))
    assert frames.payloads[3:] == [b"x", b"y"]


def test_a_frame_larger_than_the_buffer_grows_it_then_memory_is_given_back() -> None:
    pipe, _, frames, _ = _pipe()
    first = len(pipe.get_buffer(-1))
    big = bytes(range(256)) * (3 * first // 256)
    _receive(pipe, _frame(b"small") + _frame(big) + _frame(b"after")[:3])
    assert frames.payloads == [b"small", big]
    _receive(pipe, _frame(b"after")[3:])
    assert frames.payloads[2] == b"after"
    assert len(pipe.get_buffer(-1)) == first  # back to its first size once read


def test_a_partial_frame_is_kept_at_the_front_when_the_buffer_fills() -> None:
    pipe, _, frames, _ = _pipe()
    size = len(pipe.get_buffer(-1))
    # Fill the buffer exactly: one frame, then the start of a next one that does
    # not fit behind it, but does once the unread bytes move to the front.
    head = _frame(b"a" * (size // 2))
    tail = _frame(b"b" * (size * 3 // 4))
    cut = size - len(head)
    _receive(pipe, head + tail[:cut])
    assert frames.payloads == [b"a" * (size // 2)]
    _receive(pipe, tail[cut:])
    assert frames.payloads[1] == b"b" * (size * 3 // 4)
    assert len(pipe.get_buffer(-1)) == size  # moved, not grown


def test_bytes_before_attach_are_kept_and_a_loss_before_attach_is_reported() -> None:
    pipe, transport, frames = Pipe(), _Transport(), _Frames()
    pipe.connection_made(transport)
    _receive(pipe, _frame(b"early"))
    error = ConnectionResetError("reset")
    pipe.connection_lost(error)
    lost: list[BaseException | None] = []
    pipe.attach(frames, lost.append)
    assert frames.payloads == [b"early"]
    assert lost == [error]


def test_write_goes_to_the_transport_until_it_closes() -> None:
    pipe, transport, _, lost = _pipe()
    pipe.write(b"frame")
    assert transport.written == [b"frame"]
    pipe.abort()
    assert transport.aborted
    with pytest.raises(KafkaConnectionError):
        pipe.write(b"more")
    pipe.connection_lost(None)
    assert lost == [None]


def test_running_asyncio_loop_only_inside_an_asyncio_task() -> None:
    assert running_asyncio_loop() is None

    async def inside() -> asyncio.AbstractEventLoop | None:
        return running_asyncio_loop()

    assert asyncio.run(inside()) is not None
