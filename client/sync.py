"""The blocking consumer: :class:`Consumer`.

Structure: the group runtime (:class:`~kgroup.runtime.Runtime`: heartbeats,
offset requests, reconciliation) runs on an anyio event loop in a background
thread, started with an anyio blocking portal. The application's thread never
waits for it on the hot path: ``poll()`` / ``consume()`` call the data plane
(librdkafka) directly, in slices of at most 100 ms, and between slices run the
rebalance work the runtime queued (listener callbacks, the commit before a
revocation, errors). The portal is crossed only for that work, for commits,
for subscription changes and, at most ten times a second, to tell the member
the application polled.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import re
import threading
import time
from collections.abc import Awaitable, Collection, Iterator, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

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

__all__ = ["Consumer"]

log = logging.getLogger("kgroup.consumer")

_T = TypeVar("_T")


async def _await(awaitable: Awaitable[_T]) -> _T:
    return await awaitable


class _LoopThread:
    """An anyio event loop serving a blocking portal in a daemon thread.

    A daemon thread (unlike ``anyio.from_thread.start_blocking_portal``'s
    executor thread) cannot keep the interpreter from exiting when an
    application forgets to close its consumer.
    """

    def __init__(self, backend: str, name: str) -> None:
        self._ready = threading.Event()
        self._portal: BlockingPortal | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(backend,), name=name, daemon=True)
        self._thread.start()
        if not self._ready.wait(30.0):
            raise RuntimeError("the consumer's event loop thread did not start")
        if self._error is not None:
            raise self._error

    def _main(self, backend: str) -> None:
        try:
            anyio.run(self._serve, backend=backend)
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        async with BlockingPortal() as portal:
            self._portal = portal
            self._ready.set()
            await portal.sleep_until_stopped()

    @property
    def portal(self) -> BlockingPortal:
        assert self._portal is not None
        return self._portal

    def stop(self, timeout: float) -> None:
        """Stop the loop (cancelling what still runs on it) and join the thread."""
        if self._portal is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._portal.call(self._portal.stop, True)
        self._thread.join(timeout)


class Consumer(ConsumerViews):
    """A Kafka consumer group member, blocking API.

    New protocol (KIP-848) by default; ``group.protocol`` ``classic`` or ``auto``
    selects the classic protocol or the automatic choice (see :attr:`group_protocol`).

    ``config`` is a dict of Kafka's dotted keys (``bootstrap.servers``,
    ``group.id``, ...); see ``docs/consumer.md``. Invalid config raises
    :class:`~kgroup.ConfigError` naming the key. ``backend`` is the anyio
    backend of the background event loop (``"asyncio"`` or ``"trio"``).

    Records are ``confluent_kafka.Message`` objects. Rebalance listener
    callbacks run in the thread that calls ``poll()`` / ``consume()`` /
    ``close()``, inside those calls. One application thread should use a
    consumer at a time.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        backend: str = "asyncio",
        dataplane: DataPlane | None = None,
    ) -> None:
        self._config: ConsumerConfig = build_config(config)
        # dataplane: the fetcher to drive instead of librdkafka (tests pass
        # kgroup.testing.fake.FakeDataPlane); the consumer closes it.
        self._dataplane = DataPlane(self._config) if dataplane is None else dataplane
        self._wake = threading.Event()
        try:
            self._loop = _LoopThread(backend, f"kgroup-{self._config.group_id}")
            self._portal: BlockingPortal = self._loop.portal
            protocol = self._config.group_protocol
            if protocol is GroupProtocol.AUTO:
                # Asks the cluster (bounded by request.timeout.ms).
                protocol = self._portal.call(choose_group_protocol, self._config)
            self._runtime: Runtime = runtime_class(protocol)(
                self._config, self._dataplane, wakeup=self._wake.set
            )
            self._run, _ = self._portal.start_task(self._runtime.run)
        except BaseException:
            if hasattr(self, "_loop"):
                self._loop.stop(5.0)
            self._dataplane.close()
            raise
        self._closed = False
        self._last_poll_event = -math.inf
        self._auto_commit_interval = self._config.auto_commit_interval_ms / 1000
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval

    # ------------------------------------------------------------- identity

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions currently assigned to this member."""
        if self._closed:
            return frozenset()
        # Read on the loop thread: the member's state changes there.
        try:
            owned: frozenset[TopicPartition] = self._portal.call(self._runtime.owned)
        except RuntimeError:  # closed meanwhile by another thread: the loop is gone
            return frozenset()
        return owned

    # --------------------------------------------------------- subscription

    def subscribe(
        self,
        topics: Subscription | None = None,
        listener: RebalanceListener | object | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Join the group subscribed to ``topics`` (names) or a regex.

        A regex is ``pattern=``, a ``re.Pattern``, or a string starting with
        ``^``; the broker evaluates it (RE2J, full match) and assigns matching
        topics as they appear. Calling again replaces the subscription and the
        listener. ``listener`` is a :class:`~kgroup.RebalanceListener`, or any
        object with some of its methods (missing ones do nothing).

        Raises:
            InvalidSubscriptionError: names mixed with a regex, or several regexes.
        """
        self._check_open()
        names, regex = parse_subscription(topics, pattern)
        self._portal.call(self._runtime.subscribe, names, regex, listener)

    def unsubscribe(self) -> None:
        """Leave the group; the listener's revoke callback runs in a later poll."""
        self._check_open()
        self._portal.call(self._runtime.unsubscribe)

    # ---------------------------------------------------------------- records

    def poll(self, timeout: float | None = None) -> Record | None:
        """One record, or None if none arrived within ``timeout`` seconds (None: wait).

        Runs pending rebalance callbacks first. Raises the consumer's errors:
        a listener's exception, a fatal group error (a :class:`~kgroup.BrokerError`
        subclass), a data-plane error.
        """
        batch = self.consume(1, -1 if timeout is None else timeout)
        return batch[0] if batch else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Record]:
        """Up to ``num_messages`` records, waiting at most ``timeout`` s (< 0: no limit).

        Returns as soon as some records are available. Every record returned
        counts as handed to the application: the next auto-commit (made at the
        start of a later poll) covers it.
        """
        if num_messages < 1:
            raise ValueError(f"num_messages must be >= 1, got {num_messages}")
        deadline = math.inf if timeout is None or timeout < 0 else time.monotonic() + timeout
        consume = self._dataplane.consume
        while True:
            self._service()
            wait = max(0.0, min(deadline - time.monotonic(), SERVICE_SLICE))
            batch = consume(num_messages, wait)
            if batch:
                return batch
            if time.monotonic() >= deadline:
                return []

    def __iter__(self) -> Iterator[Record]:
        """Records one by one until the consumer is closed."""
        while not self._closed:
            batch = self.consume(1, SERVICE_SLICE)
            if batch:
                yield batch[0]

    # --------------------------------------------------------------- offsets

    def commit(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        *,
        message: Record | None = None,
        asynchronous: bool = False,
        callback: CommitCallback | None = None,
    ) -> dict[TopicPartition, int] | None:
        """Commit offsets with the member epoch and wait for the result.

        ``offsets``: next offset to read per partition; None commits the
        positions (every record handed out so far); ``message`` commits just
        past that record. Only partitions this member owns are committed (the
        returned dict); a commit failing because the epoch moved on is retried
        with the new epoch for partitions still owned. ``asynchronous=True``
        is :meth:`commit_async` (returns None).

        Raises:
            BrokerError: a partition's commit failed for good.
            RequestTimeoutError: not done within ``request.timeout.ms``.
        """
        self._check_open()
        chosen = commit_offsets_arg(offsets, message)
        if asynchronous:
            self.commit_async(chosen, callback=callback)
            return None
        result: dict[TopicPartition, int] = self._portal.call(self._runtime.commit, chosen)
        return result

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        *,
        message: Record | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Start a commit and return at once; ``callback(offsets, error)`` runs in a later poll."""
        self._check_open()
        chosen = commit_offsets_arg(offsets, message)
        self._portal.call(self._runtime.commit_in_background, chosen, callback)

    def committed(
        self, partitions: Collection[TopicPartition], timeout: float = 10.0
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None: nothing committed) of ``partitions``."""
        self._check_open()

        async def fetch() -> dict[TopicPartition, int | None]:
            return await self._runtime.committed(list(partitions), timeout=timeout)

        return self._portal.call(fetch)

    def position(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Offset of the next record to hand out, per fetching partition that has one."""
        return self._dataplane.positions(partitions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next record of an assigned ``partition``.

        Works from ``on_partitions_assigned`` too: the partition then starts there.

        Raises:
            NotAssignedError: the partition is not assigned to this consumer.
        """
        self._check_open()
        self._portal.call(self._runtime.seek, partition, offset)

    def pause(self, partitions: Collection[TopicPartition]) -> None:
        """Stop handing out records of these (fetching) partitions until resumed."""
        self._check_open()
        self._portal.call(self._runtime.pause, list(partitions))

    def resume(self, partitions: Collection[TopicPartition]) -> None:
        """Resume partitions paused with :meth:`pause`."""
        self._check_open()
        self._portal.call(self._runtime.resume, list(partitions))

    # --------------------------------------------------------------- closing

    def close(self, timeout: float = 30.0) -> None:
        """Leave the group and release everything, within about ``timeout`` seconds.

        With auto-commit, commits the positions of the owned partitions first;
        the listener's revoke callback runs in this call. Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        runtime = self._runtime
        try:
            if not runtime.is_closed():
                self._portal.call(runtime.request_close, timeout)
                end = time.monotonic() + timeout + 1.0
                while not runtime.is_closed() and time.monotonic() < end:
                    self._wake.clear()
                    self._drain(closing=True)
                    if runtime.is_closed():
                        break
                    self._wake.wait(max(0.0, min(SERVICE_SLICE, end - time.monotonic())))
                if not runtime.is_closed():
                    log.warning("group %s: close did not finish in time", self._config.group_id)
                    self._portal.call(runtime.abort)
            self._run.result(timeout=10.0)
        finally:
            self._loop.stop(10.0)
            self._dataplane.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -------------------------------------------------------------- internals

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")

    def _service(self) -> None:
        """A point where the application holds no unprocessed record: do rebalance work."""
        self._check_open()
        now = time.monotonic()
        runtime = self._runtime
        if now - self._last_poll_event >= POLL_EVENT_INTERVAL:
            self._last_poll_event = now
            self._portal.call(runtime.poll_called)
        if self._config.enable_auto_commit and now >= self._next_auto_commit:
            self._next_auto_commit = now + self._auto_commit_interval
            self._portal.call(runtime.auto_commit)
        if runtime.app_work:
            self._drain(closing=False)
        if runtime.fatal is not None:
            raise runtime.fatal

    def _drain(self, *, closing: bool) -> None:
        runtime = self._runtime
        work = runtime.app_work
        while work:
            item = work.popleft()
            if isinstance(item, CallbackWork):
                error = self._run_callback(item)
                if error is not None and closing:
                    log.error(
                        "rebalance callback %s failed during close: %r", item.kind.value, error
                    )
                    error = None
                self._portal.call(runtime.callback_done, item, error, error is not None)
                if error is not None:
                    raise error
            elif isinstance(item, RevocationCommitWork):
                self._portal.call(runtime.release_revocation_commit, item.token)
            elif isinstance(item, CommitResultWork):
                item.callback(item.offsets, item.error)
            elif isinstance(item, ErrorWork):
                if closing:
                    log.warning("error during close: %r", item.error)
                else:
                    raise item.error

    def _run_callback(self, item: CallbackWork) -> Exception | None:
        method = listener_method(self._runtime.listener, item.kind)
        if method is None:
            return None
        try:
            result = method(item.partitions)
            if inspect.isawaitable(result):
                self._portal.call(_await, result)
        except Exception as exc:
            return exc
        return None
