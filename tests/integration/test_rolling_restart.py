"""A rolling restart of a three-node cluster under running groups of both protocols.

How clusters are upgraded: one node at a time is stopped (controlled shutdown
moves its partition leaders and group coordinators away) and started again,
and the next waits until every replica is back in sync. Each group's
coordinator moves at least once and comes back. Measured: no record lost,
and no member's listener called, under either protocol (the new coordinator
loads the group from its log, epochs and generations included).
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient
from helpers import BothProtocols, wait_until

from kgroup.testing import KafkaCluster, create_topic
from kgroup.testing.pytest_plugin import MakeGroupId


def _in_sync(bootstrap: str) -> bool:
    """Every replica of every partition (the offsets topic's too) is in sync."""
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return all(
        len(partition.isrs) == len(partition.replicas)
        for topic in topics.values()
        for partition in topic.partitions.values()
    )


@pytest.mark.timeout(600)
def test_a_rolling_restart_loses_no_record_and_moves_no_partition(
    make_group_id: MakeGroupId,
) -> None:
    with KafkaCluster(nodes=3) as cluster:
        bootstrap = cluster.bootstrap_servers
        create_topic(bootstrap, "rolled", partitions=6, replication_factor=3)
        with BothProtocols(bootstrap, "rolled", 6, make_group_id, acks="all") as groups:
            wait_until(groups.balanced, 90, "both groups balanced")
            before = groups.mark()
            for node in cluster.nodes:
                node.stop()
                node.start()
                wait_until(
                    lambda: _in_sync(bootstrap), 120, f"node {node.node_id}'s replicas in sync"
                )
            groups.read_every_record(90)
            assert groups.calls_since(before, "consumer") == {"consumer-1": [], "consumer-2": []}
            assert groups.calls_since(before, "classic") == {"classic-1": [], "classic-2": []}
