"""Unit tests of the classic session's pure helpers and the choice of protocol."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from types import SimpleNamespace

import anyio
import pytest

from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.dataplane import Record
from kgroup.membership import MemberSubscription
from kgroup.protocol.consumer_protocol import encode_subscription
from kgroup.runtime import Driver
from kgroup.runtime.choice import session_class
from kgroup.runtime.classic_session import ClassicSession, _cluster, _join_response
from kgroup.runtime.consumer_session import ConsumerSession
from kgroup.transport import BrokerAddress, ClusterMetadata, PartitionInfo, TopicInfo
from kgroup.types import TopicPartition


class _IdleDataPlane:
    """A data plane that is never assigned anything (the driver never gets that far)."""

    assigned: frozenset[TopicPartition] = frozenset()

    def assign(self, offsets: Mapping[TopicPartition, int | None]) -> None:
        raise AssertionError("nothing is assigned in these tests")

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        pass

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        pass

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        pass

    def seek(self, partition: TopicPartition, offset: int) -> None:
        pass

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {}

    def consume(self, max_records: int, timeout: float) -> list[Record]:
        return []

    def close(self) -> None:
        pass


def test_cluster_has_partition_counts_and_replica_racks_of_known_topics() -> None:
    metadata = ClusterMetadata(
        brokers={
            1: BrokerAddress(1, "h1", 9092, rack="r1"),
            2: BrokerAddress(2, "h2", 9092, rack="r2"),
            3: BrokerAddress(3, "h3", 9092),
        },
        topics={
            "t": TopicInfo(
                "t",
                uuid.uuid4(),
                {
                    0: PartitionInfo(0, 1, 0, (1, 2), (1, 2)),
                    1: PartitionInfo(1, 3, 0, (3,), (3,)),
                },
            )
        },
    )
    cluster = _cluster(metadata, ["t", "missing"])
    assert dict(cluster.partition_counts) == {"t": 2}
    assert cluster.racks_of(TopicPartition("t", 0)) == {"r1", "r2"}
    assert cluster.racks_of(TopicPartition("t", 1)) == frozenset()


def test_join_response_decodes_every_member_subscription() -> None:
    sub = MemberSubscription(
        topics=frozenset({"a", "b"}),
        user_data=b"x",
        owned_partitions=frozenset({TopicPartition("a", 1)}),
        generation_id=4,
        rack_id="r1",
    )
    response = SimpleNamespace(
        error_code=0,
        generation_id=5,
        protocol_type="consumer",
        protocol_name="range",
        leader="m1",
        member_id="m1",
        members=[
            SimpleNamespace(
                member_id="m1", group_instance_id="i1", metadata=encode_subscription(sub, 3)
            ),
            SimpleNamespace(
                member_id="m2", group_instance_id=None, metadata=encode_subscription(sub, 0)
            ),
        ],
    )
    decoded = _join_response(response)
    assert decoded.generation_id == 5
    assert decoded.leader == "m1"
    first, second = decoded.members
    assert first.subscription == sub
    assert first.instance_id == "i1"
    assert first.protocol_version == 3
    # v0 carries topics and user data only.
    assert second.subscription.topics == sub.topics
    assert second.subscription.owned_partitions == frozenset()
    assert second.protocol_version == 0


def test_session_class_per_protocol() -> None:
    assert session_class(GroupProtocol.CONSUMER) is ConsumerSession
    assert session_class(GroupProtocol.CLASSIC) is ClassicSession
    assert ClassicSession.group_protocol is GroupProtocol.CLASSIC
    with pytest.raises(ValueError, match="resolve"):
        session_class(GroupProtocol.AUTO)


def test_auto_assumes_the_new_protocol_when_the_cluster_is_unreachable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = ConsumerConfig.from_dict(
        {
            "bootstrap.servers": "127.0.0.1:9",
            "group.id": "g",
            "group.protocol": "auto",
            "request.timeout.ms": 1000,
        }
    )

    async def main() -> GroupProtocol:
        # The driver decides auto with its own client; run() reports started once decided.
        driver = Driver(config, _IdleDataPlane(), wakeup=lambda: None)
        async with anyio.create_task_group() as tg:
            await tg.start(driver.run)
            protocol = driver.session.group_protocol
            driver.abort()
        return protocol

    assert anyio.run(main) is GroupProtocol.CONSUMER
    assert any("using the new consumer protocol" in r.message for r in caplog.records)
