"""A classic member keeps heartbeating while it releases its partitions to leave.

``close()`` / ``unsubscribe()`` of a member that owns partitions commits them,
runs the revoke callback (where the application commits too) and only then
sends LeaveGroup. That release may outlast ``session.timeout.ms`` (a slow
callback, a slow commit); without heartbeats the coordinator expired the member
meanwhile, refused its commits, and every record since the last commit was
redelivered, while the partitions might already be another member's. As the
Java client (its heartbeat thread runs while close() runs onPartitionsRevoked),
the member heartbeats until its LeaveGroup, and reads the answers so:

- NONE and REBALANCE_IN_PROGRESS: the session is alive; a leaving member does
  not rejoin;
- ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID, or no successful
  heartbeat for a session timeout: the partitions are lost, nothing more of
  them is committed; a callback under way finishes as it began, otherwise the
  lost callback runs; LeaveGroup only where the coordinator still knows the
  member id (after ILLEGAL_GENERATION);
- coordinator errors: look the coordinator up again, then heartbeat on.
"""

from __future__ import annotations

from test_classic import ME, E, Harness, S, of, one, tps

from kgroup.membership import (
    ClassicAction,
    Closed,
    CloseRequested,
    CommitFailed,
    CommitOffsets,
    CoordinatorRediscovered,
    FailureKind,
    LeaveComplete,
    LeaveGroupResponseReceived,
    RediscoverCoordinator,
    ReportFatalError,
    RequestFailed,
    RunCallback,
    SendClassicHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    StopFetching,
    Unsubscribe,
)
from kgroup.membership.common.events import CallbackKind


def _closing(
    *, auto_commit: bool, session_timeout_ms: int = 10_000, instance_id: str | None = None
) -> Harness:
    """A member owning a-0 and a-1 in generation 1, closed at 0.5 s (heartbeat interval 1 s).

    With ``auto_commit`` the revocation commit is out (unanswered); without it
    the revoke callback is.
    """
    h = Harness(
        auto_commit=auto_commit, session_timeout_ms=session_timeout_ms, instance_id=instance_id
    )
    h.stable("a-0", "a-1")
    acts = h.do(CloseRequested(deadline=60.0), at=0.5)
    assert of(StopFetching, acts) == [StopFetching(tps("a-0", "a-1"))]
    if auto_commit:
        assert one(CommitOffsets, acts).partitions == tps("a-0", "a-1")
    else:
        assert one(RunCallback, acts).kind is CallbackKind.REVOKED
    assert h.state() is S.LEAVING
    return h


def _heartbeat_at(h: Harness, at: float) -> SendClassicHeartbeat:
    """The heartbeat sent at ``at`` (the member's deadline), checked to be due then."""
    assert h.m.next_deadline() == at
    return one(SendClassicHeartbeat, h.tick(at))


def _no_heartbeats_after(h: Harness, acts: list[ClassicAction]) -> None:
    assert of(SendClassicHeartbeat, acts) == []
    assert of(SendClassicHeartbeat, h.tick(h.now + 5.0)) == []


def test_a_revoke_callback_lasting_three_intervals_is_heartbeated_through_then_left() -> None:
    h = _closing(auto_commit=False)
    for beat in (1.0, 2.0, 3.0):
        hb = _heartbeat_at(h, beat)
        assert (hb.generation_id, hb.member_id) == (1, ME)
        assert h.beat() == []
    acts = h.callback_done()
    leave = one(SendLeaveGroup, acts)
    assert leave.member_id == ME
    _no_heartbeats_after(h, acts)
    assert h.do(LeaveGroupResponseReceived(leave.seq)) == [Closed(False)]


def test_heartbeats_answered_keep_a_release_longer_than_the_session_alive() -> None:
    # session.timeout.ms 3 s, a commit and a callback lasting 6.5 s together.
    h = _closing(auto_commit=True, session_timeout_ms=3_000)
    for beat in (1.0, 2.0, 3.0):
        _heartbeat_at(h, beat)
        h.beat()
    # The commit answers at 3.5 s: accepted, so the revoke callback runs.
    assert one(RunCallback, h.commit_done()).kind is CallbackKind.REVOKED
    for beat in (4.0, 5.0, 6.0):
        _heartbeat_at(h, beat)
        h.beat()
    h.now = 7.0
    assert one(SendLeaveGroup, h.callback_done()).member_id == ME


def test_a_rebalance_in_progress_answer_keeps_the_session_and_does_not_rejoin() -> None:
    h = _closing(auto_commit=True, session_timeout_ms=3_000)
    for beat in (1.0, 2.0, 3.0, 4.0):
        _heartbeat_at(h, beat)
        acts = h.beat(E["REBALANCE_IN_PROGRESS"])
        assert acts == []
        assert h.state() is S.LEAVING
    # 4.5 s: more than a session after the last NONE (at 0), but the
    # coordinator restarted the session with each answer: not lost.
    acts = h.commit_done()
    assert one(RunCallback, acts).kind is CallbackKind.REVOKED
    assert of(SendJoinGroup, h.callback_done()) == []
    assert h.leave is not None
    assert h.leave.member_id == ME


def test_illegal_generation_during_the_commit_loses_the_partitions_and_still_sends_leave() -> None:
    h = _closing(auto_commit=True)
    commits = len(h.commits)
    _heartbeat_at(h, 1.0)
    acts = h.beat(E["ILLEGAL_GENERATION"])
    # The lost callback instead of the revoke callback; nothing committed.
    lost = one(RunCallback, acts)
    assert (lost.kind, lost.partitions) == (CallbackKind.LOST, tps("a-0", "a-1"))
    assert of(CommitOffsets, acts) == []
    # Nothing owned: the runtime drops the application's commits of them.
    assert h.m.assignment == frozenset()
    assert h.m.synced_generation == -1
    # The commit's late outcome changes nothing.
    h.answered.add(h.commits[-1].token)
    assert (
        h.do(CommitFailed(h.commits[-1].token, tps("a-0", "a-1"), E["ILLEGAL_GENERATION"], 1)) == []
    )
    _no_heartbeats_after(h, [])
    acts = h.callback_done()
    # The coordinator still knows the member id: LeaveGroup (no generation in it) is accepted.
    leave = one(SendLeaveGroup, acts)
    assert leave.member_id == ME
    assert len(h.commits) == commits
    assert h.do(LeaveGroupResponseReceived(leave.seq)) == [Closed(False)]


def test_unknown_member_id_in_the_revoke_callback_lets_it_finish_then_closes_without_leave() -> (
    None
):
    h = _closing(auto_commit=False)
    _heartbeat_at(h, 1.0)
    acts = h.beat(E["UNKNOWN_MEMBER_ID"])
    # The application already heard "revoked": no second (lost) callback, no commit.
    assert acts == []
    assert h.m.assignment == frozenset()
    assert h.m.member_id == ""
    _no_heartbeats_after(h, [])
    # The member is gone: a LeaveGroup would be refused.
    assert h.callback_done() == [Closed(False)]
    assert h.commits == []


def test_unsubscribe_after_a_lost_release_ends_unjoined_without_leave() -> None:
    h = Harness(auto_commit=True)
    h.stable("a-0")
    h.do(Unsubscribe(), at=0.5)
    _heartbeat_at(h, 1.0)
    lost = one(RunCallback, h.beat(E["UNKNOWN_MEMBER_ID"]))
    assert lost.kind is CallbackKind.LOST
    assert h.callback_done() == [LeaveComplete()]
    assert h.state() is S.UNJOINED


def test_a_refused_revocation_commit_also_makes_the_release_a_loss() -> None:
    h = _closing(auto_commit=True)
    commit = h.commits[-1]
    h.answered.add(commit.token)
    acts = h.do(CommitFailed(commit.token, commit.partitions, E["UNKNOWN_MEMBER_ID"], 1))
    lost = one(RunCallback, acts)
    assert (lost.kind, lost.partitions) == (CallbackKind.LOST, tps("a-0", "a-1"))
    assert h.callback_done() == [Closed(False)]


def test_fenced_instance_id_during_the_commit_is_fatal_and_loses_the_partitions() -> None:
    h = _closing(auto_commit=True, instance_id="i-1")
    _heartbeat_at(h, 1.0)
    acts = h.beat(E["FENCED_INSTANCE_ID"])
    assert one(ReportFatalError, acts).code == E["FENCED_INSTANCE_ID"]
    lost = one(RunCallback, acts)
    assert (lost.kind, lost.partitions) == (CallbackKind.LOST, tps("a-0", "a-1"))
    assert of(CommitOffsets, acts) == []
    _no_heartbeats_after(h, [])
    # The close ends once the application heard (static members send no LeaveGroup).
    assert h.callback_done() == [Closed(False)]


def test_fenced_instance_id_during_an_unsubscribe_ends_fatal_without_rejoining() -> None:
    h = Harness(auto_commit=False, instance_id="i-1")
    h.stable("a-0")
    h.do(Unsubscribe(), at=0.5)
    _heartbeat_at(h, 1.0)
    assert one(ReportFatalError, h.beat(E["FENCED_INSTANCE_ID"])).name == "FENCED_INSTANCE_ID"
    assert h.callback_done() == []
    assert h.state() is S.FATAL


def test_a_coordinator_error_rediscovers_then_heartbeats_on() -> None:
    h = _closing(auto_commit=False)
    _heartbeat_at(h, 1.0)
    assert h.beat(E["NOT_COORDINATOR"]) == [RediscoverCoordinator()]
    assert of(SendClassicHeartbeat, h.tick(2.5)) == []
    hb = one(SendClassicHeartbeat, h.do(CoordinatorRediscovered(), at=2.6))
    assert hb.generation_id == 1
    h.beat()
    assert one(SendLeaveGroup, h.callback_done()).member_id == ME


def test_no_successful_heartbeat_for_a_session_loses_the_release() -> None:
    h = _closing(auto_commit=True, session_timeout_ms=3_000)
    _heartbeat_at(h, 1.0)
    # Unanswered: the coordinator is unreachable, or slow.
    assert h.m.next_deadline() == 3.0  # the session's end (last success at 0)
    acts = h.tick(3.0)
    assert RediscoverCoordinator() in acts
    lost = one(RunCallback, acts)
    assert (lost.kind, lost.partitions) == (CallbackKind.LOST, tps("a-0", "a-1"))
    assert h.m.assignment == frozenset()
    # Expired by the coordinator by now: no LeaveGroup.
    assert h.callback_done() == [Closed(False)]


def test_a_failed_heartbeat_is_retried_within_the_session() -> None:
    h = _closing(auto_commit=False, session_timeout_ms=3_000)
    hb = _heartbeat_at(h, 1.0)
    assert h.do(RequestFailed(hb.seq, FailureKind.TIMEOUT), at=1.1) == []
    retry = one(SendClassicHeartbeat, h.tick(2.0))
    assert retry.seq != hb.seq
    h.beat()
    acts = h.tick(3.5)
    assert of(RunCallback, acts) == []
    assert one(SendLeaveGroup, h.callback_done()).member_id == ME
