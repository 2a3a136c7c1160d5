"""kgroup.dataplane.share.session: epochs, incremental requests, resets, close."""

from __future__ import annotations

import uuid

import pytest

from kgroup.dataplane.share.acknowledgements import AcknowledgementBatch, AcknowledgeType
from kgroup.dataplane.share.session import (
    CLOSE_EPOCH,
    AcquireMode,
    FetchLimits,
    SessionState,
    ShareSession,
    next_epoch,
)
from kgroup.error_codes import ErrorCode
from kgroup.types import TopicIdPartition

TOPIC_A = uuid.UUID(int=0xA)
TOPIC_B = uuid.UUID(int=0xB)
A0, A1, B0 = (
    TopicIdPartition(TOPIC_A, 0),
    TopicIdPartition(TOPIC_A, 1),
    TopicIdPartition(TOPIC_B, 0),
)
LIMITS = FetchLimits(max_wait_ms=100, min_bytes=1, max_bytes=1000, max_records=50, batch_size=25)
ACCEPT_3 = (AcknowledgementBatch(3, 3, (AcknowledgeType.ACCEPT,)),)


def _open(partitions: set[TopicIdPartition]) -> ShareSession:
    session = ShareSession(node=4, member_id="m-1")
    session.set_partitions(partitions)
    session.fetch(LIMITS)
    assert session.on_response(0, fetch=True)
    return session


@pytest.mark.parametrize(
    ("epoch", "after"),
    [(0, 1), (1, 2), (41, 42), (2**31 - 1, 1), (-1, -1)],
    ids=["open", "first", "later", "wraps-past-int32-to-1", "close-stays"],
)
def test_next_epoch(epoch: int, after: int) -> None:
    assert next_epoch(epoch) == after


def test_opening_names_every_wanted_partition_at_epoch_0() -> None:
    session = ShareSession(node=4, member_id="m-1")
    session.set_partitions({B0, A1, A0})
    plan = session.fetch(LIMITS)
    assert (plan.node, plan.member_id, plan.epoch) == (4, "m-1", 0)
    assert plan.partitions == (A0, A1, B0)
    assert plan.forgotten == ()
    assert plan.limits is LIMITS
    assert session.on_response(0, fetch=True)
    assert (session.state, session.epoch) == (SessionState.OPEN, 1)


def test_incremental_requests_name_only_changes_and_forget_dropped_partitions() -> None:
    session = _open({A0, A1})

    steady = session.fetch(LIMITS)
    assert (steady.epoch, steady.partitions, steady.forgotten) == (1, (), ())
    session.on_response(0, fetch=True)

    session.set_partitions({A1, B0})
    changed = session.fetch(LIMITS)
    assert (changed.epoch, changed.partitions, changed.forgotten) == (2, (B0,), (A0,))
    assert session.session_partitions == {A1, B0}
    session.on_response(0, fetch=True)
    assert session.epoch == 3


def test_a_recreated_topic_is_forgotten_under_its_old_id_and_added_under_the_new() -> None:
    session = _open({A0})
    recreated = TopicIdPartition(uuid.UUID(int=0xA2), 0)
    session.set_partitions({recreated})
    plan = session.fetch(LIMITS)
    assert (plan.partitions, plan.forgotten) == ((recreated,), (A0,))


def test_acknowledgements_name_their_partition_in_an_incremental_request() -> None:
    session = _open({A0, A1})
    plan = session.fetch(LIMITS, {A1: ACCEPT_3})
    assert plan.partitions == (A1,)
    assert plan.acknowledgements == {A1: ACCEPT_3}
    assert not plan.renews


def test_acknowledgements_for_a_partition_leaving_the_session_are_refused() -> None:
    session = _open({A0, A1})
    session.set_partitions({A0})
    with pytest.raises(ValueError, match="will not hold"):
        session.fetch(LIMITS, {A1: ACCEPT_3})
    assert session.fetch_partitions() == {A0}
    assert not session.in_flight


def test_renew_acknowledgements_set_the_renew_flag() -> None:
    session = _open({A0})
    renew = (AcknowledgementBatch(7, 9, (AcknowledgeType.RENEW,)),)
    assert session.fetch(LIMITS, {A0: renew}).renews
    session.on_response(0, fetch=True)
    plan = session.acknowledge({A0: renew})
    assert plan is not None
    assert plan.renews


@pytest.mark.parametrize(
    ("code", "fetch", "resets"),
    [
        (ErrorCode.SHARE_SESSION_NOT_FOUND, True, True),
        (ErrorCode.INVALID_SHARE_SESSION_EPOCH, True, True),
        (ErrorCode.SHARE_SESSION_LIMIT_REACHED, True, True),
        (ErrorCode.SHARE_SESSION_NOT_FOUND, False, True),
        (ErrorCode.INVALID_SHARE_SESSION_EPOCH, False, True),
        # Only ShareFetch can hit the session limit (it opens sessions).
        (ErrorCode.SHARE_SESSION_LIMIT_REACHED, False, False),
        (ErrorCode.UNKNOWN_SERVER_ERROR, True, False),
        (ErrorCode.GROUP_AUTHORIZATION_FAILED, False, False),
    ],
)
def test_session_errors_reopen_at_epoch_0_and_other_errors_move_on(
    code: ErrorCode, fetch: bool, resets: bool
) -> None:
    session = _open({A0, A1})
    if fetch:
        session.fetch(LIMITS)
    else:
        session.acknowledge({A0: ACCEPT_3})
    assert not session.on_response(code, fetch=fetch)
    if resets:
        assert (session.state, session.epoch) == (SessionState.NEW, 0)
        # The new session names every wanted partition again.
        assert session.fetch(LIMITS).partitions == (A0, A1)
    else:
        assert (session.state, session.epoch) == (SessionState.OPEN, 2)
        assert session.fetch(LIMITS).partitions == ()


def test_a_request_lost_in_transport_reopens_the_session() -> None:
    session = _open({A0})
    session.fetch(LIMITS)
    session.on_transport_error()
    plan = session.fetch(LIMITS)
    assert (plan.epoch, plan.partitions) == (0, (A0,))


def test_one_request_in_flight_at_a_time() -> None:
    session = _open({A0})
    session.fetch(LIMITS)
    assert session.in_flight
    with pytest.raises(RuntimeError, match="in flight"):
        session.fetch(LIMITS)
    with pytest.raises(RuntimeError, match="in flight"):
        session.acknowledge({A0: ACCEPT_3})
    session.on_response(0, fetch=True)
    with pytest.raises(RuntimeError, match="no request in flight"):
        session.on_response(0, fetch=True)


def test_share_acknowledge_continues_the_session_but_cannot_open_one() -> None:
    fresh = ShareSession(node=4, member_id="m-1")
    fresh.set_partitions({A0})
    assert fresh.acknowledge({A0: ACCEPT_3}) is None
    assert not fresh.in_flight

    session = _open({A0})
    plan = session.acknowledge({A0: ACCEPT_3})
    assert plan is not None
    assert (plan.node, plan.member_id, plan.epoch, plan.acknowledgements) == (
        4,
        "m-1",
        1,
        {A0: ACCEPT_3},
    )
    session.on_response(0, fetch=False)
    assert session.epoch == 2


def test_close_sends_epoch_minus_1_with_the_last_acknowledgements_then_nothing() -> None:
    session = _open({A0})
    plan = session.close({A0: ACCEPT_3})
    assert plan is not None
    assert (plan.epoch, plan.acknowledgements) == (CLOSE_EPOCH, {A0: ACCEPT_3})
    closing = session.state
    session.on_response(0, fetch=False)
    assert (closing, session.state) == (SessionState.CLOSING, SessionState.CLOSED)
    with pytest.raises(RuntimeError, match="closed"):
        session.fetch(LIMITS)


def test_closing_a_session_never_opened_sends_nothing() -> None:
    session = ShareSession(node=4, member_id="m-1")
    assert session.close() is None
    assert session.state is SessionState.CLOSED


def test_a_close_lost_in_transport_still_closes() -> None:
    session = _open({A0})
    session.close()
    session.on_transport_error()
    assert session.state is SessionState.CLOSED


@pytest.mark.parametrize(
    "kwargs",
    [{"max_records": 0}, {"batch_size": 0}, {"max_wait_ms": -1}, {"max_bytes": 2**31}],
)
def test_limits_refuse_values_the_wire_cannot_carry(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="max_|batch_size|must"):
        FetchLimits(**kwargs)  # type: ignore[arg-type]


def test_limits_default_to_batch_optimized_acquisition() -> None:
    assert FetchLimits().acquire_mode is AcquireMode.BATCH_OPTIMIZED
    assert int(AcquireMode.RECORD_LIMIT) == 1
