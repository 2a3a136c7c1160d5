"""The group model's timers on the fake broker's real clock.

The model (:mod:`kgroup.testing.groups`) asks for a callback at a time and
reads the time from a clock; the simulator runs both in virtual time. The
fake keeps the callbacks in a heap that the broker's sweep runs when they are
due, and gives the model the latest time a request or the sweep brought in.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

__all__ = ["Timers"]


class Timers:
    """Callbacks by due time, and the clock the model reads. The broker's lock guards it."""

    def __init__(self, now: float) -> None:
        self.now = now
        self._heap: list[tuple[float, int, Callable[[Any], None], Any]] = []
        # Ties run in the order they were set, as the simulator's queue does.
        self._order = itertools.count()

    def schedule(self, at: float, callback: Callable[[Any], None], arg: Any) -> None:
        """Call ``callback(arg)`` once ``at`` has passed."""
        heapq.heappush(self._heap, (at, next(self._order), callback, arg))

    def clock(self) -> float:
        """The model's time: the latest the broker brought in."""
        return self.now

    def advance(self, now: float) -> None:
        """Move the clock to ``now`` (never back) without running anything."""
        self.now = max(self.now, now)

    def run_due(self, now: float) -> None:
        """Move the clock to ``now`` and run every callback due by then (they may set more)."""
        self.advance(now)
        while self._heap and self._heap[0][0] <= self.now:
            _, _, callback, arg = heapq.heappop(self._heap)
            callback(arg)
