"""The skeleton both members share: handle -> timers -> dispatch -> pump.

:class:`MemberBase` is deliberately thin (as Java's AbstractMembershipManager):
it owns the order in which a member processes an event, the deadlines every
member has (close, poll timer), the shared events, the state changes through
the member's transition table, and the retry delay and lifecycle it composes.
Each protocol fills in small hooks: its own events, timers and requests.
"""

from __future__ import annotations

import abc
import enum
import logging
import random as _random
from collections.abc import Callable
from typing import ClassVar, Generic, TypeVar

from kgroup.membership.common.actions import RunCallback
from kgroup.membership.common.events import (
    CallbackCompleted,
    CallbackKind,
    CloseRequested,
    CommitCompleted,
    CoordinatorRediscovered,
    PollCalled,
    RejoinRequested,
    RequestFailed,
    SubscriptionChanged,
    TimerTick,
    Unsubscribe,
)
from kgroup.membership.common.lifecycle import Lifecycle, MemberSettings, Step, Waiting
from kgroup.membership.common.listener import NO_LISTENER, MemberListener
from kgroup.membership.common.retry import RetryDelay
from kgroup.membership.common.transitions import TransitionTable
from kgroup.types import Backoff, TopicPartition

__all__ = ["MemberBase"]

_St = TypeVar("_St", bound=enum.Enum)
_Tr = TypeVar("_Tr", bound=enum.Enum)
_Ev = TypeVar("_Ev")
_Ac = TypeVar("_Ac")

_STEP_OF = {
    CallbackKind.REVOKED: Step.REVOKE,
    CallbackKind.ASSIGNED: Step.ASSIGN,
    CallbackKind.LOST: Step.LOST,
}


class _Unset(enum.Enum):
    """No value worked out yet (None is a value: no deadline)."""

    UNSET = enum.auto()


_UNSET = _Unset.UNSET


class MemberBase(abc.ABC, Generic[_St, _Tr, _Ev, _Ac]):
    """What every member does the same way; ``_Ev`` / ``_Ac`` are its event and action unions.

    Per-protocol class attributes: ``_LOG`` (its logger), ``_POSITION`` (what
    its :meth:`_position` counts, for the log), ``_FATAL`` and ``_STALE`` (its
    states of those names) and ``_IN_GROUP`` (the states the poll timer runs in).

    ``random`` is the random source of the retry backoff
    (:meth:`kgroup.types.Backoff.delay`: floats in ``[0, 1)``; tests pass
    ``lambda: 0.5``, no jitter). ``listener`` is told the member's first
    state and every state change (:class:`~kgroup.membership.common.listener.MemberListener`;
    None: nobody is).
    """

    _LOG: ClassVar[logging.Logger]
    _POSITION: ClassVar[str]
    _FATAL: ClassVar[enum.Enum]
    _STALE: ClassVar[enum.Enum]
    _IN_GROUP: ClassVar[frozenset[enum.Enum]]

    def __init__(
        self,
        config: MemberSettings,
        transitions: TransitionTable[_St, _Tr],
        *,
        member_id: str,
        random: Callable[[], float] | None,
        listener: MemberListener[_St] | None = None,
    ) -> None:
        self._group_id = config.group_id
        self._member_id = member_id
        self._state = transitions.initial
        self._listener: MemberListener[_St] = NO_LISTENER if listener is None else listener
        # The time of the event being handled (None before the first one): a
        # transition tells the listener when it happened without every handler
        # passing ``now`` down to _go.
        self._now: float | None = None
        self._next_memo: float | _Unset | None = _UNSET
        self._transitions = transitions
        self._life = Lifecycle(config.max_poll_interval_ms)
        backoff = Backoff.from_ms(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._retry = RetryDelay(backoff, random or _random.random)
        self._awaiting_coordinator = False
        self._seq = 0
        self._token = 0

    # ------------------------------------------------------------------ views

    @property
    def state(self) -> _St:
        """The current state."""
        return self._state

    @property
    def member_id(self) -> str:
        """The member id ("" for a classic member before the first JoinGroup answer)."""
        return self._member_id

    @property
    def closed(self) -> bool:
        """True once a close finished; the member then ignores every event."""
        return self._life.closed

    # --------------------------------------------------------------- driving

    def handle(self, event: _Ev, now: float) -> list[_Ac]:
        """React to ``event`` at monotonic time ``now`` (seconds); the actions, in order.

        Events the current state has no use for are ignored (see the
        protocol's page in ``docs/``); after ``Closed``, every event is.
        """
        acts: list[_Ac] = []
        if self.closed:
            return acts
        if self._now is None:
            self._listener.started(self._state, now)
        self._now = now
        try:
            if self._life.close_deadline_passed(now):
                self._close_deadline_reached(now, acts)
            else:
                self._on_timers(now, acts)
            if not self.closed:
                self._dispatch(event, now, acts)
            if not self.closed:
                self._pump(now, acts)
        finally:
            # Only a step changes the member's timers (see next_deadline).
            self._next_memo = _UNSET
        return acts

    def poll_deadline(self) -> float | None:
        """When the poll timer (max.poll.interval.ms) expires while in the group, or None."""
        return self._life.poll_deadline() if self._state in self._IN_GROUP else None

    def next_deadline(self) -> float | None:
        """When to deliver the next ``TimerTick`` (monotonic seconds), or None."""
        memo = self._next_memo
        if not isinstance(memo, _Unset):
            # Nothing but handle() moves a timer, and a driver asks after every
            # step and before every wait: worked out once per step.
            return memo
        if self.closed:
            deadline = None
        else:
            life = self._life
            candidates = self._deadlines()
            candidates.append(life.close_deadline if life.closing else None)
            candidates.append(self.poll_deadline())
            present = [deadline for deadline in candidates if deadline is not None]
            deadline = min(present) if present else None
        self._next_memo = deadline
        return deadline

    def _dispatch(self, event: _Ev, now: float, acts: list[_Ac]) -> None:
        match event:
            case SubscriptionChanged():
                if not event.topics and event.pattern is None:
                    self._on_unsubscribe(now, acts)
                elif self._state is not self._FATAL and not self._life.closing:
                    self._subscribe(event, now, acts)
            case Unsubscribe():
                self._on_unsubscribe(now, acts)
            case RejoinRequested():
                if not self._life.closing:
                    self._rejoin_requested(event, now, acts)
            case PollCalled():
                self._life.last_poll = now if event.at is None else min(event.at, now)
                if self._state is self._STALE:
                    self._life.stale_polled = True
                    self._maybe_rejoin_stale(now, acts)
                else:
                    self._polled(now, acts)
            case RequestFailed():
                self._on_request_failed(event, now, acts)
            case CallbackCompleted():
                self._on_callback(event, now, acts)
            case CommitCompleted():
                self._on_commit(event.token, event.error, now, acts)
            case CloseRequested():
                if self._life.begin_close(event.deadline):
                    self._close(now, acts)
                    if not self.closed and now >= event.deadline:
                        self._close_deadline_reached(now, acts)
            case TimerTick():
                pass  # timers were processed before dispatch
            case CoordinatorRediscovered():
                self._on_coordinator_rediscovered(now)
            case _:
                self._dispatch_protocol(event, now, acts)

    def _on_unsubscribe(self, now: float, acts: list[_Ac]) -> None:
        if self._state is self._FATAL:
            return
        self._life.rejoin_after_leave = False
        self._unsubscribe(now, acts)

    def _go(self, trigger: _Tr) -> None:
        old = self._state
        new = self._transitions.next(old, trigger)
        if new is not old:
            self._LOG.info(
                "group %s member %s %s %d: %s -> %s (%s)",
                self._group_id,
                self._member_id or "-",
                self._POSITION,
                self._position(),
                self._state.name,
                new.name,
                trigger.value,
            )
        self._state = new
        if new is not old and self._now is not None:
            self._listener.state_changed(old, new, self._now)

    def _next_token(self) -> int:
        self._token += 1
        return self._token

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _callback(
        self, op: Waiting, kind: CallbackKind, partitions: frozenset[TopicPartition]
    ) -> RunCallback:
        """Make ``op`` wait for the ``kind`` callback on ``partitions``; returns the request."""
        op.step = _STEP_OF[kind]
        op.deadline = None
        op.token = self._next_token()
        return RunCallback(kind, op.token, partitions)

    def _close_deadline_reached(self, now: float, acts: list[_Ac]) -> None:
        self._LOG.warning(
            "group %s member %s: close deadline reached before the leave completed",
            self._group_id,
            self._member_id or "-",
        )
        self._close_timed_out(now, acts)

    def _warn_poll_expired(self, max_poll_interval_ms: int) -> None:
        self._LOG.warning(
            "group %s member %s: poll was not called within max.poll.interval.ms (%d ms); "
            "leaving the group, it rejoins on the next poll",
            self._group_id,
            self._member_id,
            max_poll_interval_ms,
        )

    def _warn_commit_timed_out(self) -> None:
        self._LOG.warning(
            "group %s member %s: commit before revocation did not finish within the "
            "rebalance timeout; revoking anyway",
            self._group_id,
            self._member_id,
        )

    # ------------------------------------------------------------------ hooks

    def _polled(self, now: float, acts: list[_Ac]) -> None:
        """A poll outside STALE (the poll timer is already reset)."""

    def _on_coordinator_rediscovered(self, now: float) -> None:
        self._awaiting_coordinator = False

    @abc.abstractmethod
    def _position(self) -> int:
        """The member epoch or generation id, for the log."""

    @abc.abstractmethod
    def _deadlines(self) -> list[float | None]:
        """The protocol's own deadlines (beyond close and poll timer); None for one not set."""

    @abc.abstractmethod
    def _on_timers(self, now: float, acts: list[_Ac]) -> None:
        """Act on the protocol's deadlines reached by ``now`` (the close deadline is not)."""

    @abc.abstractmethod
    def _dispatch_protocol(self, event: _Ev, now: float, acts: list[_Ac]) -> None:
        """Handle an event of the protocol's own (not one of the shared events)."""

    @abc.abstractmethod
    def _pump(self, now: float, acts: list[_Ac]) -> None:
        """Send whatever request the state calls for and the rules allow."""

    @abc.abstractmethod
    def _subscribe(self, event: SubscriptionChanged, now: float, acts: list[_Ac]) -> None:
        """A non-empty subscription, outside FATAL and closing."""

    @abc.abstractmethod
    def _unsubscribe(self, now: float, acts: list[_Ac]) -> None:
        """Unsubscribe outside FATAL (a pending rejoin after leaving is already cancelled)."""

    @abc.abstractmethod
    def _rejoin_requested(self, event: RejoinRequested, now: float, acts: list[_Ac]) -> None:
        """The runtime saw the group stuck: join again as the event says, if settled."""

    @abc.abstractmethod
    def _maybe_rejoin_stale(self, now: float, acts: list[_Ac]) -> None:
        """A STALE member was polled or released its partitions: rejoin when both are done."""

    @abc.abstractmethod
    def _on_request_failed(self, event: RequestFailed, now: float, acts: list[_Ac]) -> None:
        """A request got no response."""

    @abc.abstractmethod
    def _on_callback(self, event: CallbackCompleted, now: float, acts: list[_Ac]) -> None:
        """A rebalance callback returned or raised."""

    @abc.abstractmethod
    def _on_commit(
        self, token: int, error: BaseException | None, now: float, acts: list[_Ac]
    ) -> None:
        """A commit the member asked for finished (or timed out: ``error`` TimeoutError)."""

    @abc.abstractmethod
    def _close(self, now: float, acts: list[_Ac]) -> None:
        """A close began (the close deadline is set): release and leave, or finish at once."""

    @abc.abstractmethod
    def _close_timed_out(self, now: float, acts: list[_Ac]) -> None:
        """The close deadline passed: give up what is under way and report Closed."""
