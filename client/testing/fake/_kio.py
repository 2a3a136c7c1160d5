"""Requests as the fake broker sees them, and kio responses of whatever version they came in.

Fields differ between versions of one API (``throttle_time`` appears, names
become topic ids ...). :func:`make` takes the union of the fields the fake
knows and keeps those the version's class has, so one builder serves every
version the fake advertises.
"""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

__all__ = ["SeenRequest", "make", "millis", "respond", "timedelta_ms"]


@dataclass(frozen=True, slots=True)
class SeenRequest:
    """One request the broker received, as interception handlers and assertions see it.

    ``request`` is the decoded kio request of version ``version``; it is typed
    ``Any`` because its fields depend on that version.
    """

    node_id: int
    connection_id: int
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    request: Any = field(compare=False)
    at: float
    """When it arrived, on :func:`time.monotonic`'s clock."""


def make(module: ModuleType, name: str, /, **fields: Any) -> Any:
    """``module.name(**fields)``, leaving out the fields that version does not have."""
    cls = getattr(module, name)
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in known})


def respond(module: ModuleType, name: str, /, **fields: Any) -> Any:
    """A response ``module.name(**fields)``; the fake never throttles, so every
    response's ``throttle_time`` (where the version has one) is zero."""
    return make(module, name, throttle_time=timedelta_ms(0), **fields)


def timedelta_ms(value: int) -> datetime.timedelta:
    """A kio duration field of ``value`` milliseconds."""
    return datetime.timedelta(milliseconds=value)


def millis(value: datetime.timedelta) -> int:
    """A kio duration field in whole milliseconds."""
    return int(value.total_seconds() * 1000)
