"""The ``telemetry.*`` configuration keys: off by default, one key turns it on.

::

    telemetry.sink = "jsonl:/var/log/kgroup/"     # a directory: one file per consumer
    telemetry.sink = "jsonl:/var/log/kgroup/a.jsonl"
    telemetry.sink = "kafka:kgroup-telemetry"      # produce to this topic
    telemetry.callback = my_function               # a callable (telemetry.sink may be
                                                   # omitted or "callback")

Tuning keys (each an error when the sink they tune is not selected, so a
typo or a forgotten ``telemetry.sink`` is caught):

``telemetry.queue.size``
    events a file or Kafka sink buffers before dropping (default 10000).
``telemetry.jsonl.max.bytes``
    rotate a file when it reaches this size (default 64 MiB; 0: never).
``telemetry.jsonl.keep.files``
    rotated files to keep (default 20; 0: all).
``telemetry.kafka.<producer key>``
    any confluent-kafka producer setting for the Kafka sink. Unless given,
    ``bootstrap.servers`` and the ``security.*``, ``sasl.*`` and ``ssl.*``
    keys are the consumer's own (a consumer config renders every security
    setting, ``oauth_cb`` included, from its validated SecurityConfig).

:func:`parse_telemetry_config` validates the keys of a consumer config dict;
:func:`is_telemetry_key` tells the consumer's config which keys are not for
librdkafka.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kgroup.errors import ConfigError
from kgroup.telemetry.events import TelemetryEvent
from kgroup.telemetry.sinks import DEFAULT_QUEUE_SIZE, CallbackSink, JsonLinesSink, TelemetrySink

__all__ = [
    "TELEMETRY_PREFIX",
    "SinkType",
    "TelemetryConfig",
    "is_telemetry_key",
    "parse_telemetry_config",
]

TELEMETRY_PREFIX = "telemetry."
"""Every telemetry key starts with this; none of them is passed to librdkafka."""

_KAFKA_PREFIX = "telemetry.kafka."
_SHARED_PREFIXES = ("security.", "sasl.", "ssl.")
_DEFAULT_MAX_BYTES = 64 * 1024 * 1024
_DEFAULT_KEEP_FILES = 20


class SinkType(enum.Enum):
    """Where telemetry goes."""

    JSONL = "jsonl"
    KAFKA = "kafka"
    CALLBACK = "callback"


_TUNING: dict[str, frozenset[SinkType]] = {
    "telemetry.queue.size": frozenset({SinkType.JSONL, SinkType.KAFKA}),
    "telemetry.jsonl.max.bytes": frozenset({SinkType.JSONL}),
    "telemetry.jsonl.keep.files": frozenset({SinkType.JSONL}),
}
_KEYS = frozenset({"telemetry.sink", "telemetry.callback", *_TUNING})


def is_telemetry_key(key: str) -> bool:
    """Whether ``key`` belongs to telemetry (and must not reach the data plane)."""
    return key.startswith(TELEMETRY_PREFIX)


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetryConfig:
    """Validated telemetry settings. Build with :func:`parse_telemetry_config`."""

    sink: SinkType
    path: str | None = None
    """The JSON Lines file or directory (``SinkType.JSONL``)."""
    topic: str | None = None
    """The topic (``SinkType.KAFKA``)."""
    callback: Callable[[TelemetryEvent], object] | None = None
    """The function (``SinkType.CALLBACK``)."""
    queue_size: int = DEFAULT_QUEUE_SIZE
    jsonl_max_bytes: int = _DEFAULT_MAX_BYTES
    jsonl_keep_files: int = _DEFAULT_KEEP_FILES
    # Out of the repr: the producer settings hold the security keys, secrets
    # included (a consumer config's repr must never show a password).
    producer_config: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), repr=False
    )
    """The Kafka sink's producer settings (``SinkType.KAFKA``)."""
    oauth_cb: Callable[[str | None], Any] | None = field(default=None, repr=False)
    """The consumer's ``oauth_cb``, for a Kafka sink that authenticates with OAUTHBEARER."""

    def open_sink(self) -> TelemetrySink:
        """Create the configured sink (the Kafka one imports confluent-kafka only now).

        Raises:
            ConfigError: the file cannot be opened, or the producer settings are invalid.
        """
        if self.sink is SinkType.CALLBACK:
            assert self.callback is not None
            return CallbackSink(self.callback)
        if self.sink is SinkType.JSONL:
            assert self.path is not None
            return JsonLinesSink(
                self.path,
                max_bytes=self.jsonl_max_bytes,
                keep_files=self.jsonl_keep_files,
                queue_size=self.queue_size,
            )
        from kgroup.telemetry.kafka import KafkaTopicSink  # noqa: PLC0415 - loads librdkafka

        assert self.topic is not None
        producer: dict[str, object] = dict(self.producer_config)
        if self.oauth_cb is not None:
            producer["oauth_cb"] = self.oauth_cb
        return KafkaTopicSink(self.topic, producer, queue_size=self.queue_size)


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


def _sink_type(conf: Mapping[str, Any]) -> tuple[SinkType | None, str]:
    raw = conf.get("telemetry.sink")
    has_callback = conf.get("telemetry.callback") is not None
    if raw is None:
        return (SinkType.CALLBACK, "") if has_callback else (None, "")
    if not isinstance(raw, str):
        raise ConfigError(
            f"telemetry.sink must be a string like 'jsonl:/path' or 'kafka:topic', got {raw!r}; "
            "pass a function with telemetry.callback"
        )
    text = raw.strip()
    if text.lower() in ("", "none", "off"):
        if has_callback:
            raise ConfigError(
                f"telemetry.callback is set but telemetry.sink is {raw!r}; "
                "remove one of them (telemetry.sink may be omitted with a callback)"
            )
        return None, ""
    if text.lower() == "callback":
        if not has_callback:
            raise ConfigError("telemetry.sink=callback needs a function in telemetry.callback")
        return SinkType.CALLBACK, ""
    scheme, sep, rest = text.partition(":")
    try:
        sink = SinkType(scheme.strip().lower()) if sep else None
    except ValueError:
        sink = None
    if sink is None or sink is SinkType.CALLBACK:
        raise ConfigError(
            f"telemetry.sink must be 'jsonl:<file or directory/>', 'kafka:<topic>' or "
            f"'callback', got {raw!r}"
        )
    if not rest.strip():
        what = "a file or directory path" if sink is SinkType.JSONL else "a topic name"
        raise ConfigError(f"telemetry.sink={raw!r} names no target: give {what} after the colon")
    if has_callback:
        raise ConfigError(
            f"telemetry.callback is set but telemetry.sink is {raw!r}; kgroup sends "
            "telemetry to one sink: remove one of them"
        )
    return sink, rest.strip()


def parse_telemetry_config(conf: Mapping[str, Any]) -> TelemetryConfig | None:
    """Validate the ``telemetry.*`` keys of a consumer config; ``None`` when telemetry is off.

    Raises:
        ConfigError: an unknown ``telemetry.*`` key, a bad value, or a tuning key
            for a sink that is not selected; the message names the key.
    """
    for key in conf:
        if (
            isinstance(key, str)
            and is_telemetry_key(key)
            and key not in _KEYS
            and not (key.startswith(_KAFKA_PREFIX) and len(key) > len(_KAFKA_PREFIX))
        ):
            known = ", ".join(sorted(_KEYS))
            raise ConfigError(
                f"unknown telemetry key {key!r}; known: {known}, telemetry.kafka.<producer key>"
            )
    sink, target = _sink_type(conf)
    kafka_keys = [k for k in conf if isinstance(k, str) and k.startswith(_KAFKA_PREFIX)]
    for key, sinks in _TUNING.items():
        if key in conf and sink not in sinks:
            names = " or ".join(sorted(s.value for s in sinks))
            raise ConfigError(f"{key} only applies to telemetry.sink={names}:... sinks")
    if kafka_keys and sink is not SinkType.KAFKA:
        raise ConfigError(f"{kafka_keys[0]} only applies to telemetry.sink=kafka:<topic>")
    if sink is None:
        return None
    queue_size = _int(conf, "telemetry.queue.size", DEFAULT_QUEUE_SIZE, 1)
    if sink is SinkType.CALLBACK:
        callback = conf["telemetry.callback"]
        if not callable(callback):
            raise ConfigError(f"telemetry.callback must be callable, got {callback!r}")
        return TelemetryConfig(sink=sink, callback=callback)
    if sink is SinkType.JSONL:
        return TelemetryConfig(
            sink=sink,
            path=target,
            queue_size=queue_size,
            jsonl_max_bytes=_int(conf, "telemetry.jsonl.max.bytes", _DEFAULT_MAX_BYTES, 0),
            jsonl_keep_files=_int(conf, "telemetry.jsonl.keep.files", _DEFAULT_KEEP_FILES, 0),
        )
    producer: dict[str, str] = {}
    servers = conf.get("bootstrap.servers")
    if servers is not None:
        producer["bootstrap.servers"] = str(servers)
    for key, value in conf.items():
        if isinstance(key, str) and key.startswith(_SHARED_PREFIXES) and value is not None:
            producer[key] = str(value)
    for key in kafka_keys:
        producer[key.removeprefix(_KAFKA_PREFIX)] = str(conf[key])
    if not producer.get("bootstrap.servers"):
        raise ConfigError(
            "telemetry.sink=kafka:... needs bootstrap servers: set bootstrap.servers "
            "or telemetry.kafka.bootstrap.servers"
        )
    return TelemetryConfig(
        sink=sink,
        topic=target,
        queue_size=queue_size,
        producer_config=MappingProxyType(producer),
    )
