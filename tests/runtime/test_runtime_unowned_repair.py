"""The runtime repairs a group whose coordinator left partitions owned by nobody (issue 29).

Apache Kafka 4.4 reaches that state when a static member's consumer-protocol
replacement converts a classic group between the two rounds of a cooperative
rebalance: the consumer group's target keeps the first round's gaps, and no
epoch bump comes to fill them. The fake broker does not convert groups, so the
test writes such a target into the fake's group model directly, epoch
unchanged. The idle member must notice (a ConsumerGroupDescribe, twice) and
leave with epoch -1, then rejoin: the fake, like Kafka, assigns again only
when a member joins or leaves.
"""

from __future__ import annotations

import pytest

from kgroup import AsyncConsumer
from kgroup.protocol import ApiKey
from kgroup.runtime.liveness import LivenessTimes, UnownedWatch
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicIdPartition

from .helpers import SharedLog, consumer_config, drive, tps

pytestmark = pytest.mark.anyio

FAST = LivenessTimes(first=0.2, first_busy=60.0, confirm=0.2, quiet=60.0)


def _watch_fast(consumer: AsyncConsumer) -> None:
    # The defaults (5 s, 5 s) are for real groups; the rules are the same.
    consumer._driver.core.liveness = UnownedWatch(FAST)


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
async def test_a_target_with_gaps_is_filled_after_the_idle_member_rejoins(
    broker: FakeBroker, group_id: str, static: bool
) -> None:
    topic_id = broker.create_topic("orders", 4)
    everything = tps("orders", 0, 1, 2, 3)
    log = SharedLog()

    def config(instance: str) -> dict[str, object]:
        extra = {"group.instance.id": instance} if static else {}
        return consumer_config(broker, group_id, **extra)

    async with (
        AsyncConsumer(config("a"), dataplane=broker.dataplane()) as a,
        AsyncConsumer(config("b"), dataplane=broker.dataplane()) as b,
    ):
        _watch_fast(a)
        _watch_fast(b)
        a.subscribe(["orders"], listener=log.listener("a"))
        b.subscribe(["orders"], listener=log.listener("b"))
        await drive(a, b, until=lambda: len(a.assignment()) == len(b.assignment()) == 2)

        # What a conversion in the middle of a cooperative rebalance leaves: a keeps
        # one partition, b is given nothing, three partitions are nobody's.
        group = broker.consumer_group(group_id)
        assert group is not None
        kept = min(a.assignment())
        with broker._lock:
            # A new target at a new epoch, assigned already (group epoch = assignment
            # epoch): the conversion's, which no assignor run follows.
            group.epoch += 1
            group.assignment_epoch = group.epoch
            group.target = {
                a.member_id: frozenset({TopicIdPartition(topic_id, kept.partition)}),
                b.member_id: frozenset(),
            }
        await drive(a, b, until=lambda: a.assignment() == {kept} and not b.assignment())
        b_heartbeats_before = len(broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT))

        # While b rejoins, a may hold all four for a moment (b's leave frees its
        # share of the target): the repair is done once both hold their halves.
        await drive(a, b, until=lambda: len(a.assignment()) == len(b.assignment()) == 2)

        assert a.assignment() | b.assignment() == everything
        epochs = [
            seen.request.member_epoch
            for seen in broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)[b_heartbeats_before:]
            if seen.request.member_id == b.member_id
        ]
        # b left for good (-1, a static member too) and joined again (0).
        assert -1 in epochs
        assert epochs.index(0) > epochs.index(-1)
        assert broker.requests_of(ApiKey.CONSUMER_GROUP_DESCRIBE)
        # a kept its partition throughout: the repair moves nothing that is owned.
        assert kept not in {tp for ps in log.of("a", "revoked") for tp in ps}


async def test_a_member_that_owns_partitions_does_not_look_before_the_busy_wait(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 2)
    async with AsyncConsumer(consumer_config(broker, group_id), dataplane=broker.dataplane()) as a:
        _watch_fast(a)
        a.subscribe(["orders"])
        await drive(a, until=lambda: len(a.assignment()) == 2)
        heartbeats = len(broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT))
        # A few heartbeat intervals of a settled member that owns partitions.
        await drive(
            a,
            until=lambda: (
                len(broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)) >= heartbeats + 3
            ),
        )
        assert broker.requests_of(ApiKey.CONSUMER_GROUP_DESCRIBE) == []
