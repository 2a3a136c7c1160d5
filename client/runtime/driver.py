"""The protocol-neutral driver of a consumer: the anyio executor of its runtime core.

One :class:`Driver` per consumer. Its :meth:`Driver.run` task opens the
cluster client (a :data:`~kgroup.runtime.interfaces.TransportFactory`) and a
task group, and drives the member of one **session** (the consumer protocol's
:class:`~kgroup.runtime.consumer_session.ConsumerSession` or the classic
:class:`~kgroup.runtime.classic_session.ClassicSession`) with the time from
``anyio.current_time()``. Every decision above the member is the sans-IO
:class:`~kgroup.runtime.core.RuntimeCore`'s (commits, revocation, truncation,
manual assignment, settled rules, protocol switch); the driver carries out the
effects it returns:

- the session performs its own protocol's actions (group requests, assignors)
  as background tasks that report back as events, so heartbeats never wait
  for the application;
- data-plane changes are made at once; offset fetches, truncation checks and
  commits run in the background (:mod:`kgroup.runtime.offset_io`), as do the
  group looks, coordinator lookups and subscription checks
  (:mod:`kgroup.runtime.group_io`), and report to the core;
- everything that must happen in the application's context is queued as
  *application work* (:data:`~kgroup.runtime.work.AppWork`): rebalance
  callbacks, errors to raise, results of asynchronous commits, and the release
  of the commit before a revocation. The consumer front ends drain the queue
  inside ``poll()`` at points where the application holds no unprocessed
  record (:mod:`kgroup._frontend`).

``group.protocol=auto`` is resolved here, with the driver's own client
(:mod:`kgroup.runtime.choice`): before joining, and again when the first
heartbeat is refused, by switching to a classic session.

Threads: every method must be called on the driver's event loop; from other
threads only :attr:`Driver.app_work` (a thread-safe deque), :attr:`Driver.fatal`,
:attr:`Driver.snapshot`, ``Driver.core.truncation``, :meth:`Driver.is_closed` and the session's
``group_protocol``, ``member_id`` and ``generation_or_epoch`` may be read.
:class:`~kgroup.Consumer` reaches the loop through an anyio blocking portal.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.abc

from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.dataplane.librdkafka import DataPlaneError, commit_reporter
from kgroup.errors import (
    AlreadyAssignedError,
    KgroupError,
    MixedAssignmentError,
    NoBrokersAvailableError,
    RequestTimeoutError,
)
from kgroup.membership import (
    CloseRequested,
    SubscriptionChanged,
    Unsubscribe,
)
from kgroup.offsets import MemberView, OffsetManager
from kgroup.runtime import choice, core, work
from kgroup.runtime._log import log
from kgroup.runtime.connect import open_kafka_client
from kgroup.runtime.fetch_state import (
    Assign,
    Pause,
    Resume,
    Seek,
    Unassign,
)
from kgroup.runtime.group_io import GroupIO
from kgroup.runtime.interfaces import (
    DataPlaneInterface,
    KnowsLogEnds,
    TransportFactory,
    TransportInterface,
    WaitsInChunks,
)
from kgroup.runtime.offset_io import OffsetIO
from kgroup.runtime.topic_watch import MISSING_TOPIC_WARNINGS, missing_topic_delays
from kgroup.telemetry.recorder import ConsumerTelemetry
from kgroup.types import Backoff, OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kgroup.runtime.choice import Session

__all__ = [
    "MISSING_TOPIC_WARNINGS",
    "AlreadyAssignedError",
    "Driver",
    "MixedAssignmentError",
    "missing_topic_delays",
    "open_kafka_client",
]


_T = TypeVar("_T")


ANSWER_TIME_CAP = 0.02
"""Longest answer time (seconds) the application's wait is stretched by (see
:attr:`Driver.quiet_until`): a slow answer is waited for in short slices instead."""

ANSWER_MARGIN = 0.002
"""Added to the expected answer time in :attr:`Driver.quiet_until`: a request leaves
a little after its deadline, so without it the application's wait often ended
just before the answer and then waited once more, in a short slice."""


def loop_clock() -> tuple[Callable[[], float], Callable[..., asyncio.TimerHandle] | None]:
    """The running event loop's clock, as ``anyio.current_time`` reads it, and its
    ``call_at`` when the loop is asyncio's (None otherwise).

    ``anyio.current_time()`` looks the backend up on every call (about 2 us);
    the driver reads the clock a dozen times per heartbeat. ``call_at`` lets the
    driver's wait end at its deadline by setting its event: ending it by
    cancellation (``move_on_after``) unwound an exception through the wait and
    cost an idle member a fifth of its loop's CPU per heartbeat.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # trio
        return anyio.current_time, None
    # A loop with a clock of its own on top of asyncio's (trio as a guest) keeps anyio's.
    if abs(loop.time() - anyio.current_time()) >= 0.001:
        return anyio.current_time, None
    if type(loop).time is asyncio.BaseEventLoop.time:
        # asyncio's own clock is time.monotonic behind a Python method: read it
        # directly (the driver does a dozen times per heartbeat).
        return time.monotonic, loop.call_at
    return loop.time, loop.call_at


class Driver:
    """Drives one consumer's member, whichever its protocol (see the module).

    ``wakeup`` is called (on the event loop) whenever application work is
    queued or the driver stops, so a front end waiting for either can wake.
    ``transport`` opens the cluster client (default: :func:`open_kafka_client`).
    ``auto_offset_store`` False (``enable.auto.offset.store=false``): commits
    without explicit offsets cover what :meth:`store_offsets` stored, not the
    positions.
    """

    def __init__(
        self,
        config: ConsumerConfig,
        dataplane: DataPlaneInterface,
        *,
        wakeup: Callable[[], None],
        transport: TransportFactory = open_kafka_client,
        auto_offset_store: bool = True,
        telemetry: ConsumerTelemetry | None = None,
    ) -> None:
        self.config = config
        self.telemetry = ConsumerTelemetry() if telemetry is None else telemetry
        """Counters of ``metrics()`` and telemetry events (sessions find it here too)."""
        self.dataplane = dataplane
        self._chunked = dataplane if isinstance(dataplane, WaitsInChunks) else None
        self.app_work: collections.deque[work.AppWork] = collections.deque()
        """Work for the application's context; appended on the loop, drained by the app."""
        self.fatal: BaseException | None = None
        """Set once the consumer failed for good; raised from every poll after."""
        self.backoff = Backoff.from_ms(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self.request_timeout = config.request_timeout_ms / 1000
        self._transport = transport
        self._ended = False
        self._wakeup = wakeup
        self._loop_wake: anyio.Event | asyncio.Event | None = None
        self._stepping = False  # inside _step: a HandOver leaves the events to _drive
        self._clock: Callable[[], float] = anyio.current_time
        # Read by the application's thread to size its waits in the data plane
        # (FrontEndCore.wait_slice), which no call from this loop can cut short:
        # group answers awaited that may queue application work or partitions
        # about to start on the data plane (see spawn_answer), and until when
        # (time.monotonic()) the member has nothing scheduled; -inf while the
        # loop has events to handle.
        self.answers_pending = 0
        self.quiet_until = -math.inf
        # How long a group answer usually takes (seconds, a moving average): the
        # application's wait ends that long after the next request goes out, when
        # the answer is usually in, so a heartbeat costs it one extra wake, not two.
        self._answer_time = 0.0
        self._client: TransportInterface | None = None
        self.offsets: OffsetManager | None = None
        """Fetches and commits the group's offsets (only while connected)."""
        self._tg: anyio.abc.TaskGroup | None = None
        self._scope: anyio.CancelScope | None = None
        self._done: anyio.Event | None = None
        self._ready: anyio.Event | None = None  # set once connected, or when run ends
        self._close_asked: anyio.Event | None = None  # request_close() was called
        self._bootstrap_scope: anyio.CancelScope | None = None  # the current connect-and-drive
        self._protocol_known: anyio.Event | None = None  # group.protocol=auto only
        self._deferred: list[tuple[Callable[..., Awaitable[None]], tuple[object, ...]]] = []
        on_commit = config.callbacks.on_commit
        self.core: core.RuntimeCore[Session] = core.RuntimeCore(
            config,
            choice.new_session(config.group_protocol, self),
            dataplane,
            auto_offset_store=auto_offset_store,
            topic_id=self._topic_id,
            log_ends=dataplane.cached_log_ends if isinstance(dataplane, KnowsLogEnds) else None,
            # confluent-kafka's on_commit: kgroup commits (not librdkafka), so
            # kgroup reports every commit's outcome, in the application's next poll.
            commit_callback=None if on_commit is None else commit_reporter(on_commit),
        )
        """Every decision of the runtime (:mod:`kgroup.runtime.core`)."""
        self.snapshot = core.Snapshot(frozenset(), frozenset())
        """What the application's thread reads without a call into the loop (:meth:`publish`)."""
        self.offset_io = OffsetIO(self, self.core)
        """Carries out the offset requests (commits, fetches, truncation checks)."""
        self.group_io = GroupIO(self, self.core)
        """Carries out the group requests (liveness looks, rediscovery, subscriptions)."""

    # ------------------------------------------------------------------ views

    @property
    def session(self) -> Session:
        """The session of the protocol in use (``auto``: switched once decided)."""
        return self.core.session

    @property
    def group_id(self) -> str:
        """``group.id``."""
        return self.config.group_id

    @property
    def client(self) -> TransportInterface:
        """The connected cluster client (only while :meth:`run` runs)."""
        if self._client is None:
            raise RuntimeError("the driver is not connected")
        return self._client

    def is_closed(self) -> bool:
        """True once :meth:`run` ended (closed, aborted, or failed to start)."""
        return self._ended

    def owned(self) -> frozenset[TopicPartition]:
        """The member's installed assignment (what commits may cover), or the manual one."""
        return self.core.owned()

    @property
    def manual(self) -> bool:
        """True while partitions are assigned with ``assign()`` (no group membership)."""
        return self.core.manual

    def paused(self) -> frozenset[TopicPartition]:
        """Partitions paused by the application (also those paused before they started)."""
        return self.core.paused()

    def _topics_deleted(self, topics: frozenset[str]) -> None:
        # Through the session in use now (group.protocol=auto may have switched).
        self.session.topics_deleted(topics)

    def _topic_id(self, topic: str) -> uuid.UUID | None:
        info = None if self._client is None else self._client.cluster.topics.get(topic)
        return None if info is None else info.topic_id

    # --------------------------------------------------------------- running

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Connect and drive the member until it is closed (or :meth:`abort`).

        Reports started at once, before connecting. When no bootstrap server
        answers, the failure is raised from the application's next poll (once:
        it is not fatal) and the driver tries again, backing off up to
        ``retry.backoff.max.ms``, until one answers or the consumer is closed —
        as the Java client and librdkafka keep trying, so a consumer started
        before its cluster is reachable joins once it is. With
        ``group.protocol=auto`` it reports started once the protocol is chosen
        (at most ``request.timeout.ms`` later, or after the first failed
        bootstrap: the choice is then made once connected), so the session's
        ``group_protocol`` is truthful from the start whenever the cluster answers.
        """
        self._done = anyio.Event()
        self._ready = anyio.Event()
        self._close_asked = anyio.Event()
        if self.config.group_protocol is not GroupProtocol.AUTO:
            task_status.started()
            await self._run()
            return
        known = self._protocol_known = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._run)
            with anyio.move_on_after(self.request_timeout):
                await known.wait()
            task_status.started()

    async def _run(self) -> None:
        assert self._ready is not None
        assert self._done is not None
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                await self._connect_and_drive()
            except Exception as exc:
                if self._protocol_known is not None and not self._protocol_known.is_set():
                    choice.assume_consumer(self.config, f"could not ask the cluster ({exc})")
                log.error("group %s: consumer runtime failed: %s", self.group_id, exc)
                if self.fatal is None:
                    self.fatal = exc
        self._ended = True
        if self._protocol_known is not None:
            self._protocol_known.set()
        self._ready.set()
        self._done.set()
        self._wakeup()

    async def _connect_and_drive(self) -> None:
        rounds = 0
        while True:
            try:
                with anyio.CancelScope() as self._bootstrap_scope:
                    await self._drive_connected(rounds)
                return
            except NoBrokersAvailableError as exc:
                if self._client is not None:
                    raise  # not the bootstrap: every broker failed later on
                if not await self._bootstrap_failed(exc, rounds):
                    return
                rounds += 1

    async def _bootstrap_failed(self, exc: NoBrokersAvailableError, rounds: int) -> bool:
        """No bootstrap server answered (round ``rounds``, 0-based): wait to try again.

        The first failure goes to the application (raised from its next poll,
        once; a misspelt address shows at once) and releases a constructor
        waiting for ``group.protocol=auto`` to be decided. False when the
        consumer was closed meanwhile: there is no member to take out of a group.
        """
        assert self._close_asked is not None
        if rounds == 0:
            log.warning(
                "group %s: %s; the next poll raises it once (catch it to keep waiting), "
                "and the consumer tries again until one answers or it is closed",
                self.group_id,
                exc,
            )
            self.queue(work.ErrorWork(exc))
            if self._protocol_known is not None and not self._protocol_known.is_set():
                choice.assume_consumer(
                    self.config,
                    f"could not ask the cluster ({exc}) and asks again once a broker answers",
                )
                self._protocol_known.set()
        if self._close_asked.is_set():
            return False
        with anyio.move_on_after(self.backoff.delay(rounds)):
            await self._close_asked.wait()
        return not self._close_asked.is_set()

    async def _drive_connected(self, failed_rounds: int) -> None:
        """Open the cluster client (bootstrap) and drive the member until it closes."""
        assert self._ready is not None
        # A task cancelled before it first ran never uncounted its answer.
        self.answers_pending = 0
        choose_by = anyio.current_time() + self.request_timeout
        async with (
            self._transport(self.config) as client,
            anyio.create_task_group() as tg,
        ):
            self._client = client
            self._tg = tg
            if failed_rounds:
                log.info(
                    "group %s: connected after %d failed bootstrap rounds",
                    self.group_id,
                    failed_rounds,
                )
            if self._protocol_known is not None:
                await self._choose(client, choose_by)
            self.offsets = OffsetManager(
                client,
                self.group_id,
                MemberView(
                    member_id=self.core.member_id,
                    member_epoch=self.core.member_epoch,
                    simple=lambda: self.core.manual,
                    owned=self.owned,
                    instance_id=self.config.group_instance_id,
                    tenure=self.core.fetch.tenure,
                    fetched_topic_id=self.core.fetched_ids.get,
                    topic_recreated=lambda tps: self.execute(self.core.topic_recreated(tps)),
                    topics_deleted=self._topics_deleted,
                    beyond_log_end=self.core.beyond_log_end,
                ),
                backoff=self.backoff,
                request_timeout=self.request_timeout,
                leader_epochs=self.core.leader_epochs,
                committed=self.core.committed,
            )
            self._ready.set()
            self.session.start()
            tg.start_soon(self.group_io.subscriptions)
            tg.start_soon(self._warm_coordinator)
            for fn, args in self._deferred:
                tg.start_soon(self._guarded, fn, *args)
            self._deferred.clear()
            await self._drive()
            await self.offset_io.finish_background_commits()
            tg.cancel_scope.cancel()

    async def _warm_coordinator(self) -> None:
        """Find the group's coordinator and connect to it before the member needs it.

        librdkafka looks its coordinator up as the consumer is created; kgroup did
        so at the first heartbeat, which put a FindCoordinator and a connection
        (about 25 ms, more on a busy machine) between ``subscribe()`` and the
        join. Best effort: the member's own lookup reports any failure.
        """
        client = self._client
        if client is None or not self.group_id:
            return
        try:
            address = await client.coordinator(self.group_id)
            await client.connection(address.node_id)
        except KgroupError as exc:
            log.debug("group %s: early coordinator lookup failed: %s", self.group_id, exc)

    async def _choose(self, client: TransportInterface, deadline: float) -> None:
        assert self._protocol_known is not None
        protocol = await choice.resolve_auto(client, self.config, deadline)
        if protocol is not self.session.group_protocol:
            self._switch(protocol)
        self._protocol_known.set()

    def _switch(self, protocol: GroupProtocol) -> None:
        # Only before the member owned anything: the first session's member
        # never joined, so nothing is fetching and no callback is pending.
        effects = self.core.session_switched(choice.new_session(protocol, self))
        if self._tg is not None and self._ready is not None and self._ready.is_set():
            self.session.start()
            self.execute(effects)

    async def _drive(self) -> None:
        core = self.core
        clock, call_at = loop_clock()
        self._clock = clock
        while not (session := core.session).closed:
            if session.has_events():
                self._step(session)
                continue
            now = clock()
            # Nothing due (the usual case) changes nothing to publish.
            effects = core.timers(now, time.monotonic())
            if effects:
                self.execute(effects)
            if session.has_events():
                continue
            member_next = deadline = session.next_deadline()
            if deadline is not None and now >= deadline:
                self._step(session)
                continue
            effects = core.look_at_group(now)
            if effects:
                self.execute(effects)
            other = core.next_deadline()
            if other is not None and (deadline is None or other < deadline):
                deadline = other
            wake = self._loop_wake
            if wake is None or wake.is_set():
                if call_at is None:
                    wake = anyio.Event()
                elif wake is None:
                    wake = asyncio.Event()
                else:
                    # On asyncio the loop's own event, reused: creating an anyio
                    # event looks the backend up every time.
                    assert isinstance(wake, asyncio.Event)
                    wake.clear()
                self._loop_wake = wake
            now = clock()
            timeout = math.inf if deadline is None else deadline - now
            self.quiet_until = (
                math.inf
                if member_next is None
                else time.monotonic()
                + (member_next - now)
                + min(self._answer_time, ANSWER_TIME_CAP)
                + ANSWER_MARGIN
            )
            if call_at is None:
                with anyio.move_on_after(timeout):
                    await wake.wait()
            elif deadline is None:
                await wake.wait()
            else:
                timer = call_at(deadline, wake.set)
                try:
                    await wake.wait()
                finally:
                    timer.cancel()

    def _step(self, session: Session) -> None:
        self._stepping = True
        try:
            clock = self._clock
            actions = session.handle_next(clock())
            self.telemetry.step(session, actions)
            for action in actions:
                self.execute(self.core.perform(action, clock()))
            if session is not self.session:
                self.publish()
                return  # switched protocols: the new member starts from scratch
            self.execute(self.core.stepped(clock(), time.monotonic()))
        finally:
            self._stepping = False

    def _hand_over(self, token: int | None) -> None:
        """Carry out a :class:`~kgroup.runtime.core.HandOver`: the member handles its
        queued events now (what :meth:`_drive` would do next, without its timers),
        then the front end looks at its work again."""
        if not self._stepping:
            # Inside a step, _drive handles what is queued before it waits again.
            while (session := self.core.session).has_events() and not session.closed:
                self._step(session)
        self.core.handed_over(token)
        self.wake()  # member timers may have moved: _drive computes its wait again
        self._wakeup()

    # ------------------------------------------------------------- the host

    def wake(self) -> None:
        """A session queued an event for its member: let the loop run."""
        self.quiet_until = -math.inf  # busy until the loop waits again
        if self._loop_wake is not None:
            self._loop_wake.set()

    def spawn_answer(
        self, fn: Callable[..., Awaitable[None]], *args: object, timed: bool = True
    ) -> None:
        """Spawn a request task whose answer may bring the application work (a
        heartbeat, a SyncGroup, the committed offsets a start of fetching needs).

        Counted in :attr:`answers_pending` from now on, not from when the task
        first runs: the application's thread must not start a long record wait
        in between (the slice it took then measured up to 70 ms of a joining
        member's first callback, and a data-plane assign waited for such a wait
        on the loop's thread). ``timed``: the time to the answer feeds the
        estimate behind :attr:`quiet_until` (the member's own requests).
        """
        sent = self.expect_answer()

        async def awaited() -> None:
            try:
                await fn(*args)
            finally:
                # After the answer's event was posted (wake() marked the loop
                # busy): the application's thread keeps its short waits until
                # the loop has handled it.
                self.answered(sent, timed=timed)

        try:
            self.spawn(awaited)
        except BaseException:
            self.answers_pending -= 1
            raise

    def expect_answer(self) -> float:
        """A group request whose answer may bring the application work went out
        (see :meth:`spawn_answer`): counted in :attr:`answers_pending` until
        :meth:`answered` is called with the time returned."""
        self.answers_pending += 1
        return time.monotonic()

    def answered(self, sent: float, *, timed: bool = True) -> None:
        """The answer :meth:`expect_answer` counted was handed to the member (its
        event posted). ``timed``: its time feeds :attr:`quiet_until`'s estimate."""
        if timed:
            took = time.monotonic() - sent
            self._answer_time += (took - self._answer_time) / 4
        self.answers_pending -= 1

    def spawn(self, fn: Callable[..., Awaitable[None]], *args: object) -> None:
        """Run ``fn(*args)`` in the background; a failure becomes the fatal error."""
        if self._ended:
            raise self.fatal or KgroupError("the consumer's runtime has stopped")
        if self._tg is None:
            # Not connected yet (an early commit_async): started once connected.
            self._deferred.append((fn, args))
        else:
            self._tg.start_soon(self._guarded, fn, *args)

    async def _guarded(self, fn: Callable[..., Awaitable[None]], *args: object) -> None:
        # A bug in one background task must end in a typed error from poll,
        # not in a silently dead runtime.
        try:
            await fn(*args)
        except Exception as exc:
            log.exception("group %s: background task failed", self.group_id)
            self.set_fatal(exc)

    def set_fatal(self, error: BaseException) -> None:
        """The consumer failed for good: ``error`` is raised from every poll."""
        if self.fatal is None:
            self.fatal = error
        self._wakeup()

    def queue(self, item: work.AppWork) -> None:
        """Hand ``item`` to the application's context."""
        # A callback reading assignment() sees the state that asked for it.
        self.publish()
        self.app_work.append(item)
        self._wakeup()

    # ------------------------------------------------------------ the effects

    def publish(self) -> None:
        """Publish :attr:`snapshot` after a change the loop made (a step, effects, an
        application's call): a blocking consumer's ``assignment()`` reads it, no hop."""
        self.snapshot = self.core.snapshot(self.snapshot)

    def call_and_publish(self, fn: Callable[..., _T], *args: object) -> _T:
        """``fn(*args)`` on the loop, then :meth:`publish` (what it changed is read next)."""
        try:
            return fn(*args)
        finally:
            self.publish()

    def execute(self, effects: Sequence[core.Effect]) -> None:
        """Carry out what the core decided, in order."""
        self._execute(effects)
        self.publish()

    def _execute(self, effects: Sequence[core.Effect]) -> None:
        for effect in effects:
            match effect:
                case core.DataPlaneOps():
                    self._apply(effect)
                case core.FetchCommitted():
                    self.spawn_answer(self.offset_io.fetch_committed, effect, timed=False)
                case core.CheckTruncation():
                    self.spawn_answer(self.offset_io.check_truncation, effect, timed=False)
                case core.SendMemberCommit():
                    self.spawn(self.offset_io.member_commit, effect)
                case core.FinishCommit():
                    self.session.commit_done(effect.finished)
                case core.Post():
                    self.session.post(effect.event)
                case core.HandOver():
                    self._hand_over(effect.token)
                case core.QueueWork():
                    self.queue(effect.item)
                case core.Fatal():
                    self.set_fatal(effect.error)
                case core.Rediscover():
                    self.spawn(self.group_io.rediscover)
                case core.LookAtGroup():
                    self.spawn(self.group_io.look_at_group, self.session)
                case core.Subscribe():
                    self.group_io.subscribe(effect.change)
                case core.SwitchSession():
                    self._switch(effect.protocol)
                case core.SettledChanged():
                    if self._chunked is not None:
                        self._chunked.group_settled(effect.settled)
                case core.TruncationChanged():
                    self._wakeup()

    def _apply(self, effect: core.DataPlaneOps) -> None:
        """Perform the ops on the data plane (up to an assignment it refuses)."""
        dataplane = self.dataplane
        for op in effect.ops:
            match op:
                case Unassign():
                    dataplane.unassign(op.partitions)
                    self.telemetry.fetch_stopped(op.partitions)
                case Assign():
                    try:
                        dataplane.assign(op.offsets, leader_epochs=self.core.start_epochs(op))
                    except DataPlaneError as exc:
                        self.execute(self.core.assign_failed(op, exc))
                        return
                    self.telemetry.fetch_started(op.offsets)
                    self.core.fetch_started(op.offsets, announce=effect.announce)
                case Pause():
                    dataplane.pause(op.partitions)
                case Resume():
                    dataplane.resume(op.partitions)
                case Seek():
                    dataplane.seek(op.partition, op.offset)
        self.execute(self.core.ops_done())

    # --------------------------------------------------------------- commits

    def release_revocation_commit(self, token: int) -> None:
        """The application reached a service point: start the commit ``token`` waits for."""
        self.execute(self.core.release_revocation_commit(token))

    def current_offsets(self) -> dict[TopicPartition, int]:
        """Positions of the owned partitions (records handed out, see the core)."""
        return self.core.current_offsets()

    def store_offsets(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Remember ``offsets`` for the next commit (``enable.auto.offset.store=false``).

        Raises:
            NotAssignedError: a partition is not assigned to this consumer.
        """
        self.core.store_offsets(offsets)

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int] | None,
        *,
        timeout: float | None = None,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> dict[TopicPartition, int]:
        """Commit ``offsets`` (None: the current positions) and wait for the result.

        ``metadata``: the application's string to store with some of the offsets.
        Returns what was committed (owned partitions only).
        """
        return await self.offset_io.commit(offsets, timeout=timeout, metadata=metadata)

    def commit_in_background(
        self,
        offsets: Mapping[TopicPartition, int] | None,
        callback: work.CommitCallback | None,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        """Start a commit; its outcome goes to ``callback`` in the application's next poll."""
        self.offset_io.commit_in_background(offsets, callback, metadata)

    def auto_commit(self) -> None:
        """Interval auto-commit of the current positions (called at a service point)."""
        self.offset_io.auto_commit()

    async def committed(
        self, partitions: Collection[TopicPartition], *, timeout: float
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of ``partitions`` (None: nothing committed)."""
        return await self.offset_io.committed(partitions, timeout=timeout)

    async def committed_with_metadata(
        self, partitions: Collection[TopicPartition], *, timeout: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """:meth:`committed` with the metadata committed with each offset."""
        return await self.offset_io.committed_with_metadata(partitions, timeout=timeout)

    async def connected(self, deadline: float) -> OffsetManager:
        """The offset manager, once connected (waits for the bootstrap until ``deadline``).

        Raises:
            RequestTimeoutError: not connected by then (or the fatal error, if any).
        """
        if self.offsets is None and self._ready is not None:
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                await self._ready.wait()
        if self.offsets is None or self._ended:
            raise self.fatal or RequestTimeoutError("the consumer could not connect in time")
        return self.offsets

    # ------------------------------------------------- application's requests

    def subscribe(
        self, topics: frozenset[str], pattern: str | None, listener: object | None
    ) -> None:
        """Subscribe to topic names or a regex (joins the group).

        Raises:
            MixedAssignmentError: partitions are assigned manually (``assign()``).
        """
        self.execute(self.core.subscribe(SubscriptionChanged(topics, pattern), listener))

    def unsubscribe(self) -> None:
        """Leave the group (partitions are revoked first)."""
        self.execute(self.core.change_subscription(Unsubscribe()))

    def switch_protocol(self, protocol: GroupProtocol) -> None:
        """Leave the group and join it again on ``protocol`` (:meth:`RuntimeCore.switch_protocol`).

        Raises:
            ValueError: ``protocol`` is AUTO.
            RuntimeError: the consumer is not subscribed.
        """
        self.execute(self.core.switch_protocol(protocol))

    def poll_called(self) -> None:
        """The application polled."""
        self.execute(self.core.poll_called(time.monotonic()))

    def note_poll(self) -> None:
        """The application polled, while :attr:`poll_events_wanted` is False.

        Any thread, no hop to the loop: the driver passes it on to the member
        before its poll timer expires.
        """
        self.core.app_polled = time.monotonic()

    def callback_done(
        self, item: work.CallbackWork, error: BaseException | None, raised: bool
    ) -> None:
        """A callback returned (``error`` None) or raised; ``raised``: already raised to the app."""
        self.execute(self.core.callback_done(item, error, raised, anyio.current_time()))
        self.wake()  # a completion held for asynchronous commits has a deadline

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Next record of ``partition`` at ``offset`` (also before it starts fetching).

        Raises:
            NotAssignedError: ``partition`` is not assigned to this consumer.
        """
        self.execute(self.core.seek(partition, offset))

    def pause(self, partitions: Collection[TopicPartition]) -> None:
        """Stop handing out records of ``partitions`` (also before they start fetching)."""
        self.execute(self.core.pause(partitions))

    def resume(self, partitions: Collection[TopicPartition]) -> None:
        """Resume ``partitions`` paused with :meth:`pause`."""
        self.execute(self.core.resume(partitions))

    def assign(self, offsets: Mapping[TopicPartition, int | None], incremental: bool) -> None:
        """Fetch these partitions without group membership (``assign()``).

        Each starts at its offset (None: the committed offset, else
        ``auto.offset.reset``). Without ``incremental`` the previous manual
        assignment is replaced.

        Raises:
            MixedAssignmentError: the consumer is subscribed.
            AlreadyAssignedError: ``incremental`` and a partition is assigned already.
        """
        self.execute(self.core.assign(offsets, incremental))

    def unassign(self, partitions: Collection[TopicPartition] | None) -> None:
        """Stop fetching manually assigned ``partitions`` (None: all of them).

        Raises:
            MixedAssignmentError: the consumer is subscribed.
            NotAssignedError: a partition is not assigned manually.
        """
        self.execute(self.core.unassign(partitions))

    def request_close(self, timeout: float) -> None:
        """Start closing: release the assignment and leave within ``timeout`` seconds."""
        offsets = self.core.close_commit_offsets()
        if offsets is not None:
            self.commit_in_background(offsets, None)
        self.telemetry.closing()
        if self._close_asked is not None:
            self._close_asked.set()
        if self._client is None and self._bootstrap_scope is not None:
            # Still bootstrapping (a server that never answers holds an attempt
            # for socket.connection.setup.timeout.ms): no member joined, nothing
            # to leave or commit, so the attempt is dropped.
            self._bootstrap_scope.cancel()
        self.session.post(CloseRequested(anyio.current_time() + timeout))

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
