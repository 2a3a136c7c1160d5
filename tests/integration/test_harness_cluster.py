"""A three-node KafkaCluster: it forms, and it keeps serving when a node dies."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from kgroup.testing import KafkaBroker, KafkaCluster, NodeState
from kgroup.testing.pytest_plugin import create_topic

pytestmark = pytest.mark.integration


def state_of(broker: KafkaBroker) -> NodeState:
    # A call, not an attribute: mypy would otherwise keep the state narrowed
    # across stop()/kill() calls that change it.
    return broker.state


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def brokers_seen_by(bootstrap: str) -> set[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).brokers)


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def consume_all(bootstrap: str, topic: str, group_id: str, count: int) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    values: list[str] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                payload = message.value()
                assert isinstance(payload, bytes)
                values.append(payload.decode())
    finally:
        consumer.close()
    return values


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
        produce(cluster.bootstrap_servers, "replicated", [f"a{i}" for i in range(10)])

        victim = cluster.node(2)
        victim.kill()
        assert state_of(victim) is NodeState.STOPPED
        survivors = f"{cluster.node(1).bootstrap_servers},{cluster.node(3).bootstrap_servers}"
        # SIGKILL: the controller fences node 2 after broker.session.timeout.ms (3 s).
        wait_for(lambda: brokers_seen_by(survivors) == {1, 3}, 30, "node 2 to be fenced")
        produce(survivors, "replicated", [f"b{i}" for i in range(10)])
        received = consume_all(survivors, "replicated", "cluster-group", 20)
        assert len(received) == 20

        victim.restart()
        assert state_of(victim) is NodeState.RUNNING
        assert victim.bootstrap_servers == servers[1]
        wait_for(
            lambda: brokers_seen_by(cluster.bootstrap_servers) == {1, 2, 3},
            30,
            "node 2 to rejoin",
        )
    assert all(node.state is NodeState.CLOSED for node in cluster.nodes)
    assert not cluster.work_dir.exists()
