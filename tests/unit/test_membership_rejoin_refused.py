"""A rejoin refused because the broker still holds the member id: leave (-1), then rejoin.

Measured on real brokers (ConsumerGroupHeartbeat, same member id, after a fence
at epoch 3 whose previous epoch is 2): Apache Kafka 4.0.2 and 4.1.2 answer the
epoch-0 rejoin FENCED_MEMBER_EPOCH ("smaller member epoch (0)") every time,
until the held member's session times out (KAFKA-19233, fixed from 4.2.0);
4.2.0 to 4.4.0 accept it. Every version answers a static member's rejoin
UNRELEASED_INSTANCE_ID while it holds the instance id for that same member id.
On all of them a leave heartbeat (-1, with the instance id if static) is
accepted and the following join gets the partitions back.
"""

from __future__ import annotations

import logging

import pytest
from test_membership import A, B, Harness, S, heartbeats

from kgroup.error_codes import ERROR_CODES
from kgroup.membership import (
    CallbackKind,
    Closed,
    CloseRequested,
    CoordinatorRediscovered,
    HeartbeatResponse,
    HeartbeatResponseReceived,
    LeaveComplete,
    ReportFatalError,
    RunCallback,
    StartFetching,
    SubscriptionChanged,
    Unsubscribe,
)

FENCED = ERROR_CODES["FENCED_MEMBER_EPOCH"]
UNRELEASED = ERROR_CODES["UNRELEASED_INSTANCE_ID"]
FENCED_INSTANCE = ERROR_CODES["FENCED_INSTANCE_ID"]
UNKNOWN_MEMBER = ERROR_CODES["UNKNOWN_MEMBER_ID"]
NOT_COORDINATOR = ERROR_CODES["NOT_COORDINATOR"]


def fenced_then_rejoining(**config: object) -> Harness:
    """STABLE at epoch 3 with a-0, fenced, lost callback done: the rejoin (epoch 0) in flight."""
    h = Harness(**config)
    h.stable({A: [0]}, epoch=3)
    h.tick(3.0)
    h.respond(error=FENCED)
    h.callback(CallbackKind.LOST)
    assert h.state() is S.JOINING
    assert h.in_flight is not None
    assert h.in_flight.request.member_epoch == 0
    return h


def test_a_rejoin_fenced_at_epoch_zero_sends_a_leave_at_once_then_rejoins() -> None:
    h = fenced_then_rejoining()
    acts = h.respond(error=FENCED)
    assert h.state() is S.LEAVING_TO_REJOIN
    [leave] = heartbeats(acts)
    assert (leave.member_id, leave.member_epoch, leave.instance_id) == (h.m.member_id, -1, None)
    # The leave answered: the rejoin goes out at once, a full join.
    acts = h.respond(epoch=-1)
    assert h.state() is S.JOINING
    [join] = heartbeats(acts)
    assert join.member_epoch == 0
    assert join.member_id == h.m.member_id
    assert join.topic_partitions == frozenset()
    assert join.subscribed_topic_names == ("a", "b")
    # Accepted as a new member: reconciles the new assignment as usual.
    h.respond(5, {A: [0]})
    acts = h.callback(CallbackKind.ASSIGNED)
    [ack] = heartbeats(acts)
    assert ack.member_epoch == 5
    assert h.state() is S.STABLE


def test_without_the_leave_the_rejoin_would_hammer_the_coordinator() -> None:
    """What the member did before: each refusal rejoined at once, a tight loop.

    Now, whatever the broker answers, at most a leave and one more join go out
    in the same instant; then the member waits for the backoff.
    """
    h = fenced_then_rejoining()
    sent_before = len(h.sent)
    for _ in range(5):
        if h.in_flight is None:
            break
        h.respond(error=FENCED)  # same virtual instant: a pre-fix broker answers fast
    assert [r.member_epoch for r in heartbeats(h.sent[sent_before:])] == [-1, 0]
    assert h.state() is S.LEAVING_TO_REJOIN
    deadline = h.m.next_deadline()
    assert deadline is not None
    assert deadline > h.now


def test_a_second_refusal_after_the_leave_backs_off_growing_to_the_maximum() -> None:
    h = fenced_then_rejoining(retry_backoff_ms=100, retry_backoff_max_ms=400)
    h.respond(error=FENCED)  # leave sent
    h.respond(epoch=-1)  # rejoin sent
    waits = []
    for _ in range(5):
        acts = h.respond(error=FENCED)  # refused again: the next leave waits
        assert heartbeats(acts) == []
        assert h.state() is S.LEAVING_TO_REJOIN
        deadline = h.m.next_deadline()
        assert deadline is not None
        waits.append(round(deadline - h.now, 3))
        assert heartbeats(h.tick(deadline - 0.001)) == []
        [leave] = heartbeats(h.tick(deadline))
        assert leave.member_epoch == -1
        h.respond(epoch=-1)
        assert h.in_flight is not None
        assert h.in_flight.request.member_epoch == 0
    assert waits == [0.1, 0.2, 0.4, 0.4, 0.4]


def test_an_accepted_rejoin_resets_the_bound_so_a_later_fence_leaves_at_once() -> None:
    h = fenced_then_rejoining()
    h.respond(error=FENCED)
    h.respond(epoch=-1)
    h.respond(error=FENCED)  # refused once more: backing off
    h.tick(h.m.next_deadline() or 0.0)
    h.respond(epoch=-1)
    h.respond(7, {B: [0]})  # accepted
    h.callback(CallbackKind.ASSIGNED)
    h.respond(7)  # ack answered: STABLE
    assert h.state() is S.STABLE
    h.tick(h.now + 3.0)
    h.respond(error=FENCED)
    h.callback(CallbackKind.LOST)
    acts = h.respond(error=FENCED)
    assert [r.member_epoch for r in heartbeats(acts)] == [-1]


def test_the_pre_19233_broker_is_named_in_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kgroup.membership")
    h = fenced_then_rejoining()
    h.respond(error=FENCED)
    h.respond(epoch=-1)
    h.respond(error=FENCED)
    h.tick(h.m.next_deadline() or 0.0)
    h.respond(epoch=-1)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "KAFKA-19233" in warnings[0]
    assert "FENCED_MEMBER_EPOCH" in warnings[0]


def test_a_current_broker_that_accepts_the_rejoin_sees_no_leave() -> None:
    h = fenced_then_rejoining()
    h.respond(3, {A: [0]})  # 4.2+: the held member's epoch and assignment back
    assert h.state() is S.RECONCILING
    assert all(r.member_epoch >= 0 for r in heartbeats(h.sent))


def test_fenced_at_a_positive_epoch_is_an_ordinary_fence_not_a_refused_rejoin() -> None:
    h = Harness()
    h.stable({A: [0]}, epoch=3)
    h.tick(3.0)
    acts = h.respond(error=FENCED)
    assert h.state() is S.FENCED
    assert [c.kind for c in acts if isinstance(c, RunCallback)] == [CallbackKind.LOST]
    assert heartbeats(acts) == []


@pytest.mark.parametrize("code", [UNKNOWN_MEMBER, FENCED])
def test_a_leave_answered_unknown_or_fenced_means_the_member_is_gone(code: int) -> None:
    h = fenced_then_rejoining()
    h.respond(error=FENCED)
    assert h.state() is S.LEAVING_TO_REJOIN
    acts = h.respond(error=code)
    assert h.state() is S.JOINING
    assert [r.member_epoch for r in heartbeats(acts)] == [0]


def test_the_leave_follows_a_moved_coordinator_and_is_resent() -> None:
    h = fenced_then_rejoining()
    h.respond(error=FENCED)
    acts = h.respond(error=NOT_COORDINATOR)
    assert h.state() is S.LEAVING_TO_REJOIN
    assert heartbeats(acts) == []
    acts = h.do(CoordinatorRediscovered())
    assert [r.member_epoch for r in heartbeats(acts)] == [-1]


def test_a_failed_leave_is_retried_after_the_backoff() -> None:
    h = fenced_then_rejoining(retry_backoff_ms=100, retry_backoff_max_ms=1000)
    h.respond(error=FENCED)
    assert heartbeats(h.fail()) == []
    assert h.state() is S.LEAVING_TO_REJOIN
    assert [r.member_epoch for r in heartbeats(h.tick(h.now + 0.1))] == [-1]


# ------------------------------------------------------------------ static members


def static_fenced_then_rejoining() -> Harness:
    return fenced_then_rejoining(instance_id="i-1")


def test_a_static_members_own_unreleased_instance_id_is_left_with_minus_one() -> None:
    h = static_fenced_then_rejoining()
    acts = h.respond(error=UNRELEASED)
    assert h.state() is S.LEAVING_TO_REJOIN
    assert not any(isinstance(a, ReportFatalError) for a in acts)
    [leave] = heartbeats(acts)
    # -1 removes the held member; -2 would keep it, and the rejoin refused again.
    assert (leave.member_epoch, leave.instance_id) == (-1, "i-1")
    acts = h.respond(epoch=-1)
    [join] = heartbeats(acts)
    assert (join.member_epoch, join.instance_id) == (0, "i-1")
    h.respond(6, {A: [0]})
    assert h.state() is S.RECONCILING


def _refused_again_after_the_leave() -> Harness:
    """A static member's rejoin after its leave refused UNRELEASED_INSTANCE_ID: it waits, leaves."""
    h = fenced_then_rejoining(instance_id="i-1", retry_backoff_ms=100)
    h.respond(error=UNRELEASED)
    h.respond(epoch=-1)
    acts = h.respond(error=UNRELEASED)
    assert h.state() is S.LEAVING_TO_REJOIN
    assert not any(isinstance(a, ReportFatalError) for a in acts)
    assert heartbeats(acts) == []
    [leave] = heartbeats(h.tick(h.now + 0.1))
    assert (leave.member_epoch, leave.instance_id) == (-1, "i-1")
    return h


def test_unreleased_instance_id_again_after_the_leave_is_its_own_lost_rejoin_left_again() -> None:
    # Simulator seed 869: the rejoin after the leave was accepted (the broker
    # holds this member again) but its answer was lost; the retried join was
    # refused UNRELEASED_INSTANCE_ID for the member's own id, which was fatal.
    h = _refused_again_after_the_leave()
    [join] = heartbeats(h.respond(epoch=-1))
    assert (join.member_epoch, join.instance_id) == (0, "i-1")
    h.respond(6, {A: [0]})
    assert h.state() is S.RECONCILING


def test_unreleased_instance_id_again_after_the_leave_is_fatal_once_another_owner_fences_it() -> (
    None
):
    h = _refused_again_after_the_leave()
    acts = h.respond(error=FENCED_INSTANCE)  # another process took the instance id meanwhile
    assert h.state() is S.FATAL
    [fatal] = [a for a in acts if isinstance(a, ReportFatalError)]
    assert fatal.name == "UNRELEASED_INSTANCE_ID"


def test_a_leave_fenced_by_another_owner_reports_the_joins_unreleased_instance_id() -> None:
    h = static_fenced_then_rejoining()
    h.respond(error=UNRELEASED)
    acts = h.respond(error=FENCED_INSTANCE)
    assert h.state() is S.FATAL
    [fatal] = [a for a in acts if isinstance(a, ReportFatalError)]
    assert fatal.name == "UNRELEASED_INSTANCE_ID"


def test_the_first_join_refused_unreleased_instance_id_stays_fatal() -> None:
    """Nothing was sent before: another process holds the instance id (docs/migration.md)."""
    h = Harness(instance_id="i-1")
    h.subscribe("a")
    acts = h.respond(error=UNRELEASED)
    assert h.state() is S.FATAL
    assert [a.name for a in acts if isinstance(a, ReportFatalError)] == ["UNRELEASED_INSTANCE_ID"]
    assert [r.member_epoch for r in heartbeats(h.sent)] == [0]


def test_a_dynamic_member_refused_unreleased_instance_id_is_fatal_as_before() -> None:
    h = fenced_then_rejoining()
    acts = h.respond(error=UNRELEASED)
    assert h.state() is S.FATAL
    assert [a.name for a in acts if isinstance(a, ReportFatalError)] == ["UNRELEASED_INSTANCE_ID"]


# ---------------------------------------------------- unsubscribe, close, subscribe


def test_close_while_leaving_to_rejoin_sends_the_closing_leave_and_closes() -> None:
    h = static_fenced_then_rejoining()
    h.respond(error=UNRELEASED)
    acts = h.do(CloseRequested(deadline=h.now + 5.0))
    # A static member's close keeps its ordinary -2: the instance id survives a restart.
    assert h.leave is not None
    assert h.leave.request.member_epoch == -2
    assert h.state() is S.UNSUBSCRIBED
    h.respond(epoch=-1)  # the earlier leave's answer: of no use any more
    assert h.state() is S.UNSUBSCRIBED
    assert heartbeats(h.sent[-1:]) == [h.leave.request]
    leave = h.leave
    resp_acts = h.do(HeartbeatResponseReceived(leave.seq, HeartbeatResponse(member_epoch=-2)))
    assert any(isinstance(a, Closed) for a in acts + resp_acts)
    assert h.m.closed


def test_unsubscribe_while_leaving_to_rejoin_leaves_and_does_not_rejoin() -> None:
    h = fenced_then_rejoining()
    h.respond(error=FENCED)
    assert h.state() is S.LEAVING_TO_REJOIN
    acts = h.do(Unsubscribe())
    assert h.state() is S.UNSUBSCRIBED
    assert h.leave is not None
    assert h.leave.request.member_epoch == -1
    acts = h.respond(epoch=-1)  # the first leave's answer: ignored
    assert heartbeats(acts) == []
    assert h.state() is S.UNSUBSCRIBED
    assert h.m.next_deadline() is None


def test_a_subscription_change_while_leaving_to_rejoin_goes_out_with_the_rejoin() -> None:
    h = fenced_then_rejoining()
    h.respond(error=FENCED)
    assert h.state() is S.LEAVING_TO_REJOIN
    assert heartbeats(h.do(SubscriptionChanged(frozenset({"b"})))) == []
    [join] = heartbeats(h.respond(epoch=-1))
    assert join.subscribed_topic_names == ("b",)


def test_no_partition_fetches_while_leaving_to_rejoin() -> None:
    h = fenced_then_rejoining()
    acts = h.respond(error=FENCED)
    assert h.state() is S.LEAVING_TO_REJOIN
    acts += h.respond(epoch=-1)
    assert not any(isinstance(a, StartFetching) for a in acts)
    assert h.m.assignment == frozenset()
    assert not any(isinstance(a, LeaveComplete) for a in acts)
