"""The virtual clock and event queue of the simulator.

Events are ``(time, seq, fn, arg)`` tuples in a heap; ``seq`` grows with every
schedule, so events due at the same virtual time run in the order they were
scheduled. No wall clock is ever read: a run is a pure function of its inputs.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

__all__ = ["EventQueue"]

Callback = Callable[[Any], None]


class EventQueue:
    """A heap of callbacks keyed by virtual time, with FIFO tie-breaking."""

    __slots__ = ("_heap", "_seq", "halted", "now", "steps")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callback, Any]] = []
        self._seq = 0
        self.now = 0.0
        self.steps = 0
        # Set by a callback to end run_until after the current event.
        self.halted = False

    def schedule(self, at: float, fn: Callback, arg: Any = None) -> None:
        """Run ``fn(arg)`` at virtual time ``at`` (never earlier than now)."""
        self._seq += 1
        heapq.heappush(self._heap, (at if at > self.now else self.now, self._seq, fn, arg))

    def after(self, delay: float, fn: Callback, arg: Any = None) -> None:
        """Run ``fn(arg)`` ``delay`` virtual seconds from now."""
        self.schedule(self.now + delay, fn, arg)

    def next_time(self) -> float | None:
        """When the next event is due, or None when nothing is scheduled."""
        return self._heap[0][0] if self._heap else None

    def run_until(self, until: float) -> None:
        """Run the events due up to ``until``; the clock then reads ``until``.

        Stops early, after the current event, when a callback sets ``halted``.
        """
        heap = self._heap
        pop = heapq.heappop
        steps = self.steps
        try:
            while heap and heap[0][0] <= until:
                at, _, fn, arg = pop(heap)
                self.now = at
                steps += 1
                fn(arg)
                if self.halted:
                    return
        finally:
            self.steps = steps
        self.now = max(self.now, until)
