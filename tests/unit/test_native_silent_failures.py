"""Issue 34 item 4: the native API refuses what it used to ignore without a word.

A listener object with none of the listener methods was never called (the
application missed every rebalance); ``commit(offsets=...)`` that could commit
none of its partitions returned ``{}`` (the application believed its progress
saved). Both are errors now, on the fake cluster (no JVM).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import confluent_kafka
import pytest

from kgroup import AsyncConsumer, Consumer, TopicPartition
from kgroup.errors import NothingToCommitError
from kgroup.listener import check_listener
from kgroup.testing.fake import FakeBroker

pytestmark = pytest.mark.anyio

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)


class _OnlyLost:
    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        pass


def _plain_function(partitions: frozenset[TopicPartition]) -> None:
    pass


@pytest.mark.parametrize("listener", [_plain_function, object(), "on_partitions_assigned"])
def test_a_listener_with_none_of_the_methods_is_refused(listener: object) -> None:
    with pytest.raises(TypeError) as raised:
        check_listener(listener)
    for name in ("on_partitions_revoked", "on_partitions_assigned", "on_partitions_lost"):
        assert name in str(raised.value)


@pytest.mark.parametrize("listener", [None, _OnlyLost()])
def test_a_listener_with_one_method_or_none_at_all_is_taken(listener: object) -> None:
    check_listener(listener)  # no error


def _config(broker: FakeBroker) -> dict[str, object]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": "g",
        "enable.auto.commit": False,
    }


async def test_subscribe_refuses_a_plain_function_as_listener(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        broker.create_topic("orders", 2)
        async with AsyncConsumer(_config(broker), dataplane=broker.dataplane()) as consumer:
            with pytest.raises(TypeError, match="on_partitions_assigned"):
                consumer.subscribe(["orders"], listener=_plain_function)
            assert consumer.subscription() == []  # refused before anything changed


async def test_commit_of_offsets_neither_subscribed_nor_assigned_is_an_error(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker:
        broker.create_topic("orders", 2)
        async with AsyncConsumer(_config(broker), dataplane=broker.dataplane()) as consumer:
            with pytest.raises(NothingToCommitError, match="neither subscribed nor assigned"):
                await consumer.commit({TP0: 3})
            with pytest.raises(NothingToCommitError, match="neither subscribed nor assigned"):
                await consumer.commit([confluent_kafka.TopicPartition("orders", 0, 3)])
            with pytest.raises(NothingToCommitError, match="neither subscribed nor assigned"):
                consumer.commit_async({TP0: 3})
        assert broker.committed("g") == {}


async def test_commit_of_offsets_none_of_them_owned_is_an_error(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        broker.create_topic("orders", 2)
        async with AsyncConsumer(_config(broker), dataplane=broker.dataplane()) as consumer:
            consumer.assign([TP0])
            with pytest.raises(NothingToCommitError, match=r"owns none .*it owns: orders"):
                await consumer.commit({TP1: 3})
            # Some owned: those are committed, as before.
            assert await consumer.commit({TP0: 2, TP1: 3}) == {TP0: 2}
        assert broker.committed("g") == {TP0: 2}


def test_the_blocking_consumer_refuses_the_same() -> None:
    # The blocking consumer runs its own event loop in a thread; the fake
    # broker here runs on asyncio, one backend being enough for it.
    async def run(check: Callable[[FakeBroker], None]) -> None:
        async with FakeBroker() as broker:
            broker.create_topic("orders", 2)
            await anyio.to_thread.run_sync(check, broker)

    def check(broker: FakeBroker) -> None:
        with Consumer(_config(broker), dataplane=broker.dataplane()) as consumer:
            with pytest.raises(NothingToCommitError, match="neither subscribed nor assigned"):
                consumer.commit(offsets={TP0: 3})
            with pytest.raises(TypeError, match="on_partitions_revoked"):
                consumer.subscribe(["orders"], listener=_plain_function)

    anyio.run(run, check)
