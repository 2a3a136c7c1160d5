"""kgroup.dataplane.share.acknowledgements: types, wire batches, routing, results."""

from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgroup.dataplane.share.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgementOutcome,
    AcknowledgeType,
    PendingAcknowledgements,
    callback_calls,
    coalesce,
    commit_results,
    expand,
    outcomes,
)
from kgroup.error_codes import ErrorCode
from kgroup.errors import BrokerError, RetriableBrokerError
from kgroup.types import TopicIdPartition

A, R, J, G, N = (
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.GAP,
    AcknowledgeType.RENEW,
)
T0 = TopicIdPartition(uuid.UUID(int=1), 0)
T1 = TopicIdPartition(uuid.UUID(int=1), 1)
T2 = TopicIdPartition(uuid.UUID(int=2), 0)


def test_types_carry_the_wire_numbers() -> None:
    assert [(t.name, int(t)) for t in AcknowledgeType] == [
        ("GAP", 0),
        ("ACCEPT", 1),
        ("RELEASE", 2),
        ("REJECT", 3),
        ("RENEW", 4),
    ]


@pytest.mark.parametrize(
    ("acks", "batches"),
    [
        ({}, []),
        ({5: A}, [(5, 5, (A,))]),
        ({5: A, 6: A, 7: A}, [(5, 7, (A,))]),
        ({5: A, 6: G, 7: A}, [(5, 7, (A, G, A))]),
        ({5: A, 7: A}, [(5, 5, (A,)), (7, 7, (A,))]),
        ({9: R, 8: R, 1: J, 2: N}, [(1, 2, (J, N)), (8, 9, (R,))]),
        ({0: G, 1: G, 3: A, 4: R}, [(0, 1, (G,)), (3, 4, (A, R))]),
    ],
    ids=[
        "nothing",
        "one",
        "run-one-type",
        "run-mixed",
        "hole-splits",
        "unsorted-input",
        "gap-run",
    ],
)
def test_coalesce(
    acks: dict[int, AcknowledgeType], batches: list[tuple[int, int, tuple[AcknowledgeType, ...]]]
) -> None:
    assert coalesce(acks) == tuple(AcknowledgementBatch(*b) for b in batches)


@settings(max_examples=300)
@given(st.dictionaries(st.integers(0, 200), st.sampled_from(list(AcknowledgeType)), max_size=60))
def test_coalesce_round_trips_and_is_minimal(acks: dict[int, AcknowledgeType]) -> None:
    batches = coalesce(acks)
    assert expand(batches) == acks
    # Batches are maximal runs: in order, never adjacent, each with the short
    # form exactly when its offsets share one type.
    for before, after in itertools.pairwise(batches):
        assert after.first_offset > before.last_offset + 1
    for batch in batches:
        one_type = len({acks[o] for o in batch.offsets()}) == 1
        assert (len(batch.types) == 1) == one_type


@pytest.mark.parametrize(
    ("first", "last", "types"),
    [(5, 4, (A,)), (5, 7, (A, A)), (5, 5, ())],
    ids=["empty-range", "wrong-count", "no-types"],
)
def test_a_batch_refuses_a_shape_the_wire_does_not_allow(
    first: int, last: int, types: tuple[AcknowledgeType, ...]
) -> None:
    with pytest.raises(ValueError, match="acknowledgement batch"):
        AcknowledgementBatch(first, last, types)


def test_type_of_reads_both_shapes_and_refuses_outside_offsets() -> None:
    assert AcknowledgementBatch(3, 5, (R,)).type_of(4) is R
    assert AcknowledgementBatch(3, 5, (A, G, J)).type_of(5) is J
    with pytest.raises(ValueError, match="outside"):
        AcknowledgementBatch(3, 5, (R,)).type_of(6)


def test_acknowledgements_ride_on_a_fetch_only_for_the_partitions_it_names() -> None:
    pending = PendingAcknowledgements()
    pending.add(1, T0, 10, A)
    pending.add(1, T0, 11, A)
    pending.add(1, T1, 3, R)
    pending.add(2, T2, 7, J)
    assert len(pending) == 4
    assert pending.nodes() == {1, 2}

    assert pending.take_for_fetch(1, {T0, T2}) == {T0: (AcknowledgementBatch(10, 11, (A,)),)}
    # T1 is not in node 1's fetch: it stays owed, for a ShareAcknowledge.
    assert pending.partitions(1) == {T1}
    assert pending.take_for_fetch(2, {T0}) == {}
    assert pending.take_all(1) == {T1: (AcknowledgementBatch(3, 3, (R,)),)}
    assert pending.take_all(2) == {T2: (AcknowledgementBatch(7, 7, (J,)),)}
    assert len(pending) == 0
    assert pending.nodes() == frozenset()
    assert pending.take_all(1) == {}


def test_a_later_acknowledgement_replaces_an_unsent_one() -> None:
    pending = PendingAcknowledgements()
    pending.add(1, T0, 4, N)
    pending.add(1, T0, 4, A)
    assert pending.take_all(1) == {T0: (AcknowledgementBatch(4, 4, (A,)),)}


def test_outcomes_pair_what_was_sent_with_each_partitions_code() -> None:
    sent = {
        T0: (AcknowledgementBatch(1, 2, (A,)), AcknowledgementBatch(5, 5, (G,))),
        T1: (AcknowledgementBatch(9, 9, (R,)),),
        T2: (AcknowledgementBatch(0, 0, (A,)),),
    }
    codes = {T0: 0, T1: int(ErrorCode.INVALID_RECORD_STATE)}
    assert outcomes(sent, codes) == (
        AcknowledgementOutcome(T0, frozenset({1, 2, 5}), 0),
        AcknowledgementOutcome(T1, frozenset({9}), 121),
        # Absent from the answer: not known to be applied.
        AcknowledgementOutcome(T2, frozenset({0}), -1),
    )


def test_a_request_error_fails_every_partition_it_carried() -> None:
    sent = {T0: (AcknowledgementBatch(1, 1, (A,)),), T1: (AcknowledgementBatch(2, 2, (A,)),)}
    result = outcomes(sent, {T0: 0}, request_error=ErrorCode.NETWORK_EXCEPTION)
    assert {o.error_code for o in result} == {int(ErrorCode.NETWORK_EXCEPTION)}


def test_commit_results_give_each_partition_none_or_its_typed_error() -> None:
    results = commit_results(
        [
            AcknowledgementOutcome(T0, frozenset({1}), 0),
            AcknowledgementOutcome(T1, frozenset({2}), int(ErrorCode.INVALID_RECORD_STATE)),
            AcknowledgementOutcome(T2, frozenset({3}), int(ErrorCode.NOT_LEADER_OR_FOLLOWER)),
            # A second request's success does not hide the first one's failure.
            AcknowledgementOutcome(T1, frozenset({4}), 0),
        ]
    )
    assert results[T0] is None
    t1, t2 = results[T1], results[T2]
    assert isinstance(t1, BrokerError)
    assert t1.code == ErrorCode.INVALID_RECORD_STATE
    assert not isinstance(t1, RetriableBrokerError)
    assert isinstance(t2, RetriableBrokerError)
    assert AcknowledgementOutcome(T0, frozenset(), 0).succeeded
    assert AcknowledgementOutcome(T0, frozenset(), 0).error() is None


@pytest.mark.parametrize(
    ("code", "retriable"),
    [
        (ErrorCode.NONE, False),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, True),
        (ErrorCode.REQUEST_TIMED_OUT, True),
        (ErrorCode.INVALID_RECORD_STATE, False),
        (ErrorCode.GROUP_AUTHORIZATION_FAILED, False),
        (ErrorCode.SHARE_SESSION_NOT_FOUND, True),
        # Kafka's KAFKA_STORAGE_ERROR (56, retriable), not in kgroup's table.
        (56, True),
        # A code no Kafka defines: not retriable.
        (9999, False),
    ],
)
def test_which_failures_a_synchronous_commit_may_retry(code: int, retriable: bool) -> None:
    assert AcknowledgementOutcome(T0, frozenset({1}), int(code)).retriable is retriable


def test_restore_owes_a_failed_requests_acknowledgements_again_newer_ones_winning() -> None:
    pending = PendingAcknowledgements()
    pending.add(1, T0, 2, J)  # acknowledged again while the request was out
    pending.restore(1, T0, (AcknowledgementBatch(1, 3, (A,)),))
    assert pending.take_all(1) == {T0: (AcknowledgementBatch(1, 3, (A, J, A)),)}


def test_callback_calls_group_partitions_by_outcome_success_first() -> None:
    calls = callback_calls(
        [
            AcknowledgementOutcome(T2, frozenset({9}), int(ErrorCode.INVALID_RECORD_STATE)),
            AcknowledgementOutcome(T0, frozenset({1, 2}), 0),
            AcknowledgementOutcome(T1, frozenset({5}), int(ErrorCode.INVALID_RECORD_STATE)),
            AcknowledgementOutcome(T0, frozenset({3}), 0),
        ]
    )
    assert [(dict(offsets), error is None) for offsets, error in calls] == [
        ({T0: frozenset({1, 2, 3})}, True),
        ({T1: frozenset({5}), T2: frozenset({9})}, False),
    ]
    error = calls[1][1]
    assert isinstance(error, BrokerError)
    assert error.code == ErrorCode.INVALID_RECORD_STATE
    assert callback_calls([]) == ()
