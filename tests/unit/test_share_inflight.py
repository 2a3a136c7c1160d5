"""kgroup.dataplane.share.inflight: acquired records matched, handed out, acknowledged."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgroup.dataplane.share.acknowledgements import AcknowledgementBatch, AcknowledgeType
from kgroup.dataplane.share.inflight import (
    AcknowledgementMode,
    AcquiredBatch,
    AcquiredRange,
    InFlight,
    match_acquired,
)
from kgroup.dataplane.share.records import DecodedRecords, ShareRecord, TimestampType
from kgroup.errors import (
    CorruptRecordError,
    InvalidAcknowledgementError,
    UnacknowledgedRecordsError,
)
from kgroup.types import TopicIdPartition

TP = TopicIdPartition(uuid.UUID(int=7), 2)
NODE = 3
G, A, R, J, N = (
    AcknowledgeType.GAP,
    AcknowledgeType.ACCEPT,
    AcknowledgeType.RELEASE,
    AcknowledgeType.REJECT,
    AcknowledgeType.RENEW,
)


def rec(offset: int, value: bytes = b"0123456789") -> ShareRecord:
    return ShareRecord(
        _topic="t",
        _partition=2,
        _offset=offset,
        _key=None,
        _value=value,
        _headers=(),
        _timestamp_type=TimestampType.CREATE_TIME,
        _timestamp=1,
        _leader_epoch=None,
        _delivery_count=0,
    )


def decoded(
    offsets: list[int], control: set[int] | None = None, error_at: int | None = None
) -> DecodedRecords:
    error = (
        None
        if error_at is None
        else CorruptRecordError(topic="t", partition=2, offset=error_at, reason="checksum mismatch")
    )
    return DecodedRecords(tuple(rec(o) for o in offsets), frozenset(control or ()), error)


@pytest.mark.parametrize(
    ("records", "control", "ranges", "handed", "automatic"),
    [
        # Every record acquired, first delivery.
        ([0, 1, 2], set(), [(0, 2, 1)], [(0, 1), (1, 1), (2, 1)], {}),
        # Another member acquired 0 and 3: the batch holds them, they are not ours.
        ([0, 1, 2, 3], set(), [(1, 2, 4)], [(1, 4), (2, 4)], {}),
        # Two ranges, two delivery counts.
        ([5, 6, 7], set(), [(5, 5, 2), (6, 7, 1)], [(5, 2), (6, 1), (7, 1)], {}),
        # Compacted offsets 11-12 inside the acquired range are gaps.
        ([10, 13], set(), [(10, 13, 1)], [(10, 1), (13, 1)], {11: G, 12: G}),
        # A transaction marker is a gap, not a record.
        ([20], {21}, [(20, 21, 1)], [(20, 1)], {21: G}),
        # Acquired past the records the response held: gaps.
        ([30], set(), [(30, 32, 1)], [(30, 1)], {31: G, 32: G}),
        # Nothing acquired: nothing handed out, whatever the bytes held.
        ([40, 41], set(), [], [], {}),
    ],
    ids=["all", "others-records", "two-counts", "compacted", "control", "tail-gap", "none"],
)
def test_match_acquired(
    records: list[int],
    control: set[int],
    ranges: list[tuple[int, int, int]],
    handed: list[tuple[int, int]],
    automatic: dict[int, AcknowledgeType],
) -> None:
    batch = match_acquired(TP, NODE, decoded(records, control), [AcquiredRange(*r) for r in ranges])
    assert [(r.offset(), r.delivery_count()) for r in batch.records] == handed
    assert dict(batch.automatic) == automatic
    assert (batch.partition, batch.node, batch.error) == (TP, NODE, None)


@pytest.mark.parametrize(
    ("records", "error_at", "automatic"),
    [
        # The batch at 3 failed: its acquired offsets are rejected, not redelivered.
        ([0, 1, 2], 3, {3: J, 4: J, 5: J}),
        # A compacted offset before the bad batch is still a gap.
        ([0, 1], 3, {2: G, 3: J, 4: J, 5: J}),
        # A garbled base offset below what decoded: reject from the end of the good part.
        ([0, 1, 2], 1, {3: J, 4: J, 5: J}),
        # Nothing decoded and no offset known: every acquired offset is rejected.
        ([], -1, {o: J for o in range(6)}),
    ],
    ids=["bad-batch", "gap-then-bad", "garbled-offset", "nothing-decoded"],
)
def test_acquired_offsets_of_bytes_that_do_not_decode_are_rejected(
    records: list[int], error_at: int, automatic: dict[int, AcknowledgeType]
) -> None:
    batch = match_acquired(TP, NODE, decoded(records, error_at=error_at), [AcquiredRange(0, 5, 1)])
    assert [r.offset() for r in batch.records] == records
    assert dict(batch.automatic) == automatic
    assert batch.error is not None


@settings(max_examples=300)
@given(
    records=st.sets(st.integers(0, 40)),
    control=st.sets(st.integers(0, 40)),
    starts=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 5), st.integers(1, 6))),
)
def test_every_acquired_offset_is_handed_out_or_acknowledged_automatically_never_both(
    records: set[int], control: set[int], starts: list[tuple[int, int, int]]
) -> None:
    records -= control
    acquired: dict[int, int] = {}
    ranges = []
    for first, length, count in starts:
        span = range(first, first + length + 1)
        if any(o in acquired for o in span):
            continue  # the broker never acquires an offset twice in one response
        ranges.append(AcquiredRange(first, first + length, count))
        acquired.update(dict.fromkeys(span, count))
    batch = match_acquired(TP, NODE, decoded(sorted(records), control), ranges)
    handed = {r.offset(): r.delivery_count() for r in batch.records}
    assert handed == {o: c for o, c in acquired.items() if o in records}
    assert set(batch.automatic) == set(acquired) - records
    assert set(batch.automatic.values()) <= {G}


def _inflight(mode: AcknowledgementMode, offsets: list[int], max_bytes: int = 10_000) -> InFlight:
    inflight = InFlight(mode, max_bytes)
    acquired = [AcquiredRange(min(offsets), max(offsets), 1)]
    inflight.add(match_acquired(TP, NODE, decoded(offsets), acquired))
    return inflight


def _owed(inflight: InFlight) -> dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]]:
    return inflight.pending.take_all(NODE)


def test_gaps_are_owed_as_soon_as_the_batch_is_added() -> None:
    inflight = InFlight(AcknowledgementMode.IMPLICIT, 10_000)
    inflight.add(match_acquired(TP, NODE, decoded([0, 2]), [AcquiredRange(0, 2, 1)]))
    assert _owed(inflight) == {TP: (AcknowledgementBatch(1, 1, (G,)),)}


def test_implicit_mode_accepts_the_previous_polls_records_at_the_next_poll() -> None:
    inflight = _inflight(AcknowledgementMode.IMPLICIT, [0, 1, 2])
    first = inflight.poll(2)
    assert [r.offset() for r in first] == [0, 1]
    assert len(inflight.pending) == 0  # nothing owed until the next poll runs
    second = inflight.poll(2)
    assert [r.offset() for r in second] == [2]
    assert _owed(inflight) == {TP: (AcknowledgementBatch(0, 1, (A,)),)}


def test_implicit_mode_refuses_acknowledge() -> None:
    inflight = _inflight(AcknowledgementMode.IMPLICIT, [0])
    (record,) = inflight.poll(5)
    with pytest.raises(InvalidAcknowledgementError, match="explicit"):
        inflight.acknowledge(record, A)


def test_a_commit_in_implicit_mode_accepts_what_was_handed_out() -> None:
    inflight = _inflight(AcknowledgementMode.IMPLICIT, [0, 1])
    inflight.poll(5)
    inflight.prepare_commit()
    assert _owed(inflight) == {TP: (AcknowledgementBatch(0, 1, (A,)),)}
    assert inflight.delivered == 0


def test_explicit_mode_sends_each_records_own_type() -> None:
    inflight = _inflight(AcknowledgementMode.EXPLICIT, [0, 1, 2])
    zero, one, two = inflight.poll(5)
    inflight.acknowledge(zero, A)
    inflight.acknowledge(one, R)
    inflight.acknowledge(two, J)
    inflight.prepare_commit()  # adds nothing in explicit mode
    assert _owed(inflight) == {TP: (AcknowledgementBatch(0, 2, (A, R, J)),)}
    assert inflight.poll(5) == ()


def test_explicit_mode_refuses_a_poll_while_a_record_is_unacknowledged() -> None:
    inflight = _inflight(AcknowledgementMode.EXPLICIT, [0, 1, 2])
    zero, one = inflight.poll(2)
    inflight.acknowledge(zero, A)
    with pytest.raises(UnacknowledgedRecordsError, match="must be acknowledged"):
        inflight.poll(5)
    assert (inflight.buffered, inflight.delivered) == (1, 1)  # nothing handed out
    inflight.acknowledge(one, A)
    assert [r.offset() for r in inflight.poll(5)] == [2]


def test_renew_extends_the_lock_and_leaves_the_record_waiting() -> None:
    inflight = _inflight(AcknowledgementMode.EXPLICIT, [0])
    (record,) = inflight.poll(5)
    inflight.acknowledge(record, N)
    assert _owed(inflight) == {TP: (AcknowledgementBatch(0, 0, (N,)),)}
    with pytest.raises(UnacknowledgedRecordsError):
        inflight.poll(5)
    inflight.acknowledge(record, A)
    assert _owed(inflight) == {TP: (AcknowledgementBatch(0, 0, (A,)),)}


@pytest.mark.parametrize("kind", [A, G])
def test_explicit_mode_refuses_what_is_not_an_acknowledgement_of_a_waiting_record(
    kind: AcknowledgeType,
) -> None:
    inflight = _inflight(AcknowledgementMode.EXPLICIT, [0, 1])
    (record,) = inflight.poll(1)
    if kind is A:
        inflight.acknowledge(record, A)  # then again: already acknowledged
    with pytest.raises(InvalidAcknowledgementError):
        inflight.acknowledge(record, kind)
    with pytest.raises(InvalidAcknowledgementError, match="not waiting"):
        inflight.acknowledge(rec(1), A)  # fetched, never handed out


def test_memory_is_bounded_by_the_bytes_held() -> None:
    inflight = _inflight(AcknowledgementMode.EXPLICIT, [0, 1, 2], max_bytes=25)
    assert inflight.held_bytes == 30  # three values of ten bytes
    assert not inflight.has_room()
    zero, one, _two = inflight.poll(3)
    assert inflight.held_bytes == 30  # handed out, still unacknowledged
    inflight.acknowledge(zero, A)
    assert (inflight.held_bytes, inflight.has_room()) == (20, True)
    inflight.acknowledge(one, N)  # renewal keeps it held
    assert inflight.held_bytes == 20


def test_implicit_acceptance_frees_the_bytes() -> None:
    inflight = _inflight(AcknowledgementMode.IMPLICIT, [0, 1], max_bytes=15)
    inflight.poll(2)
    assert not inflight.has_room()
    inflight.poll(2)
    assert (inflight.held_bytes, inflight.has_room()) == (0, True)


def test_close_drops_what_is_held_and_keeps_what_is_owed() -> None:
    inflight = _inflight(AcknowledgementMode.EXPLICIT, [0, 1, 2])
    zero, _one = inflight.poll(2)
    inflight.acknowledge(zero, A)
    inflight.close()
    assert (inflight.buffered, inflight.delivered, inflight.held_bytes) == (0, 0, 0)
    assert _owed(inflight) == {TP: (AcknowledgementBatch(0, 0, (A,)),)}


def test_decode_errors_are_kept_until_taken() -> None:
    inflight = InFlight(AcknowledgementMode.IMPLICIT, 100)
    batch: AcquiredBatch = match_acquired(
        TP, NODE, decoded([0], error_at=1), [AcquiredRange(0, 1, 1)]
    )
    inflight.add(batch)
    (error,) = inflight.take_errors()
    assert (error.topic, error.partition, error.offset) == ("t", 2, 1)
    assert inflight.take_errors() == ()
    assert _owed(inflight) == {TP: (AcknowledgementBatch(1, 1, (J,)),)}


@pytest.mark.parametrize(("first", "last", "count"), [(5, 4, 1), (0, 0, 0)])
def test_acquired_ranges_refuse_nonsense(first: int, last: int, count: int) -> None:
    with pytest.raises(ValueError, match="acquired range"):
        AcquiredRange(first, last, count)


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        InFlight(AcknowledgementMode.IMPLICIT, 0)
    with pytest.raises(ValueError, match="max_records"):
        InFlight(AcknowledgementMode.IMPLICIT, 1).poll(0)


def test_expiring_lists_handed_out_records_whose_locks_end_soon() -> None:
    inflight = InFlight(AcknowledgementMode.EXPLICIT, 10_000)
    early = match_acquired(TP, NODE, decoded([0, 1]), [AcquiredRange(0, 1, 1)], lock_deadline=30.0)
    late = match_acquired(TP, NODE, decoded([2]), [AcquiredRange(2, 2, 1)], lock_deadline=45.0)
    inflight.add(late)
    inflight.add(early)
    assert inflight.expiring(now=0.0, within=100.0) == ()  # nothing handed out yet
    records = inflight.poll(5)
    assert [r.offset() for r in inflight.expiring(now=20.0, within=10.0)] == [0, 1]
    assert [r.offset() for r in inflight.expiring(now=40.0, within=5.0)] == [0, 1, 2]
    assert inflight.expiring(now=10.0, within=5.0) == ()

    zero = next(r for r in records if r.offset() == 0)
    inflight.acknowledge(zero, N)
    inflight.extend_locks(TP, [0, 9], lock_deadline=60.0)  # 9 is not held: ignored
    assert [r.offset() for r in inflight.expiring(now=25.0, within=5.0)] == [1]
    inflight.acknowledge(zero, A)
    assert [r.offset() for r in inflight.expiring(now=100.0, within=0.0)] == [1, 2]


def test_a_lock_deadline_defaults_to_never() -> None:
    inflight = _inflight(AcknowledgementMode.EXPLICIT, [0])
    inflight.poll(1)
    assert inflight.expiring(now=1e12, within=1e12) == ()
