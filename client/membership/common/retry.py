"""The retry delay both membership machines keep after failed requests."""

from __future__ import annotations

from collections.abc import Callable

from kgroup.types import Backoff

__all__ = ["RetryDelay"]

# Beyond this many attempts the delay is at its maximum anyway.
_MAX_ATTEMPTS = 32


class RetryDelay:
    """Consecutive failures and the time before which no request may be sent."""

    def __init__(self, backoff: Backoff, random: Callable[[], float]) -> None:
        self._backoff = backoff
        self._random = random
        self._attempts = 0
        self.until: float | None = None
        """No request before this monotonic time; None when no failure is pending."""

    def failed(self, now: float) -> None:
        """One more failure at ``now``: wait the next, longer, jittered delay."""
        delay = self._backoff.delay(self._attempts, self._random)
        self._attempts = min(self._attempts + 1, _MAX_ATTEMPTS)
        self.until = now + delay

    def reset(self) -> None:
        """A success (or a reason to retry at once): no delay, start again from the shortest."""
        self._attempts = 0
        self.until = None

    def holds(self, now: float) -> bool:
        """Whether a request at ``now`` must still wait."""
        return self.until is not None and now < self.until
