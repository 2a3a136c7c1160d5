"""A topic deleted and created again under the same name while a member fetches it.

Kafka gives the new topic a new id, empty logs, and deletes the group's offsets
of the old one. A position the member read from the old topic must never be
committed to the new one: there it points past records nobody has read, and
the next owner would start after them (measured on a real broker with a
classic member: librdkafka's batched consume never moves a position back, so
after its offset reset into the new log the position stayed at the old one, and
a commit skipped 17 records per partition; ``tests/integration/test_topic_recreation.py``).

The commit finds out: the broker does not know the old id (UNKNOWN_TOPIC_ID,
OffsetCommit v10), or, where commits name topics (v9: Kafka 4.0 and 4.1), the
position lies past the end of the log the data plane fetched; the member
describes the topic again, sees a new id, leaves the partition out, and fetches
it anew from ``auto.offset.reset``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from kgroup import AsyncConsumer
from kgroup.dataplane import Record
from kgroup.protocol import ApiKey, VersionRange
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

from .helpers import consumer_config, drive

pytestmark = pytest.mark.anyio

P0 = TopicPartition("orders", 0)
CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 2_000, "heartbeat.interval.ms": 100}


BY_NAME = {ApiKey.OFFSET_COMMIT: VersionRange(7, 9), ApiKey.OFFSET_FETCH: VersionRange(8, 9)}
"""A broker that names topics in offset requests (as Kafka 4.0 and 4.1)."""


@pytest.mark.parametrize("offsets_by", ["id", "name"])
@pytest.mark.parametrize(
    "protocol", [{"group.protocol": "consumer"}, CLASSIC], ids=["consumer", "classic"]
)
async def test_position_read_before_a_topic_was_recreated_is_never_committed_to_the_new_one(
    anyio_backend: str, group_id: str, protocol: dict[str, Any], offsets_by: str
) -> None:
    async with FakeBroker(versions=BY_NAME if offsets_by == "name" else None) as broker:
        await _recreated_under_the_member(broker, group_id, protocol)


async def _recreated_under_the_member(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    old_id = broker.create_topic("orders", 1)
    for n in range(5):
        broker.produce("orders", 0, f"old-{n}".encode())
    config = consumer_config(broker, group_id, **protocol, **{"enable.auto.commit": False})
    plane = broker.dataplane()
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    async with AsyncConsumer(config, dataplane=plane) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(got[consumer]) == 5, sink=got)
        assert await consumer.commit() == {P0: 5}

        assert broker.recreate_topic("orders") != old_id
        assert broker.committed(group_id) == {}
        for n in range(2):
            broker.produce("orders", 0, f"new-{n}".encode())
        calls_before = len(plane.calls)

        # The consumer protocol's coordinator moves the member to the new topic
        # by itself; a classic member learns of it only from this commit.
        done = await consumer.commit()
        assert done.get(P0) != 5
        assert broker.committed(group_id).get(P0) != 5

        await drive(consumer, until=lambda: len(got[consumer]) == 7, sink=got)
        assert [r.value() for r in got[consumer][5:]] == [b"new-0", b"new-1"]
        assert await consumer.commit() == {P0: 2}
        assert broker.committed(group_id) == {P0: 2}
        # The data plane let go of the partition and took it again, from the start.
        restarted = [c.method for c in plane.calls[calls_before:] if P0 in c.partitions]
        assert restarted[:2] == ["unassign", "assign"]


async def test_a_classic_leader_rebalances_without_a_deleted_topic_once_a_commit_finds_it_gone(
    broker: FakeBroker, group_id: str
) -> None:
    # metadata.max.age.ms stays at its default (5 minutes): the group would
    # hand out the deleted topic's partitions that long. The leader's commit
    # that finds the topic gone has it look at the subscribed topics at once.
    broker.create_topic("orders", 1)
    broker.create_topic("other", 1)
    broker.produce("orders", 0, b"o")
    broker.produce("other", 0, b"x")
    config = consumer_config(broker, group_id, **CLASSIC, **{"enable.auto.commit": False})
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    other = TopicPartition("other", 0)
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders", "other"])
        await drive(consumer, until=lambda: len(got[consumer]) == 2, sink=got)
        generation = consumer.member_epoch

        broker.delete_topic("orders")
        assert await consumer.commit() == {other: 1}
        await drive(consumer, until=lambda: consumer.assignment() == {other})
        assert consumer.member_epoch > generation
