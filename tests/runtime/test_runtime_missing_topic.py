"""A subscribed topic that does not exist is a WARNING, repeated with backoff (fake broker)."""

from __future__ import annotations

import itertools
import logging

import pytest

from kgroup import AsyncConsumer
from kgroup.dataplane import Record
from kgroup.protocol import ApiKey
from kgroup.runtime import topic_watch
from kgroup.testing.fake import FakeBroker

from .helpers import Recorder, consumer_config, drive, told

pytestmark = pytest.mark.anyio


def _warnings(caplog: pytest.LogCaptureFixture, topic: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and f"subscribed topic {topic} " in r.getMessage()
    ]


def test_the_waits_between_warnings_double_up_to_the_cap() -> None:
    delays = topic_watch.missing_topic_delays(*topic_watch.MISSING_TOPIC_WARNINGS)
    assert list(itertools.islice(delays, 9)) == [1, 2, 4, 8, 16, 32, 60, 60, 60]


async def test_a_missing_topic_is_warned_about_again_and_again_naming_what_to_do(
    broker: FakeBroker,
    group_id: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Shorter waits than the real 1 s, 2 s ...: the same code path, a fast test.
    monkeypatch.setattr(topic_watch, "MISSING_TOPIC_WARNINGS", (0.02, 0.04))
    caplog.set_level(logging.WARNING, logger="kgroup")
    async with AsyncConsumer(
        consumer_config(broker, group_id), dataplane=broker.dataplane()
    ) as consumer:
        consumer.subscribe(["no-such-topic"])
        await drive(consumer, until=lambda: len(_warnings(caplog, "no-such-topic")) >= 3)
    first = _warnings(caplog, "no-such-topic")[0]
    assert "does not exist or is not authorized" in first
    assert f"kgroup topics create no-such-topic --bootstrap-servers {broker.bootstrap_servers}" in (
        first
    )
    assert group_id in first


async def test_the_warnings_stop_once_the_topic_exists(
    broker: FakeBroker,
    group_id: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(topic_watch, "MISSING_TOPIC_WARNINGS", (0.02, 0.02))
    caplog.set_level(logging.WARNING, logger="kgroup")
    listener = Recorder()
    got: list[Record] = []
    async with AsyncConsumer(
        consumer_config(broker, group_id, **{"auto.offset.reset": "earliest"}),
        dataplane=broker.dataplane(),
    ) as consumer:
        consumer.subscribe(["late"], listener=listener)
        await drive(consumer, until=lambda: len(_warnings(caplog, "late")) >= 1)
        broker.create_topic("late", 1)
        broker.produce("late", 0, b"x")
        await drive(
            consumer,
            until=lambda: told(consumer, listener, 1) and len(got) == 1,
            sink={consumer: got},
        )
        # The watcher ends on its first look that finds the topic; one more
        # in flight at creation is the most there can be after it.
        settled = len(_warnings(caplog, "late"))
        for _ in range(20):
            await consumer.consume(1, 0.01)
        assert len(_warnings(caplog, "late")) == settled


async def test_an_existing_topic_is_not_warned_about(
    broker: FakeBroker, group_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    broker.create_topic("orders", 1)
    caplog.set_level(logging.WARNING, logger="kgroup")
    listener = Recorder()
    async with AsyncConsumer(
        consumer_config(broker, group_id), dataplane=broker.dataplane()
    ) as consumer:
        consumer.subscribe(["orders"], listener=listener)
        await drive(consumer, until=lambda: told(consumer, listener, 1))
    assert _warnings(caplog, "orders") == []


async def test_a_classic_leader_assigns_a_topic_created_after_it_subscribed_once_it_is_seen(
    broker: FakeBroker,
    group_id: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The missing-topic watch saw the topic appear, but the classic leader only
    # looked at metadata.max.age.ms (5 min): the topic waited for the stuck-group
    # repair's leave and rejoin, with its WARNING. Now the watch tells the leader.
    monkeypatch.setattr(topic_watch, "MISSING_TOPIC_WARNINGS", (0.02, 0.02))
    caplog.set_level(logging.WARNING, logger="kgroup")
    listener = Recorder()
    got: list[Record] = []
    config = consumer_config(
        broker, group_id, **{"group.protocol": "classic", "auto.offset.reset": "earliest"}
    )
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["late"], listener=listener)
        await drive(consumer, until=lambda: len(_warnings(caplog, "late")) >= 1)
        await drive(consumer, until=lambda: listener.of("assigned") == [frozenset()])
        broker.create_topic("late", 2)
        broker.produce("late", 0, b"x")
        await drive(
            consumer,
            until=lambda: told(consumer, listener, 2) and len(got) == 1,
            sink={consumer: got},
        )
        assert not broker.requests_of(ApiKey.LEAVE_GROUP), "assigned through the repair's leave"
