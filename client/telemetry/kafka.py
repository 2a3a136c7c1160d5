"""A telemetry sink that produces events to a Kafka topic with confluent-kafka.

Imported only when a Kafka sink is configured, so ``import kgroup.telemetry``
does not load librdkafka.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import confluent_kafka

from kgroup.errors import ConfigError
from kgroup.telemetry.codec import encode
from kgroup.telemetry.events import TelemetryEvent
from kgroup.telemetry.sinks import DEFAULT_QUEUE_SIZE, QueuedSink

__all__ = ["PRODUCER_DEFAULTS", "KafkaTopicSink"]

_log = logging.getLogger("kgroup.telemetry")

PRODUCER_DEFAULTS: Mapping[str, str] = {
    "client.id": "kgroup-telemetry",
    # Batch: telemetry is many small records; 50 ms of latency costs nothing.
    "linger.ms": "50",
    "compression.type": "lz4",
    # Keep librdkafka's own buffer bounded too; the sink's queue absorbs bursts.
    "queue.buffering.max.messages": "100000",
    # A broker that stays away must not keep events (and memory) forever.
    "message.timeout.ms": "60000",
}
"""Producer settings the sink uses unless the configuration overrides them."""


class KafkaTopicSink(QueuedSink):
    """Produces each event as one JSON record to ``topic``, keyed by the group id.

    Keying by group keeps one group's events in one partition, in the order
    each member emitted them. ``producer_config`` is a confluent-kafka
    producer configuration and must include ``bootstrap.servers``.

    The background thread hands events to librdkafka, which batches them. If
    librdkafka's own buffer is full the thread waits for it (the consumer does
    not); meanwhile the sink's queue fills and further events are dropped and
    counted. Delivery failures are counted in ``stats.failed``.
    """

    def __init__(
        self,
        topic: str,
        producer_config: Mapping[str, object],
        *,
        queue_size: int = DEFAULT_QUEUE_SIZE,
    ) -> None:
        if not topic:
            raise ConfigError("the telemetry topic name must not be empty")
        if not producer_config.get("bootstrap.servers"):
            raise ConfigError(
                "the telemetry Kafka sink needs bootstrap.servers "
                "(telemetry.kafka.bootstrap.servers, or the consumer's bootstrap.servers)"
            )
        config: dict[str, Any] = {**PRODUCER_DEFAULTS, **producer_config}
        config["error_cb"] = self._on_error
        # librdkafka's own log lines (connection failures) go through logging,
        # not to stderr.
        config.setdefault("logger", logging.getLogger("kgroup.telemetry.producer"))
        try:
            self._producer = confluent_kafka.Producer(config)
        except confluent_kafka.KafkaException as exc:
            raise ConfigError(f"invalid telemetry producer configuration: {exc}") from exc
        self.topic = topic
        super().__init__(queue_size=queue_size, name="kafka")

    def _on_error(self, error: confluent_kafka.KafkaError) -> None:
        _log.debug("telemetry producer: %s", error)

    def _on_delivery(self, error: confluent_kafka.KafkaError | None, _msg: object) -> None:
        # Runs inside poll/flush, in the worker or in a thread calling flush().
        # A record is counted as written when librdkafka accepts it; one that
        # then fails moves from written to failed.
        if error is not None:
            with self._lock:
                self._written -= 1
                self._failed += 1
            _log.debug("telemetry record not delivered: %s", error)

    def _deliver(self, events: Sequence[TelemetryEvent]) -> int:
        accepted = 0
        for event in events:
            value = encode(event).encode("utf-8")
            key = event.header.group.encode("utf-8")
            while True:
                try:
                    self._producer.produce(self.topic, value, key, on_delivery=self._on_delivery)
                except BufferError:
                    if self._give_up():
                        return accepted
                    # librdkafka's buffer is full: wait here, in the worker.
                    self._producer.poll(0.05)
                    continue
                accepted += 1
                break
        self._producer.poll(0)
        return accepted

    def _idle_tick(self) -> None:
        self._producer.poll(0)

    def flush(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        if not super().flush(timeout):
            return False
        # Accepted by librdkafka is not yet acknowledged by the broker.
        remaining = self._producer.flush(max(0.0, deadline - time.monotonic()))
        return int(remaining) == 0

    def _release(self, timeout: float) -> None:
        remaining = int(self._producer.flush(timeout))
        if remaining:
            with self._lock:
                self._written -= remaining
                self._failed += remaining
            _log.warning(
                "telemetry sink closed with %d records to %s not acknowledged",
                remaining,
                self.topic,
            )

    def __repr__(self) -> str:
        return f"KafkaTopicSink({self.topic!r})"
