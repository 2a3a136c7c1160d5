"""The protocol-neutral driver of a consumer: a member meets the network and the data plane.

One :class:`Driver` per consumer. Its :meth:`Driver.run` task opens the
cluster client (a :data:`~kgroup.runtime.interfaces.TransportFactory`) and a
task group, and drives the member of one **session** (the consumer protocol's
:class:`~kgroup.runtime.consumer_session.ConsumerSession` or the classic
:class:`~kgroup.runtime.classic_session.ClassicSession`) with the time from
``anyio.current_time()``:

- the session performs its own protocol's actions (group requests, assignors)
  as background tasks that report back as events, so heartbeats never wait
  for the application;
- the driver performs the actions every member returns: data-plane changes
  (stop / start fetching, through the sans-IO
  :class:`~kgroup.runtime.fetch_state.FetchState`) are made at once, offset
  fetches and commits run in the background;
- everything that must happen in the application's context is queued as
  *application work* (:data:`~kgroup.runtime.work.AppWork`): rebalance
  callbacks, errors to raise, results of asynchronous commits, and the commit
  before a revocation (see below). The consumer front ends drain the queue
  inside ``poll()`` at points where the application holds no unprocessed
  record (:mod:`kgroup._frontend`).

Why the revocation commit waits for the application: positions count records
*handed out*; the application may still be processing the last batch when a
revocation starts. The positions of the revoked partitions are captured when
they stop fetching, and committed at the application's next service point
(the start of its next poll, when it has finished with every record handed
out before), so a commit never covers a record the application has not
finished with. The revoke callback needs that same poll anyway.

Interval auto-commits are made at service points too (like the Java client's
auto-commit in poll) for the same reason.

``group.protocol=auto`` is resolved here, with the driver's own client
(:mod:`kgroup.runtime.choice`): before joining, and again when the first
heartbeat is refused, by switching to a classic session.

Threads: every method must be called on the driver's event loop; from other
threads only :attr:`Driver.app_work` (a thread-safe deque), :attr:`Driver.fatal`,
:attr:`Driver.truncation`, :meth:`Driver.is_closed` and the session's
``group_protocol``, ``member_id`` and ``generation_or_epoch`` may be read.
:class:`~kgroup.Consumer` reaches the loop through an anyio blocking portal.
"""

from __future__ import annotations

import collections
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from kgroup.config import AutoOffsetReset, ConsumerConfig, GroupProtocol
from kgroup.dataplane.librdkafka import DataPlaneError, commit_reporter
from kgroup.errors import (
    AlreadyAssignedError,
    AuthorizationError,
    BrokerError,
    CommitFailedError,
    FencedMemberEpochError,
    IllegalGenerationError,
    KgroupError,
    LogTruncationError,
    MixedAssignmentError,
    NoBrokersAvailableError,
    RebalanceInProgressError,
    RequestTimeoutError,
    TopicAuthorizationFailedError,
    UnknownMemberIdError,
    UnknownTopicOrPartitionError,
)
from kgroup.listener import listener_method
from kgroup.membership import (
    CallbackCompleted,
    CallbackKind,
    Closed,
    CloseRequested,
    CommitCompleted,
    CommitOffsets,
    CoordinatorRediscovered,
    LeaveComplete,
    PollCalled,
    RaiseCallbackError,
    RediscoverCoordinator,
    RejoinRequested,
    ReportError,
    ReportFatalError,
    RunCallback,
    StartFetching,
    StopFetching,
    SubscriptionChanged,
    Unsubscribe,
)
from kgroup.offsets import (
    CommittedBook,
    EpochBook,
    MemberView,
    OffsetManager,
    check_truncation,
)
from kgroup.protocol import broker_error
from kgroup.runtime import choice, work
from kgroup.runtime._log import log
from kgroup.runtime.consumer_session import ConsumerSession
from kgroup.runtime.fetch_state import (
    Assign,
    CapturePositions,
    FetchOp,
    FetchState,
    FetchTicket,
    Pause,
    Resume,
    Seek,
    Unassign,
)
from kgroup.runtime.interfaces import (
    DataPlaneInterface,
    DriverAction,
    KnowsLogEnds,
    SubscriptionChange,
    TransportFactory,
    TransportInterface,
    WaitsInChunks,
)
from kgroup.runtime.liveness import NOTHING_SEEN, Look, Repair, UnownedWatch
from kgroup.runtime.session import FinishedCommit
from kgroup.telemetry.recorder import ConsumerTelemetry
from kgroup.transport import KafkaClient
from kgroup.transport.security import explain_denial
from kgroup.types import Backoff, OffsetAndMetadata, TopicPartition, Truncation

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

MISSING_TOPIC_WARNINGS = (1.0, 60.0)
"""Seconds before the first repeat of the missing-topic warning, and the cap.

The wait doubles between warnings: loud at first, when a typo or a topic not
created yet is the likely cause, then rare, so a long wait stays in the log
without flooding it.
"""


def missing_topic_delays(first: float, cap: float) -> Iterator[float]:
    """The waits between missing-topic warnings: first, doubling, capped."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2, cap)


_DEFAULT_CONNECT_TIMEOUT = 10.0

_LAST_POLL_LOOK = 0.01
"""Closer than this (seconds) to its poll timer's expiry, a member is not looked at again."""


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


def open_kafka_client(config: ConsumerConfig) -> AbstractAsyncContextManager[TransportInterface]:
    """The default :data:`~kgroup.runtime.interfaces.TransportFactory`: a KafkaClient."""
    return KafkaClient(
        config.bootstrap_servers,
        client_id=config.client_id,
        request_timeout=config.request_timeout_ms / 1000,
        connect_timeout=_connect_timeout(config),
        backoff=Backoff.from_ms(config.retry_backoff_ms, config.retry_backoff_max_ms),
        security=config.security,
    )


_REBALANCED_CLASSIC = (IllegalGenerationError, UnknownMemberIdError, RebalanceInProgressError)
"""Errors refusing a classic commit because the generation ended: CommitFailedError."""
_FENCED_CONSUMER = (UnknownMemberIdError, FencedMemberEpochError)
"""Errors refusing a consumer-protocol commit because the member is no longer in the
group at that epoch (its session ran out, it was fenced): CommitFailedError, as the
Java client's CommitFailedException."""


@dataclass(slots=True)
class _PendingCommit:
    offsets: dict[TopicPartition, int]
    deadline: float
    stored: frozenset[TopicPartition] | None = None
    """With stored offsets: these partitions' are read when the commit is released."""


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
        self._told_settled = False
        self.fetch = FetchState()
        """What each partition may do on the data plane."""
        self.listener: object | None = None
        self.app_work: collections.deque[work.AppWork] = collections.deque()
        """Work for the application's context; appended on the loop, drained by the app."""
        self.fatal: BaseException | None = None
        """Set once the consumer failed for good; raised from every poll after."""
        self.truncation: LogTruncationError | None = None
        """Owned partitions whose logs were truncated below their committed offsets
        (``auto.offset.reset=error``), waiting for the application's ``seek()``:
        raised from every poll until none is left (replaced, never changed)."""
        self._truncations: dict[TopicPartition, Truncation] = {}
        self._topics: frozenset[str] = frozenset()  # subscribed names, for denial messages
        self.backoff = Backoff.from_ms(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self.request_timeout = config.request_timeout_ms / 1000
        self._transport = transport
        self._ended = False
        self._wakeup = wakeup
        self._loop_wake: anyio.Event | None = None
        # Subscription changes go through the session (metadata, regex) in the
        # order the application made them.
        self._sub_send, self._sub_recv = anyio.create_memory_object_stream[SubscriptionChange](
            math.inf
        )
        self._latest_subscription: SubscriptionChange | None = None
        # switch_protocol(): the protocol to join next once the leave completes,
        # and the subscription to join it with.
        self._switch_to: GroupProtocol | None = None
        self._resume: SubscriptionChanged | None = None
        self._client: TransportInterface | None = None
        self._offsets: OffsetManager | None = None
        # Leader epochs of offsets (KIP-320): commits carry them, partitions start with them.
        self._leader_epochs = EpochBook(self.dataplane.leader_epochs)
        # What the group has committed for owned partitions: the consumer's own
        # commits of positions leave those offsets out (kept across reconnections).
        self._committed = CommittedBook()
        self.poll_events_wanted = True
        """Whether the application's polls must reach the member at once (read by the
        front end's thread): while the member is not settled, a poll may move it on
        (a rejoin after its poll timer expired, a retried rebalance step). Settled,
        polls only keep its poll timer from expiring: the front end notes them
        (:meth:`note_poll`, no thread hop) and the driver passes the latest on
        shortly before the timer would expire."""
        # The front end notes polls at most once a second: the first look is that
        # long before the poll timer expires (a tenth of a shorter timer).
        self._poll_slack = min(1.0, config.max_poll_interval_ms / 10_000)
        self._app_polled = -math.inf  # time.monotonic() of the latest noted poll
        self._app_poll_passed = -math.inf  # ... of the latest poll the member was told of
        self._tg: anyio.abc.TaskGroup | None = None
        self._scope: anyio.CancelScope | None = None
        self._done: anyio.Event | None = None
        self._ready: anyio.Event | None = None  # set once connected, or when run ends
        self._close_asked: anyio.Event | None = None  # request_close() was called
        self._bootstrap_scope: anyio.CancelScope | None = None  # the current connect-and-drive
        self._protocol_known: anyio.Event | None = None  # group.protocol=auto only
        self._revocation_commits: dict[int, _PendingCommit] = {}
        self._raised: set[BaseException] = set()
        self._deferred: list[tuple[Callable[..., Awaitable[None]], tuple[object, ...]]] = []
        self.session: Session = choice.new_session(config.group_protocol, self)
        """The session of the protocol in use (``auto``: switched once decided)."""
        self._last_epoch = self.session.generation_or_epoch
        self._last_assignment: frozenset[TopicPartition] = frozenset()
        self._background_commits = 0
        self._background_commits_done: anyio.Event | None = None
        on_commit = config.callbacks.on_commit
        # confluent-kafka's on_commit: kgroup commits (not librdkafka), so kgroup
        # reports every commit's outcome, in the application's next poll.
        self._on_commit = None if on_commit is None else commit_reporter(on_commit)
        self._manual: set[TopicPartition] | None = None
        """Partitions assigned with ``assign()`` (no group membership); None: not in that mode."""
        self._fetched_ids: dict[TopicPartition, uuid.UUID] = {}
        """The topic id each partition had when it last started fetching, where known."""
        self._stored: dict[TopicPartition, int] | None = None if auto_offset_store else {}
        """``store_offsets()``'s offsets (``enable.auto.offset.store=false``); None: positions."""
        self.session_lapses_at: float | None = None
        """``time.monotonic()`` past which the member's session has surely run out while
        it owns partitions (None: no such risk), read by the front end without a thread
        hop: records it takes from the data plane after that belong to partitions that
        may be another member's already, and are not handed out (a process stopped
        past its session and resumed runs the application's thread before the loop's)."""
        self.liveness = UnownedWatch()
        """When this member, idle, looks for partitions the group left unowned (see
        :mod:`kgroup.runtime.liveness`); None after the group could not be described."""
        self._liveness_on = True

    # ------------------------------------------------------------------ views

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
        if self._manual is not None:
            return frozenset(self._manual)
        return self.session.assignment

    @property
    def manual(self) -> bool:
        """True while partitions are assigned with ``assign()`` (no group membership)."""
        return self._manual is not None

    def paused(self) -> frozenset[TopicPartition]:
        """Partitions paused by the application (also those paused before they started)."""
        return self.fetch.paused | self.fetch.held

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
                "group %s: %s; trying again until one answers or the consumer is closed",
                self.group_id,
                exc,
            )
            self._queue(work.ErrorWork(exc))
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
            self._offsets = OffsetManager(
                client,
                self.group_id,
                MemberView(
                    # Manual assignment commits as a simple consumer (as
                    # librdkafka and Java do): no member id, generation -1.
                    member_id=lambda: "" if self.manual else self.session.member_id,
                    member_epoch=lambda: -1 if self.manual else self.session.generation_or_epoch,
                    simple=lambda: self.manual,
                    owned=self.owned,
                    instance_id=self.config.group_instance_id,
                    tenure=self.fetch.tenure,
                    fetched_topic_id=self._fetched_ids.get,
                    topic_recreated=self._topic_recreated,
                    topics_deleted=self._topics_deleted,
                    beyond_log_end=self._beyond_log_end,
                ),
                backoff=self.backoff,
                request_timeout=self.request_timeout,
                leader_epochs=self._leader_epochs,
                committed=self._committed,
            )
            self._ready.set()
            self.session.start()
            tg.start_soon(self._subscriptions)
            for fn, args in self._deferred:
                tg.start_soon(self._guarded, fn, *args)
            self._deferred.clear()
            await self._drive()
            await self._finish_background_commits()
            tg.cancel_scope.cancel()

    async def _choose(self, client: TransportInterface, deadline: float) -> None:
        assert self._protocol_known is not None
        protocol = await choice.resolve_auto(client, self.config, deadline)
        if protocol is not self.session.group_protocol:
            self._switch(protocol)
        self._protocol_known.set()

    def _switch(self, protocol: GroupProtocol) -> None:
        # Only before the member owned anything: the first session's member
        # never joined, so nothing is fetching and no callback is pending.
        self.session = choice.new_session(protocol, self)
        self._last_epoch = self.session.generation_or_epoch
        if self._tg is not None and self._ready is not None and self._ready.is_set():
            self.session.start()
            if self._latest_subscription is not None:
                # Changes still queued reach the new session anyway; the newest
                # goes last, so it stays the one in force.
                self._sub_send.send_nowait(self._latest_subscription)

    async def _drive(self) -> None:
        while not self.session.closed:
            session = self.session
            if session.has_events():
                self._step(session)
                continue
            now = anyio.current_time()
            check = self._pass_on_polls(session, now)
            if session.has_events():
                continue
            deadline = session.next_deadline()
            if deadline is not None and now >= deadline:
                self._step(session)
                continue
            look = self.liveness.next_deadline() if self._liveness_on else None
            if look is not None and self.liveness.due(now):
                self.spawn(self._look_at_group, session)
                look = None
            for other in (check, look):
                if other is not None and (deadline is None or other < deadline):
                    deadline = other
            wake = self._loop_wake = anyio.Event()
            timeout = math.inf if deadline is None else deadline - anyio.current_time()
            with anyio.move_on_after(timeout):
                await wake.wait()

    def _pass_on_polls(self, session: Session, now: float) -> float | None:
        """Tell the member of the latest noted poll once its poll timer nears expiry.

        Returns when to look again (None: no need). A poll noted after the last
        look is passed on with the time it was made; with none, the look is
        repeated halfway to the expiry, so a poll made until just before it
        still counts.
        """
        expires = session.poll_deadline()
        if expires is None:
            return None
        check_at = expires - self._poll_slack
        if now < check_at:
            return check_at
        polled = self._app_polled
        if polled > self._app_poll_passed:
            self._app_poll_passed = polled
            session.post(PollCalled(at=now - max(0.0, time.monotonic() - polled)))
            return None
        left = expires - now
        return now + left / 2 if left > _LAST_POLL_LOOK else None

    def _step(self, session: Session) -> None:
        actions = session.handle_next(anyio.current_time())
        self.telemetry.step(session, actions)
        for action in actions:
            self._perform(action)
        if session is not self.session:
            return  # switched protocols: the new member starts from scratch
        epoch, assignment = session.generation_or_epoch, session.assignment
        self.poll_events_wanted = not session.settled
        self.fetch.assignment_changed(self.owned())
        self._forget_stored()
        self._refresh_truncation()
        self._tell_settled()
        expiry = session.session_expiry() if assignment else None
        self.session_lapses_at = (
            None if expiry is None else time.monotonic() + (expiry - anyio.current_time())
        )
        settled = (
            session.settled
            and not self.manual
            and isinstance(self._latest_subscription, SubscriptionChanged)
        )
        self.liveness.observe(
            anyio.current_time(), settled=settled, idle=settled and not assignment, generation=epoch
        )
        if epoch != self._last_epoch or assignment != self._last_assignment:
            log.info(
                "group %s member %s: epoch %d, state %s, assignment (%d) %s",
                self.group_id,
                session.member_id,
                epoch,
                session.state_name,
                len(assignment),
                ", ".join(str(tp) for tp in sorted(assignment)),
            )
            self._last_epoch, self._last_assignment = epoch, assignment
            self._committed.forget(self.owned())

    async def _look_at_group(self, session: Session) -> None:
        """Describe the group; ask the member to rejoin if the watch finds it stuck."""
        from kgroup.admin.groups import describe_group_once  # noqa: PLC0415 - idle members only
        from kgroup.transport import KafkaClient  # noqa: PLC0415

        client = self.client
        if not isinstance(client, KafkaClient):
            self._liveness_on = False  # a test transport that cannot describe groups
            return
        look = NOTHING_SEEN  # what a failed look counts as: the next comes after the quiet wait
        try:
            with anyio.fail_after(2 * self.request_timeout):
                group = await describe_group_once(client, self.group_id)
                topics = sorted({t for m in group.members for t in m.subscribed_topics})
                meta = await client.metadata(topics, timeout=self.request_timeout)
            counts = {name: t.partition_count for name, t in meta.topics.items()}
            look = Look.of(group, counts, session.member_id)
        except AuthorizationError as exc:
            # Describing the group needs DESCRIBE on it, which a consumer's
            # principal may lack: this member stops looking, it still consumes.
            log.info("group %s: not looking at the group's assignment: %s", self.group_id, exc)
            self._liveness_on = False
        except (KgroupError, TimeoutError) as exc:
            log.info("group %s: could not look at the group's assignment: %s", self.group_id, exc)
        verdict = self.liveness.looked(anyio.current_time(), look)
        if verdict is not None and session is self.session:
            as_new = verdict.repair is Repair.REJOIN_AS_NEW
            session.post(RejoinRequested(verdict.reason, as_new=as_new))
        self.wake()

    async def _subscriptions(self) -> None:
        watch: anyio.CancelScope | None = None
        async for change in self._sub_recv:
            if watch is not None:
                watch.cancel()  # the subscription it watched is gone
                watch = None
            if isinstance(change, SubscriptionChanged) and change.topics:
                self._topics = change.topics  # named in authorization errors
                if await self._topics_denied(change.topics):
                    return
                watch = anyio.CancelScope()
                self.spawn(self._warn_while_missing, change.topics, watch)
            await self.session.subscribe(change)

    async def _warn_while_missing(self, topics: frozenset[str], scope: anyio.CancelScope) -> None:
        """Log a WARNING while a subscribed topic is unknown, repeated with backoff.

        Without it a consumer of a topic that does not exist waits silently:
        the group assigns it nothing and no error is due (the topic may be
        created later, as the Java client waits too). The broker answers
        UNKNOWN_TOPIC_OR_PARTITION both for a missing topic and, with some
        authorizers, for one the principal may not describe, so both are named.
        """
        with scope:
            for delay in missing_topic_delays(*MISSING_TOPIC_WARNINGS):
                try:
                    cluster = await self.client.metadata(
                        sorted(topics), timeout=self.request_timeout
                    )
                except KgroupError as exc:
                    log.info(
                        "group %s: metadata for %s failed: %s", self.group_id, sorted(topics), exc
                    )
                else:
                    errors = cluster.topic_errors
                    missing = sorted(
                        t
                        for t in topics
                        if errors.get(t)
                        and isinstance(broker_error(errors[t]), UnknownTopicOrPartitionError)
                    )
                    if not missing:
                        return
                    names = ", ".join(missing)
                    log.warning(
                        "group %s: subscribed topic %s does not exist or is not authorized for "
                        "this client, so no partitions are assigned; create it (for example "
                        "`kgroup topics create %s --bootstrap-servers %s`), check the spelling, "
                        "or grant DESCRIBE and READ on it; checking again in %.0f s",
                        self.group_id,
                        names,
                        missing[0],
                        ",".join(self.config.bootstrap_servers),
                        delay,
                    )
                await anyio.sleep(delay)

    async def _topics_denied(self, topics: frozenset[str]) -> bool:
        """Make a subscribed topic the principal may not describe fatal; True if so.

        As the Java client: the ACL denial is the application's error, raised
        from poll, not a retry loop (and no partition is ever held). A failed
        lookup is not a denial: the member joins and the session reports what fails.
        """
        try:
            cluster = await self.client.metadata(sorted(topics), timeout=self.request_timeout)
        except KgroupError as exc:
            log.info("group %s: metadata for %s failed: %s", self.group_id, sorted(topics), exc)
            return False
        errors = cluster.topic_errors
        denied = sorted(
            t
            for t in topics
            if errors.get(t) and isinstance(broker_error(errors[t]), TopicAuthorizationFailedError)
        )
        if denied:
            self.set_fatal(
                explain_denial(broker_error(errors[denied[0]]), group=self.group_id, topics=denied)
            )
        return bool(denied)

    # ------------------------------------------------------------- the host

    def wake(self) -> None:
        """A session queued an event for its member: let the loop run."""
        if self._loop_wake is not None:
            self._loop_wake.set()

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

    def _queue(self, item: work.AppWork) -> None:
        self.app_work.append(item)
        self._wakeup()

    # --------------------------------------------------------------- actions

    def _perform(self, action: DriverAction) -> None:
        match action:
            case StopFetching():
                self._apply(self.fetch.stop(action.partitions))
            case StartFetching():
                self.spawn(self._fetch_and_assign, self.fetch.start(action.partitions))
            case CommitOffsets():
                self._commit_for_member(action)
            case RunCallback():
                if listener_method(self.listener, action.kind) is None:
                    # No method to run, but a revocation still waits for the
                    # application's commit_async in flight, as after a revoke
                    # callback: released first, its commit would reach the
                    # broker after the leave or the hand-over and be refused.
                    self._callback_completed(CallbackCompleted(action.kind, action.token))
                else:
                    self._queue(work.CallbackWork(action.kind, action.token, action.partitions))
            case RaiseCallbackError():
                if action.error in self._raised:
                    self._raised.discard(action.error)  # already raised from that poll
                else:
                    self._queue(work.ErrorWork(action.error))
            case RediscoverCoordinator():
                self.spawn(self._rediscover)
            case ReportError():
                error = broker_error(action.code, action.message)
                if isinstance(error, AuthorizationError):
                    # An ACL denial does not heal by retrying: fatal, raised from poll.
                    self.set_fatal(explain_denial(error, group=self.group_id, topics=self._topics))
                else:
                    self._queue(work.ErrorWork(error))
            case ReportFatalError():
                if choice.falls_back(self.config, self.session, action):
                    self._switch(GroupProtocol.CLASSIC)
                    return
                log.error(
                    "group %s member %s: fatal error %s: %s",
                    self.group_id,
                    self.session.member_id,
                    action.name,
                    action.message,
                )
                error = broker_error(action.code, action.message)
                if isinstance(self.session, ConsumerSession):
                    # A classic group the broker will not convert: say so, and what to do.
                    error = choice.explain_refused_upgrade(self.config, error)
                self.set_fatal(explain_denial(error, group=self.group_id, topics=self._topics))
            case LeaveComplete():
                log.info(
                    "group %s member %s: left the group", self.group_id, self.session.member_id
                )
                if self._switch_to is not None:
                    self._rejoin_switched()
            case Closed():
                log.info(
                    "group %s member %s: closed%s",
                    self.group_id,
                    self.session.member_id,
                    " (timed out)" if action.timed_out else "",
                )

    async def _rediscover(self) -> None:
        delay = self.session.rediscovery_delay()
        if delay:
            await anyio.sleep(delay)
        try:
            await self.client.coordinator(self.group_id, refresh=True)
        except KgroupError as exc:
            # The next request looks it up again and reports what fails.
            log.info("group %s: coordinator lookup failed: %s", self.group_id, exc)
        self.session.post(CoordinatorRediscovered())

    # ------------------------------------------------------------ data plane

    def _apply(self, ops: Sequence[FetchOp]) -> bool:
        """Perform ``ops`` on the data plane; False if it refused an assignment."""
        dataplane = self.dataplane
        for op in ops:
            match op:
                case CapturePositions():
                    positions = dataplane.positions(op.partitions)
                    self.fetch.positions_captured(positions)
                    # The stopped positions are committed after the data plane let
                    # go of the partitions: keep their epochs now. (librdkafka's local
                    # position lookup runs twice, once per stop: a call returning both
                    # would add a third, overlapping method to the DataPlaneInterface
                    # seam that applications implement too.)
                    self._leader_epochs.note(positions, dataplane.leader_epochs(positions))
                case Unassign():
                    dataplane.unassign(op.partitions)
                    self.telemetry.fetch_stopped(op.partitions)
                case Assign():
                    starts = {tp: o for tp, o in op.offsets.items() if o is not None and o >= 0}
                    try:
                        dataplane.assign(op.offsets, leader_epochs=self._leader_epochs.of(starts))
                    except DataPlaneError as exc:
                        self.fetch.assign_failed(op)
                        self._queue(work.ErrorWork(exc))
                        self._refresh_truncation()
                        return False
                    self.telemetry.fetch_started(op.offsets)
                    self._note_topic_ids(op.offsets.keys())
                case Pause():
                    dataplane.pause(op.partitions)
                case Resume():
                    dataplane.resume(op.partitions)
                case Seek():
                    dataplane.seek(op.partition, op.offset)
        self._refresh_truncation()
        self._tell_settled()
        return True

    def _tell_settled(self) -> None:
        """Tell a chunked data plane whether calls from the driver may come soon.

        Settled: the member holds its assignment (or a manual one), every owned
        partition is on the data plane and none other is; until the next
        heartbeat brings a change, nothing but auto-commits and the
        application's own calls needs the handle. A member owning nothing is
        not settled: a new member of the consumer protocol is stable with no
        partitions while the others release them, and gets them soon after.
        """
        chunked = self._chunked
        if chunked is None:
            return
        owned = self.owned()
        settled = (
            bool(owned)
            and (self.manual or self.session.settled)
            and owned == self.dataplane.assigned
        )
        if settled != self._told_settled:
            self._told_settled = settled
            chunked.group_settled(settled)

    def _note_topic_ids(self, partitions: Iterable[TopicPartition]) -> None:
        # The offset fetch before a start described the topics (it names them by
        # id), so the ids are those of the topics the data plane now fetches.
        if self._client is None:
            return
        topics = self._client.cluster.topics
        for tp in partitions:
            info = topics.get(tp.topic)
            if info is not None and info.topic_id.int:
                self._fetched_ids[tp] = info.topic_id
            else:
                self._fetched_ids.pop(tp, None)

    def _topics_deleted(self, topics: frozenset[str]) -> None:
        # Through the session in use now (group.protocol=auto may have switched).
        self.session.topics_deleted(topics)

    def _topic_recreated(self, partitions: frozenset[TopicPartition]) -> None:
        """A commit found these partitions' topic deleted and created again."""
        owned = self.owned()
        self._apply(self.fetch.topic_recreated(partitions & owned))

    def _beyond_log_end(self, offsets: Mapping[TopicPartition, int]) -> set[str]:
        """Topics of ``offsets`` past the log end the data plane's last fetch saw."""
        dataplane = self.dataplane
        if not isinstance(dataplane, KnowsLogEnds):
            return set()
        fetching = self.fetch.fetching
        ends = dataplane.cached_log_ends(tp for tp in offsets if tp in fetching)
        return {tp.topic for tp, end in ends.items() if offsets[tp] > end}

    async def _fetch_and_assign(self, ticket: FetchTicket) -> None:
        assert self._offsets is not None
        fetch = self.fetch
        committed: dict[TopicPartition, int | None] = {}
        while fetch.wanted(ticket):
            try:
                committed = await self._offsets.fetch(
                    sorted(fetch.wanted(ticket)),
                    deadline=anyio.current_time() + self.request_timeout,
                    wanted=lambda: bool(fetch.wanted(ticket)),
                )
                break
            except RequestTimeoutError as exc:
                log.info("group %s: offset fetch timed out (%s); retrying", self.group_id, exc)
            except BrokerError as exc:
                self.set_fatal(exc)
                return
        start = await self._start_from_committed(ticket, committed)
        if start is None:
            return
        log.info(
            "group %s member %s: fetching %s",
            self.group_id,
            self.session.member_id,
            ", ".join(f"{tp}@{'reset' if o is None else o}" for tp, o in sorted(start.items())),
        )

    async def _start_from_committed(
        self, ticket: FetchTicket, committed: dict[TopicPartition, int | None]
    ) -> Mapping[TopicPartition, int | None] | None:
        """Start ``ticket``'s partitions still wanted, from ``committed`` once checked.

        The one way both a member's assignment and a manual ``assign()`` start
        from committed offsets, so that both get the KIP-320 truncation check
        (:meth:`_check_truncation`), as the Java client validates the positions
        of subscribed and manually assigned partitions alike. Returns where the
        partitions started, or None if none did (or the data plane refused).
        """
        fetch = self.fetch
        diverged = await self._check_truncation(ticket, committed)
        ops = fetch.offsets_fetched(ticket, committed, self.owned(), diverged)
        self._await_seek({tp: cut for tp, cut in diverged.items() if tp in fetch.awaiting_seek})
        if not ops or not self._apply(ops):
            return None
        return next(op.offsets for op in ops if isinstance(op, Assign))

    async def _check_truncation(
        self, ticket: FetchTicket, committed: dict[TopicPartition, int | None]
    ) -> dict[TopicPartition, Truncation]:
        """Check the committed offsets the partitions would start at against the leaders' logs.

        librdkafka (2.16) fetches an assigned offset without validating its leader
        epoch: one past the end of a truncated log is out of range, and
        ``auto.offset.reset`` then replays the partition (earliest) or skips the
        records written since the truncation (latest). The Java client checks
        (KIP-320) and, as it does, kgroup moves a truncated offset to where the
        log diverges (with a warning) under ``earliest`` / ``latest``; under
        ``error`` it leaves the offset and returns the truncations: those
        partitions wait for the application's ``seek()`` (:meth:`_await_seek`).
        Partitions starting elsewhere (a seek, a stopped position) are not checked.
        """
        fetch = self.fetch
        wanted = fetch.wanted(ticket)
        starts = {
            tp: o
            for tp, o in committed.items()
            if o is not None
            and tp in wanted
            and fetch.seek_override(tp) is None
            and not fetch.stopped_positions((tp,))
        }
        cuts = await check_truncation(
            self.client,
            starts,
            self._leader_epochs,
            timeout=self.request_timeout,
            max_age=self.config.metadata_max_age,
        )
        refuse = self.config.auto_offset_reset is AutoOffsetReset.ERROR
        for cut in cuts:
            # The epoch of the divergence point, for a start (or seek) there.
            self._leader_epochs.note(
                {cut.partition: cut.resume_at}, {cut.partition: cut.resume_epoch}
            )
            if refuse:
                continue
            log.warning(
                "group %s: %s was committed at offset %d (leader epoch %d), but the "
                "leader's log ends that epoch at %d: the log was truncated (unclean "
                "leader election); resuming at %d",
                self.group_id,
                cut.partition,
                cut.committed,
                cut.committed_epoch,
                cut.resume_at,
                cut.resume_at,
            )
            committed[cut.partition] = cut.resume_at
        return {cut.partition: cut for cut in cuts} if refuse else {}

    def _await_seek(self, cuts: Mapping[TopicPartition, Truncation]) -> None:
        """These truncated partitions wait for a ``seek()``: poll raises until they have one."""
        if not cuts:
            return
        for cut in cuts.values():
            log.warning(
                "group %s: %s was committed at offset %d (leader epoch %d), but the "
                "leader's log diverges from it at %d: the log was truncated (unclean "
                "leader election); auto.offset.reset=error, so it waits for the "
                "application to seek it",
                self.group_id,
                cut.partition,
                cut.committed,
                cut.committed_epoch,
                cut.resume_at,
            )
        self._truncations.update(cuts)
        self._refresh_truncation()

    def _refresh_truncation(self) -> None:
        """Make :attr:`truncation` name exactly the partitions still awaiting a seek."""
        if not self._truncations and self.truncation is None:
            return  # the usual case, on every step: nothing to look at
        waiting = self.fetch.awaiting_seek
        for tp in [tp for tp in self._truncations if tp not in waiting]:
            del self._truncations[tp]
        current = tuple(self._truncations[tp] for tp in sorted(self._truncations))
        if not current:
            self.truncation = None
        elif self.truncation is None or self.truncation.truncations != current:
            self.truncation = LogTruncationError(current)
            self._wakeup()

    # --------------------------------------------------------------- commits

    def _commit_for_member(self, action: CommitOffsets) -> None:
        if action.offsets:
            # A commit the member retries after a rebalance (the application
            # released it before): its own offsets first, and at once.
            offsets = {tp: o for tp, o in action.offsets.items() if tp in action.partitions}
            rest = action.partitions - offsets.keys()
            if self._stored is not None:
                offsets.update(self._uncommitted(self._progress(rest)))
            else:
                positions = self.fetch.stopped_positions(rest)
                live = self.dataplane.positions(rest)
                positions.update({tp: o for tp, o in live.items() if tp not in positions})
                offsets.update(self._uncommitted(positions))
            if offsets:
                self.spawn(
                    self._member_commit, action.token, _PendingCommit(offsets, action.deadline)
                )
                return
        elif self._stored is not None:
            # Stored offsets are read when the application reaches its next
            # poll: until then it may still store those of the last records
            # it was handed (positions, by contrast, are final once stopped).
            self._revocation_commits[action.token] = _PendingCommit(
                {}, action.deadline, frozenset(action.partitions)
            )
            self._queue(work.RevocationCommitWork(action.token))
            return
        else:
            offsets = self._uncommitted(self._progress(action.partitions))
            if offsets:
                self._revocation_commits[action.token] = _PendingCommit(offsets, action.deadline)
                self._queue(work.RevocationCommitWork(action.token))
                return
        self.session.post(CommitCompleted(action.token))

    def release_revocation_commit(self, token: int) -> None:
        """The application reached a service point: start the commit ``token`` waits for."""
        pending = self._revocation_commits.pop(token, None)
        if pending is None:
            return
        if pending.stored is not None:
            pending.offsets.update(self._uncommitted(self._progress(pending.stored)))
            if not pending.offsets:
                self.session.post(CommitCompleted(token))
                return
        self.spawn(self._member_commit, token, pending)

    async def _member_commit(self, token: int, pending: _PendingCommit) -> None:
        assert self._offsets is not None
        session = self.session
        generation = session.generation_or_epoch
        error: BaseException | None = None
        started = anyio.current_time()
        try:
            await self._offsets.commit(pending.offsets, deadline=pending.deadline)
        except KgroupError as exc:
            error = exc
        self._report_commit(pending.offsets, error)
        self.telemetry.commit_done(
            pending.offsets, generation, anyio.current_time() - started, error
        )
        session.commit_done(FinishedCommit(token, pending.offsets, error, generation))

    def current_offsets(self) -> dict[TopicPartition, int]:
        """Positions of the owned partitions (records handed out).

        Includes owned partitions that already stopped fetching: in a revoke
        callback (during a rebalance or ``close()``) the revoked partitions
        have stopped but are still owned, and ``commit()`` with no offsets must
        cover them (as Java's ``commitSync()`` in ``onPartitionsRevoked``).
        """
        return self._progress(self.owned())

    def _progress(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """What a commit of ``partitions`` covers: positions, or the stored offsets.

        With ``enable.auto.offset.store=false`` only offsets the application
        stored with ``store_offsets()`` are committed (as librdkafka).
        """
        if self._stored is not None:
            return {tp: self._stored[tp] for tp in partitions if tp in self._stored}
        offsets = self.fetch.stopped_positions(partitions)
        offsets.update(self.dataplane.positions(partitions))
        return offsets

    def _uncommitted(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """``offsets`` without those the group has committed already (see CommittedBook).

        Only for the commits the consumer makes by itself; an application's
        ``commit()`` sends what it asks for.
        """
        if not offsets:
            return offsets
        changed = self._committed.changed(offsets, self.fetch.tenure)
        unchanged = {tp: o for tp, o in offsets.items() if tp not in changed}
        if not unchanged:
            return changed
        # The commit is where a topic deleted and created again is noticed (an
        # offset past the new log's end, a new topic id): librdkafka's position
        # in it can equal the old topic's committed offset, so such partitions
        # still go to the commit, which then leaves them out and fetches anew.
        past_end = self._beyond_log_end(unchanged)
        recreated = self._offsets.recreated(unchanged) if self._offsets else frozenset()
        for tp, offset in unchanged.items():
            if tp.topic in past_end or tp in recreated:
                changed[tp] = offset
        if len(changed) < len(offsets) and log.isEnabledFor(logging.DEBUG):
            log.debug(
                "group %s: not committing %s again: unchanged since committed",
                self.group_id,
                sorted(offsets.keys() - changed.keys()),
            )
        return changed

    def _forget_stored(self) -> None:
        # Stored offsets of a partition that left the assignment must never be
        # committed if it comes back: another member may have moved on.
        if self._stored:
            owned = self.owned()
            for tp in [tp for tp in self._stored if tp not in owned]:
                del self._stored[tp]

    def store_offsets(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Remember ``offsets`` for the next commit (``enable.auto.offset.store=false``).

        Raises:
            NotAssignedError: a partition is not assigned to this consumer.
        """
        assert self._stored is not None
        owned = self.owned()
        foreign = sorted(tp for tp in offsets if tp not in owned)
        if foreign:
            raise work.NotAssignedError(
                f"cannot store offsets of {', '.join(map(str, foreign))}: not assigned to "
                "this consumer"
            )
        self._stored.update(offsets)

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
        started = anyio.current_time()
        epoch = self.session.generation_or_epoch
        try:
            done = await self._commit(offsets, timeout=timeout, metadata=metadata)
        except KgroupError as exc:
            tried = self.current_offsets() if offsets is None else offsets
            self.telemetry.commit_done(tried, epoch, anyio.current_time() - started, exc)
            raise
        if done:
            self.telemetry.commit_done(done, epoch, anyio.current_time() - started, None)
        return done

    async def _commit(
        self,
        offsets: Mapping[TopicPartition, int] | None,
        *,
        timeout: float | None,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> dict[TopicPartition, int]:
        chosen = self.current_offsets() if offsets is None else dict(offsets)
        if not chosen:
            return {}
        budget = self.request_timeout if timeout is None else timeout
        deadline = anyio.current_time() + budget
        try:
            done = await self._commit_chosen(chosen, deadline, metadata)
        except KgroupError as exc:
            self._report_commit(chosen, exc)
            raise
        self._report_commit(done, None)
        return done

    def _report_commit(
        self, offsets: Mapping[TopicPartition, int], error: BaseException | None
    ) -> None:
        if self._on_commit is not None and offsets:
            self._queue(work.CommitResultWork(self._on_commit, dict(offsets), error))

    async def _commit_chosen(
        self,
        chosen: dict[TopicPartition, int],
        deadline: float,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> dict[TopicPartition, int]:
        manager = await self._connected(deadline)
        if self.session.group_protocol is not GroupProtocol.CLASSIC:
            try:
                return await manager.commit(chosen, deadline=deadline, metadata=metadata)
            except _FENCED_CONSUMER as exc:
                raise CommitFailedError(
                    f"commit of {sorted(chosen)} failed: this member is no longer in the group "
                    f"at that epoch ({exc}); the partitions may have moved to another member; "
                    "poll again (the member rejoins) and continue"
                ) from exc
        try:
            return await manager.commit(
                chosen, deadline=deadline, retry_rebalance_in_progress=False, metadata=metadata
            )
        except _REBALANCED_CLASSIC as exc:
            # Read as fatal otherwise; it is the normal end of a generation.
            raise CommitFailedError(
                f"commit of {sorted(chosen)} failed: the group rebalanced ({exc}); the "
                "partitions may have moved to another member; poll again and continue"
            ) from exc

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
        callback: work.CommitCallback | None,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        """Start a commit; its outcome goes to ``callback`` in the application's next poll."""
        chosen = self.current_offsets() if offsets is None else dict(offsets)
        if not chosen:
            if callback is not None:
                self._queue(work.CommitResultWork(callback, {}, None))
            return
        # Counted from here, not from when the task starts: close must wait for it either way.
        self._background_commits += 1
        self.spawn(self._background_commit, chosen, callback, metadata)

    async def _finish_background_commits(self) -> None:
        """The member closed: let asynchronous commits in flight end (as Java's close).

        An application's ``commit_async`` from the revoke callback that
        ``close()`` runs would otherwise be cancelled with the runtime, and
        everything since the previous commit redelivered. Bounded by
        ``request.timeout.ms`` (each commit is too).
        """
        if self._background_commits:
            done = self._background_commits_done
            if done is None or done.is_set():
                # One event per wait for zero: every waiter meanwhile shares it.
                done = self._background_commits_done = anyio.Event()
            with anyio.move_on_after(self.request_timeout):
                await done.wait()

    async def _background_commit(
        self,
        offsets: dict[TopicPartition, int],
        callback: work.CommitCallback | None,
        metadata: Mapping[TopicPartition, str] | None,
    ) -> None:
        try:
            done = await self.commit(offsets, metadata=metadata)
        except KgroupError as exc:
            log.warning("group %s: asynchronous commit failed: %s", self.group_id, exc)
            if callback is not None:
                self._queue(work.CommitResultWork(callback, offsets, exc))
        else:
            if callback is not None:
                self._queue(work.CommitResultWork(callback, done, None))
        finally:
            self._background_commits -= 1
            if not self._background_commits and self._background_commits_done is not None:
                self._background_commits_done.set()

    def auto_commit(self) -> None:
        """Interval auto-commit of the current positions (called at a service point)."""
        if self.session.generation_or_epoch <= 0 and not self.manual:
            return
        offsets = self._uncommitted(self.current_offsets())
        if offsets:
            self.spawn(self._auto_commit, offsets)

    async def _auto_commit(self, offsets: dict[TopicPartition, int]) -> None:
        try:
            await self.commit(offsets, timeout=self.config.auto_commit_interval_ms / 1000)
        except KgroupError as exc:
            log.warning("group %s: auto-commit failed: %s", self.group_id, exc)

    async def committed(
        self, partitions: Collection[TopicPartition], *, timeout: float
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of ``partitions`` (None: nothing committed)."""
        if not partitions:
            # Nothing to ask (as Java's committed() of an empty set): no request,
            # so no wait for a coordinator that may not answer.
            return {}
        deadline = anyio.current_time() + timeout
        manager = await self._connected(deadline)
        return await manager.fetch(list(partitions), deadline=deadline, as_member=False)

    async def committed_with_metadata(
        self, partitions: Collection[TopicPartition], *, timeout: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """:meth:`committed` with the metadata committed with each offset."""
        offsets = await self.committed(partitions, timeout=timeout)
        # Noted by that very fetch (no await since): this answer's metadata.
        texts = {} if self._offsets is None else self._offsets.fetched_metadata
        return {
            tp: None if offset is None else OffsetAndMetadata(offset, texts.get(tp, ""))
            for tp, offset in offsets.items()
        }

    # ------------------------------------------------- application's requests

    def subscribe(
        self, topics: frozenset[str], pattern: str | None, listener: object | None
    ) -> None:
        """Subscribe to topic names or a regex (joins the group).

        Raises:
            MixedAssignmentError: partitions are assigned manually (``assign()``).
        """
        if self._manual:
            raise MixedAssignmentError(
                f"cannot subscribe(): partitions {sorted(map(str, self._manual))} are assigned "
                "manually; call unassign() first"
            )
        self._manual = None
        self.listener = listener
        self._change_subscription(SubscriptionChanged(topics, pattern))

    def unsubscribe(self) -> None:
        """Leave the group (partitions are revoked first)."""
        self._change_subscription(Unsubscribe())

    def _change_subscription(self, change: SubscriptionChange) -> None:
        if self._switch_to is not None:
            # The application changed its subscription during a switch: the
            # switch joins with the new one (an unsubscribe cancels the rejoin).
            self._resume = change if isinstance(change, SubscriptionChanged) else None
            if self._resume is None:
                self._switch_to = None
        self._latest_subscription = change
        self._sub_send.send_nowait(change)

    def switch_protocol(self, protocol: GroupProtocol) -> None:
        """Leave the group on the protocol in use and join it again on ``protocol``.

        The member releases its partitions as an unsubscribe does (revoke
        callback, commit, leave; a static member leaves as static members do,
        keeping its instance id for its successor), then a new session of
        ``protocol`` joins with the same subscription, listener and
        ``group.instance.id``. The coordinator converts the group when this
        member is the first consumer-protocol member of a classic group, or the
        last one of a consumer group. Calling it again before the switch is
        done retargets it; asking for the protocol in use (and no switch is
        under way) does nothing.

        Raises:
            ValueError: ``protocol`` is AUTO.
            RuntimeError: the consumer is not subscribed.
        """
        if protocol is GroupProtocol.AUTO:
            raise ValueError("switch_protocol takes 'consumer' or 'classic', not 'auto'")
        if self._switch_to is not None:
            self._switch_to = protocol
            return
        if protocol is self.session.group_protocol:
            return
        current = self._latest_subscription
        if not isinstance(current, SubscriptionChanged):
            raise RuntimeError("switch_protocol needs a subscription: call subscribe() first")
        log.info(
            "group %s member %s: switching from the %s protocol to the %s protocol",
            self.group_id,
            self.session.member_id,
            self.session.group_protocol.value,
            protocol.value,
        )
        self._change_subscription(Unsubscribe())
        self._switch_to, self._resume = protocol, current

    def _rejoin_switched(self) -> None:
        # The old member left and owns nothing (its unsubscribe revoked and
        # stopped every partition): a new session starts from scratch.
        target, resume = self._switch_to, self._resume
        self._switch_to = self._resume = None
        assert target is not None
        assert resume is not None
        self._latest_subscription = resume
        if target is self.session.group_protocol:
            self._sub_send.send_nowait(resume)  # switched back before the leave ended
        else:
            self._switch(target)

    def poll_called(self) -> None:
        """The application polled."""
        self._app_poll_passed = self._app_polled = time.monotonic()
        self.session.post(PollCalled())

    def note_poll(self) -> None:
        """The application polled, while :attr:`poll_events_wanted` is False.

        Any thread, no hop to the loop: the driver passes it on to the member
        before its poll timer expires.
        """
        self._app_polled = time.monotonic()

    def callback_done(
        self, item: work.CallbackWork, error: BaseException | None, raised: bool
    ) -> None:
        """A callback returned (``error`` None) or raised; ``raised``: already raised to the app."""
        if error is not None and raised:
            self._raised.add(error)
        self._callback_completed(CallbackCompleted(item.kind, item.token, error))

    def _callback_completed(self, completed: CallbackCompleted) -> None:
        if completed.kind is CallbackKind.REVOKED and self._background_commits:
            # A commit_async made before or in the revoke callback must reach
            # the broker while the member still owns the partitions (and, in
            # close(), before the leave): the member releases them only after
            # it ends.
            self.spawn(self._complete_after_background_commits, completed)
            return
        self.session.post(completed)

    async def _complete_after_background_commits(self, completed: CallbackCompleted) -> None:
        await self._finish_background_commits()
        self.session.post(completed)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Next record of ``partition`` at ``offset`` (also before it starts fetching).

        Raises:
            NotAssignedError: ``partition`` is not assigned to this consumer.
        """
        if partition in self.fetch.awaiting_seek:
            log.info(
                "group %s: %s starts at offset %d, where the application seeked it after "
                "a log truncation",
                self.group_id,
                partition,
                offset,
            )
        self._apply(self.fetch.seek(partition, offset, self.owned()))

    def pause(self, partitions: Collection[TopicPartition]) -> None:
        """Stop handing out records of ``partitions`` (also before they start fetching)."""
        self._apply(self.fetch.pause(partitions, self.owned()))

    def resume(self, partitions: Collection[TopicPartition]) -> None:
        """Resume ``partitions`` paused with :meth:`pause`."""
        self._apply(self.fetch.resume(partitions))

    # ---------------------------------------------------- manual assignment

    def _check_manual(self, call: str) -> None:
        subscribed = self._latest_subscription is not None and not isinstance(
            self._latest_subscription, Unsubscribe
        )
        if subscribed or (self._manual is None and self.session.assignment):
            raise MixedAssignmentError(
                f"cannot {call}: the consumer is subscribed (group membership assigns its "
                "partitions); call unsubscribe() and wait for the revocation first"
            )

    def assign(self, offsets: Mapping[TopicPartition, int | None], incremental: bool) -> None:
        """Fetch these partitions without group membership (``assign()``).

        Each starts at its offset (None: the committed offset, else
        ``auto.offset.reset``). Without ``incremental`` the previous manual
        assignment is replaced.

        Raises:
            MixedAssignmentError: the consumer is subscribed.
            AlreadyAssignedError: ``incremental`` and a partition is assigned already.
        """
        self._check_manual("incremental_assign()" if incremental else "assign()")
        manual = set() if self._manual is None else self._manual
        if incremental:
            again = sorted(str(tp) for tp in offsets if tp in manual)
            if again:
                raise AlreadyAssignedError(
                    f"incremental_assign(): {', '.join(again)} already assigned; "
                    "use seek() to move it"
                )
        else:
            self._apply(self.fetch.stop(manual))
            manual = set()
        manual.update(offsets)
        self._manual = manual
        self.fetch.assignment_changed(self.owned())
        self._forget_stored()
        self._committed.forget(self.owned())
        ticket = self.fetch.start(offsets.keys())
        for tp, offset in offsets.items():
            if offset is not None:  # owned and not fetching yet: where it starts
                self.fetch.seek(tp, offset, manual)
        self.spawn(self._manual_start, ticket)

    async def _manual_start(self, ticket: FetchTicket) -> None:
        assert self._offsets is not None
        fetch = self.fetch
        need = sorted(tp for tp in fetch.wanted(ticket) if fetch.seek_override(tp) is None)
        committed: dict[TopicPartition, int | None] = {}
        if need:
            # The truncation check asks only about offsets whose leader epoch is
            # older than the leader's current one in the metadata; metadata this
            # consumer learned before an unclean election (an earlier assign())
            # would hide the truncation. One Metadata request per assign(); the
            # offset fetch then finds the topics known.
            await self._refresh_topics({tp.topic for tp in need})
            try:
                # A plain read: a manual consumer is no member of the group.
                committed = await self._offsets.fetch(
                    need,
                    deadline=anyio.current_time() + self.request_timeout,
                    as_member=False,
                    wanted=lambda: bool(fetch.wanted(ticket)),
                )
            except KgroupError as exc:
                self._queue(work.ErrorWork(exc))
                return
        await self._start_from_committed(ticket, committed)

    async def _refresh_topics(self, topics: Collection[str]) -> None:
        """Refresh the metadata of ``topics``; on failure the check uses what is known."""
        try:
            await self.client.metadata(sorted(topics), timeout=self.request_timeout)
        except KgroupError as exc:
            log.info("group %s: metadata for %s failed: %s", self.group_id, sorted(topics), exc)

    def unassign(self, partitions: Collection[TopicPartition] | None) -> None:
        """Stop fetching manually assigned ``partitions`` (None: all of them).

        Raises:
            MixedAssignmentError: the consumer is subscribed.
            NotAssignedError: a partition is not assigned manually.
        """
        call = "unassign()" if partitions is None else "incremental_unassign()"
        self._check_manual(call)
        manual = set() if self._manual is None else self._manual
        gone = set(manual) if partitions is None else set(partitions)
        foreign = sorted(str(tp) for tp in gone - manual)
        if foreign:
            raise work.NotAssignedError(f"{call}: {', '.join(foreign)} not assigned")
        self._apply(self.fetch.stop(gone))
        manual -= gone
        self._manual = manual
        self.fetch.assignment_changed(self.owned())
        self._forget_stored()
        self._committed.forget(self.owned())

    def request_close(self, timeout: float) -> None:
        """Start closing: release the assignment and leave within ``timeout`` seconds."""
        if self._manual and self.config.enable_auto_commit:
            # No member revokes a manual assignment: commit its progress here,
            # waited for before the runtime ends (as librdkafka's close).
            self.commit_in_background(self._uncommitted(self.current_offsets()), None)
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
