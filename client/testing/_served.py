"""The life cycle the in-process servers share (the fake broker, the fault proxy).

Both listen from tasks of a task group they own while their ``async with``
block runs, and both can instead run on an event loop in a background thread
for the blocking consumer. This base owns that task group, the thread the
loop runs on and the portal into it; a server adds only what it starts
(:meth:`LoopServed._start`) and what it checks when it stops
(:meth:`LoopServed._stopped`).
"""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from types import TracebackType
from typing import Self

import anyio.abc
import anyio.from_thread

from kgroup.transport._tasks import OwnedTaskGroup

__all__ = ["LoopServed"]


class LoopServed(ABC):
    """A server whose tasks live in a task group entered by ``async with``."""

    def __init__(self) -> None:
        self._tasks = OwnedTaskGroup()
        self._tg: anyio.abc.TaskGroup | None = None
        """The running group (None outside the ``async with`` block)."""
        self._loop_thread: int | None = None
        """The thread of the event loop the server runs on."""
        self._portal: anyio.from_thread.BlockingPortal | None = None
        """Into that loop, while :meth:`running_in_thread` runs."""

    async def __aenter__(self) -> Self:
        if self._tg is not None:
            raise RuntimeError(f"a {type(self).__name__} can be entered only once")
        self._loop_thread = threading.get_ident()
        self._tg = await self._tasks.enter()
        try:
            await self._start(self._tg)
        except BaseException:
            self._tg = None
            await self._tasks.leave()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._tg is None:
            return
        self._tg = None
        await self._tasks.leave()
        self._stopped(exc)

    @contextlib.contextmanager
    def running_in_thread(self, backend: str = "asyncio") -> Iterator[Self]:
        """Serve from an event loop in a background thread while the block runs."""
        with (
            anyio.from_thread.start_blocking_portal(backend) as portal,
            portal.wrap_async_context_manager(self),
        ):
            self._portal = portal
            try:
                yield self
            finally:
                self._portal = None

    @abstractmethod
    async def _start(self, tg: anyio.abc.TaskGroup) -> None:
        """Open the listeners and start the tasks in ``tg`` (left again if this raises)."""

    def _stopped(self, exc: BaseException | None) -> None:  # noqa: B027 (optional hook)
        """Every task has ended; ``exc`` is what ends the ``async with`` block, if anything."""
