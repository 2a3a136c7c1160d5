"""The async consumer: :class:`AsyncConsumer`, on anyio (asyncio and trio).

The group runtime runs as a task in the consumer's own task group (entered by
``async with``); ``poll()`` / ``consume()`` take records from the data plane
without blocking the event loop: a non-blocking read first, then waits of at
most 100 ms in a worker thread, running queued rebalance work in between.
"""

from __future__ import annotations

import inspect
import logging
import math
import re
from collections.abc import AsyncIterator, Collection, Mapping
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc

from kgroup._frontend import (
    POLL_EVENT_INTERVAL,
    SERVICE_SLICE,
    ConsumerClosedError,
    ConsumerViews,
    Subscription,
    build_config,
    commit_offsets_arg,
    parse_subscription,
)
from kgroup.classic_runtime import choose_group_protocol, runtime_class
from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.dataplane import DataPlane, Record
from kgroup.listener import RebalanceListener, listener_method
from kgroup.runtime import (
    CallbackWork,
    CommitCallback,
    CommitResultWork,
    ErrorWork,
    RevocationCommitWork,
    Runtime,
)
from kgroup.types import TopicPartition

__all__ = ["AsyncConsumer"]

log = logging.getLogger("kgroup.consumer")


class AsyncConsumer(ConsumerViews):
    """A Kafka consumer group member, async API.

    New protocol (KIP-848) by default; ``group.protocol`` ``classic`` or ``auto``
    selects the classic protocol or the automatic choice (see :attr:`group_protocol`).

    Use it as ``async with AsyncConsumer(config) as consumer:`` (asyncio or
    trio); it connects on entry and leaves the group on exit. ``poll``,
    ``consume``, ``commit``, ``committed`` and ``close`` are awaited; the
    rest are plain methods. Listener methods may be plain or async; they run
    inside ``poll()`` / ``consume()`` / iteration / ``close()``.
    """

    def __init__(self, config: Mapping[str, Any], *, dataplane: DataPlane | None = None) -> None:
        self._config: ConsumerConfig = build_config(config)
        # dataplane: the fetcher to drive instead of librdkafka (tests pass
        # kgroup.testing.fake.FakeDataPlane); the consumer closes it.
        self._dataplane = DataPlane(self._config) if dataplane is None else dataplane
        self._wake: anyio.Event | None = None
        # group.protocol=auto is resolved on entry (it asks the cluster).
        protocol = self._config.group_protocol
        self._runtime: Runtime = runtime_class(
            GroupProtocol.CONSUMER if protocol is GroupProtocol.AUTO else protocol
        )(self._config, self._dataplane, wakeup=self._on_wakeup)
        self._tg: anyio.abc.TaskGroup | None = None
        self._closed = False
        self._last_poll_event = -math.inf
        self._auto_commit_interval = self._config.auto_commit_interval_ms / 1000
        self._next_auto_commit = -math.inf

    def _on_wakeup(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # ------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        if self._tg is not None or self._closed:
            raise RuntimeError("an AsyncConsumer can be entered only once")
        if self._config.group_protocol is GroupProtocol.AUTO:
            chosen = await choose_group_protocol(self._config)
            if chosen is not self._runtime.group_protocol:
                self._runtime = runtime_class(chosen)(
                    self._config, self._dataplane, wakeup=self._on_wakeup
                )
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        try:
            await tg.start(self._runtime.run)
        except BaseException:
            await tg.__aexit__(None, None, None)
            raise
        self._next_auto_commit = anyio.current_time() + self._auto_commit_interval
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            # Shielded (and bounded by close's own timeout): leaving the group
            # cleanly matters most when the body was cancelled.
            with anyio.CancelScope(shield=True):
                await self.close()
        finally:
            tg, self._tg = self._tg, None
            if tg is not None:
                self._runtime.abort()
                await tg.__aexit__(None, None, None)

    async def close(self, timeout: float = 30.0) -> None:
        """Leave the group and release everything, within about ``timeout`` seconds.

        With auto-commit, commits the positions of the owned partitions first;
        the listener's revoke callback runs in this call. Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        runtime = self._runtime
        try:
            if self._tg is not None and not runtime.is_closed():
                runtime.request_close(timeout)
                with anyio.move_on_after(timeout + 1.0):
                    while not runtime.is_closed():
                        self._wake = anyio.Event()
                        await self._drain(closing=True)
                        if runtime.is_closed():
                            break
                        with anyio.move_on_after(SERVICE_SLICE):
                            await self._wake.wait()
                if not runtime.is_closed():
                    log.warning("group %s: close did not finish in time", self._config.group_id)
                    runtime.abort()
                await runtime.wait_closed(10.0)
        finally:
            self._dataplane.close()

    # ------------------------------------------------------------- identity

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions currently assigned to this member."""
        return self._runtime.owned()

    # --------------------------------------------------------- subscription

    def subscribe(
        self,
        topics: Subscription | None = None,
        listener: RebalanceListener | object | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Join the group subscribed to ``topics`` or a regex (see ``Consumer.subscribe``)."""
        self._check_open()
        names, regex = parse_subscription(topics, pattern)
        self._runtime.subscribe(names, regex, listener)

    def unsubscribe(self) -> None:
        """Leave the group; the listener's revoke callback runs in a later poll."""
        self._check_open()
        self._runtime.unsubscribe()

    # ---------------------------------------------------------------- records

    async def poll(self, timeout: float | None = None) -> Record | None:
        """One record, or None after ``timeout`` seconds (None: wait); as the blocking poll."""
        batch = await self.consume(1, -1 if timeout is None else timeout)
        return batch[0] if batch else None

    async def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Record]:
        """Up to ``num_messages`` records, waiting at most ``timeout`` s (< 0: no limit)."""
        if num_messages < 1:
            raise ValueError(f"num_messages must be >= 1, got {num_messages}")
        if self._tg is None:
            raise RuntimeError("use the consumer as 'async with AsyncConsumer(config) as c'")
        now = anyio.current_time()
        deadline = math.inf if timeout is None or timeout < 0 else now + timeout
        consume = self._dataplane.consume
        while True:
            await self._service()
            batch = consume(num_messages, 0)
            if batch:
                return batch
            wait = min(deadline - anyio.current_time(), SERVICE_SLICE)
            if wait <= 0:
                return []
            # Not abandoned on cancellation: records librdkafka hands out must
            # reach the caller (abandoning them would skip them).
            batch = await anyio.to_thread.run_sync(consume, num_messages, wait)
            if batch:
                return batch

    def __aiter__(self) -> AsyncIterator[Record]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Record]:
        while not self._closed:
            batch = await self.consume(1, SERVICE_SLICE)
            if batch:
                yield batch[0]

    # --------------------------------------------------------------- offsets

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        *,
        message: Record | None = None,
    ) -> dict[TopicPartition, int]:
        """Commit and wait; as :meth:`kgroup.Consumer.commit` (returns what was committed)."""
        self._check_open()
        return await self._runtime.commit(commit_offsets_arg(offsets, message))

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        *,
        message: Record | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Start a commit and return at once; ``callback(offsets, error)`` runs in a later poll."""
        self._check_open()
        self._runtime.commit_in_background(commit_offsets_arg(offsets, message), callback)

    async def committed(
        self, partitions: Collection[TopicPartition], timeout: float = 10.0
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None: nothing committed) of ``partitions``."""
        self._check_open()
        return await self._runtime.committed(list(partitions), timeout=timeout)

    def position(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Offset of the next record to hand out, per fetching partition that has one."""
        return self._dataplane.positions(partitions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next record of an assigned ``partition``."""
        self._check_open()
        self._runtime.seek(partition, offset)

    def pause(self, partitions: Collection[TopicPartition]) -> None:
        """Stop handing out records of these (fetching) partitions until resumed."""
        self._check_open()
        self._runtime.pause(list(partitions))

    def resume(self, partitions: Collection[TopicPartition]) -> None:
        """Resume partitions paused with :meth:`pause`."""
        self._check_open()
        self._runtime.resume(list(partitions))

    # -------------------------------------------------------------- internals

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")

    async def _service(self) -> None:
        self._check_open()
        runtime = self._runtime
        now = anyio.current_time()
        if now - self._last_poll_event >= POLL_EVENT_INTERVAL:
            self._last_poll_event = now
            runtime.poll_called()
        if self._config.enable_auto_commit and now >= self._next_auto_commit:
            self._next_auto_commit = now + self._auto_commit_interval
            runtime.auto_commit()
        if runtime.app_work:
            await self._drain(closing=False)
        if runtime.fatal is not None:
            raise runtime.fatal

    async def _drain(self, *, closing: bool) -> None:
        runtime = self._runtime
        work = runtime.app_work
        while work:
            item = work.popleft()
            if isinstance(item, CallbackWork):
                error = await self._run_callback(item)
                if error is not None and closing:
                    log.error(
                        "rebalance callback %s failed during close: %r", item.kind.value, error
                    )
                    error = None
                runtime.callback_done(item, error, error is not None)
                if error is not None:
                    raise error
            elif isinstance(item, RevocationCommitWork):
                runtime.release_revocation_commit(item.token)
            elif isinstance(item, CommitResultWork):
                item.callback(item.offsets, item.error)
            elif isinstance(item, ErrorWork):
                if closing:
                    log.warning("error during close: %r", item.error)
                else:
                    raise item.error

    async def _run_callback(self, item: CallbackWork) -> Exception | None:
        method = listener_method(self._runtime.listener, item.kind)
        if method is None:
            return None
        try:
            result = method(item.partitions)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            return exc
        return None
