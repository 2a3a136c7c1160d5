"""kgroup.testing without a broker: configuration, ids, ports, backend selection."""

from __future__ import annotations

import base64
import socket
import tempfile
import uuid
from pathlib import Path

import pytest

from kgroup.errors import HarnessError
from kgroup.testing import (
    DEFAULT_KAFKA_VERSION,
    FAST_TEST_DEFAULTS,
    BrokerBackend,
    ExternalBroker,
    KafkaBroker,
    KafkaCluster,
    NodePorts,
    QuorumNode,
    backend_from_env,
    broker_from_env,
    cache_root,
    container_environment,
    generate_cluster_id,
    kafka_version,
    node_properties,
    pick_free_ports,
    render_properties,
)
from kgroup.testing.backends import ContainerBroker
from kgroup.testing.jvm import read_resource


def parse_properties(text: str) -> dict[str, str]:
    """A minimal reader for what render_properties writes (no continuation lines)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key_chars: list[str] = []
        i = 0
        while i < len(line) and line[i] != "=":
            if line[i] == "\\":
                i += 1
            key_chars.append(line[i])
            i += 1
        raw = line[i + 1 :]
        value: list[str] = []
        j = 0
        escapes = {"n": "\n", "r": "\r", "t": "\t"}
        while j < len(raw):
            if raw[j] == "\\":
                j += 1
                value.append(escapes.get(raw[j], raw[j]))
            else:
                value.append(raw[j])
            j += 1
        out["".join(key_chars)] = "".join(value)
    return out


class TestClusterId:
    def test_is_22_url_safe_chars_of_16_bytes(self) -> None:
        cluster_id = generate_cluster_id()
        assert len(cluster_id) == 22
        assert set(cluster_id) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        )
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16

    def test_is_fresh_each_time(self) -> None:
        assert len({generate_cluster_id() for _ in range(200)}) == 200


class TestPorts:
    def test_distinct_and_bindable(self) -> None:
        ports = pick_free_ports(6)
        assert len(set(ports)) == 6
        for port in ports:
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", port))

    def test_zero(self) -> None:
        assert pick_free_ports(0) == ()

    def test_negative_is_an_error(self) -> None:
        with pytest.raises(ValueError, match="count"):
            pick_free_ports(-1)


class TestNodeProperties:
    def test_standalone_node(self, tmp_path: Path) -> None:
        props = node_properties(node_id=1, ports=NodePorts(9092, 9093), data_dir=tmp_path)
        assert props["process.roles"] == "broker,controller"
        assert props["node.id"] == "1"
        assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
        assert props["advertised.listeners"] == props["listeners"]
        assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:9093"
        assert "controller.quorum.voters" not in props
        assert props["log.dirs"] == str(tmp_path)
        assert props["offsets.topic.replication.factor"] == "1"
        for key, value in FAST_TEST_DEFAULTS.items():
            assert props[key] == value

    def test_fast_defaults_cover_the_group_settings(self) -> None:
        assert FAST_TEST_DEFAULTS["group.consumer.heartbeat.interval.ms"] == "500"
        assert FAST_TEST_DEFAULTS["group.consumer.min.heartbeat.interval.ms"] == "500"
        assert FAST_TEST_DEFAULTS["group.consumer.session.timeout.ms"] == "6000"
        assert FAST_TEST_DEFAULTS["group.consumer.min.session.timeout.ms"] == "6000"
        assert FAST_TEST_DEFAULTS["group.consumer.assignment.interval.ms"] == "0"
        assert FAST_TEST_DEFAULTS["group.min.session.timeout.ms"] == "1000"
        assert FAST_TEST_DEFAULTS["group.initial.rebalance.delay.ms"] == "0"
        assert FAST_TEST_DEFAULTS["log.cleaner.dedupe.buffer.size"] == "2097152"

    def test_fast_defaults_are_read_only(self) -> None:
        with pytest.raises(TypeError):
            FAST_TEST_DEFAULTS["x"] = "y"  # type: ignore[index]

    def test_overrides_win(self, tmp_path: Path) -> None:
        props = node_properties(
            node_id=1,
            ports=NodePorts(1, 2),
            data_dir=tmp_path,
            overrides={"group.consumer.session.timeout.ms": "10000", "num.partitions": "4"},
        )
        assert props["group.consumer.session.timeout.ms"] == "10000"
        assert props["num.partitions"] == "4"

    def test_cluster_node(self, tmp_path: Path) -> None:
        voters = [QuorumNode(i, NodePorts(1000 * i, 1000 * i + 1)) for i in (1, 2, 3)]
        props = node_properties(node_id=2, ports=voters[1].ports, data_dir=tmp_path, voters=voters)
        assert props["controller.quorum.voters"] == (
            "1@127.0.0.1:1001,2@127.0.0.1:2001,3@127.0.0.1:3001"
        )
        assert "controller.quorum.bootstrap.servers" not in props
        assert props["listeners"] == "PLAINTEXT://127.0.0.1:2000,CONTROLLER://127.0.0.1:2001"
        assert props["offsets.topic.replication.factor"] == "3"
        assert props["transaction.state.log.replication.factor"] == "3"
        assert props["transaction.state.log.min.isr"] == "2"
        assert props["broker.session.timeout.ms"] == "3000"
        assert props["broker.heartbeat.interval.ms"] == "500"

    def test_two_node_cluster_caps_replication(self, tmp_path: Path) -> None:
        voters = [QuorumNode(i, NodePorts(10 * i, 10 * i + 1)) for i in (1, 2)]
        props = node_properties(node_id=1, ports=voters[0].ports, data_dir=tmp_path, voters=voters)
        assert props["offsets.topic.replication.factor"] == "2"
        assert props["transaction.state.log.min.isr"] == "2"

    def test_node_must_be_a_voter(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="not among the voters"):
            node_properties(
                node_id=9,
                ports=NodePorts(1, 2),
                data_dir=tmp_path,
                voters=[QuorumNode(1, NodePorts(1, 2))],
            )


class TestRenderProperties:
    def test_sorted_key_value_lines(self) -> None:
        text = render_properties({"b": "2", "a": "1"})
        assert text == "a=1\nb=2\n"

    def test_escapes_round_trip(self) -> None:
        props = {
            "sasl.jaas.config": 'PlainLoginModule required username="a" password="p=\\x";',
            "weird key:x": " leading blank",
            "multi": "line1\nline2\ttab",
            "windows.path": "C:\\kafka\\data",
        }
        text = render_properties(props)
        assert len(text.splitlines()) == len(props)
        assert parse_properties(text) == props


class TestResources:
    def test_pom_pins_kafka_and_log4j(self) -> None:
        pom = read_resource("pom.xml")
        assert f"<kafka.version>{DEFAULT_KAFKA_VERSION}</kafka.version>" in pom
        assert "<artifactId>kafka_2.13</artifactId>" in pom
        for artifact in ("log4j-api", "log4j-core", "log4j-slf4j-impl"):
            assert f"<artifactId>{artifact}</artifactId>" in pom
        assert "<log4j.version>2.25.5</log4j.version>" in pom

    def test_log4j_config_keeps_the_started_line(self) -> None:
        config = read_resource("log4j2.properties")
        assert "rootLogger.level = INFO" in config
        assert "logger.kafka.level = INFO" in config


class TestEnvironment:
    def test_version(self) -> None:
        assert kafka_version(environ={}) == DEFAULT_KAFKA_VERSION == "4.4.0"
        assert kafka_version(environ={"KGROUP_KAFKA_VERSION": "4.3.1"}) == "4.3.1"
        assert kafka_version("4.2.0", environ={"KGROUP_KAFKA_VERSION": "4.3.1"}) == "4.2.0"

    def test_cache_root(self, tmp_path: Path) -> None:
        assert cache_root({"KGROUP_CACHE_DIR": str(tmp_path)}) == tmp_path
        assert cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "kgroup"
        assert cache_root({}) == Path.home() / ".cache" / "kgroup"

    def test_backend_selection(self) -> None:
        assert backend_from_env({}) is BrokerBackend.PROCESS
        assert backend_from_env({"KAFKA_BOOTSTRAP_SERVERS": "h:1"}) is BrokerBackend.EXTERNAL
        assert (
            backend_from_env({"KAFKA_BOOTSTRAP_SERVERS": "h:1", "KGROUP_BROKER_BACKEND": "process"})
            is BrokerBackend.PROCESS
        )
        assert (
            backend_from_env({"KGROUP_BROKER_BACKEND": "Testcontainers"})
            is BrokerBackend.TESTCONTAINERS
        )

    def test_unknown_backend(self) -> None:
        with pytest.raises(HarnessError, match="not a backend"):
            backend_from_env({"KGROUP_BROKER_BACKEND": "docker"})

    def test_broker_from_env_kinds(self) -> None:
        assert isinstance(broker_from_env(environ={}), KafkaBroker)
        assert isinstance(broker_from_env(nodes=3, environ={}), KafkaCluster)
        external = broker_from_env(environ={"KAFKA_BOOTSTRAP_SERVERS": "h:1,h:2"})
        assert isinstance(external, ExternalBroker)
        assert external.bootstrap_servers == "h:1,h:2"
        container = broker_from_env(environ={"KGROUP_BROKER_BACKEND": "testcontainers"})
        assert isinstance(container, ContainerBroker)
        assert container.image == f"apache/kafka:{DEFAULT_KAFKA_VERSION}"

    def test_cluster_needs_the_process_backend(self) -> None:
        with pytest.raises(HarnessError, match="process backend"):
            broker_from_env(nodes=3, environ={"KAFKA_BOOTSTRAP_SERVERS": "h:1"})


class TestExternalBroker:
    @pytest.mark.parametrize("operation", ["stop", "kill", "restart"])
    def test_lifecycle_operations_need_a_managed_broker(self, operation: str) -> None:
        broker = ExternalBroker("127.0.0.1:1")
        with pytest.raises(HarnessError, match="needs a managed broker"):
            getattr(broker, operation)()

    def test_needs_bootstrap_servers(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
        with pytest.raises(HarnessError, match="KAFKA_BOOTSTRAP_SERVERS"):
            ExternalBroker()

    def test_close_leaves_it_alone(self) -> None:
        ExternalBroker("127.0.0.1:1").close()


class TestContainerEnvironment:
    def test_kafka_env_convention(self) -> None:
        env = container_environment(
            40000, {"some_key.with-dash": "v"}, cluster_id="MkU3OEVBNTcwNTJENDM2Qk"
        )
        assert env["CLUSTER_ID"] == "MkU3OEVBNTcwNTJENDM2Qk"
        assert env["KAFKA_NODE_ID"] == "1"
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        assert "PLAINTEXT://127.0.0.1:40000" in env["KAFKA_ADVERTISED_LISTENERS"]
        assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@localhost:9093"
        assert env["KAFKA_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS"] == "500"
        assert env["KAFKA_SOME__KEY_WITH___DASH"] == "v"

    def test_no_engine_is_a_harness_error(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # Nothing listens on this socket path, as on a machine without Docker.
        monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        broker = ContainerBroker()
        with pytest.raises(HarnessError, match="container engine"):
            broker.start()


class TestLifecycleGuards:
    def test_no_ports_before_start(self) -> None:
        with pytest.raises(HarnessError, match="before its first start"):
            _ = KafkaBroker().bootstrap_servers

    def test_restart_before_start(self) -> None:
        with pytest.raises(HarnessError, match="never started"):
            KafkaBroker().restart()

    def test_cluster_node_lookup(self) -> None:
        cluster = KafkaCluster(nodes=3)
        try:
            assert [n.node_id for n in cluster.nodes] == [1, 2, 3]
            assert cluster.node(2) is cluster.nodes[1]
            with pytest.raises(KeyError):
                cluster.node(4)
            with pytest.raises(HarnessError, match="started by its KafkaCluster"):
                cluster.node(1).start()
        finally:
            cluster.close()

    def test_unstarted_brokers_leave_no_directories(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        KafkaBroker().close()
        KafkaCluster(nodes=2).close()
        assert list(tmp_path.iterdir()) == []

    def test_cluster_nodes_live_in_the_cluster_directory(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        cluster = KafkaCluster(nodes=2)
        assert cluster.node(2).log_path == cluster.work_dir / "node-2" / "broker.log"
        assert cluster.work_dir.parent == tmp_path
        cluster.close()
        assert list(tmp_path.iterdir()) == []

    def test_cluster_needs_a_node(self) -> None:
        with pytest.raises(ValueError, match="at least one node"):
            KafkaCluster(nodes=0)


def test_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xF8 in the first byte encodes to "-" as the first base64url character:
    # the storage tool would parse such an id as an option and refuse to format.
    dashed = uuid.UUID(bytes=bytes([0xF8]) + bytes(15))
    plain = uuid.UUID(bytes=bytes([0x10]) + bytes(15))
    assert base64.urlsafe_b64encode(dashed.bytes).decode().startswith("-")
    draws = iter([dashed, dashed, plain])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))
    cluster_id = generate_cluster_id()
    assert cluster_id == base64.urlsafe_b64encode(plain.bytes).decode().rstrip("=")
