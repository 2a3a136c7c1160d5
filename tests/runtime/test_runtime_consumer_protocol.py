"""The KIP-848 consumer protocol end to end through the fake broker, asyncio and trio.

The real AsyncConsumer, runtime and ConsumerMember run against
kgroup.testing.fake's broker and data plane; no JVM.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from kio.schema.errors import ErrorCode

from kgroup import AsyncConsumer
from kgroup.dataplane import Record
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker, SeenRequest, Verdict
from kgroup.types import TopicPartition

from .helpers import (
    Recorder,
    SharedLog,
    consumer_config,
    drive,
    next_offsets,
    produce_each,
    told,
    tps,
)

pytestmark = pytest.mark.anyio


def _member_heartbeat(seen: SeenRequest) -> bool:
    """A heartbeat of a member already in the group (not a join or a leave)."""
    epoch: int = seen.request.member_epoch
    return epoch > 0


async def test_join_and_consume(broker: FakeBroker, group_id: str) -> None:
    broker.create_topic("orders", 2)
    for i in range(3):
        broker.produce("orders", 0, f"a{i}".encode())
    for i in range(2):
        broker.produce("orders", 1, f"b{i}".encode())
    listener = Recorder()
    got: list[Record] = []
    async with AsyncConsumer(
        consumer_config(broker, group_id), dataplane=broker.dataplane()
    ) as consumer:
        consumer.subscribe(["orders"], listener=listener)
        await drive(consumer, until=lambda: len(got) >= 5, sink={consumer: got})

        assert sorted((r.partition(), r.offset(), r.value()) for r in got) == [
            (0, 0, b"a0"),
            (0, 1, b"a1"),
            (0, 2, b"a2"),
            (1, 0, b"b0"),
            (1, 1, b"b1"),
        ]
        assert consumer.assignment() == tps("orders", 0, 1)
        assert listener.events == [("assigned", tps("orders", 0, 1))]
        group = broker.consumer_group(group_id)
        assert group is not None
        assert group.member_epoch(consumer.member_id) == consumer.member_epoch > 0


async def test_second_member_gets_partitions_only_after_the_first_revoked_them(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 4)
    everything = tps("orders", 0, 1, 2, 3)
    log = SharedLog()
    config = consumer_config(broker, group_id)
    async with (
        AsyncConsumer(config, dataplane=broker.dataplane()) as first,
        AsyncConsumer(config, dataplane=broker.dataplane()) as second,
    ):
        one, two = log.listener("first"), log.listener("second")
        first.subscribe(["orders"], listener=one)
        await drive(first, until=lambda: told(first, one, 4))
        second.subscribe(["orders"], listener=two)
        await drive(first, second, until=lambda: told(first, one, 2) and told(second, two, 2))
        assert first.assignment() | second.assignment() == everything

        moved = second.assignment()
        assert not first.assignment() & moved
        assert log.of("first", "assigned") == [everything]
        assert log.of("first", "revoked") == [moved]
        assert frozenset().union(*log.of("second", "assigned")) == moved
        # Revocation before reassignment: the second member was told about each
        # moved partition only after the first member had let it go.
        for tp in moved:
            assert log.index("first", "revoked", tp) < log.index("second", "assigned", tp)
        group = broker.consumer_group(group_id)
        assert group is not None
        assert first.member_epoch == second.member_epoch == group.assignment_epoch


async def test_commit_in_revoke_callback_is_kept_and_read_by_the_next_owner(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)
    config = consumer_config(broker, group_id)
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    committed_in_callback: list[dict[TopicPartition, int]] = []

    async with AsyncConsumer(config, dataplane=broker.dataplane()) as first:

        class CommitOnRevoke:
            async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                # The application commits what it processed of the revoked partitions.
                done = next_offsets(got[first])
                mine = {tp: done[tp] for tp in partitions if tp in done}
                committed_in_callback.append(await first.commit(mine))

        first.subscribe(["orders"], listener=CommitOnRevoke())
        await drive(first, until=lambda: len(got[first]) == 10, sink=got)

        async with AsyncConsumer(config, dataplane=broker.dataplane()) as second:
            second.subscribe(["orders"])
            await drive(
                first,
                second,
                until=lambda: len(second.assignment()) == 1 and len(first.assignment()) == 1,
                sink=got,
            )
            (moved,) = second.assignment()
            assert committed_in_callback == [{moved: 5}]
            assert broker.committed(group_id) == {moved: 5}
            # Visible through OffsetFetch, and the new owner starts there: it
            # reads nothing the first member had processed.
            assert await second.committed([moved]) == {moved: 5}
            broker.produce("orders", moved.partition, b"after")
            await drive(first, second, until=lambda: len(got[second]) == 1, sink=got)
            assert [(r.partition(), r.offset(), r.value()) for r in got[second]] == [
                (moved.partition, 5, b"after")
            ]


async def test_fenced_member_loses_its_partitions_and_rejoins(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 2)
    everything = tps("orders", 0, 1)
    listener = Recorder()
    async with AsyncConsumer(
        consumer_config(broker, group_id), dataplane=broker.dataplane()
    ) as consumer:
        consumer.subscribe(["orders"], listener=listener)
        await drive(consumer, until=lambda: told(consumer, listener, 2))
        member_id, epoch = consumer.member_id, consumer.member_epoch

        fence = broker.intercept(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            lambda _seen: ErrorCode.fenced_member_epoch,
            when=_member_heartbeat,
        )
        await drive(consumer, until=lambda: len(listener.of("assigned")) == 2)

        assert len(fence.calls) == 1
        assert listener.events == [
            ("assigned", everything),
            ("lost", everything),
            ("assigned", everything),
        ]
        # Same member id (KIP-1082), a new epoch after joining again with epoch 0.
        assert consumer.member_id == member_id
        assert consumer.member_epoch > epoch
        joins = [
            r
            for r in broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)
            if r.request.member_epoch == 0
        ]
        assert [r.request.member_id for r in joins] == [member_id, member_id]


async def test_close_revokes_and_leaves_the_group(broker: FakeBroker, group_id: str) -> None:
    broker.create_topic("orders", 2)
    listener = Recorder()
    async with AsyncConsumer(
        consumer_config(broker, group_id), dataplane=broker.dataplane()
    ) as consumer:
        consumer.subscribe(["orders"], listener=listener)
        await drive(consumer, until=lambda: told(consumer, listener, 2))
        member_id = consumer.member_id

    assert listener.events == [("assigned", tps("orders", 0, 1)), ("revoked", tps("orders", 0, 1))]
    last = broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)[-1]
    assert (last.request.member_id, last.request.member_epoch) == (member_id, -1)
    group = broker.consumer_group(group_id)
    assert group is not None
    assert group.members == {}


async def test_coordinator_move_is_followed_without_a_rebalance(
    anyio_backend: str, group_id: str
) -> None:
    async with FakeBroker(nodes=2) as broker:
        broker.create_topic("orders", 2)
        listener = Recorder()
        got: list[Record] = []
        async with AsyncConsumer(
            consumer_config(broker, group_id), dataplane=broker.dataplane()
        ) as consumer:
            consumer.subscribe(["orders"], listener=listener)
            await drive(consumer, until=lambda: told(consumer, listener, 2))
            epoch = consumer.member_epoch
            before = len(broker.requests)

            broker.set_coordinator(group_id, 1)
            await broker.wait_until(
                lambda: any(
                    r.api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT and r.node_id == 1
                    for r in broker.requests[before:]
                )
            )
            after = broker.requests[before:]
            kinds = [(r.api_key, r.node_id) for r in after]
            # The old coordinator was asked once more (and answered NOT_COORDINATOR),
            # then the client looked the coordinator up and went to node 1.
            assert (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0) in kinds
            first_on_new = kinds.index((ApiKey.CONSUMER_GROUP_HEARTBEAT, 1))
            assert ApiKey.FIND_COORDINATOR in [k for k, _ in kinds[:first_on_new]]

            broker.produce("orders", 0, b"after the move")
            await drive(consumer, until=lambda: len(got) == 1, sink={consumer: got})
            assert await consumer.commit() == {TopicPartition("orders", 0): 1}
            assert broker.committed(group_id) == {TopicPartition("orders", 0): 1}
            assert broker.requests_of(ApiKey.OFFSET_COMMIT, node=0) == []
            assert consumer.member_epoch == epoch
            assert listener.events == [("assigned", tps("orders", 0, 1))]


async def test_unanswered_heartbeat_times_out_and_the_member_recovers(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 2)
    listener = Recorder()
    config = consumer_config(broker, group_id, **{"request.timeout.ms": 300})
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"], listener=listener)
        await drive(consumer, until=lambda: told(consumer, listener, 2))
        epoch = consumer.member_epoch

        stall = broker.intercept(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, lambda _seen: Verdict.NO_ANSWER, when=_member_heartbeat
        )

        def answered_after_stall() -> list[SeenRequest]:
            if not stall.calls:
                return []
            return [
                r
                for r in broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)
                if r.at > stall.calls[0].at
            ]

        await broker.wait_until(lambda: len(answered_after_stall()) >= 2)
        (stalled,) = stall.calls
        retry = answered_after_stall()[0]
        # One heartbeat in flight at a time: the retry waited for the timeout.
        assert retry.at - stalled.at >= 0.3
        assert retry.request.member_epoch == epoch
        group = broker.consumer_group(group_id)
        assert group is not None
        assert group.member_epoch(consumer.member_id) == consumer.member_epoch == epoch
        await consumer.consume(100, 0.05)  # runs any rebalance work queued meanwhile
        assert listener.events == [("assigned", tps("orders", 0, 1))]
