"""The telemetry.* configuration keys: off by default, one key turns it on, bad input is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kgroup.errors import ConfigError
from kgroup.telemetry import (
    CallbackSink,
    JsonLinesSink,
    SinkType,
    TelemetryEvent,
    is_telemetry_key,
    parse_telemetry_config,
)

BASE: dict[str, Any] = {"bootstrap.servers": "b1:9092,b2:9092", "group.id": "g"}


def test_off_by_default() -> None:
    assert parse_telemetry_config(BASE) is None
    assert parse_telemetry_config({**BASE, "telemetry.sink": "none"}) is None


def test_jsonl_sink(tmp_path: Path) -> None:
    config = parse_telemetry_config(
        {
            **BASE,
            "telemetry.sink": f"jsonl:{tmp_path}/",
            "telemetry.jsonl.max.bytes": "1000",
            "telemetry.jsonl.keep.files": 3,
            "telemetry.queue.size": 50,
        }
    )
    assert config is not None
    assert (config.sink, config.path) == (SinkType.JSONL, f"{tmp_path}/")
    assert (config.jsonl_max_bytes, config.jsonl_keep_files, config.queue_size) == (1000, 3, 50)
    sink = config.open_sink()
    assert isinstance(sink, JsonLinesSink)
    assert sink.path.parent == tmp_path
    sink.close()


def test_kafka_sink_inherits_bootstrap_and_security_keys() -> None:
    config = parse_telemetry_config(
        {
            **BASE,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "ssl.ca.location": "/ca.pem",
            "telemetry.sink": "kafka:kgroup-telemetry",
            "telemetry.kafka.linger.ms": 5,
            "telemetry.kafka.sasl.mechanism": "SCRAM-SHA-512",
        }
    )
    assert config is not None
    assert (config.sink, config.topic) == (SinkType.KAFKA, "kgroup-telemetry")
    assert dict(config.producer_config) == {
        "bootstrap.servers": "b1:9092,b2:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "ssl.ca.location": "/ca.pem",
        "linger.ms": "5",
    }


def test_kafka_sink_may_use_another_cluster() -> None:
    config = parse_telemetry_config(
        {"telemetry.sink": "kafka:t", "telemetry.kafka.bootstrap.servers": "other:9092"}
    )
    assert config is not None
    assert config.producer_config["bootstrap.servers"] == "other:9092"


def test_callback_alone_turns_telemetry_on() -> None:
    seen: list[TelemetryEvent] = []
    for conf in (
        {**BASE, "telemetry.callback": seen.append},
        {**BASE, "telemetry.sink": "callback", "telemetry.callback": seen.append},
    ):
        config = parse_telemetry_config(conf)
        assert config is not None
        assert config.sink is SinkType.CALLBACK
        assert isinstance(config.open_sink(), CallbackSink)


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"telemetry.sink": "jsonl"}, "must be 'jsonl:<file or directory/>'"),
        ({"telemetry.sink": "file:/tmp/x"}, "must be 'jsonl:"),
        ({"telemetry.sink": "kafka:"}, "names no target: give a topic name"),
        ({"telemetry.sink": "jsonl: "}, "names no target: give a file or directory path"),
        ({"telemetry.sink": 3}, "telemetry.sink must be a string"),
        ({"telemetry.sink": "callback"}, "needs a function in telemetry.callback"),
        ({"telemetry.callback": "print"}, "telemetry.callback must be callable"),
        (
            {"telemetry.sink": "jsonl:/tmp/x", "telemetry.callback": print},
            "one sink: remove one of them",
        ),
        ({"telemetry.sink": "none", "telemetry.callback": print}, "remove one of them"),
        ({"telemetry.sinks": "jsonl:/tmp/x"}, "unknown telemetry key 'telemetry.sinks'"),
        ({"telemetry.kafka.": "x"}, "unknown telemetry key"),
        ({"telemetry.jsonl.max.bytes": 5}, "only applies to telemetry.sink=jsonl"),
        (
            {"telemetry.sink": "kafka:t", "telemetry.jsonl.keep.files": 5},
            "telemetry.jsonl.keep.files only applies",
        ),
        ({"telemetry.sink": "jsonl:/x", "telemetry.kafka.acks": "1"}, "only applies to .*kafka"),
        (
            {"telemetry.sink": "callback", "telemetry.callback": print, "telemetry.queue.size": 1},
            "telemetry.queue.size only applies to telemetry.sink=jsonl or kafka",
        ),
        ({"telemetry.sink": "jsonl:/x", "telemetry.queue.size": 0}, "must be >= 1"),
        ({"telemetry.sink": "jsonl:/x", "telemetry.queue.size": "many"}, "must be an integer"),
        ({"telemetry.sink": "jsonl:/x", "telemetry.jsonl.max.bytes": -1}, "must be >= 0"),
        ({"telemetry.sink": "kafka:t"}, "needs bootstrap servers"),
    ],
)
def test_bad_config_names_the_key(conf: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_telemetry_config(conf)


def test_telemetry_keys_are_recognised_for_the_passthrough_filter() -> None:
    assert is_telemetry_key("telemetry.sink")
    assert is_telemetry_key("telemetry.kafka.linger.ms")
    assert not is_telemetry_key("bootstrap.servers")
