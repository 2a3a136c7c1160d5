"""The driver tells a chunked data plane when no rebalance step is under way.

librdkafka's data plane waits for records in long chunks only while the group
is settled (an idle member's CPU); the driver's calls of a rebalance must not
wait behind them. Both protocols, asyncio and trio, through the fake.
"""

from __future__ import annotations

import pytest

from kgroup import AsyncConsumer
from kgroup.testing.fake import FakeBroker

from .helpers import consumer_config, drive, tps

pytestmark = pytest.mark.anyio

PROTOCOLS = [
    pytest.param({}, id="consumer"),
    pytest.param({"group.protocol": "classic", "heartbeat.interval.ms": 100}, id="classic"),
]


@pytest.mark.parametrize("extra", PROTOCOLS)
async def test_settled_only_while_the_assignment_is_held_and_fetching(
    broker: FakeBroker, group_id: str, extra: dict[str, object]
) -> None:
    broker.create_topic("t", 4)
    first_plane, second_plane = broker.dataplane(), broker.dataplane()
    async with AsyncConsumer(
        consumer_config(broker, group_id, **extra), dataplane=first_plane
    ) as first:
        first.subscribe(["t"])
        await drive(first, until=lambda: first_plane.settled[-1:] == [True])
        # Never settled before the whole assignment was fetching.
        assert first_plane.settled == [True]
        assert first_plane.assigned == tps("t", 0, 1, 2, 3) == first.assignment()

        async with AsyncConsumer(
            consumer_config(broker, group_id, **extra), dataplane=second_plane
        ) as second:
            second.subscribe(["t"])
            await drive(
                first,
                second,
                until=lambda: (
                    len(first.assignment()) == len(second.assignment()) == 2
                    and first_plane.settled[-1:] == second_plane.settled[-1:] == [True]
                ),
            )
            # The first member's rebalance step (giving two partitions up) was
            # announced before its calls, then the group settled again.
            assert first_plane.settled == [True, False, True]
            assert second_plane.settled == [True]
            # Owning nothing while the first released its partitions: not settled.
            assert second_plane.assigned == second.assignment()
    # Closing is a rebalance step of its own: the leave's calls were not kept waiting.
    assert first_plane.settled[-1] is False
    assert second_plane.settled[-1] is False


async def test_manual_assignment_is_settled_once_fetching(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("t", 2)
    plane = broker.dataplane()
    async with AsyncConsumer(consumer_config(broker, group_id), dataplane=plane) as consumer:
        consumer.assign(tps("t", 0, 1))
        await drive(consumer, until=lambda: plane.settled[-1:] == [True])
        assert plane.assigned == tps("t", 0, 1)
        consumer.unassign()
        await drive(consumer, until=lambda: plane.settled[-1:] == [False])
