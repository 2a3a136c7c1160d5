"""Where the broker comes from: a local JVM, a container, or an external cluster.

``KGROUP_BROKER_BACKEND`` picks the backend:

- ``process`` (default): :class:`~kgroup.testing.KafkaBroker`, a local JVM.
- ``testcontainers``: :class:`~kgroup.testing.containers.ContainerBroker` (or
  :class:`~kgroup.testing.containers.ContainerCluster`), the ``apache/kafka``
  image (``KGROUP_KAFKA_IMAGE`` overrides the image) through testcontainers;
  see :mod:`kgroup.testing.containers`.
- ``external``: :class:`ExternalBroker` at ``KAFKA_BOOTSTRAP_SERVERS``; also
  chosen when ``KAFKA_BOOTSTRAP_SERVERS`` is set and no backend is named.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Protocol, Self

from kgroup.errors import BrokerStartError, HarnessError
from kgroup.testing._lifecycle import StartsOnEnter
from kgroup.testing.containers import (
    ContainerBroker,
    ContainerCluster,
    container_environment,
    default_image,
)
from kgroup.testing.process import KafkaBroker, KafkaCluster
from kgroup.testing.readiness import wait_until_answers

__all__ = [
    "Broker",
    "BrokerBackend",
    "ContainerBroker",
    "ContainerCluster",
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


class ExternalBroker(StartsOnEnter):
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
    :class:`~kgroup.testing.KafkaCluster` (process backend) or a
    :class:`~kgroup.testing.containers.ContainerCluster` (testcontainers). For
    testcontainers the image is ``$KGROUP_KAFKA_IMAGE``, else
    ``apache/kafka:<version>`` (default the pinned release). ``overrides`` and
    ``version`` do not apply to an external broker (a warning is logged if given).

    Raises:
        HarnessError: unknown backend, or a combination the backend cannot do.
    """
    env = os.environ if environ is None else environ
    chosen = BrokerBackend(backend) if backend is not None else backend_from_env(env)
    if chosen is BrokerBackend.EXTERNAL:
        if nodes != 1:
            raise HarnessError(
                f"a {nodes}-node cluster needs the process backend or testcontainers, "
                "not an external broker"
            )
        if overrides:
            _log.warning("broker overrides are ignored for an external broker: %s", overrides)
        return ExternalBroker(env.get("KAFKA_BOOTSTRAP_SERVERS"))
    if chosen is BrokerBackend.TESTCONTAINERS:
        image = default_image(version, env)
        if nodes == 1:
            return ContainerBroker(overrides, image=image)
        return ContainerCluster(nodes, overrides, image=image)
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
