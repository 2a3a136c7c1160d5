"""The classic protocol and group.protocol=auto through the fake broker, asyncio and trio."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from kgroup import AsyncConsumer
from kgroup.config import GroupProtocol
from kgroup.dataplane import Record
from kgroup.protocol import ApiKey
from kgroup.testing.fake import ClassicState, FakeBroker

from .helpers import SharedLog, consumer_config, drive, told, tps

pytestmark = pytest.mark.anyio

CLASSIC = {
    "group.protocol": "classic",
    "session.timeout.ms": 2_000,
    "heartbeat.interval.ms": 100,
}


@pytest.mark.parametrize(
    ("strategy", "eager"), [("range", True), ("cooperative-sticky", False)], ids=["eager", "coop"]
)
async def test_two_members_rebalance(
    broker: FakeBroker, group_id: str, strategy: str, eager: bool
) -> None:
    broker.create_topic("orders", 4)
    everything = tps("orders", 0, 1, 2, 3)
    log = SharedLog()
    config = consumer_config(
        broker, group_id, **CLASSIC, **{"partition.assignment.strategy": strategy}
    )
    async with (
        AsyncConsumer(config, dataplane=broker.dataplane()) as first,
        AsyncConsumer(config, dataplane=broker.dataplane()) as second,
    ):
        one, two = log.listener("first"), log.listener("second")
        first.subscribe(["orders"], listener=one)
        await drive(first, until=lambda: told(first, one, 4))
        first_generation = first.member_epoch
        second.subscribe(["orders"], listener=two)
        await drive(
            first,
            second,
            until=lambda: (
                told(first, one, 2)
                and told(second, two, 2)
                and first.member_epoch == second.member_epoch
            ),
        )

        kept, moved = first.assignment(), second.assignment()
        assert kept | moved == everything
        assert not kept & moved
        group = broker.classic_group(group_id)
        assert group is not None
        assert group.state is ClassicState.STABLE
        assert group.protocol_name == strategy
        assert set(group.members) == {first.member_id, second.member_id}
        assert first.member_epoch == second.member_epoch == group.generation_id
        assert group.generation_id > first_generation
        if eager:
            # Eager: everything is revoked before rejoining, then the new share assigned.
            assert log.of("first", "revoked") == [everything]
            assert log.of("first", "assigned") == [everything, kept]
        else:
            # Cooperative: only what moves is revoked, and handed over only after that.
            assert log.of("first", "revoked") == [moved]
            assert log.of("first", "assigned")[0] == everything
            for tp in moved:
                assert log.index("first", "revoked", tp) < log.index("second", "assigned", tp)
        assert frozenset().union(*log.of("second", "assigned")) == moved


async def test_classic_member_removed_by_the_coordinator_rejoins(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 2)
    log = SharedLog()
    listener = log.listener("c")
    config = consumer_config(broker, group_id, **CLASSIC)
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"], listener=listener)
        await drive(consumer, until=lambda: told(consumer, listener, 2))
        old_id = consumer.member_id

        broker.remove_member(group_id, old_id)  # as if its session had expired
        await drive(consumer, until=lambda: len(log.of("c", "assigned")) == 2)

        assert log.of("c", "lost") == [tps("orders", 0, 1)]
        assert log.of("c", "assigned") == [tps("orders", 0, 1), tps("orders", 0, 1)]
        group = broker.classic_group(group_id)
        assert group is not None
        assert list(group.members) == [consumer.member_id]
        assert consumer.member_id != old_id  # UNKNOWN_MEMBER_ID resets the member id


async def test_auto_uses_classic_when_the_consumer_protocol_is_disabled(
    broker: FakeBroker, group_id: str
) -> None:
    broker.disable_consumer_protocol()
    broker.create_topic("orders", 1)
    broker.produce("orders", 0, b"x")
    got: list[Record] = []
    config = consumer_config(broker, group_id, **{"group.protocol": "auto"})
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(got) == 1, sink={consumer: got})
        assert consumer.group_protocol is GroupProtocol.CLASSIC
        group = broker.classic_group(group_id)
        assert group is not None
        assert list(group.members) == [consumer.member_id]


async def test_auto_falls_back_to_classic_when_the_first_heartbeat_is_refused(
    broker: FakeBroker, group_id: str
) -> None:
    # ConsumerGroupDescribe still answers (GROUP_ID_NOT_FOUND): only the
    # heartbeat says UNSUPPORTED_VERSION, as a broker does whose new protocol
    # is switched off between the lookup and the join.
    refused = broker.intercept(
        ApiKey.CONSUMER_GROUP_HEARTBEAT, lambda _seen: ErrorCode.unsupported_version, times=None
    )
    broker.create_topic("orders", 1)
    broker.produce("orders", 0, b"x")
    got: list[Record] = []
    config = consumer_config(broker, group_id, **{"group.protocol": "auto"})
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(got) == 1, sink={consumer: got})
        assert len(refused.calls) == 1
        assert consumer.group_protocol is GroupProtocol.CLASSIC
        group = broker.classic_group(group_id)
        assert group is not None
        assert list(group.members) == [consumer.member_id]
