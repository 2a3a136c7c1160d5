"""Batches in hand: taken from the data plane, not settled yet (kgroup.dataplane._in_hand).

A position read while a batch is in hand must not count it; settling a batch
hands out its head, names where each partition reads again for the rest, and
drops the records of partitions that stopped or were seeked meanwhile.
"""

from __future__ import annotations

import confluent_kafka

from kgroup.dataplane._in_hand import InHand, first_offsets
from kgroup.testing.fake import FakeDataPlane, RecordLog
from kgroup.types import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def records(*at: tuple[int, int]) -> list[confluent_kafka.Message]:
    return [confluent_kafka.Message(topic="t", partition=p, offset=o) for p, o in at]


def at(batch: list[confluent_kafka.Message]) -> list[tuple[int | None, int | None]]:
    return [(r.partition(), r.offset()) for r in batch]


def test_first_offsets_are_the_lowest_per_partition_and_skip_events_without_one() -> None:
    batch = records((0, 7), (1, 3), (0, 5), (1, 4))
    batch.append(confluent_kafka.Message(topic="t", partition=0, offset=-1001))
    assert first_offsets(batch) == {T0: 5, T1: 3}


def test_starts_cover_every_batch_in_hand_until_it_is_settled() -> None:
    hand = InHand()
    first, second = records((0, 10), (0, 11), (1, 2)), records((0, 12), (1, 3))
    hand.add(first)
    hand.add(second)
    assert hand.starts() == {T0: 10, T1: 2}
    hand.settle(first, len(first))
    assert hand.starts() == {T0: 12, T1: 3}
    hand.settle(second, len(second))
    assert not hand
    assert hand.starts() == {}


def test_settling_all_of_a_batch_returns_the_same_list_and_puts_nothing_back() -> None:
    hand = InHand()
    batch = records((0, 1), (0, 2))
    hand.add(batch)
    handed, back = hand.settle(batch, 2)
    assert handed is batch
    assert back == {}


def test_settling_part_of_a_batch_puts_back_each_partition_at_its_first_record_not_handed() -> None:
    hand = InHand()
    batch = records((0, 1), (1, 8), (0, 2), (1, 9), (0, 3))
    hand.add(batch)
    handed, back = hand.settle(batch, 2)
    assert at(handed) == [(0, 1), (1, 8)]
    assert back == {T0: 2, T1: 9}


def test_a_partition_moved_while_in_hand_is_neither_handed_out_nor_put_back() -> None:
    hand = InHand()
    batch = records((0, 1), (1, 8), (0, 2), (1, 9))
    hand.add(batch)
    hand.moved([T1])
    assert hand.starts() == {T0: 1}
    handed, back = hand.settle(batch, 3)
    assert at(handed) == [(0, 1), (0, 2)]
    assert back == {}


def test_a_move_after_the_settle_changes_nothing_settled() -> None:
    hand = InHand()
    batch = records((0, 1))
    hand.add(batch)
    handed, _ = hand.settle(batch, 1)
    hand.moved([T0])
    assert at(handed) == [(0, 1)]
    assert hand.starts() == {}


def test_a_swapped_batch_is_settled_under_its_new_list() -> None:
    hand = InHand()
    raw = records((0, 4), (0, 5))
    kept = raw[:1]
    hand.add(raw)
    hand.swap(raw, kept)
    assert hand.starts() == {T0: 4}
    hand.settle(kept, 0)
    assert not hand


def test_a_batch_never_added_is_settled_as_given() -> None:
    hand = InHand()
    batch = records((0, 4), (0, 5))
    handed, back = hand.settle(batch, 1)
    assert at(handed) == [(0, 4)]
    assert back == {T0: 5}


def _fake(values: int) -> FakeDataPlane:
    log = RecordLog()
    log.create("t", 1)
    for n in range(values):
        log.append("t", 0, f"{n}".encode())
    plane = FakeDataPlane(log)
    plane.assign({T0: 0})
    return plane


def test_the_fake_counts_a_batch_in_hand_as_not_handed_out() -> None:
    plane = _fake(10)
    batch = plane.consume(4, 0)
    assert plane.positions([T0]) == {T0: 0}
    assert at(plane.deliver(batch, 4)) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert plane.positions([T0]) == {T0: 4}


def test_the_fake_reads_again_from_the_first_record_put_back() -> None:
    plane = _fake(10)
    batch = plane.consume(6, 0)
    assert at(plane.deliver(batch, 2)) == [(0, 0), (0, 1)]
    assert plane.positions([T0]) == {T0: 2}
    assert [r.offset() for r in plane.consume(10, 0)] == list(range(2, 10))


def test_the_fake_drops_records_of_a_partition_stopped_while_in_hand() -> None:
    plane = _fake(10)
    batch = plane.consume(6, 0)
    assert plane.positions([T0]) == {T0: 0}  # what a stop's capture reads
    plane.unassign([T0])
    assert plane.deliver(batch, 6) == []


def test_the_fake_withholds_a_partition_until_it_is_unassigned() -> None:
    plane = _fake(10)
    handed = plane.consume(3, 0)
    plane.deliver(handed, 3)
    plane.withhold([T0])
    assert plane.consume(10, 0) == []
    assert plane.positions([T0]) == {T0: 3}
    plane.unassign([T0])
    plane.assign({T0: 3})
    assert [r.offset() for r in plane.consume(10, 0)] == list(range(3, 10))
