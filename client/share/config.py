"""The share consumer's configuration: :class:`ShareConsumerConfig`.

A dict of Kafka's dotted keys, as for :class:`kgroup.Consumer`. The connection
keys (``bootstrap.servers``, ``client.id``, ``request.timeout.ms``,
``retry.backoff.ms``, ``retry.backoff.max.ms``,
``socket.connection.setup.timeout.ms``, ``security.protocol``, ``ssl.*``,
``sasl.*``, ``oauth_cb``, ``telemetry.*``) mean what they mean for the
consumer and are checked by the same code. The share keys:

| key | default | meaning |
| --- | --- | --- |
| ``group.id`` | required | the share group |
| ``share.acknowledgement.mode`` | ``implicit`` | ``implicit`` or ``explicit`` (below) |
| ``max.poll.records`` | 500 | records one consume may return (also a ShareFetch's max records) |
| ``fetch.max.wait.ms`` | 500 | how long a ShareFetch waits for records |
| ``fetch.min.bytes`` | 1 | bytes a ShareFetch waits for |
| ``fetch.max.bytes`` | 52428800 | bytes one ShareFetch may return |
| ``share.fetch.buffer.bytes`` | 67108864 | bytes held before fetching pauses |
| ``client.rack`` | none | the member's rack |
| ``max.poll.interval.ms`` | 300000 | the longest gap between consume calls |

``implicit``: each consume accepts the records the previous one returned;
``explicit``: acknowledge every record yourself before the next consume.
``share.fetch.buffer.bytes`` is the memory bound: no fetch starts while the
records held reach it. A member that does not consume for
``max.poll.interval.ms`` leaves the group until its next consume.

Keys that configure consumer groups, not share groups, are refused with what
to do instead (``auto.offset.reset`` is the group's
``share.auto.offset.reset``, set with
:func:`kgroup.admin.share.set_share_auto_offset_reset`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kgroup._settings import text_setting
from kgroup.config import ConsumerConfig
from kgroup.config_security import SECRET_KEYS, is_security_key
from kgroup.errors import ConfigError
from kgroup.telemetry.config import is_telemetry_key

__all__ = ["AcknowledgementModeSetting", "ShareConsumerConfig"]


class AcknowledgementModeSetting(enum.Enum):
    """``share.acknowledgement.mode``."""

    IMPLICIT = "implicit"
    EXPLICIT = "explicit"


_CONNECTION_KEYS = frozenset(
    {
        "bootstrap.servers",
        "group.id",
        "client.id",
        "client.rack",
        "max.poll.interval.ms",
        "request.timeout.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "socket.connection.setup.timeout.ms",
        "oauth_cb",
    }
)
"""Keys read as :class:`~kgroup.config.ConsumerConfig` reads them."""

_SHARE_INTS: Mapping[str, tuple[int, int]] = {
    "max.poll.records": (500, 1),
    "fetch.max.wait.ms": (500, 0),
    "fetch.min.bytes": (1, 1),
    "fetch.max.bytes": (52_428_800, 1),
    "share.fetch.buffer.bytes": (67_108_864, 1),
}
"""The share consumer's integer keys: default and minimum."""

_REFUSED: Mapping[str, str] = {
    "group.protocol": "a share consumer always uses the share group protocol (KIP-932); "
    "remove the key",
    "group.instance.id": "share groups have no static membership; remove the key",
    "group.remote.assignor": "the broker assigns share-group partitions "
    "(group.share.assignors, a broker setting); remove the key",
    "partition.assignment.strategy": "the broker assigns share-group partitions "
    "(group.share.assignors, a broker setting); remove the key",
    "enable.auto.commit": "share groups acknowledge records instead of committing offsets: "
    "use share.acknowledgement.mode (implicit accepts each batch at the next consume)",
    "auto.commit.interval.ms": "share groups acknowledge records instead of committing "
    "offsets: use share.acknowledgement.mode",
    "enable.auto.offset.store": "share groups acknowledge records instead of storing offsets: "
    "use share.acknowledgement.mode",
    "auto.offset.reset": "where a share group starts is the group's share.auto.offset.reset "
    "config: set it with kgroup.admin.share.set_share_auto_offset_reset(...)",
    "session.timeout.ms": "the share-group session timeout is the broker's "
    "group.share.session.timeout.ms; remove the key",
    "heartbeat.interval.ms": "the broker sets the share-group heartbeat interval "
    "(group.share.heartbeat.interval.ms); remove the key",
    "key.deserializer": "the share consumer hands out raw bytes; deserialize record.key() yourself",
    "value.deserializer": "the share consumer hands out raw bytes; deserialize "
    "record.value() yourself",
}


@dataclass(frozen=True, slots=True)
class ShareConsumerConfig:
    """A validated share consumer config. Build it with :meth:`from_dict`.

    ``connection`` is the consumer config of the same connection keys (the
    transport factory and the telemetry take it).
    """

    connection: ConsumerConfig
    acknowledgement_mode: AcknowledgementModeSetting = AcknowledgementModeSetting.IMPLICIT
    max_poll_records: int = 500
    fetch_max_wait_ms: int = 500
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 52_428_800
    share_fetch_buffer_bytes: int = 67_108_864

    @property
    def group_id(self) -> str:
        """The share group."""
        return self.connection.group_id

    @classmethod
    def from_dict(cls, conf: Mapping[str, Any]) -> ShareConsumerConfig:
        """Validate ``conf`` and build the config.

        Raises:
            ConfigError: naming the offending key and what to do about it.
        """
        connection: dict[str, Any] = {}
        for key, value in conf.items():
            if not isinstance(key, str):
                raise ConfigError(f"config keys must be strings, got {key!r}")
            if key in _REFUSED:
                raise ConfigError(f"{key} cannot be used with a share consumer: {_REFUSED[key]}")
            if (
                key in _CONNECTION_KEYS
                or is_security_key(key)
                or key in SECRET_KEYS
                or is_telemetry_key(key)
            ):
                connection[key] = value
            elif key not in _SHARE_INTS and key != "share.acknowledgement.mode":
                raise ConfigError(
                    f"{key} is not a share consumer config key: see kgroup.share.config "
                    "for the keys a share consumer takes"
                )
        ints = {key: _int(conf, key, default, low) for key, (default, low) in _SHARE_INTS.items()}
        mode_text = text_setting(conf, "share.acknowledgement.mode") or "implicit"
        try:
            mode = AcknowledgementModeSetting(mode_text.lower())
        except ValueError:
            raise ConfigError(
                f"share.acknowledgement.mode must be 'implicit' or 'explicit', got {mode_text!r}"
            ) from None
        return cls(
            connection=ConsumerConfig.from_dict(connection),
            acknowledgement_mode=mode,
            max_poll_records=ints["max.poll.records"],
            fetch_max_wait_ms=ints["fetch.max.wait.ms"],
            fetch_min_bytes=ints["fetch.min.bytes"],
            fetch_max_bytes=ints["fetch.max.bytes"],
            share_fetch_buffer_bytes=ints["share.fetch.buffer.bytes"],
        )


def _int(conf: Mapping[str, Any], key: str, default: int, minimum: int) -> int:
    value = conf.get(key, default)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ConfigError(f"{key} must be an integer, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key} must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{key} must be >= {minimum}, got {value}")
    return value
