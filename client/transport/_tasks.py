"""A task group owned by an object rather than by a ``with`` block."""

from __future__ import annotations

import anyio
import anyio.abc

__all__ = ["OwnedTaskGroup"]


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
