"""One share consumer behind one interface, whichever front end runs it.

The share consumer's real-broker tests run each scenario on the three front
ends a user can pick: :class:`kgroup.ShareConsumer` (its calls made from a
worker thread, as an application thread would make them) and
:class:`kgroup.AsyncShareConsumer` on asyncio and on trio. :func:`open_member`
hands a test the same async methods for all three, so a scenario is written
once; ``front`` is ``"threads"``, ``"asyncio"`` or ``"trio"`` and the test's
``anyio_backend`` must be the loop that front runs on (:func:`backend_of`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from typing import Any

from anyio import to_thread

import kgroup
from kgroup.admin.share import LOCK_DURATION, set_share_auto_offset_reset, set_share_group_config
from kgroup.transport.client import KafkaClient

FRONTS = ("threads", "asyncio", "trio")


def backend_of(front: str) -> str:
    """The anyio backend a test of ``front`` runs on (threads: asyncio drives the test)."""
    return "trio" if front == "trio" else "asyncio"


class Member:
    """A subscribed share consumer of either colour, with async methods."""

    def __init__(self, front: str, consumer: Any) -> None:
        self.front = front
        self.consumer = consumer
        self.received: list[kgroup.ShareRecord] = []
        """Every record a :meth:`consume` returned, in order."""

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.front == "threads":
            return await to_thread.run_sync(fn, *args)
        return await fn(*args)

    async def consume(self, num_messages: int, timeout: float) -> list[kgroup.ShareRecord]:
        batch: list[kgroup.ShareRecord] = await self._call(
            self.consumer.consume, num_messages, timeout
        )
        self.received += batch
        return batch

    def acknowledge(self, record: kgroup.ShareRecord, kind: kgroup.AcknowledgeType) -> None:
        self.consumer.acknowledge(record, kind)

    async def commit(self) -> Mapping[Any, kgroup.KgroupError | None]:
        result: Mapping[Any, kgroup.KgroupError | None] = await self._call(self.consumer.commit)
        return result

    def assignment(self) -> frozenset[kgroup.TopicPartition]:
        held: frozenset[kgroup.TopicPartition] = self.consumer.assignment()
        return held

    async def consume_until(
        self, done: Callable[[], bool], *, num_messages: int = 100, timeout: float = 0.2
    ) -> None:
        """Consume until ``done()`` holds (the caller bounds the time)."""
        while not done():
            await self.consume(num_messages, timeout)

    async def wait_assigned(self, poll: float = 0.1) -> None:
        """Consume (which runs the membership's callbacks) until partitions are assigned."""
        while not self.assignment():
            await self.consume(1, poll)


@asynccontextmanager
async def open_member(
    front: str, config: Mapping[str, Any], topics: Collection[str]
) -> AsyncIterator[Member]:
    """A share consumer of ``front`` subscribed to ``topics``, closed on exit."""
    if front == "threads":
        consumer = await to_thread.run_sync(lambda: kgroup.ShareConsumer(dict(config)))
        try:
            await to_thread.run_sync(consumer.subscribe, list(topics))
            yield Member(front, consumer)
        finally:
            await to_thread.run_sync(consumer.close)
        return
    async with kgroup.AsyncShareConsumer(dict(config)) as async_consumer:
        await async_consumer.subscribe(list(topics))
        yield Member(front, async_consumer)


async def prepare_group(bootstrap: str, group: str, *, lock_ms: int | None = None) -> None:
    """Start ``group`` at the log's beginning, with a record lock of ``lock_ms`` if given."""
    async with KafkaClient(bootstrap) as client:
        await set_share_auto_offset_reset(client, group, "earliest")
        if lock_ms is not None:
            await set_share_group_config(client, group, LOCK_DURATION, str(lock_ms))


def share_config(bootstrap: str, group: str, **settings: Any) -> dict[str, Any]:
    """A share consumer's config: ``settings`` use ``_`` for ``.`` in their keys."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group}
    config.update({k.replace("_", "."): v for k, v in settings.items()})
    return config


__all__ = [
    "FRONTS",
    "Member",
    "backend_of",
    "open_member",
    "prepare_group",
    "share_config",
]
