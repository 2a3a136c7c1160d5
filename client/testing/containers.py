"""Apache Kafka brokers in containers (the ``testcontainers`` backend).

A :class:`ContainerBroker` is one KRaft node in combined mode in an
``apache/kafka`` container, configured through the image's ``KAFKA_*``
environment variables; a :class:`ContainerCluster` runs several on a private
container network. Both speak to the engine through testcontainers and the
Docker API, so the same code drives Docker and Podman (``DOCKER_HOST`` pointing
at Podman's socket; ``.ci/container-engine`` prepares one where no engine runs).

Listeners of every node, container side:

- ``PLAINTEXT`` on 9092, published on a free host port and advertised as
  ``127.0.0.1:<host port>``, so clients on the host reach each node directly;
- ``BROKER`` on 9094, advertised under the node's name on the container
  network, for replication between nodes;
- ``CONTROLLER`` on 9093, the KRaft quorum.

The host port is chosen once and kept by the container, so the advertised
address survives :meth:`~ContainerBroker.restart`; the container itself (and
with it the storage) is reused across stop, kill and start.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import importlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from kgroup.errors import BrokerStartError, HarnessError
from kgroup.testing._lifecycle import BrokerNode, NodeCluster, NodeState, failure_summary
from kgroup.testing.config import (
    FAST_TEST_DEFAULTS,
    generate_cluster_id,
    internal_topic_settings,
    pick_free_ports,
)
from kgroup.testing.jvm import DEFAULT_KAFKA_VERSION
from kgroup.testing.process import DEFAULT_JVM_OPTIONS

__all__ = [
    "CLIENT_PORT",
    "DEFAULT_IMAGE",
    "ContainerBroker",
    "ContainerCluster",
    "container_environment",
    "default_image",
]

_log = logging.getLogger("kgroup.testing.containers")

CLIENT_PORT = 9092
"""The container port of the ``PLAINTEXT`` listener clients use."""
_CONTROLLER_PORT = 9093
_BROKER_PORT = 9094
_DATA_DIR = "/var/lib/kafka/data"
DEFAULT_IMAGE = f"apache/kafka:{DEFAULT_KAFKA_VERSION}"
"""The official image of the Kafka release the harness pins."""

_TAIL_LINES = 40
_PORT_ATTEMPTS = 3
_PREPARE_HINT = (
    "Start Docker, or on a machine without one run `.ci/container-engine` (as root: it "
    "installs Podman and serves its Docker-compatible socket) and set "
    "DOCKER_HOST=unix:///run/podman/podman.sock and TESTCONTAINERS_RYUK_DISABLED=true."
)

# The image's entrypoint turns KAFKA_FOO_BAR into foo.bar; these variables
# tune the JVM instead and never become broker settings.
_JVM_VARIABLES = frozenset(
    {
        "KAFKA_HEAP_OPTS",
        "KAFKA_JVM_PERFORMANCE_OPTS",
        "KAFKA_OPTS",
        "KAFKA_LOG4J_OPTS",
        "KAFKA_JMX_OPTS",
        "KAFKA_GC_LOG_OPTS",
    }
)


def default_image(version: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """Return ``$KGROUP_KAFKA_IMAGE``, else ``apache/kafka:<version or the pinned one>``."""
    env = os.environ if environ is None else environ
    explicit = env.get("KGROUP_KAFKA_IMAGE", "").strip()
    if explicit:
        return explicit
    return f"apache/kafka:{version}" if version else DEFAULT_IMAGE


def _env_key(key: str) -> str:
    # The apache/kafka image turns KAFKA_FOO_BAR into foo.bar; a literal "_" is
    # written "__" and a "-" is written "___" (kafka.docker.KafkaDockerWrapper).
    return "KAFKA_" + key.replace("_", "__").replace("-", "___").replace(".", "_").upper()


def _split_jvm_options(options: Sequence[str]) -> tuple[str, str]:
    # The heap goes to KAFKA_HEAP_OPTS, as kafka-run-class.sh expects; the rest
    # replaces its performance options (G1 and friends), as the process backend does.
    heap = [o for o in options if o.startswith(("-Xms", "-Xmx"))]
    rest = [o for o in options if o not in heap]
    return " ".join(heap), " ".join(rest)


def container_environment(
    host_port: int,
    overrides: Mapping[str, str] | None = None,
    *,
    cluster_id: str | None = None,
    node_id: int = 1,
    hostname: str = "localhost",
    voters: Mapping[int, str] | None = None,
    jvm_options: Sequence[str] | None = None,
) -> dict[str, str]:
    """Return the environment that configures one ``apache/kafka`` container for tests.

    A KRaft node in combined mode. Clients on the host reach it at
    ``127.0.0.1:<host_port>`` (published from the container's 9092); other
    nodes reach it at ``<hostname>:9094``. ``voters`` maps node ids to the
    names of a static quorum (default: this node alone); with more than one
    voter the internal topics get replication factor ``min(3, n)`` and min
    ISR ``min(2, n)``, as in :func:`~kgroup.testing.node_properties`.
    Settings are :data:`FAST_TEST_DEFAULTS`, then the cluster settings, then
    ``overrides``, in the image's ``KAFKA_*`` convention; ``jvm_options``
    (default :data:`~kgroup.testing.DEFAULT_JVM_OPTIONS`) become
    ``KAFKA_HEAP_OPTS`` and ``KAFKA_JVM_PERFORMANCE_OPTS``.
    """
    quorum = dict(voters) if voters is not None else {node_id: hostname}
    if node_id not in quorum:
        raise ValueError(f"node {node_id} is not among the voters {sorted(quorum)}")
    settings: dict[str, str] = {
        "node.id": str(node_id),
        "process.roles": "broker,controller",
        "listeners": (
            f"PLAINTEXT://0.0.0.0:{CLIENT_PORT},BROKER://0.0.0.0:{_BROKER_PORT},"
            f"CONTROLLER://0.0.0.0:{_CONTROLLER_PORT}"
        ),
        "advertised.listeners": (
            f"PLAINTEXT://127.0.0.1:{host_port},BROKER://{hostname}:{_BROKER_PORT}"
        ),
        "inter.broker.listener.name": "BROKER",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": (
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT"
        ),
        # Static voters: the official image formats without --standalone.
        "controller.quorum.voters": ",".join(
            f"{nid}@{name}:{_CONTROLLER_PORT}" for nid, name in sorted(quorum.items())
        ),
        "log.dirs": _DATA_DIR,
    }
    settings.update(FAST_TEST_DEFAULTS)
    settings.update(internal_topic_settings(len(quorum)))
    if overrides:
        settings.update({str(k): str(v) for k, v in overrides.items()})
    env = {_env_key(k): v for k, v in settings.items()}
    clash = _JVM_VARIABLES.intersection(env)
    if clash:
        raise ValueError(f"settings {sorted(clash)} would be read as JVM options by the image")
    heap, performance = _split_jvm_options(
        DEFAULT_JVM_OPTIONS if jvm_options is None else jvm_options
    )
    env["KAFKA_HEAP_OPTS"] = heap
    env["KAFKA_JVM_PERFORMANCE_OPTS"] = performance
    env["CLUSTER_ID"] = cluster_id or generate_cluster_id()
    return env


# -- the engine --------------------------------------------------------------------------


def _docker_client() -> Any:
    """Return a docker-py client of the engine ``DOCKER_HOST`` names, after a ping.

    Raises:
        HarnessError: testcontainers is not installed, or no engine answers.
    """
    try:
        docker = importlib.import_module("docker")
        importlib.import_module("testcontainers.core.container")
    except ImportError as exc:
        raise HarnessError(
            "the testcontainers backend needs the `testcontainers` package "
            "(pip install 'kgroup[test]')"
        ) from exc
    where = os.environ.get("DOCKER_HOST") or "the default socket (DOCKER_HOST is not set)"
    try:
        client: Any = docker.from_env()
        client.ping()
    except Exception as exc:
        raise HarnessError(
            f"the testcontainers backend needs a container engine, and none is reachable at "
            f"{where}: {exc}. {_PREPARE_HINT}"
        ) from exc
    return client


def _ensure_image(client: Any, image: str) -> None:
    """Make sure ``image`` is present, pulling it if not.

    Raises:
        HarnessError: absent and the pull failed (no registry access, unknown tag).
    """
    errors = importlib.import_module("docker.errors")
    try:
        client.images.get(image)
        return
    except errors.ImageNotFound:
        pass
    _log.info("pulling %s", image)
    try:
        client.images.pull(image)
    except Exception as exc:
        raise HarnessError(
            f"the image {image} is not present and pulling it failed: {exc}. Where no registry "
            f"is reachable, `.ci/container-engine` builds it locally (Kafka "
            f"{DEFAULT_KAFKA_VERSION}); or name an image you have with KGROUP_KAFKA_IMAGE."
        ) from exc


def _engine_image_name(image: str) -> str:
    # testcontainers prefixes every image with TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX
    # (a registry mirror); the presence check must look for the same name.
    config = importlib.import_module("testcontainers.core.config").testcontainers_config
    return f"{config.hub_image_name_prefix}{image}"


def _check_reaper(client: Any) -> None:
    # testcontainers starts its reaper (ryuk) first, from an image that must be
    # pulled; where that is impossible its error says nothing about why.
    config = importlib.import_module("testcontainers.core.config").testcontainers_config
    if config.ryuk_disabled:
        return
    errors = importlib.import_module("docker.errors")
    try:
        client.images.get(config.ryuk_image)
    except errors.ImageNotFound:
        try:
            client.images.pull(config.ryuk_image)
        except Exception as exc:
            raise HarnessError(
                f"testcontainers' reaper image {config.ryuk_image} cannot be pulled ({exc}); "
                "set TESTCONTAINERS_RYUK_DISABLED=true (kgroup removes its containers itself)"
            ) from exc


# Containers and networks of this interpreter, removed at exit: with the reaper
# disabled nothing else would.
_live: dict[str, Callable[[], None]] = {}
_live_lock = threading.Lock()


@atexit.register
def _remove_leftovers() -> None:
    with _live_lock:
        cleanups = list(_live.values())
        _live.clear()
    for cleanup in cleanups:
        with contextlib.suppress(Exception):
            cleanup()


def _logs_tail(wrapped: Any, lines: int = _TAIL_LINES) -> str:
    try:
        return str(wrapped.logs(tail=lines).decode("utf-8", "replace")).rstrip()
    except Exception as exc:  # the report must not hide the original failure
        return f"(no logs: {exc})"


# -- one node ------------------------------------------------------------------------------


class ContainerBroker(BrokerNode):
    """One Apache Kafka node (KRaft, broker and controller) in an ``apache/kafka`` container.

    Use it as a context manager, or call :meth:`start` and :meth:`close`::

        with ContainerBroker(overrides={"num.partitions": "3"}) as broker:
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers})

    The same operations as :class:`~kgroup.testing.KafkaBroker`: :meth:`stop`
    (SIGTERM, a controlled shutdown), :meth:`kill` (SIGKILL), :meth:`restart`
    (same container: same storage, same host port), :meth:`close` (the
    container is removed). Settings are :data:`FAST_TEST_DEFAULTS` updated
    with ``overrides``.

    Args:
        overrides: broker settings replacing the defaults.
        image: default ``$KGROUP_KAFKA_IMAGE`` or ``apache/kafka:4.4.0``.
        node_id: the ``node.id``.
        startup_timeout: seconds a start may take until the broker answers.
        stop_timeout: seconds :meth:`stop` waits before the engine kills.
        jvm_options: replaces :data:`~kgroup.testing.DEFAULT_JVM_OPTIONS`.

    The first :meth:`start` creates the container; it raises
    :class:`~kgroup.errors.HarnessError` when testcontainers is missing, no
    engine answers, or the image is absent and cannot be pulled.
    """

    _cluster_kind = "ContainerCluster"
    _logger = _log

    def __init__(
        self,
        overrides: Mapping[str, str] | None = None,
        *,
        image: str | None = None,
        node_id: int = 1,
        startup_timeout: float = 180.0,
        stop_timeout: float = 30.0,
        jvm_options: Sequence[str] | None = None,
    ) -> None:
        super().__init__(
            overrides,
            node_id=node_id,
            startup_timeout=startup_timeout,
            stop_timeout=stop_timeout,
        )
        self.image = image or default_image()
        self._jvm_options = tuple(jvm_options) if jvm_options is not None else None
        self._port: int | None = None
        self._container: Any = None  # testcontainers' DockerContainer
        self._name: str | None = None
        # Set by ContainerCluster: the network, this node's name on it, the voters.
        self._network: Any = None
        self._hostname = "localhost"
        self._voters: dict[int, str] | None = None
        self._cluster_id: str | None = None

    # -- public view -----------------------------------------------------------------

    @property
    def state(self) -> NodeState:
        """Where the broker is in its lifecycle (a container that exited is ``STOPPED``)."""
        with self._lock:
            if self._state is NodeState.RUNNING and not self._running():
                _log.warning("container of node %d exited by itself", self._node_id)
                self._state = NodeState.STOPPED
            return self._state

    @property
    def port(self) -> int:
        """The host port of the client listener (known after the first start)."""
        if self._port is None:
            raise HarnessError("the container broker has no port before its first start")
        return self._port

    @property
    def container_id(self) -> str | None:
        """The container's id once created, else ``None``."""
        return None if self._container is None else str(self._wrapped().id)

    def log_tail(self, lines: int = _TAIL_LINES) -> str:
        """Return the last ``lines`` lines of the container's output (all its runs)."""
        if self._container is None:
            return "(no container)"
        return _logs_tail(self._wrapped(), lines)

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self._port is not None else "no port yet"
        return f"<ContainerBroker node {self._node_id} {self._state.value} {where} {self.image}>"

    # -- lifecycle -------------------------------------------------------------------

    def stop(self, timeout: float | None = None) -> None:
        """Stop the container gracefully (SIGTERM: controlled shutdown), SIGKILL after ``timeout``.

        Storage and host port are kept for :meth:`start` / :meth:`restart`.
        """
        with self._lock:
            if self._container is None or self._state is not NodeState.RUNNING:
                return
            wait = self.stop_timeout if timeout is None else timeout
            _log.info("node %d: stopping its container", self._node_id)
            self._wrapped().stop(timeout=max(1, round(wait)))
            self._state = NodeState.STOPPED

    def kill(self) -> None:
        """Kill the container's broker at once (SIGKILL), like a crash."""
        with self._lock:
            if self._container is None or self._state is not NodeState.RUNNING:
                return
            _log.info("node %d: killing its container", self._node_id)
            errors = importlib.import_module("docker.errors")
            # A container that exited meanwhile cannot be killed; it is stopped all the same.
            with contextlib.suppress(errors.APIError):
                self._wrapped().kill()
            self._wait_exited()
            self._state = NodeState.STOPPED

    def close(self) -> None:
        """Remove the container (killed: nothing in it needs to be consistent)."""
        with self._lock:
            if self._state is NodeState.CLOSED:
                return
            self._state = NodeState.CLOSED
            self._remove()

    # -- steps, also driven by ContainerCluster ----------------------------------------

    def _client_port(self) -> int:
        return self.port

    def _first_start(self) -> None:
        self._create_and_launch()
        self._await_ready(time.monotonic() + self.startup_timeout)

    def _wrapped(self) -> Any:
        return self._container.get_wrapped_container()

    def _running(self) -> bool:
        if self._container is None:
            return False
        wrapped = self._wrapped()
        try:
            wrapped.reload()
        except Exception:
            return False
        return str(wrapped.status) == "running"

    def _environment(self, port: int) -> dict[str, str]:
        return container_environment(
            port,
            self._overrides,
            cluster_id=self._cluster_id,
            node_id=self._node_id,
            hostname=self._hostname,
            voters=self._voters,
            jvm_options=self._jvm_options,
        )

    def _create_and_launch(self) -> None:
        client = _docker_client()
        _ensure_image(client, _engine_image_name(self.image))
        _check_reaper(client)
        if self._cluster_id is None:
            self._cluster_id = generate_cluster_id()
        container_module = importlib.import_module("testcontainers.core.container")
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            port = pick_free_ports(1)[0]
            name = f"kgroup-kafka-{self._node_id}-{uuid.uuid4().hex[:8]}"
            container: Any = container_module.DockerContainer(
                self.image, env=self._environment(port), name=name
            )
            # Published on the loopback interface only: a test broker has no
            # business being reachable from other machines. testcontainers'
            # with_bind_ports() cannot name a host address; docker-py's
            # (address, port) form can, and testcontainers passes it through.
            container.ports[f"{CLIENT_PORT}/tcp"] = ("127.0.0.1", port)
            if self._network is not None:
                container.with_network(self._network)
                container.with_network_aliases(self._hostname)
            _log.info(
                "node %d: starting %s as %s on 127.0.0.1:%d", self._node_id, self.image, name, port
            )
            self._launched_at = time.monotonic()
            try:
                container.start()
            except Exception as exc:
                # The container may exist (created, not started): remove it.
                with contextlib.suppress(Exception):
                    container.stop()
                if "address already in use" in str(exc).lower() and attempt < _PORT_ATTEMPTS:
                    _log.warning("node %d: port %d was taken; retrying", self._node_id, port)
                    continue
                raise BrokerStartError(
                    f"the engine could not start a container of {self.image} for node "
                    f"{self._node_id}: {exc}"
                ) from exc
            self._container = container
            self._name = name
            self._port = port
            with _live_lock:
                _live[name] = container.stop
            self._state = NodeState.RUNNING
            return
        raise AssertionError("unreachable")  # pragma: no cover

    def _launch(self) -> None:
        _log.info("node %d: starting its container again", self._node_id)
        self._launched_at = time.monotonic()
        try:
            self._wrapped().start()
        except Exception as exc:
            raise BrokerStartError(
                f"the engine could not restart the container of node {self._node_id}: {exc}\n"
                f"last lines of its log:\n{self.log_tail()}"
            ) from exc
        self._state = NodeState.RUNNING

    def _check_alive(self) -> None:
        if self._running():
            return
        self._state = NodeState.STOPPED
        wrapped = self._wrapped()
        code = wrapped.attrs.get("State", {}).get("ExitCode")
        raise BrokerStartError(
            f"{self._describe()} exited with code {code} during start-up; {self._failure_report()}"
        )

    def _failure_report(self) -> str:
        wrapped = self._wrapped()
        try:
            lines = wrapped.logs(tail=2000).decode("utf-8", "replace").splitlines()
        except Exception:
            lines = []
        return f"{failure_summary(lines)}last lines of its log:\n{_logs_tail(wrapped)}"

    def _describe(self) -> str:
        return f"the Kafka container of node {self._node_id} ({self.image})"

    def _abandon_start(self) -> None:
        with contextlib.suppress(Exception):
            self.kill()

    def _wait_exited(self, timeout: float = 30.0) -> None:
        # kill() returns once the signal is sent; a restart must not race the exit.
        with contextlib.suppress(Exception):
            self._wrapped().wait(timeout=timeout)

    def _remove(self) -> None:
        container, self._container = self._container, None
        if container is None:
            return
        name = self._name
        with _live_lock:
            _live.pop(str(name), None)
        try:
            container.stop()  # testcontainers' stop removes the container (forced)
        except Exception as exc:
            _log.warning("could not remove container %s: %s", name, exc)


# -- several nodes ---------------------------------------------------------------------------


class ContainerCluster(NodeCluster[ContainerBroker]):
    """Several :class:`ContainerBroker` nodes forming one cluster on a private network.

    Every node runs broker and controller (node ids ``1..nodes``, a static
    quorum); the nodes find each other by name on a container network made
    for the cluster, and clients on the host reach each at its own
    ``127.0.0.1:<port>``. Internal topics get replication factor
    ``min(3, nodes)`` and min ISR ``min(2, nodes)``. Drive single nodes
    through :attr:`nodes` or :meth:`node`, as with
    :class:`~kgroup.testing.KafkaCluster`::

        with ContainerCluster(nodes=3) as cluster:
            cluster.node(2).kill()
            cluster.node(2).restart()
    """

    def __init__(
        self,
        nodes: int = 3,
        overrides: Mapping[str, str] | None = None,
        *,
        image: str | None = None,
        startup_timeout: float = 240.0,
        stop_timeout: float = 30.0,
        jvm_options: Sequence[str] | None = None,
    ) -> None:
        self._network: Any = None
        self._cluster_id = generate_cluster_id()
        suffix = uuid.uuid4().hex[:6]
        voters = {node_id: f"kafka-{node_id}-{suffix}" for node_id in range(1, nodes + 1)}

        def make_node(node_id: int) -> ContainerBroker:
            node = ContainerBroker(
                overrides,
                image=image,
                node_id=node_id,
                startup_timeout=startup_timeout,
                stop_timeout=stop_timeout,
                jvm_options=jvm_options,
            )
            node._hostname = voters[node_id]
            node._voters = voters
            node._cluster_id = self._cluster_id
            return node

        super().__init__(nodes, startup_timeout, make_node)

    @property
    def image(self) -> str:
        """The image every node runs."""
        return self.nodes[0].image

    @property
    def cluster_id(self) -> str:
        """The KRaft cluster id."""
        return self._cluster_id

    def start(self) -> Self:
        """Start every node; return once all answer and see each other.

        Nodes that run are left alone; stopped ones are started again.

        Raises:
            HarnessError, BrokerStartError: as :meth:`ContainerBroker.start`;
                on a failed first start every container is removed.
        """
        self._check_open()
        deadline = time.monotonic() + self.startup_timeout
        if self._network is None:
            try:
                self._first_start(deadline)
            except BaseException:
                # Its nodes are closed now: a failed cluster is not started again.
                self._closed = True
                self._teardown()
                raise
            self._await_membership(deadline)
        else:
            self._start_stopped_nodes(deadline)
        return self

    def _first_start(self, deadline: float) -> None:
        client = _docker_client()
        _ensure_image(client, _engine_image_name(self.image))
        network_module = importlib.import_module("testcontainers.core.network")
        network: Any = network_module.Network()
        network.create()
        self._network = network
        with _live_lock:
            _live[f"network-{network.name}"] = network.remove
        for node in self.nodes:
            node._network = network
            node._create_and_launch()
        for node in self.nodes:
            node._await_ready(deadline, self._check_all_alive)

    def stop(self, timeout: float | None = None) -> None:
        """Stop every node gracefully (storage kept)."""
        # Concurrently: a controlled shutdown of the last nodes waits for a
        # quorum that sequential stops would have taken away.
        with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:
            futures = [pool.submit(node.stop, timeout) for node in self.nodes]
        for future in futures:
            future.result()  # re-raise a node's failure here

    def close(self) -> None:
        """Remove every container and the network."""
        if self._closed:
            return
        self._closed = True
        self._teardown()

    def _teardown(self) -> None:
        for node in self.nodes:
            node.close()
        network, self._network = self._network, None
        if network is not None:
            with _live_lock:
                _live.pop(f"network-{network.name}", None)
            try:
                network.remove()
            except Exception as exc:
                _log.warning("could not remove network %s: %s", network.name, exc)

    def __repr__(self) -> str:
        states = [n._state.value for n in self.nodes]
        return f"<ContainerCluster {len(self.nodes)} nodes {states} {self.image}>"
