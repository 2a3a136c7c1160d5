"""key.deserializer / value.deserializer: what the keys accept, and the error naming a record."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.serialization import StringDeserializer

from kgroup import AsyncConsumer, Consumer
from kgroup._frontend import Deserializers, build_config
from kgroup.errors import (
    ConfigError,
    DeserializationError,
    KeyDeserializationError,
    KgroupError,
    ValueDeserializationError,
)
from kgroup.types import TopicPartition

BASE = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}


def _callable(data: bytes | None, ctx: Any) -> object:
    return data


@pytest.mark.parametrize("name", ["key.deserializer", "value.deserializer"])
@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("utf_8", id="a string"),
        pytest.param(42, id="a number"),
        pytest.param(StringDeserializer, id="the class, not an instance"),
    ],
)
def test_a_value_that_is_no_deserializer_is_a_config_error_naming_the_key(
    name: str, bad: object
) -> None:
    with pytest.raises(ConfigError, match=f"^{name} must be a deserializer"):
        build_config({**BASE, name: bad})
    # Both consumers refuse it at construction, before connecting anywhere.
    with pytest.raises(ConfigError, match=name):
        Consumer({**BASE, name: bad})
    with pytest.raises(ConfigError, match=name):
        AsyncConsumer({**BASE, name: bad})


def test_deserializer_objects_and_callables_are_taken_and_kept_from_librdkafka() -> None:
    string = StringDeserializer("utf_8")
    conf = {**BASE, "key.deserializer": string, "value.deserializer": _callable}
    assert Deserializers.of(conf) == Deserializers(string, _callable)
    # librdkafka would refuse keys it does not know: they never reach the data plane.
    build_config(conf)
    assert not Deserializers.of(BASE)
    assert Deserializers.of({**BASE, "value.deserializer": None}) == Deserializers()


@pytest.mark.parametrize(
    ("cls", "field"), [(KeyDeserializationError, "key"), (ValueDeserializationError, "value")]
)
def test_the_error_names_the_record_and_how_to_skip_it(
    cls: type[DeserializationError], field: str
) -> None:
    cause = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    record = object()
    error = cls(TopicPartition("orders", 2), 41, record, cause)
    assert isinstance(error, DeserializationError)
    assert isinstance(error, KgroupError)
    assert error.field == field
    assert (error.topic_partition, error.offset, error.record, error.cause) == (
        TopicPartition("orders", 2),
        41,
        record,
        cause,
    )
    message = str(error)
    assert message.startswith(f"the {field} deserializer failed on orders-2 at offset 41: ")
    assert "invalid start byte" in message
    assert "seek(TopicPartition(topic='orders', partition=2), 42) skips it" in message
