"""The share-group member (KIP-932): heartbeats, epochs, the assignment, leaving, fencing.

Feed :class:`ShareMember` its events with the time (:meth:`ShareMember.handle`)
and perform the actions it returns, as for the other two members. What makes
it simpler than the consumer-group member: a share member owns no partition
exclusively (each record is acquired by one member under a lock, per fetch),
so a new assignment takes effect in the step that brings it, with no
revocation, callback or commit first; and the broker computes every
assignment (there is no client assignor).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import ClassVar

from kgroup.error_codes import ErrorCode, error_name
from kgroup.membership.common.actions import (
    LeaveComplete,
    RediscoverCoordinator,
    ReportFatalError,
    StartFetching,
    StopFetching,
)
from kgroup.membership.common.events import (
    CallbackCompleted,
    FailureKind,
    RejoinRequested,
    RequestFailed,
    SubscriptionChanged,
)
from kgroup.membership.common.lifecycle import (
    LeaveReason,
    check_backoff,
)
from kgroup.membership.common.listener import MemberListener
from kgroup.membership.common.member import MemberBase
from kgroup.membership.consumer.actions import ReportError, RequestMetadata
from kgroup.membership.consumer.events import MetadataUpdated
from kgroup.membership.consumer.reconcile import to_id_partitions
from kgroup.membership.share.actions import (
    FlushAcknowledgements,
    SendShareHeartbeat,
    ShareHeartbeatRequest,
    ShareMemberAction,
)
from kgroup.membership.share.events import (
    AcknowledgementsFlushed,
    ShareHeartbeatResponse,
    ShareHeartbeatResponseReceived,
    ShareMemberEvent,
)
from kgroup.membership.share.reactions import ShareReaction, share_reaction_for
from kgroup.membership.share.states import IN_GROUP, MACHINE, ShareMemberState, ShareTrigger
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = ["LEAVE_EPOCH", "ShareMember", "ShareMemberConfig", "new_member_id"]

log = logging.getLogger("kgroup.membership.share")

LEAVE_EPOCH = -1
"""The epoch of a share member's leave heartbeat (share groups have no static members)."""

_S = ShareMemberState
_T = ShareTrigger
_Action = ShareMemberAction


@dataclass(frozen=True, slots=True)
class ShareMemberConfig:
    """What the share member needs to know (the share consumer's config, in part).

    ``max_poll_interval_ms``: poll must be called this often or the member
    leaves (and rejoins on the next poll), as every Kafka consumer does.
    ``heartbeat_interval_ms`` is used until the broker's first answer says its own.
    """

    group_id: str
    rack_id: str | None = None
    max_poll_interval_ms: int = 300_000
    heartbeat_interval_ms: int = 5_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ValueError("group_id must be a non-empty string")
        if self.rack_id == "":
            raise ValueError("rack_id must be None or a non-empty string")
        if self.max_poll_interval_ms <= 0 or self.heartbeat_interval_ms <= 0:
            raise ValueError("max_poll_interval_ms and heartbeat_interval_ms must be > 0")
        check_backoff(self.retry_backoff_ms, self.retry_backoff_max_ms)


@dataclass(frozen=True, slots=True)
class _Sent:
    """What the last heartbeat carried, so unchanged fields can go out null."""

    rack_id: str | None
    names: tuple[str, ...]


class ShareMember(MemberBase[ShareMemberState, ShareTrigger, ShareMemberEvent, _Action]):
    """The share-group member: a sans-IO machine, time passed in.

    ``member_id`` is the client's own (a share member generates it and keeps it
    for the consumer's life: :func:`new_member_id`).
    """

    _LOG: ClassVar[logging.Logger] = log
    _POSITION: ClassVar[str] = "epoch"
    _FATAL: ClassVar[ShareMemberState] = _S.FATAL
    _STALE: ClassVar[ShareMemberState] = _S.STALE
    _IN_GROUP: ClassVar[frozenset[ShareMemberState]] = IN_GROUP

    def __init__(
        self,
        config: ShareMemberConfig,
        *,
        member_id: str,
        random: Callable[[], float] | None = None,
        listener: MemberListener[ShareMemberState] | None = None,
    ) -> None:
        if not member_id:
            raise ValueError("a share member needs its own non-empty member id")
        super().__init__(config, MACHINE, member_id=member_id, random=random, listener=listener)
        self._cfg = config
        self._epoch = 0
        self._subscription: tuple[str, ...] | None = None
        self._target: frozenset[TopicIdPartition] = frozenset()
        self._applied: frozenset[TopicIdPartition] = frozenset()
        self._topic_names: dict[uuid.UUID, str] = {}
        self._requested_ids: frozenset[uuid.UUID] = frozenset()
        self._interval = config.heartbeat_interval_ms / 1000.0
        self._next_heartbeat_at: float | None = None
        self._last_sent_at: float | None = None
        self._sent: _Sent | None = None
        self._in_flight: int | None = None
        # Bumped by a fence or a leave: an answer to a heartbeat of an earlier
        # session is of no use.
        self._session = 0
        self._in_flight_session = 0
        self._join_answered = False
        self._heartbeat_asap = False
        self._leave_seq: int | None = None
        self._flush_token: int | None = None

    # ------------------------------------------------------------------ views

    @property
    def member_epoch(self) -> int:
        """The epoch the broker gave (0 while joining, -1 once left)."""
        return self._epoch

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions the member fetches from: the assignment, topics named."""
        return self._names(self._applied)

    @property
    def unresolved(self) -> frozenset[TopicIdPartition]:
        """Assigned partitions whose topic name is not known yet (not fetched meanwhile)."""
        return frozenset(p for p in self._target if p.topic_id not in self._topic_names)

    # ------------------------------------------------------------------ hooks

    def _position(self) -> int:
        return self._epoch

    def _deadlines(self) -> list[float | None]:
        return [self._heartbeat_due_at()]

    def _on_timers(self, now: float, acts: list[_Action]) -> None:
        if self._state in IN_GROUP and self._life.poll_expired(now):
            self._warn_poll_expired(self._cfg.max_poll_interval_ms)
            self._stop_all(acts)
            self._go(_T.POLL_EXPIRED)
            self._life.stale_polled = False
            self._send_leave(acts)
            self._go(_T.STALE_LEAVE_SENT)

    def _dispatch_protocol(self, event: ShareMemberEvent, now: float, acts: list[_Action]) -> None:
        match event:
            case ShareHeartbeatResponseReceived():
                self._on_response(event.seq, event.response, now, acts)
            case AcknowledgementsFlushed():
                if event.token == self._flush_token and self._state is _S.PREPARE_LEAVING:
                    self._flush_token = None
                    self._go(_T.FLUSHED)
                    self._leave(now, acts)
            case MetadataUpdated():
                self._topic_names.update(event.topic_names)
                if self._state is _S.STABLE:
                    self._apply(acts)

    def _subscribe(self, event: SubscriptionChanged, now: float, acts: list[_Action]) -> None:
        if event.pattern is not None:
            raise ValueError(
                "a share group subscribes to topic names only (KIP-932 has no regex "
                "subscription): pass the topics' names"
            )
        names = tuple(sorted(event.topics))
        changed = names != self._subscription
        self._subscription = names
        if self._state is _S.UNSUBSCRIBED:
            self._join(_T.SUBSCRIBE, now)
        elif self._state in IN_GROUP:
            # The new subscription goes out with the next heartbeat, sent at once.
            self._heartbeat_asap = self._heartbeat_asap or changed
        elif self._state in (_S.PREPARE_LEAVING, _S.LEAVING):
            self._life.rejoin_after_leave = True
        # STALE keeps it for its rejoin.

    def _unsubscribe(self, now: float, acts: list[_Action]) -> None:
        self._subscription = None
        if self._state in IN_GROUP:
            self._start_leave(LeaveReason.UNSUBSCRIBE, now, acts)
        elif self._state is _S.STALE:
            # Not in the group any more: no leave heartbeat.
            self._go(_T.LEAVE)
            if not self._life.closing:
                acts.append(LeaveComplete())
        elif self._state is _S.UNSUBSCRIBED and not self._life.closing:
            if self._leave_seq is None:
                acts.append(LeaveComplete())
            else:
                self._life.leave_reason = self._life.leave_reason or LeaveReason.UNSUBSCRIBE
        # PREPARE_LEAVING and LEAVING: already leaving; the end reports it.

    def _rejoin_requested(self, event: RejoinRequested, now: float, acts: list[_Action]) -> None:
        # A share group has no partitions left unowned by a stuck reconciliation:
        # every member fetches from every partition it is assigned, at once.
        log.debug("group %s: share member ignores a rejoin request (%s)", self._group_id, event)

    def _maybe_rejoin_stale(self, now: float, acts: list[_Action]) -> None:
        if self._state is _S.STALE and self._life.stale_polled and self._subscription:
            self._life.stale_polled = False
            self._join(_T.REJOIN, now)

    def _on_request_failed(self, event: RequestFailed, now: float, acts: list[_Action]) -> None:
        if event.seq == self._leave_seq:
            self._leave_seq = None
            self._leave_done(now, acts)
            return
        if event.seq != self._in_flight:
            return
        self._in_flight = None
        self._sent = None
        if self._in_flight_session != self._session or self._state not in IN_GROUP:
            return
        if event.kind is FailureKind.UNSUPPORTED_VERSION:
            code = ErrorCode.UNSUPPORTED_VERSION.value
            message = (
                "the broker does not offer ShareGroupHeartbeat: share groups need Apache "
                "Kafka 4.1 or later with the share.version feature enabled"
            )
            self._fatal(code, message, acts)
            return
        log.info(
            "group %s member %s: share heartbeat failed (%s) %s",
            self._group_id,
            self._member_id,
            event.kind.value,
            event.detail,
        )
        self._retry.failed(now)

    def _on_callback(self, event: CallbackCompleted, now: float, acts: list[_Action]) -> None:
        # A share member asks for no callback; an answer to none is ignored.
        return

    def _on_commit(
        self, token: int, error: BaseException | None, now: float, acts: list[_Action]
    ) -> None:
        return  # a share member commits no offsets (its acknowledgements are the runtime's)

    def _close(self, now: float, acts: list[_Action]) -> None:
        if self._state in IN_GROUP:
            self._start_leave(LeaveReason.CLOSE, now, acts)
        elif self._state is _S.STALE:
            self._go(_T.LEAVE)
            self._finish_leave_reason(acts)
        elif self._state is _S.PREPARE_LEAVING or self._leave_seq is not None:
            pass  # the leave under way ends in Closed
        else:
            self._finish_leave_reason(acts)

    def _close_timed_out(self, now: float, acts: list[_Action]) -> None:
        if self._state is _S.PREPARE_LEAVING:
            # Give up on the flush: the broker releases those records when their
            # locks expire. Still tell it we leave, best effort.
            self._flush_token = None
            self._go(_T.CLOSE_TIMEOUT)
            self._send_leave(acts)
            self._go(_T.LEAVE_SENT)
        self._leave_seq = None
        self._finish_leave_reason(acts, timed_out=True)

    # -------------------------------------------------------------- heartbeat

    def _heartbeat_due_at(self) -> float | None:
        if self._state not in IN_GROUP or self._in_flight is not None:
            return None
        if self._awaiting_coordinator:
            return None
        if self._retry.until is not None:
            if self._needs_immediate_heartbeat() or self._next_heartbeat_at is None:
                return self._retry.until
            return max(self._retry.until, self._next_heartbeat_at)
        if self._needs_immediate_heartbeat():
            return None  # sent by the pump of the step that made it due
        return self._next_heartbeat_at

    def _needs_immediate_heartbeat(self) -> bool:
        if self._heartbeat_asap or self._sent is None or self._next_heartbeat_at is None:
            return True
        return self._state is _S.JOINING and not self._join_answered

    def _pump(self, now: float, acts: list[_Action]) -> None:
        if self._state not in IN_GROUP or self._in_flight is not None:
            return
        if self._awaiting_coordinator or self._retry.holds(now):
            return
        if not self._needs_immediate_heartbeat() and (
            self._next_heartbeat_at is not None and now < self._next_heartbeat_at
        ):
            return
        request = self._build_request()
        self._in_flight = self._next_seq()
        self._in_flight_session = self._session
        self._last_sent_at = now
        self._next_heartbeat_at = now + self._interval
        self._heartbeat_asap = False
        acts.append(SendShareHeartbeat(self._in_flight, request))

    def _build_request(self) -> ShareHeartbeatRequest:
        names = self._subscription or ()
        rack: str | None = self._cfg.rack_id
        sent_names: tuple[str, ...] | None = names
        previous = self._sent
        if previous is not None and self._epoch > 0:
            rack = rack if rack != previous.rack_id else None
            sent_names = names if names != previous.names else None
        self._sent = _Sent(self._cfg.rack_id, names)
        return ShareHeartbeatRequest(
            group_id=self._group_id,
            member_id=self._member_id,
            member_epoch=self._epoch,
            rack_id=rack,
            subscribed_topic_names=sent_names,
        )

    def _on_response(
        self, seq: int, resp: ShareHeartbeatResponse, now: float, acts: list[_Action]
    ) -> None:
        if seq == self._leave_seq:
            self._leave_seq = None
            self._leave_done(now, acts)
            return
        if seq != self._in_flight:
            return
        self._in_flight = None
        if self._in_flight_session != self._session or self._state not in IN_GROUP:
            return
        if resp.error_code:
            self._on_error(resp.error_code, resp.error_message, now, acts)
            return
        self._retry.reset()
        if resp.heartbeat_interval_ms > 0:
            self._interval = resp.heartbeat_interval_ms / 1000.0
        sent_at = self._last_sent_at if self._last_sent_at is not None else now
        self._next_heartbeat_at = sent_at + self._interval
        if resp.member_epoch <= 0:
            log.warning(
                "group %s member %s: ignoring a share heartbeat success with epoch %d",
                self._group_id,
                self._member_id,
                resp.member_epoch,
            )
            return
        self._join_answered = True
        self._epoch = resp.member_epoch
        if self._state is _S.JOINING:
            self._go(_T.JOINED)
        if resp.assignment is not None:
            self._target = to_id_partitions(resp.assignment)
        self._apply(acts)

    def _on_error(self, code: int, message: str | None, now: float, acts: list[_Action]) -> None:
        reaction = share_reaction_for(code)
        name = error_name(code)
        log.info(
            "group %s member %s: share heartbeat failed with %s (%s): %s",
            self._group_id,
            self._member_id,
            name,
            reaction.name,
            message,
        )
        self._sent = None  # after any error the next heartbeat is a full one
        if reaction is ShareReaction.REDISCOVER:
            self._retry.reset()
            self._awaiting_coordinator = True
            acts.append(RediscoverCoordinator())
        elif reaction is ShareReaction.RETRY_WITH_BACKOFF:
            self._retry.failed(now)
        elif reaction is ShareReaction.REPORT_AND_RETRY:
            self._retry.failed(now)
            acts.append(ReportError(code, name, message))
        elif reaction is ShareReaction.FENCED:
            self._retry.reset()
            self._fence(now, acts)
        else:
            self._fatal(code, message, acts)

    # -------------------------------------------------------------- assignment

    def _names(self, partitions: Collection[TopicIdPartition]) -> frozenset[TopicPartition]:
        names = self._topic_names
        return frozenset(
            TopicPartition(names[p.topic_id], p.partition)
            for p in partitions
            if p.topic_id in names
        )

    def _apply(self, acts: list[_Action]) -> None:
        """Fetch from exactly the resolved part of the assignment; ask for unknown names."""
        resolved = frozenset(p for p in self._target if p.topic_id in self._topic_names)
        gone = self._applied - resolved
        new = resolved - self._applied
        if gone:
            acts.append(StopFetching(self._names(gone)))
        if new:
            acts.append(StartFetching(self._names(new)))
        self._applied = resolved
        missing = frozenset(p.topic_id for p in self._target) - self._topic_names.keys()
        if missing and not missing <= self._requested_ids:
            self._requested_ids |= missing
            acts.append(RequestMetadata(missing))

    def _stop_all(self, acts: list[_Action]) -> None:
        if self._applied:
            acts.append(StopFetching(self._names(self._applied)))
        self._applied = frozenset()
        self._target = frozenset()
        self._requested_ids = frozenset()

    # --------------------------------------------------------- join and leave

    def _join(self, trigger: ShareTrigger, now: float) -> None:
        if trigger is _T.SUBSCRIBE or self._life.last_poll is None:
            # The poll timer runs from the subscribe, as in the other members.
            self._life.last_poll = now
        self._session += 1
        self._epoch = 0
        self._sent = None
        self._join_answered = False
        self._next_heartbeat_at = None
        self._retry.reset()
        self._go(trigger)

    def _fence(self, now: float, acts: list[_Action]) -> None:
        log.warning(
            "group %s member %s: fenced at epoch %d; rejoining",
            self._group_id,
            self._member_id,
            self._epoch,
        )
        self._go(_T.FENCED)
        self._stop_all(acts)
        self._join(_T.RELEASED, now)

    def _fatal(self, code: int, message: str | None, acts: list[_Action]) -> None:
        self._stop_all(acts)
        acts.append(ReportFatalError(code, error_name(code), message))
        self._go(_T.FATAL_ERROR)
        if self._life.closing:
            self._finish_leave_reason(acts)

    def _start_leave(self, reason: LeaveReason, now: float, acts: list[_Action]) -> None:
        self._life.leave_reason = reason
        self._go(_T.LEAVE)
        had_records = self._epoch > 0 and bool(self._applied)
        self._stop_all(acts)
        if had_records:
            self._flush_token = self._next_token()
            acts.append(FlushAcknowledgements(self._flush_token))
            return
        self._go(_T.FLUSHED)
        self._leave(now, acts)

    def _leave(self, now: float, acts: list[_Action]) -> None:
        self._send_leave(acts)
        self._go(_T.LEAVE_SENT)
        if self._leave_seq is None:
            self._leave_done(now, acts)

    def _send_leave(self, acts: list[_Action]) -> None:
        # A join still in flight may have made the member one: tell the broker too.
        joined = self._epoch > 0 or self._in_flight is not None
        self._epoch = LEAVE_EPOCH
        self._session += 1
        self._sent = None
        self._leave_seq = None
        if self._awaiting_coordinator or not joined:
            # Not in the group as far as the broker knows (or it cannot be
            # reached): nothing to tell it.
            return
        self._leave_seq = self._next_seq()
        request = ShareHeartbeatRequest(
            group_id=self._group_id, member_id=self._member_id, member_epoch=LEAVE_EPOCH
        )
        acts.append(SendShareHeartbeat(self._leave_seq, request, leave=True))

    def _leave_done(self, now: float, acts: list[_Action]) -> None:
        self._finish_leave_reason(acts)
        if (
            not self.closed
            and self._state is _S.UNSUBSCRIBED
            and self._life.rejoin_after_leave
            and self._subscription
        ):
            self._life.rejoin_after_leave = False
            self._join(_T.SUBSCRIBE, now)

    def _finish_leave_reason(self, acts: list[_Action], *, timed_out: bool = False) -> None:
        reason = self._life.take_leave_reason()
        if self._life.closing:
            acts.append(self._life.finish_close(timed_out))
        elif reason is LeaveReason.UNSUBSCRIBE:
            acts.append(LeaveComplete())


def new_member_id() -> str:
    """A share member's own id: a random UUID, kept for the consumer's life."""
    return str(uuid.uuid4())
