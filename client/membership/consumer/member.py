"""The new-protocol (KIP-848) consumer group member, as a sans-IO state machine.

:class:`ConsumerMember` holds a member's state and reacts to events with time
passed in::

    actions = member.handle(event, now)
    deadline = member.next_deadline()

It never sleeps, reads a clock or touches a socket; the runtime performs the
actions in order and feeds back what happened. States change only through
the table in :mod:`kgroup.membership.consumer.states`; the skeleton it shares
with the classic member is :class:`~kgroup.membership.common.member.MemberBase`.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kgroup.error_codes import ErrorCode, error_name
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
from kgroup.membership.consumer import reconcile
from kgroup.membership.consumer.actions import (
    AssignorOnAssignment,
    ComputeAssignment,
    ConsumerMemberAction,
    HeartbeatRequest,
    ReportClientAssignorError,
    ReportError,
    RequestMetadata,
    SendHeartbeat,
    SendInstallAssignment,
    SendPrepareAssignment,
)
from kgroup.membership.consumer.client_assignment import (
    ASSIGNMENT_ERROR,
    DUTY,
    ClientAssignor,
    DutyState,
    DutyTrigger,
    InstallAssignmentRequest,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
    check_client_assignment,
)
from kgroup.membership.consumer.events import (
    ClientAssignmentComputed,
    ConsumerMemberEvent,
    HeartbeatResponse,
    HeartbeatResponseReceived,
    InstallAssignmentResponseReceived,
    MetadataUpdated,
    PrepareAssignmentResponseReceived,
)
from kgroup.membership.consumer.heartbeat import SentFields, SubscribedTopics, build_request
from kgroup.membership.consumer.reactions import Reaction, reaction_for
from kgroup.membership.consumer.states import IN_GROUP, MACHINE, MemberState, Trigger
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = ["ConsumerMember", "MemberConfig"]

log = logging.getLogger("kgroup.membership")

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
LEAVE_EPOCH_STATIC = -2

_S = MemberState
# States that heartbeat on their own schedule (LEAVING sends its one leave inline;
# LEAVING_TO_REJOIN's leave is its regular heartbeat, retried like one).
_HEARTBEATING = IN_GROUP | {_S.PREPARE_LEAVING, _S.LEAVING_TO_REJOIN}
# States whose unsubscribe or close sends a leave heartbeat: the broker holds the member.
_HELD = IN_GROUP | {_S.LEAVING_TO_REJOIN}
_Action = ConsumerMemberAction


@dataclass(frozen=True, slots=True)
class MemberConfig:
    """What the member needs from the consumer configuration.

    Attributes:
        group_id: ``group.id``.
        member_id: the client-generated member id (a uuid4 string), kept for
            the life of the consumer, across fencing, rejoining and leaving.
        instance_id: ``group.instance.id`` (static membership); leaves with -2.
        rack_id: ``client.rack``.
        server_assignor: ``group.remote.assignor``, sent as ServerAssignor.
        max_poll_interval_ms: ``max.poll.interval.ms``; also the rebalance
            timeout sent to the broker and the bound of a revocation commit.
        auto_commit: ``enable.auto.commit``: commit before revoking.
        retry_backoff_ms / retry_backoff_max_ms: heartbeat failure backoff,
            doubling from the first to the second.
        heartbeat_interval_ms: interval used until the broker sends its own.
        session_timeout_ms: the broker's session timeout
            (``group.consumer.session.timeout.ms``; the broker does not tell
            the client): after this long without a successful heartbeat the
            member treats its partitions as lost and rejoins.
        session_margin_ms: how much sooner than the session timeout the member
            gives its session up (see :func:`~kgroup.membership.common.lifecycle.session_seconds`).
        assignor_hook: emit AssignorOnAssignment (a new-protocol Python
            PartitionAssignor is configured).
        catch_up_heartbeats: after an answer that moved the member's epoch or
            changed its target, heartbeat every fifth of the interval for one
            interval (see ``_catch_up``).
        client_assignors: the KIP-848 draft's client-side assignors, in
            order of preference (simulator only: Apache Kafka has no such
            mode). The member then computes the group's assignment when the
            coordinator asks (``ShouldComputeAssignment``).
    """

    group_id: str
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    server_assignor: str | None = None
    max_poll_interval_ms: int = 300_000
    auto_commit: bool = True
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45_000
    session_margin_ms: int = 0
    assignor_hook: bool = False
    catch_up_heartbeats: bool = True
    client_assignors: tuple[ClientAssignor, ...] = ()

    def __post_init__(self) -> None:
        # The broker answers empty ids with INVALID_REQUEST; fail early instead.
        for name in ("group_id", "member_id"):
            if not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty string")
        check_optional_ids(self, ("instance_id", "rack_id", "server_assignor"))
        if self.max_poll_interval_ms <= 0:
            raise ValueError("max_poll_interval_ms must be positive")
        if self.session_timeout_ms <= 0:
            raise ValueError("session_timeout_ms must be positive")
        if self.session_margin_ms < 0:
            raise ValueError("session_margin_ms must not be negative")
        check_backoff(self.retry_backoff_ms, self.retry_backoff_max_ms)
        names = [a.name for a in self.client_assignors]
        if len(set(names)) != len(names):
            raise ValueError(f"client assignor names must be unique, got {names}")


@dataclass(slots=True)
class _Reconciliation:
    """One reconciliation in progress, waiting for one outside operation."""

    target_version: int
    resolved: frozenset[TopicIdPartition]
    revoked: frozenset[TopicIdPartition]
    added: frozenset[TopicIdPartition]
    step: Step
    token: int
    deadline: float | None = None


class ConsumerMember(MemberBase[MemberState, Trigger, ConsumerMemberEvent, ConsumerMemberAction]):
    """A new-protocol consumer group member.

    Promises:

    - at most one heartbeat in flight (the leave heartbeat excepted);
    - revoked partitions stop fetching before the commit and the revoke
      callback, and before the acknowledgement;
    - a lost assignment (fenced, stale, fatal) is never committed, nor is a
      partition that never fetched;
    - a partition a newer target dropped never starts fetching, even if its
      assigned callback completes afterwards (it is reported revoked instead);
    - no heartbeat leaves out a partition the member still holds or may still
      install (the broker would hand it to another member);
    - every state change follows :data:`kgroup.membership.consumer.states.TRANSITIONS`;
      anything else raises :class:`~kgroup.membership.common.IllegalTransitionError`.

    ``random`` and ``listener``: see :class:`~kgroup.membership.common.member.MemberBase`.
    """

    _LOG = log
    _POSITION = "epoch"
    _FATAL = _S.FATAL
    _STALE = _S.STALE
    _IN_GROUP = IN_GROUP

    def __init__(
        self,
        config: MemberConfig,
        *,
        random: Callable[[], float] | None = None,
        listener: MemberListener[MemberState] | None = None,
    ) -> None:
        super().__init__(
            config, MACHINE, member_id=config.member_id, random=random, listener=listener
        )
        self._cfg = config
        # Read a few times per step: worked out once (the config is frozen).
        self._session_span = session_seconds(config.session_timeout_ms, config.session_margin_ms)
        self._epoch = JOIN_EPOCH
        self._subscription: SubscribedTopics | None = None
        # Assignment
        self._metadata: dict[uuid.UUID, str] = {}
        self._assigned_names: dict[uuid.UUID, str] = {}
        self._target: frozenset[TopicIdPartition] | None = None
        self._target_version = 0
        self._acked_target_version = -1
        self._owned: frozenset[TopicIdPartition] = frozenset()  # installed assignment
        # ``assignment`` for the ``_owned`` object it was named from: the runtime
        # reads it several times a step, and naming a large assignment again each
        # time was most of an idle member's heartbeat cost. A topic id's name never
        # changes, so the owned set alone decides the answer.
        self._named_owned: tuple[frozenset[TopicIdPartition], frozenset[TopicPartition]] = (
            frozenset(),
            frozenset(),
        )
        self._current: frozenset[TopicIdPartition] | None = None  # last reconciled
        self._ack_version = 0
        self._fetching: frozenset[TopicIdPartition] = frozenset()
        # Installed, but their assigned callback has not succeeded yet.
        self._awaiting_assigned: frozenset[TopicIdPartition] = frozenset()
        # Installed and never fetched since: nothing consumed, nothing to commit.
        self._unstarted: frozenset[TopicIdPartition] = frozenset()
        # TopicPartitions of the last heartbeat that carried them (see _reported).
        self._last_reported: frozenset[TopicIdPartition] = frozenset()
        self._rec: _Reconciliation | None = None
        self._retry_on_poll = False
        self._last_hook_epoch: int | None = None
        # Outside operations the member waits for, by token.
        self._lost_token: int | None = None  # FENCED / STALE
        self._release_token: int | None = None  # PREPARE_LEAVING commit or callback
        self._release_step: Step | None = None
        self._release_deadline: float | None = None
        self._stale_released = False
        # Heartbeats
        self._session = 0  # bumped on fence / leave: older responses are ignored
        self._in_flight: int | None = None
        self._in_flight_session = 0
        self._in_flight_epoch = JOIN_EPOCH
        # Heartbeats sent before the one in flight: a join refused UNRELEASED_INSTANCE_ID
        # can be about this member's own earlier incarnation only if one went out.
        self._sent_before_in_flight = 0
        self._heartbeats_sent = 0
        # A rejoin the broker refused because it still holds the member id (see
        # _on_rejoin_refused): the refusal (code, name, message), and whether a
        # leave heartbeat already removed the held member for this rejoin.
        self._refusal: tuple[int, str, str | None] | None = None
        self._held_left = False
        self._leave_for_good = False  # the leave under way repairs the group: -1, static too
        self._warned_refusals: set[int] = set()
        self._leave_seq: int | None = None
        self._sent: SentFields | None = None
        self._interval = config.heartbeat_interval_ms / 1000.0
        self._last_sent_at: float | None = None
        self._next_heartbeat_at: float | None = None
        self._heartbeat_asap = False
        self._catch_up_until: float | None = None  # see _catch_up
        self._last_heartbeat_ok: float | None = None  # while it owns an epoch
        # A join heartbeat answered at epoch 0: the coordinator has no assignment
        # for the member yet (client-side mode computes it later), so the next
        # heartbeat waits for the interval instead of going out at once.
        self._join_answered = False
        # Client-side assignment duty (the KIP-848 draft; see client_assignment).
        self._duty = DutyState.IDLE
        self._duty_seq: int | None = None
        self._duty_token: int | None = None
        self._prepared: PrepareAssignmentResponse | None = None
        self._pending_install: InstallAssignmentRequest | None = None

    # ------------------------------------------------------------------ views

    @property
    def member_epoch(self) -> int:
        """The member epoch: 0 joining, > 0 in the group, -1 / -2 after leaving."""
        return self._epoch

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The installed assignment, by topic name."""
        owned = self._owned
        named_from, named = self._named_owned
        if named_from is not owned:
            named = reconcile.names_of(owned, self._assigned_names)
            self._named_owned = (owned, named)
        return named

    @property
    def target(self) -> frozenset[TopicIdPartition] | None:
        """The latest target assignment from the broker, by topic id (None if none yet)."""
        return self._target

    @property
    def duty(self) -> DutyState:
        """Where the member stands in computing the group's assignment (client-side mode)."""
        return self._duty

    # ------------------------------------------------------------------ hooks

    def _position(self) -> int:
        return self._epoch

    def _deadlines(self) -> list[float | None]:
        rec_deadline = None if self._rec is None else self._rec.deadline
        return [
            rec_deadline,
            self._release_deadline,
            self._heartbeat_due_at(),
            self._session_expiry(),
        ]

    @property
    def session_expiry(self) -> float | None:
        """When the member's session surely ran out, unless a heartbeat succeeds first (None:
        no session to lose). Past it, what the member owns may be another member's."""
        return self._session_expiry()

    def _session_expiry(self) -> float | None:
        """When the broker has surely dropped this member, heard from or not."""
        if self._state not in IN_GROUP or self._epoch <= 0 or self._last_heartbeat_ok is None:
            return None
        return self._last_heartbeat_ok + self._session_span

    def _dispatch_protocol(
        self, event: ConsumerMemberEvent, now: float, acts: list[_Action]
    ) -> None:
        match event:
            case HeartbeatResponseReceived():
                self._on_response(event, now, acts)
            case MetadataUpdated():
                self._metadata.update(event.topic_names)
                if self._state is _S.RECONCILING and self._rec is None:
                    self._maybe_reconcile(now, acts)
            case PrepareAssignmentResponseReceived():
                self._on_prepared(event, acts)
            case ClientAssignmentComputed():
                self._on_computed(event, acts)
            case InstallAssignmentResponseReceived():
                self._on_installed(event)

    def _names(self, partitions: frozenset[TopicIdPartition]) -> frozenset[TopicPartition]:
        names = {**self._assigned_names, **self._metadata}
        return reconcile.names_of(partitions, names)

    # ----------------------------------------------------------------- timers

    def _on_timers(self, now: float, acts: list[_Action]) -> None:
        rec = self._rec
        if rec is not None and rec.deadline is not None and now >= rec.deadline:
            self._warn_commit_timed_out()
            timeout = TimeoutError("commit before revocation timed out")
            self._on_commit(rec.token, timeout, now, acts)
        if (
            self._release_deadline is not None
            and now >= self._release_deadline
            and self._release_token is not None
        ):
            self._on_commit(
                self._release_token, TimeoutError("commit before leaving timed out"), now, acts
            )
        if self._state in IN_GROUP and self._life.poll_expired(now):
            self._poll_expired(now, acts)
        expiry = self._session_expiry()
        if expiry is not None and now >= expiry:
            self._session_expired(acts, now)

    # ----------------------------------------------------------- subscription

    def _subscribe(self, event: SubscriptionChanged, now: float, acts: list[_Action]) -> None:
        sub = SubscribedTopics(tuple(sorted(event.topics)), event.pattern)
        changed = sub != self._subscription
        self._subscription = sub
        if self._state is _S.UNSUBSCRIBED:
            self._join(now, Trigger.SUBSCRIBE)
        elif self._state in IN_GROUP:
            # The new subscription goes out with the next heartbeat, sent at once.
            self._heartbeat_asap = self._heartbeat_asap or changed
        elif self._state is _S.PREPARE_LEAVING:
            self._life.rejoin_after_leave = True
        # FENCED and STALE keep it for their rejoin.

    def _unsubscribe(self, now: float, acts: list[_Action]) -> None:
        self._subscription = None
        if self._state in _HELD:
            self._start_leave(LeaveReason.UNSUBSCRIBE, now, acts)
        elif self._state in (_S.FENCED, _S.STALE):
            # Not in the group any more: nothing to release, no leave heartbeat.
            self._clear_assignment()
            self._lost_token = None
            self._go(Trigger.LEAVE)
            if not self._life.closing:
                acts.append(LeaveComplete())
        elif self._state is _S.UNSUBSCRIBED and not self._life.closing:
            if self._leave_seq is None:
                acts.append(LeaveComplete())
            else:
                self._life.leave_reason = self._life.leave_reason or LeaveReason.UNSUBSCRIBE
        # PREPARE_LEAVING: already leaving; its end reports LeaveComplete or Closed.

    def _join(self, now: float, trigger: Trigger) -> None:
        self._leave_for_good = False  # also when the repair's release ended in a fence
        self._go(trigger)
        self._epoch = JOIN_EPOCH
        self._session += 1
        self._sent = None
        self._current = None
        self._target = None
        self._acked_target_version = -1
        self._join_answered = False
        self._last_reported = frozenset()  # the join carries []
        if trigger is Trigger.SUBSCRIBE or self._life.last_poll is None:
            self._life.last_poll = now
        self._heartbeat_asap = True

    # ------------------------------------------------------------------- poll

    def _polled(self, now: float, acts: list[_Action]) -> None:
        if self._state is _S.RECONCILING and self._retry_on_poll and self._rec is None:
            self._retry_on_poll = False
            self._maybe_reconcile(now, acts)

    def _poll_expired(self, now: float, acts: list[_Action]) -> None:
        self._warn_poll_expired(self._cfg.max_poll_interval_ms)
        lost = self._names(self._still_owned_unreported())
        self._abort_reconciliation()
        self._stop_all(acts)
        self._clear_assignment()
        self._go(Trigger.POLL_EXPIRED)
        self._send_leave(now, acts)
        self._go(Trigger.STALE_LEAVE_SENT)
        self._life.stale_polled = False
        if lost:
            self._lost_token = self._next_token()
            self._stale_released = False
            acts.append(RunCallback(CallbackKind.LOST, self._lost_token, lost))
        else:
            self._stale_released = True

    def _session_expired(self, acts: list[_Action], now: float) -> None:
        # No successful heartbeat for a session timeout: the broker has removed
        # this member and may have given its partitions to others, so it can
        # no longer own them, whether or not it hears so. Stop fetching and
        # report them lost (never committed) at once, as if fenced; the rejoin
        # heartbeat goes out once the one still in flight ended.
        log.warning(
            "group %s member %s: no successful heartbeat within the session timeout "
            "(%d ms); treating the assignment as lost and rejoining",
            self._cfg.group_id,
            self._member_id,
            self._cfg.session_timeout_ms,
        )
        self._last_heartbeat_ok = None
        self._fence(now, acts)

    def _maybe_rejoin_stale(self, now: float, acts: list[_Action]) -> None:
        if self._state is _S.STALE and self._stale_released and self._life.stale_polled:
            if self._subscription is None:
                self._go(Trigger.LEAVE)
            else:
                self._join(now, Trigger.REJOIN)

    # -------------------------------------------------------------- heartbeat

    def _accept(self, seq: int, now: float, acts: list[_Action]) -> bool:
        """Whether ``seq`` is the heartbeat in flight (no longer in flight now).

        An outcome of the leave heartbeat ends the leave instead.
        """
        if seq == self._leave_seq:
            self._leave_seq = None
            self._leave_done(False, now, acts)
            return False
        if seq != self._in_flight:
            return False
        self._in_flight = None
        return True

    def _current_session(self) -> bool:
        # A response to a heartbeat sent before a fence or leave is of no use.
        return self._in_flight_session == self._session and self._state in _HEARTBEATING

    def _on_response(
        self, event: HeartbeatResponseReceived, now: float, acts: list[_Action]
    ) -> None:
        resp = event.response
        if event.seq == self._leave_seq and resp.error_code:
            log.info(
                "group %s member %s: leave heartbeat answered with %s",
                self._cfg.group_id,
                self._member_id,
                error_name(resp.error_code),
            )
        if not self._accept(event.seq, now, acts) or not self._current_session():
            return
        if self._state is _S.LEAVING_TO_REJOIN and resp.error_code == 0:
            # The backoff is not reset: a refusal of the rejoin that follows waits longer.
            self._held_member_left(now)
        elif resp.error_code == 0:
            self._on_success(resp, now, acts)
        else:
            self._on_error(resp.error_code, resp.error_message, now, acts)

    def _on_success(self, resp: HeartbeatResponse, now: float, acts: list[_Action]) -> None:
        self._retry.reset()
        if resp.heartbeat_interval_ms > 0:
            self._interval = resp.heartbeat_interval_ms / 1000.0
        sent_at = self._last_sent_at if self._last_sent_at is not None else now
        self._next_heartbeat_at = sent_at + self._interval
        if resp.member_epoch < 0:
            log.warning(
                "group %s member %s: ignoring a success response with epoch %d",
                self._cfg.group_id,
                self._member_id,
                resp.member_epoch,
            )
            return
        if resp.member_id:
            self._member_id = resp.member_id
        # The rejoin is accepted: a later refusal is a new one.
        self._held_left = False
        self._refusal = None
        # From when it was sent: the broker's session restarted no earlier.
        self._last_heartbeat_ok = sent_at
        epoch_before = self._epoch
        if resp.member_epoch != self._epoch:
            log.info(
                "group %s member %s: epoch %d -> %d",
                self._cfg.group_id,
                self._member_id,
                self._epoch,
                resp.member_epoch,
            )
        self._epoch = resp.member_epoch
        if self._state is _S.JOINING and self._epoch == JOIN_EPOCH:
            self._join_answered = True
        if self._state is _S.PREPARE_LEAVING:
            return  # releasing everything: a new target is of no use
        self._duty_on_heartbeat(resp, acts)
        moved = self._epoch > epoch_before
        if resp.assignment is not None:
            target = reconcile.to_id_partitions(resp.assignment)
            if target != self._target:
                self._target_version += 1
                self._target = target
                moved = True
        self._catch_up(moved, now)
        if (
            self._cfg.assignor_hook
            and self._target is not None
            and self._epoch > 0
            and self._epoch != self._last_hook_epoch
        ):
            self._last_hook_epoch = self._epoch
            acts.append(AssignorOnAssignment(self._epoch, self._target))
        if resp.assignment is not None:
            self._on_target(now, acts)
        self._request_unresolved(acts)

    def _catch_up(self, moved: bool, now: float) -> None:
        """Heartbeat every fifth of the interval for one interval after the group moved.

        A partition another member must revoke first reaches this member on its
        first heartbeat after that member's acknowledgement, and nothing in an
        answer says partitions are still on their way. At the interval's rhythm
        that costs up to a whole interval per step of a rebalance (a new
        member's partitions wait for the old owner's next heartbeat, then for
        the new member's). A member whose epoch just moved, or whose target just
        changed, is likely in such a step: answers a fifth of an interval apart
        pick the partitions up soon after they are released, and the owner
        learns of its revocation as soon. A quiet group sends nothing extra.
        """
        if not self._cfg.catch_up_heartbeats:
            return
        if moved:
            self._catch_up_until = now + self._interval
        if self._catch_up_until is None or now >= self._catch_up_until or self._epoch <= 0:
            return
        soon = now + self._interval / 5
        if self._next_heartbeat_at is None or soon < self._next_heartbeat_at:
            self._next_heartbeat_at = soon

    def _on_target(self, now: float, acts: list[_Action]) -> None:
        if self._target == self._current and self._owned == self._current and self._rec is None:
            # Same assignment: nothing to reconcile. An ACKNOWLEDGING member still sends its ack.
            if self._state is _S.RECONCILING:
                self._resume_fetching(frozenset(), acts)
                self._reach_target(acts)
            return
        if self._state is _S.RECONCILING and self._rec is not None:
            return  # superseded: picked up when the outstanding step completes
        self._go(Trigger.NEW_TARGET)
        self._maybe_reconcile(now, acts)

    def _on_error(self, code: int, message: str | None, now: float, acts: list[_Action]) -> None:
        reaction = reaction_for(code)
        name = error_name(code)
        log.info(
            "group %s member %s: heartbeat failed with %s (%s): %s",
            self._cfg.group_id,
            self._member_id,
            name,
            reaction.name,
            message,
        )
        self._sent = None  # after any error the next heartbeat is a full one
        self._next_heartbeat_at = now
        if self._state is _S.LEAVING_TO_REJOIN and self._held_leave_settled(code, now, acts):
            return
        if self._rejoin_refused(code):
            self._on_rejoin_refused(code, name, message, now, acts)
            return
        if reaction is Reaction.REDISCOVER:
            self._retry.reset()
            self._awaiting_coordinator = True
            acts.append(RediscoverCoordinator())
        elif reaction is Reaction.RETRY_WITH_BACKOFF:
            self._retry.failed(now)
        elif reaction is Reaction.REPORT_AND_RETRY:
            self._retry.failed(now)
            acts.append(ReportError(code, name, message))
        elif reaction is Reaction.FENCED:
            self._retry.reset()
            self._fence(now, acts)
        else:
            self._fatal(code, name, message, reaction is Reaction.FATAL_UNSUPPORTED_VERSION, acts)

    def _on_request_failed(self, event: RequestFailed, now: float, acts: list[_Action]) -> None:
        if self._duty_seq is not None and event.seq == self._duty_seq:
            # Asked again on a later heartbeat while the coordinator still wants it.
            self._abandon_duty("request failed")
            return
        if not self._accept(event.seq, now, acts):
            return
        self._sent = None
        self._next_heartbeat_at = now
        if not self._current_session():
            return
        if event.kind is FailureKind.UNSUPPORTED_VERSION:
            code = ErrorCode.UNSUPPORTED_VERSION.value
            self._fatal(code, error_name(code), event.detail or None, True, acts)
            return
        log.info(
            "group %s member %s: heartbeat failed (%s) %s",
            self._cfg.group_id,
            self._member_id,
            event.kind.value,
            event.detail,
        )
        self._retry.failed(now)

    def _needs_immediate_heartbeat(self) -> bool:
        if self._state in (_S.ACKNOWLEDGING, _S.LEAVING_TO_REJOIN):
            return True
        if self._heartbeat_asap or self._sent is None:
            return True
        return self._state is _S.JOINING and self._epoch == JOIN_EPOCH and not self._join_answered

    def _heartbeat_due_at(self) -> float | None:
        if (
            self._state not in _HEARTBEATING
            or self._in_flight is not None
            or self._awaiting_coordinator
            or self._fenced_leaving()
        ):
            return None
        backoff = self._retry.until if self._retry.until is not None else float("-inf")
        if self._needs_immediate_heartbeat() or self._next_heartbeat_at is None:
            return backoff if backoff != float("-inf") else None
        return max(backoff, self._next_heartbeat_at)

    def _pump(self, now: float, acts: list[_Action]) -> None:
        if (
            self._state not in _HEARTBEATING
            or self._in_flight is not None
            or self._awaiting_coordinator
            or self._fenced_leaving()
        ):
            return
        if self._retry.holds(now):
            return
        due = (
            self._needs_immediate_heartbeat()
            or self._next_heartbeat_at is None
            or now >= self._next_heartbeat_at
        )
        if not due:
            return
        request = self._build_request()
        self._in_flight = self._next_seq()
        self._in_flight_session = self._session
        self._in_flight_epoch = request.member_epoch
        self._sent_before_in_flight = self._heartbeats_sent
        self._heartbeats_sent += 1
        self._last_sent_at = now
        self._next_heartbeat_at = now + self._interval
        self._heartbeat_asap = False
        acts.append(SendHeartbeat(self._seq, request))
        if self._state is _S.ACKNOWLEDGING:
            # The ack is built: STABLE now, or back to the pending part of the target.
            if self._target == self._current:
                self._go(Trigger.ACK_SENT)
            else:
                self._go(Trigger.ACK_SENT_MORE_PENDING)
                self._maybe_reconcile(now, acts)

    def _build_request(self) -> HeartbeatRequest:
        if self._state is _S.LEAVING_TO_REJOIN:
            # Always -1, for a static member too: -2 would keep the held member
            # (and its partitions) in the group, and the rejoin refused again.
            return HeartbeatRequest(
                group_id=self._cfg.group_id,
                member_id=self._member_id,
                member_epoch=LEAVE_EPOCH,
                instance_id=self._cfg.instance_id,
            )
        # The broker requires every epoch-0 heartbeat to carry the join fields,
        # whatever the member's state (INVALID_REQUEST, fatal, otherwise).
        joining = self._epoch == JOIN_EPOCH
        request, self._sent = build_request(
            self._cfg,
            member_id=self._member_id,
            member_epoch=self._epoch,
            joining=joining,
            subscription=self._subscription,
            owned=frozenset() if joining else self._reported(),
            ack_version=self._ack_version,
            prev=self._sent,
        )
        if request.topic_partitions is not None:
            self._last_reported = request.topic_partitions
        return request

    # --------------------------------------------------------- reconciliation

    def _request_unresolved(self, acts: list[_Action]) -> None:
        # Asked on every heartbeat response while ids stay unresolved, so the
        # refresh is retried at the heartbeat interval and no faster.
        if self._target is None or self._target == self._current:
            return
        res = reconcile.resolve(self._target, self._metadata, self._assigned_names)
        if res.unresolved_topic_ids:
            acts.append(RequestMetadata(res.unresolved_topic_ids))

    def _resume_fetching(self, revoked: frozenset[TopicIdPartition], acts: list[_Action]) -> None:
        # Owned partitions paused for a revocation that no longer happens fetch again.
        should = self._owned - revoked - self._awaiting_assigned
        self._start(should - self._fetching, acts)

    def _start(self, partitions: frozenset[TopicIdPartition], acts: list[_Action]) -> None:
        if partitions:
            self._fetching = self._fetching | partitions
            self._unstarted = self._unstarted - partitions
            acts.append(StartFetching(self._names(partitions)))

    def _reported(self) -> frozenset[TopicIdPartition]:
        # What acks and full heartbeats tell the broker the member owns. The
        # broker hands a partition to another member as soon as a heartbeat
        # leaves it out, so this leaves out only what the member was asked to
        # give up and has given up: every partition still installed (a revoke
        # callback not yet completed included) and the whole latest target
        # (partitions whose topic id is not resolved yet, or whose assigned
        # callback is still to run, included). See docs/new-protocol.md.
        return self._owned | (self._target or frozenset())

    def _reach_target(self, acts: list[_Action]) -> None:
        # Target equals current. If the broker was last told about partitions
        # the member no longer claims (unresolved ones the target dropped), it
        # waits for their release: acknowledge instead of going STABLE silently.
        if self._current is not None and self._reported() != self._last_reported:
            self._complete(self._current, acts)
        else:
            self._go(Trigger.TARGET_REACHED)

    def _maybe_reconcile(self, now: float, acts: list[_Action]) -> None:
        if self._state is not _S.RECONCILING or self._rec is not None or self._target is None:
            return
        self._retry_on_poll = False
        res = reconcile.resolve(self._target, self._metadata, self._assigned_names)
        self._assigned_names.update(res.names)
        d = reconcile.diff(self._owned, res.resolved)
        added = d.added | (self._awaiting_assigned & res.resolved)
        self._resume_fetching(d.revoked, acts)
        if not d.revoked and not added and self._current is not None:
            # Nothing to do locally (at most unresolved topics differ).
            if self._target == self._current:
                self._reach_target(acts)
            elif (
                res.resolved != self._current or self._target_version != self._acked_target_version
            ):
                self._complete(res.resolved, acts)
            return
        log.info(
            "group %s member %s epoch %d reconciling: revoking %s, adding %s%s",
            self._cfg.group_id,
            self._member_id,
            self._epoch,
            sorted(self._names(d.revoked)),
            sorted(self._names(added)),
            f", {len(res.unresolved_topic_ids)} topic ids unresolved"
            if res.unresolved_topic_ids
            else "",
        )
        rec = _Reconciliation(
            target_version=self._target_version,
            resolved=res.resolved,
            revoked=d.revoked,
            added=added,
            step=Step.COMMIT,
            token=0,
        )
        self._rec = rec
        if d.revoked:
            stop = d.revoked & self._fetching
            self._fetching = self._fetching - d.revoked
            if stop:
                acts.append(StopFetching(self._names(stop)))
            # Partitions that never fetched (their assigned callback completed
            # after a newer target dropped them) have consumed nothing.
            consumed = d.revoked - self._unstarted
            if consumed and self._cfg.auto_commit and self._epoch > 0:
                rec.token = self._next_token()
                rec.deadline = self._life.rebalance_deadline(now)
                acts.append(
                    CommitOffsets(rec.token, self._names(consumed), self._epoch, rec.deadline)
                )
                return
        self._after_commit(rec, now, acts)

    def _superseded(self, rec: _Reconciliation) -> bool:
        return rec.target_version != self._target_version

    def _restart(self, now: float, acts: list[_Action]) -> None:
        self._rec = None
        if self._target == self._current and self._owned == self._current:
            self._resume_fetching(frozenset(), acts)
            self._reach_target(acts)
            return
        self._maybe_reconcile(now, acts)

    def _after_commit(self, rec: _Reconciliation, now: float, acts: list[_Action]) -> None:
        rec.deadline = None
        if self._superseded(rec):
            self._restart(now, acts)
            return
        if rec.revoked:
            acts.append(self._callback(rec, CallbackKind.REVOKED, self._names(rec.revoked)))
            return
        self._install(rec, now, acts)

    def _install(self, rec: _Reconciliation, now: float, acts: list[_Action]) -> None:
        self._owned = (self._owned - rec.revoked) | rec.added
        self._unstarted = (self._unstarted & self._owned) | (rec.added - self._fetching)
        self._awaiting_assigned = rec.added
        # Forget names of topics no longer assigned (the cache serves revocation only).
        keep = {tip.topic_id for tip in self._owned}
        self._assigned_names = {k: v for k, v in self._assigned_names.items() if k in keep}
        if rec.added or self._current is None:
            acts.append(self._callback(rec, CallbackKind.ASSIGNED, self._names(rec.added)))
            return
        self._after_assigned(rec, now, acts)

    def _after_assigned(self, rec: _Reconciliation, now: float, acts: list[_Action]) -> None:
        self._awaiting_assigned = frozenset()
        self._rec = None
        start = rec.added - self._fetching
        if self._superseded(rec):
            # A newer target arrived while the callback ran: only what it still
            # assigns starts; the rest never fetches and is revoked next (the
            # listener was told it was assigned), without a commit.
            start = start & (self._target or frozenset())
        self._start(start, acts)
        if self._superseded(rec):
            self._restart(now, acts)
            return
        self._complete(rec.resolved, acts)

    def _complete(self, resolved: frozenset[TopicIdPartition], acts: list[_Action]) -> None:
        self._current = resolved
        self._ack_version += 1
        self._acked_target_version = self._target_version
        self._go(Trigger.RECONCILED)

    def _on_callback(self, event: CallbackCompleted, now: float, acts: list[_Action]) -> None:
        if event.error is not None:
            acts.append(RaiseCallbackError(event.kind, event.error))
        rec = self._rec
        if rec is not None and event.token == rec.token and rec.step is not Step.COMMIT:
            if rec.step is Step.REVOKE:
                if event.error is not None:
                    # No ack; the broker fences us if this never succeeds. Retry on poll.
                    self._rec = None
                    self._retry_on_poll = True
                    return
                self._owned = self._owned - rec.revoked
                self._unstarted = self._unstarted & self._owned
                if self._superseded(rec):
                    self._restart(now, acts)
                else:
                    self._install(rec, now, acts)
            else:
                if event.error is not None:
                    self._rec = None
                    self._retry_on_poll = True
                    return
                self._after_assigned(rec, now, acts)
        elif event.token == self._lost_token:
            self._lost_token = None
            if self._state is _S.FENCED:
                self._join(now, Trigger.LOST_RELEASED)
            elif self._state is _S.STALE:
                self._stale_released = True
                self._maybe_rejoin_stale(now, acts)
        elif event.token == self._release_token and self._release_step is Step.LOST:
            self._end_fenced_leave(now, acts)
        elif event.token == self._release_token and self._release_step is not Step.COMMIT:
            self._release_token = None
            self._release_step = None
            self._finish_release(now, acts)

    def _on_commit(
        self, token: int, error: BaseException | None, now: float, acts: list[_Action]
    ) -> None:
        if error is not None:
            log.warning(
                "group %s member %s: commit before revocation failed (%s); revoking anyway",
                self._cfg.group_id,
                self._member_id,
                error,
            )
        rec = self._rec
        if rec is not None and rec.step is Step.COMMIT and token == rec.token:
            self._after_commit(rec, now, acts)
        elif self._release_step is Step.COMMIT and token == self._release_token:
            self._release_deadline = None
            self._release_revoke(acts)

    def _still_owned_unreported(self) -> frozenset[TopicIdPartition]:
        """What a lost callback reports now: the owned partitions not already revoked.

        A revoke callback handed to the runtime has told the application those
        partitions are gone (it may still be running); reporting them lost as
        well would break "callbacks are deltas". Call before aborting the
        reconciliation.
        """
        rec = self._rec
        if rec is not None and rec.step is Step.REVOKE:
            return self._owned - rec.revoked
        return self._owned

    def _abort_reconciliation(self) -> None:
        # Outstanding commit / callback outcomes are ignored from now on (token mismatch).
        self._rec = None
        self._retry_on_poll = False
        # Fenced, leaving, stale or fatal: the coordinator picks another member
        # to compute (its epoch no longer matches, or it is gone).
        self._abandon_duty("left the group proper")

    # ------------------------------------------------- client-side assignment

    def _duty_go(self, trigger: DutyTrigger) -> None:
        self._duty = DUTY.next(self._duty, trigger)

    def _abandon_duty(self, why: str) -> None:
        if self._duty is DutyState.IDLE:
            return
        log.info(
            "group %s member %s: abandoning the assignment computation (%s)",
            self._cfg.group_id,
            self._member_id,
            why,
        )
        self._duty_go(DutyTrigger.ABANDON)
        self._duty_seq = None
        self._duty_token = None
        self._prepared = None
        self._pending_install = None

    def _duty_on_heartbeat(self, resp: HeartbeatResponse, acts: list[_Action]) -> None:
        """A successful heartbeat response: start computing, or resend a stale install."""
        if self._state not in IN_GROUP or not self._cfg.client_assignors:
            return
        if self._duty is DutyState.INSTALL_STALE and self._pending_install is not None:
            # The draft: retry "when receiving its next heartbeat response with its
            # member epoch" -- the assignment computed stays valid for its group epoch.
            self._duty_go(DutyTrigger.RETRY)
            self._pending_install = dataclasses.replace(
                self._pending_install, member_epoch=self._epoch
            )
            self._duty_seq = self._next_seq()
            acts.append(SendInstallAssignment(self._duty_seq, self._pending_install))
            return
        if resp.should_compute_assignment and self._duty is DutyState.IDLE:
            self._duty_go(DutyTrigger.ASKED)
            self._duty_seq = self._next_seq()
            request = PrepareAssignmentRequest(self._cfg.group_id, self._member_id, self._epoch)
            acts.append(SendPrepareAssignment(self._duty_seq, request))

    def _on_prepared(self, event: PrepareAssignmentResponseReceived, acts: list[_Action]) -> None:
        if self._duty is not DutyState.PREPARING or event.seq != self._duty_seq:
            return  # a late or duplicated answer
        self._duty_seq = None
        resp = event.response
        if resp.error_code:
            # STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID (no longer the chosen one),
            # coordinator errors: the next heartbeat says whether to try again.
            self._abandon_duty(f"PrepareAssignment answered {error_name(resp.error_code)}")
            return
        self._duty_go(DutyTrigger.PREPARED)
        self._prepared = resp
        self._duty_token = self._next_token()
        acts.append(ComputeAssignment(self._duty_token, resp))

    def _on_computed(self, event: ClientAssignmentComputed, acts: list[_Action]) -> None:
        prepared = self._prepared
        if self._duty is not DutyState.COMPUTING or event.token != self._duty_token:
            return
        assert prepared is not None
        self._duty_token = None
        members: tuple[tuple[str, frozenset[TopicIdPartition]], ...] = ()
        error = 0
        if event.assignment is None:
            # The draft's Assignment#error: the coordinator keeps the current target.
            log.warning(
                "group %s member %s: client assignor %s could not assign: %s",
                self._cfg.group_id,
                self._member_id,
                prepared.assignor_name,
                event.error,
            )
            error = ASSIGNMENT_ERROR
        else:
            problem = check_client_assignment(prepared, event.assignment)
            if problem is not None:
                # Never install a broken assignment (two owners, lost partitions);
                # tell the application and let the coordinator keep its target.
                violation, detail = problem
                acts.append(ReportClientAssignorError(prepared.assignor_name, violation, detail))
                error = ASSIGNMENT_ERROR
            else:
                members = tuple(sorted(event.assignment.items()))
        self._duty_go(DutyTrigger.COMPUTED)
        self._pending_install = InstallAssignmentRequest(
            group_id=self._cfg.group_id,
            member_id=self._member_id,
            member_epoch=self._epoch,
            group_epoch=prepared.group_epoch,
            error=error,
            members=members,
        )
        self._duty_seq = self._next_seq()
        acts.append(SendInstallAssignment(self._duty_seq, self._pending_install))

    def _on_installed(self, event: InstallAssignmentResponseReceived) -> None:
        if self._duty is not DutyState.INSTALLING or event.seq != self._duty_seq:
            return
        self._duty_seq = None
        if event.error_code == ErrorCode.STALE_MEMBER_EPOCH:
            self._duty_go(DutyTrigger.STALE)
            return
        if event.error_code:
            self._abandon_duty(f"InstallAssignment answered {error_name(event.error_code)}")
            return
        self._duty_go(DutyTrigger.INSTALLED)
        self._prepared = None
        self._pending_install = None

    def _clear_assignment(self) -> None:
        self._owned = frozenset()
        self._current = None
        self._target = None
        self._fetching = frozenset()
        self._awaiting_assigned = frozenset()
        self._unstarted = frozenset()
        self._assigned_names = {}

    def _stop_all(self, acts: list[_Action]) -> None:
        if self._owned:
            acts.append(StopFetching(self._names(self._owned)))
        self._fetching = frozenset()

    # ------------------------------------------------------- refused rejoin

    def _rejoin_refused(self, code: int) -> bool:
        """Whether ``code`` refuses a join because the broker still holds this member id.

        A broker before KAFKA-19233 (Apache Kafka 4.0 / 4.1) checks a join's
        epoch 0 against the member it holds like any other epoch: it accepts it
        only when 0 is that member's previous epoch, and answers
        FENCED_MEMBER_EPOCH otherwise, again and again until the member's
        session times out. Every broker (through 4.4 at least) answers a static
        member's join UNRELEASED_INSTANCE_ID while it holds the instance id,
        even for the same member id; that refusal is about this member's own
        earlier incarnation only if a heartbeat went out before this one (else
        another process holds the instance id: fatal, as before).
        """
        if self._state is not _S.JOINING or self._in_flight_epoch != JOIN_EPOCH:
            return False
        if code == ErrorCode.FENCED_MEMBER_EPOCH:
            return True
        return (
            code == ErrorCode.UNRELEASED_INSTANCE_ID
            and self._cfg.instance_id is not None
            and self._sent_before_in_flight > 0
        )

    def _on_rejoin_refused(
        self, code: int, name: str, message: str | None, now: float, acts: list[_Action]
    ) -> None:
        if self._held_left:
            # Refused again after the held member left: the broker holds this
            # member again (its rejoin was accepted but the answer lost — the
            # simulator's seed 869), or its leave was answered without removing
            # it, or (static) another process took the instance id meanwhile.
            # The next leave tells them apart (FENCED_INSTANCE_ID for another
            # process: fatal, in _held_leave_settled); never a tight loop, it
            # waits for the growing backoff.
            self._retry.failed(now)
        else:
            self._retry.reset()
        if code not in self._warned_refusals:
            self._warned_refusals.add(code)
            why = (
                "the broker predates KAFKA-19233 (Apache Kafka 4.0 / 4.1) and still holds "
                "this member at a later epoch"
                if code == ErrorCode.FENCED_MEMBER_EPOCH
                else "the broker still holds this static member's instance id for it"
            )
            log.warning(
                "group %s member %s: rejoin at epoch 0 refused with %s: %s; leaving with "
                "epoch -1 so that its partitions are released at once, then rejoining",
                self._cfg.group_id,
                self._member_id,
                name,
                why,
            )
        self._refusal = (code, name, message)
        # A member asked to compute at epoch 0 (client-side mode) is out of the group now.
        self._abandon_duty("rejoin refused")
        self._session += 1
        self._go(Trigger.REJOIN_REFUSED)

    def _rejoin_requested(self, event: RejoinRequested, now: float, acts: list[_Action]) -> None:
        # A stalled assignment is never this member's to ask for: its heartbeats do.
        if not event.as_new or self._state is not _S.STABLE:
            return
        reason = event.reason
        if self._owned or self._target:
            log.warning(
                "group %s member %s: %s; releasing the assignment, leaving with epoch -1 "
                "and rejoining so that the coordinator computes a new assignment",
                self._cfg.group_id,
                self._member_id,
                reason,
            )
            self._leave_for_good = True
            self._life.rejoin_after_leave = True
            self._start_leave(LeaveReason.REPAIR, now, acts)
            return
        log.warning(
            "group %s member %s: %s; leaving with epoch -1 and rejoining so that the "
            "coordinator computes a new assignment",
            self._cfg.group_id,
            self._member_id,
            reason,
        )
        self._held_left = False
        self._refusal = None
        self._retry.reset()
        self._session += 1
        self._go(Trigger.REPAIR)

    def _held_leave_settled(self, code: int, now: float, acts: list[_Action]) -> bool:
        """The leave of LEAVING_TO_REJOIN answered ``code``; False: react as to any heartbeat."""
        if reaction_for(code) is Reaction.FENCED:
            # UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: the broker no longer holds it.
            self._held_member_left(now)
            return True
        refusal = self._refusal
        if (
            code == ErrorCode.FENCED_INSTANCE_ID
            and refusal is not None
            and refusal[0] == ErrorCode.UNRELEASED_INSTANCE_ID
        ):
            # Another member owns the instance id: the join's refusal was the real one.
            self._fatal(refusal[0], refusal[1], refusal[2], False, acts)
            return True
        return False

    def _held_member_left(self, now: float) -> None:
        log.info(
            "group %s member %s: the held member left; rejoining",
            self._cfg.group_id,
            self._member_id,
        )
        self._held_left = True
        self._join(now, Trigger.HELD_LEFT)

    # ------------------------------------------------------- fence and fatal

    def _fence(self, now: float, acts: list[_Action]) -> None:
        # Read before the reconciliation is aborted: partitions a revoke
        # callback already told the application about are not lost as well.
        unreported = self._still_owned_unreported()
        self._abort_reconciliation()
        self._session += 1
        if self._state is _S.PREPARE_LEAVING and self._release_step is Step.COMMIT and self._owned:
            # Fenced while the commit before the revoke callback ran: the
            # application has not been told its partitions are going, and now
            # they are lost (the commit's outcome is ignored from here). Report
            # them lost, and end the leave (without a leave heartbeat: the
            # broker dropped us) only once that callback ran, so a close does
            # not end before the application heard (issue 10).
            lost = self._names(self._owned)
            self._release_token = self._next_token()
            self._release_step = Step.LOST
            self._release_deadline = None
            # No epoch and nothing owned: the commit still pending is never sent.
            self._epoch = self._leave_epoch()
            self._clear_assignment()
            acts.append(RunCallback(CallbackKind.LOST, self._release_token, lost))
            return
        if self._state is _S.PREPARE_LEAVING:
            self._end_fenced_leave(now, acts)
            return
        lost = self._names(unreported)
        self._stop_all(acts)
        self._clear_assignment()
        self._epoch = JOIN_EPOCH
        self._go(Trigger.FENCED)
        if lost:
            self._lost_token = self._next_token()
            acts.append(RunCallback(CallbackKind.LOST, self._lost_token, lost))
        else:
            self._join(now, Trigger.LOST_RELEASED)

    def _end_fenced_leave(self, now: float, acts: list[_Action]) -> None:
        # Already releasing for a leave; the broker dropped us, so no leave heartbeat.
        self._release_token = None
        self._release_step = None
        self._release_deadline = None
        self._clear_assignment()
        self._epoch = self._leave_epoch()
        self._go(Trigger.FENCED)
        self._leave_done(False, now, acts)

    def _fenced_leaving(self) -> bool:
        """Fenced while leaving, waiting for the lost callback: no more heartbeats."""
        return self._state is _S.PREPARE_LEAVING and self._release_step is Step.LOST

    def _fatal(
        self, code: int, name: str, message: str | None, unsupported: bool, acts: list[_Action]
    ) -> None:
        prev = self._state
        lost = self._names(self._still_owned_unreported())
        self._abort_reconciliation()
        self._go(Trigger.FATAL_ERROR)
        log.error(
            "group %s member %s: fatal heartbeat error %s: %s",
            self._cfg.group_id,
            self._member_id,
            name,
            message,
        )
        if prev is not _S.PREPARE_LEAVING:
            self._stop_all(acts)
            if lost:
                acts.append(RunCallback(CallbackKind.LOST, self._next_token(), lost))
        self._clear_assignment()
        self._release_token = None
        self._release_step = None
        self._release_deadline = None
        acts.append(ReportFatalError(code, name, message, unsupported))
        if prev is _S.PREPARE_LEAVING:
            self._finish_leave_reason(timed_out=False, acts=acts)

    # ---------------------------------------------------------------- leaving

    def _leave_epoch(self) -> int:
        # A repair's leave is for good: -2 would keep a static member in the group.
        static = self._cfg.instance_id is not None and not self._leave_for_good
        return LEAVE_EPOCH_STATIC if static else LEAVE_EPOCH

    def _start_leave(self, reason: LeaveReason, now: float, acts: list[_Action]) -> None:
        self._abort_reconciliation()
        self._life.leave_reason = reason
        self._go(Trigger.LEAVE)
        owned = self._names(self._owned)
        if not owned:
            self._finish_release(now, acts)
            return
        acts.append(StopFetching(owned))
        self._fetching = frozenset()
        consumed = self._names(self._owned - self._unstarted)
        if self._epoch > 0 and self._cfg.auto_commit and consumed:
            self._release_token = self._next_token()
            self._release_step = Step.COMMIT
            self._release_deadline = self._life.rebalance_deadline(now)
            acts.append(
                CommitOffsets(self._release_token, consumed, self._epoch, self._release_deadline)
            )
        else:
            self._release_revoke(acts)

    def _release_revoke(self, acts: list[_Action]) -> None:
        owned = self._names(self._owned)
        kind = CallbackKind.REVOKED if self._epoch > 0 else CallbackKind.LOST
        self._release_token = self._next_token()
        self._release_step = Step.REVOKE
        acts.append(RunCallback(kind, self._release_token, owned))

    def _finish_release(self, now: float, acts: list[_Action]) -> None:
        self._clear_assignment()
        self._go(Trigger.RELEASED)
        self._send_leave(now, acts)
        self._go(Trigger.LEAVE_SENT)
        if self._leave_seq is None:
            self._leave_done(False, now, acts)

    def _send_leave(self, now: float, acts: list[_Action]) -> None:
        self._epoch = self._leave_epoch()
        self._session += 1
        self._sent = None
        self._leave_seq = None
        if self._awaiting_coordinator:
            log.info(
                "group %s member %s: coordinator unknown, leaving without a leave heartbeat",
                self._cfg.group_id,
                self._member_id,
            )
            return
        self._leave_seq = self._next_seq()
        request = HeartbeatRequest(
            group_id=self._cfg.group_id,
            member_id=self._member_id,
            member_epoch=self._epoch,
            instance_id=self._cfg.instance_id,
        )
        acts.append(SendHeartbeat(self._leave_seq, request, leave=True))

    def _leave_done(self, timed_out: bool, now: float, acts: list[_Action]) -> None:
        self._leave_for_good = False
        self._finish_leave_reason(timed_out, acts)
        if (
            not self.closed
            and self._state is _S.UNSUBSCRIBED
            and self._life.rejoin_after_leave
            and self._subscription is not None
        ):
            self._life.rejoin_after_leave = False
            self._join(now, Trigger.SUBSCRIBE)

    def _finish_leave_reason(self, timed_out: bool, acts: list[_Action]) -> None:
        reason = self._life.take_leave_reason()
        if self._life.closing:
            acts.append(self._life.finish_close(timed_out))
        elif reason is LeaveReason.UNSUBSCRIBE:
            acts.append(LeaveComplete())

    # ---------------------------------------------------------------- closing

    def _close(self, now: float, acts: list[_Action]) -> None:
        if self._state in _HELD:
            self._start_leave(LeaveReason.CLOSE, now, acts)
        elif self._state in (_S.FENCED, _S.STALE):
            self._lost_token = None
            self._clear_assignment()
            self._go(Trigger.LEAVE)
            self._finish_leave_reason(False, acts)
        elif self._state is _S.PREPARE_LEAVING:
            pass  # the leave in progress ends in Closed
        elif self._state is _S.UNSUBSCRIBED and self._leave_seq is not None:
            pass  # wait for the leave response
        else:
            self._finish_leave_reason(False, acts)

    def _close_timed_out(self, now: float, acts: list[_Action]) -> None:
        if self._fenced_leaving():
            # The lost callback did not run in time; the broker dropped us already.
            self._release_token = None
            self._release_step = None
            self._clear_assignment()
            self._go(Trigger.FENCED)
        elif self._state is _S.PREPARE_LEAVING:
            # Give up on the release; still tell the broker, best effort.
            self._release_token = None
            self._release_step = None
            self._release_deadline = None
            self._clear_assignment()
            self._go(Trigger.CLOSE_TIMEOUT)
            self._send_leave(now, acts)
            self._go(Trigger.LEAVE_SENT)
        self._leave_seq = None
        self._finish_leave_reason(True, acts)
