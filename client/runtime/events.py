"""A member's event queue, shared by both sessions.

A deque and a wake-up call rather than a memory stream: a receive cut short
by the timer deadline could drop an event already handed to it, and a lost
event can stall the member.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["EventQueue"]

E = TypeVar("E")


class EventQueue(Generic[E]):
    """Events for one member, oldest first; ``wake`` runs on every post."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self._events: collections.deque[E] = collections.deque()
        self._wake = wake

    def post(self, event: E) -> None:
        """Queue ``event`` (event loop thread; never blocks)."""
        self._events.append(event)
        self._wake()

    def pop(self) -> E | None:
        """The oldest event, or None."""
        return self._events.popleft() if self._events else None

    def __bool__(self) -> bool:
        return bool(self._events)
