"""confluent-kafka's callback settings: parsed into Callbacks, wired to librdkafka, adapted."""

from __future__ import annotations

import logging
from typing import Any

import confluent_kafka
import pytest
from error_helpers import refused_commit

from kgroup.config import Callbacks, ConsumerConfig
from kgroup.dataplane import librdkafka
from kgroup.dataplane.librdkafka import LIBRDKAFKA_LOGGER, commit_reporter, validate_passthrough
from kgroup.errors import ConfigError, RequestTimeoutError, broker_error
from kgroup.types import TopicPartition

BASE: dict[str, Any] = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"}


def _noop(*_args: object) -> None:
    pass


@pytest.mark.parametrize("key", ["error_cb", "stats_cb", "throttle_cb", "on_commit"])
def test_a_callback_is_kept_as_the_callable_and_never_reaches_librdkafkas_string_config(
    key: str,
) -> None:
    config = ConsumerConfig.from_dict(
        {**BASE, key: _noop}, validate_passthrough=validate_passthrough
    )
    assert getattr(config.callbacks, key) is _noop
    assert key not in config.passthrough


@pytest.mark.parametrize("key", ["error_cb", "stats_cb", "throttle_cb", "on_commit"])
def test_a_callback_that_is_not_callable_is_named_with_its_signature(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{key} must be a callable {key}\(.*got 'oops'"):
        ConsumerConfig.from_dict({**BASE, key: "oops"})


def test_logger_is_kept_as_the_object_and_debug_with_it_is_accepted() -> None:
    mine = logging.getLogger("app.kafka")
    config = ConsumerConfig.from_dict(
        {**BASE, "logger": mine, "debug": "consumer"}, validate_passthrough=validate_passthrough
    )
    assert config.callbacks.logger is mine
    assert "logger" not in config.passthrough
    assert config.passthrough["debug"] == "consumer"


def test_a_logger_without_a_log_method_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^logger must be a logging.Logger .*got 'x'"):
        ConsumerConfig.from_dict({**BASE, "logger": "x"})


def test_without_callbacks_librdkafka_logs_to_the_kgroup_dataplane_logger() -> None:
    conf = librdkafka._callback_config(Callbacks())
    assert conf == {"logger": LIBRDKAFKA_LOGGER}
    assert LIBRDKAFKA_LOGGER.name == "kgroup.dataplane.librdkafka"


def test_librdkafkas_callbacks_are_wired_and_their_exceptions_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[object] = []

    def throttle_cb(event: object) -> None:
        seen.append(event)
        raise RuntimeError("bug in the application's callback")

    conf = librdkafka._callback_config(Callbacks(throttle_cb=throttle_cb, stats_cb=seen.append))
    assert set(conf) == {"logger", "throttle_cb", "stats_cb"}
    conf["stats_cb"]('{"type": "consumer"}')
    with caplog.at_level(logging.ERROR, logger="kgroup.dataplane"):
        conf["throttle_cb"]("event")
    assert seen == ['{"type": "consumer"}', "event"]
    assert "the throttle_cb callback raised" in caplog.text


def test_on_commit_gets_none_and_confluent_kafka_partitions_on_success() -> None:
    calls: list[tuple[Any, list[confluent_kafka.TopicPartition]]] = []
    report = commit_reporter(lambda err, parts: calls.append((err, parts)))
    report({TopicPartition("t", 1): 7, TopicPartition("t", 0): 3}, None)
    [(err, parts)] = calls
    assert err is None
    assert [(p.topic, p.partition, p.offset) for p in parts] == [("t", 0, 3), ("t", 1, 7)]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (broker_error(25), 25),  # UNKNOWN_MEMBER_ID: the broker's own code
        (refused_commit(22), 22),  # a commit the group moved on from: ILLEGAL_GENERATION
        (RequestTimeoutError("no answer"), confluent_kafka.KafkaError._TIMED_OUT),
        (RuntimeError("other"), confluent_kafka.KafkaError._FAIL),
    ],
)
def test_on_commit_gets_a_kafka_error_on_failure(error: BaseException, code: int) -> None:
    calls: list[Any] = []
    report = commit_reporter(lambda err, parts: calls.append(err))
    report({TopicPartition("t", 0): 3}, error)
    [err] = calls
    assert isinstance(err, confluent_kafka.KafkaError)
    assert err.code() == code
    assert str(error) in err.str()
