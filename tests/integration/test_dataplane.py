"""The librdkafka data plane in assign mode, against a real broker."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from helpers import produce_values

from kgroup.config import ConsumerConfig
from kgroup.dataplane import DataPlane, Record, validate_passthrough
from kgroup.dataplane.librdkafka import DataPlaneError
from kgroup.errors import ConfigError
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.types import TopicPartition

pytestmark = pytest.mark.integration


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    """``per_partition`` records into each partition, valued ``"<partition>:<i>"``."""
    records = ((p, f"{p}:{i}") for p in range(partitions) for i in range(per_partition))
    produce_values(bootstrap, topic, records)


def value(record: Record) -> str:
    raw = record.value()
    assert raw is not None
    return raw.decode()


def offset(record: Record) -> int:
    at = record.offset()
    assert at is not None
    return at


def drain(plane: DataPlane, expected: int, timeout: float = 30.0) -> list[Record]:
    records: list[Record] = []
    deadline = time.monotonic() + timeout
    while len(records) < expected and time.monotonic() < deadline:
        batch = plane.consume(500, 0.5)
        records.extend(plane.deliver(batch, len(batch)))
    return records


PlaneFactory = Callable[..., DataPlane]


@pytest.fixture
def plane_factory(
    kafka_bootstrap_servers: str, make_group_id: MakeGroupId
) -> Iterator[PlaneFactory]:
    planes: list[DataPlane] = []

    def make(reset: str = "earliest") -> DataPlane:
        config = ConsumerConfig.from_dict(
            {
                "bootstrap.servers": kafka_bootstrap_servers,
                "group.id": make_group_id(),
                "auto.offset.reset": reset,
            },
            validate_passthrough=validate_passthrough,
        )
        plane = DataPlane(config)
        planes.append(plane)
        return plane

    yield make
    for plane in planes:
        plane.close()


def test_assigned_offsets_are_where_fetching_starts(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, plane_factory: PlaneFactory
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, per_partition=10, partitions=2)
    plane = plane_factory()
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    plane.assign({p0: 4, p1: None})  # None: no committed offset -> earliest
    records = drain(plane, expected=6 + 10)
    values = sorted(value(m) for m in records)
    assert values == sorted([f"0:{i}" for i in range(4, 10)] + [f"1:{i}" for i in range(10)])
    assert plane.positions([p0, p1]) == {p0: 10, p1: 10}


def test_positions_only_cover_records_handed_out(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, plane_factory: PlaneFactory
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap_servers, topic, per_partition=5, partitions=1)
    plane = plane_factory()
    tp = TopicPartition(topic, 0)
    plane.assign({tp: None})
    # Nothing handed out yet: nothing to commit.
    assert plane.positions([tp]) == {}
    first = drain(plane, expected=1)
    handed = max(offset(m) for m in first)
    assert plane.positions([tp]) == {tp: handed + 1}


def take(plane: DataPlane, timeout: float = 30.0) -> list[Record]:
    """The first non-empty batch, not settled yet."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = plane.consume(500, 0.5)
        if batch:
            return batch
    raise AssertionError("no record came")


def test_a_batch_counts_as_handed_out_once_delivered_and_its_rest_is_read_again(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, plane_factory: PlaneFactory
) -> None:
    """Positions read between the take and the settle (the loop's commits) never
    pass the batch; what is not delivered is the next thing read."""
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap_servers, topic, per_partition=10, partitions=1)
    plane = plane_factory()
    tp = TopicPartition(topic, 0)
    plane.assign({tp: 0})
    batch = take(plane)
    assert offset(batch[0]) == 0
    assert plane.positions([tp]) == {tp: 0}
    count = min(3, len(batch))
    assert [offset(m) for m in plane.deliver(batch, count)] == list(range(count))
    assert plane.positions([tp]) == {tp: count}
    assert [offset(m) for m in drain(plane, expected=10 - count)] == list(range(count, 10))
    assert plane.positions([tp]) == {tp: 10}


def test_records_of_a_partition_stopped_while_in_hand_are_not_delivered(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, plane_factory: PlaneFactory
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, per_partition=5, partitions=2)
    plane = plane_factory()
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    plane.assign({p0: 0, p1: 0})
    batch = take(plane)
    stopped = TopicPartition(topic, batch[0].partition() or 0)
    plane.unassign([stopped])
    delivered = plane.deliver(batch, len(batch))
    assert all(m.partition() != stopped.partition for m in delivered)
    assert len(delivered) == sum(1 for m in batch if m.partition() != stopped.partition)


def test_a_withheld_partition_hands_out_nothing_and_its_position_stays(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, plane_factory: PlaneFactory
) -> None:
    """unsubscribe()'s partitions until the member stops them: records taken go back."""
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, per_partition=5, partitions=2)
    plane = plane_factory()
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    plane.assign({p0: 0, p1: 0})
    plane.withhold([p0])
    records = drain(plane, expected=5)
    assert sorted((m.partition(), offset(m)) for m in records) == [(1, i) for i in range(5)]
    assert plane.consume(100, 0.5) == []
    assert plane.positions([p0, p1]) in ({p1: 5}, {p0: 0, p1: 5})
    plane.unassign([p0])
    plane.assign({p0: 0})
    assert [offset(m) for m in drain(plane, expected=5)] == list(range(5))


def test_unassign_stops_fetching_and_reassign_resumes_at_given_offset(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, plane_factory: PlaneFactory
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap_servers, topic, per_partition=5, partitions=1)
    plane = plane_factory()
    tp = TopicPartition(topic, 0)
    plane.assign({tp: 0})
    assert len(drain(plane, expected=5)) == 5
    plane.unassign([tp])
    assert plane.assigned == frozenset()
    assert plane.positions([tp]) == {}
    produce(kafka_bootstrap_servers, topic, per_partition=2, partitions=1)
    assert plane.consume(10, 0.5) == []
    plane.assign({tp: 3})
    values = [value(m) for m in drain(plane, expected=4)]
    assert values == ["0:3", "0:4", "0:0", "0:1"]


def test_paused_partition_hands_out_nothing_until_resumed(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, plane_factory: PlaneFactory
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, per_partition=3, partitions=2)
    plane = plane_factory()
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    plane.assign({p0: 0, p1: 0})
    plane.pause([p0])
    records = drain(plane, expected=3)
    assert {m.partition() for m in records} == {1}
    plane.resume([p0])
    records = drain(plane, expected=3)
    assert {m.partition() for m in records} == {0}


def test_seek_moves_the_next_record(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, plane_factory: PlaneFactory
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap_servers, topic, per_partition=5, partitions=1)
    plane = plane_factory()
    tp = TopicPartition(topic, 0)
    plane.assign({tp: 0})
    assert len(drain(plane, expected=5)) == 5
    plane.seek(tp, 2)
    assert [offset(m) for m in drain(plane, expected=3)] == [2, 3, 4]


@pytest.mark.parametrize("logical", [-1, -2], ids=["end", "beginning"])
def test_a_seek_to_a_logical_offset_leaves_no_position_from_an_earlier_seek(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, plane_factory: PlaneFactory, logical: int
) -> None:
    """After ``seek(END)`` / ``seek(BEGINNING)`` the position is unknown until a record
    comes (librdkafka's), not the offset of an earlier numeric seek: a commit of the
    positions would have moved the group back to it."""
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap_servers, topic, per_partition=10, partitions=1)
    plane = plane_factory()
    tp = TopicPartition(topic, 0)
    plane.assign({tp: 0})
    assert len(drain(plane, expected=10)) == 10
    plane.seek(tp, 5)
    assert plane.positions([tp]) == {tp: 5}
    assert [offset(m) for m in drain(plane, expected=5)] == [5, 6, 7, 8, 9]
    plane.seek(tp, logical)
    assert plane.positions([tp]) == {}
    if logical == -2:
        assert [offset(m) for m in drain(plane, expected=10)] == list(range(10))
        assert plane.positions([tp]) == {tp: 10}


def test_reset_error_refuses_a_partition_without_offset(
    make_topic: MakeTopic, plane_factory: PlaneFactory
) -> None:
    topic = make_topic(partitions=1)
    plane = plane_factory(reset="error")
    with pytest.raises(DataPlaneError, match=r"auto\.offset\.reset=error"):
        plane.assign({TopicPartition(topic, 0): None})
    assert plane.assigned == frozenset()


def test_out_of_range_offset_with_reset_error_surfaces_without_losing_records(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, plane_factory: PlaneFactory
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, per_partition=3, partitions=2)
    plane = plane_factory(reset="error")
    plane.assign({TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 1000})
    seen: list[Record] = []
    errors: list[DataPlaneError] = []
    deadline = time.monotonic() + 30
    while (not errors or len(seen) < 3) and time.monotonic() < deadline:
        try:
            batch = plane.consume(100, 0.5)
            seen.extend(plane.deliver(batch, len(batch)))
        except DataPlaneError as exc:
            errors.append(exc)
    assert errors, "the out-of-range partition never reported an error"
    assert "fetch failed" in str(errors[0])
    # Whenever the error surfaced, partition 0's records all arrived, once each.
    assert sorted(offset(m) for m in seen if m.partition() == 0) == [0, 1, 2]


def test_unknown_librdkafka_key_is_a_config_error_naming_it(kafka_bootstrap_servers: str) -> None:
    with pytest.raises(ConfigError, match="fetch.wiat.max.ms"):
        ConsumerConfig.from_dict(
            {"bootstrap.servers": kafka_bootstrap_servers, "group.id": "g", "fetch.wiat.max.ms": 5},
            validate_passthrough=validate_passthrough,
        )


def test_kgroup_managed_librdkafka_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="enable.auto.offset.store is managed by kgroup"):
        validate_passthrough({"enable.auto.offset.store": "true"})


def test_librdkafka_key_passes_through() -> None:
    validate_passthrough({"fetch.wait.max.ms": "10", "queued.min.messages": "1000"})
