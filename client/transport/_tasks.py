"""A task group owned by an object rather than by a ``with`` block."""

from __future__ import annotations

from types import TracebackType
from typing import Generic, TypeVar

import anyio
import anyio.abc

__all__ = ["OwnedTaskGroup", "TaskGroupOwner"]

_T = TypeVar("_T")


class OwnedTaskGroup:
    """Enter a task group in one method and leave it in another.

    Meant for groups whose tasks never raise (connection readers catch
    everything): leaving cancels the tasks and exits the group *without* the
    owner's exception, which a task group would otherwise wrap in an
    ``ExceptionGroup`` and hand to callers who expect e.g. a
    ``NoBrokersAvailableError``. Enter and leave from the same task.
    """

    def __init__(self) -> None:
        self._manager: anyio.abc.TaskGroup | None = None

    async def enter(self) -> anyio.abc.TaskGroup:
        """Enter the task group and return it."""
        if self._manager is not None:
            raise RuntimeError("task group entered twice")
        manager = anyio.create_task_group()
        self._manager = await manager.__aenter__()
        return self._manager

    async def leave(self) -> None:
        """Cancel the group's tasks and wait for them. Idempotent."""
        manager, self._manager = self._manager, None
        if manager is None:
            return
        manager.cancel_scope.cancel()
        await manager.__aexit__(None, None, None)


class TaskGroupOwner(Generic[_T]):
    """An async context manager whose tasks live in an :class:`OwnedTaskGroup`.

    ``async with`` enters the group and hands it to :meth:`_start`, whose
    result is what the block gets; leaving the block, or a :meth:`_start` that
    raises, calls :meth:`_stop`, which closes what runs in the group and leaves
    it. The subclass provides ``_tasks``.
    """

    __slots__ = ()

    _tasks: OwnedTaskGroup

    async def __aenter__(self) -> _T:
        task_group = await self._tasks.enter()
        try:
            return await self._start(task_group)
        except BaseException as exc:
            await self._stop(exc)
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stop(exc)

    async def _start(self, task_group: anyio.abc.TaskGroup) -> _T:
        """Start what runs in ``task_group``; return what the ``async with`` block gets."""
        raise NotImplementedError

    async def _stop(self, exc: BaseException | None) -> None:
        """Close what runs in the group and leave it.

        ``exc`` is what ended the ``async with`` block or made :meth:`_start`
        fail; None when the block ended normally.
        """
        raise NotImplementedError
