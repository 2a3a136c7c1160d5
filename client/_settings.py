"""Reading a value of a user's config dict, shared by every dict kgroup takes.

A leaf module (stdlib and :mod:`kgroup.errors`): the consumer config, the
transport's security settings and the front end all read their booleans and
optional texts here, so one spelling is accepted everywhere and every refusal
reads the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgroup.errors import ConfigError

__all__ = ["bool_setting", "text_setting"]


def bool_setting(conf: Mapping[str, Any], key: str, default: bool) -> bool:
    """``conf[key]`` as a boolean, read as librdkafka reads it: a bool, the text
    ``true`` / ``t`` / ``1`` or ``false`` / ``f`` / ``0`` (any case), or the
    integer 1 or 0 (confluent-kafka passes ``str(value)`` on); ``default`` when
    absent. The one reading of a boolean setting for every config dict kgroup
    takes (consumer, security, front end).

    Raises:
        ConfigError: naming the key, for any other value.
    """
    value = conf.get(key, default)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, str | int) else None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{key} must be true or false, got {value!r}")


_TRUE = frozenset({"true", "t", "1"})
_FALSE = frozenset({"false", "f", "0"})


def text_setting(
    conf: Mapping[str, Any], key: str, *, echo: bool = True, strip: bool = True
) -> str | None:
    """``conf[key]`` as a non-empty text; None when absent.

    ``strip=False`` keeps surrounding spaces (they may be part of a password);
    ``echo=False`` keeps the value out of the error (the key may hold a secret).

    Raises:
        ConfigError: naming the key, for an empty text or a value of another type
            (the broker answers INVALID_REQUEST to empty instance and rack ids; an
            empty group id or bootstrap list is as unusable).
    """
    value = conf.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        shown = f"got {value!r}" if echo else "when set"
        raise ConfigError(f"{key} must be a non-empty string, {shown}")
    return value.strip() if strip else value
