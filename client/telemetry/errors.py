"""Errors of :mod:`kgroup.telemetry`; all derive from :class:`kgroup.errors.KgroupError`.

Bad telemetry configuration raises :class:`kgroup.errors.ConfigError`, like any
other bad configuration.
"""

from __future__ import annotations

from kgroup.errors import KgroupError

__all__ = ["TelemetryDecodeError", "TelemetryError"]


class TelemetryError(KgroupError):
    """Something about telemetry went wrong (never raised into the consumer's hot path)."""


class TelemetryDecodeError(TelemetryError, ValueError):
    """A line or object is not a telemetry event this kgroup can read; the message says why."""
