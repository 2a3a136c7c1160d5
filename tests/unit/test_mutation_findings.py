"""Tests the mutation audit of the safety rules found missing (see docs/testing.md).

Each test pins one behaviour that a deliberately broken rule left unnoticed by
the rest of the fast suites; its name says the behaviour.
"""

from __future__ import annotations

import anyio
import pytest
import test_classic as classic
import test_offsets as offsets
from test_membership import A, Harness, S, heartbeats, tips, tps

from kgroup.membership import (
    CallbackKind,
    ClassicHeartbeatResponseReceived,
    CloseRequested,
    CommitFailed,
    CommitOffsets,
    FailureKind,
    RequestFailed,
    RunCallback,
    StopFetching,
    SubscriptionChanged,
)
from kgroup.offsets import MemberView

# ------------------------------------------------------- consumer-protocol member


def test_session_timeout_counts_from_when_the_last_answered_heartbeat_was_sent() -> None:
    # The broker's session restarted when it received the heartbeat, no later:
    # a slow answer must not stretch the member's idea of its session.
    h = Harness(session_timeout_ms=10_000)
    h.stable({A: [0, 1]})
    h.tick(3.0)  # sent at t=3
    h.respond(1, None, at=5.0)  # answered 2 s later
    h.tick(6.0)  # the next heartbeat goes out and is never answered
    assert h.in_flight is not None
    assert h.m.next_deadline() == pytest.approx(13.0)
    assert h.tick(12.9) == []
    acts = h.tick(13.0)
    lost = h.callbacks[-1]
    assert acts == [
        StopFetching(tps("a-0", "a-1")),
        RunCallback(CallbackKind.LOST, lost.token, tps("a-0", "a-1")),
    ]
    assert h.state() is S.FENCED


def test_a_full_heartbeat_still_reports_partitions_whose_revoke_callback_runs() -> None:
    # The broker hands a partition on as soon as a heartbeat leaves it out: a
    # full heartbeat (after a failed one) sent while the revoke callback of
    # a-0 runs must still list a-0, or its next owner fetches it meanwhile.
    h = Harness(auto_commit=False)
    h.stable({A: [0, 1]})
    h.tick(3.0)
    h.respond(2, {A: [1]})  # revoke a-0: its callback is handed out
    assert h.callbacks[-1] == RunCallback(CallbackKind.REVOKED, h.callbacks[-1].token, tps("a-0"))
    h.tick(6.0)
    h.fail(FailureKind.TIMEOUT, at=6.5)  # the next heartbeat is a full one
    acts = h.tick(10.0)
    [full] = heartbeats(acts)
    assert full.topic_partitions == tips({A: [0, 1]})
    h.respond(2, None, at=10.2)
    # Once the callback completed, the ack leaves a-0 out.
    acts = h.callback(CallbackKind.REVOKED, at=10.5)
    [ack] = heartbeats(acts)
    assert ack.topic_partitions == tips({A: [1]})


# ------------------------------------------------------------------ classic member


def test_classic_release_after_a_failed_round_commits_with_the_synced_generation() -> None:
    # Generation 2 was announced (JoinGroup) but its SyncGroup failed: the
    # member never saw generation 2's assignment, which may leave a-0 to
    # another member. The release's commit carries generation 1, the one of
    # the assignment it holds, which the coordinator refuses rather than let
    # it rewind a new owner's offsets.
    h = classic.Harness(classic.COOP_STICKY)
    h.stable("a-0", "a-1", protocol="cooperative-sticky")
    h.tick(1.0)
    h.beat(classic.E["REBALANCE_IN_PROGRESS"])
    h.joined(generation=2, protocol="cooperative-sticky")
    h.synced(error=classic.E["REBALANCE_IN_PROGRESS"])  # rejoins at once
    assert (h.m.generation_id, h.m.synced_generation) == (2, 1)
    acts = h.do(CloseRequested(deadline=30.0))
    assert acts == [StopFetching(classic.tps("a-0", "a-1"))]  # waits for the round
    assert h.join is not None
    acts = h.do(RequestFailed(h.join.seq, FailureKind.TIMEOUT))
    [commit] = [a for a in acts if isinstance(a, CommitOffsets)]
    assert commit.partitions == classic.tps("a-0", "a-1")
    assert commit.member_epoch == 1


def test_classic_commit_refused_after_its_partition_was_lost_is_never_retried() -> None:
    # The application's commit of a-0 is in flight when the member loses a-0;
    # the refusal that comes back must not park it: if a-0 is assigned again,
    # a retry would rewind whatever its owner meanwhile committed.
    h = classic.Harness(classic.COOP_STICKY)
    h.stable("a-0", protocol="cooperative-sticky")
    h.tick(1.0)
    acts = h.beat(classic.E["UNKNOWN_MEMBER_ID"])
    assert RunCallback(CallbackKind.LOST, h.callbacks[-1].token, classic.tps("a-0")) in acts
    h.callback_done()
    assert h.m.assignment == frozenset()
    stale = {classic.TP_A0: 5}
    h.do(CommitFailed(None, classic.tps("a-0"), classic.E["REBALANCE_IN_PROGRESS"], 1, stale))
    h.joined(generation=5, protocol="cooperative-sticky")
    acts = h.synced("a-0")
    assert [a for a in acts if isinstance(a, CommitOffsets)] == []


def test_classic_heartbeat_error_about_the_previous_generation_is_ignored() -> None:
    # A heartbeat of generation 1 is still out when the member rejoins (its
    # subscription grew) and the JoinGroup announces generation 2. That
    # heartbeat's ILLEGAL_GENERATION is about generation 1: the member keeps
    # its partitions and goes on syncing, instead of reporting them lost.
    h = classic.Harness(classic.COOP_STICKY)
    h.subscribe("a")
    h.stable("a-0", protocol="cooperative-sticky")
    h.tick(1.0)
    old = h.heartbeat
    assert old is not None
    assert old.generation_id == 1
    h.do(SubscriptionChanged(frozenset({"a", "b"})))
    h.joined(generation=2, protocol="cooperative-sticky")
    assert h.do(ClassicHeartbeatResponseReceived(old.seq, classic.E["ILLEGAL_GENERATION"])) == []
    assert h.state() is classic.S.SYNCING
    assert h.m.assignment == classic.tps("a-0")


# ------------------------------------------------------------------ offset manager


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


@pytest.mark.anyio
async def test_a_commit_waits_for_a_member_epoch_before_it_is_sent(anyio_backend: str) -> None:
    # OffsetManager's own guard: no commit goes out while the member has no
    # epoch (joining, epoch 0), even for a partition its view reports owned;
    # it goes out once the member has one.
    epochs = iter([0, 0, 5])
    view = MemberView(
        member_id=lambda: "m", member_epoch=lambda: next(epochs, 5), owned=lambda: {offsets.P0}
    )
    coordinator = offsets.ScriptedCoordinator(offsets._versions(10, 10), [])
    manager = offsets.manager_for(coordinator, view)
    assert await manager.commit({offsets.P0: 7}, deadline=anyio.current_time() + 5) == {
        offsets.P0: 7
    }
    [request] = coordinator.requests
    assert request.generation_id_or_member_epoch == 5


@pytest.mark.parametrize("error", [0, classic.E["REBALANCE_IN_PROGRESS"]])
def test_classic_session_timeout_counts_from_when_the_last_answered_heartbeat_was_sent(
    error: int,
) -> None:
    # Bug found by the audit (the classic twin of the consumer-protocol rule
    # above): the classic member counted its session from when a heartbeat's
    # answer arrived. The coordinator restarted the session when it handled the
    # heartbeat, possibly right after it was sent, so an answer that took 3 s
    # let the member fetch 3 s past the coordinator's expiry, when its
    # partitions may be another member's.
    h = classic.Harness(classic.COOP_STICKY)
    h.stable("a-0", protocol="cooperative-sticky")  # session until t=10
    h.tick(1.0)
    sent = h.heartbeat
    assert sent is not None
    # Answered 3 s later: all is well, or the group rebalances (a cooperative
    # member keeps fetching while its JoinGroup is out, and sends no heartbeat).
    h.do(ClassicHeartbeatResponseReceived(sent.seq, error), at=4.0)
    # Nothing more is ever answered.
    assert h.m.next_deadline() == pytest.approx(11.0)
    assert StopFetching(classic.tps("a-0")) not in h.tick(10.9)
    acts = h.tick(11.0)
    assert StopFetching(classic.tps("a-0")) in acts
    if error == 0:
        assert RunCallback(CallbackKind.LOST, h.callbacks[-1].token, classic.tps("a-0")) in acts
