"""confluent-kafka's ``DeserializingConsumer`` over :class:`kgroup.confluent.Consumer`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from confluent_kafka import Message
from confluent_kafka.error import ConsumeError, KeyDeserializationError, ValueDeserializationError
from confluent_kafka.serialization import MessageField, SerializationContext

from kgroup.confluent._consumer import Consumer

__all__ = ["DeserializingConsumer"]


class DeserializingConsumer(Consumer):
    """``Consumer`` whose ``poll()`` deserializes keys and values, as confluent-kafka's.

    ``key.deserializer`` / ``value.deserializer`` in the config are confluent
    ``Deserializer`` objects (or any ``f(data, ctx)``), called with a
    ``SerializationContext``. A failing one raises confluent-kafka's
    ``KeyDeserializationError`` / ``ValueDeserializationError`` carrying the
    message; an error message (EOF, poll interval) raises ``ConsumeError``.
    """

    def __init__(self, conf: Mapping[str, Any]) -> None:
        settings = dict(conf)
        self._key_deserializer = settings.pop("key.deserializer", None)
        self._value_deserializer = settings.pop("value.deserializer", None)
        super().__init__(settings)

    def poll(self, timeout: float | None = -1) -> Message | None:
        message = super().poll(timeout)
        if message is None:
            return None
        error = message.error()
        if error is not None:
            raise ConsumeError(error, kafka_message=message)
        topic = message.topic()
        assert topic is not None  # a record's, not an error's
        headers = message.headers()
        if self._value_deserializer is not None:
            context = SerializationContext(topic, MessageField.VALUE, headers)
            try:
                value = self._value_deserializer(message.value(), context)
            except Exception as exc:
                raise ValueDeserializationError(exception=exc, kafka_message=message) from exc
            message.set_value(value)
        if self._key_deserializer is not None:
            context = SerializationContext(topic, MessageField.KEY, headers)
            try:
                key = self._key_deserializer(message.key(), context)
            except Exception as exc:
                raise KeyDeserializationError(exception=exc, kafka_message=message) from exc
            message.set_key(key)
        return message

    def consume(self, num_messages: int = 1, timeout: float = -1) -> NoReturn:
        """Not available, as on confluent-kafka's ``DeserializingConsumer``: use ``poll()``."""
        raise NotImplementedError("DeserializingConsumer.consume() is not implemented; use poll()")
