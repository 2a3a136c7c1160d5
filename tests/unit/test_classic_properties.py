"""Hypothesis: random event sequences keep the classic member's safety promises."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from listener_helpers import StateSeen

from kgroup.error_codes import ERROR_CODES as E
from kgroup.membership import (
    AssignmentComputed,
    AssignorFailed,
    CallbackCompleted,
    CallbackKind,
    ClassicAction,
    ClassicAssignment,
    ClassicEvent,
    ClassicHeartbeatResponseReceived,
    ClassicMember,
    ClassicMemberConfig,
    ClassicState,
    Closed,
    CloseRequested,
    CommitCompleted,
    CommitFailed,
    CommitOffsets,
    CoordinatorRediscovered,
    FailureKind,
    JoinGroupResponse,
    JoinGroupResponseReceived,
    LeaveGroupResponseReceived,
    PollCalled,
    RebalanceProtocol,
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
)
from kgroup.types import TopicPartition

EAGER = RebalanceProtocol.EAGER
COOP = RebalanceProtocol.COOPERATIVE
ASSIGNOR_SETS: list[Mapping[str, set[RebalanceProtocol]]] = [
    {"range": {EAGER}},
    {"cooperative-sticky": {EAGER, COOP}},
    {"cooperative-sticky": {EAGER, COOP}, "range": {EAGER}},
]
UNIVERSE = [TopicPartition(t, p) for t in ("a", "b") for p in range(3)]
JOIN_ERRORS = [
    E["MEMBER_ID_REQUIRED"],
    E["REBALANCE_IN_PROGRESS"],
    E["UNKNOWN_MEMBER_ID"],
    E["COORDINATOR_LOAD_IN_PROGRESS"],
    E["NOT_COORDINATOR"],
]
FATAL_CODES = [E["GROUP_MAX_SIZE_REACHED"], E["FENCED_INSTANCE_ID"]]
SYNC_ERRORS = [
    E["REBALANCE_IN_PROGRESS"],
    E["ILLEGAL_GENERATION"],
    E["UNKNOWN_MEMBER_ID"],
    E["COORDINATOR_NOT_AVAILABLE"],
    E["COORDINATOR_LOAD_IN_PROGRESS"],
]
HEARTBEAT_CODES = [
    *([0] * 8),
    E["REBALANCE_IN_PROGRESS"],
    E["REBALANCE_IN_PROGRESS"],
    E["ILLEGAL_GENERATION"],
    E["UNKNOWN_MEMBER_ID"],
    E["NOT_COORDINATOR"],
    E["COORDINATOR_LOAD_IN_PROGRESS"],
]
COMMIT_CODES = [
    E["REBALANCE_IN_PROGRESS"],
    E["ILLEGAL_GENERATION"],
    E["UNKNOWN_MEMBER_ID"],
    E["COORDINATOR_LOAD_IN_PROGRESS"],
]
_REQUESTS = (SendJoinGroup, SendSyncGroup, SendClassicHeartbeat, SendLeaveGroup)
# Weighted: the coordinator and the runtime answer most of the time, so the
# member gets through rebalances and reaches STABLE often.
_CHOICES = [
    *(["respond"] * 8),
    *(["runtime"] * 6),
    *(["tick"] * 3),
    *(["poll"] * 3),
    "fail",
    "commit",
    "runtime_commit",
    "subscribe",
    "unsubscribe",
    "metadata",
    "rediscover",
    "close",
    "fatal",
]


class World:
    """A runtime and coordinator stand-in that checks every action list the member returns."""

    def __init__(self, assignors: Mapping[str, set[RebalanceProtocol]], static: bool) -> None:
        self.assignors = assignors
        self.seen = StateSeen()
        self.m = ClassicMember(
            ClassicMemberConfig(
                group_id="g",
                instance_id="i-1" if static else None,
                session_timeout_ms=10_000,
                heartbeat_interval_ms=1_000,
                max_poll_interval_ms=30_000,
            ),
            assignors,
            random=lambda: 0.5,
            listener=self.seen,
        )
        self.now = 0.0
        self.generation = 0
        self.in_flight: dict[type[object], int] = {}
        self.callbacks: list[RunCallback] = []
        self.commits: list[CommitOffsets] = []
        self.run_assignor: RunAssignor | None = None
        self.fetching: set[TopicPartition] = set()
        self.owned: set[TopicPartition] = set()  # as the listener saw it
        self.lost: set[TopicPartition] = set()  # lost and not assigned again since
        self.closed = False

    def handle(self, event: ClassicEvent, synced: frozenset[TopicPartition] | None = None) -> None:
        before = self.m.state
        acts = self.m.handle(event, self.now)
        assert self.seen.state is self.m.state  # the listener was told every change
        accepted_sync = (
            synced is not None
            and before is ClassicState.SYNCING
            and self.m.state is not ClassicState.SYNCING
            and self.m.state is not ClassicState.FATAL
        )
        self.check(acts, synced if accepted_sync else None)
        if accepted_sync and synced is not None:
            self.lost -= synced
            if self.m.rebalance_protocol is COOP:
                # KIP-429: nothing the new assignment dropped keeps fetching here.
                assert self.fetching <= synced, (self.fetching, synced)

    def check(self, acts: list[ClassicAction], synced: frozenset[TopicPartition] | None) -> None:
        for a in acts:
            assert not self.closed, f"action after Closed: {a}"
            if isinstance(a, _REQUESTS):
                kind = type(a)
                assert kind not in self.in_flight, f"two {kind.__name__} in flight"
                self.in_flight[kind] = a.seq
            elif isinstance(a, RunAssignor):
                self.run_assignor = a
            elif isinstance(a, RunCallback):
                self.callbacks.append(a)
                if a.kind is CallbackKind.ASSIGNED:
                    self.owned |= a.partitions
                else:
                    self.owned -= a.partitions
                if a.kind is CallbackKind.LOST:
                    self.lost |= a.partitions
            elif isinstance(a, CommitOffsets):
                assert not (a.partitions & self.lost), f"commit of lost partitions {a}"
                allowed = self.owned | (synced or frozenset())
                assert a.partitions <= allowed, (a.partitions, allowed)
                self.commits.append(a)
            elif isinstance(a, StartFetching):
                assert a.partitions <= self.m.assignment, (a.partitions, self.m.assignment)
                self.fetching |= a.partitions
            elif isinstance(a, StopFetching):
                assert a.partitions <= self.fetching
                self.fetching -= a.partitions
            elif isinstance(a, Closed):
                self.closed = True
        assert self.fetching <= self.m.assignment, (self.fetching, self.m.assignment)

    def answered(self, kind: type[object]) -> int | None:
        return self.in_flight.pop(kind, None)


@st.composite
def _subset(draw: st.DrawFn) -> frozenset[TopicPartition]:
    return frozenset(draw(st.sets(st.sampled_from(UNIVERSE), max_size=4)))


def _step(world: World, data: st.DataObject) -> None:
    choice = data.draw(st.sampled_from(_CHOICES))
    if choice == "respond":
        # The coordinator answers whatever is in flight, mostly with success.
        pending = [
            k
            for k in (SendJoinGroup, SendSyncGroup, SendClassicHeartbeat, SendLeaveGroup)
            if k in world.in_flight
        ]
        if not pending:
            choice = "tick"
        else:
            choice = {
                SendJoinGroup: "join",
                SendSyncGroup: "sync",
                SendClassicHeartbeat: "heartbeat",
                SendLeaveGroup: "leave",
            }[data.draw(st.sampled_from(pending))]
    elif choice == "runtime":
        choice = "callback" if world.callbacks else "commit" if world.commits else "assignor"
    w = world
    if choice == "tick":
        deadline = w.m.next_deadline()
        step = data.draw(st.floats(min_value=0.0, max_value=1.5))
        w.now = max(w.now, deadline) if deadline is not None and step > 1.4 else w.now + step
        w.handle(TimerTick())
    elif choice == "poll":
        w.handle(PollCalled())
    elif choice == "join":
        seq = w.answered(SendJoinGroup)
        if seq is None:
            return
        if data.draw(st.integers(0, 3)) == 0:
            code = data.draw(st.sampled_from(JOIN_ERRORS))
            w.handle(JoinGroupResponseReceived(seq, JoinGroupResponse(code, member_id="me")))
            return
        w.generation += 1
        protocol = data.draw(st.sampled_from(sorted(w.assignors)))
        leader = data.draw(st.sampled_from(["me", "other"]))
        resp = JoinGroupResponse(0, w.generation, "consumer", protocol, leader, "me")
        w.handle(JoinGroupResponseReceived(seq, resp))
    elif choice == "sync":
        seq = w.answered(SendSyncGroup)
        if seq is None:
            return
        if data.draw(st.integers(0, 3)) == 0:
            code = data.draw(st.sampled_from(SYNC_ERRORS))
            w.handle(SyncGroupResponseReceived(seq, SyncGroupResponse(code)))
            return
        assigned = data.draw(_subset())
        sync_resp = SyncGroupResponse(0, ClassicAssignment(assigned))
        w.handle(SyncGroupResponseReceived(seq, sync_resp), synced=assigned)
    elif choice == "heartbeat":
        seq = w.answered(SendClassicHeartbeat)
        if seq is not None:
            code = data.draw(st.sampled_from(HEARTBEAT_CODES))
            w.handle(ClassicHeartbeatResponseReceived(seq, code))
    elif choice == "leave":
        seq = w.answered(SendLeaveGroup)
        if seq is not None:
            w.handle(LeaveGroupResponseReceived(seq))
    elif choice == "fail":
        if not w.in_flight:
            return
        kind = data.draw(st.sampled_from(sorted(w.in_flight, key=lambda k: k.__name__)))
        seq = w.in_flight.pop(kind)
        fk = data.draw(st.sampled_from([FailureKind.TIMEOUT, FailureKind.DISCONNECTED]))
        w.handle(RequestFailed(seq, fk))
    elif choice == "callback":
        if w.callbacks:
            cb = w.callbacks.pop(0)
            error = RuntimeError("listener") if data.draw(st.integers(0, 9)) == 0 else None
            w.handle(CallbackCompleted(cb.kind, cb.token, error))
    elif choice == "commit":
        if w.commits:
            c = w.commits.pop(0)
            if data.draw(st.booleans()):
                w.handle(CommitCompleted(c.token))
            else:
                code = data.draw(st.sampled_from(COMMIT_CODES))
                w.handle(CommitFailed(c.token, c.partitions, code, c.member_epoch))
    elif choice == "runtime_commit":
        parts = data.draw(_subset())
        code = data.draw(st.sampled_from(COMMIT_CODES))
        gen = w.m.generation_id - data.draw(st.integers(0, 1))
        offsets = {tp: 7 for tp in parts}
        w.handle(CommitFailed(None, parts, code, gen, offsets))
    elif choice == "assignor":
        run = w.run_assignor
        if run is None:
            return
        w.run_assignor = None
        if data.draw(st.integers(0, 19)) == 0:
            w.handle(AssignorFailed(run.generation_id, "invalid"))
        else:
            mine = ClassicAssignment(data.draw(_subset()))
            w.handle(AssignmentComputed(run.generation_id, {"me": mine}))
    elif choice == "subscribe":
        topics = data.draw(st.sets(st.sampled_from(["a", "b"]), min_size=1))
        w.handle(SubscriptionChanged(frozenset(topics)))
    elif choice == "unsubscribe":
        if data.draw(st.integers(0, 4)) == 0:
            w.handle(Unsubscribe())
    elif choice == "metadata":
        w.handle(SubscribedMetadataChanged())
    elif choice == "rediscover":
        w.handle(CoordinatorRediscovered())
    elif choice == "close" and data.draw(st.integers(0, 9)) == 0:
        w.handle(CloseRequested(w.now + data.draw(st.floats(0.0, 10.0))))
    elif choice == "fatal" and data.draw(st.integers(0, 9)) == 0:
        # A rare fatal answer to whatever is in flight.
        if (seq := w.answered(SendClassicHeartbeat)) is not None:
            w.handle(ClassicHeartbeatResponseReceived(seq, data.draw(st.sampled_from(FATAL_CODES))))
        elif (seq := w.answered(SendJoinGroup)) is not None:
            code = data.draw(st.sampled_from(FATAL_CODES))
            w.handle(JoinGroupResponseReceived(seq, JoinGroupResponse(code)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    assignors=st.sampled_from(ASSIGNOR_SETS),
    static=st.booleans(),
    data=st.data(),
)
def test_random_event_sequences_keep_the_safety_promises(
    assignors: Mapping[str, set[RebalanceProtocol]], static: bool, data: st.DataObject
) -> None:
    world = World(assignors, static)
    world.handle(SubscriptionChanged(frozenset({"a"})))
    for _ in range(data.draw(st.integers(10, 120))):
        _step(world, data)
        if world.closed:
            break
    # Fetching is always part of the installed assignment (checked per step);
    # a closed member stays silent.
    if world.closed:
        assert world.m.handle(TimerTick(), world.now + 100.0) == []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_cooperative_member_never_fetches_a_partition_its_assignment_dropped(
    data: st.DataObject,
) -> None:
    world = World({"cooperative-sticky": {EAGER, COOP}}, static=False)
    world.handle(SubscriptionChanged(frozenset({"a", "b"})))
    for _ in range(data.draw(st.integers(10, 80))):
        # Only the rebalance path: join, sync, callbacks, commits, heartbeats.
        choice = data.draw(st.sampled_from(["join", "sync", "callback", "commit", "heartbeat"]))
        if choice == "join" and (seq := world.answered(SendJoinGroup)) is not None:
            world.generation += 1
            resp = JoinGroupResponse(
                0, world.generation, "consumer", "cooperative-sticky", "x", "me"
            )
            world.handle(JoinGroupResponseReceived(seq, resp))
        elif choice == "sync" and (seq := world.answered(SendSyncGroup)) is not None:
            assigned = data.draw(_subset())
            world.handle(
                SyncGroupResponseReceived(seq, SyncGroupResponse(0, ClassicAssignment(assigned))),
                synced=assigned,
            )
        elif choice == "callback" and world.callbacks:
            cb = world.callbacks.pop(0)
            world.handle(CallbackCompleted(cb.kind, cb.token))
        elif choice == "commit" and world.commits:
            world.handle(CommitCompleted(world.commits.pop(0).token))
        elif choice == "heartbeat":
            world.now += 1.0
            world.handle(TimerTick())
            if (seq := world.answered(SendClassicHeartbeat)) is not None:
                world.handle(ClassicHeartbeatResponseReceived(seq, 0))
            world.handle(PollCalled())
