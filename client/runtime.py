"""The anyio driver of a new-protocol consumer: the state machine meets the network.

One :class:`Runtime` per consumer. Its :meth:`Runtime.run` task owns the
:class:`~kgroup.transport.KafkaClient` and a task group; it feeds events into
the sans-IO :class:`~kgroup.membership.ConsumerMember` (time from
``anyio.current_time()``) and performs the actions it returns:

- heartbeats, offset fetches and commits, metadata and coordinator lookups run
  as background tasks and report back as events, so heartbeats never wait for
  the application;
- data-plane changes (stop / start fetching) are made at once;
- everything that must happen in the application's context is queued as
  *application work* (:data:`AppWork`): rebalance callbacks, errors to raise,
  results of asynchronous commits, and the commit before a revocation (see
  below). The consumer front ends (:class:`~kgroup.AsyncConsumer`,
  :class:`~kgroup.Consumer`) drain the queue inside ``poll()`` at points where
  the application holds no unprocessed record.

Why the revocation commit waits for the application: positions count records
*handed out*; the application may still be processing the last batch when a
revocation starts. The positions of the revoked partitions are captured when
they stop fetching, and committed at the application's next service point
(the start of its next poll, when it has finished with every record handed
out before), so a commit never covers a record the application has not
finished with. The revoke callback needs that same poll anyway.

Interval auto-commits are made at service points too (like the Java client's
auto-commit in poll) for the same reason.

Named topics' ids are looked up before the subscription reaches the member,
so the first assignment resolves at once (see ``_subscriptions``).

Threads: every method must be called on the runtime's event loop; from other
threads only :attr:`Runtime.app_work` (a thread-safe deque), :attr:`Runtime.fatal`,
:meth:`Runtime.is_closed` and the member's ``member_id`` / ``member_epoch`` may be
read. :class:`~kgroup.Consumer` reaches
the loop through an anyio blocking portal.
"""

from __future__ import annotations

import collections
import enum
import logging
import math
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import anyio
import anyio.abc

from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.dataplane.librdkafka import DataPlane, DataPlaneError
from kgroup.errors import (
    BrokerError,
    KafkaProtocolError,
    KgroupError,
    RequestTimeoutError,
    TransportError,
    UnsupportedVersionError,
)
from kgroup.listener import listener_method
from kgroup.membership import (
    Action,
    AssignorOnAssignment,
    CallbackCompleted,
    CallbackKind,
    ClassicEvent,
    Closed,
    CloseRequested,
    CommitCompleted,
    CommitOffsets,
    ConsumerMember,
    CoordinatorRediscovered,
    Event,
    FailureKind,
    HeartbeatFailed,
    HeartbeatResponse,
    HeartbeatResponseReceived,
    LeaveComplete,
    MemberConfig,
    MetadataUpdated,
    PollCalled,
    RaiseCallbackError,
    RediscoverCoordinator,
    ReportError,
    ReportFatalError,
    RequestMetadata,
    RunCallback,
    SendHeartbeat,
    StartFetching,
    StopFetching,
    SubscriptionChanged,
    TimerTick,
    Unsubscribe,
)
from kgroup.offsets import MemberView, OffsetManager
from kgroup.protocol import broker_error
from kgroup.protocol.requests import consumer_group_heartbeat
from kgroup.transport import KafkaClient
from kgroup.types import Backoff, TopicPartition

__all__ = [
    "AppWork",
    "CallbackWork",
    "CommitCallback",
    "CommitResultWork",
    "DrivenMember",
    "ErrorWork",
    "NotAssignedError",
    "RevocationCommitWork",
    "Runtime",
]

log = logging.getLogger("kgroup.runtime")

CommitCallback = Callable[[Mapping[TopicPartition, int], BaseException | None], object]
"""Called with the offsets committed and None, or the offsets asked for and the error."""


class NotAssignedError(KgroupError, ValueError):
    """The partition is not assigned to this consumer."""


@dataclass(frozen=True, slots=True)
class CallbackWork:
    """Run the listener's method for ``kind`` with ``partitions``; report with ``token``."""

    kind: CallbackKind
    token: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class ErrorWork:
    """Raise ``error`` from the application's poll."""

    error: BaseException = field(compare=False)


@dataclass(frozen=True, slots=True)
class RevocationCommitWork:
    """Release the commit before a revocation (the application is done with its records)."""

    token: int


@dataclass(frozen=True, slots=True)
class CommitResultWork:
    """Tell an asynchronous commit's callback how it went."""

    callback: CommitCallback = field(compare=False)
    offsets: Mapping[TopicPartition, int]
    error: BaseException | None = field(compare=False)


AppWork = CallbackWork | ErrorWork | RevocationCommitWork | CommitResultWork
"""Work the runtime queues for the application's context."""


@dataclass(slots=True)
class _PendingCommit:
    offsets: dict[TopicPartition, int]
    deadline: float


class DrivenMember(Protocol):
    """What a runtime needs of the membership state machine it drives.

    :class:`~kgroup.membership.ConsumerMember` has it; the classic runtime
    (:mod:`kgroup.classic_runtime`) drives a classic member that reports its
    generation id as ``member_epoch``.
    """

    @property
    def member_id(self) -> str: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def assignment(self) -> frozenset[TopicPartition]: ...
    @property
    def closed(self) -> bool: ...
    @property
    def state(self) -> enum.Enum: ...
    def handle(self, event: Any, now: float) -> Sequence[Any]: ...
    def next_deadline(self) -> float | None: ...


class Runtime:
    """Drives one :class:`~kgroup.membership.ConsumerMember` for one consumer.

    ``wakeup`` is called (on the event loop) whenever application work is
    queued or the runtime stops, so a front end waiting for either can wake.
    """

    group_protocol: ClassVar[GroupProtocol] = GroupProtocol.CONSUMER
    """The group protocol this runtime speaks."""

    def __init__(
        self,
        config: ConsumerConfig,
        dataplane: DataPlane,
        *,
        wakeup: Callable[[], None],
    ) -> None:
        self.config = config
        self.dataplane = dataplane
        self.member: DrivenMember = self._create_member()
        self.listener: object | None = None
        self.app_work: collections.deque[AppWork] = collections.deque()
        """Work for the application's context; appended on the loop, drained by the app."""
        self.fatal: BaseException | None = None
        """Set once the consumer failed for good; raised from every poll after."""
        self._ended = False
        self._wakeup = wakeup
        # Events for the member. A deque and a wake-up event rather than a
        # memory stream: a receive cut short by the timer deadline could drop
        # an event already handed to it, and a lost event can stall the member.
        self._events: collections.deque[Event | ClassicEvent] = collections.deque()
        self._events_ready: anyio.Event | None = None
        # Subscription changes wait for the metadata of the named topics (see
        # _subscriptions), in the order the application made them.
        self._sub_send, self._sub_recv = anyio.create_memory_object_stream[
            SubscriptionChanged | Unsubscribe
        ](math.inf)
        self._client: KafkaClient | None = None
        self._offsets: OffsetManager | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._scope: anyio.CancelScope | None = None
        self._done: anyio.Event | None = None
        self._ready: anyio.Event | None = None  # set once connected, or when run ends
        self._backoff = Backoff(
            initial=config.retry_backoff_ms / 1000, maximum=config.retry_backoff_max_ms / 1000
        )
        self._request_timeout = config.request_timeout_ms / 1000
        # Bumped on every start / stop of a partition: an offset fetch started
        # before a later stop must not start the partition again.
        self._fetch_generation: dict[TopicPartition, int] = collections.defaultdict(int)
        self._stopped_positions: dict[TopicPartition, int] = {}
        self._seek_overrides: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        # Paused before they started fetching (from on_partitions_assigned, as
        # Java and librdkafka allow): applied right after they are assigned.
        self._pause_on_start: set[TopicPartition] = set()
        self._revocation_commits: dict[int, _PendingCommit] = {}
        self._raised: set[BaseException] = set()
        self._deferred: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._last_epoch = self.member.member_epoch
        self._last_assignment: frozenset[TopicPartition] = frozenset()
        # Per partition: how often it left the installed assignment (see MemberView.tenure).
        self._tenure: dict[TopicPartition, int] = {}

    def _create_member(self) -> DrivenMember:
        """The state machine this runtime drives (subclasses drive another protocol's)."""
        config = self.config
        return ConsumerMember(
            MemberConfig(
                group_id=config.group_id,
                member_id=str(uuid.uuid4()),
                instance_id=config.group_instance_id,
                rack_id=config.client_rack,
                server_assignor=config.group_remote_assignor,
                max_poll_interval_ms=config.max_poll_interval_ms,
                auto_commit=config.enable_auto_commit,
                retry_backoff_ms=config.retry_backoff_ms,
                retry_backoff_max_ms=config.retry_backoff_max_ms,
            )
        )

    # ------------------------------------------------------------------ views

    def is_closed(self) -> bool:
        """True once :meth:`run` ended (closed, aborted, or failed to start)."""
        return self._ended

    @property
    def group_id(self) -> str:
        """``group.id``."""
        return self.config.group_id

    def owned(self) -> frozenset[TopicPartition]:
        """The member's installed assignment (what commits may cover)."""
        return self.member.assignment

    # --------------------------------------------------------------- running

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Connect and drive the member until it is closed (or :meth:`abort`).

        Reports started at once, before connecting: a bootstrap failure becomes
        the consumer's fatal error, raised from poll.
        """
        self._done = anyio.Event()
        self._ready = anyio.Event()
        with anyio.CancelScope() as scope:
            self._scope = scope
            task_status.started()
            try:
                async with (
                    KafkaClient(
                        self.config.bootstrap_servers,
                        client_id=self.config.client_id,
                        request_timeout=self._request_timeout,
                        connect_timeout=_connect_timeout(self.config),
                        backoff=self._backoff,
                    ) as client,
                    anyio.create_task_group() as tg,
                ):
                    self._client = client
                    self._tg = tg
                    self._offsets = OffsetManager(
                        client,
                        self.group_id,
                        MemberView(
                            member_id=lambda: self.member.member_id,
                            member_epoch=lambda: self.member.member_epoch,
                            owned=self.owned,
                            instance_id=self.config.group_instance_id,
                            tenure=lambda tp: self._tenure.get(tp, 0),
                        ),
                        backoff=self._backoff,
                        request_timeout=self._request_timeout,
                    )
                    self._ready.set()
                    tg.start_soon(self._subscriptions)
                    for fn, args in self._deferred:
                        tg.start_soon(self._guarded, fn, *args)
                    self._deferred.clear()
                    await self._drive()
                    tg.cancel_scope.cancel()
            except Exception as exc:
                log.error("group %s: consumer runtime failed: %s", self.group_id, exc)
                if self.fatal is None:
                    self.fatal = exc
        self._ended = True
        self._ready.set()
        self._done.set()
        self._wakeup()

    async def _drive(self) -> None:
        events = self._events
        while not self.member.closed:
            if events:
                self._handle(events.popleft())
                continue
            deadline = self.member.next_deadline()
            if deadline is not None and anyio.current_time() >= deadline:
                self._handle(TimerTick())
                continue
            ready = self._events_ready = anyio.Event()
            timeout = math.inf if deadline is None else deadline - anyio.current_time()
            with anyio.move_on_after(timeout):
                await ready.wait()

    async def _subscriptions(self) -> None:
        # The member joins as soon as it sees the subscription. Learning the
        # topic ids of the named topics first means the first assignment
        # resolves at once: acknowledging a partly resolved assignment tells
        # the broker the unresolved partitions are not owned, and it may hand
        # them to another member while their assigned callback is still queued.
        assert self._client is not None
        async for change in self._sub_recv:
            if isinstance(change, SubscriptionChanged) and change.topics:
                with anyio.move_on_after(self._request_timeout):
                    try:
                        cluster = await self._client.metadata(sorted(change.topics))
                    except KgroupError as exc:
                        log.info(
                            "group %s: metadata for %s failed: %s",
                            self.group_id,
                            change.topics,
                            exc,
                        )
                    else:
                        self.submit(
                            MetadataUpdated({t.topic_id: t.name for t in cluster.topics.values()})
                        )
            self.submit(change)

    def submit(self, event: Event | ClassicEvent) -> None:
        """Queue ``event`` for the member (loop thread; never blocks)."""
        self._events.append(event)
        if self._events_ready is not None:
            self._events_ready.set()

    def _handle(self, event: Event | ClassicEvent) -> None:
        actions = self.member.handle(event, anyio.current_time())
        for action in actions:
            self._perform(action)
        epoch, assignment = self.member.member_epoch, self.member.assignment
        for gone in self._last_assignment - assignment:
            self._tenure[gone] = self._tenure.get(gone, 0) + 1
        if epoch != self._last_epoch or assignment != self._last_assignment:
            log.info(
                "group %s member %s: epoch %d, state %s, assignment (%d) %s",
                self.group_id,
                self.member.member_id,
                epoch,
                self.member.state.name,
                len(assignment),
                ", ".join(str(tp) for tp in sorted(assignment)),
            )
            self._last_epoch, self._last_assignment = epoch, assignment

    def _spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._ended:
            raise self.fatal or KgroupError("the consumer's runtime has stopped")
        if self._tg is None:
            # Not connected yet (an early commit_async): started once connected.
            self._deferred.append((fn, args))
        else:
            self._tg.start_soon(self._guarded, fn, *args)

    async def _guarded(self, fn: Callable[..., Any], *args: Any) -> None:
        # A bug in one background task must end in a typed error from poll,
        # not in a silently dead runtime.
        try:
            await fn(*args)
        except Exception as exc:
            log.exception("group %s: background task failed", self.group_id)
            self._set_fatal(exc)

    def _set_fatal(self, error: BaseException) -> None:
        if self.fatal is None:
            self.fatal = error
        self._wakeup()

    def _queue(self, work: AppWork) -> None:
        self.app_work.append(work)
        self._wakeup()

    # --------------------------------------------------------------- actions

    def _perform(self, action: Action) -> None:
        match action:
            case SendHeartbeat():
                self._spawn(self._heartbeat, action)
            case StopFetching():
                self._stop_fetching(action.partitions)
            case StartFetching():
                self._start_fetching(action.partitions)
            case CommitOffsets():
                self._commit_before_revoke(action)
            case RunCallback():
                if listener_method(self.listener, action.kind) is None:
                    self.submit(CallbackCompleted(action.kind, action.token))
                else:
                    self._queue(CallbackWork(action.kind, action.token, action.partitions))
            case RaiseCallbackError():
                if action.error in self._raised:
                    self._raised.discard(action.error)  # already raised from that poll
                else:
                    self._queue(ErrorWork(action.error))
            case RequestMetadata():
                self._spawn(self._refresh_metadata)
            case RediscoverCoordinator():
                self._spawn(self._rediscover)
            case ReportError():
                self._queue(ErrorWork(broker_error(action.code, action.message)))
            case ReportFatalError():
                log.error(
                    "group %s member %s: fatal error %s: %s",
                    self.group_id,
                    self.member.member_id,
                    action.name,
                    action.message,
                )
                self._set_fatal(broker_error(action.code, action.message))
            case AssignorOnAssignment():
                pass  # no Python new-protocol assignor is configurable yet
            case LeaveComplete():
                log.info("group %s member %s: left the group", self.group_id, self.member.member_id)
            case Closed():
                log.info(
                    "group %s member %s: closed%s",
                    self.group_id,
                    self.member.member_id,
                    " (timed out)" if action.timed_out else "",
                )

    # ------------------------------------------------------------ heartbeats

    async def _heartbeat(self, action: SendHeartbeat) -> None:
        assert self._client is not None
        request = action.request
        event: Event
        try:
            response = await self._client.coordinator_request(
                self.group_id, lambda versions: consumer_group_heartbeat.build(versions, request)
            )
            parsed = consumer_group_heartbeat.parse(consumer_group_heartbeat.narrow(response))
        except BrokerError as exc:
            # FindCoordinator's own error (authorization ...): the member reacts as
            # to the same code in a heartbeat response.
            event = HeartbeatResponseReceived(
                action.seq, HeartbeatResponse(error_code=exc.code, error_message=exc.message)
            )
        except UnsupportedVersionError as exc:
            event = HeartbeatFailed(action.seq, FailureKind.UNSUPPORTED_VERSION, str(exc))
        except RequestTimeoutError as exc:
            event = HeartbeatFailed(action.seq, FailureKind.TIMEOUT, str(exc))
        except (TransportError, KafkaProtocolError) as exc:
            event = HeartbeatFailed(action.seq, FailureKind.DISCONNECTED, str(exc))
        else:
            event = HeartbeatResponseReceived(action.seq, parsed)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("group %s heartbeat %s -> %s", self.group_id, request, event)
        self.submit(event)

    async def _refresh_metadata(self) -> None:
        assert self._client is not None
        try:
            cluster = await self._client.metadata(None)
        except KgroupError as exc:
            log.info("group %s: metadata refresh failed: %s", self.group_id, exc)
            return
        self.submit(MetadataUpdated({t.topic_id: t.name for t in cluster.topics.values()}))

    async def _rediscover(self) -> None:
        assert self._client is not None
        try:
            await self._client.coordinator(self.group_id, refresh=True)
        except KgroupError as exc:
            # The next heartbeat looks it up again and reports what fails.
            log.info("group %s: coordinator lookup failed: %s", self.group_id, exc)
        self.submit(CoordinatorRediscovered())

    # ------------------------------------------------------------ data plane

    def _stop_fetching(self, partitions: frozenset[TopicPartition]) -> None:
        for tp in partitions:
            self._fetch_generation[tp] += 1
            self._stopped_positions.pop(tp, None)
            self._seek_overrides.pop(tp, None)
        self._pause_on_start.difference_update(partitions)
        # Captured before unassigning: librdkafka forgets positions with the partition.
        self._stopped_positions.update(self.dataplane.positions(partitions))
        self.dataplane.unassign(partitions)
        self._paused.difference_update(partitions)

    def _start_fetching(self, partitions: frozenset[TopicPartition]) -> None:
        generations = {}
        for tp in partitions:
            self._fetch_generation[tp] += 1
            generations[tp] = self._fetch_generation[tp]
            self._stopped_positions.pop(tp, None)
        self._spawn(self._fetch_and_assign, generations)

    async def _fetch_and_assign(self, generations: dict[TopicPartition, int]) -> None:
        assert self._offsets is not None

        def wanted() -> dict[TopicPartition, int]:
            return {tp: g for tp, g in generations.items() if self._fetch_generation[tp] == g}

        committed: dict[TopicPartition, int | None] = {}
        while wanted():
            try:
                committed = await self._offsets.fetch(
                    list(wanted()),
                    deadline=anyio.current_time() + self._request_timeout,
                    wanted=lambda: bool(wanted()),
                )
                break
            except RequestTimeoutError as exc:
                log.info("group %s: offset fetch timed out (%s); retrying", self.group_id, exc)
            except BrokerError as exc:
                self._set_fatal(exc)
                return
        start: dict[TopicPartition, int | None] = {}
        owned = self.owned()
        for tp in wanted():
            if tp in owned:
                start[tp] = self._seek_overrides.pop(tp, committed.get(tp))
        if not start:
            return
        try:
            self.dataplane.assign(start)
        except DataPlaneError as exc:
            self._queue(ErrorWork(exc))
            return
        held = self._pause_on_start & start.keys()
        if held:
            # Before the first consume() after the assignment: no record of
            # these partitions has been handed out.
            self.dataplane.pause(held)
            self._paused.update(held)
            self._pause_on_start.difference_update(held)
        log.info(
            "group %s member %s: fetching %s",
            self.group_id,
            self.member.member_id,
            ", ".join(f"{tp}@{'reset' if o is None else o}" for tp, o in sorted(start.items())),
        )

    # --------------------------------------------------------------- commits

    def _commit_before_revoke(self, action: CommitOffsets) -> None:
        offsets = {
            tp: self._stopped_positions[tp]
            for tp in action.partitions
            if tp in self._stopped_positions
        }
        offsets.update(self.dataplane.positions(action.partitions))
        if not offsets:
            self.submit(CommitCompleted(action.token))
            return
        self._revocation_commits[action.token] = _PendingCommit(offsets, action.deadline)
        self._queue(RevocationCommitWork(action.token))

    def release_revocation_commit(self, token: int) -> None:
        """The application reached a service point: start the commit ``token`` waits for."""
        pending = self._revocation_commits.pop(token, None)
        if pending is not None:
            self._spawn(self._revocation_commit, token, pending)

    async def _revocation_commit(self, token: int, pending: _PendingCommit) -> None:
        assert self._offsets is not None
        error: BaseException | None = None
        try:
            await self._offsets.commit(pending.offsets, deadline=pending.deadline)
        except KgroupError as exc:
            error = exc
        self.submit(CommitCompleted(token, error))

    def current_offsets(self) -> dict[TopicPartition, int]:
        """Positions of the owned partitions that are fetching (records handed out)."""
        return self.dataplane.positions(self.owned())

    async def commit(
        self, offsets: Mapping[TopicPartition, int] | None, *, timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        """Commit ``offsets`` (None: the current positions) and wait for the result.

        Returns what was committed (owned partitions only).
        """
        chosen = self.current_offsets() if offsets is None else dict(offsets)
        if not chosen:
            return {}
        budget = self._request_timeout if timeout is None else timeout
        deadline = anyio.current_time() + budget
        manager = await self._connected(deadline)
        return await manager.commit(chosen, deadline=deadline)

    async def _connected(self, deadline: float) -> OffsetManager:
        # Before run() bootstrapped there is no client yet: wait for it (or its failure).
        if self._offsets is None and self._ready is not None:
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                await self._ready.wait()
        if self._offsets is None or self._ended:
            raise self.fatal or RequestTimeoutError("the consumer could not connect in time")
        return self._offsets

    def commit_in_background(
        self,
        offsets: Mapping[TopicPartition, int] | None,
        callback: CommitCallback | None,
    ) -> None:
        """Start a commit; its outcome goes to ``callback`` in the application's next poll."""
        chosen = self.current_offsets() if offsets is None else dict(offsets)
        if not chosen:
            if callback is not None:
                self._queue(CommitResultWork(callback, {}, None))
            return
        self._spawn(self._background_commit, chosen, callback)

    async def _background_commit(
        self, offsets: dict[TopicPartition, int], callback: CommitCallback | None
    ) -> None:
        try:
            done = await self.commit(offsets)
        except KgroupError as exc:
            log.warning("group %s: asynchronous commit failed: %s", self.group_id, exc)
            if callback is not None:
                self._queue(CommitResultWork(callback, offsets, exc))
            return
        if callback is not None:
            self._queue(CommitResultWork(callback, done, None))

    def auto_commit(self) -> None:
        """Interval auto-commit of the current positions (called at a service point)."""
        if self.member.member_epoch <= 0:
            return
        offsets = self.current_offsets()
        if offsets:
            self._spawn(self._auto_commit, offsets)

    async def _auto_commit(self, offsets: dict[TopicPartition, int]) -> None:
        try:
            await self.commit(offsets, timeout=self.config.auto_commit_interval_ms / 1000)
        except KgroupError as exc:
            log.warning("group %s: auto-commit failed: %s", self.group_id, exc)

    async def committed(
        self, partitions: Collection[TopicPartition], *, timeout: float
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of ``partitions`` (None: nothing committed)."""
        deadline = anyio.current_time() + timeout
        manager = await self._connected(deadline)
        return await manager.fetch(list(partitions), deadline=deadline, as_member=False)

    # ------------------------------------------------- application's requests

    def subscribe(
        self, topics: frozenset[str], pattern: str | None, listener: object | None
    ) -> None:
        """Subscribe to topic names or a regex (joins the group)."""
        self.listener = listener
        self._sub_send.send_nowait(SubscriptionChanged(topics, pattern))

    def unsubscribe(self) -> None:
        """Leave the group (partitions are revoked first)."""
        self._sub_send.send_nowait(Unsubscribe())

    def poll_called(self) -> None:
        """The application polled."""
        self.submit(PollCalled())

    def callback_done(self, work: CallbackWork, error: BaseException | None, raised: bool) -> None:
        """A callback returned (``error`` None) or raised; ``raised``: already raised to the app."""
        if error is not None and raised:
            self._raised.add(error)
        self.submit(CallbackCompleted(work.kind, work.token, error))

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Next record of ``partition`` at ``offset`` (also before it starts fetching)."""
        if partition in self.dataplane.assigned:
            self.dataplane.seek(partition, offset)
        elif partition in self.owned():
            self._seek_overrides[partition] = offset
        else:
            raise NotAssignedError(f"cannot seek {partition}: it is not assigned to this consumer")

    def pause(self, partitions: Collection[TopicPartition]) -> None:
        """Stop handing out records of ``partitions`` (also before they start fetching)."""
        fetching = set(partitions) & self.dataplane.assigned
        self.dataplane.pause(fetching)
        self._paused.update(fetching)
        self._pause_on_start.update((set(partitions) & self.owned()) - fetching)

    def resume(self, partitions: Collection[TopicPartition]) -> None:
        """Resume ``partitions`` paused with :meth:`pause`."""
        fetching = set(partitions) & self.dataplane.assigned
        self.dataplane.resume(fetching)
        self._paused.difference_update(fetching)
        self._pause_on_start.difference_update(partitions)

    def request_close(self, timeout: float) -> None:
        """Start closing: release the assignment and leave within ``timeout`` seconds."""
        self.submit(CloseRequested(anyio.current_time() + timeout))

    async def wait_closed(self, timeout: float) -> bool:
        """Wait until :meth:`run` ended, at most ``timeout`` seconds; True if it did."""
        if self._done is None:
            return self._ended
        with anyio.move_on_after(timeout):
            await self._done.wait()
        return self._ended

    def abort(self) -> None:
        """Stop :meth:`run` at once (after a close that did not finish in time)."""
        if self._scope is not None:
            self._scope.cancel()


_DEFAULT_CONNECT_TIMEOUT = 10.0


def _connect_timeout(config: ConsumerConfig) -> float:
    """Seconds to open a connection (TCP and the ApiVersions handshake).

    ``socket.connection.setup.timeout.ms`` (librdkafka's and the Java client's
    key; the data plane gets it too) when set, else 10 s, and never longer than
    ``request.timeout.ms``: a bootstrap server that never answers must fail
    within the timeouts the application configured.
    """
    raw = config.passthrough.get("socket.connection.setup.timeout.ms", "").strip()
    setup = int(raw) / 1000 if raw.isdigit() else _DEFAULT_CONNECT_TIMEOUT
    return min(setup, config.request_timeout_ms / 1000)
