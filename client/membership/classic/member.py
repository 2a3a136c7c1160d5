"""The classic-protocol consumer group member, as a sans-IO state machine.

:class:`ClassicMember` speaks JoinGroup / SyncGroup / Heartbeat / LeaveGroup
(eager and cooperative rebalancing, KIP-429; static membership, KIP-345) with
time passed in::

    actions = member.handle(event, now)
    deadline = member.next_deadline()

Like :class:`~kgroup.membership.consumer.ConsumerMember` it never sleeps,
reads a clock or touches a socket; the runtime performs the actions in order
and feeds back what happened. States change only through the table in
:mod:`kgroup.membership.classic.states`; the skeleton it shares with the
new-protocol member is :class:`~kgroup.membership.common.member.MemberBase`.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from kgroup.error_codes import ErrorCode, error_name
from kgroup.membership.classic.actions import (
    PROTOCOL_TYPE,
    ClassicAssignorOnAssignment,
    ClassicMemberAction,
    JoinGroupRequest,
    JoinProtocol,
    ReportAssignorError,
    RunAssignor,
    SendClassicHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
    SyncGroupRequest,
)
from kgroup.membership.classic.events import (
    AssignmentComputed,
    AssignorFailed,
    ClassicHeartbeatResponseReceived,
    ClassicMemberEvent,
    CommitFailed,
    JoinGroupResponse,
    JoinGroupResponseReceived,
    LeaveGroupResponseReceived,
    SubscribedMetadataChanged,
    SyncGroupResponse,
    SyncGroupResponseReceived,
)
from kgroup.membership.classic.reactions import ClassicReaction, classic_reaction_for
from kgroup.membership.classic.states import (
    CLASSIC_MACHINE,
    IN_GROUP,
    ClassicState,
    ClassicTrigger,
)
from kgroup.membership.classic.types import ClassicAssignment, MemberSubscription
from kgroup.membership.common.actions import (
    CommitOffsets,
    LeaveComplete,
    RaiseCallbackError,
    RediscoverCoordinator,
    ReportFatalError,
    RunCallback,
    StartFetching,
    StopFetching,
)
from kgroup.membership.common.events import (
    CallbackCompleted,
    CallbackKind,
    FailureKind,
    RejoinRequested,
    RequestFailed,
    ResponseReceived,
    SubscriptionChanged,
)
from kgroup.membership.common.lifecycle import (
    LeaveReason,
    Step,
    check_backoff,
    check_optional_ids,
    session_seconds,
)
from kgroup.membership.common.listener import MemberListener
from kgroup.membership.common.member import MemberBase
from kgroup.types import RebalanceProtocol, TopicPartition

__all__ = ["NO_GENERATION", "ClassicMember", "ClassicMemberConfig"]

log = logging.getLogger("kgroup.membership.classic")

NO_GENERATION = -1
"""The generation id of a member outside any generation (Kafka's DEFAULT_GENERATION_ID)."""

_S = ClassicState
_T = ClassicTrigger
_E = ErrorCode
_Action = ClassicMemberAction
# States that heartbeat (given a generation and a member id): the Java client's
# COMPLETING_REBALANCE and STABLE, plus the preparation of a rejoin, which in
# Java runs while the heartbeat thread still sees STABLE, and the release before
# a leave (Java's heartbeat thread runs while close() runs onPartitionsRevoked;
# the member stays STABLE until its LeaveGroup). LEAVING holds a generation only
# while it releases: the LeaveGroup (or the close timeout) resets it.
_HEARTBEATING = frozenset(
    {_S.PREPARING, _S.AWAITING_ASSIGNOR, _S.SYNCING, _S.RECONCILING, _S.STABLE, _S.LEAVING}
)


@dataclass(frozen=True, slots=True)
class ClassicMemberConfig:
    """What the classic member needs from the consumer configuration.

    Attributes:
        group_id: ``group.id``.
        instance_id: ``group.instance.id``: static membership (KIP-345).
        rack_id: ``client.rack``, sent in the subscription (v3).
        session_timeout_ms: ``session.timeout.ms``, sent in JoinGroup; also how
            long the member goes without a successful heartbeat before it
            looks the coordinator up again.
        heartbeat_interval_ms: ``heartbeat.interval.ms``.
        max_poll_interval_ms: ``max.poll.interval.ms``: the poll timer, the
            rebalance timeout sent in JoinGroup, and the bound of a commit
            before revocation.
        auto_commit: ``enable.auto.commit``: commit before revoking.
        retry_backoff_ms / retry_backoff_max_ms: backoff after failures,
            doubling from the first to the second (as the new-protocol member).
        session_margin_ms: how much sooner than the session timeout the member
            gives its session up (see :func:`~kgroup.membership.common.lifecycle.session_seconds`).
    """

    group_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    auto_commit: bool = True
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    session_margin_ms: int = 0

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ValueError("group_id must be a non-empty string")
        check_optional_ids(self, ("instance_id", "rack_id"))
        for name in ("session_timeout_ms", "heartbeat_interval_ms", "max_poll_interval_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be lower than session_timeout_ms")
        if self.session_margin_ms < 0:
            raise ValueError("session_margin_ms must not be negative")
        check_backoff(self.retry_backoff_ms, self.retry_backoff_max_ms)


class _Kind(enum.Enum):
    """Coordinator request kinds; at most one of each is in flight."""

    JOIN = "JoinGroup"
    SYNC = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    LEAVE = "LeaveGroup"


@dataclass(frozen=True, slots=True)
class _InFlight:
    seq: int
    round: int
    generation: int
    sent_at: float


class _Flow(enum.Enum):
    PREPARE = "prepare"
    RECONCILE = "reconcile"
    RELEASE = "release"


@dataclass(slots=True)
class _Op:
    """The one outside operation (commit or callback) a flow waits for."""

    flow: _Flow
    step: Step
    token: int
    revoked: frozenset[TopicPartition] = frozenset()
    assigned: frozenset[TopicPartition] = frozenset()
    added: frozenset[TopicPartition] = frozenset()
    assignment: ClassicAssignment | None = None
    deadline: float | None = None


class _Answer(Protocol):
    """A JoinGroup or SyncGroup response: the member splits them by error code."""

    @property
    def error_code(self) -> int: ...


_A = TypeVar("_A", bound=_Answer)
_AnswerHandler = Callable[[_A, float, list[_Action]], None]


class ClassicMember(
    MemberBase[ClassicState, ClassicTrigger, ClassicMemberEvent, ClassicMemberAction]
):
    """A classic-protocol (JoinGroup / SyncGroup) consumer group member.

    ``assignors`` maps each assignor name this member supports, in preference
    order, to the rebalance protocols it supports; one JoinGroup protocol is
    advertised per entry. The member rebalances cooperatively only while the
    group's chosen assignor supports COOPERATIVE, so a member advertising an
    eager and a cooperative assignor behaves eagerly until the whole group
    agrees on the cooperative one (the KIP-429 upgrade path).

    Promises:

    - at most one request of each kind (JoinGroup, SyncGroup, Heartbeat,
      LeaveGroup) in flight;
    - only partitions of the installed assignment are fetched; revoked
      partitions stop fetching before the commit and the revoke callback;
    - a lost assignment (generation reset, poll timeout, fatal) is never
      committed, and commits parked across a rebalance are retried only for
      partitions the member owns after it;
    - a member releasing its partitions to leave heartbeats until its
      LeaveGroup; if the coordinator drops it meanwhile, nothing more of them
      is committed;
    - every state change follows
      :data:`~kgroup.membership.classic.states.CLASSIC_TRANSITIONS`.

    ``random`` is the source of the backoff's jitter, as for every member
    (:class:`~kgroup.membership.common.member.MemberBase`).
    """

    _LOG = log
    _POSITION = "generation"
    _FATAL = _S.FATAL
    _STALE = _S.STALE
    _IN_GROUP = IN_GROUP

    def __init__(
        self,
        config: ClassicMemberConfig,
        assignors: Mapping[str, Collection[RebalanceProtocol]],
        *,
        random: Callable[[], float] | None = None,
        listener: MemberListener[ClassicState] | None = None,
    ) -> None:
        if not assignors:
            raise ValueError("at least one assignor is needed")
        for name, protocols in assignors.items():
            if not name:
                raise ValueError("assignor names must be non-empty")
            if not protocols:
                raise ValueError(f"assignor {name!r} supports no rebalance protocol")
        super().__init__(config, CLASSIC_MACHINE, member_id="", random=random, listener=listener)
        self._cfg = config
        self._assignors: tuple[tuple[str, frozenset[RebalanceProtocol]], ...] = tuple(
            (name, frozenset(protocols)) for name, protocols in assignors.items()
        )
        self._supports = dict(self._assignors)
        # Identity in the group.
        self._generation = NO_GENERATION
        # The generation whose SyncGroup answer gave the assignment held now
        # (KIP-792's "generation of the owned partitions"): what commits carry.
        self._synced_generation = NO_GENERATION
        # A SyncGroup went unanswered (timeout, disconnect) in this generation:
        # the coordinator may have recorded an assignment without this member
        # hearing it, and acted on it (a conversion to the consumer protocol
        # hands out at once what that assignment left out).
        self._sync_unanswered = False
        self._protocol_name: str | None = None
        self._leader_id = ""
        self._subscription: frozenset[str] | None = None
        # Assignment.
        self._owned: frozenset[TopicPartition] = frozenset()
        self._fetching: frozenset[TopicPartition] = frozenset()
        self._op: _Op | None = None
        self._parked: dict[TopicPartition, int | None] = {}
        self._rejoin_pending = False
        self._rejoin_reason = ""
        # Java's needsJoinPrepare: a retried join round (failed SyncGroup, no
        # reset) goes straight to JoinGroup; the preparation already ran.
        self._needs_prepare = True
        # Requests.
        self._round = 0
        self._in_flight: dict[_Kind, _InFlight] = {}
        self._sync_request: SyncGroupRequest | None = None
        # Heartbeats and timers.
        self._next_heartbeat_at: float | None = None
        self._last_heartbeat_ok: float | None = None
        # A JoinGroup or SyncGroup of this member went unanswered (timeout,
        # disconnect) since a heartbeat last confirmed its session: the next
        # JoinGroup answer may come straight from a Stable group, which
        # restarts no session (see _on_joined).
        self._answer_lost = False
        self._round_sent_at: float | None = None
        """When the JoinGroup or SyncGroup whose answer is being handled was sent."""
        self._join_sent_at: float | None = None
        """When the JoinGroup last answered was sent, until a SyncGroup or heartbeat
        answer confirms the member (see _on_joined)."""
        # Stale (poll timeout) and leaving.
        self._stale_token: int | None = None
        self._leave_seq: int | None = None
        # The leave of a repair (_rejoin_requested) is out: the join waits for its answer.
        self._repair_leave = False
        self._leave_for_good = False  # the next LeaveGroup repairs the group: sent, static too
        # A close / unsubscribe asked for while a join round was completing:
        # the release starts once the round is over (see _start_release).
        self._release_after_round: LeaveReason | None = None
        # Partitions that release must not commit (left out of an assignment
        # heard only after an unanswered SyncGroup, see _on_synced).
        self._release_uncommitted: frozenset[TopicPartition] = frozenset()
        # A fatal error was heard while releasing: the leave ends in FATAL.
        self._leave_fatal = False

    # ------------------------------------------------------------------ views

    @property
    def generation_id(self) -> int:
        """The generation id, or :data:`NO_GENERATION` outside a generation."""
        return self._generation

    @property
    def synced_generation(self) -> int:
        """The generation of the assignment this member holds: what its commits carry.

        Between a JoinGroup answer and the SyncGroup answer of the same round
        (and after a SyncGroup that went unanswered) the member still holds the
        previous generation's partitions; a commit of them must not carry the
        new generation, which the coordinator may have tied to an assignment
        without them (the Java client refuses commits outside STABLE for the
        same reason). :data:`NO_GENERATION` before the first assignment.
        """
        return self._synced_generation

    @property
    def protocol_name(self) -> str | None:
        """The assignor the coordinator chose for the current generation."""
        return self._protocol_name

    @property
    def is_leader(self) -> bool:
        """True when this member leads the current generation."""
        return bool(self._member_id) and self._leader_id == self._member_id

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        """COOPERATIVE when the current generation's assignor supports it, else EAGER."""
        name = self._protocol_name
        if name is not None and RebalanceProtocol.COOPERATIVE in self._supports.get(name, ()):
            return RebalanceProtocol.COOPERATIVE
        return RebalanceProtocol.EAGER

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions this member owns."""
        return self._owned

    # ------------------------------------------------------------------ hooks

    def _position(self) -> int:
        return self._generation

    def _deadlines(self) -> list[float | None]:
        candidates = [None if self._op is None else self._op.deadline]
        if self._heartbeating() and self._last_heartbeat_ok is not None:
            # Runs while the coordinator is looked up too: an unreachable
            # coordinator is exactly when the session runs out.
            candidates.append(self._session_deadline(self._last_heartbeat_ok))
        elif self._unconfirmed_fetching() and self._last_heartbeat_ok is not None:
            candidates.append(self._session_deadline(self._last_heartbeat_ok))
        joined = self._join_unconfirmed()
        if joined is not None:
            candidates.append(self._session_deadline(joined))
        if (
            self._heartbeating()
            and not self._awaiting_coordinator
            and _Kind.HEARTBEAT not in self._in_flight
            and self._next_heartbeat_at is not None
        ):
            candidates.append(max(self._next_heartbeat_at, self._retry.until or 0.0))
        joining = (
            self._state is _S.JOINING
            and _Kind.JOIN not in self._in_flight
            # A repair's join waits for its leave's answer (_pump), not for a time:
            # the retry deadline, maybe past already, would wake the member at once
            # and again until that answer came.
            and not (self._repair_leave and self._leave_seq is not None)
        )
        if joining and not self._awaiting_coordinator:
            candidates.append(self._retry.until)
        return candidates

    def _dispatch_protocol(
        self, event: ClassicMemberEvent, now: float, acts: list[_Action]
    ) -> None:
        match event:
            case JoinGroupResponseReceived():
                self._on_round_answer(
                    _Kind.JOIN,
                    _S.JOINING,
                    event,
                    now,
                    acts,
                    failed=self._on_join_error,
                    succeeded=self._on_joined,
                )
            case SyncGroupResponseReceived():
                self._on_round_answer(
                    _Kind.SYNC,
                    _S.SYNCING,
                    event,
                    now,
                    acts,
                    failed=self._on_sync_error,
                    succeeded=self._on_synced,
                )
            case ClassicHeartbeatResponseReceived():
                self._on_heartbeat_response(event, now, acts)
            case LeaveGroupResponseReceived():
                self._on_leave_outcome(event.seq, event.error_code, now, acts)
            case AssignmentComputed():
                self._on_assignment_computed(event, acts)
            case AssignorFailed():
                self._on_assignor_failed(event, acts)
            case SubscribedMetadataChanged():
                self._on_metadata_changed(now, acts)
            case CommitFailed():
                self._on_commit_failed(event, now, acts)

    def _on_coordinator_rediscovered(self, now: float) -> None:
        # The session is still counted from the last successful heartbeat: a
        # coordinator found again has not yet confirmed the member is alive.
        self._awaiting_coordinator = False

    def _on_commit(
        self, token: int, error: BaseException | None, now: float, acts: list[_Action]
    ) -> None:
        self._on_commit_done(token, error is None, now, acts)

    @property
    def session_expiry(self) -> float | None:
        """When the member's session surely ran out, unless a heartbeat succeeds first (None:
        no session to lose). Past it, what the member owns may be another member's."""
        if self._last_heartbeat_ok is None or not (
            self._heartbeating() or self._unconfirmed_fetching()
        ):
            return None
        return self._session_deadline(self._last_heartbeat_ok)

    def _session_deadline(self, since: float) -> float:
        return since + session_seconds(self._cfg.session_timeout_ms, self._cfg.session_margin_ms)

    def _has_generation(self) -> bool:
        return self._generation != NO_GENERATION and bool(self._member_id)

    def _heartbeating(self) -> bool:
        return self._state in _HEARTBEATING and self._has_generation()

    def _unconfirmed_fetching(self) -> bool:
        # A cooperative member keeps fetching what it owns while its JoinGroup
        # is out, and sends no heartbeat then (as Java: the broker would queue
        # it behind the parked JoinGroup on the same connection).
        return self._state is _S.JOINING and bool(self._fetching)

    # ----------------------------------------------------------------- timers

    def _on_timers(self, now: float, acts: list[_Action]) -> None:
        op = self._op
        if op is not None and op.deadline is not None and now >= op.deadline:
            self._warn_commit_timed_out()
            self._on_commit_done(op.token, False, now, acts)
        if self._state in IN_GROUP and self._life.poll_expired(now):
            self._poll_expired(now, acts)
            return
        joined = self._join_unconfirmed()
        if joined is not None and now >= self._session_deadline(joined):
            self._session_unconfirmed(acts, "its JoinGroup answer")
        last_ok = self._last_heartbeat_ok
        if last_ok is None or now < self._session_deadline(last_ok):
            return
        if self._heartbeating():
            self._session_expired(now, acts)
        elif self._unconfirmed_fetching():
            self._session_unconfirmed(acts, "JoinGroup")

    def _join_unconfirmed(self) -> float | None:
        """When the JoinGroup answered last went out, while nothing confirmed the
        member since and it fetches (None otherwise)."""
        if self._join_sent_at is None or not self._fetching:
            return None
        if self._state not in (_S.AWAITING_ASSIGNOR, _S.SYNCING):
            return None
        return self._join_sent_at

    def _session_unconfirmed(self, acts: list[_Action], unanswered: str) -> None:
        # A session timeout has passed since the coordinator last confirmed this
        # member, which is still joining (its JoinGroup out, or waiting to be
        # sent again). If the coordinator holds a JoinGroup (parked until
        # the other members rejoin) the member is safe: Kafka does not expire a
        # member awaiting a join. If the request or its answer was lost, the
        # coordinator expired the member a session timeout after the last
        # heartbeat and may have handed its partitions on, while the JoinGroup's
        # own timeout (rebalance timeout + request timeout) is far away. The member cannot
        # tell the two apart, so it stops fetching but keeps its partitions and
        # positions: the round's answer says whether they are still its own
        # (fetching resumes where it stopped) or lost (UNKNOWN_MEMBER_ID). Java
        # keeps fetching until the JoinGroup times out (found by the
        # simulator's session-loss invariant, seeds 22, 138 and 148).
        log.warning(
            "group %s member %s: nothing confirmed this member for session.timeout.ms "
            "(%d ms) since %s went out; stopping fetching %s until the round answers",
            self._cfg.group_id,
            self._member_id,
            self._cfg.session_timeout_ms,
            unanswered,
            sorted(self._fetching),
        )
        self._stop_fetching(self._owned, acts)

    def _session_expired(self, now: float, acts: list[_Action]) -> None:
        # No successful heartbeat for session.timeout.ms: the coordinator has
        # removed this member and may have given its partitions to others, so
        # it can no longer own them, whether or not it hears so (issue 10).
        # Stop fetching and report them lost (never committed) at once, look
        # the coordinator up again, and rejoin with the same member id (and
        # instance id) once the lost callback ran and the coordinator answers.
        reason = "no successful heartbeat within session.timeout.ms"
        self._last_heartbeat_ok = None
        self._mark_coordinator_unknown(acts)
        if self._state is _S.LEAVING:
            # The coordinator has expired the member by now: a LeaveGroup would
            # only be refused, so the member id goes too.
            self._release_lost(
                f"{reason} ({self._cfg.session_timeout_ms} ms)", reset_member_id=True, acts=acts
            )
            return
        log.warning(
            "group %s member %s: no successful heartbeat within session.timeout.ms "
            "(%d ms); treating the assignment as lost, looking the coordinator up "
            "again and rejoining",
            self._cfg.group_id,
            self._member_id,
            self._cfg.session_timeout_ms,
        )
        self._reset_generation(reset_member_id=False)
        if self._state is _S.PREPARING:
            # Start the preparation over: with no generation it gives up
            # everything still owned as lost, not only what it was revoking.
            self._rejoin_reason = reason
            self._prepare(now, acts)
        else:
            self._rejoin(_T.RESET, reason, now, acts)

    # ----------------------------------------------------------- subscription

    def _subscribe(self, event: SubscriptionChanged, now: float, acts: list[_Action]) -> None:
        # Classic subscriptions are topic names; the runtime resolves a pattern
        # against metadata and reports the matching names.
        topics = frozenset(event.topics)
        changed = topics != self._subscription
        self._subscription = topics
        if self._release_after_round is LeaveReason.UNSUBSCRIBE:
            # Subscribed again before the unsubscribe's release began: the member
            # stays (found by the simulator, seed 12313: it left, and stayed out).
            self._release_after_round = None
        if self._state is _S.UNJOINED:
            self._life.last_poll = now
            self._go(_T.SUBSCRIBE)
            self._prepare(now, acts)
        elif self._state is _S.LEAVING:
            self._life.rejoin_after_leave = True
        elif self._state is _S.STABLE and changed:
            self._rejoin(_T.REJOIN, "subscription changed", now, acts)
        elif self._state in IN_GROUP and changed and not self._join_unsent():
            self._request_rejoin("subscription changed")
        # STALE keeps it for its rejoin.

    def _unsubscribe(self, now: float, acts: list[_Action]) -> None:
        self._subscription = None
        if self._state in IN_GROUP or self._state is _S.STALE:
            self._start_release(LeaveReason.UNSUBSCRIBE, now, acts)
        elif self._state is _S.UNJOINED and not self._life.closing:
            acts.append(LeaveComplete())
        # LEAVING: already leaving; its end reports LeaveComplete or Closed.

    def _on_metadata_changed(self, now: float, acts: list[_Action]) -> None:
        # Only the leader watches partition counts (as in the Java client): its
        # rejoin makes every member rejoin, and the new assignment covers them.
        if not self.is_leader:
            return
        if self._state is _S.STABLE:
            self._rejoin(_T.REJOIN, "metadata of subscribed topics changed", now, acts)
        elif self._state in (_S.AWAITING_ASSIGNOR, _S.SYNCING, _S.RECONCILING):
            self._request_rejoin("metadata of subscribed topics changed")

    def _join_unsent(self) -> bool:
        # The next JoinGroup is not out yet, so it carries the new subscription.
        joining = self._in_flight.get(_Kind.JOIN)
        in_round = joining is not None and joining.round == self._round
        return self._state is _S.PREPARING or (self._state is _S.JOINING and not in_round)

    def _request_rejoin(self, reason: str) -> None:
        self._rejoin_pending = True
        self._rejoin_reason = reason

    # ------------------------------------------------------------------- poll

    def _poll_expired(self, now: float, acts: list[_Action]) -> None:
        self._warn_poll_expired(self._cfg.max_poll_interval_ms)
        self._abort_op()
        lost = self._owned
        self._stop_fetching(lost, acts)
        self._drop_parked(lost)
        self._owned = frozenset()
        self._rejoin_pending = False
        self._round += 1
        self._go(_T.POLL_EXPIRED)
        # As Java's maybeLeaveGroup: dynamic members say goodbye, everyone
        # forgets generation and member id, and the loss is reported.
        self._send_leave("consumer poll timeout has expired", acts)
        self._reset_generation(reset_member_id=True)
        self._life.stale_polled = False
        if lost:
            self._stale_token = self._next_token()
            acts.append(RunCallback(CallbackKind.LOST, self._stale_token, lost))
        else:
            self._stale_token = None

    def _rejoin_requested(self, event: RejoinRequested, now: float, acts: list[_Action]) -> None:
        if self._state is not _S.STABLE:
            return
        reason = event.reason
        if not event.as_new:
            # Its JoinGroup makes the coordinator compute the pending assignment;
            # a cooperative member keeps its partitions through it.
            log.warning(
                "group %s member %s: %s; rejoining so that the coordinator assigns",
                self._cfg.group_id,
                self._member_id,
                reason,
            )
            self._rejoin(_T.REJOIN, reason, now, acts)
            return
        if self._owned:
            # Released first, as for a close; the leave is sent for a static
            # member too (_send_leave), then it joins again as a new member.
            log.warning(
                "group %s member %s: %s; releasing the assignment, leaving and rejoining "
                "as a new member so that the group rebalances",
                self._cfg.group_id,
                self._member_id,
                reason,
            )
            self._leave_for_good = True
            self._life.rejoin_after_leave = True
            self._start_release(LeaveReason.REPAIR, now, acts)
            return
        log.warning(
            "group %s member %s: %s; leaving and rejoining as a new member so that "
            "the group rebalances",
            self._cfg.group_id,
            self._member_id,
            reason,
        )
        # A static member too: a rejoin under its instance id would only replace
        # it, and a replacement in a Stable group starts no rebalance. The join
        # waits for the leave's answer (_pump), so the coordinator cannot take
        # the new member for the old one's replacement.
        if self._member_id and not self._awaiting_coordinator and self._leave_seq is None:
            self._leave_seq = self._next_seq()
            self._repair_leave = True
            acts.append(
                SendLeaveGroup(
                    self._leave_seq,
                    self._cfg.group_id,
                    self._member_id,
                    self._cfg.instance_id,
                    reason,
                )
            )
        self._reset_generation(reset_member_id=True)
        self._rejoin(_T.REJOIN, reason, now, acts)

    def _maybe_rejoin_stale(self, now: float, acts: list[_Action]) -> None:
        if self._state is _S.STALE and self._stale_token is None and self._life.stale_polled:
            if self._subscription is None:
                self._start_release(LeaveReason.UNSUBSCRIBE, now, acts)
                return
            self._go(_T.POLLED)
            self._prepare(now, acts)

    # --------------------------------------------------------------- preparing

    def _rejoin(
        self, trigger: ClassicTrigger, reason: str, now: float, acts: list[_Action]
    ) -> None:
        self._rejoin_reason = reason
        self._go(trigger)
        self._prepare(now, acts)

    def _prepare(self, now: float, acts: list[_Action]) -> None:
        """Enter PREPARING: what to give up before the next JoinGroup (Java's onJoinPrepare)."""
        self._abort_op()
        self._rejoin_pending = False
        self._round += 1
        self._sync_request = None
        owned = self._owned
        if not self._needs_prepare:
            self._prepared(now, acts)
            return
        if not self._has_generation():
            # The generation was reset: whatever is owned is lost, never committed.
            if owned:
                log.info(
                    "group %s member %s: giving away %s as lost (generation reset)",
                    self._cfg.group_id,
                    self._member_id or "-",
                    sorted(owned),
                )
                self._stop_fetching(owned, acts)
                self._drop_parked(owned)
                self._owned = frozenset()
                self._op = _Op(_Flow.PREPARE, Step.LOST, self._next_token(), revoked=owned)
                acts.append(RunCallback(CallbackKind.LOST, self._op.token, owned))
                return
            self._prepared(now, acts)
            return
        if self.rebalance_protocol is RebalanceProtocol.EAGER:
            revoked = owned
        else:
            subscribed = self._subscription or frozenset()
            revoked = frozenset(tp for tp in owned if tp.topic not in subscribed)
            if not revoked:
                self._prepared(now, acts)
                return
        self._stop_fetching(revoked, acts)
        self._op = _Op(_Flow.PREPARE, Step.COMMIT, 0, revoked=revoked)
        if revoked and self._cfg.auto_commit:
            self._commit_before_revoke(self._op, revoked, now, acts)
            return
        self._revoke(self._op, acts)

    def _revoke(self, op: _Op, acts: list[_Action]) -> None:
        # Eager: the revoke callback runs on every rebalance, even with nothing
        # owned (as Java's onJoinPrepare); cooperative only calls it for a
        # non-empty set, which _prepare already checked.
        acts.append(self._callback(op, CallbackKind.REVOKED, op.revoked))

    def _prepared(self, now: float, acts: list[_Action]) -> None:
        self._op = None
        self._needs_prepare = False
        self._go(_T.PREPARED)

    # ---------------------------------------------------------------- joining

    def _join_request(self) -> JoinGroupRequest:
        sub = MemberSubscription(
            topics=self._subscription or frozenset(),
            owned_partitions=self._owned,
            generation_id=self._generation,
            rack_id=self._cfg.rack_id,
        )
        return JoinGroupRequest(
            group_id=self._cfg.group_id,
            member_id=self._member_id,
            instance_id=self._cfg.instance_id,
            session_timeout_ms=self._cfg.session_timeout_ms,
            rebalance_timeout_ms=self._cfg.max_poll_interval_ms,
            protocols=tuple(JoinProtocol(name, sub) for name, _ in self._assignors),
            reason=self._rejoin_reason or None,
        )

    def _accept(self, kind: _Kind, seq: int) -> _InFlight | None:
        """The in-flight record ``seq`` answers (now cleared), or None for an unknown seq."""
        current = self._in_flight.get(kind)
        if current is None or current.seq != seq:
            return None
        del self._in_flight[kind]
        return current

    def _answers_round(self, kind: _Kind, seq: int, state: ClassicState) -> bool:
        """Whether ``seq`` answers this round's ``kind`` request, in ``state`` still."""
        sent = self._accept(kind, seq)
        if sent is None or sent.round != self._round or self._state is not state:
            return False
        self._round_sent_at = sent.sent_at  # for the handler of the answer
        return True

    def _on_round_answer(
        self,
        kind: _Kind,
        state: ClassicState,
        event: ResponseReceived[_A],
        now: float,
        acts: list[_Action],
        *,
        failed: _AnswerHandler[_A],
        succeeded: _AnswerHandler[_A],
    ) -> None:
        """A JoinGroup or SyncGroup response: to ``failed`` or ``succeeded`` by its error code.

        Ignored unless it answers this round's ``kind`` request while the
        member is still in ``state`` (an answer to an abandoned round is stale).
        """
        if self._answers_round(kind, event.seq, state):
            handler = failed if event.response.error_code else succeeded
            handler(event.response, now, acts)
            self._round_sent_at = None

    def _round_failed(self, kind: _Kind, code: int) -> ClassicReaction:
        reaction = classic_reaction_for(code)
        log.info(
            "group %s member %s: %s failed with %s (%s)",
            self._cfg.group_id,
            self._member_id or "-",
            kind.value,
            error_name(code),
            reaction.name,
        )
        return reaction

    def _on_join_error(self, resp: JoinGroupResponse, now: float, acts: list[_Action]) -> None:
        code = resp.error_code
        reaction = self._round_failed(_Kind.JOIN, code)
        if reaction is ClassicReaction.MEMBER_ID_REQUIRED:
            self._member_id = resp.member_id
            self._go(_T.MEMBER_ID_REQUIRED)  # sent again at once by _pump
        elif reaction is ClassicReaction.REBALANCING:
            pass  # retried at once, as Java's joinGroupIfNeeded does
        elif reaction in (ClassicReaction.RESET_GENERATION, ClassicReaction.RESET_MEMBER):
            self._reset(reaction, now, acts)
        else:
            self._on_common_error(code, reaction, resp.error_message, now, acts)

    def _on_joined(self, resp: JoinGroupResponse, now: float, acts: list[_Action]) -> None:
        inconsistent = _E.INCONSISTENT_GROUP_PROTOCOL
        if resp.protocol_type is not None and resp.protocol_type != PROTOCOL_TYPE:
            self._fatal(
                inconsistent,
                f"JoinGroup answered with protocol type {resp.protocol_type!r}, "
                f"expected {PROTOCOL_TYPE!r}",
                acts,
            )
            return
        name = resp.protocol_name
        if name is None or name not in self._supports:
            self._fatal(
                inconsistent,
                f"the coordinator chose assignor {name!r}, which this member "
                f"does not support ({', '.join(self._supports)})",
                acts,
            )
            return
        self._retry.reset()
        self._generation = resp.generation_id
        self._member_id = resp.member_id
        self._protocol_name = name
        self._leader_id = resp.leader
        # The coordinator restarted the session when it completed the round:
        # after this JoinGroup went out, before its answer came, no telling
        # when. Held there for the other members, the answer restarts it about
        # now; held up on the network, seconds earlier (simulator seed 617362:
        # 3.6 s, then the SyncGroup and heartbeat answers lost, and the member
        # fetched its kept partitions past the coordinator's expiry). Until a
        # SyncGroup or heartbeat answer confirms the member, it stops fetching
        # (keeping its partitions) a session timeout after the sending.
        self._join_sent_at = self._round_sent_at
        if not self._answer_lost or self._last_heartbeat_ok is None:
            # A join round that completes restarts every member's session.
            self._last_heartbeat_ok = now
        # Else this member's earlier JoinGroup (or SyncGroup) went unanswered:
        # the coordinator may have put it in the current generation and
        # answered this JoinGroup from the Stable group, as Kafka answers a
        # follower rejoining with unchanged metadata, and that restarts no
        # session. Counted from this answer, the member believed its session
        # seconds longer than the coordinator, and fetched past its expiry
        # (simulator seed 443196). Its next heartbeat answer confirms it.
        self._next_heartbeat_at = now + self._cfg.heartbeat_interval_ms / 1000.0
        log.info(
            "group %s member %s: joined generation %d with assignor %s (%s, %s)",
            self._cfg.group_id,
            self._member_id,
            self._generation,
            self._protocol_name,
            "leader" if self.is_leader else "follower",
            self.rebalance_protocol.name.lower(),
        )
        if self.is_leader:
            self._go(_T.JOINED_AS_LEADER)
            acts.append(
                RunAssignor(self._generation, name, resp.leader, resp.members, resp.skip_assignment)
            )
        else:
            self._go(_T.JOINED_AS_FOLLOWER)
            self._sync_request = self._sync(())

    def _sync(self, assignments: tuple[tuple[str, ClassicAssignment], ...]) -> SyncGroupRequest:
        assert self._protocol_name is not None
        return SyncGroupRequest(
            group_id=self._cfg.group_id,
            generation_id=self._generation,
            member_id=self._member_id,
            instance_id=self._cfg.instance_id,
            protocol_name=self._protocol_name,
            assignments=assignments,
        )

    # ---------------------------------------------------------------- leading

    def _on_assignment_computed(self, event: AssignmentComputed, acts: list[_Action]) -> None:
        if self._state is not _S.AWAITING_ASSIGNOR or event.generation_id != self._generation:
            return
        assignments = tuple(sorted(event.assignments.items(), key=lambda kv: kv[0]))
        self._go(_T.ASSIGNMENT_COMPUTED)
        self._sync_request = self._sync(assignments)

    def _on_assignor_failed(self, event: AssignorFailed, acts: list[_Action]) -> None:
        if self._state is not _S.AWAITING_ASSIGNOR or event.generation_id != self._generation:
            return
        name = self._protocol_name or "?"
        log.error(
            "group %s member %s: assignor %s failed: %s",
            self._cfg.group_id,
            self._member_id,
            name,
            event.message,
        )
        self._enter_fatal(acts)
        acts.append(ReportAssignorError(name, event.message))

    # ---------------------------------------------------------------- syncing

    def _on_sync_error(self, resp: SyncGroupResponse, now: float, acts: list[_Action]) -> None:
        code = resp.error_code
        reaction = self._round_failed(_Kind.SYNC, code)
        name = error_name(code)
        if reaction is ClassicReaction.REBALANCING:
            if self._release_after_round is not None and not self._sync_unanswered:
                # A member leaving does not join again: the group prepares the
                # next generation from this one, which is the generation it
                # accepts commits at now. This member was handed nothing in it,
                # so it still holds what it holds, and its release commits there.
                self._synced_generation = self._generation
            self._rejoin(_T.REJOIN, "SyncGroup: the group began another rebalance", now, acts)
        elif reaction in (ClassicReaction.RESET_GENERATION, ClassicReaction.RESET_MEMBER):
            self._reset(reaction, now, acts)
        elif reaction is ClassicReaction.REDISCOVER:
            self._mark_coordinator_unknown(acts)
            self._rejoin(_T.REJOIN, f"SyncGroup failed with {name}", now, acts)
        elif reaction is ClassicReaction.RETRY_WITH_BACKOFF:
            self._retry.failed(now)
            self._rejoin(_T.REJOIN, f"SyncGroup failed with {name}", now, acts)
        else:
            self._fatal(code, resp.error_message, acts)

    def _on_synced(self, resp: SyncGroupResponse, now: float, acts: list[_Action]) -> None:
        inconsistent = _E.INCONSISTENT_GROUP_PROTOCOL
        if (resp.protocol_type is not None and resp.protocol_type != PROTOCOL_TYPE) or (
            resp.protocol_name is not None and resp.protocol_name != self._protocol_name
        ):
            self._fatal(
                inconsistent,
                f"SyncGroup answered with protocol {resp.protocol_type!r}/"
                f"{resp.protocol_name!r}, joined with {PROTOCOL_TYPE!r}/{self._protocol_name!r}",
                acts,
            )
            return
        self._retry.reset()
        self._join_sent_at = None  # the SyncGroup answer confirms the member
        assignment = resp.assignment
        if assignment is None:
            log.warning(
                "group %s member %s: SyncGroup carried no assignment; taking it as empty",
                self._cfg.group_id,
                self._member_id,
            )
            assignment = ClassicAssignment()
        self._synced_generation = self._generation
        self._go(_T.SYNCED)
        if self._release_after_round is not None:
            # The member is leaving: the generation is now stable, so the
            # release commits with it; the new assignment is never applied.
            if self._sync_unanswered:
                # As in _reconcile: what the assignment leaves out may have
                # moved already, so the release does not commit it.
                self._release_uncommitted = self._owned - assignment.partitions
                self._sync_unanswered = False
            self._maybe_release_after_round(now, acts)
            return
        self._reconcile(assignment, now, acts)

    # --------------------------------------------------------- reconciliation

    def _reconcile(self, assignment: ClassicAssignment, now: float, acts: list[_Action]) -> None:
        """Apply a SyncGroup assignment (Java's onJoinComplete)."""
        assigned = assignment.partitions
        revoked = self._owned - assigned
        added = assigned - self._owned
        log.info(
            "group %s member %s generation %d: assigned %s; revoking %s, adding %s",
            self._cfg.group_id,
            self._member_id,
            self._generation,
            sorted(assigned),
            sorted(revoked),
            sorted(added),
        )
        self._needs_prepare = True
        self._flush_parked(assigned, now, acts)
        op = _Op(_Flow.RECONCILE, Step.COMMIT, 0, revoked=revoked, assigned=assigned, added=added)
        op.assignment = assignment
        self._op = op
        unanswered, self._sync_unanswered = self._sync_unanswered, False
        if revoked and unanswered:
            # An earlier SyncGroup of this generation went unanswered: the
            # coordinator may have recorded this assignment then, and the
            # partitions it leaves out may already be another member's (a group
            # converted to the consumer protocol hands them out at once). This
            # member cannot tell, so it gives them up as lost: no commit that
            # could rewind the new owner's offsets (found by the simulator, seed
            # 23957).
            log.warning(
                "group %s member %s generation %d: an earlier SyncGroup went unanswered; "
                "giving up %s as lost (not committed: they may have moved already)",
                self._cfg.group_id,
                self._member_id,
                self._generation,
                sorted(revoked),
            )
            self._stop_fetching(revoked, acts)
            self._drop_parked(revoked)
            acts.append(self._callback(op, CallbackKind.LOST, revoked))
            return
        if revoked:
            self._stop_fetching(revoked, acts)
            if self._cfg.auto_commit:
                self._commit_before_revoke(op, revoked, now, acts)
                return
            self._revoke(op, acts)
            return
        self._reconcile_assign(op, acts)

    def _reconcile_assign(self, op: _Op, acts: list[_Action]) -> None:
        # As Java's onJoinComplete: after the revocation, the assignor learns
        # the assignment, then the assigned callback runs, also with nothing added.
        assert self._protocol_name is not None
        assert op.assignment is not None
        acts.append(
            ClassicAssignorOnAssignment(self._protocol_name, self._generation, op.assignment)
        )
        self._owned = op.assigned
        acts.append(self._callback(op, CallbackKind.ASSIGNED, op.added))

    def _reconciled(self, op: _Op, now: float, acts: list[_Action]) -> None:
        self._op = None
        # Added partitions, and kept ones stopped after an unanswered SyncGroup.
        start = op.assigned - self._fetching
        if start:
            self._fetching = self._fetching | start
            acts.append(StartFetching(start))
        cooperative = self.rebalance_protocol is RebalanceProtocol.COOPERATIVE
        if cooperative and op.revoked:
            # KIP-429: the revoked partitions are free now; the second round
            # hands them to their new owners.
            self._rejoin(_T.REJOIN, f"revoked {sorted(op.revoked)}; rejoining", now, acts)
        elif self._rejoin_pending:
            self._rejoin(_T.REJOIN, self._rejoin_reason, now, acts)
        else:
            self._go(_T.RECONCILED)

    # ---------------------------------------------------------------- commits

    def _commit_before_revoke(
        self,
        op: _Op,
        partitions: frozenset[TopicPartition],
        now: float,
        acts: list[_Action],
    ) -> None:
        op.step = Step.COMMIT
        op.token = self._next_token()
        # The rebalance timeout bounds the wait, as Java's joinPrepareTimer.
        op.deadline = self._life.rebalance_deadline(now)
        if self._life.closing and self._life.close_deadline is not None:
            op.deadline = min(op.deadline, self._life.close_deadline)
        acts.append(self._commit_action(op.token, partitions, op.deadline))

    def _commit_action(
        self,
        token: int,
        partitions: frozenset[TopicPartition],
        deadline: float,
        offsets: Mapping[TopicPartition, int] | None = None,
    ) -> CommitOffsets:
        return CommitOffsets(
            token=token,
            partitions=partitions,
            member_epoch=self._synced_generation,
            deadline=deadline,
            member_id=self._member_id,
            instance_id=self._cfg.instance_id,
            offsets=offsets,
        )

    def _on_commit_done(self, token: int, ok: bool, now: float, acts: list[_Action]) -> None:
        op = self._op
        if op is None or op.step is not Step.COMMIT or op.token != token:
            return
        if not ok:
            log.warning(
                "group %s member %s: commit before revocation failed; revoking anyway",
                self._cfg.group_id,
                self._member_id,
            )
        if op.flow is _Flow.PREPARE or op.flow is _Flow.RECONCILE:
            self._revoke(op, acts)
        else:
            self._release_callback(op, acts)

    def _on_commit_failed(self, event: CommitFailed, now: float, acts: list[_Action]) -> None:
        code = event.error_code
        if (
            self._state is _S.LEAVING
            and self._has_generation()
            and event.generation_id == self._generation
            and code in (_E.ILLEGAL_GENERATION, _E.UNKNOWN_MEMBER_ID, _E.FENCED_INSTANCE_ID)
        ):
            # A commit of the generation being released was refused: the member
            # is out of it, as when a heartbeat says so (the revocation commit's
            # own failure turns the revoke callback into the lost one).
            if code == _E.FENCED_INSTANCE_ID:
                self._fatal(code, "offset commit: the group instance id was fenced", acts)
            else:
                self._reset(classic_reaction_for(code), now, acts)
            return
        parks = code in (
            _E.REBALANCE_IN_PROGRESS,
            _E.ILLEGAL_GENERATION,
            _E.UNKNOWN_MEMBER_ID,
        )
        # Only partitions the member still owns are parked: one lost since the
        # commit was sent may have been processed elsewhere, its offsets are stale.
        owned_now = self._owned if self._state in IN_GROUP else frozenset()
        parked_now = event.partitions & owned_now
        if parks and parked_now:
            for tp in parked_now:
                offset = None if event.offsets is None else event.offsets.get(tp)
                self._parked[tp] = offset
            log.info(
                "group %s member %s: commit of %s refused with %s; retried after the rebalance "
                "for the partitions still owned",
                self._cfg.group_id,
                self._member_id,
                sorted(parked_now),
                error_name(code),
            )
        if event.token is not None:
            self._on_commit_done(event.token, False, now, acts)
        same_generation = event.generation_id == self._generation
        if code == _E.REBALANCE_IN_PROGRESS:
            if self._state is _S.STABLE:
                self._rejoin(_T.REJOIN, "offset commit: the group is rebalancing", now, acts)
        elif code in (_E.ILLEGAL_GENERATION, _E.UNKNOWN_MEMBER_ID):
            if not same_generation:
                # Sent in an older generation: retry now if the member is stable
                # again, otherwise after the next SyncGroup.
                if self._state is _S.STABLE:
                    self._flush_parked(self._owned, now, acts)
            elif self._state in IN_GROUP:
                reaction = classic_reaction_for(code)
                self._reset(reaction, now, acts)
        elif code == _E.FENCED_INSTANCE_ID and same_generation and self._state in IN_GROUP:
            self._fatal(code, "offset commit: the group instance id was fenced", acts)

    def _flush_parked(
        self, owned: frozenset[TopicPartition], now: float, acts: list[_Action]
    ) -> None:
        """Re-send parked commits for the partitions in ``owned``; forget the others."""
        parked, self._parked = self._parked, {}
        retry = frozenset(tp for tp in parked if tp in owned)
        if not retry:
            return
        offsets = {tp: off for tp, off in parked.items() if tp in retry and off is not None}
        acts.append(
            self._commit_action(
                self._next_token(),
                retry,
                self._life.rebalance_deadline(now),
                offsets or None,
            )
        )

    def _abort_op(self) -> None:
        """Stop waiting for the current flow; later outcomes of its token are ignored.

        A revoke or lost callback already handed to the runtime still runs (it
        is queued for the next poll), so its partitions count as given up:
        they are not revoked, lost or committed a second time.
        """
        op = self._op
        self._op = None
        if op is not None and op.step in (Step.REVOKE, Step.LOST):
            self._owned = self._owned - op.revoked

    def _drop_parked(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._parked.pop(tp, None)

    # -------------------------------------------------------------- callbacks

    def _on_callback(self, event: CallbackCompleted, now: float, acts: list[_Action]) -> None:
        if event.error is not None:
            # As Java: a failing listener does not stop the rebalance; the
            # error surfaces from poll.
            acts.append(RaiseCallbackError(event.kind, event.error))
        if self._stale_token is not None and event.token == self._stale_token:
            self._stale_token = None
            self._maybe_rejoin_stale(now, acts)
            return
        op = self._op
        if op is None or op.step is Step.COMMIT or op.token != event.token:
            return
        if op.flow is _Flow.PREPARE:
            self._owned = self._owned - op.revoked
            self._drop_parked_not_owned_on_revoke(op.revoked)
            self._prepared(now, acts)
        elif op.flow is _Flow.RECONCILE:
            if op.step in (Step.REVOKE, Step.LOST):
                self._owned = self._owned - op.revoked
                self._reconcile_assign(op, acts)
            else:
                self._reconciled(op, now, acts)
        else:
            self._owned = frozenset()
            self._op = None
            self._leave_after_release(now, acts)

    def _drop_parked_not_owned_on_revoke(self, revoked: frozenset[TopicPartition]) -> None:
        # Eager revocation keeps parked entries: the partitions may come back in
        # the SyncGroup that follows, and nobody else owned them in between.
        if self.rebalance_protocol is RebalanceProtocol.COOPERATIVE:
            self._drop_parked(revoked)

    # ------------------------------------------------------------- heartbeats

    def _on_heartbeat_response(
        self, event: ClassicHeartbeatResponseReceived, now: float, acts: list[_Action]
    ) -> None:
        sent = self._accept(_Kind.HEARTBEAT, event.seq)
        if sent is None or not self._heartbeating():
            return
        code = event.error_code
        if code == 0:
            self._retry.reset()
            # From when it was sent, as the consumer-protocol member: the
            # coordinator restarted the session when it handled the heartbeat,
            # no later. Counted from the answer, a slow answer would stretch
            # the member's idea of its session past the coordinator's.
            self._last_heartbeat_ok = sent.sent_at
            self._answer_lost = False
            self._join_sent_at = None
            return
        reaction = classic_reaction_for(code)
        if sent.generation != self._generation and reaction in (
            ClassicReaction.RESET_GENERATION,
            ClassicReaction.RESET_MEMBER,
            ClassicReaction.REBALANCING,
        ):
            return  # about a generation the member already left behind
        log.info(
            "group %s member %s: heartbeat failed with %s (%s)",
            self._cfg.group_id,
            self._member_id,
            error_name(code),
            reaction.name,
        )
        if reaction is ClassicReaction.REBALANCING:
            # Heartbeats during a rebalance keep the member alive; only a
            # member that thinks it is done has to rejoin (as Java).
            self._last_heartbeat_ok = sent.sent_at
            self._answer_lost = False
            self._join_sent_at = None
            if self._state is _S.STABLE:
                self._rejoin(_T.REJOIN, "heartbeat: the group is rebalancing", now, acts)
            elif self._state is _S.RECONCILING:
                self._request_rejoin("heartbeat: the group is rebalancing")
        elif reaction in (ClassicReaction.RESET_GENERATION, ClassicReaction.RESET_MEMBER):
            self._reset(reaction, now, acts)
        else:
            self._on_common_error(code, reaction, None, now, acts)

    def _on_common_error(
        self,
        code: int,
        reaction: ClassicReaction,
        message: str | None,
        now: float,
        acts: list[_Action],
    ) -> None:
        if reaction is ClassicReaction.REDISCOVER:
            self._mark_coordinator_unknown(acts)
        elif reaction is ClassicReaction.RETRY_WITH_BACKOFF:
            self._retry.failed(now)
        else:
            self._fatal(code, message, acts)

    def _on_request_failed(self, event: RequestFailed, now: float, acts: list[_Action]) -> None:
        if event.seq == self._leave_seq:
            self._on_leave_outcome(event.seq, None, now, acts)
            return
        kind = next((k for k, f in self._in_flight.items() if f.seq == event.seq), None)
        if kind is None:
            return
        sent = self._accept(kind, event.seq)
        assert sent is not None
        current = sent.round == self._round
        if event.kind is FailureKind.UNSUPPORTED_VERSION and self._state in IN_GROUP:
            self._fatal(_E.UNSUPPORTED_VERSION, event.detail or None, acts)
            return
        log.info(
            "group %s member %s: %s failed (%s) %s",
            self._cfg.group_id,
            self._member_id or "-",
            kind.value,
            event.kind.value,
            event.detail,
        )
        if kind in (_Kind.JOIN, _Kind.SYNC):
            # The coordinator may have acted on it (see _on_joined).
            self._answer_lost = True
        if kind is _Kind.JOIN and current and self._state is _S.JOINING:
            self._retry.failed(now)
        elif kind is _Kind.SYNC and current and self._state is _S.SYNCING:
            self._retry.failed(now)
            self._sync_unanswered = True
            # The coordinator may have recorded (and a conversion acted on) an
            # assignment that moves some owned partitions away: until the next
            # SyncGroup says which, none is fetched (sim seed 20034: another
            # member fetched one while this one, rejoining, still did).
            self._stop_fetching(self._owned, acts)
            self._rejoin(_T.REJOIN, "SyncGroup got no response", now, acts)
        elif kind is _Kind.HEARTBEAT and self._heartbeating():
            self._retry.failed(now)

    def _mark_coordinator_unknown(self, acts: list[_Action]) -> None:
        self._retry.reset()
        if not self._awaiting_coordinator:
            self._awaiting_coordinator = True
            acts.append(RediscoverCoordinator())

    # ------------------------------------------------------------------ pump

    def _pump(self, now: float, acts: list[_Action]) -> None:
        """Send whatever request the state calls for and the rules allow."""
        # A round that failed (rejoin, reset, lost session ...) ends the wait too.
        self._maybe_release_after_round(now, acts)
        if self.closed:
            return
        if self._awaiting_coordinator:
            return
        if self._retry.holds(now):
            return
        if (
            self._state is _S.JOINING
            and _Kind.JOIN not in self._in_flight
            and not (self._repair_leave and self._leave_seq is not None)
        ):
            seq = self._send(_Kind.JOIN, now)
            acts.append(SendJoinGroup(seq, self._join_request()))
        if (
            self._state is _S.SYNCING
            and self._sync_request is not None
            and _Kind.SYNC not in self._in_flight
        ):
            seq = self._send(_Kind.SYNC, now)
            acts.append(SendSyncGroup(seq, self._sync_request))
            self._sync_request = None
        if (
            self._heartbeating()
            and _Kind.HEARTBEAT not in self._in_flight
            and self._next_heartbeat_at is not None
            and now >= self._next_heartbeat_at
        ):
            seq = self._send(_Kind.HEARTBEAT, now)
            self._next_heartbeat_at = now + self._cfg.heartbeat_interval_ms / 1000.0
            acts.append(
                SendClassicHeartbeat(
                    seq,
                    self._cfg.group_id,
                    self._generation,
                    self._member_id,
                    self._cfg.instance_id,
                )
            )

    def _send(self, kind: _Kind, now: float) -> int:
        seq = self._next_seq()
        self._in_flight[kind] = _InFlight(seq, self._round, self._generation, now)
        return seq

    # ------------------------------------------------------- reset and fatal

    def _reset_generation(self, *, reset_member_id: bool) -> None:
        self._generation = NO_GENERATION
        self._synced_generation = NO_GENERATION
        self._sync_unanswered = False
        self._needs_prepare = True
        # Parked commits die with the generation: other members may own and
        # process those partitions before this member gets them back.
        self._parked = {}
        self._protocol_name = None
        self._leader_id = ""
        if reset_member_id:
            self._member_id = ""

    def _reset(self, reaction: ClassicReaction, now: float, acts: list[_Action]) -> None:
        """ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID: reset, and rejoin (losing the assignment)."""
        if self._state is _S.LEAVING:
            # Leaving: no rejoin, the release goes on as a loss. After
            # ILLEGAL_GENERATION the coordinator still knows the member id, and
            # LeaveGroup (which carries no generation) removes the member at
            # once rather than a session timeout later; after UNKNOWN_MEMBER_ID
            # the member is gone and a LeaveGroup would be refused.
            self._release_lost(
                f"the coordinator answered {reaction.name}",
                reset_member_id=reaction is ClassicReaction.RESET_MEMBER,
                acts=acts,
            )
            return
        self._reset_generation(reset_member_id=reaction is ClassicReaction.RESET_MEMBER)
        if self._state is _S.PREPARING:
            # The preparation starts again as a loss: the coordinator moved on
            # without this generation, so what the member still owns may be
            # another member's already. It stops fetching now, not once a
            # revocation commit (which the coordinator refuses at this
            # generation anyway) gives up; a callback already handed out still
            # runs. The join then goes out with the reset identity.
            self._prepare(now, acts)
            return
        self._rejoin(_T.RESET, f"generation reset ({reaction.name})", now, acts)

    def _enter_fatal(self, acts: list[_Action]) -> None:
        self._abort_op()
        lost = self._owned
        self._stop_fetching(lost, acts)
        self._owned = frozenset()
        self._parked = {}
        self._round += 1
        self._go(_T.FATAL_ERROR)
        if lost:
            acts.append(RunCallback(CallbackKind.LOST, self._next_token(), lost))

    def _fatal(self, code: int, message: str | None, acts: list[_Action]) -> None:
        name = error_name(code)
        if code == _E.FENCED_INSTANCE_ID:
            # The broker says nothing more; the usual cause is two processes
            # started with one group.instance.id.
            why = (
                f"another consumer joined with the same group.instance.id "
                f"({self._cfg.instance_id}) and replaced this one; give every running "
                "consumer its own group.instance.id"
            )
            message = f"{message}: {why}" if message else why
        log.error(
            "group %s member %s: fatal error %s: %s",
            self._cfg.group_id,
            self._member_id or "-",
            name,
            message,
        )
        if self._state is _S.LEAVING:
            # Heard while releasing (FENCED_INSTANCE_ID: another instance took
            # the instance id): the partitions are lost as after UNKNOWN_MEMBER_ID,
            # and the leave ends in FATAL (or Closed) once the callback under way
            # returned, so that a close does not end before the application heard.
            self._release_lost(f"fatal error {name}", reset_member_id=True, acts=acts)
            self._leave_fatal = True
            acts.append(ReportFatalError(code, name, message))
            return
        was_closing = self._life.closing
        self._enter_fatal(acts)
        acts.append(ReportFatalError(code, name, message))
        if was_closing:
            self._finish_close(False, acts)

    # ---------------------------------------------------------------- leaving

    def _start_release(self, reason: LeaveReason, now: float, acts: list[_Action]) -> None:
        """Give the assignment up before leaving (Java's onLeavePrepare), then leave.

        Asked for while a join round is completing (JoinGroup out, or joined and
        not yet synced) by a member that owns partitions, the release waits for
        the round to end (bounded by the close deadline): the coordinator has
        moved, or is about to move, to the new generation and refuses every
        commit until this member's SyncGroup (REBALANCE_IN_PROGRESS, then
        UNKNOWN_MEMBER_ID once its session expires) or carrying the old
        generation (ILLEGAL_GENERATION). Abandoning the round would lose the
        revocation commit — and the application's own commit in its revoke
        callback — so everything since the last commit would be redelivered.
        """
        if self._owned and self._round_completing():
            if self._release_after_round is None:
                log.info(
                    "group %s member %s: %s while generation %d's rebalance completes; "
                    "releasing the assignment once it has",
                    self._cfg.group_id,
                    self._member_id or "-",
                    "closing" if reason is LeaveReason.CLOSE else "unsubscribing",
                    self._generation,
                )
            self._release_after_round = reason
            # Nothing more is fetched while the round ends: the coordinator may
            # have recorded (and a conversion acted on) an assignment that moves
            # some of these away (sim seed 36344). The stopped positions are
            # what the release commits.
            self._stop_fetching(self._owned, acts)
            return
        self._release_after_round = None
        self._abort_op()
        self._stale_token = None
        self._rejoin_pending = False
        self._round += 1
        self._life.leave_reason = reason
        self._go(_T.LEAVE)
        owned = self._owned
        self._parked = {}
        if not owned:
            self._leave_after_release(now, acts)
            return
        self._stop_fetching(owned, acts)
        op = _Op(_Flow.RELEASE, Step.COMMIT, 0, revoked=owned)
        self._op = op
        committed = owned - self._release_uncommitted
        self._release_uncommitted = frozenset()
        if self._has_generation() and self._cfg.auto_commit and committed:
            self._commit_before_revoke(op, committed, now, acts)
            return
        self._release_callback(op, acts)

    def _release_callback(self, op: _Op, acts: list[_Action]) -> None:
        kind = CallbackKind.REVOKED if self._has_generation() else CallbackKind.LOST
        acts.append(self._callback(op, kind, op.revoked))

    def _release_lost(self, why: str, *, reset_member_id: bool, acts: list[_Action]) -> None:
        """The coordinator no longer counts this leaving member in its generation.

        The partitions being released may be another member's already, so
        nothing more of them is committed: with the generation reset the
        member stops heartbeating, and with nothing owned the runtime drops the
        application's commits of them (a commit already on its way carries the
        old generation, which the coordinator refuses). Where the release
        stands decides what the application hears:

        - the revocation commit is under way: its outcome is ignored, and the
          lost callback runs instead of the revoke callback;
        - the revoke (or lost) callback is under way: it finishes as it began
          (the application was told, and its commits in it are dropped from
          now on); no second callback.

        The leave follows that callback, as after any release, with a
        LeaveGroup only if the member id was kept.
        """
        op = self._op
        log.warning(
            "group %s member %s: %s while releasing %s to leave; they are lost: "
            "nothing more of them is committed",
            self._cfg.group_id,
            self._member_id or "-",
            why,
            sorted(op.revoked) if op is not None else [],
        )
        self._reset_generation(reset_member_id=reset_member_id)
        self._owned = frozenset()
        if op is not None and op.step is Step.COMMIT:
            self._release_callback(op, acts)

    def _round_completing(self) -> bool:
        """Whether a join round is under way that the coordinator completes without us.

        JoinGroup sent, or joined and not yet synced: the group is (or is about
        to be) in CompletingRebalance, waiting for this member's SyncGroup.
        """
        if self._state is _S.JOINING:
            return _Kind.JOIN in self._in_flight
        return self._state in (_S.AWAITING_ASSIGNOR, _S.SYNCING)

    def _maybe_release_after_round(self, now: float, acts: list[_Action]) -> None:
        """Start a release that waited for a join round, once that round is over."""
        if self._release_after_round is None or self._round_completing():
            return
        self._release_after_round = None
        if self._life.closing:
            self._close(now, acts)
        else:
            self._unsubscribe(now, acts)

    def _leave_after_release(self, now: float, acts: list[_Action]) -> None:
        closing = self._life.closing
        self._send_leave(f"the consumer is {'closing' if closing else 'unsubscribing'}", acts)
        self._reset_generation(reset_member_id=True)
        if self._leave_seq is None:
            self._finish_leave(False, now, acts)

    def _send_leave(self, reason: str, acts: list[_Action]) -> None:
        # KIP-345: static members never send LeaveGroup; their membership ends
        # with the session timeout, so a quick bounce causes no rebalance. A
        # repair's leave is for good: it must start a rebalance.
        leave_for_good, self._leave_for_good = self._leave_for_good, False
        if (
            (self._cfg.instance_id is not None and not leave_for_good)
            or self._awaiting_coordinator
            or not self._member_id
            or self._leave_seq is not None
        ):
            return
        self._leave_seq = self._next_seq()
        instance = self._cfg.instance_id if leave_for_good else None
        acts.append(
            SendLeaveGroup(self._leave_seq, self._cfg.group_id, self._member_id, instance, reason)
        )

    def _on_leave_outcome(
        self, seq: int, code: int | None, now: float, acts: list[_Action]
    ) -> None:
        if seq != self._leave_seq:
            return
        self._leave_seq = None
        self._repair_leave = False
        if code:
            log.info(
                "group %s: LeaveGroup answered with %s",
                self._cfg.group_id,
                error_name(code),
            )
        if self._state is _S.LEAVING and self._op is None:
            self._finish_leave(False, now, acts)

    def _finish_leave(self, timed_out: bool, now: float, acts: list[_Action]) -> None:
        self._leave_for_good = False  # also when the release ended without a LeaveGroup
        reason = self._life.take_leave_reason()
        if self._life.closing:
            self._finish_close(timed_out, acts)
            return
        if self._leave_fatal:
            # The fatal error was reported when heard: no rejoin after it.
            self._leave_fatal = False
            self._go(_T.FATAL_ERROR)
            return
        self._go(_T.LEFT)
        if reason is LeaveReason.UNSUBSCRIBE:
            acts.append(LeaveComplete())
        if self._life.rejoin_after_leave and self._subscription is not None:
            self._life.rejoin_after_leave = False
            self._go(_T.SUBSCRIBE)
            self._prepare(now, acts)

    # ---------------------------------------------------------------- closing

    def _close(self, now: float, acts: list[_Action]) -> None:
        if self._state in IN_GROUP or self._state is _S.STALE:
            self._start_release(LeaveReason.CLOSE, now, acts)
        elif self._state in (_S.UNJOINED, _S.FATAL):
            self._finish_close(False, acts)
        # LEAVING: the leave under way ends in Closed.

    def _close_timed_out(self, now: float, acts: list[_Action]) -> None:
        waited = self._release_after_round is not None
        self._release_after_round = None
        if waited:
            # Still in the join round (a state CLOSE does not leave from).
            self._round += 1
            self._go(_T.LEAVE)
        if waited or (self._state is _S.LEAVING and self._op is not None):
            # Give up on the release; still tell the broker, best effort.
            self._op = None
            self._stop_fetching(self._owned, acts)
            self._owned = frozenset()
            self._send_leave("the consumer is closing", acts)
            self._reset_generation(reset_member_id=True)
        self._finish_close(True, acts)

    def _finish_close(self, timed_out: bool, acts: list[_Action]) -> None:
        self._op = None
        self._leave_seq = None
        self._go(_T.CLOSE)
        acts.append(self._life.finish_close(timed_out))

    # ---------------------------------------------------------------- helpers

    def _stop_fetching(self, partitions: frozenset[TopicPartition], acts: list[_Action]) -> None:
        stop = partitions & self._fetching
        if stop:
            self._fetching = self._fetching - stop
            acts.append(StopFetching(stop))
