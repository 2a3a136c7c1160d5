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
from kgroup.testing.sim import Simulation
from kgroup.testing.sim.classic import (
    ILLEGAL_GENERATION,
    MEMBER_ID_REQUIRED,
    REBALANCE_IN_PROGRESS,
    ClassicCoordinatorConfig,
    ClassicGroupCoordinator,
    ClassicGroupState,
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
