"""KIP-320 through the runtime: commits carry the leader epoch of the record before
each offset, and the next owner starts from a committed offset with its epoch, so
its fetcher can detect a log truncation instead of resetting.

The fake data plane reports one leader epoch for every record
(``FakeDataPlane.leader_epoch``) and records the epochs partitions start with
(``start_epochs``); the fake broker keeps the epoch committed with each offset.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from kgroup import AsyncConsumer
from kgroup.dataplane import Record
from kgroup.testing.fake import FakeBroker

from .helpers import consumer_config, drive, next_offsets, produce_each, tps

pytestmark = pytest.mark.anyio

CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 2_000, "heartbeat.interval.ms": 100}
PROTOCOLS = pytest.mark.parametrize(
    "protocol", [{"group.protocol": "consumer"}, CLASSIC], ids=["consumer", "classic"]
)


def _orders(
    broker: FakeBroker, group_id: str, partitions: int, count: int, **extra: Any
) -> dict[str, Any]:
    """Topic ``orders`` with ``count`` records in each partition; a consumer config for it."""
    broker.create_topic("orders", partitions)
    produce_each(broker, "orders", partitions, count)
    return consumer_config(broker, group_id, **extra)


@PROTOCOLS
async def test_the_revocation_commit_carries_the_leader_epoch_and_the_next_owner_starts_with_it(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    config = _orders(broker, group_id, 2, 5, **protocol)
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    first_plane, second_plane = broker.dataplane(), broker.dataplane()
    first_plane.leader_epoch = 3
    async with AsyncConsumer(config, dataplane=first_plane) as first:
        first.subscribe(["orders"])
        await drive(first, until=lambda: len(got[first]) == 10, sink=got)
        async with AsyncConsumer(config, dataplane=second_plane) as second:
            second.subscribe(["orders"])
            await drive(
                first,
                second,
                until=lambda: len(second.assignment()) == 1 and bool(second_plane.assigned),
                sink=got,
            )
            (moved,) = second.assignment()
            # The first member's revocation (auto-)commit of its stopped position
            # carried the epoch of the last record it handed out ...
            assert broker.committed(group_id)[moved] == 5
            assert broker.committed_leader_epochs(group_id)[moved] == 3
            # ... and the second member started the partition at that offset with it.
            assert second_plane.start_epochs == {moved: 3}


async def test_an_application_commit_below_the_position_carries_no_epoch(
    broker: FakeBroker, group_id: str
) -> None:
    config = _orders(broker, group_id, 1, 5, **{"enable.auto.commit": False})
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    plane = broker.dataplane()
    plane.leader_epoch = 2
    (tp,) = tps("orders", 0)
    async with AsyncConsumer(config, dataplane=plane) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(got[consumer]) == 5, sink=got)
        # Processed up to offset 2 only: the data plane's epoch is that of its
        # position (5), not of offset 3's predecessor, which it cannot vouch for.
        assert await consumer.commit({tp: 3}) == {tp: 3}
        assert broker.committed_leader_epochs(group_id) == {tp: -1}
        assert await consumer.commit(next_offsets(got[consumer])) == {tp: 5}
        assert broker.committed_leader_epochs(group_id) == {tp: 2}


async def test_a_data_plane_without_epochs_commits_none_and_starts_without_one(
    broker: FakeBroker, group_id: str
) -> None:
    config = _orders(broker, group_id, 1, 3, **{"enable.auto.commit": False})
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    (tp,) = tps("orders", 0)
    first, second = broker.dataplane(), broker.dataplane()
    first.leader_epoch = second.leader_epoch = None
    async with AsyncConsumer(config, dataplane=first) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(got[consumer]) == 3, sink=got)
        assert await consumer.commit() == {tp: 3}
    assert broker.committed_leader_epochs(group_id) == {tp: -1}
    async with AsyncConsumer(config, dataplane=second) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: bool(second.assigned))
        assert second.start_epochs == {}
    assert first.start_epochs == {}
