"""kgroup.testing.sim's classic-protocol coordinator, and classic groups in the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kgroup.membership import (
    ClassicAssignment,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinProtocol,
    MemberSubscription,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kgroup.testing.groups.classic import (
    ILLEGAL_GENERATION,
    MEMBER_ID_REQUIRED,
    REBALANCE_IN_PROGRESS,
    ClassicCoordinatorConfig,
    ClassicGroupCoordinator,
    ClassicGroupState,
)
from kgroup.testing.sim import (
    Fault,
    FaultKind,
    MemberPlan,
    NetworkConditions,
    Scenario,
    Simulation,
    run,
)
from kgroup.types import TopicPartition

GROUP = "g"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[Any], None], Any]] = []
        self.ids = 0

    def schedule(self, at: float, fn: Callable[[Any], None], arg: Any) -> None:
        self.timers.append((at, fn, arg))

    def advance(self, to: float) -> None:
        while True:
            due = sorted((t for t in self.timers if t[0] <= to), key=lambda t: t[0])
            if not due:
                break
            self.timers.remove(due[0])
            self.now = due[0][0]
            due[0][1](due[0][2])
        self.now = to

    def new_id(self) -> str:
        self.ids += 1
        return f"member-{self.ids}"


def make() -> tuple[ClassicGroupCoordinator, Clock]:
    clock = Clock()
    group = ClassicGroupCoordinator(
        GROUP,
        ClassicCoordinatorConfig(initial_rebalance_delay_ms=0),
        schedule=clock.schedule,
        clock=lambda: clock.now,
        new_member_id=clock.new_id,
    )
    return group, clock


def join_request(member_id: str = "", instance_id: str | None = None) -> JoinGroupRequest:
    sub = MemberSubscription(topics=frozenset({"t"}))
    return JoinGroupRequest(
        group_id=GROUP,
        member_id=member_id,
        instance_id=instance_id,
        session_timeout_ms=6000,
        rebalance_timeout_ms=10_000,
        protocols=(JoinProtocol("range", sub),),
    )


class Replies:
    def __init__(self) -> None:
        self.got: list[Any] = []

    def __call__(self, response: Any) -> None:
        self.got.append(response)


def joined(group: ClassicGroupCoordinator, instance_id: str | None = None) -> tuple[str, Replies]:
    """A member through MEMBER_ID_REQUIRED (dynamic) or straight in (static)."""
    first = Replies()
    group.join(join_request(instance_id=instance_id), first)
    if instance_id is not None:
        return "", first
    (required,) = first.got
    assert isinstance(required, JoinGroupResponse)
    assert required.error_code == MEMBER_ID_REQUIRED
    second = Replies()
    group.join(join_request(required.member_id), second)
    return required.member_id, second


def test_a_dynamic_member_gets_its_id_first_then_leads_the_first_generation() -> None:
    group, _ = make()
    member_id, replies = joined(group)
    (resp,) = replies.got
    assert (resp.error_code, resp.generation_id, resp.leader) == (0, 1, member_id)
    assert [m.member_id for m in resp.members] == [member_id]
    assert group.state is ClassicGroupState.COMPLETING_REBALANCE


def test_joins_are_held_until_every_member_rejoined_and_syncs_until_the_leader_syncs() -> None:
    group, _ = make()
    leader, _ = joined(group)
    sync = Replies()
    group.sync(
        SyncGroupRequest(GROUP, 1, leader, None, "range", ((leader, ClassicAssignment()),)), sync
    )
    assert group.state is ClassicGroupState.STABLE
    # A second member: the group rebalances; its join waits for the leader's rejoin.
    other, held = joined(group)
    assert held.got == []
    assert group.heartbeat(1, leader, None) == REBALANCE_IN_PROGRESS
    rejoin = Replies()
    group.join(join_request(leader), rejoin)
    assert held.got[0].generation_id == rejoin.got[0].generation_id == 2
    assert len(rejoin.got[0].members) == 2  # the leader sees everyone
    assert held.got[0].members == ()
    follower_sync = Replies()
    group.sync(SyncGroupRequest(GROUP, 2, other, None, "range"), follower_sync)
    assert follower_sync.got == []  # held until the leader's assignment
    mine = ClassicAssignment(frozenset({TopicPartition("t", 0)}))
    theirs = ClassicAssignment(frozenset({TopicPartition("t", 1)}))
    leader_sync = Replies()
    group.sync(
        SyncGroupRequest(GROUP, 2, leader, None, "range", ((leader, mine), (other, theirs))),
        leader_sync,
    )
    assert follower_sync.got == [
        SyncGroupResponse(assignment=theirs, protocol_type="consumer", protocol_name="range")
    ]
    assert group.assignment_in(2, other) == theirs.partitions


def test_heartbeats_and_commits_are_checked_against_the_generation() -> None:
    group, _ = make()
    member, _ = joined(group)
    tp = frozenset({TopicPartition("t", 0)})
    assert group.commit(member, 1, None, tp) == REBALANCE_IN_PROGRESS  # completing
    group.sync(
        SyncGroupRequest(GROUP, 1, member, None, "range", ((member, ClassicAssignment()),)),
        Replies(),
    )
    assert group.commit(member, 1, None, tp) == 0
    assert group.commit(member, 0, None, tp) == ILLEGAL_GENERATION
    assert group.heartbeat(0, member, None) == ILLEGAL_GENERATION
    assert group.heartbeat(1, "nobody", None) == 25  # UNKNOWN_MEMBER_ID
    assert group.heartbeat(1, member, None) == 0


def test_a_static_member_replaced_in_a_stable_group_keeps_its_assignment_without_a_rebalance() -> (
    None
):
    group, _ = make()
    _, first = joined(group, instance_id="i")
    (resp,) = first.got
    old = resp.member_id
    mine = ClassicAssignment(frozenset({TopicPartition("t", 0)}))
    group.sync(SyncGroupRequest(GROUP, 1, old, "i", "range", ((old, mine),)), Replies())
    again = Replies()
    group.join(join_request(instance_id="i"), again)
    (back,) = again.got
    assert back.generation_id == 1  # no new generation
    assert back.member_id != old
    sync = Replies()
    group.sync(SyncGroupRequest(GROUP, 1, back.member_id, "i", "range"), sync)
    assert sync.got[0].assignment == mine
    assert group.heartbeat(1, old, "i") == 82  # FENCED_INSTANCE_ID


def test_members_that_do_not_rejoin_in_time_are_dropped() -> None:
    group, clock = make()
    leader, _ = joined(group)
    group.sync(
        SyncGroupRequest(GROUP, 1, leader, None, "range", ((leader, ClassicAssignment()),)),
        Replies(),
    )
    _, held = joined(group)
    clock.advance(5.0)
    group.heartbeat(1, leader, None)  # alive, but never rejoins
    clock.advance(10.5)
    assert held.got[0].generation_id == 2
    assert leader not in group.members


@pytest.mark.parametrize("strategy", [("range",), ("cooperative-sticky",), ("roundrobin", "range")])
def test_a_classic_group_converges_through_crashes_and_static_bounces(
    strategy: tuple[str, ...],
) -> None:
    sim = Simulation(seed=21, topics={"t": 7})
    for i in range(4):
        sim.add_member(
            f"m{i}",
            topics={"t"},
            protocol="classic",
            assignors=strategy,
            instance_id=f"i{i}" if i % 2 else None,
            start_at=0.4 * i,
        )
    sim.crash("m0", at=4.0, restart_after=1.0)
    sim.close("m1", at=6.0, restart_after=0.5)
    sim.run_until_converged(faults_end=6.0)
    fetched = [tp for parts in sim.assignment().values() for tp in parts]
    assert sorted(fetched) == [TopicPartition("t", p) for p in range(7)]


def reloaded(group: ClassicGroupCoordinator, clock: Clock) -> ClassicGroupCoordinator:
    """The group a new coordinator loads from ``group``'s last record."""
    group.retired = True
    return group.reload(
        schedule=clock.schedule, clock=lambda: clock.now, new_member_id=clock.new_id
    )


def test_a_reload_keeps_the_last_stored_assignment_and_hands_the_next_generation_out_again() -> (
    None
):
    group, clock = make()
    leader, _ = joined(group)
    mine = ClassicAssignment(frozenset({TopicPartition("t", 0)}))
    group.sync(SyncGroupRequest(GROUP, 1, leader, None, "range", ((leader, mine),)), Replies())
    # A second member joins: generation 2 is handed out, but the leader never syncs it.
    other, held = joined(group)
    rejoin = Replies()
    group.join(join_request(leader), rejoin)
    assert held.got[0].generation_id == rejoin.got[0].generation_id == 2
    group = reloaded(group, clock)
    # The record knows generation 1 only: the leader alone, with its assignment, STABLE.
    assert (group.generation, group.state) == (1, ClassicGroupState.STABLE)
    assert dict(group.members) == {leader: mine}
    assert group.heartbeat(2, leader, None) == ILLEGAL_GENERATION
    assert group.heartbeat(1, other, None) == 25  # UNKNOWN_MEMBER_ID: it joins again
    assert group.heartbeat(1, leader, None) == 0
    # The next rebalance hands generation 2 out a second time.
    other, held = joined(group)
    again = Replies()
    group.join(join_request(leader), again)
    assert held.got[0].generation_id == again.got[0].generation_id == 2


def test_a_reload_keeps_what_the_broker_writes_without_an_assignment() -> None:
    # An emptied group's new generation, and a static member replaced in a stable group.
    group, clock = make()
    member, _ = joined(group)
    group.sync(
        SyncGroupRequest(GROUP, 1, member, None, "range", ((member, ClassicAssignment()),)),
        Replies(),
    )
    assert group.leave(member, None) == 0
    assert (group.generation, group.state) == (2, ClassicGroupState.EMPTY)
    group = reloaded(group, clock)
    assert (group.generation, group.state, dict(group.members)) == (
        2,
        ClassicGroupState.EMPTY,
        {},
    )
    first = Replies()
    group.join(join_request(instance_id="i"), first)
    static_id = first.got[0].member_id
    mine = ClassicAssignment(frozenset({TopicPartition("t", 1)}))
    group.sync(SyncGroupRequest(GROUP, 3, static_id, "i", "range", ((static_id, mine),)), Replies())
    bounce = Replies()
    group.join(join_request(instance_id="i"), bounce)
    new_id = bounce.got[0].member_id
    assert new_id != static_id
    group = reloaded(group, clock)
    assert (group.generation, dict(group.members)) == (3, {new_id: mine})
    assert group.heartbeat(3, static_id, "i") == 82  # FENCED_INSTANCE_ID


def _classic_plan(name: str, topics: set[str], **kw: Any) -> MemberPlan:
    return MemberPlan(
        name,
        topics=frozenset(topics),
        protocol="classic",
        assignors=("cooperative-sticky", "range"),
        session_timeout_ms=6000,
        **kw,
    )


def test_a_reissued_generation_is_not_read_as_two_owners_in_one_generation() -> None:
    # Seed 815 of the mix, shrunk: generation 2 is handed out, the coordinator fails
    # over before the leader's assignment is stored, and the reloaded group (at
    # generation 1) hands generation 2 out again with t0's partitions moved. m14
    # fetched t0 partitions at the first generation 2; m20 gets them at the second,
    # after m14 stopped. Judged on numbers alone this read as two owners in one
    # generation; judged on generations as issued it is a handover.
    scenario = Scenario(
        seed=815,
        size="small",
        families=("classic protocol", "coordinator failover mid-rebalance"),
        topics=(("t0", 32), ("t1", 13), ("t2", 20)),
        members=(
            _classic_plan(
                "m4",
                {"t0", "t2"},
                max_poll_interval_ms=8000,
                poll_interval=1.183674578593748,
                callback_time=1.4326441390718174,
                start_at=0.2300645252437472,
            ),
            _classic_plan(
                "m14",
                {"t0"},
                max_poll_interval_ms=8000,
                poll_interval=2.1287387567293226,
                callback_time=0.6717205471872126,
                start_at=0.2647832315190418,
            ),
            _classic_plan(
                "m20",
                {"t0", "t1"},
                max_poll_interval_ms=6000,
                poll_interval=0.6297329519335886,
                callback_time=0.9042071148304305,
                start_at=0.12950986866447983,
            ),
        ),
        faults=(
            Fault(FaultKind.CRASH, 2.4749126310283285, "m4", restart_after=1.3504192446862615),
            Fault(
                FaultKind.FAILOVER,
                7.313429756822848,
                duration=0.8641045548779834,
                loading=0.2300328307004862,
                count=8,
            ),
            Fault(
                FaultKind.LOSSY,
                8.650576226520478,
                duration=3.394036919972564,
                conditions=NetworkConditions(
                    drop_request=0.2775132344841968,
                    drop_response=0.02764875681321457,
                    duplicate=0.01488309500963985,
                    spike=0.03829361639094352,
                    spike_max=4.860876465355108,
                ),
            ),
        ),
        faults_end=16.40756714240132,
    )
    result = run(scenario)
    assert result.violation is None, str(result.violation)
    assert dict(result.stats).get("classic_generation_reissued", 0) >= 1


def test_a_static_replacement_during_a_rebalance_is_forgotten_by_a_reload_with_its_ownership() -> (
    None
):
    # Seed 18714 of the mix: the broker writes a static member's new id only when it
    # replaces the member in a stable group. Replaced mid-rebalance, the reload brings
    # the stored id back, and what it owned must follow the next process to take over.
    group, clock = make()
    first = Replies()
    group.join(join_request(instance_id="i"), first)
    stored_id = first.got[0].member_id
    mine = ClassicAssignment(frozenset({TopicPartition("t", 0)}))
    group.sync(SyncGroupRequest(GROUP, 1, stored_id, "i", "range", ((stored_id, mine),)), Replies())
    joined(group)  # a second member: the group prepares a rebalance
    bounce = Replies()
    group.join(join_request(instance_id="i"), bounce)  # replaced in memory only
    group = reloaded(group, clock)
    assert set(group.members) == {stored_id}
    late = Replies()
    group.join(join_request(member_id=bounce.got[0].member_id, instance_id="i"), late)
    assert late.got[0].error_code == 82  # FENCED_INSTANCE_ID: the record knows another id
    third = Replies()
    group.join(join_request(instance_id="i"), third)
    third_id = third.got[0].member_id
    assert group.last_owner(1, TopicPartition("t", 0)) == third_id
    assert group.commit(third_id, 1, "i", frozenset({TopicPartition("t", 0)})) == 0
