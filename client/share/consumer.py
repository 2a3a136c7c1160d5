"""The share consumers: :class:`ShareConsumer` (threads) and :class:`AsyncShareConsumer`.

Both run a :class:`~kgroup.share.driver.ShareDriver` on an anyio event loop:
:class:`ShareConsumer` on a loop of its own in a background thread (reached
through a blocking portal, as :class:`kgroup.Consumer`),
:class:`AsyncShareConsumer` on the caller's loop (asyncio or trio). What they
share (config, the acknowledgement-commit callback, the commit map) is
:class:`_ShareFront`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

import anyio

from kgroup.dataplane.share.acknowledgements import (
    AcknowledgementOutcome,
    AcknowledgeType,
    callback_calls,
)
from kgroup.dataplane.share.records import ShareRecord
from kgroup.errors import ConfigError, ConsumerClosedError, KgroupError
from kgroup.runtime.connect import open_kafka_client
from kgroup.runtime.interfaces import TransportFactory
from kgroup.share.config import ShareConsumerConfig
from kgroup.share.driver import ShareDriver, commit_map
from kgroup.sync import _LoopThread
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = ["AcknowledgementCommitCallback", "AsyncShareConsumer", "ShareConsumer"]

AcknowledgementCommitCallback = Callable[
    [Mapping[TopicIdPartition, frozenset[int]], KgroupError | None], None
]
"""``on_acknowledgement_commit(offsets, error)``: the offsets per partition the broker
answered, with ``None`` when applied or the error when not; called once per error
(as the Java client's ``AcknowledgementCommitCallback``)."""

_COMMIT_TIMEOUT = 30.0
"""Seconds ``commit()`` waits for the broker's answers."""


class _ShareFront:
    """What both share consumers do the same way."""

    def __init__(
        self,
        config: Mapping[str, Any],
        transport: TransportFactory,
        on_acknowledgement_commit: AcknowledgementCommitCallback | None,
    ) -> None:
        if not isinstance(config, Mapping):
            raise ConfigError(f"the config must be a mapping of keys to values, got {config!r}")
        self._config = ShareConsumerConfig.from_dict(config)
        self._transport = transport
        self._callback = on_acknowledgement_commit
        self._driver: ShareDriver | None = None
        self._closed = False

    @property
    def group_id(self) -> str:
        """The share group's id."""
        return self._config.group_id

    def _running(self) -> ShareDriver:
        if self._closed:
            raise ConsumerClosedError("the share consumer is closed")
        if self._driver is None:
            raise RuntimeError("enter the AsyncShareConsumer first: async with ... as consumer")
        return self._driver

    def _report(self, results: Iterable[AcknowledgementOutcome]) -> None:
        """Tell the callback what the broker answered (in the application's thread)."""
        if self._callback is None:
            return
        for offsets, error in callback_calls(results):
            self._callback(offsets, error)

    def _commit_result(
        self, results: tuple[AcknowledgementOutcome, ...]
    ) -> dict[TopicIdPartition, KgroupError | None]:
        self._report(results)
        return commit_map(results)

    @property
    def member_id(self) -> str:
        """This member's id (the client's own, for the consumer's life)."""
        return self._driver.core.member_id if self._driver is not None else ""

    def subscription(self) -> frozenset[str]:
        """The topic names subscribed to."""
        return self._driver.core.subscription() if self._driver is not None else frozenset()

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions the broker assigned to this member (it fetches from them)."""
        if self._driver is None or self._closed:
            return frozenset()
        return self._driver.assignment()

    def metrics(self) -> dict[str, object]:
        """Counters: ``records_delivered``, ``records_acknowledged`` (by type),
        ``fetch_requests``, ``acknowledge_requests``, ``bytes_held`` and more."""
        if self._driver is None:
            return {}
        return self._driver.metrics()

    def acknowledge(
        self, record: ShareRecord, kind: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """Explicit mode: acknowledge ``record`` of the last batch.

        ``ACCEPT``: processed; ``RELEASE``: give it back for another delivery (its
        ``delivery_count()`` goes up); ``REJECT``: never deliver it again. Sent to the
        broker ahead of the next fetch, or by :meth:`commit`.

        Raises:
            InvalidAcknowledgementError: implicit mode, or the record is not
                waiting for an acknowledgement.
        """
        self._running().acknowledge(record, kind)


class ShareConsumer(_ShareFront):
    """A share-group (KIP-932) member, blocking API.

    Records of the subscribed topics are shared by every member of the group;
    each record is delivered to one member at a time and acknowledged
    (accepted, released for redelivery, or rejected). ``config`` is a dict of
    dotted keys (:mod:`kgroup.share.config` lists them; bad keys raise
    :class:`~kgroup.ConfigError` naming the key); ``backend`` is the anyio
    backend of the background event-loop thread (``"asyncio"`` or ``"trio"``);
    ``transport`` is the testing seam of :class:`kgroup.Consumer`.

    ``share.acknowledgement.mode=implicit`` (the default): each
    :meth:`consume` / :meth:`poll` accepts what the previous call returned.
    ``explicit``: :meth:`acknowledge` every record before the next
    :meth:`consume`. The group's ``share.auto.offset.reset`` (where a new group
    starts) is set with :func:`kgroup.admin.share.set_share_auto_offset_reset`.

    ``on_acknowledgement_commit`` is called in the thread of
    :meth:`consume` / :meth:`poll` / :meth:`commit` / :meth:`close` with the
    broker's answers. One application thread should use a consumer at a time.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        backend: str = "asyncio",
        transport: TransportFactory = open_kafka_client,
        on_acknowledgement_commit: AcknowledgementCommitCallback | None = None,
    ) -> None:
        super().__init__(config, transport, on_acknowledgement_commit)
        self._loop = _LoopThread(backend, f"kgroup-share-{self.group_id}")
        portal = self._portal = self._loop.portal
        try:
            self._driver = portal.call(ShareDriver, self._config, transport)
            self._run, _ = portal.start_task(self._driver.run)
        except BaseException:
            self._loop.stop(5.0)
            raise

    def subscribe(self, topics: Iterable[str]) -> None:
        """Subscribe to ``topics`` (names), replacing the subscription; ``[]`` unsubscribes."""
        if isinstance(topics, str):
            raise TypeError("subscribe() takes a list of topic names, not one string")
        names = list(topics)
        self._portal.call(self._running().subscribe, names)

    def unsubscribe(self) -> None:
        """Leave the subscription (the member leaves the group until it subscribes again)."""
        self.subscribe([])

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[ShareRecord]:
        """Up to ``num_messages`` records (at most ``max.poll.records``), waiting at most
        ``timeout`` seconds (negative: forever) for the first; ``[]`` on timeout.

        Raises:
            UnacknowledgedRecordsError: explicit mode, a record of the previous
                batch is not acknowledged.
            ConsumerClosedError: after :meth:`close`.
        """
        if num_messages < 1:
            raise ValueError(f"num_messages must be at least 1, got {num_messages}")
        driver = self._running()
        wait = float("inf") if timeout < 0 else timeout
        try:
            records = self._portal.call(driver.consume, num_messages, wait)
        finally:
            self._report(self._portal.call(driver.take_outcomes))
        return list(records)

    def poll(self, timeout: float = -1) -> ShareRecord | None:
        """One record, or None after ``timeout`` seconds (negative: wait forever)."""
        records = self.consume(1, timeout)
        return records[0] if records else None

    def acknowledge(
        self, record: ShareRecord, kind: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """As :meth:`AsyncShareConsumer.acknowledge` (on the consumer's loop thread:
        the runtime is touched from there only)."""
        self._portal.call(self._running().acknowledge, record, kind)

    def assignment(self) -> frozenset[TopicPartition]:
        """As :meth:`AsyncShareConsumer.assignment` (read on the consumer's loop thread)."""
        if self._driver is None or self._closed:
            return frozenset()
        return self._portal.call(self._driver.assignment)

    def metrics(self) -> dict[str, object]:
        """As :meth:`AsyncShareConsumer.metrics`."""
        if self._driver is None or self._closed:
            return super().metrics()
        return self._portal.call(self._driver.metrics)

    def commit(self) -> dict[TopicIdPartition, KgroupError | None]:
        """Send the acknowledgements owed now (implicit mode: the last batch accepted)
        and wait for the broker: per partition, ``None`` or why they failed."""
        driver = self._running()
        return self._commit_result(self._portal.call(driver.commit, _COMMIT_TIMEOUT))

    def commit_async(self) -> None:
        """Send the acknowledgements owed in the background; the callback tells."""
        self._portal.call(self._running().commit_async)

    def close(self, timeout: float = 30.0) -> None:
        """Accept the last batch (implicit mode), close the share sessions (the broker
        releases records delivered and not acknowledged) and leave the group."""
        if self._closed:
            return
        self._closed = True
        driver = self._driver
        try:
            if driver is not None:
                with contextlib.suppress(RuntimeError):  # the loop already ended
                    self._report(self._portal.call(driver.close, timeout))
        finally:
            self._loop.stop(5.0)
            if driver is not None:
                driver.telemetry.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncShareConsumer(_ShareFront):
    """A share-group (KIP-932) member on the caller's event loop (asyncio or trio).

    ``async with AsyncShareConsumer(config) as consumer:`` connects on entry and
    leaves the group on exit. :meth:`subscribe`, :meth:`consume`, :meth:`poll`,
    :meth:`commit` and :meth:`close` are awaited; :meth:`acknowledge` and
    :meth:`commit_async` are plain. Otherwise as :class:`ShareConsumer`.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        transport: TransportFactory = open_kafka_client,
        on_acknowledgement_commit: AcknowledgementCommitCallback | None = None,
    ) -> None:
        super().__init__(config, transport, on_acknowledgement_commit)
        self._exit: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> Self:
        if self._exit is not None or self._closed:
            raise RuntimeError("an AsyncShareConsumer can be entered only once")
        async with contextlib.AsyncExitStack() as stack:
            tg = await stack.enter_async_context(anyio.create_task_group())
            self._driver = ShareDriver(self._config, self._transport)
            await tg.start(self._driver.run)
            self._exit = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            with anyio.CancelScope(shield=True):
                await self.close()
        finally:
            leave, self._exit = self._exit, None
            if leave is not None:
                await leave.aclose()

    async def subscribe(self, topics: Iterable[str]) -> None:
        """As :meth:`ShareConsumer.subscribe`."""
        if isinstance(topics, str):
            raise TypeError("subscribe() takes a list of topic names, not one string")
        self._running().subscribe(list(topics))

    async def unsubscribe(self) -> None:
        """As :meth:`ShareConsumer.unsubscribe`."""
        await self.subscribe([])

    async def consume(self, num_messages: int = 1, timeout: float = -1) -> list[ShareRecord]:
        """As :meth:`ShareConsumer.consume`."""
        if num_messages < 1:
            raise ValueError(f"num_messages must be at least 1, got {num_messages}")
        driver = self._running()
        try:
            records = await driver.consume(num_messages, float("inf") if timeout < 0 else timeout)
        finally:
            self._report(driver.take_outcomes())
        return list(records)

    async def poll(self, timeout: float = -1) -> ShareRecord | None:
        """As :meth:`ShareConsumer.poll`."""
        records = await self.consume(1, timeout)
        return records[0] if records else None

    async def commit(self) -> dict[TopicIdPartition, KgroupError | None]:
        """As :meth:`ShareConsumer.commit`."""
        return self._commit_result(await self._running().commit(_COMMIT_TIMEOUT))

    def commit_async(self) -> None:
        """As :meth:`ShareConsumer.commit_async`."""
        self._running().commit_async()

    async def close(self, timeout: float = 30.0) -> None:
        """As :meth:`ShareConsumer.close`."""
        if self._closed:
            return
        self._closed = True
        driver = self._driver
        if driver is not None:
            try:
                self._report(await driver.close(timeout))
            finally:
                # Flushing the sink joins its writer thread: not on the event loop.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(driver.telemetry.close)
