"""A three-node KafkaCluster: it forms, and it keeps serving when a node dies."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient
from helpers import consume, produce_values, state_of, wait_until

from kgroup.testing import KafkaCluster, NodeState
from kgroup.testing.pytest_plugin import create_topic

pytestmark = pytest.mark.integration


def brokers_seen_by(bootstrap: str) -> set[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).brokers)


@pytest.mark.timeout(300)
def test_three_nodes_survive_losing_one() -> None:
    with KafkaCluster(nodes=3) as cluster:
        servers = cluster.bootstrap_servers.split(",")
        assert len(servers) == 3
        assert [node.node_id for node in cluster.nodes] == [1, 2, 3]
        assert len(set(cluster.pids)) == 3
        assert cluster.cluster_id is not None
        assert all(node.cluster_id == cluster.cluster_id for node in cluster.nodes)
        assert brokers_seen_by(cluster.bootstrap_servers) == {1, 2, 3}

        create_topic(cluster.bootstrap_servers, "replicated", partitions=3, replication_factor=3)
        produce_values(cluster.bootstrap_servers, "replicated", [f"a{i}" for i in range(10)])

        victim = cluster.node(2)
        victim.kill()
        assert state_of(victim) is NodeState.STOPPED
        survivors = f"{cluster.node(1).bootstrap_servers},{cluster.node(3).bootstrap_servers}"
        # SIGKILL: the controller fences node 2 after broker.session.timeout.ms (3 s).
        wait_until(lambda: brokers_seen_by(survivors) == {1, 3}, 30, "node 2 to be fenced")
        produce_values(survivors, "replicated", [f"b{i}" for i in range(10)])
        received = consume(survivors, "replicated", "cluster-group", 20, timeout=60)
        assert len(received) == 20

        victim.restart()
        assert state_of(victim) is NodeState.RUNNING
        assert victim.bootstrap_servers == servers[1]
        wait_until(
            lambda: brokers_seen_by(cluster.bootstrap_servers) == {1, 2, 3},
            30,
            "node 2 to rejoin",
        )
    assert all(node.state is NodeState.CLOSED for node in cluster.nodes)
    assert not cluster.work_dir.exists()
