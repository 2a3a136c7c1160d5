"""What the runtime tells telemetry: one :class:`ConsumerTelemetry` per consumer.

The runtime calls it at a few points (each hook is one line there):

- the member itself, whose
  :class:`~kgroup.membership.common.listener.MemberListener` it is (the
  sessions hand it over): the member's states, typed, as they change;
- the driver, after every step of the member (:meth:`ConsumerTelemetry.step`)
  with the actions the step returned: state, epoch and membership changes,
  rebalance start and end, assigned / revoked / lost partitions;
- the driver's data-plane operations (:meth:`~ConsumerTelemetry.fetch_started`,
  :meth:`~ConsumerTelemetry.fetch_stopped`) and commits
  (:meth:`~ConsumerTelemetry.commit_done`);
- the session, for every event and own action of its member
  (:meth:`~ConsumerTelemetry.session_event`, :meth:`~ConsumerTelemetry.session_action`):
  heartbeat round trips, heartbeat errors, fencing;
- the front end: callback durations, records handed out.

It keeps the counters of ``consumer.metrics()`` whether telemetry events are
on or not, and emits events only when an emitter is given. Nothing here
raises into the runtime: an observer must never break the observed.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from kgroup import membership as m
from kgroup.error_codes import ErrorCode, Trait, codes_with
from kgroup.errors import broker_error
from kgroup.telemetry import events as ev
from kgroup.telemetry.emitter import TelemetryEmitter
from kgroup.telemetry.metrics import ConsumerMetrics, DataPlaneStatistics, Histogram
from kgroup.types import TopicPartition

if TYPE_CHECKING:
    from kgroup.config import ConsumerConfig

__all__ = ["ConsumerTelemetry", "SessionView", "open_telemetry"]

_log = logging.getLogger("kgroup.telemetry")

_MS = m.MemberState
_CS = m.ClassicState

# The states (either protocol's) in which a member is rebalancing.
_REBALANCING: frozenset[enum.Enum] = frozenset(
    {
        _MS.JOINING,
        _MS.RECONCILING,
        _MS.ACKNOWLEDGING,
        _MS.FENCED,
        _CS.JOINING,
        _CS.RECONCILING,
        _CS.PREPARING,
        _CS.AWAITING_ASSIGNOR,
        _CS.SYNCING,
    }
)
_STABLE: frozenset[enum.Enum] = frozenset({_MS.STABLE, _CS.STABLE})
_RECONCILING: frozenset[enum.Enum] = frozenset({_MS.RECONCILING, _CS.RECONCILING})
_LEAVING: frozenset[enum.Enum] = frozenset(
    {_MS.PREPARE_LEAVING, _MS.LEAVING, _MS.UNSUBSCRIBED, _CS.LEAVING, _CS.CLOSED, _CS.UNJOINED}
)
_OUTSIDE: frozenset[enum.Enum] = frozenset({_MS.UNSUBSCRIBED, _CS.UNJOINED})
"""Where a member joins from (or from nothing: no state seen yet)."""
_STALE: frozenset[enum.Enum] = frozenset({_MS.STALE, _CS.STALE})
_FATAL: frozenset[enum.Enum] = frozenset({_MS.FATAL, _CS.FATAL})
_LOSING: frozenset[enum.Enum] = frozenset({_MS.FENCED, *_STALE})

# Error codes with which a coordinator fences a member (either protocol).
_FENCING_CODES = codes_with(Trait.FENCED)
# Answers that are part of a normal join, not errors.
_NOT_ERRORS = codes_with(Trait.JOIN_STEP) | {ErrorCode.NONE}

_MAX_PENDING = 1000
"""Events held back while the member has no id (more are sent without one)."""

_CALLBACK_KINDS = {
    m.CallbackKind.ASSIGNED: ev.CallbackKind.ASSIGNED,
    m.CallbackKind.REVOKED: ev.CallbackKind.REVOKED,
    m.CallbackKind.LOST: ev.CallbackKind.LOST,
}


class SessionView(Protocol):
    """What :meth:`ConsumerTelemetry.step` reads of a runtime session.

    Not its member's state: the member tells that to the telemetry, its
    :class:`~kgroup.membership.common.listener.MemberListener`.
    """

    @property
    def member_id(self) -> str: ...

    @property
    def generation_or_epoch(self) -> int: ...

    @property
    def group_protocol(self) -> enum.Enum: ...


def _error_name(code: int) -> tuple[str, bool]:
    try:
        error = broker_error(code)
    except ValueError:
        return "NONE", True
    return error.name, error.retriable


def _partitions(partitions: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    return tuple(sorted(partitions))


class ConsumerTelemetry:
    """Counters for ``metrics()`` and, with an ``emitter``, telemetry events (see the module).

    The driver's hooks run on its event loop; :meth:`callback_done`,
    :meth:`records_handed_out` and :meth:`snapshot` may run on the
    application's thread: the counters are under a lock.
    """

    def __init__(
        self,
        emitter: TelemetryEmitter | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.emitter = emitter
        self._now = monotonic
        self._lock = threading.Lock()
        self._rebalances = 0
        self._rebalance_latency = Histogram()
        self._heartbeats = 0
        self._heartbeat_errors = 0
        self._heartbeat_rtt = Histogram()
        self._fenced = 0
        self._commits = 0
        self._commit_failures = 0
        self._commit_latency = Histogram()
        self._callback_latency = Histogram()
        self._records = 0
        # The member's state, as its listener hooks report it.
        self._member_state: enum.Enum | None = None
        # What the previous step saw.
        self._state: enum.Enum | None = None
        self._epoch = 0
        self._joined = False
        self._rebalance_since: float | None = None
        self._closing = False
        self._fenced_by: str | None = None
        self._stop_reason = ev.StopReason.REVOKED
        self._sent: dict[tuple[type, int], float] = {}
        self._pending: list[tuple[ev.EventBody, tuple[float, float]]] = []

    # ------------------------------------------------------------- emitting

    def _emit(self, body: ev.EventBody) -> None:
        emitter = self.emitter
        if emitter is None:
            return
        if not emitter.member_id and len(self._pending) < _MAX_PENDING:
            # A classic member has no id before its JoinGroup is answered; what
            # it did meanwhile (the join's rebalance start ...) is sent, with its
            # own time, once the id is known: a reader needs the id to place it.
            self._pending.append((body, emitter.stamp()))
            return
        emitter.emit(body)

    def _flush_pending(self) -> None:
        if self.emitter is not None:
            for body, at in self._pending:
                self.emitter.emit(body, at=at)
        self._pending.clear()

    # ------------------------------------------------------ member listener

    def started(self, state: enum.Enum, now: float) -> None:
        """The member handles its first event, in ``state`` (a new member: a protocol switch)."""
        self._member_state = state

    def state_changed(self, old: enum.Enum, new: enum.Enum, now: float) -> None:
        """The member moved from ``old`` to ``new``; the next :meth:`step` reports it.

        A step may move a member through several states; what the events
        show is where each step left it (as ``consumer.metrics()`` counts).
        """
        self._member_state = new

    # ---------------------------------------------------------- driver side

    def closing(self) -> None:
        """The application closes the consumer: partitions stop for that reason from now on."""
        self._closing = True

    def step(self, session: SessionView, actions: Sequence[object]) -> None:
        """The member handled an event; ``actions`` are the driver's, not yet performed."""
        try:
            self._step(session, actions)
        except Exception:  # an observer must never break the observed
            _log.warning("telemetry could not record a step", exc_info=True)

    def _step(self, session: SessionView, actions: Sequence[object]) -> None:
        state = self._member_state
        if state is None:
            return  # no member handled an event yet: there is no step to report
        emitter = self.emitter
        if emitter is not None:
            if session.member_id:
                emitter.member_id = session.member_id
                if self._pending:
                    self._flush_pending()
            elif state not in _LEAVING:
                # Rejoining without an id (a classic member told UNKNOWN_MEMBER_ID):
                # what follows belongs to the id it gets next. A member that left
                # keeps the id it left with.
                emitter.member_id = ""
            # group.protocol=auto is resolved before the member joins.
            emitter.protocol = ev.TelemetryProtocol(session.group_protocol.value)
        old_state = self._state
        old_epoch, epoch = self._epoch, session.generation_or_epoch
        now = self._now()
        if state is not old_state:
            self._state = state
            self._emit(
                ev.StateChanged(
                    old_state="NEW" if old_state is None else old_state.name, new_state=state.name
                )
            )
        if epoch != old_epoch:
            self._epoch = epoch
            self._emit(ev.EpochChanged(old_epoch=old_epoch, new_epoch=epoch))
        lost = state in _LOSING or any(
            isinstance(a, m.RunCallback) and a.kind is m.CallbackKind.LOST for a in actions
        )
        if lost:
            self._stop_reason = ev.StopReason.LOST
        elif self._closing or state in _LEAVING:
            self._stop_reason = ev.StopReason.CLOSED
        else:
            self._stop_reason = ev.StopReason.REVOKED
        if state is not old_state:
            self._rebalance_transition(old_state, state, epoch, now)
        if epoch > 0 and not self._joined:
            self._joined = True
            self._fenced_by = None
            self._emit(ev.MemberJoined(epoch=epoch))
        elif epoch <= 0 and self._joined and (state in _LEAVING or state in _LOSING or epoch < 0):
            self._joined = False
            self._emit(ev.MemberLeft(reason=self._leave_reason(state), epoch=old_epoch))
        for action in actions:
            if isinstance(action, m.RunCallback) and action.partitions:
                self._partitions_changed(action, epoch if epoch > 0 else old_epoch)

    def _leave_reason(self, state: enum.Enum) -> ev.LeaveReason:
        if state in _STALE:
            return ev.LeaveReason.POLL_TIMEOUT
        if state in _FATAL:
            return ev.LeaveReason.FATAL
        if state is _MS.FENCED or self._fenced_by is not None:
            return ev.LeaveReason.FENCED
        return ev.LeaveReason.CLOSED if self._closing else ev.LeaveReason.UNSUBSCRIBED

    def _rebalance_transition(
        self, old: enum.Enum | None, new: enum.Enum, epoch: int, now: float
    ) -> None:
        if new in _REBALANCING and self._rebalance_since is None:
            self._rebalance_since = now
            if new is _MS.FENCED:
                trigger = "fenced"
            elif old in _STALE:
                trigger = "poll_timeout"
            elif old is None or old in _OUTSIDE:
                trigger = "join"
            elif old in _STABLE and new in _RECONCILING:
                trigger = "assignment_changed"
            else:
                trigger = "rejoin"
            self._emit(ev.RebalanceStarted(trigger=trigger, epoch=epoch))
        elif new not in _REBALANCING and self._rebalance_since is not None:
            duration = now - self._rebalance_since
            self._rebalance_since = None
            error = None if new in _STABLE else new.name.lower()
            if error is None:
                with self._lock:
                    self._rebalances += 1
                    self._rebalance_latency.record(duration)
            self._emit(ev.RebalanceEnded(epoch=epoch, duration_s=duration, error=error))

    def _partitions_changed(self, action: m.RunCallback, epoch: int) -> None:
        partitions = _partitions(action.partitions)
        if action.kind is m.CallbackKind.ASSIGNED:
            self._emit(ev.PartitionsAssigned(partitions=partitions, epoch=epoch))
        elif action.kind is m.CallbackKind.REVOKED:
            self._emit(ev.PartitionsRevoked(partitions=partitions, epoch=epoch))
        else:
            self._emit(ev.PartitionsLost(partitions=partitions, epoch=epoch, error=self._fenced_by))

    def fetch_started(self, partitions: Iterable[TopicPartition]) -> None:
        """The data plane started fetching ``partitions``."""
        if self.emitter is not None:
            self._emit(ev.FetchStarted(partitions=_partitions(partitions), epoch=self._epoch))

    def fetch_stopped(self, partitions: Iterable[TopicPartition]) -> None:
        """The data plane stopped fetching ``partitions`` (the reason: the member's last step)."""
        if self.emitter is not None:
            self._emit(
                ev.FetchStopped(
                    partitions=_partitions(partitions), epoch=self._epoch, reason=self._stop_reason
                )
            )

    def commit_done(
        self,
        offsets: Mapping[TopicPartition, int],
        epoch: int,
        latency_s: float,
        error: BaseException | None,
    ) -> None:
        """An offset commit ended (``error`` None: it succeeded)."""
        with self._lock:
            if error is None:
                self._commits += 1
            else:
                self._commit_failures += 1
            self._commit_latency.record(latency_s)
        if self.emitter is not None:
            self._emit(
                ev.CommitCompleted(
                    offsets=tuple(
                        ev.CommittedOffset(tp.topic, tp.partition, offset)
                        for tp, offset in sorted(offsets.items())
                    ),
                    epoch=epoch,
                    latency_s=latency_s,
                    error=None if error is None else _describe(error),
                )
            )

    # --------------------------------------------------------- session side

    def session_action(self, action: object) -> None:
        """The session performs ``action`` (a request) for its member."""
        if isinstance(action, (m.SendHeartbeat, m.SendClassicHeartbeat)):
            self._sent[(type(action), action.seq)] = self._now()

    def session_event(self, event: object) -> None:
        """The session hands ``event`` to its member: responses, failures."""
        try:
            self._session_event(event)
        except Exception:
            _log.warning("telemetry could not record an event", exc_info=True)

    def _session_event(self, event: object) -> None:
        if isinstance(event, m.HeartbeatResponseReceived):
            self._heartbeat_answered(m.SendHeartbeat, event.seq, event.response.error_code)
        elif isinstance(event, m.ClassicHeartbeatResponseReceived):
            self._heartbeat_answered(m.SendClassicHeartbeat, event.seq, event.error_code)
        elif isinstance(event, (m.JoinGroupResponseReceived, m.SyncGroupResponseReceived)):
            if event.response.error_code not in _NOT_ERRORS:
                self._error_code(event.response.error_code)
        elif isinstance(event, m.RequestFailed):
            for kind in (m.SendHeartbeat, m.SendClassicHeartbeat):
                self._sent.pop((kind, event.seq), None)
            with self._lock:
                self._heartbeat_errors += 1
            self._emit(
                ev.HeartbeatFailed(
                    error=event.kind.name, error_code=None, retriable=True, epoch=self._epoch
                )
            )

    def _heartbeat_answered(self, kind: type, seq: int, code: int) -> None:
        sent = self._sent.pop((kind, seq), None)
        with self._lock:
            self._heartbeats += 1
            if sent is not None:
                self._heartbeat_rtt.record(self._now() - sent)
        if code not in _NOT_ERRORS:
            self._error_code(code)

    def _error_code(self, code: int) -> None:
        name, retriable = _error_name(code)
        with self._lock:
            self._heartbeat_errors += 1
            if code in _FENCING_CODES:
                self._fenced += 1
        self._emit(
            ev.HeartbeatFailed(error=name, error_code=code, retriable=retriable, epoch=self._epoch)
        )
        if code in _FENCING_CODES:
            self._fenced_by = name
            self._emit(ev.Fenced(error=name, error_code=code, epoch=self._epoch))

    # ------------------------------------------------------ front-end side

    def callback_done(
        self,
        kind: m.CallbackKind,
        partitions: Iterable[TopicPartition],
        duration_s: float,
        error: BaseException | None,
    ) -> None:
        """A rebalance listener method returned (or raised ``error``) after ``duration_s``."""
        with self._lock:
            self._callback_latency.record(duration_s)
        if self.emitter is not None:
            self._emit(
                ev.CallbackCompleted(
                    callback=_CALLBACK_KINDS[kind],
                    partitions=_partitions(partitions),
                    duration_s=duration_s,
                    error=None if error is None else type(error).__name__,
                )
            )

    def records_handed_out(self, count: int) -> None:
        """``count`` records were returned to the application."""
        with self._lock:
            self._records += count

    def snapshot(self, dataplane: DataPlaneStatistics | None) -> ConsumerMetrics:
        """The counters now, with the data plane's latest statistics (if it has any)."""
        with self._lock:
            return ConsumerMetrics(
                rebalances=self._rebalances,
                rebalance_latency=self._rebalance_latency.snapshot(),
                heartbeats=self._heartbeats,
                heartbeat_errors=self._heartbeat_errors,
                heartbeat_rtt=self._heartbeat_rtt.snapshot(),
                fenced=self._fenced,
                commits=self._commits,
                commit_failures=self._commit_failures,
                commit_latency=self._commit_latency.snapshot(),
                callback_latency=self._callback_latency.snapshot(),
                records=self._records,
                bytes=None if dataplane is None else dataplane.bytes,
                lag=MappingProxyType({}) if dataplane is None else dataplane.lag,
                telemetry=None if self.emitter is None else self.emitter.stats,
            )

    def close(self, timeout: float = 5.0) -> None:
        """Close the sink (the consumer closed), delivering what it can within ``timeout``."""
        if self.emitter is not None:
            self._flush_pending()  # a member that never got an id: its events, id-less
            self.emitter.close(timeout)


def _describe(error: BaseException) -> str:
    name = getattr(error, "name", None)
    return name if isinstance(name, str) and name.isupper() else type(error).__name__


def open_telemetry(config: ConsumerConfig) -> ConsumerTelemetry:
    """The consumer's :class:`ConsumerTelemetry`: emitting to the configured sink, if any.

    Raises:
        ConfigError: the sink cannot be opened (a file) or set up (Kafka producer settings).
    """
    settings = config.telemetry
    if settings is None:
        return ConsumerTelemetry()
    protocol = (
        ev.TelemetryProtocol.CLASSIC
        if config.group_protocol.value == "classic"
        else ev.TelemetryProtocol.CONSUMER
    )
    emitter = TelemetryEmitter(
        settings.open_sink(),
        group=config.group_id,
        client_id=config.client_id,
        protocol=protocol,
        instance_id=config.group_instance_id,
    )
    return ConsumerTelemetry(emitter)
