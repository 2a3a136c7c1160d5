"""The share runtime's executor: runs a :class:`~kgroup.share.core.ShareCore` on anyio.

:meth:`ShareDriver.run` opens the cluster client (the consumer's
``transport=`` factory) and loops: it asks the core what to send
(:meth:`ShareCore.poll <kgroup.share.core.ShareCore.poll>`) and sends each
request in a task of its own, so a heartbeat never waits behind a ShareFetch
that long-polls on its leader (the core keeps one request in flight per share
session, and the member one heartbeat). Each answer goes back to the core,
wakes the loop, and wakes an application waiting in :meth:`ShareDriver.consume`.

Every method runs on the driver's event loop (the sync front end reaches it
through a blocking portal); the core is touched from that loop only.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskStatus

from kgroup.dataplane.share.acknowledgements import (
    AcknowledgementOutcome,
    AcknowledgeType,
    commit_results,
    outcomes,
)
from kgroup.dataplane.share.inflight import AcknowledgementMode
from kgroup.dataplane.share.records import ShareRecord
from kgroup.dataplane.share.session import FetchLimits
from kgroup.errors import (
    BrokerError,
    ConsumerClosedError,
    KafkaProtocolError,
    KgroupError,
    RequestTimeoutError,
    TransportError,
)
from kgroup.membership import CoordinatorRediscovered, FailureKind, RequestFailed
from kgroup.membership.share import (
    SendShareHeartbeat,
    ShareHeartbeatResponseReceived,
    new_member_id,
)
from kgroup.protocol.requests import share_acknowledge, share_fetch, share_group_heartbeat
from kgroup.runtime.interfaces import TransportFactory, TransportInterface
from kgroup.share.config import AcknowledgementModeSetting, ShareConsumerConfig
from kgroup.share.core import (
    CoreAction,
    FetchMetadata,
    SendShareAcknowledge,
    SendShareFetch,
    ShareCore,
    ShareCoreConfig,
)
from kgroup.share.telemetry import ShareTelemetry
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = ["ShareDriver"]

log = logging.getLogger("kgroup.share")

_FAILURE_BACKOFF = 0.2
"""Seconds a session waits after a request that got no answer, before the next."""


def core_config(config: ShareConsumerConfig) -> ShareCoreConfig:
    """The core's part of the consumer config."""
    explicit = config.acknowledgement_mode is AcknowledgementModeSetting.EXPLICIT
    return ShareCoreConfig(
        group_id=config.group_id,
        mode=AcknowledgementMode.EXPLICIT if explicit else AcknowledgementMode.IMPLICIT,
        limits=FetchLimits(
            max_wait_ms=config.fetch_max_wait_ms,
            min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_max_bytes,
            max_records=config.max_poll_records,
            batch_size=config.max_poll_records,
        ),
        buffer_bytes=config.share_fetch_buffer_bytes,
        rack_id=config.connection.client_rack,
        max_poll_interval_ms=config.connection.max_poll_interval_ms,
    )


class ShareDriver:
    """One share consumer's runtime on an anyio event loop (see the module)."""

    def __init__(self, config: ShareConsumerConfig, transport: TransportFactory) -> None:
        self.config = config
        self.core = ShareCore(core_config(config), new_member_id())
        self._transport = transport
        self._client: TransportInterface | None = None
        self._data: TransportInterface | None = None
        self._wake = anyio.Event()
        self._changed = anyio.Event()
        self._stopped = anyio.Event()
        self.error: KgroupError | None = None
        """A failure that ended the run (the cluster could not be reached ...)."""
        self._closed = False
        self._close_asked = anyio.Event()
        self._scope = anyio.CancelScope()
        self.telemetry = ShareTelemetry(config, self.core.member_id)
        """Close it (blocking) once the run ended: :meth:`ShareTelemetry.close`."""

    # ------------------------------------------------------------------ loop

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect and drive the core until it closed (started with ``tg.start``).

        Started at once: the application may subscribe and consume while the
        cluster is still being reached. A bootstrap that fails is tried again
        (with backoff) until one works or the consumer closes, as the consumer does.
        """
        task_status.started()
        rounds = 0
        try:
            with self._scope:
                while not self._closed:
                    try:
                        await self._connected()
                        return
                    except TransportError as exc:
                        if self._client is not None:
                            raise
                        rounds += 1
                        log.warning(
                            "share group %s: could not reach the cluster (%s); trying again",
                            self._group,
                            exc,
                        )
                    with anyio.move_on_after(self._backoff(rounds)):
                        await self._close_asked.wait()
        except KgroupError as exc:
            self.error = exc
            log.warning("share group %s: the consumer stopped: %s", self._group, exc)
        finally:
            self.telemetry.left()
            self._stopped.set()
            self._notify()

    def _backoff(self, rounds: int) -> float:
        conn = self.config.connection
        return min(conn.retry_backoff_max_ms, conn.retry_backoff_ms << min(rounds, 20)) / 1000

    async def _connected(self) -> None:
        # Two clients, so two connections to each broker: a broker answers a
        # connection's requests in order, and a heartbeat queued behind a
        # ShareFetch waiting out its max wait could be late.
        async with (
            self._transport(self.config.connection) as client,
            self._transport(self.config.connection) as data,
            anyio.create_task_group() as tg,
        ):
            self._client = client
            self._data = data
            await self._loop(tg)
            tg.cancel_scope.cancel()

    async def _loop(self, tg: anyio.abc.TaskGroup) -> None:
        core = self.core
        while not core.closed and self.error is None:
            now = anyio.current_time()
            deadline = core.next_deadline()
            if deadline is not None and deadline <= now:
                core.tick(now)
            for action in core.poll(now):
                tg.start_soon(self._execute, action)
            self.telemetry.observe(core.member.member_epoch, core.assignment)
            self._notify()
            deadline = core.next_deadline()
            wait = math.inf if deadline is None else max(0.0, deadline - anyio.current_time())
            with anyio.move_on_after(wait):
                await self._wake.wait()
            self._wake = anyio.Event()

    def wake(self) -> None:
        """Make the loop ask the core again (after the application changed something)."""
        self._wake.set()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _execute(self, action: CoreAction) -> None:
        try:
            match action:
                case SendShareHeartbeat():
                    await self._heartbeat(action)
                case FetchMetadata():
                    await self._metadata(action)
                case SendShareFetch():
                    await self._fetch(action)
                case SendShareAcknowledge():
                    await self._acknowledge(action)
                case _:  # RediscoverCoordinator
                    assert self._client is not None
                    self._client.mark_coordinator_stale(self.config.group_id)
                    self.core.member_event(CoordinatorRediscovered(), anyio.current_time())
        except Exception as exc:
            # A failure no answer explains (a bug, a response that does not parse):
            # the run ends and the application's next call raises it.
            log.exception("share group %s: the runtime failed", self._group)
            self.error = (
                exc
                if isinstance(exc, KgroupError)
                else KgroupError(f"the share consumer's runtime failed: {exc!r}")
            )
        finally:
            self.wake()

    async def _heartbeat(self, action: SendShareHeartbeat) -> None:
        client = self._client
        assert client is not None
        try:
            build = functools.partial(share_group_heartbeat.build, request=action.request)
            response = await client.coordinator_request(self.config.group_id, build)
            parsed = share_group_heartbeat.parse(share_group_heartbeat.narrow(response))
        except (TransportError, KafkaProtocolError) as exc:
            kind = (
                FailureKind.TIMEOUT
                if isinstance(exc, RequestTimeoutError)
                else FailureKind.DISCONNECTED
            )
            self.core.member_event(RequestFailed(action.seq, kind, str(exc)), anyio.current_time())
            return
        self.core.member_event(
            ShareHeartbeatResponseReceived(action.seq, parsed), anyio.current_time()
        )

    async def _metadata(self, action: FetchMetadata) -> None:
        client = self._client
        assert client is not None
        try:
            if action.topic_ids:
                cluster = await client.metadata()
            else:
                cluster = await client.metadata(sorted(action.topics))
        except (TransportError, KafkaProtocolError) as exc:
            log.info("share group %s: metadata failed: %s", self.config.group_id, exc)
            self.core.on_metadata_failed(anyio.current_time())
            return
        self.core.on_metadata(cluster, anyio.current_time())

    async def _send(self, node: int, build: Callable[[Any], Any]) -> Any:
        assert self._data is not None
        conn = await self._data.connection(node)
        return await conn.request(build(conn.versions))

    async def _fetch(self, action: SendShareFetch) -> None:
        plan = action.plan
        build = functools.partial(share_fetch.build, plan=plan, group_id=self.config.group_id)
        try:
            response = await self._send(plan.node, build)
            result = share_fetch.parse(share_fetch.narrow(response))
        except (TransportError, KafkaProtocolError) as exc:
            log.info(
                "share group %s: ShareFetch to node %d failed: %s", self._group, plan.node, exc
            )
            await anyio.sleep(_FAILURE_BACKOFF)
            self.core.on_request_failed(plan.node)
            return
        self.core.on_fetch_answered(plan.node, result, anyio.current_time())

    async def _acknowledge(self, action: SendShareAcknowledge) -> None:
        plan = action.plan
        build = functools.partial(share_acknowledge.build, plan=plan, group_id=self.config.group_id)
        sent_at = time.monotonic()
        try:
            response = await self._send(plan.node, build)
            result = share_acknowledge.parse(share_acknowledge.narrow(response))
        except (TransportError, KafkaProtocolError) as exc:
            log.info(
                "share group %s: ShareAcknowledge to node %d failed: %s",
                self._group,
                plan.node,
                exc,
            )
            await anyio.sleep(_FAILURE_BACKOFF)
            self.core.on_request_failed(plan.node)
            return
        self.core.on_acknowledge_answered(plan.node, result)
        answered = outcomes(
            plan.acknowledgements,
            result.acknowledge_error_codes(),
            request_error=result.error_code,
        )
        self.telemetry.acknowledged(answered, dict(self.core.topic_names), sent_at)

    @property
    def _group(self) -> str:
        return self.config.group_id

    # ------------------------------------------------------------------ application

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the share consumer is closed")

    def subscribe(self, topics: Iterable[str]) -> None:
        """Subscribe to ``topics`` (names); an empty list unsubscribes."""
        self._check_open()
        self.core.subscribe(topics, anyio.current_time())
        self.wake()

    async def consume(self, max_records: int, timeout: float) -> tuple[ShareRecord, ...]:
        """Up to ``max_records`` records, waiting at most ``timeout`` seconds for the first.

        Settles the previous batch first (implicit mode accepts it; explicit mode
        raises UnacknowledgedRecordsError while one is unacknowledged).
        """
        self._check_open()
        limit = min(max_records, self.config.max_poll_records)
        with anyio.move_on_after(timeout):
            while True:
                changed = self._changed
                self._raise_failure()
                if self._closed:
                    return ()  # closed (from another thread) while waiting
                records = self.core.consume(limit, anyio.current_time())
                self.wake()
                if records:
                    return records
                await changed.wait()
        self._raise_failure()
        return ()

    def _raise_failure(self) -> None:
        if self.error is not None:
            raise self.error
        if self._stopped.is_set() and not self._closed:
            raise ConsumerClosedError("the share consumer's runtime stopped")

    def acknowledge(self, record: ShareRecord, kind: AcknowledgeType) -> None:
        """Explicit mode: acknowledge ``record`` (sent ahead of the next fetch)."""
        self._check_open()
        self.core.acknowledge(record, kind)
        self.wake()

    async def commit(self, timeout: float) -> tuple[AcknowledgementOutcome, ...]:
        """Send every owed acknowledgement now and wait (at most ``timeout``) for the
        answers; returns the outcomes answered meanwhile (earlier ones included)."""
        self._check_open()
        self.core.commit()
        self.wake()
        with anyio.move_on_after(timeout):
            while not self.core.committed() and not self._stopped.is_set():
                changed = self._changed
                await changed.wait()
        return tuple(self.core.take_outcomes())

    def commit_async(self) -> None:
        """Owe the acknowledgements now; the loop sends them, the callback tells."""
        self._check_open()
        self.core.commit()
        self.wake()

    def take_outcomes(self) -> tuple[AcknowledgementOutcome, ...]:
        """The acknowledgement outcomes answered since last asked."""
        return tuple(self.core.take_outcomes())

    async def close(self, timeout: float) -> tuple[AcknowledgementOutcome, ...]:
        """Close sessions (carrying what is owed) and leave, within ``timeout``."""
        if self._closed:
            return ()
        self._closed = True
        self._close_asked.set()
        now = anyio.current_time()
        self.core.close(now + timeout, now)
        self.wake()
        with anyio.move_on_after(timeout):
            await self._stopped.wait()
        if not self._stopped.is_set():
            # Out of time (a request the broker does not answer): stop here; the
            # broker releases what this member held when its session times out.
            self._scope.cancel()
            await self._stopped.wait()
        return tuple(self.core.take_outcomes())

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions assigned to this member."""
        return self.core.assignment

    def metrics(self) -> dict[str, object]:
        """See :meth:`kgroup.ShareConsumer.metrics`."""
        return self.core.metrics()


def commit_map(
    results: Iterable[AcknowledgementOutcome],
) -> dict[TopicIdPartition, KgroupError | None]:
    """What ``commit()`` returns: per partition, None or its first error."""
    merged: Mapping[TopicIdPartition, BrokerError | None] = commit_results(results)
    return dict(merged)


AcknowledgementCommitCallback = Callable[
    [Mapping[TopicIdPartition, frozenset[int]], KgroupError | None], None
]
"""``on_acknowledgement_commit``: called per error with the offsets per partition."""
