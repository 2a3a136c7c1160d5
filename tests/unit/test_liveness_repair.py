"""A group left with partitions owned by nobody: the watch that notices, the members' repair.

Issue 29: Apache Kafka 4.4 leaves a converted group's target assignment with
the gaps of a classic cooperative first round, and static replacements bump no
epoch, so nothing asks the assignor again. An idle kgroup member (settled,
owning nothing) notices and leaves for good, then rejoins: a new member makes
the coordinator assign again.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import test_classic as classic
import test_membership as consumer
from test_membership import A, heartbeats

from kgroup.admin.model import GroupDescription, GroupType, MemberDescription, MemberProtocol
from kgroup.membership import (
    CallbackKind,
    ClassicState,
    CloseRequested,
    FailureKind,
    HeartbeatResponse,
    HeartbeatResponseReceived,
    LeaveGroupResponseReceived,
    MemberState,
    RejoinRequested,
    RequestFailed,
    SendClassicHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    StopFetching,
)
from kgroup.protocol.cluster import BrokerAddress
from kgroup.runtime.liveness import NOTHING_SEEN, LivenessTimes, Look, Repair, UnownedWatch
from kgroup.types import TopicPartition

STUCK = RejoinRequested("the group has been settled with t-3 owned by nobody")
STALL = RejoinRequested("the group's assignment has waited for group epoch 12", as_new=False)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


# ------------------------------------------------------------ what is unowned


def member(
    member_id: str,
    topics: frozenset[str],
    assignment: frozenset[TopicPartition] = frozenset(),
    target: frozenset[TopicPartition] | None = None,
) -> MemberDescription:
    return MemberDescription(
        member_id=member_id,
        instance_id=None,
        client_id="c",
        client_host="/127.0.0.1",
        protocol=MemberProtocol.CONSUMER,
        subscribed_topics=topics,
        assignment=assignment,
        target_assignment=target,
    )


def group(*members: MemberDescription, state: str = "Stable") -> GroupDescription:
    return GroupDescription(
        group_id="g",
        group_type=GroupType.CONSUMER,
        protocol_type="consumer",
        state=state,
        assignor="uniform",
        coordinator=BrokerAddress(1, "127.0.0.1", 9092),
        members=members,
    )


def test_unowned_are_the_subscribed_partitions_in_no_assignment_and_no_target() -> None:
    described = group(
        member("m1", frozenset({"t"}), frozenset({tp("t", 0)}), frozenset({tp("t", 0)})),
        # t-1 is on its way to m2 (in its target): held.
        member("m2", frozenset({"t", "u"}), frozenset(), frozenset({tp("t", 1)})),
    )
    assert described.unowned_partitions({"t": 4, "u": 1, "other": 3}) == frozenset(
        {tp("t", 2), tp("t", 3), tp("u", 0)}
    )


def test_partitions_a_cooperative_member_still_claims_are_held() -> None:
    # Between the two rounds of a cooperative rebalance: the first round gave t-1
    # to nobody, and m1, whose last JoinGroup claimed it, owes the second round.
    claimer = replace(
        member("m1", frozenset({"t"}), frozenset({tp("t", 0)})),
        protocol=MemberProtocol.CLASSIC,
        owned_partitions=frozenset({tp("t", 0), tp("t", 1)}),
    )
    described = replace(group(claimer), group_type=GroupType.CLASSIC)
    assert described.unowned_partitions({"t": 3}) == frozenset({tp("t", 2)})


def test_a_group_that_is_not_settled_tells_nothing() -> None:
    described = group(member("m1", frozenset({"t"})), state="Reconciling")
    assert described.unowned_partitions({"t": 2}) is None


def test_topics_without_a_partition_count_are_left_out() -> None:
    # A topic the metadata did not describe (deleted, denied): nothing to say of it.
    described = group(member("m1", frozenset({"gone"})))
    assert described.unowned_partitions({}) == frozenset()


# ---------------------------------------------------------------- the watch

TIMES = LivenessTimes(first=5.0, first_busy=30.0, confirm=5.0, quiet=30.0)
GAP = Look(frozenset({tp("t", 3)}))
REBALANCING = Look(None)
STALLED = Look(frozenset(), stalled_epoch=12)


def settled_watch(at: float = 0.0, generation: int = 7, *, idle: bool = True) -> UnownedWatch:
    watch = UnownedWatch(TIMES)
    watch.observe(at, settled=True, idle=idle, generation=generation)
    return watch


def test_a_member_that_is_not_settled_never_looks() -> None:
    watch = UnownedWatch(TIMES)
    watch.observe(0.0, settled=False, idle=False, generation=3)
    assert watch.next_deadline() is None
    assert not watch.due(100.0)


def test_an_idle_member_looks_after_the_first_wait_and_repairs_after_a_confirmation() -> None:
    watch = settled_watch()
    assert watch.next_deadline() == 5.0
    assert not watch.due(4.9)
    assert watch.due(5.0)
    assert watch.next_deadline() is None  # one look at a time
    assert watch.looked(5.1, GAP) is None  # seen once: maybe a rebalance in progress
    assert watch.next_deadline() == pytest.approx(10.1)
    assert watch.due(10.1)
    verdict = watch.looked(10.2, GAP)
    assert verdict is not None
    assert verdict.repair is Repair.REJOIN_AS_NEW
    assert "1 partition(s)" in verdict.reason
    assert str(tp("t", 3)) in verdict.reason


def test_a_member_that_owns_partitions_looks_rarely_and_repairs_after_those_holding_less() -> None:
    watch = settled_watch(idle=False)
    assert watch.next_deadline() == 30.0
    second = Look(GAP.unowned, rank=1)  # one member holds fewer: it goes first
    for at in (30.0, 35.0, 40.0):
        assert watch.due(at)
        assert watch.looked(at, second) is None
    # Seen for (2 + rank) confirmations: its turn.
    assert watch.due(45.0)
    verdict = watch.looked(45.0, second)
    assert verdict is not None
    assert verdict.repair is Repair.REJOIN_AS_NEW


def test_a_member_missing_from_the_description_leaves_unowned_ones_alone() -> None:
    watch = settled_watch(idle=False)
    for at in (30.0, 60.0, 90.0):
        assert watch.due(at)
        assert watch.looked(at, GAP) is None  # GAP has no rank
    assert watch.next_deadline() == 120.0  # the quiet wait: nothing it repairs


@pytest.mark.parametrize("idle", [True, False], ids=["idle", "owning"])
def test_a_stalled_assignment_seen_twice_asks_for_a_plain_rejoin(idle: bool) -> None:
    watch = settled_watch(idle=idle)
    assert watch.due(watch.next_deadline() or 0.0)
    now = watch.next_deadline() or 30.0
    assert watch.looked(now, STALLED) is None
    assert watch.due(now + 5.0)
    verdict = watch.looked(now + 5.0, STALLED)
    assert verdict is not None
    assert verdict.repair is Repair.REJOIN
    assert "group epoch 12" in verdict.reason


def test_a_stall_at_another_group_epoch_is_a_new_sighting() -> None:
    watch = settled_watch()
    assert watch.due(5.0)
    assert watch.looked(5.0, STALLED) is None
    assert watch.due(10.0)
    assert watch.looked(10.0, Look(frozenset(), stalled_epoch=13)) is None
    assert watch.due(15.0)
    verdict = watch.looked(15.0, Look(frozenset(), stalled_epoch=13))
    assert verdict is not None
    assert verdict.repair is Repair.REJOIN


def test_every_partition_owned_looks_again_only_after_the_quiet_wait() -> None:
    watch = settled_watch()
    assert watch.due(5.0)
    assert watch.looked(5.0, NOTHING_SEEN) is None
    assert watch.next_deadline() == 35.0


@pytest.mark.parametrize(
    ("between", "why"),
    [
        (NOTHING_SEEN, "the second look saw every partition owned"),
        (REBALANCING, "the second look found the group rebalancing"),
    ],
)
def test_a_stuck_group_must_be_seen_in_two_looks_in_a_row(between: Look, why: str) -> None:
    watch = settled_watch()
    assert watch.due(5.0)
    assert watch.looked(5.0, GAP) is None
    assert watch.due(10.0)
    assert watch.looked(10.0, between) is None, why
    assert watch.due(watch.next_deadline() or 0.0)
    assert watch.looked(40.0, GAP) is None  # a new first sighting, not a confirmation


def test_a_new_generation_between_the_looks_starts_over() -> None:
    watch = settled_watch(generation=7)
    assert watch.due(5.0)
    assert watch.looked(5.0, GAP) is None
    watch.observe(6.0, settled=True, idle=True, generation=8)  # the group moved on
    assert watch.next_deadline() == 11.0
    assert watch.due(11.0)
    assert watch.looked(11.0, GAP) is None


def test_a_member_given_partitions_while_a_look_is_out_drops_its_result() -> None:
    watch = settled_watch()
    assert watch.due(5.0)
    assert watch.looked(5.0, GAP) is None
    assert watch.due(10.0)
    watch.observe(10.05, settled=False, idle=False, generation=8)  # assigned meanwhile
    watch.observe(10.06, settled=True, idle=True, generation=8)  # and idle again at once
    assert watch.looked(10.1, GAP) is None  # the look belongs to the round before
    assert watch.next_deadline() == pytest.approx(15.06)


def test_a_looks_rank_orders_members_by_what_they_hold_then_by_id() -> None:
    described = group(
        member("m3", frozenset({"t"}), frozenset({tp("t", 0), tp("t", 1)})),
        member("m1", frozenset({"t"}), frozenset(), frozenset({tp("t", 2)})),
        member("m2", frozenset({"t"}), frozenset({tp("t", 3)})),
        member("m0", frozenset({"t"})),
    )
    ranks = {m: Look.of(described, {"t": 5}, m).rank for m in ("m0", "m1", "m2", "m3")}
    assert ranks == {"m0": 0, "m1": 1, "m2": 2, "m3": 3}
    assert Look.of(described, {"t": 5}, "gone").rank is None


def test_a_look_reads_a_consumer_groups_lagging_assignment_as_a_stall() -> None:
    described = replace(group(member("m1", frozenset({"t"}))), group_epoch=5, assignment_epoch=4)
    look = Look.of(replace(described, state="Assigning"), {"t": 1})
    assert look == Look(None, stalled_epoch=5)
    assert Look.of(replace(described, assignment_epoch=5), {"t": 1}).stalled_epoch is None


# ------------------------------------------------- the consumer-protocol member


def test_a_stable_consumer_member_owning_nothing_leaves_with_minus_one_and_rejoins() -> None:
    h = consumer.Harness(instance_id="inst-0")
    h.stable({})
    acts = h.do(STUCK)
    assert h.state() is MemberState.LEAVING_TO_REJOIN
    [leave] = heartbeats(acts)
    # -1 even for a static member: -2 would keep it, and a rejoin would only replace it.
    assert (leave.member_epoch, leave.instance_id) == (-1, "inst-0")
    acts = h.respond(epoch=-1)
    assert h.state() is MemberState.JOINING
    [join] = heartbeats(acts)
    assert join.member_epoch == 0
    assert join.instance_id == "inst-0"
    assert join.subscribed_topic_names == ("a", "b")


def test_a_consumer_member_that_owns_partitions_releases_them_before_leaving_for_good() -> None:
    h = consumer.Harness(instance_id="inst-0", auto_commit=False)
    h.stable({A: [0]})
    acts = h.do(STUCK)
    # Released as for a close: fetching stops and the revoke callback runs first.
    assert [a.partitions for a in acts if isinstance(a, StopFetching)] == [consumer.tps("a-0")]
    assert h.state() is MemberState.PREPARE_LEAVING
    acts = h.callback(CallbackKind.REVOKED)
    [leave] = heartbeats(acts)
    # -1 even for a static member: -2 would keep it in the group.
    assert (leave.member_epoch, leave.instance_id) == (-1, "inst-0")
    assert h.leave is not None
    acts = h.do(HeartbeatResponseReceived(h.leave.seq, HeartbeatResponse(member_epoch=-1)))
    assert h.state() is MemberState.JOINING
    [join] = heartbeats(acts)
    assert (join.member_epoch, join.instance_id) == (0, "inst-0")
    # Its next ordinary leave (a close) is a static member's again: -2.
    h.respond(5, {A: [0]})
    h.callback(CallbackKind.ASSIGNED)
    h.respond(5, None)
    h.do(CloseRequested(deadline=100.0))
    h.callback(CallbackKind.REVOKED)
    assert h.leave is not None
    assert h.leave.request.member_epoch == -2


def test_a_consumer_member_leaves_a_stalled_assignment_to_its_heartbeats() -> None:
    h = consumer.Harness()
    h.stable({})
    assert h.do(STALL) == []
    assert h.state() is MemberState.STABLE


def test_a_consumer_member_in_a_rebalance_ignores_the_request() -> None:
    h = consumer.Harness()
    h.subscribe("a", "b")
    assert h.state() is MemberState.JOINING
    assert h.do(STUCK) == []
    assert h.state() is MemberState.JOINING


# ------------------------------------------------------------ the classic member


def test_a_stable_static_classic_member_owning_nothing_leaves_then_joins_as_a_new_member() -> None:
    h = classic.Harness(classic.COOP_STICKY, instance_id="inst-0")
    h.stable(protocol="cooperative-sticky")
    acts = h.do(STUCK)
    leave = classic.one(SendLeaveGroup, acts)
    # A static member too: rejoining under its instance id would only replace it.
    assert (leave.member_id, leave.instance_id) == (classic.ME, "inst-0")
    assert h.state() is ClassicState.JOINING
    # The join waits for the leave's answer, so the coordinator cannot take the
    # new member for the old one's replacement.
    assert classic.of(SendJoinGroup, acts) == []
    acts = h.do(LeaveGroupResponseReceived(leave.seq, 0))
    join = classic.one(SendJoinGroup, acts)
    assert join.request.member_id == ""
    assert join.request.instance_id == "inst-0"
    # A new member: nothing owned, no generation.
    [proto] = join.request.protocols
    assert proto.subscription.owned_partitions == frozenset()
    assert proto.subscription.generation_id == -1


def test_a_classic_repair_waiting_for_its_leave_asks_for_no_wake_up_in_the_past() -> None:
    # Simulator seed 251948: a heartbeat answered COORDINATOR_LOAD_IN_PROGRESS set
    # a retry deadline; the repair's join then waited for the leave's answer,
    # and next_deadline() kept returning that passed deadline: the runtime woke
    # the member at once, again and again, until the answer came.
    h = classic.Harness(classic.COOP_STICKY)
    h.stable(protocol="cooperative-sticky")
    due = h.m.next_deadline()
    assert due is not None
    classic.one(SendClassicHeartbeat, h.tick(due))
    h.beat(classic.E["COORDINATOR_LOAD_IN_PROGRESS"])
    backoff = h.m.next_deadline()
    assert backoff is not None
    leave = classic.one(SendLeaveGroup, h.do(STUCK, at=backoff + 0.5))
    deadline = h.m.next_deadline()
    assert deadline is None or deadline > h.now, (deadline, h.now)
    assert classic.of(SendJoinGroup, h.tick(h.now)) == []
    classic.one(SendJoinGroup, h.do(LeaveGroupResponseReceived(leave.seq, 0)))


def test_the_classic_join_still_goes_when_the_leave_fails() -> None:
    h = classic.Harness(classic.COOP_STICKY)
    h.stable(protocol="cooperative-sticky")
    leave = classic.one(SendLeaveGroup, h.do(STUCK))
    acts = h.do(RequestFailed(leave.seq, FailureKind.TIMEOUT))
    classic.one(SendJoinGroup, acts)


def test_a_static_classic_member_that_owns_partitions_releases_them_then_leaves() -> None:
    h = classic.Harness(classic.COOP_STICKY, instance_id="inst-0", auto_commit=False)
    h.stable("a-0", protocol="cooperative-sticky")
    acts = h.do(STUCK)
    assert classic.one(StopFetching, acts).partitions == classic.tps("a-0")
    acts = h.callback_done()  # the revoke callback
    leave = classic.one(SendLeaveGroup, acts)
    assert (leave.member_id, leave.instance_id) == (classic.ME, "inst-0")
    acts = h.do(LeaveGroupResponseReceived(leave.seq, 0))
    join = classic.one(SendJoinGroup, acts)
    assert (join.request.member_id, join.request.instance_id) == ("", "inst-0")
    [proto] = join.request.protocols
    assert proto.subscription.owned_partitions == frozenset()


def test_a_classic_member_of_a_stalled_group_rejoins_keeping_its_partitions() -> None:
    h = classic.Harness(classic.COOP_STICKY, instance_id="inst-0")
    h.stable("a-0", protocol="cooperative-sticky")
    acts = h.do(STALL)
    assert classic.of(SendLeaveGroup, acts) == []
    join = classic.one(SendJoinGroup, acts)
    # The same member, keeping what it owns (cooperative): no revocation.
    assert join.request.member_id == classic.ME
    [proto] = join.request.protocols
    assert proto.subscription.owned_partitions == classic.tps("a-0")
    assert h.callbacks == [c for c in h.callbacks if c.kind is not CallbackKind.REVOKED]
    assert h.m.assignment == classic.tps("a-0")


def test_a_closing_member_ignores_the_request() -> None:
    h = classic.Harness(classic.COOP_STICKY)
    h.stable(protocol="cooperative-sticky")
    h.do(CloseRequested(deadline=30.0))
    assert classic.of(SendLeaveGroup, h.do(STUCK)) == []
