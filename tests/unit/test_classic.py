"""The classic member state machine: scenarios, the error tables, the transition table."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kgroup.error_codes import ERROR_CODES as CLASSIC_ERROR_CODES
from kgroup.error_codes import error_name as classic_error_name
from kgroup.membership import (
    CLASSIC_TRANSITIONS,
    AssignmentComputed,
    AssignorFailed,
    CallbackCompleted,
    CallbackKind,
    ClassicAction,
    ClassicAssignment,
    ClassicAssignorOnAssignment,
    ClassicEvent,
    ClassicHeartbeatResponseReceived,
    ClassicMember,
    ClassicMemberConfig,
    ClassicState,
    ClassicTrigger,
    Closed,
    CloseRequested,
    CommitCompleted,
    CommitFailed,
    CommitOffsets,
    CoordinatorRediscovered,
    FailureKind,
    GroupMember,
    IllegalTransitionError,
    JoinGroupResponse,
    JoinGroupResponseReceived,
    LeaveComplete,
    LeaveGroupResponseReceived,
    MemberSubscription,
    PollCalled,
    RaiseCallbackError,
    RebalanceProtocol,
    RediscoverCoordinator,
    ReportAssignorError,
    ReportFatalError,
    RequestFailed,
    RunAssignor,
    RunCallback,
    SendClassicHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
    StartFetching,
    StopFetching,
    SubscribedMetadataChanged,
    SubscriptionChanged,
    SyncGroupResponse,
    SyncGroupResponseReceived,
    TimerTick,
    Unsubscribe,
    render_classic_mermaid,
)
from kgroup.membership.classic.reactions import ClassicReaction, classic_reaction_for
from kgroup.membership.classic.states import (
    CLASSIC_DIAGRAM_BEGIN,
    CLASSIC_DIAGRAM_END,
    next_classic_state,
    replace_classic_diagram,
)
from kgroup.types import TopicPartition

S = ClassicState
E = CLASSIC_ERROR_CODES
EAGER = RebalanceProtocol.EAGER
COOP = RebalanceProtocol.COOPERATIVE
RANGE_ONLY: Mapping[str, set[RebalanceProtocol]] = {"range": {EAGER}}
COOP_STICKY: Mapping[str, set[RebalanceProtocol]] = {"cooperative-sticky": {EAGER, COOP}}
BOTH: Mapping[str, set[RebalanceProtocol]] = {
    "cooperative-sticky": {EAGER, COOP},
    "range": {EAGER},
}
ME = "m-1"
TP_A0 = TopicPartition("a", 0)
OTHER = "m-2"
A = TypeVar("A")


def tps(*specs: str) -> frozenset[TopicPartition]:
    out = set()
    for spec in specs:
        topic, part = spec.split("-")
        out.add(TopicPartition(topic, int(part)))
    return frozenset(out)


def of(kind: type[A], acts: list[ClassicAction]) -> list[A]:
    return [a for a in acts if isinstance(a, kind)]


def one(kind: type[A], acts: list[ClassicAction]) -> A:
    found = of(kind, acts)
    assert len(found) == 1, (kind.__name__, acts)
    return found[0]


class Harness:
    """Drives a classic member with virtual time and remembers what it asked for."""

    def __init__(
        self,
        assignors: Mapping[str, set[RebalanceProtocol]] = RANGE_ONLY,
        **config: Any,
    ) -> None:
        config.setdefault("max_poll_interval_ms", 60_000)
        config.setdefault("session_timeout_ms", 10_000)
        config.setdefault("heartbeat_interval_ms", 1_000)
        self.m = ClassicMember(
            ClassicMemberConfig(group_id="g", **config), assignors, random=lambda: 0.5
        )
        self.now = 0.0
        self.join: SendJoinGroup | None = None
        self.sync: SendSyncGroup | None = None
        self.heartbeat: SendClassicHeartbeat | None = None
        self.leave: SendLeaveGroup | None = None
        self.callbacks: list[RunCallback] = []
        self.commits: list[CommitOffsets] = []
        self.answered: set[int] = set()

    def do(self, event: ClassicEvent, at: float | None = None) -> list[ClassicAction]:
        if at is not None:
            self.now = at
        acts = self.m.handle(event, self.now)
        for a in acts:
            if isinstance(a, SendJoinGroup):
                self.join = a
            elif isinstance(a, SendSyncGroup):
                self.sync = a
            elif isinstance(a, SendClassicHeartbeat):
                self.heartbeat = a
            elif isinstance(a, SendLeaveGroup):
                self.leave = a
            elif isinstance(a, RunCallback):
                self.callbacks.append(a)
            elif isinstance(a, CommitOffsets):
                self.commits.append(a)
        return acts

    def state(self) -> ClassicState:
        return self.m.state

    def tick(self, at: float) -> list[ClassicAction]:
        return self.do(TimerTick(), at=at)

    def subscribe(self, *topics: str) -> list[ClassicAction]:
        return self.do(SubscriptionChanged(topics=frozenset(topics or ("a",))))

    def joined(
        self,
        *,
        generation: int = 1,
        protocol: str = "range",
        leader: str = OTHER,
        member_id: str = ME,
        members: tuple[GroupMember, ...] = (),
        error: int = 0,
        skip_assignment: bool = False,
    ) -> list[ClassicAction]:
        assert self.join is not None
        resp = JoinGroupResponse(
            error_code=error,
            generation_id=generation,
            protocol_type="consumer",
            protocol_name=protocol,
            leader=leader,
            member_id=member_id,
            members=members,
            skip_assignment=skip_assignment,
        )
        return self.do(JoinGroupResponseReceived(self.join.seq, resp))

    def synced(
        self, *specs: str, error: int = 0, user_data: bytes | None = None
    ) -> list[ClassicAction]:
        assert self.sync is not None
        assignment = ClassicAssignment(tps(*specs), user_data) if not error else None
        return self.do(
            SyncGroupResponseReceived(self.sync.seq, SyncGroupResponse(error, assignment))
        )

    def beat(self, error: int = 0) -> list[ClassicAction]:
        assert self.heartbeat is not None
        return self.do(ClassicHeartbeatResponseReceived(self.heartbeat.seq, error))

    def callback_done(self, error: BaseException | None = None) -> list[ClassicAction]:
        cb = self.callbacks[-1]
        self.answered.add(cb.token)
        return self.do(CallbackCompleted(cb.kind, cb.token, error))

    def commit_done(self) -> list[ClassicAction]:
        self.answered.add(self.commits[-1].token)
        return self.do(CommitCompleted(self.commits[-1].token))

    def finish(self) -> list[ClassicAction]:
        """Answer commits and callbacks until the member asks for none (the runtime's part)."""
        out: list[ClassicAction] = []
        while True:
            commit = next((c for c in self.commits if c.token not in self.answered), None)
            callback = next((c for c in self.callbacks if c.token not in self.answered), None)
            if commit is not None:
                self.answered.add(commit.token)
                out += self.do(CommitCompleted(commit.token))
            elif callback is not None:
                self.answered.add(callback.token)
                out += self.do(CallbackCompleted(callback.kind, callback.token))
            else:
                return out

    def stable(
        self,
        *specs: str,
        protocol: str = "range",
        leader: str = OTHER,
        generation: int = 1,
    ) -> None:
        """Subscribe (if needed), join, sync and reconcile to ``specs``."""
        if self.state() is S.UNJOINED:
            self.subscribe()
        assert self.state() is S.JOINING
        acts = self.joined(generation=generation, protocol=protocol, leader=leader)
        if leader == ME:
            run = one(RunAssignor, acts)
            self.do(AssignmentComputed(run.generation_id, {ME: ClassicAssignment(tps(*specs))}))
        self.synced(*specs)
        self.finish()
        assert self.state() is S.STABLE, self.state()
        assert self.m.assignment == tps(*specs)


# ------------------------------------------------------------------ joining


def test_subscribe_sends_a_join_with_one_protocol_per_assignor_in_order() -> None:
    h = Harness(BOTH, rack_id="r1", instance_id=None)
    acts = h.subscribe("b", "a")
    assert h.state() is S.JOINING
    join = one(SendJoinGroup, acts)
    req = join.request
    assert acts == [join]
    assert req.member_id == ""
    assert req.protocol_type == "consumer"
    assert req.session_timeout_ms == 10_000
    assert req.rebalance_timeout_ms == 60_000
    assert [p.name for p in req.protocols] == ["cooperative-sticky", "range"]
    for p in req.protocols:
        assert p.subscription == MemberSubscription(
            topics=frozenset({"a", "b"}), generation_id=-1, rack_id="r1"
        )


def test_member_id_required_round_joins_again_at_once_with_the_given_id() -> None:
    h = Harness()
    h.subscribe()
    first = h.join
    acts = h.joined(error=E["MEMBER_ID_REQUIRED"], member_id="given-id")
    join = one(SendJoinGroup, acts)
    assert acts == [join]
    assert first is not None
    assert join.seq != first.seq
    assert join.request.member_id == "given-id"
    assert h.state() is S.JOINING
    h.joined(member_id="given-id")
    assert h.m.member_id == "given-id"
    assert h.state() is S.SYNCING


def test_follower_syncs_without_assignments_then_assigns_everything_eagerly() -> None:
    h = Harness()
    h.subscribe()
    acts = h.joined(generation=7)
    sync = one(SendSyncGroup, acts)
    assert acts == [sync]
    assert sync.request.assignments == ()
    assert sync.request.generation_id == 7
    assert sync.request.member_id == ME
    assert sync.request.protocol_name == "range"
    assert h.state() is S.SYNCING
    acts = h.synced("a-0", "a-1", user_data=b"u")
    assert acts == [
        ClassicAssignorOnAssignment("range", 7, ClassicAssignment(tps("a-0", "a-1"), b"u")),
        RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, tps("a-0", "a-1")),
    ]
    assert h.state() is S.RECONCILING
    assert h.callback_done() == [StartFetching(tps("a-0", "a-1"))]
    assert h.state() is S.STABLE


def test_empty_assignment_still_runs_the_assigned_callback() -> None:
    h = Harness()
    h.subscribe()
    h.joined()
    acts = h.synced()
    assert one(RunCallback, acts) == RunCallback(
        CallbackKind.ASSIGNED, h.callbacks[-1].token, frozenset()
    )
    assert h.callback_done() == []
    assert h.state() is S.STABLE


def test_a_static_leader_rejoining_a_stable_group_still_notices_new_partitions() -> None:
    # KIP-814: the coordinator keeps the assignment, so the runtime is told to
    # skip the assignor; the watch starts from what the group's assignment
    # covers (OTHER owns a-0..a-2; nobody reports b), never from an ignored run.
    h = Harness()
    h.subscribe()
    members = (
        GroupMember(
            OTHER, MemberSubscription(frozenset({"a", "b"}), owned_partitions=tps("a-2", "a-0"))
        ),
        GroupMember(ME, MemberSubscription(frozenset({"a"}))),
    )
    acts = h.joined(generation=3, leader=ME, members=members, skip_assignment=True)
    run = one(RunAssignor, acts)
    assert run.skip_assignment
    assert run.covered_counts() == {"a": 3, "b": 0}
    assert h.state() is S.AWAITING_ASSIGNOR
    # The runtime's empty answer is synced as is; the coordinator keeps its own.
    h.do(AssignmentComputed(3, {}))
    assert h.state() is S.SYNCING
    assert h.sync is not None
    assert h.sync.request.assignments == ()
    assert h.m.is_leader


def test_leader_runs_the_assignor_and_syncs_every_members_assignment() -> None:
    h = Harness()
    h.subscribe()
    members = (
        GroupMember(OTHER, MemberSubscription(frozenset({"a"}))),
        GroupMember(ME, MemberSubscription(frozenset({"a"}))),
    )
    acts = h.joined(generation=3, leader=ME, members=members)
    assert acts == [RunAssignor(3, "range", ME, members)]
    assert h.state() is S.AWAITING_ASSIGNOR
    assert h.m.is_leader
    # An answer for another generation is not this round's.
    assert h.do(AssignmentComputed(2, {ME: ClassicAssignment()})) == []
    acts = h.do(
        AssignmentComputed(
            3, {OTHER: ClassicAssignment(tps("a-1")), ME: ClassicAssignment(tps("a-0"))}
        )
    )
    sync = one(SendSyncGroup, acts)
    assert sync.request.assignments == (
        (ME, ClassicAssignment(tps("a-0"))),
        (OTHER, ClassicAssignment(tps("a-1"))),
    )
    assert h.state() is S.SYNCING


def test_assignor_failure_is_fatal_and_nothing_is_sent() -> None:
    h = Harness()
    h.subscribe()
    h.joined(generation=3, leader=ME)
    acts = h.do(AssignorFailed(3, "range assigned a-0 twice"))
    assert acts == [ReportAssignorError("range", "range assigned a-0 twice")]
    assert h.state() is S.FATAL
    assert h.m.next_deadline() is None
    assert h.do(TimerTick(), at=1000.0) == []


def test_heartbeats_on_the_interval_while_syncing_reconciling_and_stable() -> None:
    h = Harness()
    h.subscribe()
    assert h.m.next_deadline() == 60.0  # only the poll timer while joining
    h.joined()
    assert h.m.next_deadline() == 1.0
    acts = h.tick(1.0)
    hb = one(SendClassicHeartbeat, acts)
    assert (hb.generation_id, hb.member_id, hb.instance_id) == (1, ME, None)
    # One heartbeat in flight at a time.
    assert of(SendClassicHeartbeat, h.tick(2.5)) == []
    # The interval counts from the last send: overdue, so the next goes at once.
    assert len(of(SendClassicHeartbeat, h.beat())) == 1
    h.beat()
    assert h.m.next_deadline() == 3.5
    h.synced("a-0")
    # Callbacks do not block heartbeats.
    assert h.state() is S.RECONCILING
    assert len(of(SendClassicHeartbeat, h.tick(3.5))) == 1


def test_join_is_not_heartbeated_and_is_retried_with_backoff_on_load_in_progress() -> None:
    h = Harness()
    h.subscribe()
    acts = h.joined(error=E["COORDINATOR_LOAD_IN_PROGRESS"])
    assert acts == []
    assert h.m.next_deadline() == pytest.approx(0.1)
    assert of(SendJoinGroup, h.tick(0.05)) == []
    assert len(of(SendJoinGroup, h.tick(0.1))) == 1
    # The second failure doubles the backoff.
    h.joined(error=E["COORDINATOR_LOAD_IN_PROGRESS"])
    assert h.m.next_deadline() == pytest.approx(0.3)


def test_transport_failures_back_off_like_the_new_protocol_member() -> None:
    h = Harness()
    h.subscribe()
    assert h.join is not None
    assert h.do(RequestFailed(h.join.seq, FailureKind.TIMEOUT)) == []
    assert h.m.next_deadline() == pytest.approx(0.1)
    assert len(of(SendJoinGroup, h.tick(0.1))) == 1


def test_not_coordinator_rediscovers_then_retries() -> None:
    h = Harness()
    h.subscribe()
    assert h.joined(error=E["NOT_COORDINATOR"]) == [RediscoverCoordinator()]
    assert of(SendJoinGroup, h.tick(5.0)) == []
    assert len(of(SendJoinGroup, h.do(CoordinatorRediscovered()))) == 1


# ----------------------------------------------------------- eager / cooperative


def test_eager_rebalance_revokes_everything_before_joining_in_order() -> None:
    h = Harness()
    h.stable("a-0", "a-1")
    h.tick(1.0)
    acts = h.beat(E["REBALANCE_IN_PROGRESS"])
    assert acts == [
        StopFetching(tps("a-0", "a-1")),
        CommitOffsets(
            h.commits[-1].token, tps("a-0", "a-1"), 1, 61.0, member_id=ME, instance_id=None
        ),
    ]
    assert h.state() is S.PREPARING
    assert h.commit_done() == [
        RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0", "a-1"))
    ]
    acts = h.callback_done()
    join = one(SendJoinGroup, acts)
    assert acts == [join]
    assert join.request.protocols[0].subscription.owned_partitions == frozenset()
    assert join.request.protocols[0].subscription.generation_id == 1
    assert h.m.assignment == frozenset()
    h.joined(generation=2)
    acts = h.synced("a-1", "a-2")
    assert [type(a) for a in acts] == [ClassicAssignorOnAssignment, RunCallback]
    assert h.callbacks[-1].partitions == tps("a-1", "a-2")
    assert h.callback_done() == [StartFetching(tps("a-1", "a-2"))]
    assert h.state() is S.STABLE


def test_heartbeats_go_on_while_the_eager_revoke_callback_runs() -> None:
    h = Harness(auto_commit=False)
    h.stable("a-0")
    h.tick(1.0)
    h.beat(E["REBALANCE_IN_PROGRESS"])
    assert h.state() is S.PREPARING
    hb = one(SendClassicHeartbeat, h.tick(2.0))
    assert hb.generation_id == 1
    # Still rebalancing: ignored, the member is already on its way to rejoin.
    assert h.beat(E["REBALANCE_IN_PROGRESS"]) == []
    assert len(of(SendJoinGroup, h.callback_done())) == 1


def test_static_member_rejoins_after_a_poll_timeout_with_its_instance_id() -> None:
    h = Harness(instance_id="i-1", session_timeout_ms=100_000)
    h.stable("a-0")
    h.tick(60.0)
    h.callback_done()
    join = one(SendJoinGroup, h.do(PollCalled(), at=61.0))
    assert (join.request.member_id, join.request.instance_id) == ("", "i-1")


def test_eager_revoke_callback_runs_even_with_nothing_owned() -> None:
    h = Harness()
    h.stable()
    h.tick(1.0)
    acts = h.beat(E["REBALANCE_IN_PROGRESS"])
    assert acts == [RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, frozenset())]


def test_eager_without_auto_commit_revokes_without_committing() -> None:
    h = Harness(auto_commit=False)
    h.stable("a-0")
    h.tick(1.0)
    acts = h.beat(E["REBALANCE_IN_PROGRESS"])
    assert acts == [
        StopFetching(tps("a-0")),
        RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0")),
    ]


def test_cooperative_keeps_partitions_through_the_join_and_revokes_only_the_moved_ones() -> None:
    h = Harness(COOP_STICKY)
    h.stable("a-0", "a-1", protocol="cooperative-sticky")
    assert h.m.rebalance_protocol is COOP
    h.tick(1.0)
    acts = h.beat(E["REBALANCE_IN_PROGRESS"])
    join = one(SendJoinGroup, acts)
    assert acts == [join]  # no stop, no commit, no callback
    sub = join.request.protocols[0].subscription
    assert sub.owned_partitions == tps("a-0", "a-1")
    assert sub.generation_id == 1
    h.joined(generation=2, protocol="cooperative-sticky")
    acts = h.synced("a-1", "a-2")
    commit = h.commits[-1]
    assert acts == [
        StopFetching(tps("a-0")),
        CommitOffsets(commit.token, tps("a-0"), 2, h.now + 60.0, ME, None),
    ]
    assert h.commit_done() == [RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0"))]
    acts = h.callback_done()
    assert acts == [
        ClassicAssignorOnAssignment("cooperative-sticky", 2, ClassicAssignment(tps("a-1", "a-2"))),
        RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, tps("a-2")),
    ]
    acts = h.callback_done()
    # Something was revoked: start the added partition, then rejoin at once.
    join = one(SendJoinGroup, acts)
    assert acts == [StartFetching(tps("a-2")), join]
    assert join.request.protocols[0].subscription.owned_partitions == tps("a-1", "a-2")
    # The second round hands nothing more: no revocation, no further rejoin.
    h.joined(generation=3, protocol="cooperative-sticky")
    acts = h.synced("a-1", "a-2")
    assert [type(a) for a in acts] == [ClassicAssignorOnAssignment, RunCallback]
    assert h.callbacks[-1].partitions == frozenset()
    assert h.callback_done() == []
    assert h.state() is S.STABLE


def test_commits_carry_the_generation_of_the_assignment_held_until_its_sync_group_answers() -> None:
    # Between the JoinGroup and SyncGroup answers the member still holds
    # generation 1's partitions; generation 2 may stand for an assignment without
    # them (seed 23957: a group converted meanwhile gave them to another member).
    h = Harness(COOP_STICKY)
    h.stable("a-0", "a-1", protocol="cooperative-sticky")
    h.tick(1.0)
    h.beat(E["REBALANCE_IN_PROGRESS"])
    h.joined(generation=2, protocol="cooperative-sticky")
    assert (h.m.generation_id, h.m.synced_generation) == (2, 1)
    h.synced("a-0", "a-1")
    assert (h.m.generation_id, h.m.synced_generation) == (2, 2)


def test_partitions_left_out_after_an_unanswered_sync_group_are_lost_not_committed() -> None:
    # Seed 23957: the SyncGroup of generation 2 reached the coordinator but its
    # answer did not come back. The member cannot tell since when the partitions
    # left out of generation 2 are another member's, so it commits none of them;
    # and (seed 20034) it fetches none of its partitions until it knows which.
    h = Harness(COOP_STICKY)
    h.stable("a-0", "a-1", protocol="cooperative-sticky")
    h.tick(1.0)
    h.beat(E["REBALANCE_IN_PROGRESS"])
    h.joined(generation=2, protocol="cooperative-sticky")
    assert h.sync is not None
    acts = h.do(RequestFailed(h.sync.seq, FailureKind.TIMEOUT))
    assert acts == [StopFetching(tps("a-0", "a-1"))]
    acts = h.tick(h.now + 0.5)  # the join goes out again after the backoff
    one(SendJoinGroup, acts)
    # Nothing is given up before the assignment is known.
    assert not of(CommitOffsets, acts)
    assert not of(RunCallback, acts)
    assert h.m.assignment == tps("a-0", "a-1")
    h.joined(generation=2, protocol="cooperative-sticky")
    commits_before = len(h.commits)
    acts = h.synced("a-1")
    assert acts == [RunCallback(CallbackKind.LOST, h.callbacks[-1].token, tps("a-0"))]
    assert len(h.commits) == commits_before
    acts = h.callback_done()
    assert acts == [
        ClassicAssignorOnAssignment("cooperative-sticky", 2, ClassicAssignment(tps("a-1"))),
        RunCallback(CallbackKind.ASSIGNED, h.callbacks[-1].token, frozenset()),
    ]
    assert h.m.assignment == tps("a-1")
    # The kept partition fetches again; the cooperative round goes on.
    acts = h.callback_done()
    assert acts[0] == StartFetching(tps("a-1"))
    one(SendJoinGroup, acts)
    # The next reassignment is an ordinary one: revoked partitions are committed.
    h.joined(generation=3, protocol="cooperative-sticky")
    acts = h.synced()
    assert acts[:2] == [
        StopFetching(tps("a-1")),
        CommitOffsets(h.commits[-1].token, tps("a-1"), 3, h.now + 60.0, ME, None),
    ]


def _joining_after_a_confirmed_rebalance_heartbeat() -> tuple[Harness, float]:
    """A cooperative member owning a-0 and a-1, its JoinGroup out; and when the
    coordinator last confirmed it (the REBALANCE_IN_PROGRESS heartbeat)."""
    h = Harness(COOP_STICKY)  # session.timeout.ms 10 s
    h.stable("a-0", "a-1", protocol="cooperative-sticky")
    h.tick(1.0)
    confirmed = h.now
    acts = h.beat(E["REBALANCE_IN_PROGRESS"])
    one(SendJoinGroup, acts)
    assert h.state() is S.JOINING
    assert not of(StopFetching, acts)  # cooperative: it keeps fetching what it owns
    return h, confirmed


def test_an_unconfirmed_joining_member_stops_fetching_after_a_session_timeout_but_keeps_them() -> (
    None
):
    # Sim seeds 22, 138, 148 (session-loss invariant): a JoinGroup (or its
    # answer) was lost; the coordinator expired the member a session timeout
    # after its last heartbeat and handed its partitions on, while the member
    # went on fetching them until the JoinGroup itself timed out.
    h, confirmed = _joining_after_a_confirmed_rebalance_heartbeat()
    assert h.m.next_deadline() == confirmed + 10.0
    assert h.tick(confirmed + 9.9) == []
    acts = h.tick(confirmed + 10.0)
    assert acts == [StopFetching(tps("a-0", "a-1"))]
    # Nothing is given up: the round's answer says whose they are.
    assert h.m.assignment == tps("a-0", "a-1")
    assert h.state() is S.JOINING
    deadline = h.m.next_deadline()
    assert deadline is None or deadline > h.now  # no busy loop on the passed deadline
    h.joined(generation=2, protocol="cooperative-sticky")
    acts = h.synced("a-0", "a-1")
    assert not of(RunCallback, acts) or all(
        c.kind is CallbackKind.ASSIGNED for c in of(RunCallback, acts)
    )
    acts = h.finish()
    # Still its own: fetching resumes (where it stopped: the runtime keeps the positions).
    assert StartFetching(tps("a-0", "a-1")) in acts
    assert not [c for c in h.callbacks if c.kind is CallbackKind.LOST]
    assert h.state() is S.STABLE


def test_an_unconfirmed_joining_member_loses_its_partitions_when_the_round_says_so() -> None:
    h, confirmed = _joining_after_a_confirmed_rebalance_heartbeat()
    h.tick(confirmed + 10.0)
    commits_before = len(h.commits)
    acts = h.joined(error=E["UNKNOWN_MEMBER_ID"])
    lost = one(RunCallback, acts)
    assert (lost.kind, lost.partitions) == (CallbackKind.LOST, tps("a-0", "a-1"))
    assert not of(StopFetching, acts)  # stopped already
    assert len(h.commits) == commits_before
    h.callback_done()
    assert h.m.assignment == frozenset()


def test_a_join_answered_within_the_session_timeout_loses_nothing() -> None:
    # Held by the coordinator 9 s (for the other members), or by the network:
    # the member cannot tell, so from a session timeout after the JoinGroup went
    # out until the SyncGroup answer it pauses its kept partitions; the answer
    # confirms it, and they resume where they stopped, never lost.
    h, confirmed = _joining_after_a_confirmed_rebalance_heartbeat()
    acts = h.tick(confirmed + 9.0)
    acts += h.joined(generation=2, protocol="cooperative-sticky")
    acts += h.tick(confirmed + 12.0)
    acts += h.synced("a-0", "a-1")
    acts += h.finish()
    assert of(StopFetching, acts) == [StopFetching(tps("a-0", "a-1"))]
    assert of(StartFetching, acts) == [StartFetching(tps("a-0", "a-1"))]
    assert not [a for a in of(RunCallback, acts) if a.kind is CallbackKind.LOST]
    assert h.state() is S.STABLE


def test_a_join_answered_and_synced_within_the_session_timeout_never_stops_fetching() -> None:
    h, confirmed = _joining_after_a_confirmed_rebalance_heartbeat()
    acts = h.tick(confirmed + 5.0)
    acts += h.joined(generation=2, protocol="cooperative-sticky")
    acts += h.tick(confirmed + 9.0)
    acts += h.synced("a-0", "a-1")
    acts += h.finish()
    acts += h.tick(confirmed + 12.0)  # past the join's own deadline: the sync confirmed it
    assert not of(StopFetching, acts)
    assert h.state() is S.STABLE


def _rejoined_after_a_lost_join_answer() -> tuple[Harness, float]:
    """A cooperative member whose JoinGroup answer was lost (the round it was in
    completed at the coordinator), its JoinGroup sent again and answered at once
    from the Stable group: SYNCING, and when a heartbeat last confirmed it."""
    h, confirmed = _joining_after_a_confirmed_rebalance_heartbeat()
    assert h.join is not None
    h.do(RequestFailed(h.join.seq, FailureKind.DISCONNECTED), at=confirmed + 3.0)
    acts = h.tick(confirmed + 3.5)  # after the backoff
    one(SendJoinGroup, acts)
    h.joined(generation=2, protocol="cooperative-sticky")
    assert h.state() is S.SYNCING
    return h, confirmed


def test_a_join_answered_after_a_lost_join_answer_does_not_restart_the_session() -> None:
    # Sim seed 443196: Kafka answers a follower rejoining with unchanged metadata
    # straight from the Stable group, and restarts no session; the round its lost
    # JoinGroup was in did, no later than it was sent. Counted from the second
    # answer, the member fetched past the coordinator's expiry.
    h, confirmed = _rejoined_after_a_lost_join_answer()
    # Its SyncGroup and heartbeats go unanswered: the session runs from the last
    # heartbeat answer, not from the JoinGroup answer 3.5 s later.
    assert not of(StopFetching, h.tick(confirmed + 9.9))
    acts = h.tick(confirmed + 10.0)
    assert of(StopFetching, acts)[:1] == [StopFetching(tps("a-0", "a-1"))]


def test_a_late_join_answer_counts_the_session_from_when_the_join_was_sent() -> None:
    # Sim seed 617362: the coordinator completed the round (restarting every
    # session) soon after the JoinGroup went out, but the answer came 3.6 s later;
    # its SyncGroup and heartbeat answers were then lost. Counted from the
    # answer, the member fetched its kept partitions past the coordinator's expiry.
    # It stops fetching (keeping them) until the SyncGroup answer confirms it.
    h, confirmed = _joining_after_a_confirmed_rebalance_heartbeat()
    h.tick(confirmed + 3.6)
    h.joined(generation=2, protocol="cooperative-sticky")
    assert h.state() is S.SYNCING
    assert not of(StopFetching, h.tick(confirmed + 9.9))
    acts = h.tick(confirmed + 10.0)
    assert acts == [StopFetching(tps("a-0", "a-1"))]
    acts = h.synced("a-0", "a-1")
    acts += h.finish()
    assert of(StartFetching, acts) == [StartFetching(tps("a-0", "a-1"))]
    assert not [a for a in of(RunCallback, acts) if a.kind is CallbackKind.LOST]
    assert h.state() is S.STABLE


def test_a_heartbeat_answer_confirms_the_session_after_a_lost_join_answer() -> None:
    h, confirmed = _rejoined_after_a_lost_join_answer()
    acts = h.tick(confirmed + 4.5)  # the next heartbeat goes out while SYNCING
    sent = one(SendClassicHeartbeat, acts)
    assert h.heartbeat == sent
    h.beat()
    acts = h.tick(confirmed + 10.0)
    acts += h.synced("a-0", "a-1")
    acts += h.finish()
    assert not of(StopFetching, acts)
    assert h.state() is S.STABLE


def test_cooperative_rejoin_revokes_partitions_of_unsubscribed_topics_first() -> None:
    h = Harness(COOP_STICKY)
    h.subscribe("a", "b")
    h.stable("a-0", "b-0", protocol="cooperative-sticky")
    acts = h.do(SubscriptionChanged(frozenset({"a"})))
    assert acts[0] == StopFetching(tps("b-0"))
    assert isinstance(acts[1], CommitOffsets)
    assert acts[1].partitions == tps("b-0")
    h.commit_done()
    acts = h.callback_done()
    join = one(SendJoinGroup, acts)
    assert join.request.protocols[0].subscription.topics == frozenset({"a"})
    assert join.request.protocols[0].subscription.owned_partitions == tps("a-0")


def test_upgrade_path_eager_while_the_group_picks_range_cooperative_once_it_agrees() -> None:
    h = Harness(BOTH)
    h.stable("a-0", protocol="range")
    assert h.m.rebalance_protocol is EAGER
    h.tick(1.0)
    acts = h.beat(E["REBALANCE_IN_PROGRESS"])
    assert acts[0] == StopFetching(tps("a-0"))  # eager: everything goes
    h.finish()
    assert h.join is not None
    assert [p.name for p in h.join.request.protocols] == ["cooperative-sticky", "range"]
    # Now every member advertises cooperative-sticky: the group picks it.
    h.joined(generation=2, protocol="cooperative-sticky")
    h.synced("a-0")
    h.finish()
    assert h.state() is S.STABLE
    assert h.m.rebalance_protocol is COOP
    h.tick(2.0)
    acts = h.beat(E["REBALANCE_IN_PROGRESS"])
    join = one(SendJoinGroup, acts)
    assert acts == [join]  # cooperative: partitions kept
    assert join.request.protocols[1].subscription.owned_partitions == tps("a-0")


# ------------------------------------------------------------------ commits


def test_commit_refused_during_a_rebalance_is_retried_after_it_for_owned_partitions_only() -> None:
    h = Harness(COOP_STICKY)
    h.stable("a-0", "a-1", protocol="cooperative-sticky")
    offsets = {TopicPartition("a", 0): 10, TopicPartition("a", 1): 20}
    acts = h.do(CommitFailed(None, tps("a-0", "a-1"), E["REBALANCE_IN_PROGRESS"], 1, offsets))
    assert [type(a) for a in acts] == [SendJoinGroup]  # the refusal starts the rejoin
    h.joined(generation=2, protocol="cooperative-sticky")
    acts = h.synced("a-1", "a-2")
    retry = acts[0]
    assert isinstance(retry, CommitOffsets)
    assert retry.partitions == tps("a-1")
    assert retry.offsets == {TopicPartition("a", 1): 20}
    assert (retry.member_epoch, retry.member_id) == (2, ME)
    # Then the reconciliation: a-0 moves away and is committed with fresh offsets.
    assert acts[1] == StopFetching(tps("a-0"))
    assert isinstance(acts[2], CommitOffsets)
    assert acts[2].offsets is None


def test_parked_commit_is_dropped_when_the_partitions_are_lost() -> None:
    h = Harness(COOP_STICKY)
    h.stable("a-0", protocol="cooperative-sticky")
    h.do(CommitFailed(None, tps("a-0"), E["REBALANCE_IN_PROGRESS"], 1, {TopicPartition("a", 0): 5}))
    assert h.join is not None
    acts = h.joined(error=E["UNKNOWN_MEMBER_ID"])
    assert acts == [
        StopFetching(tps("a-0")),
        RunCallback(CallbackKind.LOST, h.callbacks[-1].token, tps("a-0")),
    ]
    h.callback_done()
    h.joined(generation=5, protocol="cooperative-sticky")
    acts = h.synced("a-0")
    assert of(CommitOffsets, acts) == []


def test_eager_parked_commit_dies_with_the_generation() -> None:
    # Eagerly revoked partitions stay parked through the rejoin, but if the
    # member is thrown out meanwhile, others may process them: forget them.
    h = Harness()
    h.stable("a-0")
    h.tick(1.0)
    h.beat(E["REBALANCE_IN_PROGRESS"])
    commit = h.commits[-1]
    h.do(CommitFailed(commit.token, tps("a-0"), E["REBALANCE_IN_PROGRESS"], 1, {TP_A0: 3}))
    h.finish()
    h.joined(error=E["UNKNOWN_MEMBER_ID"])
    h.joined(generation=4)
    assert of(CommitOffsets, h.synced("a-0")) == []


def test_eager_parked_commit_is_retried_when_the_partition_comes_back() -> None:
    h = Harness()
    h.stable("a-0")
    h.tick(1.0)
    h.beat(E["REBALANCE_IN_PROGRESS"])
    commit = h.commits[-1]
    h.do(CommitFailed(commit.token, tps("a-0"), E["REBALANCE_IN_PROGRESS"], 1, {TP_A0: 3}))
    h.finish()
    h.joined(generation=2)
    acts = h.synced("a-0", "a-1")
    retry = acts[0]
    assert isinstance(retry, CommitOffsets)
    assert (retry.partitions, retry.offsets, retry.member_epoch) == (tps("a-0"), {TP_A0: 3}, 2)


def test_commit_of_an_older_generation_is_retried_with_the_new_one_for_owned_partitions() -> None:
    h = Harness(COOP_STICKY)
    h.stable("a-0", "a-1", protocol="cooperative-sticky", generation=4)
    acts = h.do(CommitFailed(None, tps("a-0", "a-2"), E["ILLEGAL_GENERATION"], 3))
    retry = one(CommitOffsets, acts)
    assert retry.partitions == tps("a-0")
    assert retry.member_epoch == 4
    assert h.state() is S.STABLE


def test_commit_illegal_generation_in_the_current_generation_loses_the_assignment() -> None:
    h = Harness()
    h.stable("a-0")
    acts = h.do(CommitFailed(None, tps("a-0"), E["ILLEGAL_GENERATION"], 1))
    assert acts == [
        StopFetching(tps("a-0")),
        RunCallback(CallbackKind.LOST, h.callbacks[-1].token, tps("a-0")),
    ]
    assert h.m.generation_id == -1
    assert h.m.member_id == ME  # kept for ILLEGAL_GENERATION
    join = one(SendJoinGroup, h.callback_done())
    assert join.request.member_id == ME
    h.joined(generation=2)
    assert of(CommitOffsets, h.synced("a-0")) == []  # never re-committed after the loss


def test_commit_fenced_instance_id_is_fatal() -> None:
    h = Harness(instance_id="i-1")
    h.stable("a-0")
    acts = h.do(CommitFailed(None, tps("a-0"), E["FENCED_INSTANCE_ID"], 1))
    fatal = one(ReportFatalError, acts)
    assert fatal.name == "FENCED_INSTANCE_ID"
    # The broker sends no message: the member says what happened and what to do.
    assert fatal.message is not None
    assert "same group.instance.id (i-1)" in fatal.message
    assert h.state() is S.FATAL


def test_revocation_commit_refused_still_revokes_and_the_deadline_bounds_the_wait() -> None:
    h = Harness(session_timeout_ms=100_000)
    h.stable("a-0")
    h.tick(1.0)
    h.beat(E["REBALANCE_IN_PROGRESS"])
    commit = h.commits[-1]
    assert commit.deadline == 61.0
    assert h.m.next_deadline() == 2.0  # the next heartbeat comes first
    h.do(PollCalled(), at=50.0)
    acts = h.tick(61.0)
    assert one(RunCallback, acts).kind is CallbackKind.REVOKED


def test_every_commit_carries_generation_member_and_instance_id() -> None:
    h = Harness(instance_id="i-1")
    h.stable("a-0")
    h.tick(1.0)
    h.beat(E["REBALANCE_IN_PROGRESS"])
    c = h.commits[-1]
    assert (c.member_epoch, c.member_id, c.instance_id) == (1, ME, "i-1")


# ------------------------------------------------------------------ error tables

_HEARTBEAT_ROWS: list[tuple[str, S, list[type[Any]]]] = [
    ("REBALANCE_IN_PROGRESS", S.PREPARING, [StopFetching, CommitOffsets]),
    ("ILLEGAL_GENERATION", S.PREPARING, [StopFetching, RunCallback]),
    ("UNKNOWN_MEMBER_ID", S.PREPARING, [StopFetching, RunCallback]),
    ("FENCED_INSTANCE_ID", S.FATAL, [StopFetching, RunCallback, ReportFatalError]),
    ("GROUP_AUTHORIZATION_FAILED", S.FATAL, [StopFetching, RunCallback, ReportFatalError]),
    ("NOT_COORDINATOR", S.STABLE, [RediscoverCoordinator]),
    ("COORDINATOR_NOT_AVAILABLE", S.STABLE, [RediscoverCoordinator]),
    ("COORDINATOR_LOAD_IN_PROGRESS", S.STABLE, []),
    ("UNKNOWN_SERVER_ERROR", S.FATAL, [StopFetching, RunCallback, ReportFatalError]),
]


@pytest.mark.parametrize(("name", "state", "kinds"), _HEARTBEAT_ROWS)
def test_heartbeat_error_table(name: str, state: S, kinds: list[type[Any]]) -> None:
    h = Harness()
    h.stable("a-0")
    h.tick(1.0)
    acts = h.beat(E[name])
    assert [type(a) for a in acts] == kinds
    assert h.state() is state
    if kinds[1:2] == [RunCallback]:
        assert h.callbacks[-1].kind is CallbackKind.LOST
        assert not of(CommitOffsets, acts)
    if name == "UNKNOWN_MEMBER_ID":
        assert (h.m.generation_id, h.m.member_id) == (-1, "")
    if name == "ILLEGAL_GENERATION":
        assert (h.m.generation_id, h.m.member_id) == (-1, ME)


_JOIN_ROWS: list[tuple[str, S, list[type[Any]]]] = [
    ("MEMBER_ID_REQUIRED", S.JOINING, [SendJoinGroup]),
    ("REBALANCE_IN_PROGRESS", S.JOINING, [SendJoinGroup]),
    ("UNKNOWN_MEMBER_ID", S.JOINING, [SendJoinGroup]),
    ("COORDINATOR_LOAD_IN_PROGRESS", S.JOINING, []),
    ("NOT_COORDINATOR", S.JOINING, [RediscoverCoordinator]),
    ("COORDINATOR_NOT_AVAILABLE", S.JOINING, [RediscoverCoordinator]),
    ("FENCED_INSTANCE_ID", S.FATAL, [ReportFatalError]),
    ("INCONSISTENT_GROUP_PROTOCOL", S.FATAL, [ReportFatalError]),
    ("GROUP_MAX_SIZE_REACHED", S.FATAL, [ReportFatalError]),
    ("GROUP_AUTHORIZATION_FAILED", S.FATAL, [ReportFatalError]),
    ("INVALID_SESSION_TIMEOUT", S.FATAL, [ReportFatalError]),
    ("UNSUPPORTED_VERSION", S.FATAL, [ReportFatalError]),
]


@pytest.mark.parametrize(("name", "state", "kinds"), _JOIN_ROWS)
def test_join_error_table(name: str, state: S, kinds: list[type[Any]]) -> None:
    h = Harness()
    h.subscribe()
    acts = h.joined(error=E[name], member_id="x")
    assert [type(a) for a in acts] == kinds
    assert h.state() is state
    if state is S.FATAL:
        assert one(ReportFatalError, acts).name == name


_SYNC_ROWS: list[tuple[str, S, list[type[Any]]]] = [
    ("REBALANCE_IN_PROGRESS", S.JOINING, [SendJoinGroup]),
    ("ILLEGAL_GENERATION", S.JOINING, [SendJoinGroup]),
    ("UNKNOWN_MEMBER_ID", S.JOINING, [SendJoinGroup]),
    ("NOT_COORDINATOR", S.JOINING, [RediscoverCoordinator]),
    ("COORDINATOR_NOT_AVAILABLE", S.JOINING, [RediscoverCoordinator]),
    ("COORDINATOR_LOAD_IN_PROGRESS", S.JOINING, []),
    ("FENCED_INSTANCE_ID", S.FATAL, [ReportFatalError]),
    ("GROUP_AUTHORIZATION_FAILED", S.FATAL, [ReportFatalError]),
]


@pytest.mark.parametrize(("name", "state", "kinds"), _SYNC_ROWS)
def test_sync_error_table(name: str, state: S, kinds: list[type[Any]]) -> None:
    h = Harness()
    h.subscribe()
    h.joined()
    acts = h.synced(error=E[name])
    assert [type(a) for a in acts] == kinds
    assert h.state() is state
    if name == "UNKNOWN_MEMBER_ID":
        assert h.join is not None
        assert h.join.request.member_id == ""
    if name == "ILLEGAL_GENERATION":
        assert h.join is not None
        assert h.join.request.member_id == ME


_COMMIT_ROWS: list[tuple[str, int, S, list[type[Any]]]] = [
    ("REBALANCE_IN_PROGRESS", 27, S.PREPARING, [StopFetching, CommitOffsets]),
    ("ILLEGAL_GENERATION", 22, S.PREPARING, [StopFetching, RunCallback]),
    ("UNKNOWN_MEMBER_ID", 25, S.PREPARING, [StopFetching, RunCallback]),
    ("FENCED_INSTANCE_ID", 82, S.FATAL, [StopFetching, RunCallback, ReportFatalError]),
    # Not the member's business: the runtime retries or reports these.
    ("COORDINATOR_LOAD_IN_PROGRESS", 14, S.STABLE, []),
    ("OFFSET_METADATA_TOO_LARGE", 12, S.STABLE, []),
]


@pytest.mark.parametrize(("name", "code", "state", "kinds"), _COMMIT_ROWS)
def test_commit_error_table(name: str, code: int, state: S, kinds: list[type[Any]]) -> None:
    h = Harness()
    h.stable("a-0")
    acts = h.do(CommitFailed(None, tps("a-0"), code, 1))
    assert [type(a) for a in acts] == kinds
    assert h.state() is state
    if RunCallback in kinds:
        assert h.callbacks[-1].kind is CallbackKind.LOST


def test_heartbeat_errors_about_an_older_generation_are_ignored() -> None:
    h = Harness()
    h.stable("a-0")
    h.tick(1.0)
    old = h.heartbeat
    assert old is not None
    h.beat(E["REBALANCE_IN_PROGRESS"])
    h.finish()
    h.joined(generation=2)
    # A late answer to a heartbeat of generation 1 is dropped by seq already;
    # one sent in generation 2 and answered ILLEGAL_GENERATION for it counts.
    assert h.do(ClassicHeartbeatResponseReceived(old.seq, E["ILLEGAL_GENERATION"])) == []
    assert h.state() is S.SYNCING


def test_rebalance_in_progress_outside_stable_does_not_restart_the_join() -> None:
    h = Harness()
    h.subscribe()
    h.joined()
    h.tick(1.0)
    assert h.beat(E["REBALANCE_IN_PROGRESS"]) == []
    assert h.state() is S.SYNCING


def test_rebalance_in_progress_while_reconciling_rejoins_after_the_callbacks() -> None:
    h = Harness()
    h.subscribe()
    h.joined()
    h.synced("a-0")
    h.tick(1.0)
    assert h.beat(E["REBALANCE_IN_PROGRESS"]) == []
    acts = h.callback_done()
    assert acts[0] == StartFetching(tps("a-0"))
    assert h.state() is S.PREPARING  # eager: revoking before the next join


def test_error_reaction_table_covers_the_reference() -> None:
    assert classic_reaction_for(E["REBALANCE_IN_PROGRESS"]) is ClassicReaction.REBALANCING
    assert classic_reaction_for(E["ILLEGAL_GENERATION"]) is ClassicReaction.RESET_GENERATION
    assert classic_reaction_for(E["UNKNOWN_MEMBER_ID"]) is ClassicReaction.RESET_MEMBER
    assert classic_reaction_for(E["MEMBER_ID_REQUIRED"]) is ClassicReaction.MEMBER_ID_REQUIRED
    for name in (
        "FENCED_INSTANCE_ID",
        "INCONSISTENT_GROUP_PROTOCOL",
        "GROUP_MAX_SIZE_REACHED",
        "GROUP_AUTHORIZATION_FAILED",
    ):
        assert classic_reaction_for(E[name]) is ClassicReaction.FATAL
    for name in ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"):
        assert classic_reaction_for(E[name]) is ClassicReaction.REDISCOVER
    assert classic_reaction_for(E["COORDINATOR_LOAD_IN_PROGRESS"]) is (
        ClassicReaction.RETRY_WITH_BACKOFF
    )
    assert classic_reaction_for(9999) is ClassicReaction.FATAL
    assert classic_error_name(9999) == "UNKNOWN_ERROR_9999"
    with pytest.raises(ValueError, match="success"):
        classic_reaction_for(0)


def test_join_response_with_a_foreign_protocol_is_fatal() -> None:
    h = Harness()
    h.subscribe()
    acts = h.joined(protocol="roundrobin")
    fatal = one(ReportFatalError, acts)
    assert fatal.name == "INCONSISTENT_GROUP_PROTOCOL"
    assert "roundrobin" in (fatal.message or "")


# ------------------------------------------------------------- session, metadata


def test_no_successful_heartbeat_within_the_session_timeout_rediscovers() -> None:
    h = Harness()
    h.stable("a-0")
    h.tick(1.0)  # heartbeat in flight, never answered
    assert h.m.next_deadline() == 10.0
    # Issue 10 (session-timeout rule): it still rediscovers the coordinator,
    # and now also stops fetching and reports its partitions lost.
    acts = h.tick(10.0)
    assert RediscoverCoordinator() in acts
    assert one(RunCallback, acts).kind is CallbackKind.LOST
    assert h.heartbeat is not None
    h.do(RequestFailed(h.heartbeat.seq, FailureKind.DISCONNECTED))
    acts = h.do(CoordinatorRediscovered(), at=10.5)
    # Out of the generation: no heartbeat; it rejoins once the lost callback ran.
    assert of(SendClassicHeartbeat, acts) == []
    assert len(of(SendJoinGroup, h.callback_done())) == 1


@pytest.mark.parametrize("instance_id", [None, "static-1"])
def test_no_successful_heartbeat_for_a_session_timeout_loses_the_assignment_and_rejoins(
    instance_id: str | None,
) -> None:
    h = Harness(instance_id=instance_id)
    h.stable("a-0", "a-1")  # joined at t=0: the session runs until t=10
    h.tick(1.0)  # a heartbeat goes out and is never answered
    assert h.heartbeat is not None
    h.do(RequestFailed(h.heartbeat.seq, FailureKind.TIMEOUT), at=6.0)
    assert of(RunCallback, h.tick(9.9)) == []
    assert h.state() is S.STABLE
    assert h.m.assignment == tps("a-0", "a-1")
    acts = h.tick(10.0)
    lost = h.callbacks[-1]
    # Before hearing from the broker: fetching stops, the loss is reported, the
    # coordinator is looked up again; nothing is committed.
    assert acts == [
        RediscoverCoordinator(),
        StopFetching(tps("a-0", "a-1")),
        RunCallback(CallbackKind.LOST, lost.token, tps("a-0", "a-1")),
    ]
    assert h.commits == []
    assert h.m.assignment == frozenset()
    assert h.m.generation_id == -1
    assert h.state() is S.PREPARING
    # Out of the generation: no heartbeat or session deadline, only the poll timer.
    assert h.m.next_deadline() == 60.0
    # The lost callback ran; the JoinGroup waits for the coordinator.
    assert of(SendJoinGroup, h.callback_done()) == []
    assert h.state() is S.JOINING
    acts = h.do(CoordinatorRediscovered(), at=12.0)
    join = one(SendJoinGroup, acts).request
    assert (join.member_id, join.instance_id) == (ME, instance_id)
    assert h.commits == []
    # The coordinator answers: back in the group with a new generation.
    h.joined(generation=2)
    h.synced("a-0", "a-1")
    h.finish()
    assert h.state() is S.STABLE
    assert h.m.assignment == tps("a-0", "a-1")


@pytest.mark.parametrize(("margin_ms", "expiry"), [(250, 9.75), (8_000, 5.0)])
def test_the_session_margin_gives_the_session_up_that_much_sooner(
    margin_ms: int, expiry: float
) -> None:
    h = Harness(session_margin_ms=margin_ms)
    h.stable("a-0")  # joined at t=0
    h.tick(1.0)  # a heartbeat goes out and is never answered
    assert h.m.next_deadline() == pytest.approx(expiry)
    assert of(StopFetching, h.tick(expiry - 0.01)) == []
    assert of(StopFetching, h.tick(expiry)) == [StopFetching(tps("a-0"))]


def test_session_timeout_counts_while_the_coordinator_is_looked_up() -> None:
    h = Harness()
    h.stable("a-0")
    h.tick(1.0)
    assert h.beat(E["NOT_COORDINATOR"]) == [RediscoverCoordinator()]
    # No coordinator found for a session timeout after the last successful
    # heartbeat (the join at t=0): the assignment is lost all the same.
    assert h.m.next_deadline() == 10.0
    acts = h.tick(10.0)
    assert one(RunCallback, acts) == RunCallback(
        CallbackKind.LOST, h.callbacks[-1].token, tps("a-0")
    )
    assert h.m.assignment == frozenset()


def test_session_timeout_during_a_cooperative_revoke_reports_only_the_rest_lost() -> None:
    h = Harness(COOP_STICKY, auto_commit=False)
    h.subscribe("a", "b")
    h.stable("a-0", "b-0", protocol="cooperative-sticky")
    h.do(SubscriptionChanged(frozenset({"a"})), at=1.0)  # revoke callback of b-0 runs
    revoked = h.callbacks[-1]
    assert (revoked.kind, revoked.partitions) == (CallbackKind.REVOKED, tps("b-0"))
    assert h.state() is S.PREPARING
    acts = h.tick(10.0)
    lost = one(RunCallback, acts)
    assert lost == RunCallback(CallbackKind.LOST, lost.token, tps("a-0"))
    assert h.m.assignment == frozenset()


@pytest.mark.parametrize("error", ["UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"])
def test_fence_after_a_revoke_callback_reports_only_the_rest_lost(error: str) -> None:
    h = Harness(COOP_STICKY, auto_commit=False)
    h.stable("a-0", "a-1", protocol="cooperative-sticky")
    h.tick(1.0)
    h.beat(E["REBALANCE_IN_PROGRESS"])
    h.joined(generation=2, protocol="cooperative-sticky")
    h.synced("a-0")  # the revoke callback of a-1 is handed out
    revoked = h.callbacks[-1]
    assert (revoked.kind, revoked.partitions) == (CallbackKind.REVOKED, tps("a-1"))
    h.tick(2.0)
    acts = h.beat(E[error])  # fenced while that callback runs
    # Callbacks are deltas (issue 10 item 6): a-1 was reported revoked.
    lost = one(RunCallback, acts)
    assert lost == RunCallback(CallbackKind.LOST, lost.token, tps("a-0"))
    assert h.m.assignment == frozenset()
    assert h.commits == []


def test_metadata_change_makes_the_leader_rejoin_and_is_ignored_by_followers() -> None:
    follower = Harness()
    follower.stable("a-0")
    assert follower.do(SubscribedMetadataChanged()) == []
    assert follower.state() is S.STABLE
    leader = Harness()
    leader.stable("a-0", leader=ME)
    acts = leader.do(SubscribedMetadataChanged())
    assert acts[0] == StopFetching(tps("a-0"))
    assert leader.state() is S.PREPARING


def test_subscription_change_during_sync_rejoins_after_the_reconciliation() -> None:
    h = Harness()
    h.subscribe("a")
    h.joined()
    h.do(SubscriptionChanged(frozenset({"a", "b"})))
    h.synced("a-0")
    h.callback_done()
    assert h.state() is S.PREPARING


# --------------------------------------------------------------- poll timeout


def test_poll_timeout_leaves_loses_the_assignment_and_rejoins_on_the_next_poll() -> None:
    h = Harness(session_timeout_ms=100_000)
    h.stable("a-0")
    acts = h.tick(60.0)
    leave = one(SendLeaveGroup, acts)
    assert acts == [
        StopFetching(tps("a-0")),
        leave,
        RunCallback(CallbackKind.LOST, h.callbacks[-1].token, tps("a-0")),
    ]
    assert leave.member_id == ME
    assert h.state() is S.STALE
    assert (h.m.generation_id, h.m.member_id) == (-1, "")
    assert h.callback_done() == []
    assert h.state() is S.STALE
    acts = h.do(PollCalled(), at=61.0)
    join = one(SendJoinGroup, acts)
    assert join.request.member_id == ""
    assert h.state() is S.JOINING


def test_poll_timeout_of_a_static_member_sends_no_leave() -> None:
    h = Harness(instance_id="i-1")
    h.stable("a-0")
    acts = h.tick(60.0)
    assert of(SendLeaveGroup, acts) == []
    assert h.state() is S.STALE


def test_polling_keeps_the_member_in_the_group() -> None:
    h = Harness()
    h.stable("a-0")
    for t in range(1, 100):
        h.do(PollCalled(), at=float(t))
        if h.heartbeat is not None and h.heartbeat.seq:
            h.beat()
    assert h.state() is S.STABLE


# --------------------------------------------------------- leaving and closing


def test_close_of_a_dynamic_member_commits_revokes_and_leaves() -> None:
    h = Harness()
    h.stable("a-0")
    acts = h.do(CloseRequested(deadline=30.0))
    assert acts[0] == StopFetching(tps("a-0"))
    assert isinstance(acts[1], CommitOffsets)
    assert h.state() is S.LEAVING
    assert h.commit_done() == [RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0"))]
    acts = h.callback_done()
    leave = one(SendLeaveGroup, acts)
    assert acts == [leave]
    assert (leave.member_id, leave.instance_id) == (ME, None)
    assert h.do(LeaveGroupResponseReceived(leave.seq)) == [Closed(False)]
    assert h.m.closed
    assert h.m.next_deadline() is None
    assert h.do(PollCalled()) == []


def test_close_of_a_static_member_sends_no_leave_group() -> None:
    h = Harness(instance_id="i-1")
    h.subscribe()
    assert h.join is not None
    assert h.join.request.instance_id == "i-1"
    h.joined()
    assert h.sync is not None
    assert h.sync.request.instance_id == "i-1"
    h.synced("a-0")
    h.finish()
    h.tick(1.0)
    assert h.heartbeat is not None
    assert h.heartbeat.instance_id == "i-1"
    h.do(CloseRequested(deadline=30.0))
    h.commit_done()
    assert h.callback_done() == [Closed(False)]
    assert h.leave is None


def test_close_deadline_cuts_the_release_short() -> None:
    h = Harness()
    h.stable("a-0")
    h.do(CloseRequested(deadline=5.0))
    assert h.commits[-1].deadline == 5.0
    acts = h.tick(5.0)
    assert [type(a) for a in acts] == [SendLeaveGroup, Closed]
    assert acts[-1] == Closed(True)


def test_close_while_unjoined_or_fatal_closes_at_once() -> None:
    h = Harness()
    assert h.do(CloseRequested(deadline=5.0)) == [Closed(False)]
    f = Harness()
    f.subscribe()
    f.joined(error=E["GROUP_AUTHORIZATION_FAILED"])
    assert f.do(CloseRequested(deadline=5.0)) == [Closed(False)]


def test_unsubscribe_releases_leaves_and_can_subscribe_again() -> None:
    h = Harness()
    h.stable("a-0")
    h.do(Unsubscribe())
    h.finish()
    assert h.leave is not None
    assert h.do(LeaveGroupResponseReceived(h.leave.seq, E["UNKNOWN_MEMBER_ID"])) == [
        LeaveComplete()
    ]
    assert h.state() is S.UNJOINED
    assert h.m.member_id == ""
    acts = h.subscribe()
    assert one(SendJoinGroup, acts).request.member_id == ""


def test_callback_errors_surface_but_do_not_stop_the_rebalance() -> None:
    h = Harness()
    h.subscribe()
    h.joined()
    h.synced("a-0")
    boom = RuntimeError("boom")
    acts = h.callback_done(boom)
    assert acts == [RaiseCallbackError(CallbackKind.ASSIGNED, boom), StartFetching(tps("a-0"))]
    assert h.state() is S.STABLE


# ------------------------------------------------------- the transition table


def _reach(state: S) -> Harness:
    """A member in ``state``, reached by the shortest ordinary scenario."""
    h = Harness()
    if state is S.UNJOINED:
        return h
    if state is S.CLOSED:
        h.do(CloseRequested(5.0))
        return h
    h.subscribe()
    if state is S.JOINING:
        return h
    if state is S.FATAL:
        h.joined(error=E["GROUP_MAX_SIZE_REACHED"])
        return h
    if state is S.AWAITING_ASSIGNOR:
        h.joined(leader=ME)
        return h
    h.joined()
    if state is S.SYNCING:
        return h
    h.synced("a-0")
    if state is S.RECONCILING:
        return h
    h.finish()
    if state is S.STABLE:
        return h
    if state is S.PREPARING:
        h.tick(1.0)
        h.beat(E["REBALANCE_IN_PROGRESS"])
        return h
    if state is S.STALE:
        h.tick(60.0)
        return h
    assert state is S.LEAVING
    h.do(Unsubscribe())
    return h


def _events(h: Harness) -> list[ClassicEvent]:
    """One event of every kind, answering what the member waits for where it can."""
    join_seq = h.join.seq if h.join else 0
    sync_seq = h.sync.seq if h.sync else 0
    hb_seq = h.heartbeat.seq if h.heartbeat else 0
    leave_seq = h.leave.seq if h.leave else 0
    token = h.callbacks[-1].token if h.callbacks else 0
    commit = h.commits[-1].token if h.commits else 0
    gen = h.m.generation_id
    return [
        SubscriptionChanged(frozenset({"a", "b"})),
        Unsubscribe(),
        PollCalled(),
        JoinGroupResponseReceived(
            join_seq, JoinGroupResponse(0, 2, "consumer", "range", OTHER, ME)
        ),
        SyncGroupResponseReceived(sync_seq, SyncGroupResponse(0, ClassicAssignment(tps("a-1")))),
        ClassicHeartbeatResponseReceived(hb_seq, E["REBALANCE_IN_PROGRESS"]),
        LeaveGroupResponseReceived(leave_seq),
        RequestFailed(join_seq, FailureKind.TIMEOUT),
        AssignmentComputed(gen, {ME: ClassicAssignment(tps("a-0"))}),
        AssignorFailed(gen, "bad"),
        SubscribedMetadataChanged(),
        CallbackCompleted(CallbackKind.ASSIGNED, token),
        CommitCompleted(commit),
        CommitFailed(commit, tps("a-0"), E["ILLEGAL_GENERATION"], gen),
        CloseRequested(h.now + 5.0),
        TimerTick(),
        CoordinatorRediscovered(),
    ]


_EVENT_KINDS = [type(e).__name__ for e in _events(Harness())]

# Pairs where the event changes the state; every other pair is a documented
# ignore (docs/classic-protocol.md, "Events each state ignores").
_CHANGES: dict[tuple[S, str], S] = {
    (S.UNJOINED, "SubscriptionChanged"): S.JOINING,
    (S.UNJOINED, "CloseRequested"): S.CLOSED,
    (S.JOINING, "Unsubscribe"): S.UNJOINED,
    (S.JOINING, "JoinGroupResponseReceived"): S.SYNCING,
    (S.JOINING, "CloseRequested"): S.CLOSED,
    (S.AWAITING_ASSIGNOR, "Unsubscribe"): S.LEAVING,
    (S.AWAITING_ASSIGNOR, "AssignmentComputed"): S.SYNCING,
    (S.AWAITING_ASSIGNOR, "AssignorFailed"): S.FATAL,
    (S.AWAITING_ASSIGNOR, "CloseRequested"): S.LEAVING,
    (S.AWAITING_ASSIGNOR, "CommitFailed"): S.JOINING,
    (S.SYNCING, "Unsubscribe"): S.LEAVING,
    (S.SYNCING, "SyncGroupResponseReceived"): S.RECONCILING,
    (S.SYNCING, "RequestFailed"): S.SYNCING,
    (S.SYNCING, "CloseRequested"): S.LEAVING,
    (S.SYNCING, "CommitFailed"): S.JOINING,
    (S.RECONCILING, "Unsubscribe"): S.LEAVING,
    (S.RECONCILING, "CallbackCompleted"): S.STABLE,
    (S.RECONCILING, "CommitFailed"): S.PREPARING,
    (S.RECONCILING, "CloseRequested"): S.LEAVING,
    (S.STABLE, "SubscriptionChanged"): S.PREPARING,
    (S.STABLE, "Unsubscribe"): S.LEAVING,
    (S.STABLE, "CommitFailed"): S.PREPARING,
    (S.STABLE, "CloseRequested"): S.LEAVING,
    (S.PREPARING, "Unsubscribe"): S.LEAVING,
    (S.PREPARING, "CommitCompleted"): S.PREPARING,
    # ILLEGAL_GENERATION refusing the revocation commit: the preparation starts
    # again as a loss; the revoke callback already handed out still runs, and
    # nothing else is owned, so the join goes out (seed 248656).
    (S.PREPARING, "CommitFailed"): S.JOINING,
    (S.PREPARING, "CloseRequested"): S.LEAVING,
    # The LeaveGroup sent on the poll timeout is still in flight: wait for it.
    (S.STALE, "Unsubscribe"): S.LEAVING,
    (S.STALE, "CloseRequested"): S.LEAVING,
    (S.LEAVING, "CloseRequested"): S.LEAVING,
    (S.LEAVING, "CallbackCompleted"): S.LEAVING,
    (S.FATAL, "CloseRequested"): S.CLOSED,
}


@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("kind", _EVENT_KINDS)
def test_every_state_and_event(state: S, kind: str) -> None:
    h = _reach(state)
    assert h.state() is state
    event = next(e for e in _events(h) if type(e).__name__ == kind)
    # Every state change goes through the table, so a missing edge would
    # raise IllegalTransitionError here.
    h.do(event, at=h.now + 0.01)
    expected = _CHANGES.get((state, kind), state)
    assert h.state() is expected, (state.name, kind, h.state().name)


def test_table_states_are_all_reachable_and_closed_is_final() -> None:
    sources = {src for src, _ in CLASSIC_TRANSITIONS}
    targets = set(CLASSIC_TRANSITIONS.values())
    assert targets | {S.UNJOINED} == set(S)
    assert S.CLOSED not in sources


def test_illegal_transition_raises_a_clear_internal_error() -> None:
    with pytest.raises(IllegalTransitionError, match=r"internal error.*STABLE.*SYNCED"):
        next_classic_state(S.STABLE, ClassicTrigger.SYNCED)
    assert next_classic_state(S.SYNCING, ClassicTrigger.SYNCED) is S.RECONCILING


def test_docs_diagram_matches_the_table() -> None:
    doc = Path(__file__).parents[2] / "docs" / "classic-protocol.md"
    text = doc.read_text()
    assert replace_classic_diagram(text) == text, (
        "docs/classic-protocol.md is out of date: regenerate its diagram with "
        "kgroup.membership.classic.states.replace_classic_diagram"
    )


def test_rendered_diagram_has_one_line_per_edge_pair() -> None:
    diagram = render_classic_mermaid()
    assert diagram.startswith(CLASSIC_DIAGRAM_BEGIN)
    assert diagram.rstrip().endswith(CLASSIC_DIAGRAM_END)
    edges = {(s, d) for (s, _), d in CLASSIC_TRANSITIONS.items()}
    lines = [ln for ln in diagram.splitlines() if ln.startswith("    ") and "[*]" not in ln]
    assert len(lines) == len(edges)


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="group_id"):
        ClassicMemberConfig(group_id="")
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        ClassicMemberConfig(group_id="g", heartbeat_interval_ms=5000, session_timeout_ms=5000)
    with pytest.raises(ValueError, match="instance_id"):
        ClassicMemberConfig(group_id="g", instance_id="")
    with pytest.raises(ValueError, match="assignor"):
        ClassicMember(ClassicMemberConfig(group_id="g"), {})
    with pytest.raises(ValueError, match="no rebalance protocol"):
        ClassicMember(ClassicMemberConfig(group_id="g"), {"x": set()})


def test_a_generation_reset_while_preparing_stops_fetching_what_is_still_owned_at_once() -> None:
    # Seed 248656 (soak range): m4 (cooperative) dropped a topic, so it was
    # PREPARING: t0-4 stopped and its revocation commit was being retried
    # (coordinator loading), while it kept fetching its t1 partitions. A
    # heartbeat answered ILLEGAL_GENERATION, and the member reset its generation
    # but let the preparation finish as it began: with the commit still retrying
    # it fetched t1-1 and t1-6 for over a session without a generation, while
    # the group went on without it. Now the preparation starts again as a loss.
    h = Harness(COOP_STICKY)
    h.subscribe("a", "b")
    h.stable("a-0", "b-0", protocol="cooperative-sticky")
    acts = h.subscribe("a")
    assert h.state() is S.PREPARING
    assert of(StopFetching, acts) == [StopFetching(tps("b-0"))]
    one(CommitOffsets, acts)  # the revocation commit of b-0, not answered yet
    h.tick(h.now + 3.0)
    acts = h.beat(E["ILLEGAL_GENERATION"])
    assert of(StopFetching, acts) == [StopFetching(tps("a-0"))]
    (lost,) = of(RunCallback, acts)
    assert (lost.kind, lost.partitions) == (CallbackKind.LOST, tps("a-0", "b-0"))
    assert h.m.generation_id == -1
    assert h.state() is S.PREPARING
    h.answered.add(h.commits[-1].token)
    # The abandoned commit's late answer changes nothing; the lost callback's end
    # lets the join go out, owning nothing.
    assert not of(RunCallback, h.do(CommitCompleted(h.commits[-1].token)))
    acts = h.callback_done()
    one(SendJoinGroup, acts)
    assert h.m.assignment == frozenset()
