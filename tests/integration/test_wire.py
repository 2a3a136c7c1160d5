"""The protocol and transport layers against a real Kafka broker (kgroup.testing)."""

from __future__ import annotations

import datetime
import functools
import uuid
from typing import Any

import anyio
import pytest
from helpers import coordinator_moved
from kio.schema.errors import ErrorCode
from kio.static.constants import uuid_zero
from kio.static.protocol import RequestPayload

from kgroup.protocol import ApiKey, NegotiatedVersions
from kgroup.testing import KafkaCluster
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport import Backoff, KafkaClient, connect, parse_bootstrap_servers

pytestmark = pytest.mark.integration


@pytest.fixture
def asyncio_only() -> str:
    return "asyncio"


def _ms(value: float) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


@pytest.mark.anyio
async def test_api_versions_shows_consumer_group_heartbeat_v1(
    kafka_bootstrap_servers: str,
) -> None:
    host, port = parse_bootstrap_servers(kafka_bootstrap_servers)[0]
    async with connect(host, port) as conn:
        assert 1 in conn.versions.broker[ApiKey.CONSUMER_GROUP_HEARTBEAT]
        assert conn.versions.version(ApiKey.CONSUMER_GROUP_HEARTBEAT) == 1
        assert conn.versions.version(ApiKey.API_VERSIONS) == 4


@pytest.mark.anyio
async def test_metadata_has_topic_ids_and_partition_counts(
    kafka_bootstrap_servers: str, make_topic: MakeTopic
) -> None:
    topic = make_topic(partitions=3)
    async with KafkaClient(kafka_bootstrap_servers) as client:
        meta = await client.metadata([topic])
        topic_id = meta.topic_id(topic)
        assert topic_id != uuid_zero
        assert meta.topic_name(topic_id) == topic
        assert meta.partition_count(topic) == 3
        assert all(p.leader in meta.brokers for p in meta.topics[topic].partitions.values())
        missing = f"{topic}-missing"
        meta = await client.metadata([missing])
        assert meta.topic_errors[missing] == ErrorCode.unknown_topic_or_partition


@pytest.mark.anyio
async def test_find_coordinator_returns_a_broker(
    kafka_bootstrap_servers: str, make_group_id: MakeGroupId
) -> None:
    async with KafkaClient(kafka_bootstrap_servers) as client:
        coordinator = await client.coordinator(make_group_id())
        assert coordinator.node_id in client.cluster.brokers
        assert client.cluster.brokers[coordinator.node_id].port == coordinator.port


def _heartbeat(
    versions: NegotiatedVersions,
    *,
    group_id: str,
    member_id: str,
    epoch: int,
    topic: str | None = None,
    owned: dict[uuid.UUID, tuple[int, ...]] | None = None,
) -> RequestPayload:
    module = versions.request_module(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    fields: dict[str, Any] = {"group_id": group_id, "member_id": member_id, "member_epoch": epoch}
    if epoch == 0:
        # A join carries everything; later heartbeats only what changed.
        fields |= {
            "rebalance_timeout": _ms(30_000),
            "subscribed_topic_names": (topic,),
            "topic_partitions": (),
        }
    elif owned is not None:
        fields["topic_partitions"] = tuple(
            module.TopicPartitions(topic_id=tid, partitions=parts) for tid, parts in owned.items()
        )
    else:
        fields["topic_partitions"] = None
    return versions.new_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, **fields)


@pytest.mark.anyio
async def test_consumer_group_heartbeat_join_assignment_and_leave(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic = make_topic(partitions=3)
    group_id = make_group_id()
    member_id = str(uuid.uuid4())
    async with KafkaClient(kafka_bootstrap_servers) as client:
        topic_id = (await client.metadata([topic])).topic_id(topic)

        joined: Any = await client.coordinator_request(
            group_id,
            lambda v: _heartbeat(v, group_id=group_id, member_id=member_id, epoch=0, topic=topic),
        )
        assert joined.error_code == ErrorCode.none, joined.error_message
        assert joined.member_epoch > 0
        epoch = int(joined.member_epoch)
        interval = joined.heartbeat_interval.total_seconds()
        owned: dict[uuid.UUID, tuple[int, ...]] = {}
        response: Any = joined
        with anyio.fail_after(30):
            while True:
                if response.assignment is not None:
                    owned = {
                        tp.topic_id: tuple(sorted(tp.partitions))
                        for tp in response.assignment.topic_partitions
                    }
                if owned.get(topic_id) == (0, 1, 2):
                    break
                # The heartbeat interval is the broker's pacing, not a wait for an event.
                await anyio.sleep(interval)
                response = await client.coordinator_request(
                    group_id,
                    functools.partial(
                        _heartbeat, group_id=group_id, member_id=member_id, epoch=epoch, owned=owned
                    ),
                )
                assert response.error_code == ErrorCode.none, response.error_message
                epoch = int(response.member_epoch)
        assert owned == {topic_id: (0, 1, 2)}

        left: Any = await client.coordinator_request(
            group_id,
            lambda v: _heartbeat(v, group_id=group_id, member_id=member_id, epoch=-1),
        )
        assert left.error_code == ErrorCode.none, left.error_message
        assert left.member_epoch == -1


def test_coordinator_moves_when_its_node_is_killed(asyncio_only: str) -> None:
    group_id = f"g-failover-{uuid.uuid4().hex[:10]}"

    with KafkaCluster(nodes=3) as cluster:

        async def scenario() -> None:
            async with KafkaClient(
                cluster.bootstrap_servers,
                request_timeout=5,
                connect_timeout=2,
                backoff=Backoff(initial=0.1, maximum=0.5),
            ) as client:
                # The offsets topic is created on first use; lookups wait for it.
                first = await client.coordinator(group_id, timeout=60)
                cluster.node(first.node_id).kill()
                current = await coordinator_moved(client, group_id, first.node_id)
                assert current.node_id in {n.node_id for n in cluster.nodes} - {first.node_id}
                # The new coordinator really answers for the group.
                conn = await client.connection(current.node_id)
                assert not conn.closed

        anyio.run(scenario, backend=asyncio_only)
