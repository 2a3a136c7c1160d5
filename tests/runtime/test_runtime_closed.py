"""After close(), the consumers raise ConsumerClosedError, as docs/consumer.md says; so
does a poll a listener method closed the consumer from."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from kgroup import AsyncConsumer, Consumer, ConsumerClosedError
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

from .helpers import DEADLINE, consumer_config

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


async def _poll_forever(consumer: AsyncConsumer) -> None:
    while True:
        await consumer.consume(10, 0.05)


def _poll_until_raised(consumer: Consumer) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        consumer.consume(10, 0.05)


class _ClosesInAssign:
    """A listener that closes its consumer from the assign callback."""

    def __init__(self) -> None:
        self.consumer: Any = None

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        if partitions:
            self.consumer.close()


class _ClosesInAssignAsync:
    def __init__(self) -> None:
        self.consumer: Any = None

    async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        if partitions:
            await self.consumer.close()


async def test_a_close_from_an_async_assign_callback_ends_the_poll_with_consumer_closed(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 1)
    broker.produce("orders", 0, b"x")
    listener = _ClosesInAssignAsync()
    async with AsyncConsumer(consumer_config(broker, group_id), dataplane=broker.dataplane()) as c:
        listener.consumer = c
        c.subscribe(["orders"], listener)
        with anyio.fail_after(DEADLINE), pytest.raises(ConsumerClosedError):
            await _poll_forever(c)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_close_from_a_blocking_assign_callback_ends_the_poll_with_consumer_closed(
    backend: str,
) -> None:
    # The poll went on to tell the loop the callback ended, through a portal
    # the close had stopped: a bare RuntimeError("This portal is not running").
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 1)
        broker.produce("orders", 0, b"x")
        listener = _ClosesInAssign()
        consumer = Consumer(
            consumer_config(broker, "closing"), backend=backend, dataplane=broker.dataplane()
        )
        listener.consumer = consumer
        consumer.subscribe(["orders"], listener)
        with pytest.raises(ConsumerClosedError):
            _poll_until_raised(consumer)
        consumer.close()
