"""kgroup.confluent's translations that need no broker: config, errors."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from error_helpers import refused_commit

from kgroup import errors as kerrors
from kgroup.confluent import build_config, wants_eof
from kgroup.confluent._consumer import _translated as translated


def test_non_string_values_are_converted_with_str_as_confluent_does() -> None:
    group = uuid.uuid1()
    config = build_config({"group.id": group, "session.timeout.ms": 6000}, {})
    assert config["group.id"] == str(group)
    assert config["session.timeout.ms"] == "6000"


def test_booleans_become_librdkafka_booleans() -> None:
    config = build_config({"enable.auto.commit": False}, {"enable.auto.offset.store": True})
    assert config["enable.auto.commit"] == "false"
    assert config["enable.auto.offset.store"] == "true"


def test_callbacks_stay_objects() -> None:
    def on_commit(err: object, partitions: object) -> None:
        del err, partitions

    assert build_config({"on_commit": on_commit}, {})["on_commit"] is on_commit


def test_keywords_win_over_the_dict() -> None:
    assert build_config({"group.id": "a"}, {"group.id": "b"})["group.id"] == "b"


def test_max_poll_records_is_dropped_as_confluent_kafka_ignores_it() -> None:
    assert "max.poll.records" not in build_config({"max.poll.records": 100}, {})
    assert "max.poll.records" not in build_config({}, {"max.poll.records": "100"})


def test_group_protocol_defaults_to_classic_as_confluent() -> None:
    assert build_config({}, {})["group.protocol"] == "classic"
    assert build_config({"group.protocol": "consumer"}, {})["group.protocol"] == "consumer"


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (kerrors.ConfigError("bad key"), KafkaError._INVALID_ARG),
        # A commit the group moved on from: the broker's code, as librdkafka reports it.
        (refused_commit(KafkaError.ILLEGAL_GENERATION), KafkaError.ILLEGAL_GENERATION),
        (refused_commit(KafkaError.REBALANCE_IN_PROGRESS), KafkaError.REBALANCE_IN_PROGRESS),
        (refused_commit(KafkaError.FENCED_MEMBER_EPOCH), KafkaError.FENCED_MEMBER_EPOCH),
        (kerrors.CommitFailedError("no cause"), KafkaError._FAIL),
        # A lookup librdkafka failed keeps librdkafka's code (a timeout stays _TIMED_OUT).
        (
            kerrors.DataPlaneError("watermarks: timed out", KafkaError._TIMED_OUT),
            KafkaError._TIMED_OUT,
        ),
        (kerrors.DataPlaneError("no committed offset"), KafkaError._FAIL),
        (kerrors.NothingToCommitError("nothing"), KafkaError._NO_OFFSET),
        (kerrors.broker_error(KafkaError.ILLEGAL_GENERATION), KafkaError.ILLEGAL_GENERATION),
        (kerrors.broker_error(KafkaError.UNKNOWN_MEMBER_ID), KafkaError.UNKNOWN_MEMBER_ID),
        (kerrors.AlreadyAssignedError("twice"), KafkaError._CONFLICT),
        (kerrors.NotAssignedError("not ours"), KafkaError._INVALID_ARG),
        (kerrors.MixedAssignmentError("subscribed"), KafkaError._STATE),
        (kerrors.RequestTimeoutError("slow"), KafkaError._TIMED_OUT),
    ],
)
def test_kgroup_errors_are_kafka_exceptions_with_confluent_codes(
    error: kerrors.KgroupError, code: int
) -> None:
    with pytest.raises(KafkaException) as caught, translated():
        raise error
    assert caught.value.args[0].code() == code
    assert caught.value.__cause__ is error


def test_a_closed_consumer_is_runtime_error_as_confluent() -> None:
    with pytest.raises(RuntimeError, match="Consumer closed"), translated():
        raise kerrors.ConsumerClosedError("closed")


def test_argument_errors_pass_through() -> None:
    with pytest.raises(TypeError, match="bad"), translated():
        raise TypeError("bad")


def test_partition_eof_is_taken_out_of_kgroups_config() -> None:
    config = build_config({"enable.partition.eof": True}, {})
    assert wants_eof(config)
    assert "enable.partition.eof" not in config
    assert not wants_eof(build_config({}, {}))


def test_partition_eof_not_a_boolean_is_invalid_arg() -> None:
    with pytest.raises(KafkaException) as caught:
        wants_eof(build_config({"enable.partition.eof": "sometimes"}, {}))
    assert caught.value.args[0].code() == KafkaError._INVALID_ARG
