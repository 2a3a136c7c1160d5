"""kgroup.aiokafka without a broker: keyword mapping, refusals, errors, the listener contract."""

from __future__ import annotations

from typing import Any

import aiokafka.errors
import anyio
import pytest
from aiokafka.abc import ConsumerRebalanceListener as PeerListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.errors import KafkaError as PeerKafkaError
from aiokafka.structs import TopicPartition as PeerTopicPartition
from confluent_kafka import KafkaError
from error_helpers import refused_commit

import kgroup.aiokafka as facade
from kgroup import errors as kerrors
from kgroup.aiokafka import AIOKafkaConsumer, build_config
from kgroup.aiokafka.errors import PEER_ERROR_NAMES
from kgroup.types import TopicPartition as KTopicPartition


def test_aiokafka_defaults_map_to_classic_librdkafka_keys() -> None:
    config = build_config(bootstrap_servers=["a:1", "b:2"], group_id="g")
    assert config["bootstrap.servers"] == "a:1,b:2"
    assert config["group.id"] == "g"
    assert config["group.protocol"] == "classic"
    assert config["auto.offset.reset"] == "latest"
    assert config["enable.auto.commit"] is True
    assert config["session.timeout.ms"] == 10000
    assert config["heartbeat.interval.ms"] == 3000
    assert config["partition.assignment.strategy"] == "roundrobin"
    assert config["max.poll.interval.ms"] == 300000
    assert config["isolation.level"] == "read_uncommitted"
    assert "sasl.mechanism" not in config


def test_consumer_protocol_leaves_classic_only_defaults_to_the_broker() -> None:
    config = build_config(group_id="g", group_protocol="consumer")
    assert config["group.protocol"] == "consumer"
    assert "session.timeout.ms" not in config
    assert "heartbeat.interval.ms" not in config
    assert "partition.assignment.strategy" not in config


def test_a_classic_only_keyword_chosen_on_the_consumer_protocol_is_refused_by_name() -> None:
    with pytest.raises(aiokafka.errors.KafkaConfigurationError, match=r"session\.timeout\.ms"):
        AIOKafkaConsumer(group_id="g", group_protocol="consumer", session_timeout_ms=20000)


def test_aiokafka_assignor_classes_map_to_librdkafka_names() -> None:
    config = build_config(group_id="g", partition_assignment_strategy=(RangePartitionAssignor,))
    assert config["partition.assignment.strategy"] == "range"


def test_eager_sticky_assignor_is_refused() -> None:
    with pytest.raises(facade.UnsupportedByKgroupError, match="StickyPartitionAssignor"):
        build_config(group_id="g", partition_assignment_strategy=(StickyPartitionAssignor,))


def test_sasl_keywords_map_to_librdkafka_keys() -> None:
    config = build_config(
        group_id="g",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="u",
        sasl_plain_password="p",
    )
    assert config["security.protocol"] == "SASL_SSL"
    assert config["sasl.mechanism"] == "SCRAM-SHA-256"
    assert (config["sasl.username"], config["sasl.password"]) == ("u", "p")


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"group_id": None}, "group_id"),
        ({"rebalance_timeout_ms": 1000}, "rebalance_timeout_ms"),
        ({"consumer_timeout_ms": 50}, "consumer_timeout_ms"),
        ({"ssl_context": object()}, "ssl_context"),
        ({"api_version": "2.0.0"}, "api_version"),
        ({"exclude_internal_topics": False}, "exclude_internal_topics"),
        ({"sasl_kerberos_domain_name": "x"}, "sasl_kerberos_domain_name"),
        ({"sasl_oauth_token_provider": object()}, "sasl_oauth_token_provider"),
        ({"loop": object()}, "loop"),
    ],
)
def test_keywords_kgroup_cannot_honour_are_refused_by_name(
    keywords: dict[str, Any], named: str
) -> None:
    given = {"group_id": "g", **keywords}
    with pytest.raises(facade.UnsupportedByKgroupError, match=named) as caught:
        AIOKafkaConsumer(**given)
    assert isinstance(caught.value, aiokafka.errors.KafkaConfigurationError)


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="bogus"):
        AIOKafkaConsumer(group_id="g", bogus=1)


@pytest.mark.parametrize(
    ("keywords", "named"),
    [({"group_protocol": "eager"}, "group_protocol"), ({"auto_offset_reset": "x"}, "auto_offset")],
)
def test_invalid_values_are_configuration_errors(keywords: dict[str, Any], named: str) -> None:
    with pytest.raises(aiokafka.errors.KafkaConfigurationError, match=named):
        AIOKafkaConsumer(group_id="g", **keywords)


@pytest.mark.parametrize("name", PEER_ERROR_NAMES)
def test_facade_errors_are_caught_by_aiokafkas_classes(name: str) -> None:
    assert issubclass(getattr(facade, name), getattr(aiokafka.errors, name))


def test_the_facades_topic_partition_is_interchangeable_with_aiokafkas() -> None:
    ours, theirs = facade.TopicPartition("t", 1), PeerTopicPartition("t", 1)
    assert ours == theirs
    assert {ours: 5}[theirs] == 5


def test_a_listener_that_is_not_one_is_a_type_error() -> None:
    consumer = AIOKafkaConsumer(group_id="g")
    with pytest.raises(TypeError, match="ConsumerRebalanceListener"):
        consumer.subscribe(topics=["t"], listener=object())


def test_aiokafkas_own_listener_class_is_accepted() -> None:
    class Listener(PeerListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: set[Any]) -> None:
            pass

        def on_partitions_assigned(self, assigned: set[Any]) -> None:
            pass

    AIOKafkaConsumer(group_id="g").subscribe(topics=["t"], listener=Listener())


def test_subscribe_and_assign_exclude_each_other() -> None:
    consumer = AIOKafkaConsumer(group_id="g")
    consumer.subscribe(topics=["t"])
    with pytest.raises(aiokafka.errors.IllegalStateError):
        consumer.assign([PeerTopicPartition("t", 0)])


def test_calls_before_start_and_after_stop() -> None:
    consumer = AIOKafkaConsumer(group_id="g")

    async def run() -> None:
        with pytest.raises(aiokafka.errors.IllegalStateError, match="start"):
            await consumer.getone()
        await consumer.stop()
        with pytest.raises(aiokafka.errors.ConsumerStoppedError):
            await consumer.getone()

    anyio.run(run)


class Recorder(facade.ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, set[facade.TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[facade.TopicPartition]) -> None:
        self.calls.append(("revoked", revoked))

    async def on_partitions_assigned(self, assigned: set[facade.TopicPartition]) -> None:
        self.calls.append(("assigned", assigned))


A, B, C = (KTopicPartition("t", p) for p in range(3))
FA, FB, FC = (facade.TopicPartition("t", p) for p in range(3))


def _steps(deltas: bool) -> list[tuple[str, set[facade.TopicPartition]]]:
    listener = Recorder()
    adapter = facade._ListenerAdapter(AIOKafkaConsumer(group_id="g"), listener, deltas)

    async def run() -> None:
        await adapter.on_partitions_assigned(frozenset({A, B}))
        await adapter.on_partitions_revoked(frozenset({A}))
        await adapter.on_partitions_assigned(frozenset({C}))
        await adapter.on_partitions_lost(frozenset({B, C}))

    anyio.run(run)
    return listener.calls


def test_kgroup_deltas_become_aiokafkas_whole_sets_by_default() -> None:
    assert _steps(deltas=False) == [
        ("revoked", set()),
        ("assigned", {FA, FB}),
        ("revoked", {FA, FB}),
        ("assigned", {FB}),
        ("revoked", {FB}),
        ("assigned", {FB, FC}),
        ("revoked", {FB, FC}),  # lost: aiokafka's listener has no lost, it is revoked
        ("assigned", set()),
    ]


def test_rebalance_deltas_passes_only_what_changed() -> None:
    assert _steps(deltas=True) == [
        ("assigned", {FA, FB}),
        ("revoked", {FA}),
        ("assigned", {FC}),
        ("revoked", {FB, FC}),
    ]


def test_bootstrap_servers_default_to_port_9092_as_aiokafka() -> None:
    assert build_config(group_id="g")["bootstrap.servers"] == "localhost:9092"
    assert build_config(group_id="g", bootstrap_servers="a, b:1")["bootstrap.servers"] == (
        "a:9092,b:1"
    )


def test_kafka_config_adds_librdkafka_keys_after_the_keywords() -> None:
    consumer = AIOKafkaConsumer(
        group_id="g", kafka_config={"fetch.wait.max.ms": 50, "statistics.interval.ms": 1000}
    )
    assert consumer._config["fetch.wait.max.ms"] == 50
    assert consumer._config["statistics.interval.ms"] == 1000


@pytest.mark.parametrize(
    ("raised", "caught_as"),
    [
        (refused_commit(22), aiokafka.errors.CommitFailedError),
        (kerrors.NotAssignedError("t-0 not assigned"), aiokafka.errors.IllegalStateError),
        (kerrors.NothingToCommitError("none owned"), aiokafka.errors.IllegalStateError),
        (kerrors.RequestTimeoutError("commit: no answer"), aiokafka.errors.KafkaTimeoutError),
        (
            kerrors.DataPlaneError("offsets_for_times: timed out", KafkaError._TIMED_OUT),
            aiokafka.errors.KafkaTimeoutError,
        ),
        (
            kerrors.DataPlaneError("watermarks: brokers down", KafkaError._ALL_BROKERS_DOWN),
            aiokafka.errors.KafkaTimeoutError,
        ),
        (kerrors.DataPlaneError("list_topics: broken", KafkaError._TRANSPORT), PeerKafkaError),
        (kerrors.broker_error(30), aiokafka.errors.GroupAuthorizationFailedError),
        (kerrors.broker_error(29), aiokafka.errors.TopicAuthorizationFailedError),
        (kerrors.KafkaConnectionError("refused"), PeerKafkaError),
        (kerrors.ConfigError("bad"), aiokafka.errors.KafkaConfigurationError),
    ],
)
def test_kgroup_errors_come_out_as_the_aiokafka_class_an_application_catches(
    raised: kerrors.KgroupError, caught_as: type[BaseException]
) -> None:
    # aiokafka raises only its KafkaError tree from these calls: a ported
    # application's `except KafkaError` (or the specific class) must catch them.
    with pytest.raises(caught_as) as caught, facade._translated():
        raise raised
    assert isinstance(caught.value, PeerKafkaError)
    assert isinstance(caught.value, facade.KafkaError)
    assert caught.value.__cause__ is raised


def test_argument_errors_pass_through_the_facade() -> None:
    with pytest.raises(kerrors.InvalidSubscriptionError), facade._translated():
        raise kerrors.InvalidSubscriptionError("two regexes")
