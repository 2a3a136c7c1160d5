"""Unit tests of the classic runtime's pure helpers and the auto protocol choice."""

from __future__ import annotations

import uuid

import anyio
import pytest

from kgroup.classic_runtime import (
    ClassicRuntime,
    _cluster,
    choose_group_protocol,
    runtime_class,
)
from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.runtime import Runtime
from kgroup.transport import BrokerAddress, ClusterMetadata, PartitionInfo, TopicInfo
from kgroup.types import TopicPartition


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


def test_runtime_class_per_protocol() -> None:
    assert runtime_class(GroupProtocol.CONSUMER) is Runtime
    assert runtime_class(GroupProtocol.CLASSIC) is ClassicRuntime
    assert ClassicRuntime.group_protocol is GroupProtocol.CLASSIC
    with pytest.raises(ValueError, match="resolve"):
        runtime_class(GroupProtocol.AUTO)


def test_auto_assumes_the_new_protocol_when_the_cluster_is_unreachable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = ConsumerConfig.from_dict(
        {"bootstrap.servers": "127.0.0.1:9", "group.id": "g", "group.protocol": "auto"}
    )

    async def main() -> GroupProtocol:
        return await choose_group_protocol(config, timeout=1.0)

    assert anyio.run(main) is GroupProtocol.CONSUMER
    assert any("using the new consumer protocol" in r.message for r in caplog.records)
