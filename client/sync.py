"""The blocking consumer: :class:`Consumer`.

Structure: the group driver (:class:`~kgroup.runtime.Driver`: heartbeats,
offset requests, reconciliation) runs on an anyio event loop in a background
thread, started with an anyio blocking portal. The application's thread never
waits for it on the hot path: ``poll()`` / ``consume()`` call the data plane
(librdkafka) directly, in slices of at most 100 ms, and between slices run the
rebalance work the runtime queued (listener callbacks, the commit before a
revocation, errors). The portal is crossed only for that work, for commits,
for subscription changes and, at most ten times a second, to tell the member
the application polled. The rebalance work and the close loop are
:class:`kgroup._frontend.FrontEndCore`'s; this shell takes its steps with
portal calls.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Self, TypeVar

import anyio
import confluent_kafka
from anyio.from_thread import BlockingPortal

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
from kgroup.runtime import CommitCallback, DataPlaneInterface
from kgroup.runtime.driver import open_kafka_client
from kgroup.runtime.interfaces import TransportFactory
from kgroup.types import OffsetAndMetadata, TopicPartition

__all__ = ["Consumer"]

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


class Consumer(ConsumerBase):
    """A Kafka consumer group member, blocking API.

    Consumer protocol (KIP-848) by default; ``group.protocol`` ``classic`` or ``auto``
    selects the classic protocol or the automatic choice (see :attr:`group_protocol`).

    ``config`` is a dict of Kafka's dotted keys (``bootstrap.servers``,
    ``group.id``, ...); ``docs/configuration.md`` lists every key. Invalid config raises
    :class:`~kgroup.ConfigError` naming the key. ``backend`` is the anyio
    backend of the background event loop (``"asyncio"`` or ``"trio"``).
    ``dataplane`` and ``transport`` are testing seams (see ``docs/consumer.md``):
    the record fetcher (default: librdkafka) and the cluster client factory.

    Records are ``confluent_kafka.Message`` objects; with ``key.deserializer``
    / ``value.deserializer`` their ``key()`` / ``value()`` are what the
    deserializers returned (see ``docs/consumer.md``). Rebalance listener
    callbacks run in the thread that calls ``poll()`` / ``consume()`` /
    ``close()``, inside those calls. One application thread should use a
    consumer at a time.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        backend: str = "asyncio",
        dataplane: DataPlaneInterface | None = None,
        transport: TransportFactory = open_kafka_client,
    ) -> None:
        self._wake = threading.Event()
        super().__init__(config, dataplane, transport, wakeup=self._wake.set, clock=time.monotonic)
        try:
            self._loop = _LoopThread(backend, f"kgroup-{self._config.group_id}")
            self._portal: BlockingPortal = self._loop.portal
            # With group.protocol=auto this returns once the protocol is chosen.
            self._run, _ = self._portal.start_task(self._driver.run)
        except BaseException:
            if hasattr(self, "_loop"):
                self._loop.stop(5.0)
            self._dataplane.close()
            raise
        self._core.started()

    def _on_loop(self, fn: Callable[..., _T], *args: object) -> _T:
        return self._portal.call(self._driver.call_and_publish, fn, *args)

    def _take(self, steps: core.Steps[_T]) -> _T:
        """Run a core generator, taking each step through the portal where it needs the loop."""
        next_step = core.advance(steps, None)
        while not isinstance(next_step, core.Finished):
            next_step = core.advance(steps, self._step(next_step))
        return next_step.value

    def _step(self, step: core.Step) -> BaseException | None:
        if isinstance(step, core.OnLoop):
            self._portal.call(self._driver.call_and_publish, step.fn, *step.args)
        elif isinstance(step, core.RunListener):
            try:
                result = step.method(step.partitions)
                if inspect.isawaitable(result):
                    self._portal.call(_await, result)
            except BaseException as exc:
                # KeyboardInterrupt and SystemExit too: the member must hear that
                # the callback ended (else its step waits forever, and the group
                # with it); the front end raises it after telling the member.
                return exc
        else:
            self._wake.wait(step.timeout)
            self._wake.clear()
        return None

    # ------------------------------------------------------------- identity

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions currently assigned to this member."""
        if self._core.closed:
            return frozenset()
        # The loop publishes it after every change: no call into the loop's thread.
        return self._driver.snapshot.owned

    def paused(self) -> frozenset[TopicPartition]:
        """The partitions paused with :meth:`pause` and not resumed (as Java's ``paused()``)."""
        self._core.check_open()
        return self._driver.snapshot.paused

    # ---------------------------------------------------------------- records

    def poll(self, timeout: float | None = None) -> Record | None:
        """One record, or None if none arrived within ``timeout`` seconds (None: wait).

        Runs pending rebalance callbacks first. Raises the consumer's errors:
        a listener's exception; a fatal error, again on every poll after it (a
        :class:`~kgroup.BrokerError` subclass such as an ACL denial, a
        :class:`~kgroup.errors.SecurityError`, an
        :class:`~kgroup.errors.AssignorError`); a data-plane error;
        :class:`~kgroup.LogTruncationError` until the application seeks (with
        ``auto.offset.reset=error``); :class:`~kgroup.errors.NoBrokersAvailableError`
        once, when no bootstrap server answered; :class:`~kgroup.WakeupError` after
        :meth:`wakeup`; :class:`~kgroup.errors.DeserializationError` when it
        reaches a record a deserializer fails on (again on every poll until
        the application seeks past it).
        """
        batch = self.consume(1, -1 if timeout is None else timeout)
        return batch[0] if batch else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Record]:
        """Up to ``num_messages`` records, waiting at most ``timeout`` s (< 0: no limit).

        Returns as soon as some records are available. Every record returned
        counts as handed to the application: the next auto-commit (made at the
        start of a later poll) covers it. A record a deserializer fails on is
        not handed out: the records before it are returned, and the call that
        reaches it raises :class:`~kgroup.errors.DeserializationError`.
        """
        if num_messages < 1:
            raise ValueError(f"num_messages must be >= 1, got {num_messages}")
        try:
            return self._consume(num_messages, timeout)
        except RuntimeError:
            # close() from another thread (or from a listener method) while this
            # call ran: librdkafka's handle or the loop's portal is gone, and
            # they say so with a bare RuntimeError. Raise it as every call after
            # close() does.
            self._core.check_open()
            raise

    def _consume(self, num_messages: int, timeout: float) -> list[Record]:
        deadline = math.inf if timeout is None or timeout < 0 else time.monotonic() + timeout
        consume = self._dataplane.consume
        while True:
            # Checked every slice: a wakeup() ends a blocked call within ~100 ms.
            self._core.check_wakeup()
            if self._core.service_due():
                self._take(self._core.service(deadline - time.monotonic()))
            wait = max(0.0, min(deadline - time.monotonic(), self._core.wait_slice()))
            if self._core.session_lapsed():
                # Nothing taken from the data plane until the loop has acted (see
                # FrontEndCore.session_lapsed); records left there are not lost.
                time.sleep(min(wait, LAPSED_WAIT))
                batch = []
            else:
                try:
                    batch = consume(num_messages, wait)
                    if batch:
                        # Settles the batch: what the application does not get goes back.
                        batch = self._core.hand_out(batch)
                except BaseException:
                    # Ctrl-C after the take, before the settle: the batch goes back.
                    self._core.abandon_take()
                    raise
            if batch:
                self._telemetry.records_handed_out(len(batch))
                return batch
            # librdkafka waits in whole milliseconds: a wait under one returns at
            # once, and looping on it would spin until the deadline.
            if deadline - time.monotonic() < MIN_WAIT:
                return []

    def __iter__(self) -> Iterator[Record]:
        """Records one by one until the consumer is closed."""
        while not self._core.closed:
            batch = self.consume(1, SERVICE_SLICE)
            if batch:
                yield batch[0]

    # --------------------------------------------------------------- offsets

    def commit(
        self,
        offsets: core.CommitOffsets | Record | None = None,
        *,
        message: Record | None = None,
        asynchronous: bool = False,
        callback: CommitCallback | None = None,
    ) -> dict[TopicPartition, int] | None:
        """Commit offsets with the member epoch and wait for the result.

        ``offsets``: next offset to read per partition (``{tp: offset}``,
        ``{tp: OffsetAndMetadata(offset, metadata)}`` or a list of
        confluent-kafka ``TopicPartition(topic, partition, offset, metadata=...)``:
        the metadata string is committed with the offset); None commits the
        positions (every record handed out so far; with
        ``enable.auto.offset.store=false`` the stored offsets); ``message``
        (or a message as the first argument, as confluent-kafka) commits just
        past that record. Only partitions this member owns are committed (the
        returned dict); a commit failing because the epoch moved on is retried
        with the new epoch for partitions still owned. ``asynchronous=True``
        is :meth:`commit_async` (returns None).

        Raises:
            CommitFailedError: the group moved on without this member (a classic
                generation ended, or the member's session or epoch did): poll
                again and continue; the broker's error is its ``__cause__``.
            NothingToCommitError: the explicit offsets name no partition this
                member owns.
            BrokerError: a partition's commit failed for good
                (:class:`~kgroup.errors.OffsetMetadataTooLargeError`: metadata
                longer than the broker's ``offset.metadata.max.bytes``).
            RequestTimeoutError: not done within ``request.timeout.ms``.
        """
        if asynchronous:
            self.commit_async(offsets, message=message, callback=callback)
            return None
        chosen, metadata = self._commit_args(offsets, message)
        result: dict[TopicPartition, int] = self._portal.call(
            functools.partial(self._driver.commit, chosen, metadata=metadata)
        )
        return result

    def committed(
        self, partitions: Partitions, timeout: float = 10.0
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None: nothing committed) of ``partitions``."""
        return self._portal.call(self._committed_fetch(partitions, timeout))

    def committed_with_metadata(
        self, partitions: Partitions, timeout: float = 10.0
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """:meth:`committed`, each offset with the metadata committed with it ("" if none)."""
        return self._portal.call(self._committed_with_metadata_fetch(partitions, timeout))

    # ------------------------------------------------------- cluster lookups

    def get_watermark_offsets(
        self,
        partition: TopicPartition | confluent_kafka.TopicPartition,
        timeout: float | None = None,
        cached: bool = False,
    ) -> tuple[int, int]:
        """``(low, high)``: the partition's first offset and the offset after its last record.

        As confluent-kafka: ``cached=True`` answers from the last fetch response
        without asking the broker (only for a partition being fetched). The lag
        of a partition is ``high - position``.

        Raises:
            DataPlaneError: the lookup failed or timed out.
        """
        return self._watermarks_lookup(partition, timeout, cached)()

    def offsets_for_times(
        self, partitions: Offsets, timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """Per partition, the earliest offset whose record timestamp is >= the given one (ms).

        ``partitions``: ``{tp: timestamp_ms}`` or confluent-kafka
        ``TopicPartition(topic, partition, timestamp_ms)``; None in the answer:
        no such record.
        """
        return self._offsets_for_times_lookup(partitions, timeout)()

    def list_topics(self, topic: str | None = None, timeout: float | None = None) -> Any:
        """confluent-kafka's ``ClusterMetadata`` of the cluster (all topics, or ``topic``)."""
        return self._list_topics_lookup(topic, timeout)()

    # --------------------------------------------------------------- closing

    def close(self, timeout: float = 30.0) -> None:
        """Leave the group and release everything, within about ``timeout`` seconds.

        With auto-commit, commits the positions of the owned partitions first;
        the listener's revoke callback runs in this call. ``timeout`` bounds the
        group's part (commit, leave); a listener method that blocks extends the
        close by as long as it blocks, and stopping the consumer's thread may
        take up to 10 s more. Idempotent.
        """
        front, driver = self._core, self._driver
        if not front.begin_close():
            return
        try:
            if not driver.is_closed():
                self._take(front.close(timeout))
                if front.overdue():
                    self._portal.call(driver.abort)
            self._run.result(timeout=10.0)
        finally:
            front.end_close()
            self._loop.stop(10.0)
            self._dataplane.close()
            self._telemetry.close()
        front.raise_interrupted()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
