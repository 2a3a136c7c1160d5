"""Telemetry: typed, versioned events of what a consumer's membership does.

Off by default; one config key turns it on (see :mod:`kgroup.telemetry.config`
and ``docs/telemetry.md``). Events are frozen dataclasses
(:mod:`kgroup.telemetry.events`) with a stable JSON Lines form
(:mod:`kgroup.telemetry.codec`); sinks (:mod:`kgroup.telemetry.sinks`) send
them to a callback, rotating JSON Lines files or a Kafka topic, never blocking
the consumer. ``kgroup report`` (:mod:`kgroup.report`) reads them.

The Kafka sink is loaded on first use, so importing this package does not load
librdkafka.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kgroup.errors import TelemetryDecodeError, TelemetryError
from kgroup.telemetry import events
from kgroup.telemetry.codec import HEADER_FIELDS, decode, encode, from_dict, to_dict
from kgroup.telemetry.config import (
    TELEMETRY_PREFIX,
    SinkType,
    TelemetryConfig,
    is_telemetry_key,
    parse_telemetry_config,
)
from kgroup.telemetry.emitter import TelemetryEmitter
from kgroup.telemetry.events import *  # noqa: F403
from kgroup.telemetry.metrics import ConsumerMetrics, LatencyHistogram
from kgroup.telemetry.sinks import (
    DEFAULT_QUEUE_SIZE,
    CallbackSink,
    JsonLinesSink,
    QueuedSink,
    SinkStats,
    TelemetrySink,
)

if TYPE_CHECKING:
    from kgroup.telemetry.kafka import KafkaTopicSink


def __getattr__(name: str) -> Any:
    if name == "KafkaTopicSink":
        value = importlib.import_module("kgroup.telemetry.kafka").KafkaTopicSink
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kgroup.telemetry' has no attribute {name!r}")


__all__ = [
    "DEFAULT_QUEUE_SIZE",
    "HEADER_FIELDS",
    "TELEMETRY_PREFIX",
    "CallbackSink",
    "ConsumerMetrics",
    "JsonLinesSink",
    "KafkaTopicSink",
    "LatencyHistogram",
    "QueuedSink",
    "SinkStats",
    "SinkType",
    "TelemetryConfig",
    "TelemetryDecodeError",
    "TelemetryEmitter",
    "TelemetryError",
    "TelemetrySink",
    "decode",
    "encode",
    "from_dict",
    "is_telemetry_key",
    "parse_telemetry_config",
    "to_dict",
]
__all__ += events.__all__
