"""Kafka's exponential backoff: :class:`kgroup.types.Backoff`, re-exported.

The class lives in :mod:`kgroup.types` so that the sans-IO membership machines
(standard library and ``kgroup.types`` only) share it with the transport.
"""

from __future__ import annotations

from kgroup.types import Backoff

__all__ = ["Backoff"]
