"""The decisions OffsetManager's retry loops execute, as pure functions (no broker, no I/O)."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from kgroup.errors import BrokerError
from kgroup.offsets import (
    CommitIdentity,
    MemberView,
    commit_identity,
    fetch_error_retried,
    judge_commit_errors,
    recreated_partitions,
    unowned,
)
from kgroup.protocol import broker_error
from kgroup.types import TopicPartition

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
B0 = TopicPartition("b", 0)


def _view(*, simple: bool, epoch: int = 7) -> MemberView:
    return MemberView(
        member_id=lambda: "m1",
        member_epoch=lambda: epoch,
        owned=lambda: {A0},
        instance_id="i1",
        simple=lambda: simple,
    )


@pytest.mark.parametrize(
    ("simple", "epoch", "who", "may_send"),
    [
        (False, 7, CommitIdentity("m1", 7, "i1"), True),
        (False, 0, CommitIdentity("m1", 0, "i1"), False),  # joining: no epoch yet
        (False, -1, CommitIdentity("m1", -1, "i1"), False),
        (True, 7, CommitIdentity("", -1, None, simple=True), True),  # manual assignment
    ],
)
def test_who_a_commit_is_sent_as(
    simple: bool, epoch: int, who: CommitIdentity, may_send: bool
) -> None:
    found = commit_identity(_view(simple=simple, epoch=epoch))
    assert found == who
    assert found.may_send is may_send


def test_a_commit_drops_partitions_no_longer_owned_or_owned_again_since() -> None:
    tenure = {A0: 1, A1: 2, B0: 0}
    started = {A0: 1, A1: 1, B0: 0}
    # A1 left and came back (tenure moved on); B0 is not owned.
    assert unowned([A0, A1, B0], {A0, A1}, tenure.__getitem__, started) == [A1, B0]


def _errors(*codes: ErrorCode) -> dict[TopicPartition, BrokerError]:
    partitions = [A0, A1, B0]
    return {partitions[i]: broker_error(code) for i, code in enumerate(codes)}


@pytest.mark.parametrize(
    ("codes", "retry_rebalance", "fatal", "describe", "stale"),
    [
        ((ErrorCode.stale_member_epoch,), True, None, set(), True),
        ((ErrorCode.not_coordinator, ErrorCode.request_timed_out), True, None, set(), False),
        ((ErrorCode.unknown_topic_id,), True, None, {"a"}, False),
        ((ErrorCode.unknown_topic_or_partition,), True, None, {"a"}, False),
        ((ErrorCode.rebalance_in_progress,), True, None, set(), False),
        # An application's classic commit: its generation is about to end.
        ((ErrorCode.rebalance_in_progress,), False, ErrorCode.rebalance_in_progress, set(), False),
        ((ErrorCode.fenced_member_epoch,), True, ErrorCode.fenced_member_epoch, set(), False),
        (
            (ErrorCode.stale_member_epoch, ErrorCode.topic_authorization_failed),
            True,
            ErrorCode.topic_authorization_failed,
            set(),
            True,
        ),
    ],
)
def test_what_a_commit_makes_of_an_answer_with_errors(
    codes: tuple[ErrorCode, ...],
    retry_rebalance: bool,
    fatal: ErrorCode | None,
    describe: set[str],
    stale: bool,
) -> None:
    answer = judge_commit_errors(_errors(*codes), retry_rebalance_in_progress=retry_rebalance)
    assert (None if answer.fatal is None else answer.fatal.code) == fatal
    assert answer.describe == describe
    assert answer.stale is stale


@pytest.mark.parametrize(
    ("code", "as_member", "retried"),
    [
        (ErrorCode.unstable_offset_commit, True, True),
        (ErrorCode.coordinator_load_in_progress, False, True),
        (ErrorCode.fenced_member_epoch, True, True),  # until the member rejoins
        (ErrorCode.illegal_generation, True, True),
        (ErrorCode.fenced_member_epoch, False, False),
        (ErrorCode.group_authorization_failed, True, False),
    ],
)
def test_which_offset_fetch_failures_are_retried(
    code: ErrorCode, as_member: bool, retried: bool
) -> None:
    assert fetch_error_retried(broker_error(code), as_member=as_member) is retried


OLD, NEW, NIL = uuid.uuid4(), uuid.uuid4(), uuid.UUID(int=0)


@pytest.mark.parametrize(
    ("fetched", "current", "recreated"),
    [
        (OLD, NEW, True),
        (OLD, OLD, False),
        (None, NEW, False),  # never fetched: nothing to compare
        (OLD, None, False),  # not in the metadata (deleted): another rule
        (NIL, NEW, False),  # a broker that sends no ids
        (OLD, NIL, False),
    ],
)
def test_a_topic_is_recreated_when_its_id_changed_since_fetching(
    fetched: uuid.UUID | None, current: uuid.UUID | None, recreated: bool
) -> None:
    found = recreated_partitions([A0], lambda _tp: fetched, lambda _topic: current)
    assert found == ({A0} if recreated else set())
