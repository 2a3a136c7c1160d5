"""Where the broker comes from: a local JVM, a container, or an external cluster.

``KGROUP_BROKER_BACKEND`` picks the backend:

- ``process`` (default): :class:`~kgroup.testing.KafkaBroker`, a local JVM.
- ``testcontainers``: :class:`ContainerBroker`, the ``apache/kafka`` image
  (``KGROUP_KAFKA_IMAGE`` overrides the image) through testcontainers.
- ``external``: :class:`ExternalBroker` at ``KAFKA_BOOTSTRAP_SERVERS``; also
  chosen when ``KAFKA_BOOTSTRAP_SERVERS`` is set and no backend is named.
"""

from __future__ import annotations

import enum
import importlib
import logging
import os
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Protocol, Self

from kgroup.errors import BrokerStartError, HarnessError
from kgroup.testing.config import FAST_TEST_DEFAULTS, generate_cluster_id, pick_free_ports
from kgroup.testing.process import KafkaBroker, KafkaCluster
from kgroup.testing.readiness import wait_until_answers
from kgroup.testing.runtime import DEFAULT_KAFKA_VERSION

__all__ = [
    "Broker",
    "BrokerBackend",
    "ContainerBroker",
    "ExternalBroker",
    "backend_from_env",
    "broker_from_env",
    "container_environment",
    "start_broker",
]

_log = logging.getLogger("kgroup.testing.backends")


class Broker(Protocol):
    """What every backend offers. Managed backends implement all of it;
    :class:`ExternalBroker` raises :class:`~kgroup.errors.HarnessError` from
    ``stop``/``kill``/``restart``."""

    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated ``host:port`` list for clients."""
        ...

    def start(self) -> Self:
        """Start (or, for external, wait for) the broker; return once it answers."""
        ...

    def stop(self, timeout: float | None = None) -> None:
        """Stop gracefully; storage is kept for :meth:`restart`."""
        ...

    def kill(self) -> None:
        """Stop abruptly."""
        ...

    def restart(self) -> None:
        """Stop and start again with the same storage and address."""
        ...

    def close(self) -> None:
        """Stop for good and release everything."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class BrokerBackend(enum.Enum):
    """The values of ``KGROUP_BROKER_BACKEND``."""

    PROCESS = "process"
    TESTCONTAINERS = "testcontainers"
    EXTERNAL = "external"


def backend_from_env(environ: Mapping[str, str] | None = None) -> BrokerBackend:
    """Return the backend ``KGROUP_BROKER_BACKEND`` names.

    Unset: ``external`` if ``KAFKA_BOOTSTRAP_SERVERS`` is set, else ``process``.

    Raises:
        HarnessError: an unknown backend name.
    """
    env = os.environ if environ is None else environ
    name = env.get("KGROUP_BROKER_BACKEND", "").strip().lower()
    if not name:
        if env.get("KAFKA_BOOTSTRAP_SERVERS", "").strip():
            return BrokerBackend.EXTERNAL
        return BrokerBackend.PROCESS
    try:
        return BrokerBackend(name)
    except ValueError:
        choices = ", ".join(b.value for b in BrokerBackend)
        raise HarnessError(
            f"KGROUP_BROKER_BACKEND={name!r} is not a backend; choose one of {choices}"
        ) from None


class ExternalBroker:
    """A broker someone else runs, reached at ``bootstrap_servers``.

    :meth:`start` only waits until it answers; :meth:`stop`, :meth:`kill` and
    :meth:`restart` raise :class:`~kgroup.errors.HarnessError` because they
    need a broker the harness manages.
    """

    node_id: int | None = None
    log_path: None = None

    def __init__(self, bootstrap_servers: str | None = None, *, startup_timeout: float = 60.0):
        servers = bootstrap_servers or os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "")
        if not servers.strip():
            raise HarnessError(
                "the external backend needs KAFKA_BOOTSTRAP_SERVERS (host:port[,host:port...])"
            )
        self._bootstrap_servers = servers.strip()
        self.startup_timeout = startup_timeout

    @property
    def bootstrap_servers(self) -> str:
        """The bootstrap servers as given."""
        return self._bootstrap_servers

    def start(self) -> Self:
        """Wait until the broker answers metadata requests.

        Raises:
            BrokerStartError: it did not answer within ``startup_timeout``.
        """
        try:
            wait_until_answers(
                self._bootstrap_servers, deadline=time.monotonic() + self.startup_timeout
            )
        except TimeoutError as exc:
            raise BrokerStartError(
                f"the external broker at {self._bootstrap_servers} (KAFKA_BOOTSTRAP_SERVERS) "
                f"did not answer within {self.startup_timeout:.0f} s: {exc}"
            ) from None
        return self

    def _unmanaged(self, operation: str) -> HarnessError:
        return HarnessError(
            f"{operation}() needs a managed broker, but this one is external "
            f"({self._bootstrap_servers}); use KGROUP_BROKER_BACKEND=process or testcontainers"
        )

    def stop(self, timeout: float | None = None) -> None:
        """Raise :class:`~kgroup.errors.HarnessError`: an external broker is not ours to stop."""
        raise self._unmanaged("stop")

    def kill(self) -> None:
        """Raise :class:`~kgroup.errors.HarnessError`: an external broker is not ours to kill."""
        raise self._unmanaged("kill")

    def restart(self) -> None:
        """Raise :class:`~kgroup.errors.HarnessError`: an external broker is not ours."""
        raise self._unmanaged("restart")

    def close(self) -> None:
        """Do nothing: the broker keeps running."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_CLIENT_PORT = 9092
_CONTROLLER_PORT = 9093
_BROKER_PORT = 9094


def _env_key(key: str) -> str:
    # The apache/kafka image turns KAFKA_FOO_BAR into foo.bar; a literal "_" is
    # written "__" and a "-" is written "___".
    return "KAFKA_" + key.replace("_", "__").replace("-", "___").replace(".", "_").upper()


def container_environment(
    host_port: int,
    overrides: Mapping[str, str] | None = None,
    *,
    cluster_id: str | None = None,
) -> dict[str, str]:
    """Return the environment that configures an ``apache/kafka`` container for tests.

    A single KRaft node in combined mode. Clients reach it on the host at
    ``127.0.0.1:<host_port>`` (mapped to the container's 9092); the broker
    talks to itself on a separate internal listener. Settings are
    :data:`FAST_TEST_DEFAULTS` updated with ``overrides``, in the image's
    ``KAFKA_*`` convention.
    """
    settings: dict[str, str] = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "listeners": (
            f"PLAINTEXT://0.0.0.0:{_CLIENT_PORT},BROKER://0.0.0.0:{_BROKER_PORT},"
            f"CONTROLLER://0.0.0.0:{_CONTROLLER_PORT}"
        ),
        "advertised.listeners": (
            f"PLAINTEXT://127.0.0.1:{host_port},BROKER://localhost:{_BROKER_PORT}"
        ),
        "inter.broker.listener.name": "BROKER",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": (
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT"
        ),
        "controller.quorum.voters": f"1@localhost:{_CONTROLLER_PORT}",
    }
    settings.update(FAST_TEST_DEFAULTS)
    if overrides:
        settings.update({str(k): str(v) for k, v in overrides.items()})
    env = {_env_key(k): v for k, v in settings.items()}
    env["CLUSTER_ID"] = cluster_id or generate_cluster_id()
    return env


def _require_container_engine() -> None:
    try:
        docker = importlib.import_module("docker")
    except ImportError as exc:
        raise HarnessError(
            "the testcontainers backend needs the `testcontainers` package "
            "(pip install 'kgroup[test]')"
        ) from exc
    try:
        client: Any = docker.from_env()
        client.ping()
    except Exception as exc:
        raise HarnessError(
            "the testcontainers backend needs a container engine (Docker, or Podman with "
            f"DOCKER_HOST pointing at its socket), and none is reachable: {exc}"
        ) from exc


class ContainerBroker:
    """A single-node broker in an ``apache/kafka`` container, through testcontainers.

    The host port is chosen free and bound to the container's client port, so
    the advertised address stays valid across :meth:`restart` (the container
    and its storage are reused).

    Args:
        overrides: broker settings replacing :data:`FAST_TEST_DEFAULTS`.
        image: default ``$KGROUP_KAFKA_IMAGE`` or ``apache/kafka:<DEFAULT_KAFKA_VERSION>``.
        startup_timeout: seconds until the broker must answer.
        stop_timeout: seconds a graceful stop may take.
    """

    node_id = 1

    def __init__(
        self,
        overrides: Mapping[str, str] | None = None,
        *,
        image: str | None = None,
        startup_timeout: float = 180.0,
        stop_timeout: float = 30.0,
    ) -> None:
        self._overrides = dict(overrides or {})
        self.image = (
            image or os.environ.get("KGROUP_KAFKA_IMAGE") or f"apache/kafka:{DEFAULT_KAFKA_VERSION}"
        )
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self._port: int | None = None
        self._container: Any = None

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:<host port>`` (known after start)."""
        if self._port is None:
            raise HarnessError("the container broker has no port before start()")
        return f"127.0.0.1:{self._port}"

    def start(self) -> Self:
        """Create and start the container (or start it again); return once it answers.

        Raises:
            HarnessError: no testcontainers package or no reachable container engine.
            BrokerStartError: the broker did not answer within ``startup_timeout``.
        """
        if self._container is None:
            _require_container_engine()
            container_module = importlib.import_module("testcontainers.core.container")
            self._port = pick_free_ports(1)[0]
            container: Any = container_module.DockerContainer(self.image)
            container.with_bind_ports(_CLIENT_PORT, self._port)
            for key, value in container_environment(self._port, self._overrides).items():
                container.with_env(key, value)
            _log.info("starting %s on %s", self.image, self.bootstrap_servers)
            container.start()
            self._container = container
        else:
            self._wrapped().start()
        self._await_ready()
        return self

    def _wrapped(self) -> Any:
        return self._container.get_wrapped_container()

    def _check_alive(self) -> None:
        wrapped = self._wrapped()
        wrapped.reload()
        if wrapped.status in {"exited", "dead"}:
            logs = wrapped.logs(tail=40).decode("utf-8", "replace")
            raise BrokerStartError(f"the Kafka container exited during start-up:\n{logs}")

    def _await_ready(self) -> None:
        try:
            wait_until_answers(
                self.bootstrap_servers,
                deadline=time.monotonic() + self.startup_timeout,
                expected_broker_ids=(1,),
                check_alive=self._check_alive,
            )
        except TimeoutError as exc:
            logs = self._wrapped().logs(tail=40).decode("utf-8", "replace")
            raise BrokerStartError(
                f"the Kafka container was not ready within {self.startup_timeout:.0f} s "
                f"({exc}):\n{logs}"
            ) from None

    def stop(self, timeout: float | None = None) -> None:
        """Stop the container gracefully; its storage stays for :meth:`restart`."""
        if self._container is not None:
            wait = self.stop_timeout if timeout is None else timeout
            self._wrapped().stop(timeout=int(wait))

    def kill(self) -> None:
        """Kill the container (SIGKILL)."""
        if self._container is not None:
            self._wrapped().kill()

    def restart(self) -> None:
        """Stop the container and start it again; same storage, same host port."""
        if self._container is None:
            raise HarnessError("the container broker was never started; call start() first")
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop and remove the container."""
        if self._container is not None:
            container, self._container = self._container, None
            container.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def broker_from_env(
    overrides: Mapping[str, str] | None = None,
    *,
    nodes: int = 1,
    version: str | None = None,
    backend: BrokerBackend | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Broker:
    """Return a broker (not yet started) of the backend the environment selects.

    ``backend`` overrides ``KGROUP_BROKER_BACKEND``. ``nodes > 1`` gives a
    :class:`~kgroup.testing.KafkaCluster` and needs the process backend.
    ``overrides`` and ``version`` do not apply to an external broker (a
    warning is logged if given).

    Raises:
        HarnessError: unknown backend, or a combination the backend cannot do.
    """
    env = os.environ if environ is None else environ
    chosen = BrokerBackend(backend) if backend is not None else backend_from_env(env)
    if nodes != 1 and chosen is not BrokerBackend.PROCESS:
        raise HarnessError(f"a {nodes}-node cluster needs the process backend, not {chosen.value}")
    if chosen is BrokerBackend.EXTERNAL:
        if overrides:
            _log.warning("broker overrides are ignored for an external broker: %s", overrides)
        return ExternalBroker(env.get("KAFKA_BOOTSTRAP_SERVERS"))
    if chosen is BrokerBackend.TESTCONTAINERS:
        image = env.get("KGROUP_KAFKA_IMAGE") or (f"apache/kafka:{version}" if version else None)
        return ContainerBroker(overrides, image=image)
    if nodes == 1:
        return KafkaBroker(overrides, version=version)
    return KafkaCluster(nodes, overrides, version=version)


def start_broker(
    overrides: Mapping[str, str] | None = None,
    *,
    nodes: int = 1,
    version: str | None = None,
    backend: BrokerBackend | str | None = None,
) -> Broker:
    """Like :func:`broker_from_env`, then start it; the caller must ``close()`` it."""
    broker = broker_from_env(overrides, nodes=nodes, version=version, backend=backend)
    broker.start()
    return broker
