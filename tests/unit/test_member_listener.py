"""A member tells its listener its first state and every state change; telemetry is one.

The members call the listener inside ``handle`` with the ``now`` they were
given; the telemetry recorder reports, after each step, where the step left
the member (one StateChanged per step, the rebalance start and end), typed
states in, the same event names out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kgroup.membership import (
    CallbackCompleted,
    ClassicMember,
    ClassicMemberConfig,
    ClassicState,
    CloseRequested,
    ConsumerMember,
    HeartbeatResponse,
    HeartbeatResponseReceived,
    MemberConfig,
    MemberState,
    RebalanceProtocol,
    RunCallback,
    SendHeartbeat,
    SubscriptionChanged,
    TimerTick,
)
from kgroup.membership.common.listener import NO_LISTENER, MemberListener
from kgroup.telemetry import events as ev
from kgroup.telemetry.emitter import TelemetryEmitter
from kgroup.telemetry.recorder import ConsumerTelemetry
from kgroup.telemetry.sinks import CallbackSink

FENCED_MEMBER_EPOCH = 110


@dataclass
class Log:
    """A listener that writes down what it is told."""

    calls: list[tuple[str, enum.Enum | None, enum.Enum, float]] = field(default_factory=list)

    def started(self, state: enum.Enum, now: float) -> None:
        self.calls.append(("started", None, state, now))

    def state_changed(self, old: enum.Enum, new: enum.Enum, now: float) -> None:
        self.calls.append(("changed", old, new, now))

    def check_chain(self, current: enum.Enum) -> None:
        """One start, then changes each from where the last left, ending at ``current``."""
        assert [c[0] for c in self.calls[:1]] == ["started"]
        assert all(c[0] == "changed" for c in self.calls[1:])
        for before, after in zip(self.calls, self.calls[1:], strict=False):
            assert after[1] is before[2]
            assert after[1] is not after[2]
        assert self.calls[-1][2] is current


def consumer_member(listener: MemberListener[MemberState] | None) -> ConsumerMember:
    return ConsumerMember(
        MemberConfig(group_id="g", member_id="m-1"), random=lambda: 0.5, listener=listener
    )


def classic_member(listener: MemberListener[ClassicState] | None) -> ClassicMember:
    return ClassicMember(
        ClassicMemberConfig(group_id="g"),
        {"range": {RebalanceProtocol.EAGER}},
        random=lambda: 0.5,
        listener=listener,
    )


def test_consumer_member_tells_its_first_state_and_each_change_with_the_event_time() -> None:
    log = Log()
    member = consumer_member(log)
    acts = member.handle(SubscriptionChanged(frozenset({"a"})), 1.5)
    assert log.calls == [
        ("started", None, MemberState.UNSUBSCRIBED, 1.5),
        ("changed", MemberState.UNSUBSCRIBED, MemberState.JOINING, 1.5),
    ]
    (send,) = [a for a in acts if isinstance(a, SendHeartbeat)]
    joined = HeartbeatResponse(member_id="m-1", member_epoch=1, assignment={})
    acts = member.handle(HeartbeatResponseReceived(send.seq, joined), 2.0)
    assert log.calls[2:]
    assert all(c[3] == 2.0 for c in log.calls[2:])
    log.check_chain(member.state)
    (callback,) = [a for a in acts if isinstance(a, RunCallback)]
    acts = member.handle(CallbackCompleted(callback.kind, callback.token), 2.5)
    log.check_chain(member.state)
    (send,) = [a for a in acts if isinstance(a, SendHeartbeat)]  # the acknowledgement
    acts = member.handle(HeartbeatResponseReceived(send.seq, joined), 3.0)
    assert member.state is MemberState.STABLE
    log.check_chain(member.state)
    acts = member.handle(TimerTick(), 10.0)
    (send,) = [a for a in acts if isinstance(a, SendHeartbeat)]
    fenced = HeartbeatResponse(error_code=FENCED_MEMBER_EPOCH)
    changes = len(log.calls)
    member.handle(HeartbeatResponseReceived(send.seq, fenced), 10.5)
    assert log.calls[changes] == ("changed", MemberState.STABLE, MemberState.FENCED, 10.5)
    log.check_chain(member.state)
    member.handle(CloseRequested(deadline=10.0), 3.0)
    log.check_chain(member.state)


def test_classic_member_tells_its_first_state_and_each_change() -> None:
    log = Log()
    member = classic_member(log)
    member.handle(TimerTick(), 0.5)
    assert log.calls == [("started", None, ClassicState.UNJOINED, 0.5)]
    member.handle(SubscriptionChanged(frozenset({"a"})), 1.0)
    assert log.calls[1][1] is ClassicState.UNJOINED
    assert member.state is not ClassicState.UNJOINED
    log.check_chain(member.state)
    member.handle(CloseRequested(deadline=5.0), 2.0)
    log.check_chain(member.state)
    assert member.state is ClassicState.CLOSED


def test_a_member_without_a_listener_behaves_the_same() -> None:
    told, untold = consumer_member(Log()), consumer_member(None)
    for member in (told, untold):
        member.handle(SubscriptionChanged(frozenset({"a"})), 1.0)
        member.handle(CloseRequested(deadline=3.0), 2.0)
    assert told.state is untold.state
    NO_LISTENER.started(MemberState.UNSUBSCRIBED, 0.0)  # the default does nothing
    NO_LISTENER.state_changed(MemberState.UNSUBSCRIBED, MemberState.JOINING, 0.0)


class _View:
    """The session as the recorder's step reads it (its state comes from the member)."""

    member_id = "m-1"
    generation_or_epoch = 0
    group_protocol = ev.TelemetryProtocol.CONSUMER


def _recorder(seen: list[ev.TelemetryEvent], clock: list[float]) -> ConsumerTelemetry:
    emitter = TelemetryEmitter(
        CallbackSink(seen.append),
        group="g",
        client_id="c",
        protocol=ev.TelemetryProtocol.CONSUMER,
        member_id="m-1",
    )
    return ConsumerTelemetry(emitter, monotonic=lambda: clock[0])


def test_the_recorder_reports_where_each_step_left_the_member() -> None:
    seen: list[ev.TelemetryEvent] = []
    clock = [100.0]
    telemetry = _recorder(seen, clock)
    member = consumer_member(telemetry)
    acts = member.handle(SubscriptionChanged(frozenset({"a"})), 0.0)
    telemetry.step(_View(), acts)
    assert [e.body for e in seen] == [
        ev.StateChanged(old_state="NEW", new_state="JOINING"),
        ev.RebalanceStarted(trigger="join", epoch=0),
    ]
    seen.clear()
    # Several changes within one step: one StateChanged, from where the last step left it.
    telemetry.state_changed(MemberState.JOINING, MemberState.RECONCILING, 1.0)
    telemetry.state_changed(MemberState.RECONCILING, MemberState.STABLE, 1.0)
    clock[0] = 102.5
    telemetry.step(_View(), [])
    assert [e.body for e in seen] == [
        ev.StateChanged(old_state="JOINING", new_state="STABLE"),
        ev.RebalanceEnded(epoch=0, duration_s=2.5, error=None),
    ]
    seen.clear()
    # A change undone within a step is no change.
    telemetry.state_changed(MemberState.STABLE, MemberState.RECONCILING, 2.0)
    telemetry.state_changed(MemberState.RECONCILING, MemberState.STABLE, 2.0)
    telemetry.step(_View(), [])
    assert seen == []


def test_the_recorder_names_the_trigger_from_typed_states() -> None:
    seen: list[ev.TelemetryEvent] = []
    telemetry = _recorder(seen, [0.0])
    telemetry.started(ClassicState.STABLE, 0.0)
    telemetry.step(_View(), [])
    seen.clear()
    telemetry.state_changed(ClassicState.STABLE, ClassicState.RECONCILING, 1.0)
    telemetry.step(_View(), [])
    assert ev.RebalanceStarted(trigger="assignment_changed", epoch=0) in [e.body for e in seen]
    seen.clear()
    telemetry.state_changed(ClassicState.RECONCILING, ClassicState.STALE, 2.0)
    telemetry.step(_View(), [])
    assert ev.RebalanceEnded(epoch=0, duration_s=0.0, error="stale") in [e.body for e in seen]
    seen.clear()
    telemetry.state_changed(ClassicState.STALE, ClassicState.JOINING, 3.0)
    telemetry.step(_View(), [])
    assert ev.RebalanceStarted(trigger="poll_timeout", epoch=0) in [e.body for e in seen]


def test_the_recorder_reports_nothing_before_a_member_handled_an_event() -> None:
    seen: list[ev.TelemetryEvent] = []
    telemetry = _recorder(seen, [0.0])
    telemetry.step(_View(), [])
    assert seen == []
