"""group.protocol=auto: the new protocol where the broker has it, classic where it does not.

The fallback runs against a dedicated broker whose new consumer protocol is
disabled (``group.coordinator.rebalance.protocols=classic``): once decided
before joining, and once when the first heartbeat is refused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import anyio
import pytest
from helpers import consumer_conf, produce, text

from kgroup import AsyncConsumer, Consumer, GroupProtocol
from kgroup.errors import KafkaConnectionError, UnsupportedVersionError
from kgroup.runtime import TransportInterface, choice
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.testing.topics import create_topic

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def classic_only_broker() -> Iterator[KafkaBroker]:
    with KafkaBroker(overrides={"group.coordinator.rebalance.protocols": "classic"}) as broker:
        yield broker


def test_auto_uses_the_new_protocol_on_a_4x_broker(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    values = produce(bootstrap, topic, 2, 20)
    with Consumer(consumer_conf(bootstrap, make_group_id(), group_protocol="auto")) as consumer:
        assert consumer.group_protocol is GroupProtocol.CONSUMER
        consumer.subscribe([topic])
        got: set[str] = set()
        deadline = time.monotonic() + 30
        while got != values and time.monotonic() < deadline:
            got.update(text(m) for m in consumer.consume(100, 0.2))
        assert got == values


def test_auto_falls_back_to_classic_with_a_warning(
    classic_only_broker: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    bootstrap = classic_only_broker.bootstrap_servers
    create_topic(bootstrap, "fallback", partitions=2)
    values = produce(bootstrap, "fallback", 2, 20)
    with (
        caplog.at_level(logging.WARNING, logger="kgroup"),
        Consumer(
            consumer_conf(
                bootstrap,
                "g-fallback",
                group_protocol="auto",
                heartbeat_interval_ms=500,
                session_timeout_ms=6000,
            )
        ) as consumer,
    ):
        assert consumer.group_protocol is GroupProtocol.CLASSIC
        assert any("falls back to the classic protocol" in r.message for r in caplog.records)
        consumer.subscribe(["fallback"])
        got: set[str] = set()
        deadline = time.monotonic() + 30
        while got != values and time.monotonic() < deadline:
            got.update(text(m) for m in consumer.consume(100, 0.2))
        assert got == values
        assert consumer.member_epoch > 0


def test_async_auto_falls_back_to_classic(classic_only_broker: KafkaBroker) -> None:
    bootstrap = classic_only_broker.bootstrap_servers

    async def main() -> GroupProtocol:
        consumer = AsyncConsumer(
            consumer_conf(bootstrap, "g-fallback-async", group_protocol="auto")
        )
        async with consumer:
            return consumer.group_protocol

    assert anyio.run(main) is GroupProtocol.CLASSIC


def test_consumer_protocol_on_a_classic_only_broker_is_a_typed_fatal_error(
    classic_only_broker: KafkaBroker,
) -> None:
    bootstrap = classic_only_broker.bootstrap_servers
    create_topic(bootstrap, "no-new-protocol", partitions=1)
    with Consumer(
        consumer_conf(bootstrap, "g-consumer-only", group_protocol="consumer")
    ) as consumer:
        consumer.subscribe(["no-new-protocol"])
        deadline = time.monotonic() + 20
        with pytest.raises(UnsupportedVersionError):  # noqa: PT012 - polls until it fails
            while time.monotonic() < deadline:
                consumer.poll(0.2)


def test_auto_falls_back_to_classic_when_the_first_heartbeat_is_refused(
    classic_only_broker: KafkaBroker,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before joining, auto asks the coordinator whether it takes the consumer
    # protocol. Leave that question unanswered, as when the cluster cannot be
    # asked in time: the consumer protocol is assumed, and the broker refuses
    # the first heartbeat with UNSUPPORTED_VERSION.
    async def unanswered(client: TransportInterface, group_id: str) -> str | None:
        raise KafkaConnectionError("no answer (test)")

    monkeypatch.setattr(choice, "probe", unanswered)
    bootstrap = classic_only_broker.bootstrap_servers
    create_topic(bootstrap, "refused-first", partitions=2)
    values = produce(bootstrap, "refused-first", 2, 20)
    conf = consumer_conf(
        bootstrap,
        "g-refused-first",
        group_protocol="auto",
        heartbeat_interval_ms=500,
        session_timeout_ms=6000,
    )
    with caplog.at_level(logging.WARNING, logger="kgroup"), Consumer(conf) as consumer:
        assumed = consumer.group_protocol
        consumer.subscribe(["refused-first"])
        got: set[str] = set()
        deadline = time.monotonic() + 30
        while got != values and time.monotonic() < deadline:
            got.update(text(m) for m in consumer.consume(100, 0.2))
        assert got == values
        assert (assumed, consumer.group_protocol) == (GroupProtocol.CONSUMER, GroupProtocol.CLASSIC)
        assert consumer.member_epoch > 0
        assert any("the first heartbeat was refused" in r.message for r in caplog.records)
