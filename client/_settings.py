"""Reading a value of a user's config dict, shared by every dict kgroup takes.

A leaf module (stdlib and :mod:`kgroup.errors`): the consumer config, the
transport's security settings and the front end all read their booleans here,
so one spelling is accepted everywhere and every refusal reads the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgroup.errors import ConfigError

__all__ = ["bool_setting"]


def bool_setting(conf: Mapping[str, Any], key: str, default: bool) -> bool:
    """``conf[key]`` as a boolean: a bool, or the text ``true`` / ``false`` (any case),
    as librdkafka reads it; ``default`` when absent. The one reading of a boolean
    setting for every config dict kgroup takes (consumer, security, front end).

    Raises:
        ConfigError: naming the key, for any other value.
    """
    value = conf.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{key} must be true or false, got {value!r}")
