"""The runtime's decisions, sans-IO: what the driver must do, given what happened.

:class:`RuntimeCore` is to the driver (:mod:`kgroup.runtime.driver`) what a
member is to its session: it never sleeps, reads no clock (times are passed
in) and sends nothing. Its inputs are

- the actions a member returns (:meth:`RuntimeCore.perform`) and the end of a
  member's step (:meth:`RuntimeCore.stepped`);
- the results of the I/O it asked for: committed offsets fetched
  (:meth:`RuntimeCore.offsets_fetched`), a truncation check answered
  (:meth:`RuntimeCore.truncation_checked`), a member's commit ended
  (:meth:`RuntimeCore.member_commit_done`), the data plane's refusals
  (:meth:`RuntimeCore.assign_failed`),
  a look at the group (:meth:`RuntimeCore.group_looked`);
- the application's calls (subscribe, ``assign()`` / ``unassign()``, ``seek()``,
  ``pause()`` / ``resume()``, ``store_offsets()``, commits, a callback done,
  a poll, close);

and its outputs are :data:`Effect` values the executor carries out in order:
data-plane operations (:data:`~kgroup.runtime.fetch_state.FetchOp`, the core
owns the :class:`~kgroup.runtime.fetch_state.FetchState`), requests to send
(a member's commit, an offset fetch for a :class:`~kgroup.runtime.fetch_state.FetchTicket`,
a truncation check, a coordinator lookup, a look at the group), events for the
member, application work (:data:`~kgroup.runtime.work.AppWork`), a fatal error,
a session of another protocol. :meth:`RuntimeCore.next_deadline` says when its
own timers (the poll pass-on, callbacks held for asynchronous commits, the
liveness look) need a call to :meth:`RuntimeCore.timers` (before the member's
step) and :meth:`RuntimeCore.look_at_group` (after it).

Why the commit before a revocation waits for the application: positions count
records *handed out*; the application may still be processing the last batch
when a revocation starts. The positions of the revoked partitions are captured
when they stop fetching, and committed at the application's next service point
(the start of its next poll, when it has finished with every record handed out
before), so a commit never covers a record the application has not finished
with. The revoke callback needs that same poll anyway. Interval auto-commits
are made at service points too (like the Java client's auto-commit in poll).

Two things it reads without asking, both local and synchronous: the session's
view of its member (:class:`SessionView`: assignment, epoch, settled) and the
data plane's local positions (:class:`DataPlaneView`), as Java's
``SubscriptionState`` is read, not messaged.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from kgroup.config import AutoOffsetReset, ConsumerConfig, GroupProtocol
from kgroup.config_security import explain_denial
from kgroup.errors import (
    AlreadyAssignedError,
    AuthorizationError,
    CommitFailedError,
    FencedMemberEpochError,
    IllegalGenerationError,
    KgroupError,
    LogTruncationError,
    MixedAssignmentError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    broker_error,
)
from kgroup.listener import listener_method
from kgroup.membership import (
    CallbackCompleted,
    CallbackKind,
    Closed,
    CommitCompleted,
    CommitOffsets,
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
from kgroup.offsets import CommittedBook, EpochBook, recreated_partitions
from kgroup.runtime import choice, work
from kgroup.runtime._log import log
from kgroup.runtime.fetch_state import Assign, CapturePositions, FetchOp, FetchState, FetchTicket
from kgroup.runtime.interfaces import DriverAction, DriverEvent, SubscriptionChange
from kgroup.runtime.liveness import Look, Repair, UnownedWatch
from kgroup.runtime.session import FinishedCommit
from kgroup.types import TopicPartition, Truncation

__all__ = [
    "CheckTruncation",
    "DataPlaneOps",
    "DataPlaneView",
    "Effect",
    "Fatal",
    "FetchCommitted",
    "FinishCommit",
    "HandOver",
    "LookAtGroup",
    "Post",
    "QueueWork",
    "Rediscover",
    "RuntimeCore",
    "SendMemberCommit",
    "SessionView",
    "SettledChanged",
    "Snapshot",
    "Subscribe",
    "SwitchSession",
    "TruncationChanged",
    "refused_commit",
]

_LAST_POLL_LOOK = 0.01
"""Closer than this (seconds) to its poll timer's expiry, a member is not looked at again."""


class SessionView(Protocol):
    """What the core reads of the session in use (both protocols' sessions are one)."""

    @property
    def group_protocol(self) -> GroupProtocol: ...

    @property
    def member_id(self) -> str: ...

    @property
    def generation_or_epoch(self) -> int: ...

    @property
    def assignment(self) -> frozenset[TopicPartition]: ...

    @property
    def settled(self) -> bool: ...

    @property
    def state_name(self) -> str: ...

    @property
    def may_fall_back(self) -> bool: ...

    def poll_deadline(self) -> float | None: ...

    def session_expiry(self) -> float | None: ...


S = TypeVar("S", bound=SessionView)


class DataPlaneView(Protocol):
    """The data plane's local, synchronous answers the core reads (no change, no I/O)."""

    @property
    def assigned(self) -> frozenset[TopicPartition]: ...

    def positions(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]: ...

    def leader_epochs(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]: ...


# ------------------------------------------------------------------ effects


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the application's thread reads without a call into the loop: the owned
    partitions and the paused ones, as of the loop's last change."""

    owned: frozenset[TopicPartition]
    paused: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class DataPlaneOps:
    """Perform ``ops`` on the data plane in order, telling the core what they found.

    A refused
    :class:`~kgroup.runtime.fetch_state.Assign` with :meth:`RuntimeCore.assign_failed`
    (and the rest is not performed); a performed one with
    :meth:`RuntimeCore.fetch_started`; the end with :meth:`RuntimeCore.ops_done`.
    ``announce``: log where the partitions started (a member's start). The core
    reads the positions a :class:`~kgroup.runtime.fetch_state.CapturePositions`
    asks for itself, when it decides (a local read), so ``ops`` holds none.
    """

    ops: tuple[FetchOp, ...]
    announce: bool = False


@dataclass(frozen=True, slots=True)
class FetchCommitted:
    """Fetch the committed offsets of ``ticket``'s partitions still wanted.

    ``manual``: a plain read for ``assign()`` (no member id; the topics'
    metadata refreshed first, a failure goes to the application); else as the
    member (retried until it answers, a broker error is fatal). Answer with
    :meth:`RuntimeCore.offsets_fetched`.
    """

    ticket: FetchTicket
    manual: bool


@dataclass(frozen=True, slots=True)
class CheckTruncation:
    """Ask the leaders whether ``starts`` still stand (KIP-320); answer with
    :meth:`RuntimeCore.truncation_checked`, passing ``committed`` back."""

    ticket: FetchTicket
    starts: Mapping[TopicPartition, int]
    committed: Mapping[TopicPartition, int | None]


@dataclass(frozen=True, slots=True)
class SendMemberCommit:
    """Commit ``offsets`` for the member's ``CommitOffsets`` ``token`` until ``deadline``;
    answer with :meth:`RuntimeCore.member_commit_done`."""

    token: int
    offsets: Mapping[TopicPartition, int]
    deadline: float


@dataclass(frozen=True, slots=True)
class FinishCommit:
    """Tell the session a commit its member asked for ended."""

    finished: FinishedCommit


@dataclass(frozen=True, slots=True)
class Post:
    """Queue ``event`` for the member of the session in use."""

    event: DriverEvent


@dataclass(frozen=True, slots=True)
class HandOver:
    """Let the member handle its queued events now, then wake the front end.

    The application's poll is still running: the member's reaction (the next
    callback of the rebalance step, a join) must be queued before the poll looks
    at its work again, or it waits for the next poll. Seed 254489 of the
    simulator: a slow classic member's empty assign callback, queued one loop
    turn after its revoke callback returned, missed that poll; the next came
    too late and the coordinator removed the member for not revoking in time,
    round after round. ``token``: a revocation commit the poll waits for
    (:meth:`RuntimeCore.revocation_commit_waits`), settled once this is done.
    """

    token: int | None = None


@dataclass(frozen=True, slots=True)
class QueueWork:
    """Hand ``item`` to the application's context (and wake the front end)."""

    item: work.AppWork


@dataclass(frozen=True, slots=True)
class Fatal:
    """The consumer failed for good: raise ``error`` from every poll."""

    error: BaseException = field(compare=False)


@dataclass(frozen=True, slots=True)
class Rediscover:
    """Look the group's coordinator up again, then post ``CoordinatorRediscovered``."""


@dataclass(frozen=True, slots=True)
class LookAtGroup:
    """Describe the group; answer with :meth:`RuntimeCore.group_looked`."""


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Pass ``change`` to the session in use (in order with the application's own)."""

    change: SubscriptionChange


@dataclass(frozen=True, slots=True)
class SwitchSession:
    """Replace the session with a new one of ``protocol`` (its member starts from scratch).

    Once started, the new session is given the subscription in force
    (:attr:`RuntimeCore.latest_subscription`); set :attr:`RuntimeCore.session`.
    """

    protocol: GroupProtocol


@dataclass(frozen=True, slots=True)
class SettledChanged:
    """Tell a chunked data plane whether calls from the driver may come soon."""

    settled: bool


@dataclass(frozen=True, slots=True)
class TruncationChanged:
    """:attr:`RuntimeCore.truncation` was replaced: wake the front end."""


Effect = (
    DataPlaneOps
    | FetchCommitted
    | CheckTruncation
    | SendMemberCommit
    | FinishCommit
    | Post
    | HandOver
    | QueueWork
    | Fatal
    | Rediscover
    | LookAtGroup
    | Subscribe
    | SwitchSession
    | SettledChanged
    | TruncationChanged
)
"""What the executor must do, in the order returned."""


@dataclass(slots=True)
class _PendingCommit:
    offsets: dict[TopicPartition, int]
    deadline: float
    stored: frozenset[TopicPartition] | None = None
    """With stored offsets: these partitions' are read when the commit is released."""


@dataclass(slots=True)
class _HeldCompletion:
    completed: CallbackCompleted
    until: float


_REBALANCED_CLASSIC = (IllegalGenerationError, UnknownMemberIdError, RebalanceInProgressError)
"""Errors refusing a classic commit because the generation ended: CommitFailedError."""
_FENCED_CONSUMER = (UnknownMemberIdError, FencedMemberEpochError)
"""Errors refusing a consumer-protocol commit because the member is no longer in the
group at that epoch (its session ran out, it was fenced): CommitFailedError, as the
Java client's CommitFailedException."""


def refused_commit(
    protocol: GroupProtocol, chosen: Collection[TopicPartition], error: KgroupError
) -> CommitFailedError | None:
    """The CommitFailedError an application's commit failing with ``error`` raises, or None.

    A classic commit refused because its generation ended, or a consumer-protocol
    one because the member left the group at that epoch, is the normal end of a
    membership: the application polls again and continues (read as fatal otherwise).
    """
    if protocol is GroupProtocol.CLASSIC:
        if isinstance(error, _REBALANCED_CLASSIC):
            return CommitFailedError(
                f"commit of {sorted(chosen)} failed: the group rebalanced ({error}); the "
                "partitions may have moved to another member; poll again and continue"
            )
        return None
    if isinstance(error, _FENCED_CONSUMER):
        return CommitFailedError(
            f"commit of {sorted(chosen)} failed: this member is no longer in the group "
            f"at that epoch ({error}); the partitions may have moved to another member; "
            "poll again (the member rejoins) and continue"
        )
    return None


class RuntimeCore(Generic[S]):
    """Every decision of one consumer's runtime (see the module).

    ``auto_offset_store`` False (``enable.auto.offset.store=false``): commits
    without explicit offsets cover what :meth:`store_offsets` stored, not the
    positions. ``topic_id`` reads the topic's id in the newest metadata (None:
    unknown); ``log_ends`` the log ends the data plane's last fetch saw, where
    it knows them. ``commit_callback``: confluent-kafka's ``on_commit``, told of
    every commit's outcome.
    """

    def __init__(
        self,
        config: ConsumerConfig,
        session: S,
        dataplane: DataPlaneView,
        *,
        auto_offset_store: bool = True,
        topic_id: Callable[[str], uuid.UUID | None] = lambda _topic: None,
        log_ends: Callable[[Collection[TopicPartition]], Mapping[TopicPartition, int]]
        | None = None,
        commit_callback: work.CommitCallback | None = None,
    ) -> None:
        self.config = config
        self.group_id = config.group_id
        self.session: S = session
        """The session in use (the executor replaces it on a :class:`SwitchSession`)."""
        self.dataplane = dataplane
        self._topic_id = topic_id
        self._log_ends = log_ends
        self.on_commit = commit_callback
        self.fetch = FetchState()
        """What each partition may do on the data plane."""
        self.leader_epochs = EpochBook(dataplane.leader_epochs)
        """Leader epochs of offsets (KIP-320): commits carry them, partitions start with them."""
        self.committed = CommittedBook()
        """What the group has committed for owned partitions: the consumer's own
        commits of positions leave those offsets out (kept across reconnections)."""
        self.listener: object | None = None
        self.topics: frozenset[str] = frozenset()
        """Subscribed names, for denial messages (set as the session takes them)."""
        self.truncation: LogTruncationError | None = None
        """Owned partitions whose logs were truncated below their committed offsets
        (``auto.offset.reset=error``), waiting for the application's ``seek()``:
        raised from every poll until none is left (replaced, never changed)."""
        self._truncations: dict[TopicPartition, Truncation] = {}
        self.latest_subscription: SubscriptionChange | None = None
        # switch_protocol(): the protocol to join next once the leave completes,
        # and the subscription to join it with.
        self.switch_to: GroupProtocol | None = None
        self._resume: SubscriptionChanged | None = None
        self.manual_partitions: set[TopicPartition] | None = None
        """Partitions assigned with ``assign()`` (no group membership); None: not in that mode."""
        self.fetched_ids: dict[TopicPartition, uuid.UUID] = {}
        """The topic id each partition had when it last started fetching, where known."""
        self._stored: dict[TopicPartition, int] | None = None if auto_offset_store else {}
        self._revocation_commits: dict[int, _PendingCommit] = {}
        # Released revocation commits whose answer the member has not handled yet:
        # the poll that released one waits for it (revocation_commit_waits).
        self._released: set[int] = set()
        self._raised: set[BaseException] = set()
        self.released_unheard: set[TopicPartition] = set()
        """Partitions revoked or lost with no listener method to hear it (the front
        end, which never sees those callbacks, must not take them as still held)."""
        self.background_commits = 0
        """Asynchronous commits in flight (counted by the executor: started, ended)."""
        self._held: list[_HeldCompletion] = []
        self._poll_check: float | None = None  # when to look at the poll timer again
        self._hold_wait = config.request_timeout_ms / 1000
        self._told_settled = False
        # (owned, data plane's assigned, equal): see _tell_settled.
        self._fetching_memo: (
            tuple[frozenset[TopicPartition], frozenset[TopicPartition], bool] | None
        ) = None
        self.poll_events_wanted = True
        """Whether the application's polls must reach the member at once (read by the
        front end's thread): while the member is not settled, a poll may move it on
        (a rejoin after its poll timer expired, a retried rebalance step). Settled,
        polls only keep its poll timer from expiring: the front end notes them (the
        driver's ``note_poll``, no thread hop, sets :attr:`app_polled`) and
        :meth:`pass_on_polls` passes the latest on shortly before the timer would
        expire."""
        self.poll_slack = min(1.0, config.max_poll_interval_ms / 10_000)
        # The front end notes polls at most once a second: the first look is that
        # long before the poll timer expires (a tenth of a shorter timer).
        self.app_polled = -float("inf")  # monotonic time of the latest noted poll
        self._app_poll_passed = -float("inf")  # ... of the latest poll the member was told of
        self.session_lapses_at: float | None = None
        """``time.monotonic()`` past which the member's session has surely run out while
        it owns partitions (None: no such risk), read by the front end without a thread
        hop: records it takes from the data plane after that belong to partitions that
        may be another member's already, and are not handed out (a process stopped
        past its session and resumed runs the application's thread before the loop's)."""
        self.liveness = UnownedWatch()
        self.liveness_on = True
        self.last_epoch = session.generation_or_epoch
        self._last_assignment: frozenset[TopicPartition] = frozenset()

    # ------------------------------------------------------------------ views

    @property
    def manual(self) -> bool:
        """True while partitions are assigned with ``assign()`` (no group membership)."""
        return self.manual_partitions is not None

    def snapshot(self, previous: Snapshot) -> Snapshot:
        """The state the application's thread may read (``previous`` when unchanged)."""
        owned, paused = self.owned(), self.paused()
        if previous.owned == owned and previous.paused == paused:
            return previous
        return Snapshot(owned, paused)

    def owned(self) -> frozenset[TopicPartition]:
        """The member's installed assignment (what commits may cover), or the manual one."""
        if self.manual_partitions is not None:
            return frozenset(self.manual_partitions)
        return self.session.assignment

    def paused(self) -> frozenset[TopicPartition]:
        """Partitions paused by the application (also those paused before they started)."""
        return self.fetch.paused | self.fetch.held

    def member_id(self) -> str:
        """Who commits: a manual consumer commits as a simple one (no member id)."""
        return "" if self.manual else self.session.member_id

    def member_epoch(self) -> int:
        """... and at generation -1 (as librdkafka and Java do)."""
        return -1 if self.manual else self.session.generation_or_epoch

    # ------------------------------------------------------- member's actions

    def perform(self, action: DriverAction, now: float) -> list[Effect]:
        """What a member's action asks of the runtime."""
        match action:
            case StopFetching():
                return [self._ops(self.fetch.stop(action.partitions))]
            case StartFetching():
                return [FetchCommitted(self.fetch.start(action.partitions), manual=False)]
            case CommitOffsets():
                return self._commit_for_member(action)
            case RunCallback():
                if action.kind is CallbackKind.ASSIGNED:
                    self.released_unheard -= action.partitions
                if listener_method(self.listener, action.kind) is None:
                    if action.kind is not CallbackKind.ASSIGNED:
                        self.released_unheard |= action.partitions
                    # No method to run, but a revocation still waits for the
                    # application's commit_async in flight, as after a revoke
                    # callback: released first, its commit would reach the
                    # broker after the leave or the hand-over and be refused.
                    return self._callback_completed(
                        CallbackCompleted(action.kind, action.token), now
                    )
                return [QueueWork(work.CallbackWork(action.kind, action.token, action.partitions))]
            case RaiseCallbackError():
                if action.error in self._raised:
                    self._raised.discard(action.error)  # already raised from that poll
                    return []
                return [QueueWork(work.ErrorWork(action.error))]
            case RediscoverCoordinator():
                return [Rediscover()]
            case ReportError():
                error = broker_error(action.code, action.message)
                if isinstance(error, AuthorizationError):
                    # An ACL denial does not heal by retrying: fatal, raised from poll.
                    return [Fatal(explain_denial(error, group=self.group_id, topics=self.topics))]
                return [QueueWork(work.ErrorWork(error))]
            case ReportFatalError():
                if choice.falls_back(self.config, self.session, action):
                    return [SwitchSession(GroupProtocol.CLASSIC)]
                log.error(
                    "group %s member %s: fatal error %s: %s",
                    self.group_id,
                    self.session.member_id,
                    action.name,
                    action.message,
                )
                error = broker_error(action.code, action.message)
                if self.session.group_protocol is GroupProtocol.CONSUMER:
                    # A classic group the broker will not convert: say so, and what to do.
                    error = choice.explain_refused_upgrade(self.config, error)
                return [Fatal(explain_denial(error, group=self.group_id, topics=self.topics))]
            case LeaveComplete():
                log.info(
                    "group %s member %s: left the group", self.group_id, self.session.member_id
                )
                return self._rejoin_switched() if self.switch_to is not None else []
            case Closed():
                log.info(
                    "group %s member %s: closed%s",
                    self.group_id,
                    self.session.member_id,
                    " (timed out)" if action.timed_out else "",
                )
        return []

    def stepped(self, now: float, monotonic: float) -> list[Effect]:
        """The member took a step (its actions performed): keep the books in line.

        ``monotonic`` is the front end's clock at ``now`` (the session lapse is read
        on the application's thread).
        """
        session = self.session
        epoch, assignment = session.generation_or_epoch, session.assignment
        self.poll_events_wanted = not session.settled
        owned = assignment if self.manual_partitions is None else self.owned()
        self.fetch.assignment_changed(owned)
        self._forget_stored()
        effects = self._refresh_truncation()
        effects += self._tell_settled()
        expiry = session.session_expiry() if assignment else None
        self.session_lapses_at = None if expiry is None else monotonic + (expiry - now)
        settled = (
            session.settled
            and not self.manual
            and isinstance(self.latest_subscription, SubscriptionChanged)
        )
        self.liveness.observe(
            now, settled=settled, idle=settled and not assignment, generation=epoch
        )
        if epoch != self.last_epoch or assignment != self._last_assignment:
            log.info(
                "group %s member %s: epoch %d, state %s, assignment (%d) %s",
                self.group_id,
                session.member_id,
                epoch,
                session.state_name,
                len(assignment),
                ", ".join(str(tp) for tp in sorted(assignment)),
            )
            self.last_epoch, self._last_assignment = epoch, assignment
            self.committed.forget(owned)
        return effects

    def session_switched(self, session: S) -> list[Effect]:
        """The executor made ``session`` the one in use; once it runs, it takes the subscription."""
        self.session = session
        self.last_epoch = session.generation_or_epoch
        if self.latest_subscription is None:
            return []
        # Changes still queued reach the new session anyway; the newest goes
        # last, so it stays the one in force.
        return [Subscribe(self.latest_subscription)]

    # ------------------------------------------------------------- timers

    def pass_on_polls(self, now: float, monotonic: float) -> tuple[list[Effect], float | None]:
        """Tell the member of the latest noted poll once its poll timer nears expiry.

        Returns the effects and when to look again (None: no need). A poll noted
        after the last look is passed on with the time it was made; with none,
        the look is repeated halfway to the expiry, so a poll made until just
        before it still counts.
        """
        expires = self.session.poll_deadline()
        if expires is None:
            return [], None
        check_at = expires - self.poll_slack
        if now < check_at:
            return [], check_at
        polled = self.app_polled
        if polled > self._app_poll_passed:
            self._app_poll_passed = polled
            return [Post(PollCalled(at=now - max(0.0, monotonic - polled)))], None
        left = expires - now
        return [], (now + left / 2 if left > _LAST_POLL_LOOK else None)

    def look_at_group(self, now: float) -> list[Effect]:
        """Look at the group now if the liveness watch says so (after the member's step)."""
        if self.liveness_on and self.liveness.due(now):
            return [LookAtGroup()]
        return []

    def group_looked(self, now: float, look: Look, current: bool) -> list[Effect]:
        """A look at the group ended; ``current``: the session that looked is still in use."""
        verdict = self.liveness.looked(now, look)
        if verdict is None or not current:
            return []
        as_new = verdict.repair is Repair.REJOIN_AS_NEW
        return [Post(RejoinRequested(verdict.reason, as_new=as_new))]

    def held_until(self) -> float | None:
        """When the first callback completion held for asynchronous commits is let go."""
        return min((h.until for h in self._held), default=None)

    def timers(self, now: float, monotonic: float) -> list[Effect]:
        """The core's timers due before the member's: polls passed on, held completions.

        ``monotonic``: the front end's clock at ``now`` (polls are noted on it).
        """
        effects, self._poll_check = self.pass_on_polls(now, monotonic)
        if not self._held:
            return effects  # the usual case, before every wait of the driver
        due = [h for h in self._held if h.until <= now]
        self._held = [h for h in self._held if h.until > now]
        return effects + [Post(h.completed) for h in due]

    def next_deadline(self) -> float | None:
        """When :meth:`timers` or :meth:`look_at_group` next has something to do (None: never)."""
        look = self.liveness.next_deadline() if self.liveness_on else None
        held = self.held_until() if self._held else None
        times = [t for t in (self._poll_check, held, look) if t is not None]
        return min(times, default=None)

    # ------------------------------------------------------------ data plane

    def _ops(self, ops: Sequence[FetchOp], *, announce: bool = False) -> DataPlaneOps:
        """``ops`` for the executor, the positions they capture read now (a local read)."""
        rest: list[FetchOp] = []
        for op in ops:
            if isinstance(op, CapturePositions):
                positions = self.dataplane.positions(op.partitions)
                self.fetch.positions_captured(positions)
                # The stopped positions are committed after the data plane let
                # go of the partitions: keep their epochs now. (librdkafka's
                # local position lookup runs twice, once per stop: a call
                # returning both would add a third, overlapping method to the
                # DataPlaneInterface seam that applications implement too.)
                self.leader_epochs.note(positions, self.dataplane.leader_epochs(positions))
            else:
                rest.append(op)
        return DataPlaneOps(tuple(rest), announce)

    def start_epochs(self, op: Assign) -> dict[TopicPartition, int]:
        """The leader epochs an Assign starts its offsets with (KIP-320)."""
        starts = {tp: o for tp, o in op.offsets.items() if o is not None and o >= 0}
        return self.leader_epochs.of(starts)

    def assign_failed(self, op: Assign, error: BaseException) -> list[Effect]:
        """The data plane refused ``op``: its partitions are not fetching."""
        self.fetch.assign_failed(op)
        return [QueueWork(work.ErrorWork(error)), *self._refresh_truncation()]

    def fetch_started(
        self, offsets: Mapping[TopicPartition, int | None], *, announce: bool = False
    ) -> None:
        """The data plane now fetches ``offsets``' partitions: remember their topics' ids.

        The offset fetch before a start described the topics (it names them by
        id), so the ids are those of the topics the data plane now fetches.
        ``announce``: log where they start (:attr:`DataPlaneOps.announce`).
        """
        if announce:
            starts = sorted(offsets.items())
            log.info(
                "group %s member %s: fetching %s",
                self.group_id,
                self.session.member_id,
                ", ".join(f"{tp}@{'reset' if o is None else o}" for tp, o in starts),
            )
        for tp in offsets:
            topic_id = self._topic_id(tp.topic)
            if topic_id is not None and topic_id.int:
                self.fetched_ids[tp] = topic_id
            else:
                self.fetched_ids.pop(tp, None)

    def ops_done(self) -> list[Effect]:
        """A :class:`DataPlaneOps` was performed (every op)."""
        return self._refresh_truncation() + self._tell_settled()

    def _tell_settled(self) -> list[Effect]:
        """Whether a chunked data plane may expect calls from the driver soon.

        Settled: the member holds its assignment (or a manual one), every owned
        partition is on the data plane and none other is; until the next
        heartbeat brings a change, nothing but auto-commits and the
        application's own calls needs the handle. A member owning nothing is
        not settled: a new member of the consumer protocol is stable with no
        partitions while the others release them, and gets them soon after.
        """
        owned = self.owned()
        settled = bool(owned) and (self.manual or self.session.settled)
        if settled:
            assigned = self.dataplane.assigned
            memo = self._fetching_memo
            if memo is not None and memo[0] is owned and memo[1] is assigned:
                settled = memo[2]
            else:
                # Asked after every step of the member; both sets usually are
                # the very objects of the last time (see DataPlane.assigned).
                settled = owned == assigned
                self._fetching_memo = (owned, assigned, settled)
        if settled == self._told_settled:
            return []
        self._told_settled = settled
        return [SettledChanged(settled)]

    def topic_recreated(self, partitions: frozenset[TopicPartition]) -> list[Effect]:
        """A commit found these partitions' topic deleted and created again."""
        return [self._ops(self.fetch.topic_recreated(partitions & self.owned()))]

    def beyond_log_end(self, offsets: Mapping[TopicPartition, int]) -> set[str]:
        """Topics of ``offsets`` past the log end the data plane's last fetch saw."""
        if self._log_ends is None:
            return set()
        fetching = self.fetch.fetching
        ends = self._log_ends([tp for tp in offsets if tp in fetching])
        return {tp.topic for tp, end in ends.items() if offsets[tp] > end}

    def recreated(self, partitions: Collection[TopicPartition]) -> frozenset[TopicPartition]:
        """Those of ``partitions`` whose topic's id is not the one they were fetched from."""
        return recreated_partitions(partitions, self.fetched_ids.get, self._topic_id)

    # ------------------------------------------------------- starting fetches

    def offsets_fetched(
        self, ticket: FetchTicket, committed: Mapping[TopicPartition, int | None]
    ) -> list[Effect]:
        """``ticket``'s committed offsets arrived: check those it starts from.

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
        if not starts:
            return self.truncation_checked(ticket, committed, [])
        return [CheckTruncation(ticket, starts, dict(committed))]

    def truncation_checked(
        self,
        ticket: FetchTicket,
        committed: Mapping[TopicPartition, int | None],
        cuts: Collection[Truncation],
    ) -> list[Effect]:
        """Start ``ticket``'s partitions still wanted, from ``committed`` as checked.

        The one way both a member's assignment and a manual ``assign()`` start
        from committed offsets, so both get the KIP-320 truncation check, as the
        Java client validates subscribed and manually assigned partitions alike.
        librdkafka (2.16) fetches an assigned offset without validating its
        leader epoch: one past the end of a truncated log is out of range, and
        ``auto.offset.reset`` then replays the partition (earliest) or skips the
        records written since (latest). As the Java client, a truncated offset
        moves to where the log diverges (with a warning) under ``earliest`` /
        ``latest``; under ``error`` the partition waits for the application's
        ``seek()`` and poll raises :class:`~kgroup.errors.LogTruncationError`.
        """
        starts = dict(committed)
        refuse = self.config.auto_offset_reset is AutoOffsetReset.ERROR
        for cut in cuts:
            # The epoch of the divergence point, for a start (or seek) there.
            self.leader_epochs.note(
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
            starts[cut.partition] = cut.resume_at
        diverged = {cut.partition: cut for cut in cuts} if refuse else {}
        fetch = self.fetch
        ops = fetch.offsets_fetched(ticket, starts, self.owned(), diverged)
        effects = self._await_seek(
            {tp: cut for tp, cut in diverged.items() if tp in fetch.awaiting_seek}
        )
        if ops:
            effects.append(self._ops(ops, announce=True))
        return effects

    def offset_fetch_failed(self, manual: bool, error: BaseException) -> list[Effect]:
        """The committed offsets could not be fetched (not a timeout of a member's fetch)."""
        if manual:
            return [QueueWork(work.ErrorWork(error))]
        return [Fatal(error)]

    def _await_seek(self, cuts: Mapping[TopicPartition, Truncation]) -> list[Effect]:
        """These truncated partitions wait for a ``seek()``: poll raises until they have one."""
        if not cuts:
            return []
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
        return self._refresh_truncation()

    def _refresh_truncation(self) -> list[Effect]:
        """Make :attr:`truncation` name exactly the partitions still awaiting a seek."""
        if not self._truncations and self.truncation is None:
            return []  # the usual case, on every step: nothing to look at
        waiting = self.fetch.awaiting_seek
        for tp in [tp for tp in self._truncations if tp not in waiting]:
            del self._truncations[tp]
        current = tuple(self._truncations[tp] for tp in sorted(self._truncations))
        if not current:
            self.truncation = None
        elif self.truncation is None or self.truncation.truncations != current:
            self.truncation = LogTruncationError(current)
            return [TruncationChanged()]
        return []

    # --------------------------------------------------------------- commits

    def _commit_for_member(self, action: CommitOffsets) -> list[Effect]:
        if action.offsets:
            # A commit the member retries after a rebalance (the application
            # released it before): its own offsets first, and at once.
            offsets = {tp: o for tp, o in action.offsets.items() if tp in action.partitions}
            rest = action.partitions - offsets.keys()
            if self._stored is not None:
                offsets.update(self.uncommitted(self._progress(rest)))
            else:
                positions = self.fetch.stopped_positions(rest)
                live = self.dataplane.positions(rest)
                positions.update({tp: o for tp, o in live.items() if tp not in positions})
                offsets.update(self.uncommitted(positions))
            if offsets:
                return [SendMemberCommit(action.token, offsets, action.deadline)]
        elif self._stored is not None:
            # Stored offsets are read when the application reaches its next
            # poll: until then it may still store those of the last records
            # it was handed (positions, by contrast, are final once stopped).
            self._revocation_commits[action.token] = _PendingCommit(
                {}, action.deadline, frozenset(action.partitions)
            )
            return [QueueWork(work.RevocationCommitWork(action.token))]
        else:
            offsets = self.uncommitted(self._progress(action.partitions))
            if offsets:
                self._revocation_commits[action.token] = _PendingCommit(offsets, action.deadline)
                return [QueueWork(work.RevocationCommitWork(action.token))]
        return [Post(CommitCompleted(action.token))]

    def release_revocation_commit(self, token: int) -> list[Effect]:
        """The application reached a service point: start the commit ``token`` waits for."""
        pending = self._revocation_commits.pop(token, None)
        if pending is None:
            return []
        if pending.stored is not None:
            pending.offsets.update(self.uncommitted(self._progress(pending.stored)))
            if not pending.offsets:
                return [Post(CommitCompleted(token)), HandOver()]
        self._released.add(token)
        return [SendMemberCommit(token, pending.offsets, pending.deadline)]

    def revocation_commit_waits(self, token: int) -> bool:
        """Whether the member has yet to handle the answer to the released commit ``token``.

        The poll that released it waits for it (up to its own timeout), so the
        revoke callback that follows runs in that poll, as the Java client's
        poll commits before a revocation and runs the callback in one call.
        Read from the application's thread: a set lookup, no hop to the loop.
        """
        return token in self._released

    def handed_over(self, token: int | None) -> None:
        """A :class:`HandOver` was carried out: the member handled ``token``'s answer."""
        if token is not None:
            self._released.discard(token)

    def member_commit_done(
        self,
        token: int,
        offsets: Mapping[TopicPartition, int],
        error: BaseException | None,
        generation: int,
    ) -> list[Effect]:
        """A :class:`SendMemberCommit` ended (``generation``: the member's when it started)."""
        effects = [
            *self.commit_reported(offsets, error),
            FinishCommit(FinishedCommit(token, offsets, error, generation)),
        ]
        if token in self._released:
            effects.append(HandOver(token))
        return effects

    def commit_reported(
        self, offsets: Mapping[TopicPartition, int], error: BaseException | None
    ) -> list[Effect]:
        """Any commit ended: confluent-kafka's ``on_commit`` hears of it in the next poll."""
        if self.on_commit is None or not offsets:
            return []
        return [QueueWork(work.CommitResultWork(self.on_commit, dict(offsets), error))]

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

    def uncommitted(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """``offsets`` without those the group has committed already (see CommittedBook).

        Only for the commits the consumer makes by itself; an application's
        ``commit()`` sends what it asks for.
        """
        if not offsets:
            return offsets
        changed = self.committed.changed(offsets, self.fetch.tenure)
        unchanged = {tp: o for tp, o in offsets.items() if tp not in changed}
        if not unchanged:
            return changed
        # The commit is where a topic deleted and created again is noticed (an
        # offset past the new log's end, a new topic id): librdkafka's position
        # in it can equal the old topic's committed offset, so such partitions
        # still go to the commit, which then leaves them out and fetches anew.
        past_end = self.beyond_log_end(unchanged)
        recreated = self.recreated(unchanged)
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

    def auto_commit_offsets(self) -> dict[TopicPartition, int]:
        """What an interval auto-commit covers now (empty: nothing to commit)."""
        if self.session.generation_or_epoch <= 0 and not self.manual:
            return {}
        return self.uncommitted(self.current_offsets())

    def close_commit_offsets(self) -> dict[TopicPartition, int] | None:
        """What ``close()`` commits by itself (None: nothing, the member's revocation does).

        No member revokes a manual assignment: its progress is committed here,
        waited for before the runtime ends (as librdkafka's close).
        """
        if self.manual_partitions and self.config.enable_auto_commit:
            return self.uncommitted(self.current_offsets())
        return None

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

    # ----------------------------------------------------------- callbacks

    def callback_done(
        self, item: work.CallbackWork, error: BaseException | None, raised: bool, now: float
    ) -> list[Effect]:
        """A callback returned (``error`` None) or raised; ``raised``: already raised to the app."""
        if error is not None and raised:
            self._raised.add(error)
        effects = self._callback_completed(CallbackCompleted(item.kind, item.token, error), now)
        # Inside the application's poll: the next callback of the step runs in it.
        return [*effects, HandOver()] if effects else effects

    def _callback_completed(self, completed: CallbackCompleted, now: float) -> list[Effect]:
        if completed.kind is CallbackKind.REVOKED and self.background_commits:
            # A commit_async made before or in the revoke callback must reach
            # the broker while the member still owns the partitions (and, in
            # close(), before the leave): the member releases them only after
            # it ends.
            # It waits at most as long as close waits for them (request.timeout.ms).
            self._held.append(_HeldCompletion(completed, now + self._hold_wait))
            return []
        return [Post(completed)]

    def background_commit_started(self) -> None:
        """An asynchronous commit started (counted until :meth:`background_commit_ended`)."""
        self.background_commits += 1

    def background_commit_ended(self) -> list[Effect]:
        """An asynchronous commit ended: with none left, held completions go to the member."""
        self.background_commits -= 1
        if self.background_commits:
            return []
        held, self._held = self._held, []
        return [Post(h.completed) for h in held]

    # ------------------------------------------------- subscription, switch

    def change_subscription(self, change: SubscriptionChange) -> list[Effect]:
        """``subscribe()`` / ``unsubscribe()``; subscribe checks with :meth:`may_subscribe`."""
        if self.switch_to is not None:
            # The application changed its subscription during a switch: the
            # switch joins with the new one (an unsubscribe cancels the rejoin).
            self._resume = change if isinstance(change, SubscriptionChanged) else None
            if self._resume is None:
                self.switch_to = None
        self.latest_subscription = change
        return [Subscribe(change)]

    def subscribe(self, change: SubscriptionChanged, listener: object | None) -> list[Effect]:
        """Subscribe to topic names or a regex (joins the group).

        Raises:
            MixedAssignmentError: partitions are assigned manually (``assign()``).
        """
        if self.manual_partitions:
            raise MixedAssignmentError(
                f"cannot subscribe(): partitions {sorted(map(str, self.manual_partitions))} "
                "are assigned manually; call unassign() first"
            )
        self.manual_partitions = None
        self.listener = listener
        return self.change_subscription(change)

    def switch_protocol(self, protocol: GroupProtocol) -> list[Effect]:
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
        if self.switch_to is not None:
            self.switch_to = protocol
            return []
        if protocol is self.session.group_protocol:
            return []
        current = self.latest_subscription
        if not isinstance(current, SubscriptionChanged):
            raise RuntimeError("switch_protocol needs a subscription: call subscribe() first")
        log.info(
            "group %s member %s: switching from the %s protocol to the %s protocol",
            self.group_id,
            self.session.member_id,
            self.session.group_protocol.value,
            protocol.value,
        )
        effects = self.change_subscription(Unsubscribe())
        self.switch_to, self._resume = protocol, current
        return effects

    def _rejoin_switched(self) -> list[Effect]:
        # The old member left and owns nothing (its unsubscribe revoked and
        # stopped every partition): a new session starts from scratch.
        target, resume = self.switch_to, self._resume
        self.switch_to = self._resume = None
        assert target is not None
        assert resume is not None
        self.latest_subscription = resume
        if target is self.session.group_protocol:
            return [Subscribe(resume)]  # switched back before the leave ended
        return [SwitchSession(target)]

    def poll_called(self, monotonic: float) -> list[Effect]:
        """The application polled (at ``monotonic`` on its clock)."""
        self._app_poll_passed = self.app_polled = monotonic
        return [Post(PollCalled())]

    # ------------------------------------------------- manual assignment

    def _check_manual(self, call: str) -> None:
        subscribed = self.latest_subscription is not None and not isinstance(
            self.latest_subscription, Unsubscribe
        )
        if subscribed or (self.manual_partitions is None and self.session.assignment):
            raise MixedAssignmentError(
                f"cannot {call}: the consumer is subscribed (group membership assigns its "
                "partitions); call unsubscribe() and wait for the revocation first"
            )

    def assign(
        self, offsets: Mapping[TopicPartition, int | None], incremental: bool
    ) -> list[Effect]:
        """Fetch these partitions without group membership (``assign()``).

        Raises:
            MixedAssignmentError: the consumer is subscribed.
            AlreadyAssignedError: ``incremental`` and a partition is assigned already.
        """
        self._check_manual("incremental_assign()" if incremental else "assign()")
        manual = set() if self.manual_partitions is None else self.manual_partitions
        effects: list[Effect] = []
        if incremental:
            again = sorted(str(tp) for tp in offsets if tp in manual)
            if again:
                raise AlreadyAssignedError(
                    f"incremental_assign(): {', '.join(again)} already assigned; "
                    "use seek() to move it"
                )
        else:
            effects.append(self._ops(self.fetch.stop(manual)))
            manual = set()
        manual.update(offsets)
        self.manual_partitions = manual
        self.fetch.assignment_changed(self.owned())
        self._forget_stored()
        self.committed.forget(self.owned())
        ticket = self.fetch.start(offsets.keys())
        for tp, offset in offsets.items():
            if offset is not None:  # owned and not fetching yet: where it starts
                self.fetch.seek(tp, offset, manual)
        effects.append(FetchCommitted(ticket, manual=True))
        return effects

    def manual_fetch_needs(self, ticket: FetchTicket) -> list[TopicPartition]:
        """The partitions of a manual start whose committed offsets are needed (no seek)."""
        fetch = self.fetch
        return sorted(tp for tp in fetch.wanted(ticket) if fetch.seek_override(tp) is None)

    def unassign(self, partitions: Collection[TopicPartition] | None) -> list[Effect]:
        """Stop fetching manually assigned ``partitions`` (None: all of them).

        Raises:
            MixedAssignmentError: the consumer is subscribed.
            NotAssignedError: a partition is not assigned manually.
        """
        call = "unassign()" if partitions is None else "incremental_unassign()"
        self._check_manual(call)
        manual = set() if self.manual_partitions is None else self.manual_partitions
        gone = set(manual) if partitions is None else set(partitions)
        foreign = sorted(str(tp) for tp in gone - manual)
        if foreign:
            raise work.NotAssignedError(f"{call}: {', '.join(foreign)} not assigned")
        stop = self._ops(self.fetch.stop(gone))
        manual -= gone
        self.manual_partitions = manual
        self.fetch.assignment_changed(self.owned())
        self._forget_stored()
        self.committed.forget(self.owned())
        return [stop]

    def seek(self, partition: TopicPartition, offset: int) -> list[Effect]:
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
        return [self._ops(self.fetch.seek(partition, offset, self.owned()))]

    def pause(self, partitions: Collection[TopicPartition]) -> list[Effect]:
        """Stop handing out records of ``partitions`` (also before they start fetching)."""
        return [self._ops(self.fetch.pause(partitions, self.owned()))]

    def resume(self, partitions: Collection[TopicPartition]) -> list[Effect]:
        """Resume ``partitions`` paused with :meth:`pause`."""
        return [self._ops(self.fetch.resume(partitions))]
