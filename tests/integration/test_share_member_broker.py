"""The share-group member against a real broker: join, the broker's assignment, leave, refusals.

No share consumer runs the member yet; :func:`drive` here performs its
heartbeats over kgroup's transport, the way a session will, and answers
what else it asks for (metadata, the acknowledgement flush) at once.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import anyio
import pytest

from kgroup.error_codes import ErrorCode
from kgroup.membership import (
    CloseRequested,
    MetadataUpdated,
    ReportFatalError,
    RequestMetadata,
    StartFetching,
    StopFetching,
    SubscriptionChanged,
    TimerTick,
)
from kgroup.membership.share import (
    AcknowledgementsFlushed,
    FlushAcknowledgements,
    SendShareHeartbeat,
    ShareHeartbeatResponseReceived,
    ShareMember,
    ShareMemberConfig,
    ShareMemberState,
    new_member_id,
)
from kgroup.protocol.requests import share_group_describe, share_group_heartbeat
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport.client import KafkaClient
from kgroup.types import TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

# The broker computes a share group's assignment between heartbeats: the first
# answer is empty, the next (5 s later by default) carries the partitions.
WAIT = 30.0


class Driven:
    """A share member, what it fetches from, and what it reported."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.member = ShareMember(ShareMemberConfig(group_id=group_id), member_id=new_member_id())
        self.fetching: set[TopicPartition] = set()
        self.fatal: list[ReportFatalError] = []


async def drive(
    client: KafkaClient, driven: Driven, event: object, until: Callable[[], bool]
) -> None:
    """Hand ``event`` to the member, perform what it asks until ``until()``, within WAIT."""
    coordinator = await client.coordinator(driven.group_id)
    known = await client.metadata()
    member = driven.member
    pending = member.handle(event, time.monotonic())  # type: ignore[arg-type]
    with anyio.fail_after(WAIT):
        while True:
            for act in pending:
                match act:
                    case StartFetching():
                        driven.fetching |= act.partitions
                    case StopFetching():
                        driven.fetching -= act.partitions
                    case ReportFatalError():
                        driven.fatal.append(act)
            if until():
                return
            later: list[object] = []
            for act in pending:
                match act:
                    case SendShareHeartbeat():
                        build = functools.partial(share_group_heartbeat.build, request=act.request)
                        response = await client.request(build, node=coordinator.node_id)
                        parsed = share_group_heartbeat.parse(share_group_heartbeat.narrow(response))
                        later.append(ShareHeartbeatResponseReceived(act.seq, parsed))
                    case RequestMetadata():
                        later.append(
                            MetadataUpdated({i: known.topic_name(i) for i in act.topic_ids})
                        )
                    case FlushAcknowledgements():
                        later.append(AcknowledgementsFlushed(act.token))
            pending = []
            for answer in later:
                pending += member.handle(answer, time.monotonic())  # type: ignore[arg-type]
            if not later:
                deadline = member.next_deadline()
                await anyio.sleep(
                    max(0.0, (deadline or time.monotonic() + 0.05) - time.monotonic())
                )
                pending = member.handle(TimerTick(), time.monotonic())


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_two_share_members_are_assigned_the_topic_and_leave(
    anyio_backend: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    topic = make_topic(partitions=2)
    everything = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    group = make_group_id()
    first, second = Driven(group), Driven(group)
    async with KafkaClient(kafka_bootstrap_servers) as client:
        await client.metadata([topic])
        subscribe = SubscriptionChanged(frozenset({topic}))
        await drive(client, first, subscribe, lambda: first.fetching == everything)
        assert first.member.state is ShareMemberState.STABLE
        assert first.member.member_epoch > 0
        # A share group may give one partition to several members: the second
        # one is given partitions without the first giving any up first.
        await drive(client, second, subscribe, lambda: bool(second.fetching))
        assert second.fetching <= everything
        # The group as ShareGroupDescribe reports it: both members, what each fetches.
        coordinator = await client.coordinator(group)
        response = await client.request(
            functools.partial(share_group_describe.build, group_ids=[group]),
            node=coordinator.node_id,
        )
        (described,) = share_group_describe.parse(share_group_describe.narrow(response))
        assert (described.error_code, described.state) == (0, "Stable")
        by_id = {m.member_id: m for m in described.members}
        assert set(by_id) == {first.member.member_id, second.member.member_id}
        assert by_id[first.member.member_id].subscribed_topics == {topic}
        # The second member heard its assignment last; the first one's may have
        # changed since it last heartbeated (no revocation needed in a share group).
        assert by_id[second.member.member_id].assignment == second.fetching
        assert by_id[first.member.member_id].assignment <= everything
        for driven in (first, second):
            await drive(
                client,
                driven,
                CloseRequested(deadline=time.monotonic() + 10),
                lambda d=driven: d.member.closed,  # type: ignore[misc]
            )
            assert driven.fetching == set()
            assert driven.member.member_epoch == -1
        assert first.fatal == second.fatal == []


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_consumer_groups_id_is_refused_with_the_brokers_reason(
    anyio_backend: str,
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
) -> None:
    """Group ids share one namespace: a share member cannot join a consumer group."""
    from kgroup import AsyncConsumer  # noqa: PLC0415

    topic = make_topic(partitions=1)
    group = make_group_id()
    config = {
        "bootstrap.servers": kafka_bootstrap_servers,
        "group.id": group,
        "group.protocol": "consumer",
    }
    async with AsyncConsumer(config) as consumer:
        consumer.subscribe([topic])
        with anyio.fail_after(WAIT):
            while not consumer.assignment():
                await consumer.poll(0.1)
        driven = Driven(group)
        async with KafkaClient(kafka_bootstrap_servers) as client:
            await client.metadata([topic])
            subscribe = SubscriptionChanged(frozenset({topic}))
            await drive(client, driven, subscribe, lambda: bool(driven.fatal))
    (fatal,) = driven.fatal
    assert fatal.code == ErrorCode.GROUP_ID_NOT_FOUND.value
    assert fatal.message is not None
    assert group in fatal.message
    assert driven.member.state is ShareMemberState.FATAL
