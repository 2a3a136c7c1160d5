"""The retry backoff both membership machines use after a failed request.

Kafka's exponential backoff: the first retry waits ``retry.backoff.ms``, each
further attempt doubles it, a random factor (default in [0.8, 1.2)) spreads
members apart, and ``retry.backoff.max.ms`` caps the result.
"""

from __future__ import annotations

import random

__all__ = ["backoff_delay_ms", "default_jitter"]


def default_jitter() -> float:
    """Kafka's default random factor for one backoff: uniform in [0.8, 1.2)."""
    return random.uniform(0.8, 1.2)


def backoff_delay_ms(attempts: int, base_ms: int, max_ms: int, jitter: float) -> float:
    """The delay before retry number ``attempts`` (0 for the first retry), in milliseconds.

    ``base_ms * 2**attempts * jitter``, never more than ``max_ms``.
    """
    return min(base_ms * (1 << attempts) * jitter, float(max_ms))
