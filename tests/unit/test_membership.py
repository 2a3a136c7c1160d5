"""The new-protocol member state machine: scenarios, the error table, the transition table."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kgroup.error_codes import ERROR_CODES, error_name
from kgroup.membership import (
    TRANSITIONS,
    Action,
    AssignorOnAssignment,
    CallbackCompleted,
    CallbackKind,
    Closed,
    CloseRequested,
    CommitCompleted,
    CommitOffsets,
    ConsumerMember,
    CoordinatorRediscovered,
    Event,
    FailureKind,
    HeartbeatFailed,
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatResponseReceived,
    IllegalTransitionError,
    LeaveComplete,
    MemberConfig,
    MemberState,
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
    Trigger,
    Unsubscribe,
    render_mermaid,
)
from kgroup.membership.consumer import reconcile
from kgroup.membership.consumer.reactions import Reaction, reaction_for
from kgroup.membership.consumer.states import (
    DIAGRAM_BEGIN,
    DIAGRAM_END,
    next_state,
    replace_diagram,
)
from kgroup.types import TopicIdPartition, TopicPartition

A = uuid.UUID(int=0xA)
B = uuid.UUID(int=0xB)
X = uuid.UUID(int=0xF)  # a topic whose name metadata does not know at first
NAMES = {A: "a", B: "b"}
MEMBER_ID = "4f1c0d2e-9a1b-4c3d-8e7f-000000000001"
S = MemberState
AnyAction = TypeVar("AnyAction")


def tp(spec: str) -> TopicPartition:
    topic, part = spec.split("-")
    return TopicPartition(topic, int(part))


def tps(*specs: str) -> frozenset[TopicPartition]:
    return frozenset(tp(s) for s in specs)


def tips(mapping: Mapping[uuid.UUID, Collection[int]]) -> frozenset[TopicIdPartition]:
    return frozenset(TopicIdPartition(t, p) for t, ps in mapping.items() for p in ps)


class Harness:
    """Drives a member with virtual time and remembers what it asked for."""

    def __init__(self, **config: Any) -> None:
        config.setdefault("max_poll_interval_ms", 60_000)
        # Most scenarios skip heartbeat answers across minutes of virtual time;
        # the session-timeout rule is tested where a test sets it.
        config.setdefault("session_timeout_ms", 3_600_000)
        # Scenarios count heartbeats on the interval's rhythm; the catch-up
        # heartbeats after the group moved are tested where a test sets them.
        config.setdefault("catch_up_heartbeats", False)
        self.random_calls = 0

        def random() -> float:
            self.random_calls += 1
            return 0.5  # Backoff.delay's random source: 0.5 is no jitter

        self.m = ConsumerMember(
            MemberConfig(group_id="g", member_id=MEMBER_ID, **config), random=random
        )
        self.now = 0.0
        self.in_flight: SendHeartbeat | None = None
        self.leave: SendHeartbeat | None = None
        self.sent: list[SendHeartbeat] = []
        self.callbacks: list[RunCallback] = []
        self.commits: list[CommitOffsets] = []

    def do(self, event: Event, at: float | None = None) -> list[Action]:
        if at is not None:
            self.now = at
        if (
            isinstance(event, HeartbeatResponseReceived | HeartbeatFailed)
            and self.in_flight is not None
            and event.seq == self.in_flight.seq
        ):
            self.in_flight = None
        acts = self.m.handle(event, self.now)
        for a in acts:
            if isinstance(a, SendHeartbeat):
                self.sent.append(a)
                if a.leave:
                    self.leave = a
                else:
                    assert self.in_flight is None, "two heartbeats in flight"
                    self.in_flight = a
            elif isinstance(a, RunCallback):
                self.callbacks.append(a)
            elif isinstance(a, CommitOffsets):
                self.commits.append(a)
        return acts

    def state(self) -> MemberState:
        # A call, not an attribute, so that mypy does not narrow it across events.
        return self.m.state

    # -- shorthands
    def respond(
        self,
        epoch: int = 1,
        assignment: Mapping[uuid.UUID, Collection[int]] | None = None,
        *,
        error: int = 0,
        interval_ms: int = 3000,
        at: float | None = None,
    ) -> list[Action]:
        hb = self.in_flight
        assert hb is not None, "no heartbeat in flight"
        self.in_flight = None
        resp = HeartbeatResponse(
            error_code=error,
            member_id=MEMBER_ID if not error else None,
            member_epoch=epoch,
            heartbeat_interval_ms=interval_ms,
            assignment=assignment,
        )
        return self.do(HeartbeatResponseReceived(hb.seq, resp), at)

    def fail(
        self, kind: FailureKind = FailureKind.TIMEOUT, at: float | None = None
    ) -> list[Action]:
        hb = self.in_flight
        assert hb is not None
        self.in_flight = None
        return self.do(HeartbeatFailed(hb.seq, kind), at)

    def callback(
        self, kind: CallbackKind, error: BaseException | None = None, at: float | None = None
    ) -> list[Action]:
        cb = next(c for c in reversed(self.callbacks) if c.kind is kind)
        return self.do(CallbackCompleted(kind, cb.token, error), at)

    def commit_done(self, error: BaseException | None = None) -> list[Action]:
        return self.do(CommitCompleted(self.commits[-1].token, error))

    def tick(self, at: float) -> list[Action]:
        return self.do(TimerTick(), at)

    # -- scenarios
    def subscribe(self, *topics: str) -> list[Action]:
        self.do(MetadataUpdated(NAMES))
        return self.do(SubscriptionChanged(frozenset(topics)))

    def stable(
        self, assignment: Mapping[uuid.UUID, Collection[int]], epoch: int = 1
    ) -> list[Action]:
        """Subscribe, join with ``assignment``, run the callback, ack: STABLE."""
        self.subscribe("a", "b")
        self.respond(epoch, assignment)
        acts = self.callback(CallbackKind.ASSIGNED)
        assert self.state() is S.STABLE
        self.respond(epoch, None)  # answer the ack
        return acts


def only(acts: Iterable[object], cls: type[AnyAction]) -> list[AnyAction]:
    return [a for a in acts if isinstance(a, cls)]


def heartbeats(acts: Iterable[object]) -> list[HeartbeatRequest]:
    return [a.request for a in only(acts, SendHeartbeat)]


# --------------------------------------------------------------------- joining


def test_fresh_member_is_unsubscribed_and_idle() -> None:
    h = Harness()
    assert h.state() is S.UNSUBSCRIBED
    assert h.m.member_id == MEMBER_ID
    assert h.m.member_epoch == 0
    assert h.m.next_deadline() is None
    assert h.do(PollCalled()) == []


def test_join_sends_a_full_heartbeat_at_once() -> None:
    h = Harness(instance_id="i-1", rack_id="r1", server_assignor="uniform")
    acts = h.subscribe("b", "a")
    assert h.state() is S.JOINING
    assert heartbeats(acts) == [
        HeartbeatRequest(
            group_id="g",
            member_id=MEMBER_ID,
            member_epoch=0,
            instance_id="i-1",
            rack_id="r1",
            rebalance_timeout_ms=60_000,
            subscribed_topic_names=("a", "b"),
            subscribed_topic_regex=None,
            server_assignor="uniform",
            topic_partitions=frozenset(),
        )
    ]


def test_first_join_with_empty_assignment_still_runs_assigned_callback() -> None:
    h = Harness()
    h.subscribe("a")
    acts = h.respond(1, {})
    assert acts == [RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, frozenset())]
    assert h.state() is S.RECONCILING
    acts = h.callback(CallbackKind.ASSIGNED)
    [ack] = heartbeats(acts)
    assert ack.member_epoch == 1
    assert ack.topic_partitions == frozenset()
    assert h.state() is S.STABLE
    assert only(acts, StartFetching) == []


def test_join_response_without_assignment_keeps_joining_on_the_interval() -> None:
    h = Harness()
    h.subscribe("a")
    acts = h.respond(1, None, at=0.5)
    assert acts == []
    assert h.state() is S.JOINING
    assert h.m.next_deadline() == pytest.approx(3.0)


# -------------------------------------------------------------- reconciliation


def test_reconciliation_runs_in_the_reference_order() -> None:
    h = Harness()
    h.stable({A: [0, 1]})
    h.tick(3.0)
    acts = h.respond(2, {A: [1], B: [0]})
    commit = h.commits[-1]
    assert acts == [
        StopFetching(tps("a-0")),
        CommitOffsets(commit.token, tps("a-0"), 2, commit.deadline),
    ]
    assert h.m.member_epoch == 2  # applied at once: the commit uses it
    assert h.state() is S.RECONCILING
    acts = h.commit_done()
    assert acts == [RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0"))]
    acts = h.callback(CallbackKind.REVOKED)
    assert acts == [RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, tps("b-0"))]
    assert h.m.assignment == tps("a-1", "b-0")  # installed before the assigned callback
    acts = h.callback(CallbackKind.ASSIGNED)
    assert acts[0] == StartFetching(tps("b-0"))
    [ack] = heartbeats(acts[1:])
    assert ack.topic_partitions == tips({A: [1], B: [0]})
    assert ack.member_epoch == 2
    assert h.state() is S.STABLE


def test_no_commit_without_auto_commit_and_no_revoke_callback_when_nothing_revoked() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0, 1]})
    h.tick(3.0)
    acts = h.respond(2, {A: [1]})
    assert acts == [
        StopFetching(tps("a-0")),
        RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0")),
    ]
    acts = h.callback(CallbackKind.REVOKED)
    # Nothing added and not the first assignment: no assigned callback, straight to the ack.
    [ack] = heartbeats(acts)
    assert ack.topic_partitions == tips({A: [1]})


@pytest.mark.parametrize("how", ["failure", "timeout"])
def test_a_failed_or_late_commit_is_logged_and_revocation_continues(how: str) -> None:
    h = Harness()
    h.stable({A: [0, 1]})
    h.tick(3.0)
    h.respond(2, {A: [1]})
    commit = h.commits[-1]
    if how == "failure":
        acts = h.commit_done(RuntimeError("boom"))
    else:
        assert commit.deadline == pytest.approx(3.0 + 60.0)  # the rebalance timeout
        h.do(PollCalled(), at=10.0)
        acts = h.tick(commit.deadline)
    assert only(acts, RunCallback) == [
        RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0"))
    ]
    # The late real answer changes nothing.
    assert h.do(CommitCompleted(commit.token)) == []


def test_newer_target_during_commit_supersedes_the_old_steps() -> None:
    h = Harness()
    h.stable({A: [0, 1]})
    h.tick(3.0)
    h.respond(2, {A: [1]})  # revoke a-0: stopped, commit pending
    h.tick(6.0)  # interval heartbeat while reconciling
    assert h.in_flight is not None
    assert h.respond(3, {A: [0, 1]}) == []  # a-0 given back; wait for the commit
    acts = h.commit_done()
    # The stale revoke callback never runs; a-0 resumes fetching; the target is reached.
    assert only(acts, RunCallback) == []
    assert acts[0] == StartFetching(tps("a-0"))
    assert h.state() is S.STABLE
    assert h.m.assignment == tps("a-0", "a-1")


def test_newer_target_during_revoke_callback_continues_from_the_owned_set() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0, 1]})
    h.tick(3.0)
    h.respond(2, {A: [1]})  # revoke callback for a-0 pending
    h.tick(6.0)
    h.respond(3, {A: [1], B: [0]})
    acts = h.callback(CallbackKind.REVOKED)
    # a-0 is gone (its callback completed); the new target only adds b-0.
    assert acts == [RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, tps("b-0"))]
    acts = h.callback(CallbackKind.ASSIGNED)
    assert acts[0] == StartFetching(tps("b-0"))
    [ack] = heartbeats(acts)
    assert ack.topic_partitions == tips({A: [1], B: [0]})


def test_newer_target_during_assigned_callback_revokes_what_it_no_longer_assigns() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0]})
    h.tick(3.0)
    h.respond(2, {A: [0], B: [0, 1]})  # assigned callback for b-0, b-1 pending
    h.tick(6.0)
    h.respond(3, {A: [0], B: [0]})
    acts = h.callback(CallbackKind.ASSIGNED)
    assert acts[:2] == [
        StartFetching(tps("b-0")),
        RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("b-1")),
    ]
    acts = h.callback(CallbackKind.REVOKED)
    [ack] = heartbeats(acts)
    assert ack.topic_partitions == tips({A: [0], B: [0]})


def test_target_returning_to_current_mid_reconciliation_ends_stable() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0]})
    h.tick(3.0)
    h.respond(2, {A: [0], B: [0]})
    h.tick(6.0)
    h.respond(3, {A: [0]})
    acts = h.callback(CallbackKind.ASSIGNED)
    # b-0 was installed and announced; the newer target takes it back.
    assert only(acts, StartFetching) == []
    assert only(acts, RunCallback)[0].kind is CallbackKind.REVOKED


def test_fence_aborts_reconciliation_and_its_results_are_never_applied() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0, 1]})
    h.tick(3.0)
    h.respond(2, {A: [1], B: [0]})  # revoke callback for a-0 pending
    h.tick(6.0)
    acts = h.respond(error=ERROR_CODES["FENCED_MEMBER_EPOCH"])
    lost = h.callbacks[-1]
    # Issue 10 item 6: callbacks are deltas. a-0 was already handed to the
    # revoke callback, so the lost callback reports only a-1 (it used to
    # report a-0 a second time).
    assert acts == [
        StopFetching(tps("a-0", "a-1")),
        RunCallback(CallbackKind.LOST, lost.token, tps("a-1")),
    ]
    assert h.state() is S.FENCED
    assert h.m.member_epoch == 0
    assert h.m.assignment == frozenset()
    # The aborted revoke callback finishes: nothing happens.
    assert h.callback(CallbackKind.REVOKED) == []
    assert h.state() is S.FENCED
    acts = h.callback(CallbackKind.LOST)
    assert h.state() is S.JOINING
    [join] = heartbeats(acts)
    assert (join.member_id, join.member_epoch, join.topic_partitions) == (MEMBER_ID, 0, frozenset())
    assert join.subscribed_topic_names == ("a", "b")


def test_failing_assigned_callback_surfaces_blocks_the_ack_and_retries_on_poll() -> None:
    h = Harness()
    h.subscribe("a")
    h.respond(1, {A: [0]})
    err = ValueError("user bug")
    acts = h.callback(CallbackKind.ASSIGNED, err)
    assert acts == [RaiseCallbackError(CallbackKind.ASSIGNED, err)]
    assert h.state() is S.RECONCILING
    assert h.in_flight is None
    acts = h.do(PollCalled())
    assert acts == [RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, tps("a-0"))]
    acts = h.callback(CallbackKind.ASSIGNED)
    assert acts[0] == StartFetching(tps("a-0"))
    assert heartbeats(acts)[0].topic_partitions == tips({A: [0]})


def test_failing_revoke_callback_keeps_partitions_stopped_and_retries_on_poll() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0, 1]})
    h.tick(3.0)
    h.respond(2, {A: [1]})
    err = RuntimeError("nope")
    assert h.callback(CallbackKind.REVOKED, err) == [RaiseCallbackError(CallbackKind.REVOKED, err)]
    assert h.m.assignment == tps("a-0", "a-1")
    acts = h.do(PollCalled())
    assert acts == [RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0"))]
    assert only(acts, StartFetching) == []


def test_unresolved_topic_ids_reconcile_the_known_part_then_the_rest() -> None:
    h = Harness()
    h.subscribe("a", "x")
    acts = h.respond(1, {A: [0], X: [0]})
    assert RequestMetadata(frozenset({X})) in acts
    assert only(acts, RunCallback) == [
        RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, tps("a-0"))
    ]
    acts = h.callback(CallbackKind.ASSIGNED)
    [ack] = heartbeats(acts)
    # x-0 is claimed (not yet installed) so that the broker does not hand it over.
    assert ack.topic_partitions == tips({A: [0], X: [0]})
    assert h.m.assignment == tps("a-0")
    assert h.state() is S.RECONCILING  # the rest waits for metadata
    h.respond(1, None)
    acts = h.do(MetadataUpdated({X: "x"}))
    assert acts == [RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, tps("x-0"))]
    acts = h.callback(CallbackKind.ASSIGNED)
    assert acts[0] == StartFetching(tps("x-0"))
    assert heartbeats(acts)[0].topic_partitions == tips({A: [0], X: [0]})
    assert h.state() is S.STABLE


def test_metadata_is_requested_again_on_each_response_while_unresolved() -> None:
    h = Harness()
    h.subscribe("x")
    h.respond(1, {X: [0]})
    h.callback(CallbackKind.ASSIGNED)
    assert RequestMetadata(frozenset({X})) in h.respond(1, None)


def test_revoking_a_deleted_topic_uses_the_local_name_cache() -> None:
    h = Harness(auto_commit=False)
    h.do(MetadataUpdated({X: "x"}))
    h.stable({X: [0]})
    h.m._metadata.clear()  # the topic was deleted and dropped from metadata
    h.tick(3.0)
    acts = h.respond(2, {})
    assert acts[0] == StopFetching(tps("x-0"))


def test_same_target_again_changes_nothing() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    assert h.respond(1, {A: [0]}) == []
    assert h.state() is S.STABLE


def test_success_with_negative_epoch_is_ignored() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    assert h.respond(-1, {B: [0]}) == []
    assert h.m.member_epoch == 1
    assert h.state() is S.STABLE
    assert h.m.target == tips({A: [0]})


def test_assignor_hook_fires_once_per_epoch() -> None:
    h = Harness(assignor_hook=True)
    h.subscribe("a")
    acts = h.respond(1, {A: [0]})
    assert acts[0] == AssignorOnAssignment(1, tips({A: [0]}))
    hooks = only(h.callback(CallbackKind.ASSIGNED) + h.respond(1, None), AssignorOnAssignment)
    assert hooks == []
    h.tick(3.0)
    assert only(h.respond(2, None), AssignorOnAssignment) == [
        AssignorOnAssignment(2, tips({A: [0]}))
    ]


# -------------------------------------------------------------------- heartbeats


def test_stable_heartbeats_elide_unchanged_fields() -> None:
    h = Harness(rack_id="r", server_assignor="range")
    h.stable({A: [0]})
    [hb] = heartbeats(h.tick(3.0))
    assert hb == HeartbeatRequest(group_id="g", member_id=MEMBER_ID, member_epoch=1)


def test_subscription_change_sends_only_the_change_at_once() -> None:
    h = Harness()
    h.stable({A: [0]})
    [hb] = heartbeats(h.do(SubscriptionChanged(frozenset({"a", "c"})), at=1.0))
    assert hb.subscribed_topic_names == ("a", "c")
    assert hb.subscribed_topic_regex is None
    assert hb.topic_partitions is None
    assert hb.rebalance_timeout_ms is None


def test_after_an_error_the_next_heartbeat_is_full() -> None:
    h = Harness(server_assignor="uniform")
    h.stable({A: [0]})
    h.tick(3.0)
    h.respond(error=ERROR_CODES["COORDINATOR_LOAD_IN_PROGRESS"], at=3.1)
    [hb] = heartbeats(h.tick(3.2))
    assert hb.subscribed_topic_names == ("a", "b")
    assert hb.server_assignor == "uniform"
    assert hb.rebalance_timeout_ms == 60_000
    assert hb.topic_partitions == tips({A: [0]})
    assert hb.subscribed_topic_regex == ""


def test_regex_subscription_and_switching_back_to_names() -> None:
    h = Harness()
    [join] = heartbeats(h.do(SubscriptionChanged(pattern="orders-.*")))
    assert join.subscribed_topic_regex == "orders-.*"
    assert join.subscribed_topic_names == ()
    h.respond(1, {})
    h.callback(CallbackKind.ASSIGNED)
    h.respond(1, None)
    [hb] = heartbeats(h.do(SubscriptionChanged(frozenset({"a"}))))
    assert (hb.subscribed_topic_names, hb.subscribed_topic_regex) == (("a",), "")
    h.respond(1, None)
    [hb] = heartbeats(h.do(SubscriptionChanged(pattern="b.*")))
    assert (hb.subscribed_topic_names, hb.subscribed_topic_regex) == ((), "b.*")


def test_only_one_heartbeat_in_flight() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    assert heartbeats(h.do(SubscriptionChanged(frozenset({"c"})))) == []
    assert heartbeats(h.tick(50.0)) == []
    [hb] = heartbeats(h.respond(1, None, at=50.0))  # the pending change goes out now
    assert hb.subscribed_topic_names == ("c",)


def test_interval_is_measured_from_the_send() -> None:
    h = Harness()
    h.subscribe("a")  # sent at 0.0
    h.respond(1, {}, interval_ms=2000, at=0.4)
    h.callback(CallbackKind.ASSIGNED, at=0.5)  # ack sent at 0.5
    h.respond(1, None, interval_ms=2000, at=0.9)
    assert h.m.next_deadline() == pytest.approx(2.5)
    assert heartbeats(h.tick(2.4)) == []
    assert len(heartbeats(h.tick(2.5))) == 1
    assert h.m.next_deadline() == pytest.approx(60.0)  # poll timer while in flight


def test_backoff_doubles_to_the_maximum_with_jitter() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    t = 3.0
    waits = []
    for _ in range(6):
        h.fail(at=t)
        due = h.m.next_deadline()
        assert due is not None
        waits.append(round(due - t, 6))
        assert heartbeats(h.tick(due - 0.001)) == []
        t = due
        assert len(heartbeats(h.tick(t))) == 1
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert h.random_calls == 6
    h.respond(1, None, at=t)  # success resets the backoff
    h.tick(t + 3.0)
    h.fail(at=t + 3.0)
    assert h.m.next_deadline() == pytest.approx(t + 3.1)


def test_jitter_scales_the_backoff() -> None:
    # random() == 0.0 is the lowest jitter factor, 0.8.
    m = ConsumerMember(MemberConfig(group_id="g", member_id=MEMBER_ID), random=lambda: 0.0)
    m.handle(SubscriptionChanged(frozenset({"a"})), 0.0)
    m.handle(HeartbeatFailed(1, FailureKind.DISCONNECTED), 1.0)
    assert m.next_deadline() == pytest.approx(1.08)


# ------------------------------------------------------------------ error table


def error_in_stable(code: int, **config: Any) -> tuple[Harness, list[Action]]:
    h = Harness(**config)
    h.stable({A: [0]})
    h.tick(3.0)
    return h, h.respond(error=code, at=3.5)


@pytest.mark.parametrize("name", ["NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"])
def test_coordinator_moved_rediscovers_and_retries_without_backoff(name: str) -> None:
    h, acts = error_in_stable(ERROR_CODES[name])
    assert acts == [RediscoverCoordinator()]
    assert h.state() is S.STABLE
    assert h.m.next_deadline() == pytest.approx(60.0)  # no heartbeat until rediscovered
    [hb] = heartbeats(h.do(CoordinatorRediscovered(), at=3.6))
    assert hb.topic_partitions == tips({A: [0]})  # full
    assert h.random_calls == 0


@pytest.mark.parametrize(
    "name", ["COORDINATOR_LOAD_IN_PROGRESS", "REQUEST_TIMED_OUT", "NETWORK_EXCEPTION"]
)
def test_retriable_codes_back_off_and_keep_state(name: str) -> None:
    h, acts = error_in_stable(ERROR_CODES[name])
    assert acts == []
    assert h.state() is S.STABLE
    assert h.m.next_deadline() == pytest.approx(3.6)


@pytest.mark.parametrize("kind", [FailureKind.TIMEOUT, FailureKind.DISCONNECTED])
def test_transport_failures_back_off_and_keep_state(kind: FailureKind) -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    assert h.fail(kind, at=3.5) == []
    assert h.state() is S.STABLE
    assert h.m.next_deadline() == pytest.approx(3.6)
    assert heartbeats(h.tick(3.6))[0].topic_partitions == tips({A: [0]})


@pytest.mark.parametrize("name", ["FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"])
def test_fencing_codes_lose_partitions_and_rejoin_with_the_same_id(name: str) -> None:
    h, acts = error_in_stable(ERROR_CODES[name])
    assert acts == [
        StopFetching(tps("a-0")),
        RunCallback(CallbackKind.LOST, h.callbacks[-1].token, tps("a-0")),
    ]
    assert h.state() is S.FENCED
    assert h.m.next_deadline() is None  # no heartbeats, no poll timer while fenced
    [join] = heartbeats(h.callback(CallbackKind.LOST))
    assert (join.member_id, join.member_epoch) == (MEMBER_ID, 0)


def test_fence_without_partitions_rejoins_at_once() -> None:
    h = Harness()
    h.subscribe("a")
    h.respond(1, {})
    h.callback(CallbackKind.ASSIGNED)
    h.tick(3.0)
    acts = h.respond(error=ERROR_CODES["UNKNOWN_MEMBER_ID"], at=3.1)
    [join] = heartbeats(acts)
    assert join.member_epoch == 0
    assert h.state() is S.JOINING


def test_topic_authorization_failure_is_reported_not_fatal() -> None:
    code = ERROR_CODES["TOPIC_AUTHORIZATION_FAILED"]
    h, acts = error_in_stable(code)
    assert acts == [ReportError(code, "TOPIC_AUTHORIZATION_FAILED", None)]
    assert h.state() is S.STABLE
    assert h.m.next_deadline() == pytest.approx(3.6)


FATAL_NAMES = [
    "GROUP_AUTHORIZATION_FAILED",
    "INVALID_REQUEST",
    "GROUP_MAX_SIZE_REACHED",
    "UNSUPPORTED_ASSIGNOR",
    "INVALID_REGULAR_EXPRESSION",
    "UNRELEASED_INSTANCE_ID",
    "FENCED_INSTANCE_ID",
    "GROUP_ID_NOT_FOUND",
    "UNKNOWN_SERVER_ERROR",
    "STALE_MEMBER_EPOCH",
]


@pytest.mark.parametrize("name", [*FATAL_NAMES, "UNSUPPORTED_VERSION", 9999])
def test_fatal_codes_lose_partitions_and_report(name: str | int) -> None:
    code = name if isinstance(name, int) else ERROR_CODES[name]
    h, acts = error_in_stable(code)
    expected_name = f"UNKNOWN_ERROR_{code}" if isinstance(name, int) else name
    assert acts == [
        StopFetching(tps("a-0")),
        RunCallback(CallbackKind.LOST, h.callbacks[-1].token, tps("a-0")),
        ReportFatalError(code, expected_name, None, name == "UNSUPPORTED_VERSION"),
    ]
    assert h.state() is S.FATAL
    assert h.m.next_deadline() is None
    for event in (PollCalled(), SubscriptionChanged(frozenset({"z"})), TimerTick(), Unsubscribe()):
        assert h.do(event, at=100.0) == []
    assert h.do(CloseRequested(200.0)) == [Closed(False)]


def test_unsupported_version_from_api_versions_is_the_fallback_marker() -> None:
    h = Harness()
    h.subscribe("a")
    acts = h.fail(FailureKind.UNSUPPORTED_VERSION)
    assert acts == [ReportFatalError(35, "UNSUPPORTED_VERSION", None, True)]


def test_fatal_while_leaving_runs_no_lost_callback() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0]})
    h.tick(3.0)
    h.do(Unsubscribe())  # revoke callback pending, heartbeat in flight
    acts = h.respond(error=ERROR_CODES["GROUP_AUTHORIZATION_FAILED"])
    assert only(acts, RunCallback) == []
    assert only(acts, ReportFatalError)
    assert LeaveComplete() in acts
    assert h.state() is S.FATAL


def test_every_code_in_the_table_has_a_reaction_and_a_name() -> None:
    for name, code in ERROR_CODES.items():
        assert error_name(code) == name
        if code:
            assert isinstance(reaction_for(code), Reaction)
    assert reaction_for(12345) is Reaction.FATAL
    with pytest.raises(ValueError, match="success"):
        reaction_for(0)


# ----------------------------------------------------- leaving, closing, staleness


def test_unsubscribe_commits_revokes_and_leaves_once() -> None:
    h = Harness()
    h.stable({A: [0]})
    acts = h.do(Unsubscribe(), at=1.0)
    commit = h.commits[-1]
    assert acts == [
        StopFetching(tps("a-0")),
        CommitOffsets(commit.token, tps("a-0"), 1, commit.deadline),
    ]
    assert h.state() is S.PREPARE_LEAVING
    assert h.commit_done() == [RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0"))]
    acts = h.callback(CallbackKind.REVOKED)
    assert acts == [SendHeartbeat(h.sent[-1].seq, HeartbeatRequest("g", MEMBER_ID, -1), leave=True)]
    assert h.state() is S.UNSUBSCRIBED
    assert h.m.assignment == frozenset()
    assert h.m.next_deadline() is None  # never retried
    assert h.do(HeartbeatFailed(h.sent[-1].seq, FailureKind.TIMEOUT)) == [LeaveComplete()]


def test_static_member_leaves_with_minus_two() -> None:
    h = Harness(instance_id="i-1", auto_commit=False)
    h.stable({A: [0]})
    h.do(Unsubscribe())
    [leave] = heartbeats(h.callback(CallbackKind.REVOKED))
    assert (leave.member_epoch, leave.instance_id) == (-2, "i-1")


def test_leave_is_sent_even_with_a_heartbeat_in_flight() -> None:
    h = Harness()
    h.stable({})
    h.tick(3.0)
    acts = h.do(Unsubscribe())
    assert [a.leave for a in only(acts, SendHeartbeat)] == [True]
    # The older heartbeat's answer is ignored; the leave's completes the unsubscribe.
    assert h.respond(1, {A: [0]}) == []
    assert h.do(
        HeartbeatResponseReceived(h.leave.seq if h.leave else 0, HeartbeatResponse(member_epoch=-1))
    ) == [LeaveComplete()]


def test_leaving_with_epoch_zero_runs_the_lost_callback() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    h.respond(0, None)  # a broker answering epoch 0: the member is not in the group
    assert h.m.member_epoch == 0
    acts = h.do(Unsubscribe())
    assert only(acts, RunCallback)[0].kind is CallbackKind.LOST
    assert only(acts, CommitOffsets) == []


def test_close_waits_for_the_leave_response() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0]})
    h.do(CloseRequested(deadline=30.0), at=1.0)
    assert h.state() is S.PREPARE_LEAVING
    h.callback(CallbackKind.REVOKED)
    assert h.leave is not None
    assert h.m.next_deadline() == pytest.approx(30.0)
    acts = h.do(HeartbeatResponseReceived(h.leave.seq, HeartbeatResponse(member_epoch=-1)), at=2.0)
    assert acts == [Closed(timed_out=False)]
    assert h.m.closed
    assert h.do(PollCalled()) == []
    assert h.m.next_deadline() is None


def test_close_times_out_waiting_for_the_revoke_callback() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0]})
    h.do(CloseRequested(deadline=5.0), at=1.0)
    acts = h.tick(5.0)
    assert [type(a) for a in acts] == [SendHeartbeat, Closed]
    assert acts[-1] == Closed(timed_out=True)
    assert h.state() is S.UNSUBSCRIBED


def test_close_times_out_waiting_for_the_leave_response() -> None:
    h = Harness()
    h.stable({})
    h.do(CloseRequested(deadline=5.0), at=1.0)
    assert h.tick(5.0) == [Closed(timed_out=True)]


@pytest.mark.parametrize("state", ["unsubscribed", "fatal", "stale", "fenced"])
def test_close_outside_the_group_closes_at_once(state: str) -> None:
    h = Harness()
    if state != "unsubscribed":
        h.stable({A: [0]})
        if state == "fatal":
            h.tick(3.0)
            h.respond(error=ERROR_CODES["INVALID_REQUEST"])
        elif state == "stale":
            h.tick(60.0)
        else:
            h.tick(3.0)
            h.respond(error=ERROR_CODES["UNKNOWN_MEMBER_ID"])
    assert h.do(CloseRequested(deadline=100.0), at=70.0) == [Closed(timed_out=False)]


def test_poll_timer_expiry_leaves_goes_stale_and_rejoins_on_poll() -> None:
    h = Harness(max_poll_interval_ms=10_000)
    h.stable({A: [0]})  # the poll timer started at subscribe (t=0)
    assert h.m.next_deadline() == pytest.approx(3.0)
    h.tick(3.0)
    h.respond(1, None, at=3.1)
    assert h.m.next_deadline() == pytest.approx(6.0)
    h.tick(6.0)
    h.respond(1, None, at=6.1)
    assert h.m.next_deadline() == pytest.approx(9.0)
    h.tick(9.0)
    acts = h.tick(10.0)
    lost = h.callbacks[-1]
    assert acts == [
        StopFetching(tps("a-0")),
        SendHeartbeat(
            h.leave.seq if h.leave else 0, HeartbeatRequest("g", MEMBER_ID, -1), leave=True
        ),
        RunCallback(CallbackKind.LOST, lost.token, tps("a-0")),
    ]
    assert h.state() is S.STALE
    assert h.respond(1, None) == []  # the interval heartbeat's answer is stale
    assert h.m.next_deadline() is None
    assert h.do(PollCalled(), at=20.0) == []  # still waiting for the lost callback
    acts = h.callback(CallbackKind.LOST)
    assert h.state() is S.JOINING
    [join] = heartbeats(acts)
    assert (join.member_id, join.member_epoch) == (MEMBER_ID, 0)


def test_polling_resets_the_poll_timer() -> None:
    h = Harness(max_poll_interval_ms=10_000)
    h.subscribe("a")
    h.do(PollCalled(), at=8.0)
    h.respond(1, None, at=8.0)
    assert h.m.next_deadline() == pytest.approx(18.0)


def test_a_poll_passed_on_later_counts_from_when_it_was_made() -> None:
    # The runtime notes a settled member's polls and passes the latest on just
    # before the poll timer expires, with the time it was made.
    h = Harness(max_poll_interval_ms=10_000)
    h.stable({A: [0]})  # the poll timer started at subscribe (t=0)
    assert h.m.poll_deadline() == pytest.approx(10.0)
    h.do(PollCalled(at=7.5), at=9.5)
    assert h.m.poll_deadline() == pytest.approx(17.5)
    # Never later than the moment it is handled.
    h.do(PollCalled(at=30.0), at=12.0)
    assert h.m.poll_deadline() == pytest.approx(22.0)
    assert h.state() is S.STABLE


def test_unsubscribe_while_stale_or_fenced_skips_the_leave() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(60.0)
    assert h.state() is S.STALE
    assert h.do(Unsubscribe()) == [LeaveComplete()]
    assert h.state() is S.UNSUBSCRIBED
    assert h.callback(CallbackKind.LOST) == []


def test_resubscribing_while_leaving_rejoins_after_the_leave() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0]})
    h.do(Unsubscribe())
    h.do(SubscriptionChanged(frozenset({"b"})))
    h.callback(CallbackKind.REVOKED)
    assert h.leave is not None
    acts = h.do(HeartbeatResponseReceived(h.leave.seq, HeartbeatResponse(member_epoch=-1)))
    assert acts[0] == LeaveComplete()
    [join] = heartbeats(acts)
    assert (join.member_epoch, join.subscribed_topic_names) == (0, ("b",))


def test_fence_while_preparing_to_leave_sends_no_leave() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0]})
    h.tick(3.0)
    h.do(Unsubscribe())
    acts = h.respond(error=ERROR_CODES["FENCED_MEMBER_EPOCH"])
    assert acts == [LeaveComplete()]
    assert h.state() is S.UNSUBSCRIBED
    assert h.leave is None


def test_empty_subscription_means_unsubscribe() -> None:
    h = Harness()
    h.stable({})
    acts = h.do(SubscriptionChanged())
    assert h.state() is S.UNSUBSCRIBED
    assert [a.leave for a in only(acts, SendHeartbeat)] == [True]


def test_leave_without_a_known_coordinator_completes_at_once() -> None:
    h = Harness()
    h.stable({})
    h.tick(3.0)
    h.respond(error=ERROR_CODES["NOT_COORDINATOR"])
    assert h.do(Unsubscribe()) == [LeaveComplete()]


# ------------------------------------------------------------------------ config


@pytest.mark.parametrize(
    "bad",
    [
        {"group_id": ""},
        {"member_id": ""},
        {"instance_id": ""},
        {"rack_id": ""},
        {"max_poll_interval_ms": 0},
        {"retry_backoff_ms": 2000},
    ],
)
def test_config_rejects_what_the_broker_would(bad: dict[str, Any]) -> None:
    args: dict[str, Any] = {"group_id": "g", "member_id": MEMBER_ID, **bad}
    with pytest.raises(ValueError, match="must|need"):
        MemberConfig(**args)


# --------------------------------------------------------------- reconcile module


def test_reconcile_arithmetic() -> None:
    target = tips({A: [0, 1], X: [2]})
    res = reconcile.resolve(target, {A: "a"}, {})
    assert res.resolved == tips({A: [0, 1]})
    assert res.unresolved_topic_ids == {X}
    assert reconcile.resolve(target, {}, {A: "a", X: "x"}).unresolved_topic_ids == frozenset()
    d = reconcile.diff(tips({A: [0, 3]}), res.resolved)
    assert (d.revoked, d.added, d.empty) == (tips({A: [3]}), tips({A: [1]}), False)
    assert reconcile.names_of(d.added, {A: "a"}) == tps("a-1")
    assert reconcile.to_id_partitions({A: [1]}) == tips({A: [1]})


def test_heartbeat_request_groups_partitions_by_topic_id() -> None:
    req = HeartbeatRequest("g", MEMBER_ID, 1, topic_partitions=tips({A: [1, 0], B: [2]}))
    assert req.topic_partitions_by_id() == {A: [0, 1], B: [2]}
    assert HeartbeatRequest("g", MEMBER_ID, 1).topic_partitions_by_id() is None


# ----------------------------------------------------------- the transition table


def test_illegal_transition_is_a_clear_internal_error() -> None:
    with pytest.raises(IllegalTransitionError, match="internal error.*STABLE.*REJOIN"):
        next_state(S.STABLE, Trigger.REJOIN)
    h = Harness()
    with pytest.raises(IllegalTransitionError):
        h.m._go(Trigger.ACK_SENT)


def test_every_state_and_trigger_is_in_the_table() -> None:
    states = {s for (s, _) in TRANSITIONS} | set(TRANSITIONS.values())
    assert states == set(MemberState)
    assert {t for (_, t) in TRANSITIONS} == set(Trigger)


def test_docs_diagram_matches_the_table() -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "new-protocol.md"
    text = doc.read_text()
    assert DIAGRAM_BEGIN in text
    assert DIAGRAM_END in text
    assert replace_diagram(text) == text, (
        "docs/new-protocol.md is out of date with kgroup.membership.consumer.states.TRANSITIONS; "
        "regenerate it with the command given in the doc"
    )


def test_rendered_diagram_has_one_line_per_edge() -> None:
    diagram = render_mermaid()
    for (src, trigger), dst in TRANSITIONS.items():
        line = next(
            ln
            for ln in diagram.splitlines()
            if ln.strip().startswith(f"{src.name} --> {dst.name}:")
        )
        assert trigger.value in line


def reach(state: MemberState) -> Harness:
    """A member sitting in ``state`` between two events."""
    h = Harness(auto_commit=False)
    if state is S.UNSUBSCRIBED:
        return h
    if state is S.JOINING:
        h.subscribe("a")
    elif state is S.RECONCILING:
        h.subscribe("a")
        h.respond(1, {A: [0]})
    elif state is S.ACKNOWLEDGING:
        h.subscribe("a")
        h.respond(1, {A: [0]})
        h.do(SubscriptionChanged(frozenset({"a", "b"})))  # puts a heartbeat in flight
        h.callback(CallbackKind.ASSIGNED)
    elif state is S.STABLE:
        h.stable({A: [0]})
    elif state is S.FENCED:
        h.stable({A: [0]})
        h.tick(3.0)
        h.respond(error=ERROR_CODES["FENCED_MEMBER_EPOCH"])
    elif state is S.LEAVING_TO_REJOIN:
        h.stable({A: [0]})
        h.tick(3.0)
        h.respond(error=ERROR_CODES["FENCED_MEMBER_EPOCH"])
        h.callback(CallbackKind.LOST)
        h.respond(error=ERROR_CODES["FENCED_MEMBER_EPOCH"])  # the rejoin, on a 4.0 broker
    elif state is S.PREPARE_LEAVING:
        h.stable({A: [0]})
        h.do(Unsubscribe())
    elif state is S.STALE:
        h.stable({A: [0]})
        h.tick(60.0)
    elif state is S.FATAL:
        h.stable({A: [0]})
        h.tick(3.0)
        h.respond(error=ERROR_CODES["INVALID_REQUEST"])
    assert h.state() is state
    return h


# LEAVING is left within the handle call that enters it (the leave is sent at once).
OBSERVABLE = [s for s in MemberState if s is not S.LEAVING]


def sample_events(h: Harness) -> list[Event]:
    seq = h.in_flight.seq if h.in_flight else 99
    token = h.callbacks[-1].token if h.callbacks else 99
    kind = h.callbacks[-1].kind if h.callbacks else CallbackKind.ASSIGNED
    return [
        SubscriptionChanged(frozenset({"b"})),
        SubscriptionChanged(pattern="a.*"),
        SubscriptionChanged(),
        Unsubscribe(),
        PollCalled(),
        HeartbeatResponseReceived(
            seq, HeartbeatResponse(member_epoch=5, assignment={A: [0], B: [1]})
        ),
        HeartbeatResponseReceived(seq, HeartbeatResponse(member_epoch=5)),
        HeartbeatResponseReceived(seq, HeartbeatResponse(error_code=110)),
        HeartbeatResponseReceived(seq, HeartbeatResponse(error_code=16)),
        HeartbeatResponseReceived(seq, HeartbeatResponse(error_code=42)),
        HeartbeatFailed(seq, FailureKind.TIMEOUT),
        MetadataUpdated({X: "x"}),
        CallbackCompleted(kind, token),
        CallbackCompleted(kind, token, RuntimeError("x")),
        CommitCompleted(token),
        CloseRequested(deadline=1000.0),
        TimerTick(),
        CoordinatorRediscovered(),
    ]


def allowed_moves(state: MemberState) -> set[MemberState]:
    """States reachable from ``state`` through table edges (one handle call may take several)."""
    seen = {state}
    frontier = [state]
    while frontier:
        s = frontier.pop()
        for (src, _), dst in TRANSITIONS.items():
            if src is s and dst not in seen:
                seen.add(dst)
                frontier.append(dst)
    return seen


@pytest.mark.parametrize("state", OBSERVABLE, ids=lambda s: s.name)
def test_every_state_takes_every_event_along_the_table(state: MemberState) -> None:
    for index in range(len(sample_events(reach(state)))):
        h = reach(state)
        event = sample_events(h)[index]
        h.do(event, at=h.now + 0.01)  # never an IllegalTransitionError
        assert h.state() in allowed_moves(state), (state, event, h.state())


IGNORED: dict[MemberState, list[type]] = {
    # Documented in docs/new-protocol.md ("Events a state ignores").
    S.UNSUBSCRIBED: [PollCalled, MetadataUpdated, CallbackCompleted, CommitCompleted, TimerTick],
    S.FATAL: [
        SubscriptionChanged,
        Unsubscribe,
        PollCalled,
        HeartbeatResponseReceived,
        HeartbeatFailed,
        MetadataUpdated,
        CallbackCompleted,
        CommitCompleted,
        TimerTick,
        CoordinatorRediscovered,
    ],
}


@pytest.mark.parametrize("state", list(IGNORED), ids=lambda s: s.name)
def test_ignored_events_do_nothing(state: MemberState) -> None:
    for index, sample in enumerate(sample_events(reach(state))):
        if type(sample) not in IGNORED[state]:
            continue
        if isinstance(sample, CallbackCompleted) and sample.error is not None:
            continue  # a callback's error is always surfaced
        h = reach(state)
        event = sample_events(h)[index]
        assert h.do(event, at=h.now + 0.01) == [], event
        assert h.state() is state


def test_stale_diagram_block_is_detected() -> None:
    stale = f"intro\n{DIAGRAM_BEGIN}\n```mermaid\nstateDiagram-v2\n```\n{DIAGRAM_END}\noutro\n"
    fresh = replace_diagram(stale)
    assert fresh != stale
    assert fresh.startswith("intro\n")
    assert fresh.endswith("outro\n")
    assert replace_diagram(fresh) == fresh


def test_acknowledgement_waits_for_the_heartbeat_in_flight() -> None:
    h = reach(S.ACKNOWLEDGING)
    assert h.m.next_deadline() == pytest.approx(60.0)  # only the poll timer
    [ack] = heartbeats(h.respond(1, None))
    assert ack.topic_partitions == tips({A: [0]})
    assert h.state() is S.STABLE


def test_new_target_while_acknowledging_reconciles_again() -> None:
    h = reach(S.ACKNOWLEDGING)
    acts = h.respond(2, {A: [0], B: [0]})
    assert h.state() is S.RECONCILING
    assert acts == [RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, tps("b-0"))]
    acts = h.callback(CallbackKind.ASSIGNED)
    assert heartbeats(acts)[0].topic_partitions == tips({A: [0], B: [0]})


def test_close_bounds_the_commit_before_leaving() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.do(PollCalled(), at=1.0)
    h.do(CloseRequested(deadline=100.0), at=1.0)
    commit = h.commits[-1]
    assert commit.deadline == pytest.approx(61.0)
    acts = h.tick(61.0)
    assert only(acts, RunCallback) == [
        RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0"))
    ]


def test_poll_timer_runs_while_joining() -> None:
    h = Harness(max_poll_interval_ms=5_000)
    h.subscribe("a")
    h.respond(1, None, at=0.1)
    acts = h.tick(5.0)
    assert [a.leave for a in only(acts, SendHeartbeat)] == [True]
    assert h.state() is S.STALE
    # Nothing was owned: the next poll rejoins at once.
    [join] = heartbeats(h.do(PollCalled(), at=6.0))
    assert join.member_epoch == 0


def test_an_error_answering_the_leave_still_completes_it() -> None:
    h = Harness()
    h.stable({})
    h.do(Unsubscribe())
    assert h.leave is not None
    resp = HeartbeatResponse(error_code=ERROR_CODES["UNKNOWN_MEMBER_ID"])
    assert h.do(HeartbeatResponseReceived(h.leave.seq, resp)) == [LeaveComplete()]
    assert h.state() is S.UNSUBSCRIBED


def test_target_given_back_after_a_failed_revoke_resumes_fetching() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0, 1]})
    h.tick(3.0)
    h.respond(2, {A: [1]})
    h.callback(CallbackKind.REVOKED, RuntimeError("nope"))
    h.tick(6.0)
    acts = h.respond(3, {A: [0, 1]})
    assert acts == [StartFetching(tps("a-0"))]
    assert h.state() is S.STABLE


def test_target_adding_only_unknown_topics_is_acknowledged_at_once() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    acts = h.respond(2, {A: [0], X: [0]})
    # Nothing to do locally: acknowledge the epoch, then wait for the name of X.
    assert only(acts, RunCallback) == []
    assert RequestMetadata(frozenset({X})) in acts
    [ack] = heartbeats(acts)  # ACKNOWLEDGING, and the ack goes out in the same call
    assert ack.topic_partitions == tips({A: [0], X: [0]})  # x-0 claimed, not installed
    assert h.m.assignment == tps("a-0")
    assert ack.member_epoch == 2
    assert h.state() is S.RECONCILING


# ------------------------------------------- hand-over race (newer target vs. pending callback)


def partitions_sent(h: Harness, since: int = 0) -> list[frozenset[TopicIdPartition]]:
    """TopicPartitions of the non-leave heartbeats sent from index ``since`` that carried them."""
    return [
        a.request.topic_partitions
        for a in h.sent[since:]
        if not a.leave and a.request.topic_partitions is not None
    ]


def test_partially_resolved_ack_keeps_claiming_the_unresolved_partitions() -> None:
    # The broker hands a partition over as soon as a heartbeat stops reporting it.
    # Acknowledging only the resolved part would release x-0 while this member
    # may still install it once its topic id resolves.
    h = Harness()
    h.subscribe("a", "x")
    h.respond(1, {A: [0], X: [0]})
    [ack] = heartbeats(h.callback(CallbackKind.ASSIGNED))
    assert ack.topic_partitions == tips({A: [0], X: [0]})
    assert h.m.assignment == tps("a-0")  # claimed, not installed
    assert h.state() is S.RECONCILING


def test_unresolved_partition_moved_away_is_released_at_once() -> None:
    h = Harness()
    h.subscribe("a", "x")
    h.respond(1, {A: [0], X: [0]})
    h.callback(CallbackKind.ASSIGNED)  # ack claims a-0 and x-0
    acts = h.respond(2, {A: [0]})  # x-0 goes to another member
    # Nothing to do locally, but the broker waits for the release: ack now.
    [ack] = heartbeats(acts)
    assert (ack.member_epoch, ack.topic_partitions) == (2, tips({A: [0]}))
    assert only(acts, RunCallback) == []
    assert only(acts, StartFetching) == []
    assert h.state() is S.STABLE
    # Metadata for x arriving late changes nothing.
    h.respond(2, None)
    assert h.do(MetadataUpdated({X: "x"})) == []


def test_hand_over_race_newer_target_while_the_assigned_callback_is_pending() -> None:
    # The real-broker race: x-0's id resolves late, its assigned callback is queued,
    # and meanwhile the broker moves x-0 to another member.
    h = Harness()  # auto-commit on: a revocation normally commits first
    h.subscribe("a", "x")
    h.respond(1, {A: [0], X: [0]})
    h.callback(CallbackKind.ASSIGNED)
    acts = h.do(MetadataUpdated({X: "x"}))
    assert acts == [RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, tps("x-0"))]
    newer_at = len(h.sent)
    assert h.respond(2, {A: [0]}) == []  # answer to the ack: the newer target drops x-0
    acts = h.callback(CallbackKind.ASSIGNED)
    # Computed against the newer target: x-0 never starts fetching, is never
    # committed (nothing was consumed), and is reported revoked to the listener.
    assert acts == [RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("x-0"))]
    assert h.commits == []
    acts = h.callback(CallbackKind.REVOKED)
    assert only(acts, StartFetching) == []
    assert h.m.assignment == tps("a-0")
    assert h.state() is S.STABLE
    # Never acknowledged as owned once the newer target was received.
    assert partitions_sent(h, newer_at) == [tips({A: [0]})]
    assert [(c.kind, c.partitions) for c in h.callbacks] == [
        (CallbackKind.ASSIGNED, tps("a-0")),
        (CallbackKind.ASSIGNED, tps("x-0")),
        (CallbackKind.REVOKED, tps("x-0")),
    ]


def test_newer_target_during_assigned_callback_commits_only_what_was_fetched() -> None:
    h = Harness()  # auto-commit
    h.stable({A: [0]})
    h.tick(3.0)
    h.respond(2, {A: [0], B: [0, 1]})  # assigned callback for b-0, b-1 pending
    h.tick(6.0)
    h.respond(3, {B: [0]})  # a-0 (fetching) and b-1 (never fetched) are revoked
    acts = h.callback(CallbackKind.ASSIGNED)
    commit = h.commits[-1]
    assert acts == [
        StartFetching(tps("b-0")),
        StopFetching(tps("a-0")),
        CommitOffsets(commit.token, tps("a-0"), 3, commit.deadline),
    ]
    acts = h.commit_done()
    assert acts == [RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0", "b-1"))]
    [ack] = heartbeats(h.callback(CallbackKind.REVOKED))
    assert ack.topic_partitions == tips({B: [0]})


def test_full_heartbeat_mid_reconciliation_claims_partitions_being_assigned() -> None:
    # After an error the next heartbeat is full. It must not drop b-0, whose
    # assigned callback is running: the broker would treat it as released.
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    h.respond(2, {A: [0], B: [0]})  # assigned callback for b-0 pending
    h.tick(6.0)
    h.fail(at=6.0)
    [full] = heartbeats(h.tick(6.1))
    assert full.topic_partitions == tips({A: [0], B: [0]})
    assert full.subscribed_topic_names == ("a", "b")


def test_newer_target_during_failed_assigned_callback_never_starts_the_dropped_partition() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    h.respond(2, {A: [0], B: [0]})
    h.callback(CallbackKind.ASSIGNED, RuntimeError("listener bug"))
    h.tick(6.0)
    acts = h.respond(3, {A: [0]})
    # b-0 was handed to the listener (which raised): revoked, never fetched or committed.
    assert acts == [RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("b-0"))]
    assert h.commits == []
    [ack] = heartbeats(h.callback(CallbackKind.REVOKED))
    assert ack.topic_partitions == tips({A: [0]})
    assert h.state() is S.STABLE


def test_target_dropping_then_restoring_a_partition_during_its_assigned_callback() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0]})
    h.tick(3.0)
    h.respond(2, {A: [0], B: [0]})
    h.tick(6.0)
    h.respond(3, {A: [0]})
    h.tick(9.0)
    h.respond(4, {A: [0], B: [0]})  # the latest target assigns b-0 again
    acts = h.callback(CallbackKind.ASSIGNED)
    assert acts[0] == StartFetching(tps("b-0"))
    assert only(acts, RunCallback) == []
    [ack] = heartbeats(acts)
    assert ack.topic_partitions == tips({A: [0], B: [0]})


# --------------------------------------------------------------------- lost ack


def test_lost_ack_is_recovered_by_the_next_full_heartbeat() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    h.respond(2, {A: [0], B: [0]})
    [ack] = heartbeats(h.callback(CallbackKind.ASSIGNED, at=3.5))
    assert ack.topic_partitions == tips({A: [0], B: [0]})
    assert h.state() is S.STABLE  # STABLE once the ack is built
    h.fail(at=4.0)  # the ack (or its answer) is lost
    [full] = heartbeats(h.tick(4.1))
    # Full again: owned partitions with the epoch the member knows (the broker
    # accepts the previous epoch when they are a subset of its assignment).
    assert full.member_epoch == 2
    assert full.topic_partitions == tips({A: [0], B: [0]})
    assert full.rebalance_timeout_ms == 60_000
    assert full.subscribed_topic_names == ("a", "b")
    # The broker had bumped the epoch while the answer was lost: it answers the
    # previous-epoch request with the new epoch and the full assignment.
    acts = h.respond(3, {A: [0], B: [0]}, at=4.2)
    assert acts == []
    assert h.m.member_epoch == 3
    assert h.state() is S.STABLE
    assert [c.kind for c in h.callbacks] == [CallbackKind.ASSIGNED, CallbackKind.ASSIGNED]
    # Back to eliding: the next interval heartbeat carries no partitions.
    [hb] = heartbeats(h.tick(7.1))
    assert hb == HeartbeatRequest(group_id="g", member_id=MEMBER_ID, member_epoch=3)


def test_lost_ack_answered_with_a_newer_assignment_reconciles_it() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0, 1]})
    h.tick(3.0)
    h.respond(2, {A: [1]})
    h.callback(CallbackKind.REVOKED)  # ack {a-1} sent
    h.fail(at=3.5)
    [full] = heartbeats(h.tick(3.6))
    assert (full.member_epoch, full.topic_partitions) == (2, tips({A: [1]}))
    acts = h.respond(3, {A: [1], B: [0]})
    assert acts == [RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, tps("b-0"))]
    assert h.m.member_epoch == 3


def test_lost_ack_refused_by_the_broker_fences_and_rejoins() -> None:
    # The broker refuses a previous epoch whose partitions are not a subset of
    # its assignment: FENCED_MEMBER_EPOCH, lose everything, rejoin.
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    h.respond(2, {A: [0], B: [0]})
    h.callback(CallbackKind.ASSIGNED)
    h.fail(at=3.5)
    h.tick(3.6)
    acts = h.respond(error=ERROR_CODES["FENCED_MEMBER_EPOCH"])
    assert acts == [
        StopFetching(tps("a-0", "b-0")),
        RunCallback(CallbackKind.LOST, h.callbacks[-1].token, tps("a-0", "b-0")),
    ]
    [join] = heartbeats(h.callback(CallbackKind.LOST))
    assert (join.member_epoch, join.topic_partitions) == (0, frozenset())


def test_lost_ack_of_a_partial_assignment_still_claims_the_unresolved_part() -> None:
    h = Harness()
    h.subscribe("a", "x")
    h.respond(1, {A: [0], X: [0]})
    h.callback(CallbackKind.ASSIGNED)
    h.fail(at=0.5)
    [full] = heartbeats(h.tick(0.6))
    assert full.topic_partitions == tips({A: [0], X: [0]})


# ------------------------------------------------------ aborted reconciliations


@pytest.mark.parametrize("how", ["unsubscribe", "close", "poll expiry", "fatal"])
def test_aborted_reconciliation_outcomes_are_ignored(how: str) -> None:
    h = Harness(max_poll_interval_ms=10_000)
    h.stable({A: [0]})
    h.tick(3.0)
    h.respond(2, {A: [0], B: [0]})  # assigned callback for b-0 pending
    assigned = h.callbacks[-1]
    if how == "unsubscribe":
        h.do(Unsubscribe(), at=3.5)
    elif how == "close":
        h.do(CloseRequested(deadline=30.0), at=3.5)
    elif how == "poll expiry":
        h.tick(10.0)
    else:
        h.tick(6.0)
        h.respond(error=ERROR_CODES["GROUP_AUTHORIZATION_FAILED"])
    if how in {"unsubscribe", "close"}:
        # Releasing: only a-0 fetched, so only a-0 is committed; b-0 never fetched.
        assert h.state() is S.PREPARE_LEAVING
        assert [c.partitions for c in h.commits] == [tps("a-0")]
    else:
        # Lost: everything installed (b-0 included) is reported lost, nothing committed.
        assert h.state() in {S.STALE, S.FATAL}
        assert h.m.assignment == frozenset()
        assert h.commits == []
        lost = h.callbacks[-1]
        assert (lost.kind, lost.partitions) == (CallbackKind.LOST, tps("a-0", "b-0"))
    # The aborted step's outcome arrives: nothing from the old reconciliation happens.
    acts = h.do(CallbackCompleted(CallbackKind.ASSIGNED, assigned.token))
    assert only(acts, StartFetching) == []
    assert only(acts, SendHeartbeat) == []
    assert only(acts, RunCallback) == []
    assert only(acts, CommitOffsets) == []


def test_aborted_commit_outcome_is_ignored() -> None:
    h = Harness()
    h.stable({A: [0, 1]})
    h.tick(3.0)
    h.respond(2, {A: [1]})  # commit before revoking a-0 pending
    commit = h.commits[-1]
    h.tick(6.0)
    h.respond(error=ERROR_CODES["UNKNOWN_MEMBER_ID"])
    assert h.state() is S.FENCED
    assert h.do(CommitCompleted(commit.token)) == []
    assert [c.kind for c in h.callbacks] == [CallbackKind.ASSIGNED, CallbackKind.LOST]


def test_two_newer_targets_during_one_step_use_the_latest() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0, 1]})
    h.tick(3.0)
    h.respond(2, {A: [1]})  # revoke callback for a-0 pending
    h.tick(6.0)
    h.respond(3, {A: [1], B: [0]})
    h.tick(9.0)
    h.respond(4, {A: [1], B: [1]})
    acts = h.callback(CallbackKind.REVOKED)
    assert acts == [RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, tps("b-1"))]
    acts = h.callback(CallbackKind.ASSIGNED)
    assert acts[0] == StartFetching(tps("b-1"))
    [ack] = heartbeats(acts)
    assert (ack.member_epoch, ack.topic_partitions) == (4, tips({A: [1], B: [1]}))


def test_poll_timer_expiry_during_a_revoke_callback_reports_only_the_rest_lost() -> None:
    h = Harness(max_poll_interval_ms=10_000, auto_commit=False)
    h.stable({A: [0, 1, 2, 3]})
    h.tick(3.0)
    acts = h.respond(2, {A: [0, 1, 2]})  # the slow revoke callback of a-3 is handed out
    revoked = h.callbacks[-1]
    assert revoked == RunCallback(CallbackKind.REVOKED, revoked.token, tps("a-3"))
    acts = h.tick(10.0)  # the poll timer expires while that callback runs
    lost = h.callbacks[-1]
    assert h.state() is S.STALE
    # Callbacks are deltas: a-3 was already reported revoked, so it is not lost too.
    assert only(acts, RunCallback) == [
        RunCallback(CallbackKind.LOST, lost.token, tps("a-0", "a-1", "a-2"))
    ]
    assert h.m.assignment == frozenset()
    # The revoke callback finishing later changes nothing; the lost one lets it rejoin.
    assert h.callback(CallbackKind.REVOKED) == []
    h.do(PollCalled(), at=11.0)
    acts = h.callback(CallbackKind.LOST)
    assert h.state() is S.JOINING


def test_no_successful_heartbeat_for_a_session_timeout_loses_the_assignment_and_rejoins() -> None:
    h = Harness(session_timeout_ms=10_000)
    h.stable({A: [0, 1]})  # last successful heartbeat sent at t=0
    h.tick(3.0)  # a heartbeat goes out and is never answered
    assert h.in_flight is not None
    assert h.m.next_deadline() == pytest.approx(10.0)
    assert h.tick(9.9) == []
    acts = h.tick(10.0)
    lost = h.callbacks[-1]
    # It stops fetching and reports the loss before hearing from the broker; no commit.
    assert acts == [
        StopFetching(tps("a-0", "a-1")),
        RunCallback(CallbackKind.LOST, lost.token, tps("a-0", "a-1")),
    ]
    assert h.commits == []
    assert h.state() is S.FENCED
    assert h.m.assignment == frozenset()
    assert h.callback(CallbackKind.LOST) == []  # the old heartbeat is still in flight
    acts = h.fail(FailureKind.TIMEOUT, at=13.0)
    [join] = heartbeats(acts)
    assert (join.member_id, join.member_epoch) == (MEMBER_ID, 0)
    # Heartbeats succeed again: the member is back in the group with a new epoch.
    h.respond(2, {A: [0, 1]})
    h.callback(CallbackKind.ASSIGNED)
    assert h.state() is S.STABLE
    assert h.m.assignment == tps("a-0", "a-1")


@pytest.mark.parametrize(("margin_ms", "expiry"), [(250, 9.75), (8_000, 5.0)])
def test_the_session_margin_gives_the_session_up_that_much_sooner(
    margin_ms: int, expiry: float
) -> None:
    # The runtime's margin: time to stop fetching before the broker's own
    # timer runs out. At most half the session timeout is taken.
    h = Harness(session_timeout_ms=10_000, session_margin_ms=margin_ms)
    h.stable({A: [0]})
    h.tick(3.0)  # a heartbeat goes out and is never answered
    assert h.m.next_deadline() == pytest.approx(expiry)
    acts = h.tick(expiry)
    assert acts[0] == StopFetching(tps("a-0"))
    assert h.state() is S.FENCED


def test_successful_heartbeats_keep_the_session_alive() -> None:
    h = Harness(session_timeout_ms=10_000)
    h.stable({A: [0]})
    for t in (3.0, 6.0, 9.0, 12.0, 15.0):
        h.tick(t)
        h.respond(1, None, at=t + 0.1)
    assert h.state() is S.STABLE
    assert h.m.next_deadline() == pytest.approx(18.0)
    assert h.callbacks[-1].kind is CallbackKind.ASSIGNED


@pytest.mark.parametrize("name", ["FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"])
def test_fence_after_a_revoke_callback_reports_only_the_rest_lost(name: str) -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0, 1, 2, 3]})
    h.tick(3.0)
    h.respond(2, {A: [0, 1]})  # the revoke callback of a-2, a-3 is handed out
    revoked = h.callbacks[-1]
    assert revoked == RunCallback(CallbackKind.REVOKED, revoked.token, tps("a-2", "a-3"))
    h.tick(6.0)
    acts = h.respond(error=ERROR_CODES[name])  # fenced while that callback runs
    lost = h.callbacks[-1]
    # Callbacks are deltas (issue 10 item 6): a-2 and a-3 were reported revoked.
    assert only(acts, RunCallback) == [
        RunCallback(CallbackKind.LOST, lost.token, tps("a-0", "a-1"))
    ]
    assert h.state() is S.FENCED
    assert h.m.assignment == frozenset()
    assert h.commits == []
    # The revoke callback finishing changes nothing; the lost one lets it rejoin.
    assert h.callback(CallbackKind.REVOKED) == []
    acts = h.callback(CallbackKind.LOST)
    assert h.state() is S.JOINING
    [join] = heartbeats(acts)
    assert (join.member_id, join.member_epoch) == (MEMBER_ID, 0)


def test_fence_after_a_completed_revoke_callback_reports_only_what_is_still_owned() -> None:
    h = Harness(auto_commit=False)
    h.stable({A: [0, 1, 2, 3]})
    h.tick(3.0)
    h.respond(2, {A: [0, 1]})
    h.callback(CallbackKind.REVOKED)  # a-2, a-3 are released; the ack goes out
    h.tick(6.0)
    acts = h.respond(error=ERROR_CODES["FENCED_MEMBER_EPOCH"])
    lost = h.callbacks[-1]
    assert only(acts, RunCallback) == [
        RunCallback(CallbackKind.LOST, lost.token, tps("a-0", "a-1"))
    ]


# ------------------------------------------ fenced while leaving (issue 10)


def test_fence_while_committing_before_the_leave_reports_the_partitions_lost() -> None:
    # The revoke callback had not been handed out (the commit before it was
    # running): without a lost callback the application would never hear that
    # its partitions went.
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    h.do(Unsubscribe())
    assert h.state() is S.PREPARE_LEAVING
    assert [c.kind for c in h.callbacks] == [CallbackKind.ASSIGNED]
    acts = h.respond(error=ERROR_CODES["FENCED_MEMBER_EPOCH"])
    [lost] = only(acts, RunCallback)
    assert (lost.kind, lost.partitions) == (CallbackKind.LOST, tps("a-0"))
    assert h.m.assignment == frozenset()
    assert h.m.member_epoch < 0  # the pending commit can no longer be sent as the member
    # The commit's late outcome starts no revoke callback.
    assert only(h.commit_done(), RunCallback) == []
    # No heartbeat while waiting for the callback; the leave ends after it, with no leave heartbeat.
    assert h.m.next_deadline() is None
    assert only(h.tick(60.0), SendHeartbeat) == []
    acts = h.callback(CallbackKind.LOST)
    assert acts == [LeaveComplete()]
    assert h.state() is S.UNSUBSCRIBED
    assert h.leave is None


def test_close_fenced_before_its_revoke_callback_ends_after_the_lost_callback() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    h.do(CloseRequested(deadline=30.0))
    acts = h.respond(error=ERROR_CODES["UNKNOWN_MEMBER_ID"])
    assert [(c.kind, c.partitions) for c in only(acts, RunCallback)] == [
        (CallbackKind.LOST, tps("a-0"))
    ]
    assert only(acts, Closed) == []  # not before the application heard
    assert h.callback(CallbackKind.LOST) == [Closed(timed_out=False)]
    assert h.m.closed
    assert h.leave is None


def test_close_fenced_before_its_revoke_callback_times_out_without_a_leave() -> None:
    h = Harness()
    h.stable({A: [0]})
    h.tick(3.0)
    h.do(CloseRequested(deadline=5.0))
    h.respond(error=ERROR_CODES["FENCED_MEMBER_EPOCH"])
    assert h.m.next_deadline() == pytest.approx(5.0)
    assert h.tick(5.0) == [Closed(timed_out=True)]
    assert h.leave is None


# -- catch-up heartbeats after the group moved


def _answer_until(h: Harness, end: float, rtt: float = 0.1) -> list[float]:
    """Send every heartbeat that falls due before ``end``, answer each ``rtt`` later with
    nothing new; the send times."""
    sends: list[float] = []
    while True:
        due = h.m.next_deadline()
        assert due is not None
        if due >= end:
            return sends
        assert len(heartbeats(h.tick(due))) == 1
        sends.append(round(due, 6))
        h.respond(h.m.member_epoch, None, at=due + rtt)


def test_after_a_join_heartbeats_come_a_fifth_of_the_interval_apart_for_one_interval() -> None:
    h = Harness(catch_up_heartbeats=True)
    h.subscribe("a")  # join sent at 0.0
    h.respond(1, {A: [0]}, at=0.1)  # epoch 0 -> 1: the group moved
    h.callback(CallbackKind.ASSIGNED, at=0.2)  # the ack goes out at once
    h.respond(1, None, at=0.3)
    # A fifth of the 3 s interval after each answer, until 3 s after the join's answer,
    # then the interval's own rhythm from the last send.
    assert _answer_until(h, 10.0) == [0.9, 1.6, 2.3, 3.0, 6.0, 9.0]


def test_a_quiet_member_heartbeats_on_the_interval() -> None:
    h = Harness(catch_up_heartbeats=True)
    h.stable({A: [0]})
    assert _answer_until(h, 4.0) == [0.6, 1.3, 2.0, 2.7, 3.4]  # the join's catch-up
    assert _answer_until(h, 20.0) == [6.4, 9.4, 12.4, 15.4, 18.4]


def test_a_moved_epoch_or_a_new_target_starts_the_catch_up_again() -> None:
    h = Harness(catch_up_heartbeats=True)
    h.stable({A: [0]})
    _answer_until(h, 4.0)
    # Another member joined: the epoch moves, the assignment does not (yet).
    assert len(heartbeats(h.tick(6.4))) == 1
    h.respond(2, None, at=6.5)
    assert h.m.next_deadline() == pytest.approx(7.1)
    assert _answer_until(h, 9.4) == [7.1, 7.8, 8.5, 9.2]
    # The partitions released for this member arrive at the same epoch: another interval.
    assert len(heartbeats(h.tick(9.9))) == 1
    h.respond(2, {A: [0, 1]}, at=9.95)
    h.callback(CallbackKind.ASSIGNED, at=10.1)  # ack sent
    h.respond(2, None, at=10.2)
    # 12.95 ends it: the answer to the send at 12.9 sets the interval's rhythm again.
    assert _answer_until(h, 16.0) == [10.8, 11.5, 12.2, 12.9, 15.9]


def test_a_failed_heartbeat_during_the_catch_up_waits_for_its_backoff() -> None:
    h = Harness(catch_up_heartbeats=True, retry_backoff_ms=2000, retry_backoff_max_ms=8000)
    h.subscribe("a")
    h.respond(1, {A: [0]}, at=0.1)  # the catch-up runs until 3.1
    h.callback(CallbackKind.ASSIGNED, at=0.2)
    h.fail(at=0.3)  # the ack's answer never came
    # The backoff (2 s, no jitter here), not a fifth of the interval: a failing
    # coordinator is not asked more often because the group moved.
    assert h.m.next_deadline() == pytest.approx(2.3)
    assert heartbeats(h.tick(2.29)) == []
    assert len(heartbeats(h.tick(2.3))) == 1
    h.respond(1, None, at=2.4)  # still inside the catch-up: a fifth again
    assert h.m.next_deadline() == pytest.approx(3.0)


def test_catch_up_heartbeats_can_be_turned_off() -> None:
    h = Harness(catch_up_heartbeats=False)
    h.subscribe("a")
    h.respond(1, {A: [0]}, at=0.1)
    h.callback(CallbackKind.ASSIGNED, at=0.2)
    h.respond(1, None, at=0.3)
    assert _answer_until(h, 7.0) == [3.2, 6.2]
