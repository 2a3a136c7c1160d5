"""Building kio responses of whatever version a request came in.

Fields differ between versions of one API (``throttle_time`` appears, names
become topic ids ...). :func:`make` takes the union of the fields the fake
knows and keeps those the version's class has, so one builder serves every
version the fake advertises.
"""

from __future__ import annotations

import dataclasses
import datetime
from types import ModuleType
from typing import Any

__all__ = ["make", "millis", "timedelta_ms"]


def make(module: ModuleType, name: str, /, **fields: Any) -> Any:
    """``module.name(**fields)``, leaving out the fields that version does not have."""
    cls = getattr(module, name)
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in known})


def timedelta_ms(value: int) -> datetime.timedelta:
    """A kio duration field of ``value`` milliseconds."""
    return datetime.timedelta(milliseconds=value)


def millis(value: datetime.timedelta) -> int:
    """A kio duration field in whole milliseconds."""
    return int(value.total_seconds() * 1000)
