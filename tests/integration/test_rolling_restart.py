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
from helpers import (
    EventLog,
    PacedProducer,
    Runner,
    classic_conf,
    consumer_conf,
    converged,
    partitions_of,
    read_by,
    wait_until,
)

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
        log = EventLog()
        groups = {
            "consumer": consumer_conf(bootstrap, make_group_id()),
            "classic": classic_conf(bootstrap, make_group_id(), "cooperative-sticky"),
        }
        runners = {
            name: [Runner(conf, "rolled", log, f"{name}-{n}") for n in (1, 2)]
            for name, conf in groups.items()
        }
        producer = PacedProducer(bootstrap, "rolled", 6, acks="all")
        try:
            everything = partitions_of("rolled", 6)

            def balanced() -> bool:
                return all(
                    converged(members, everything)
                    and all(m.assignment() and log.held(m.name) == m.assignment() for m in members)
                    for members in runners.values()
                )

            wait_until(balanced, 90, "both groups balanced")
            before = {r.name: len(log.of(r.name)) for rs in runners.values() for r in rs}
            for node in cluster.nodes:
                node.stop()
                node.start()
                wait_until(
                    lambda: _in_sync(bootstrap), 120, f"node {node.node_id}'s replicas in sync"
                )
            acked = producer.stop()
            for name, members in runners.items():
                wait_until(
                    lambda members=members: acked <= read_by(members),  # type: ignore[misc]
                    90,
                    f"the {name} group to read every acknowledged record",
                )
            moved = {
                r.name: log.of(r.name)[before[r.name] :] for rs in runners.values() for r in rs
            }
            assert moved == {name: [] for name in moved}
        finally:
            producer.stop()
            for members in runners.values():
                for r in members:
                    r.stop()
