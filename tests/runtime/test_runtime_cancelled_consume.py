"""A cancelled ``AsyncConsumer.consume()`` loses no record.

``asyncio.wait_for(consumer.consume(...), t)`` and cancel scopes are the
common way to bound a wait in asyncio code. A cancellation that arrives
after the data plane handed records out, but before ``consume()`` returned
them, used to drop them: the position had moved past them, so the next
records came after a gap and every later commit covered records the
application never saw. Such records now go back to the data plane (as a
record a deserializer fails on does), and the next call returns them.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from typing import Any, cast

import anyio
import pytest

from kgroup import AsyncConsumer
from kgroup.dataplane import Record
from kgroup.runtime import DataPlaneInterface
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

from .helpers import DEADLINE, consumer_config

pytestmark = pytest.mark.anyio

RECORDS = 40
TP = TopicPartition("orders", 0)


class _CancellingDataPlane:
    """The fake data plane, with one armed take that cancels the consuming task.

    ``cancel`` is called with the records in hand, from the thread the take
    runs in: the event loop's for a non-blocking take, a worker's for a wait.
    """

    def __init__(self, inner: DataPlaneInterface) -> None:
        self._inner = inner
        self.armed_for_wait: bool | None = None  # None: disarmed
        self.cancel: Any = None
        self.cancelled_with: list[int] = []
        self.before_wait: Any = None
        """Called once at the start of the next take that may wait with a partition
        assigned (in its thread)."""

    def consume(self, max_records: int, timeout: float) -> list[Record]:
        if timeout > 0 and self.before_wait is not None and self._inner.assigned:
            before_wait, self.before_wait = self.before_wait, None
            before_wait()
        batch = self._inner.consume(max_records, timeout)
        if batch and self.armed_for_wait is not None and self.armed_for_wait == (timeout > 0):
            self.armed_for_wait = None
            self.cancelled_with = [r.offset() or 0 for r in batch]
            self.cancel()
        return batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _produce(broker: FakeBroker) -> None:
    for n in range(RECORDS):
        broker.produce("orders", 0, f"{n}".encode())


async def _consumer(
    broker: FakeBroker, group_id: str, *, records: bool = True
) -> tuple[AsyncConsumer, _CancellingDataPlane]:
    broker.create_topic("orders", 1)
    if records:
        _produce(broker)
    dataplane = _CancellingDataPlane(broker.dataplane())
    config = consumer_config(broker, group_id, **{"enable.auto.commit": False})
    consumer = AsyncConsumer(config, dataplane=cast(DataPlaneInterface, dataplane))
    return consumer, dataplane


async def _read_the_rest(consumer: AsyncConsumer, seen: list[int]) -> None:
    """Consume until every record was seen, or :data:`DEADLINE` (the caller asserts)."""
    with anyio.move_on_after(DEADLINE):
        while len(set(seen)) < RECORDS:
            seen.extend(r.offset() or 0 for r in await consumer.consume(5, 0.05))


async def test_records_in_hand_when_a_cancel_scope_ends_consume_are_handed_out_next(
    broker: FakeBroker, group_id: str
) -> None:
    consumer, dataplane = await _consumer(broker, group_id)
    seen: list[int] = []
    async with consumer:
        consumer.subscribe(["orders"])
        with anyio.fail_after(DEADLINE):
            while not seen:
                seen.extend(r.offset() or 0 for r in await consumer.consume(5, 0.05))
        # Records are buffered now: the next take is the non-blocking one, and
        # the cancellation is delivered at consume()'s own checkpoint after it.
        with anyio.CancelScope() as scope:
            dataplane.cancel = scope.cancel
            dataplane.armed_for_wait = False
            seen.extend(r.offset() or 0 for r in await consumer.consume(5, 0.05))
        assert scope.cancelled_caught
        assert dataplane.cancelled_with, "the armed take never ran"
        assert not set(dataplane.cancelled_with) & set(seen)
        await _read_the_rest(consumer, seen)
        assert sorted(set(seen)) == list(range(RECORDS))
        assert seen == sorted(seen), "records came out of order: some were skipped, then repeated"
        assert consumer.position([TP]) == {TP: RECORDS}
        assert await consumer.commit() == {TP: RECORDS}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_records_a_worker_took_for_a_task_cancelled_meanwhile_are_handed_out_next(
    broker: FakeBroker, group_id: str
) -> None:
    """asyncio's own cancellation (``Task.cancel``, as ``wait_for`` does) does not
    wait for the worker thread, whose result the cancelled future drops."""
    # The records come only once a wait has started: a take on the loop finds
    # none (with them buffered, every take could be one, and no wait would run).
    consumer, dataplane = await _consumer(broker, group_id, records=False)
    seen: list[int] = []
    async with consumer:
        consumer.subscribe(["orders"])
        await consumer.consume(1, 0)  # joins; nothing assigned yet, so no record taken
        loop = asyncio.get_running_loop()
        consuming = asyncio.current_task()
        assert consuming is not None
        delivered = threading.Event()

        def cancel_from_the_worker() -> None:
            # Runs in the worker, records in hand: the task is cancelled (and
            # has taken the CancelledError, queued behind it) before the
            # worker returns them.
            loop.call_soon_threadsafe(consuming.cancel)
            loop.call_soon_threadsafe(loop.call_soon, delivered.set)
            assert delivered.wait(DEADLINE)

        dataplane.cancel = cancel_from_the_worker
        dataplane.before_wait = functools.partial(_produce, broker)
        dataplane.armed_for_wait = True
        with anyio.fail_after(DEADLINE):
            while dataplane.armed_for_wait is not None:
                try:
                    seen.extend(r.offset() or 0 for r in await consumer.consume(5, 0.05))
                except asyncio.CancelledError:
                    consuming.uncancel()
                    break
        assert dataplane.cancelled_with, "the armed wait never ran"
        assert not set(dataplane.cancelled_with) & set(seen)
        await _read_the_rest(consumer, seen)
        assert sorted(set(seen)) == list(range(RECORDS))
        assert consumer.position([TP]) == {TP: RECORDS}
        assert await consumer.commit() == {TP: RECORDS}
