"""A classic member asked to close or unsubscribe while a join round completes (issue 10).

Once its JoinGroup is out, the coordinator moves the group to the next
generation and then waits in CompletingRebalance for the member's SyncGroup:
a commit carrying the old generation is refused with ILLEGAL_GENERATION, one
carrying the new generation with REBALANCE_IN_PROGRESS until the member syncs
(and with UNKNOWN_MEMBER_ID once its session expired). A member that abandoned
the round there lost its revocation commit, and the application's records since
the last commit were redelivered. It now finishes the round, then releases its
partitions with the new generation.
"""

from __future__ import annotations

from test_classic import COOP_STICKY, ME, E, Harness, S, of, one, tps

from kgroup.membership import (
    AssignmentComputed,
    ClassicAssignment,
    Closed,
    CloseRequested,
    CommitOffsets,
    FailureKind,
    LeaveComplete,
    LeaveGroupResponseReceived,
    RequestFailed,
    RunAssignor,
    RunCallback,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
    StartFetching,
    StopFetching,
    Unsubscribe,
)
from kgroup.membership.common.events import CallbackKind

COOP = "cooperative-sticky"


def _rejoining(leader: str = "m-2") -> Harness:
    """A cooperative member owning a-0 in generation 1, its rejoin's JoinGroup out."""
    h = Harness(COOP_STICKY)
    h.stable("a-0", protocol=COOP, leader=leader)
    h.tick(1.0)
    h.beat(E["REBALANCE_IN_PROGRESS"])
    h.finish()  # the cooperative preparation (its commit) before the JoinGroup
    assert h.state() is S.JOINING
    assert h.join is not None
    return h


def test_close_with_the_join_out_releases_after_the_sync_with_the_new_generation() -> None:
    h = _rejoining()
    commits = len(h.commits)
    acts = h.do(CloseRequested(deadline=30.0))
    # Nothing released yet: a commit now would carry a generation about to end.
    # Fetching stops at once (sim seed 36344): the positions reached are committed.
    assert acts == [StopFetching(tps("a-0"))]
    assert h.state() is S.JOINING
    acts = h.joined(generation=2, protocol=COOP)
    assert of(CommitOffsets, acts) == []
    assert one(SendSyncGroup, acts).request.generation_id == 2
    acts = h.synced("a-0", "a-1")
    assert of(StopFetching, acts) == []
    commit = one(CommitOffsets, acts)
    assert (commit.partitions, commit.member_epoch) == (tps("a-0"), 2)
    assert len(h.commits) == commits + 1
    assert h.state() is S.LEAVING
    # The new assignment is never applied: only a-0 (owned) is revoked, then the leave.
    assert h.commit_done() == [RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0"))]
    leave = one(SendLeaveGroup, h.callback_done())
    assert h.do(LeaveGroupResponseReceived(leave.seq)) == [Closed(False)]


def test_a_leader_closing_before_its_assignment_syncs_it_first_then_releases() -> None:
    h = _rejoining(leader=ME)
    h.do(CloseRequested(deadline=30.0))
    run = one(RunAssignor, h.joined(generation=2, protocol=COOP, leader=ME))
    assert h.state() is S.AWAITING_ASSIGNOR
    acts = h.do(AssignmentComputed(run.generation_id, {ME: ClassicAssignment(tps("a-0"))}))
    assert of(CommitOffsets, acts) == []
    assert one(SendSyncGroup, acts).request.generation_id == 2
    commit = one(CommitOffsets, h.synced("a-0"))
    assert commit.member_epoch == 2


def test_unsubscribe_with_the_join_out_also_waits_for_the_round() -> None:
    h = _rejoining()
    assert h.do(Unsubscribe()) == [StopFetching(tps("a-0"))]
    h.joined(generation=2, protocol=COOP)
    commit = one(CommitOffsets, h.synced("a-0"))
    assert commit.member_epoch == 2
    h.finish()
    assert h.leave is not None
    assert h.do(LeaveGroupResponseReceived(h.leave.seq)) == [LeaveComplete()]
    assert h.state() is S.UNJOINED


def test_a_round_that_fails_starts_the_waiting_release_at_once() -> None:
    h = _rejoining()
    h.do(CloseRequested(deadline=30.0))
    h.joined(generation=2, protocol=COOP)
    # The group began another rebalance: no new JoinGroup, the release instead,
    # with the generation the coordinator is preparing from.
    acts = h.synced(error=E["REBALANCE_IN_PROGRESS"])
    assert of(SendJoinGroup, acts) == []
    assert one(CommitOffsets, acts).member_epoch == 2
    assert h.state() is S.LEAVING


def test_the_close_deadline_ends_the_wait_with_a_leave() -> None:
    h = _rejoining()
    h.do(CloseRequested(deadline=5.0))
    h.joined(generation=2, protocol=COOP)
    acts = h.tick(5.0)
    assert [type(a) for a in acts] == [SendLeaveGroup, Closed]
    assert acts[-1] == Closed(True)


def test_a_member_owning_nothing_does_not_wait_for_the_round() -> None:
    h = Harness(COOP_STICKY)
    h.subscribe()
    h.joined(generation=1, protocol=COOP)
    assert h.state() is S.SYNCING
    h.do(CloseRequested(deadline=30.0))
    assert h.state() is not S.SYNCING


def test_a_close_after_an_unanswered_sync_group_commits_only_what_the_assignment_keeps() -> None:
    # Seed 23957's rule at close: what the assignment heard after an unanswered
    # SyncGroup leaves out may be another member's already, so it is not committed.
    h = Harness(COOP_STICKY)
    h.stable("a-0", "a-1", protocol=COOP)
    h.tick(1.0)
    h.beat(E["REBALANCE_IN_PROGRESS"])
    h.finish()
    h.joined(generation=2, protocol=COOP)
    assert h.sync is not None
    assert h.do(RequestFailed(h.sync.seq, FailureKind.TIMEOUT)) == [StopFetching(tps("a-0", "a-1"))]
    one(SendJoinGroup, h.tick(h.now + 0.5))  # the rejoin, after the backoff
    assert h.do(CloseRequested(deadline=30.0)) == []  # waits for the round
    h.joined(generation=2, protocol=COOP)
    acts = h.synced("a-1")
    commit = one(CommitOffsets, acts)
    assert (commit.partitions, commit.member_epoch) == (tps("a-1"), 2)
    assert h.commit_done() == [
        RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0", "a-1"))
    ]


def test_subscribing_again_while_an_unsubscribe_waits_for_the_round_keeps_the_member() -> None:
    # Seed 12313: the member unsubscribed with its JoinGroup out and subscribed
    # again before the round ended; the waiting release then ran anyway, and the
    # member left the group and stayed out with a subscription.
    h = _rejoining()
    assert h.do(Unsubscribe()) == [StopFetching(tps("a-0"))]
    h.subscribe("a")
    h.joined(generation=2, protocol=COOP)
    acts = h.synced("a-0", "a-1")
    assert of(SendLeaveGroup, acts) == []
    acts = h.finish()
    assert StartFetching(tps("a-0", "a-1")) in acts  # fetching again, as a member
    assert h.state() is not S.LEAVING
    assert h.m.assignment == tps("a-0", "a-1")
