"""After close(), the async consumer raises ConsumerClosedError, as docs/consumer.md says."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from kgroup import AsyncConsumer, ConsumerClosedError
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

from .helpers import consumer_config

pytestmark = pytest.mark.anyio


async def test_every_method_but_close_and_the_views_raises_after_close(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 1)
    tp = TopicPartition("orders", 0)
    consumer = AsyncConsumer(consumer_config(broker, group_id), dataplane=broker.dataplane())
    async with consumer:
        consumer.subscribe(["orders"])
        await consumer.poll(0.05)
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: consumer.poll(0.01),
        lambda: consumer.consume(1, 0.01),
        consumer.commit,
        lambda: consumer.committed([tp]),
    ]
    for call in calls:
        with pytest.raises(ConsumerClosedError):
            await call()
    sync_calls: list[Callable[[], object]] = [
        lambda: consumer.subscribe(["orders"]),
        consumer.unsubscribe,
        lambda: consumer.seek(tp, 0),
        lambda: consumer.pause([tp]),
        lambda: consumer.resume([tp]),
        consumer.commit_async,
    ]
    for sync_call in sync_calls:
        with pytest.raises(ConsumerClosedError):
            sync_call()
    await consumer.close()  # idempotent
    assert consumer.assignment() == frozenset()
    assert consumer.position([tp]) == {}
