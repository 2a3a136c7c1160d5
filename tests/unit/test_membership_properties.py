"""Hypothesis: random sequences of valid events keep the member's safety promises."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from listener_helpers import StateSeen

from kgroup.membership import (
    Action,
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
    HeartbeatResponse,
    HeartbeatResponseReceived,
    MemberConfig,
    MemberState,
    MetadataUpdated,
    PollCalled,
    RunCallback,
    SendHeartbeat,
    StartFetching,
    StopFetching,
    SubscriptionChanged,
    TimerTick,
    Unsubscribe,
)
from kgroup.types import TopicIdPartition, TopicPartition

A = uuid.UUID(int=0xA)
B = uuid.UUID(int=0xB)
X = uuid.UUID(int=0xF)
ALL_NAMES = {A: "a", B: "b", X: "x"}
UNIVERSE = [(A, 0), (A, 1), (A, 2), (B, 0), (B, 1), (X, 0)]
ERRORS = [14, 15, 16, 25, 29, 110, 42, 35, 113]
IN_GROUP = {
    MemberState.JOINING,
    MemberState.RECONCILING,
    MemberState.ACKNOWLEDGING,
    MemberState.STABLE,
}


class World:
    """A runtime and broker stand-in that checks every action list the member returns."""

    def __init__(self, auto_commit: bool, static: bool) -> None:
        self.seen = StateSeen()
        self.m = ConsumerMember(
            MemberConfig(
                group_id="g",
                member_id="m",
                instance_id="i" if static else None,
                auto_commit=auto_commit,
                max_poll_interval_ms=20_000,
            ),
            random=lambda: 0.5,
            listener=self.seen,
        )
        self.now = 0.0
        self.epoch = 0
        self.in_flight: list[int] = []
        self.leaves: list[int] = []
        self.callbacks: list[RunCallback] = []
        self.commits: list[CommitOffsets] = []
        self.fetching: set[TopicPartition] = set()
        self.held: set[TopicPartition] = set()  # told assigned, not yet revoked or lost
        self.broker_target: set[TopicPartition] = set()
        self.fetched: set[TopicPartition] = set()  # started since last told assigned
        self.closed = False

    def latest_target(self) -> frozenset[TopicPartition]:
        """The latest target the member received, by name (empty if none)."""
        return names(self.m.target or frozenset())

    def handle(self, event: Event) -> None:
        # The latest target received before an assigned callback completes: what
        # it left out must never start fetching as a result (the hand-over race).
        assigned_done = isinstance(event, CallbackCompleted) and event.kind is CallbackKind.ASSIGNED
        before = self.latest_target()
        acts = self.m.handle(event, self.now)
        assert self.seen.state is self.m.state  # the listener was told every change
        if assigned_done:
            for a in acts:
                if isinstance(a, StartFetching):
                    assert a.partitions <= before, "fetching what a newer target dropped"
        self.check(acts)

    def check(self, acts: list[Action]) -> None:
        for a in acts:
            if isinstance(a, SendHeartbeat):
                if a.leave:
                    self.leaves.append(a.seq)
                else:
                    assert not self.in_flight, "two heartbeats in flight"
                    self.in_flight.append(a.seq)
                    reported = a.request.topic_partitions
                    if reported is not None and a.request.member_epoch > 0:
                        # The broker hands over whatever a heartbeat leaves out.
                        assert self.held <= names(reported), "released a partition still held"
            elif isinstance(a, StopFetching):
                self.fetching -= a.partitions
            elif isinstance(a, StartFetching):
                assert a.partitions <= self.broker_target, "fetching a partition never assigned"
                assert a.partitions <= self.latest_target(), "fetching outside the latest target"
                assert a.partitions <= self.held, "fetching before the assigned callback"
                self.fetching |= a.partitions
                self.fetched |= a.partitions
            elif isinstance(a, CommitOffsets):
                assert a.partitions <= self.held, "commit for a revoked or lost partition"
                assert not (a.partitions & self.fetching), "commit while still fetching"
                assert a.partitions <= self.fetched, "commit for a partition never fetched"
                self.commits.append(a)
            elif isinstance(a, RunCallback):
                if a.kind is not CallbackKind.ASSIGNED:
                    assert not (a.partitions & self.fetching), "revoked or lost while fetching"
                if a.kind is CallbackKind.ASSIGNED:
                    self.held |= a.partitions
                    self.fetched -= a.partitions
                elif a.kind is CallbackKind.LOST:
                    self.held -= a.partitions
                self.callbacks.append(a)
            elif isinstance(a, Closed):
                self.closed = True
        if self.m.state not in IN_GROUP:
            # Out of the group nothing may fetch, and no old target may be used.
            assert not self.fetching
            self.broker_target = set()
        if self.m.state is MemberState.UNSUBSCRIBED:
            # Left (a revoke callback that raised while leaving still releases).
            self.held.clear()
        assert self.fetching <= self.held


def names(partitions: Iterable[TopicIdPartition]) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(ALL_NAMES[t.topic_id], t.partition) for t in partitions)


@st.composite
def assignments(draw: st.DrawFn) -> dict[uuid.UUID, list[int]]:
    chosen = draw(st.lists(st.sampled_from(UNIVERSE), unique=True, max_size=len(UNIVERSE)))
    out: dict[uuid.UUID, list[int]] = {}
    for topic, part in chosen:
        out.setdefault(topic, []).append(part)
    return out


def step(world: World, data: st.DataObject) -> None:
    m = world.m
    choices = ["poll", "tick", "subscribe", "metadata", "rediscover", "unsubscribe", "close"]
    if world.in_flight:
        choices += ["respond"] * 6 + ["fail"]
    if world.leaves:
        choices.append("leave")
    if world.callbacks:
        choices += ["callback"] * 4
    if world.commits:
        choices += ["commit"] * 2
    what = data.draw(st.sampled_from(choices))
    world.now += data.draw(st.sampled_from([0.0, 0.01, 0.5, 2.0]))
    if what == "poll":
        world.handle(PollCalled())
    elif what == "tick":
        deadline = m.next_deadline()
        if deadline is not None:
            world.now = max(world.now, deadline)
        world.handle(TimerTick())
    elif what == "subscribe":
        topics = data.draw(
            st.sampled_from([frozenset({"a", "b"}), frozenset({"a"}), frozenset({"x"})])
        )
        if data.draw(st.booleans()):
            world.handle(SubscriptionChanged(topics))
        else:
            world.handle(SubscriptionChanged(pattern="[abx]"))
    elif what == "metadata":
        world.handle(MetadataUpdated(ALL_NAMES))
    elif what == "rediscover":
        world.handle(CoordinatorRediscovered())
    elif what == "unsubscribe":
        world.handle(Unsubscribe())
    elif what == "close":
        world.handle(
            CloseRequested(deadline=world.now + data.draw(st.sampled_from([0.0, 5.0, 60.0])))
        )
    elif what == "respond":
        seq = world.in_flight.pop()
        if data.draw(st.integers(0, 4)) == 0:
            code = data.draw(st.sampled_from(ERRORS))
            world.handle(HeartbeatResponseReceived(seq, HeartbeatResponse(error_code=code)))
        else:
            world.epoch += data.draw(st.sampled_from([0, 1]))
            assignment = data.draw(st.none() | assignments())
            if assignment is not None:
                world.broker_target = {
                    TopicPartition(ALL_NAMES[t], p) for t, ps in assignment.items() for p in ps
                }
            resp = HeartbeatResponse(
                member_id="m",
                member_epoch=max(world.epoch, 1),
                heartbeat_interval_ms=1000,
                assignment=assignment,
            )
            world.handle(HeartbeatResponseReceived(seq, resp))
    elif what == "fail":
        seq = world.in_flight.pop()
        world.handle(
            HeartbeatFailed(
                seq, data.draw(st.sampled_from([FailureKind.TIMEOUT, FailureKind.DISCONNECTED]))
            )
        )
    elif what == "leave":
        world.handle(
            HeartbeatResponseReceived(world.leaves.pop(0), HeartbeatResponse(member_epoch=-1))
        )
    elif what == "callback":
        cb = world.callbacks.pop(0)
        error = RuntimeError("callback failed") if data.draw(st.integers(0, 5)) == 0 else None
        if cb.kind is CallbackKind.REVOKED and error is None:
            world.held -= cb.partitions
        world.handle(CallbackCompleted(cb.kind, cb.token, error))
    elif what == "commit":
        commit = world.commits.pop(0)
        error = RuntimeError("commit failed") if data.draw(st.booleans()) else None
        world.handle(CommitCompleted(commit.token, error))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), auto_commit=st.booleans(), static=st.booleans())
def test_random_event_sequences_keep_the_safety_promises(
    data: st.DataObject, auto_commit: bool, static: bool
) -> None:
    world = World(auto_commit, static)
    world.handle(MetadataUpdated({A: "a", B: "b"}))
    world.handle(SubscriptionChanged(frozenset({"a", "b"})))
    for _ in range(data.draw(st.integers(5, 60))):
        if world.closed:
            break
        step(world, data)
        deadline = world.m.next_deadline()
        if deadline is not None:
            assert deadline >= 0.0
