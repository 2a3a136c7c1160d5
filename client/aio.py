"""The async consumer: :class:`AsyncConsumer`, on anyio (asyncio and trio).

The group driver runs as a task in the consumer's own task group (entered by
``async with``); ``poll()`` / ``consume()`` take records from the data plane
without blocking the event loop: a non-blocking read first, then waits of at
most 100 ms in a worker thread, running queued rebalance work in between.
The rebalance work and the close loop are :class:`kgroup._frontend.FrontEndCore`'s;
this shell takes its steps with awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Self, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import confluent_kafka

from kgroup import _frontend as core
from kgroup._frontend import (
    LAPSED_WAIT,
    MIN_WAIT,
    SERVICE_SLICE,
    ConsumerBase,
    Offsets,
    Partitions,
)
from kgroup.dataplane import Record
from kgroup.errors import DeserializationError, KgroupError
from kgroup.runtime import DataPlaneInterface
from kgroup.runtime.driver import open_kafka_client
from kgroup.runtime.interfaces import TransportFactory
from kgroup.types import OffsetAndMetadata, TopicPartition

__all__ = ["AsyncConsumer"]

_T = TypeVar("_T")

YIELD_INTERVAL = 0.002
"""Longest time (seconds) ``consume()`` hands out buffered records without yielding to the loop."""


class _WorkerTake:
    """One data-plane wait run in a worker thread, keeping what it took.

    The result is kept here rather than only returned, so that a caller whose
    await was cancelled before the worker finished can still find the records.
    A cancellation can also come before the worker started (anyio checkpoints
    before it queues the call): :meth:`abandon` then makes sure it never runs.
    """

    def __init__(self, consume: Callable[[int, float], list[Record]]) -> None:
        self._consume = consume
        self._lock = threading.Lock()
        self._started = False
        self._abandoned = False
        self.batch: list[Record] = []
        self.finished = threading.Event()

    def __call__(self, num_messages: int, wait: float) -> list[Record]:
        with self._lock:
            if self._abandoned:
                return []
            self._started = True
        try:
            self.batch = self._consume(num_messages, wait)
            return self.batch
        finally:
            self.finished.set()

    def abandon(self) -> bool:
        """Whether the worker had not started (and now never takes anything)."""
        with self._lock:
            self._abandoned = not self._started
            return self._abandoned


class AsyncConsumer(ConsumerBase):
    """A Kafka consumer group member, async API.

    Consumer protocol (KIP-848) by default; ``group.protocol`` ``classic`` or ``auto``
    selects the classic protocol or the automatic choice (see :attr:`group_protocol`).

    Use it as ``async with AsyncConsumer(config) as consumer:`` (asyncio or
    trio); it connects on entry and leaves the group on exit. ``poll``,
    ``consume``, ``commit``, ``committed``, ``committed_with_metadata``,
    ``get_watermark_offsets``, ``offsets_for_times``, ``list_topics`` and
    ``close`` are awaited; the rest are plain methods. Listener methods may
    be plain or async; they run inside ``poll()`` / ``consume()`` /
    iteration / ``close()``. Records are
    ``confluent_kafka.Message`` objects, their ``key()`` / ``value()``
    deserialized by ``key.deserializer`` / ``value.deserializer`` if set.

    ``config`` is a dict of Kafka's dotted keys (``bootstrap.servers``,
    ``group.id``, ...); ``docs/configuration.md`` lists every key. Invalid
    config raises :class:`~kgroup.ConfigError` naming the key.

    ``dataplane`` and ``transport`` are testing seams (see ``docs/consumer.md``):
    the record fetcher (default: librdkafka) and the cluster client factory.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        dataplane: DataPlaneInterface | None = None,
        transport: TransportFactory = open_kafka_client,
    ) -> None:
        self._wake: anyio.Event | None = None
        self._now: Callable[[], float] = anyio.current_time
        super().__init__(config, dataplane, transport, wakeup=self._on_wakeup, clock=self._clock)
        self._exit: contextlib.AsyncExitStack | None = None
        self._last_yield = -math.inf

    def _clock(self) -> float:
        return self._now()

    def _on_wakeup(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _on_loop(self, fn: Callable[..., _T], *args: object) -> _T:
        # The application's loop is the driver's: a direct call.
        return self._driver.call_and_publish(fn, *args)

    async def _take(self, steps: core.Steps[_T]) -> _T:
        """Run a core generator, taking each step with an await where it needs one."""
        next_step = core.advance(steps, None)
        while not isinstance(next_step, core.Finished):
            next_step = core.advance(steps, await self._step(next_step))
        return next_step.value

    async def _step(self, step: core.Step) -> BaseException | None:
        if isinstance(step, core.OnLoop):
            self._driver.call_and_publish(step.fn, *step.args)
        elif isinstance(step, core.RunListener):
            try:
                result = step.method(step.partitions)
                if inspect.isawaitable(result):
                    await result
            except BaseException as exc:
                # A cancellation or KeyboardInterrupt too: the member must hear that
                # the callback ended; the front end raises it after telling it.
                return exc
        else:
            wake = self._wake
            if wake is not None:
                with anyio.move_on_after(step.timeout):
                    await wake.wait()
            self._wake = anyio.Event()
        return None

    # ------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        if self._exit is not None or self._core.closed:
            raise RuntimeError("an AsyncConsumer can be entered only once")
        self._wake = anyio.Event()
        with contextlib.suppress(RuntimeError):  # RuntimeError: not on asyncio (trio)
            # What anyio.current_time() returns on asyncio, without finding the
            # backend on every call: consume() reads the clock several times per
            # batch, and that lookup was most of its own cost.
            self._now = asyncio.get_running_loop().time
        async with contextlib.AsyncExitStack() as stack:
            tg = await stack.enter_async_context(anyio.create_task_group())
            # With group.protocol=auto this returns once the protocol is chosen.
            await tg.start(self._driver.run)
            # Running: the task group is left in __aexit__ (the stack left it on failure).
            self._exit = stack.pop_all()
        self._core.started()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            # Shielded (and bounded by close's own timeout): leaving the group
            # cleanly matters most when the body was cancelled.
            with anyio.CancelScope(shield=True):
                await self.close()
        finally:
            leave, self._exit = self._exit, None
            if leave is not None:
                self._driver.abort()
                await leave.aclose()

    async def close(self, timeout: float = 30.0) -> None:
        """Leave the group and release everything; as :meth:`kgroup.Consumer.close`."""
        front, driver = self._core, self._driver
        if not front.begin_close():
            return
        try:
            if self._exit is not None and not driver.is_closed():
                # Bounded here too: an async listener method that never returns
                # must not hold the close past its timeout.
                with anyio.move_on_after(timeout + 1.0):
                    await self._take(front.close(timeout))
                if front.overdue():
                    driver.abort()
                await driver.wait_closed(10.0)
        finally:
            front.end_close()
            self._dataplane.close()
            # Flushing the sink joins its writer thread: not on the event loop.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._telemetry.close)
        front.raise_interrupted()

    # ------------------------------------------------------------- identity

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions currently assigned to this member."""
        return self._driver.owned()

    # ---------------------------------------------------------------- records

    async def poll(self, timeout: float | None = None) -> Record | None:
        """One record, or None after ``timeout`` seconds (None: wait); as the blocking poll."""
        batch = await self.consume(1, -1 if timeout is None else timeout)
        return batch[0] if batch else None

    async def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Record]:
        """Up to ``num_messages`` records, waiting at most ``timeout`` s (< 0: no limit).

        Raises as the blocking ``consume()``, :class:`~kgroup.WakeupError` after :meth:`wakeup`,
        :class:`~kgroup.errors.DeserializationError` at a record a deserializer fails on.
        """
        if num_messages < 1:
            raise ValueError(f"num_messages must be >= 1, got {num_messages}")
        self._core.check_open()  # closed: ConsumerClosedError, as every other method
        if self._exit is None:
            raise RuntimeError("use the consumer as 'async with AsyncConsumer(config) as c'")
        try:
            return await self._consume(num_messages, timeout)
        except RuntimeError:
            # close() from a listener method or another task while this call ran:
            # librdkafka's handle says so with a bare RuntimeError. Raise it as
            # every call after close() does.
            self._core.check_open()
            raise

    async def _consume(self, num_messages: int, timeout: float) -> list[Record]:
        now = self._now()
        deadline = math.inf if timeout is None or timeout < 0 else now + timeout
        consume = self._dataplane.consume
        while True:
            # Checked every slice: a wakeup() ends a blocked call within ~100 ms.
            self._core.check_wakeup()
            try:
                if self._core.service_due():
                    await self._take(self._core.service(deadline - self._now()))
            except KgroupError:
                # Some errors come from every poll until the application acts (a
                # truncation waiting for a seek, a fatal error): one that catches
                # it and polls again must still let the loop run (heartbeats, the
                # runtime carrying out its seek), or it spins on the loop forever.
                await anyio.lowlevel.checkpoint()
                raise
            if self._core.session_lapsed():
                # Nothing taken from the data plane until the loop has acted (see
                # FrontEndCore.session_lapsed); records left there are not lost.
                await anyio.sleep(min(max(0.0, deadline - self._now()), LAPSED_WAIT))
                if deadline - self._now() < MIN_WAIT:
                    return []
                continue
            batch = consume(num_messages, 0)
            if batch:
                try:
                    await self._share_the_loop(now)
                except BaseException:
                    # Cancelled (asyncio.wait_for, a cancel scope) with records in
                    # hand: put them back, or the position (and every commit after
                    # it) would pass records the application never saw.
                    self._core.settle(batch, 0)
                    raise
                batch = await self._hand_out(batch)
                if batch:
                    self._telemetry.records_handed_out(len(batch))
                    return batch
                continue
            wait = min(deadline - self._now(), self._core.wait_slice())
            # librdkafka waits in whole milliseconds: a shorter wait would return
            # at once, and looping on it would spin until the deadline.
            if wait < MIN_WAIT:
                return []
            batch = await self._wait_for_records(num_messages, wait)
            self._last_yield = self._now()
            if batch:
                batch = await self._hand_out(batch)
            if batch:
                self._telemetry.records_handed_out(len(batch))
                return batch

    async def _wait_for_records(self, num_messages: int, wait: float) -> list[Record]:
        """Records from a data-plane wait of at most ``wait`` s, in a worker thread.

        Records the worker takes must reach the caller or go back: a cancelled
        caller (asyncio's own cancellation does not wait for the worker, whose
        result would be dropped) waits for the worker to finish, shielded (at
        most ``wait``), puts its records back and re-raises.
        """
        take = _WorkerTake(self._dataplane.consume)
        try:
            return await anyio.to_thread.run_sync(take, num_messages, wait)
        except BaseException:
            if not take.abandon():
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(take.finished.wait)
            if take.batch:
                self._core.settle(take.batch, 0)
            raise

    async def _hand_out(self, batch: list[Record]) -> list[Record]:
        """:meth:`FrontEndCore.hand_out`: settles ``batch``, returns the application's records."""
        try:
            return self._core.hand_out(batch)
        except DeserializationError:
            # Its records are back already. Raised by every poll until the
            # application seeks past the record: one that catches it and polls
            # again must still let the loop run (heartbeats), as for the errors
            # of service() above.
            await anyio.lowlevel.checkpoint()
            raise

    async def _share_the_loop(self, now: float) -> None:
        """Let the event loop run (heartbeats, commits) every few ms of handing out records.

        The driver runs on the application's own event loop. With records
        buffered, ``consume()`` returns without ever suspending, so an
        application that processes them without awaiting anything else would
        starve its own heartbeats until the broker fences it. A real yield costs
        a loop iteration, so it is made only every :data:`YIELD_INTERVAL`
        seconds; in between, only a pending cancellation is delivered.
        """
        if now - self._last_yield >= YIELD_INTERVAL:
            self._last_yield = now
            await anyio.lowlevel.checkpoint()
        else:
            await anyio.lowlevel.checkpoint_if_cancelled()

    def __aiter__(self) -> AsyncIterator[Record]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Record]:
        while not self._core.closed:
            batch = await self.consume(1, SERVICE_SLICE)
            if batch:
                yield batch[0]

    # --------------------------------------------------------------- offsets

    async def commit(
        self,
        offsets: core.CommitOffsets | Record | None = None,
        *,
        message: Record | None = None,
    ) -> dict[TopicPartition, int]:
        """Commit and wait; as :meth:`kgroup.Consumer.commit` (returns what was committed)."""
        chosen, metadata = self._commit_args(offsets, message)
        return await self._driver.commit(chosen, metadata=metadata)

    async def committed(
        self, partitions: Partitions, timeout: float = 10.0
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None: nothing committed) of ``partitions``."""
        return await self._committed_fetch(partitions, timeout)()

    async def committed_with_metadata(
        self, partitions: Partitions, timeout: float = 10.0
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """:meth:`committed`, each offset with the metadata committed with it ("" if none)."""
        return await self._committed_with_metadata_fetch(partitions, timeout)()

    # ------------------------------------------------------- cluster lookups
    # librdkafka's lookups block: they run in a worker thread, off the loop.

    async def get_watermark_offsets(
        self,
        partition: TopicPartition | confluent_kafka.TopicPartition,
        timeout: float | None = None,
        cached: bool = False,
    ) -> tuple[int, int]:
        """``(low, high)`` offsets; as :meth:`kgroup.Consumer.get_watermark_offsets`."""
        return await anyio.to_thread.run_sync(self._watermarks_lookup(partition, timeout, cached))

    async def offsets_for_times(
        self, partitions: Offsets, timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """Offsets by timestamp; as :meth:`kgroup.Consumer.offsets_for_times`."""
        return await anyio.to_thread.run_sync(self._offsets_for_times_lookup(partitions, timeout))

    async def list_topics(self, topic: str | None = None, timeout: float | None = None) -> Any:
        """Cluster metadata; as :meth:`kgroup.Consumer.list_topics`."""
        return await anyio.to_thread.run_sync(self._list_topics_lookup(topic, timeout))
