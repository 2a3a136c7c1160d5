"""kgroup.testing against real brokers: the session fixtures and a broker's lifecycle."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient
from helpers import consume, produce_values, state_of, wait_until

from kgroup.testing import (
    Broker,
    KafkaBroker,
    NodeState,
    pick_free_ports,
)
from kgroup.testing import process as process_module
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic, create_topic
from kgroup.testing.readiness import port_accepts

pytestmark = pytest.mark.integration


def pid_of(broker: KafkaBroker) -> int | None:
    return broker.pid


def topic_names(bootstrap: str) -> set[str]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return set(metadata.topics)


class TestSessionFixtures:
    def test_produce_and_consume(
        self, kafka_broker: Broker, make_topic: MakeTopic, make_group_id: MakeGroupId
    ) -> None:
        topic = make_topic(partitions=3)
        sent = [f"m{i}" for i in range(30)]
        produce_values(kafka_broker.bootstrap_servers, topic, sent)
        received = consume(kafka_broker.bootstrap_servers, topic, make_group_id(), len(sent))
        assert sorted(received) == sorted(sent)

    def test_make_topic_waits_for_leaders(
        self, kafka_broker: Broker, make_topic: MakeTopic
    ) -> None:
        topic = make_topic(partitions=4, config={"cleanup.policy": "compact"})
        admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
        partitions = admin.list_topics(topic=topic, timeout=10).topics[topic].partitions
        assert sorted(partitions) == [0, 1, 2, 3]
        assert all(p.leader >= 0 for p in partitions.values())

    def test_make_topic_with_a_name(self, kafka_broker: Broker, make_topic: MakeTopic) -> None:
        assert make_topic(name="harness-named-topic") == "harness-named-topic"
        assert "harness-named-topic" in topic_names(kafka_broker.bootstrap_servers)

    def test_group_ids_are_unique(self, make_group_id: MakeGroupId) -> None:
        ids = {make_group_id() for _ in range(100)} | {make_group_id("other") for _ in range(100)}
        assert len(ids) == 200
        assert make_group_id("other").startswith("other-")

    def test_broker_tests_are_marked_integration(
        self, kafka_bootstrap_servers: str, request: pytest.FixtureRequest
    ) -> None:
        assert request.node.get_closest_marker("integration") is not None
        assert kafka_bootstrap_servers.startswith("127.0.0.1:")

    def test_the_session_broker_has_the_fast_defaults(self, kafka_broker: Broker) -> None:
        if not isinstance(kafka_broker, KafkaBroker):
            pytest.skip("only the process backend has a config file to read")
        text = kafka_broker.config_path.read_text()
        assert "group.consumer.heartbeat.interval.ms=500\n" in text
        assert "group.consumer.assignment.interval.ms=0\n" in text


@pytest.fixture(scope="module")
def own_broker() -> Iterator[KafkaBroker]:
    """A broker this module may stop and kill (the session broker is shared)."""
    with KafkaBroker({"num.partitions": "2"}) as broker:
        yield broker


class TestLifecycle:
    @pytest.mark.timeout(240)
    def test_stop_restart_kill_keep_data(self, own_broker: KafkaBroker) -> None:
        bootstrap = own_broker.bootstrap_servers
        host, port = bootstrap.split(":")
        first_pid = own_broker.pid
        assert state_of(own_broker) is NodeState.RUNNING
        assert own_broker.node_id == 1
        assert "num.partitions=2\n" in own_broker.config_path.read_text()
        create_topic(bootstrap, "kept", partitions=2)
        produce_values(bootstrap, "kept", ["before"])

        own_broker.stop()
        assert state_of(own_broker) is NodeState.STOPPED
        assert pid_of(own_broker) is None
        assert not port_accepts(host, int(port))

        own_broker.restart()
        assert own_broker.bootstrap_servers == bootstrap
        assert pid_of(own_broker) not in {None, first_pid}
        assert "kept" in topic_names(bootstrap)

        killed_pid = pid_of(own_broker)
        assert killed_pid is not None
        own_broker.kill()
        assert state_of(own_broker) is NodeState.STOPPED
        with pytest.raises(ProcessLookupError):
            # The JVM is gone (and reaped), not merely shutting down.
            os.kill(killed_pid, 0)

        own_broker.start()
        assert state_of(own_broker) is NodeState.RUNNING
        assert "kept" in topic_names(bootstrap)
        produce_values(bootstrap, "kept", ["after"])
        assert sorted(consume(bootstrap, "kept", "lifecycle-group", 2)) == [
            "after",
            "before",
        ]
        assert own_broker.log_path.is_file()
        assert own_broker.log_path.read_text().count("Kafka Server started") == 3

        # A JVM that dies behind the harness's back shows as stopped.
        crashed_pid = pid_of(own_broker)
        assert crashed_pid is not None
        os.kill(crashed_pid, signal.SIGKILL)
        wait_until(lambda: state_of(own_broker) is NodeState.STOPPED, 10, "the crash to show")


@pytest.mark.timeout(240)
def test_a_taken_port_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    # Between picking a port and the broker binding it another process may take
    # it; simulate that by handing the broker a port this test listens on.
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = int(squatter.getsockname()[1])
        calls: list[int] = []

        def fake_pick(count: int, host: str = "127.0.0.1") -> tuple[int, ...]:
            calls.append(count)
            if len(calls) == 1:
                return (taken, *pick_free_ports(count - 1, host))
            return pick_free_ports(count, host)

        monkeypatch.setattr(process_module, "pick_free_ports", fake_pick)
        with KafkaBroker() as broker:
            assert len(calls) == 2
            assert broker.ports.client != taken
            assert "Address already in use" in broker.log_path.read_text()
            assert topic_names(broker.bootstrap_servers) is not None
