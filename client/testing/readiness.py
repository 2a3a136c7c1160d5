"""Is a broker ready? Checks shared by every backend.

Ready means: the client port accepts TCP connections and the broker answers a
metadata request that lists the expected broker ids. confluent-kafka's
AdminClient asks; the harness does not depend on kgroup's own protocol layer.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Collection

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

__all__ = ["port_accepts", "wait_until_answers"]

_log = logging.getLogger("kgroup.testing.readiness")
# librdkafka reports every refused connection while a broker starts; keep that
# out of the test output but available to anyone who enables DEBUG.
_librdkafka_log = logging.getLogger("kgroup.testing.readiness.librdkafka")

_POLL = 0.1


def port_accepts(host: str, port: int, timeout: float = 1.0) -> bool:
    """Return whether a TCP connection to ``host:port`` succeeds within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _split(server: str) -> tuple[str, int]:
    host, _, port = server.rpartition(":")
    return host.strip("[]"), int(port)


def wait_until_answers(
    bootstrap_servers: str,
    *,
    deadline: float,
    expected_broker_ids: Collection[int] = (),
    check_alive: Callable[[], None] | None = None,
) -> None:
    """Block until the broker answers metadata requests (listing ``expected_broker_ids``).

    ``deadline`` is a :func:`time.monotonic` instant. ``check_alive`` is called
    between attempts and may raise to abort the wait (a broker process that
    exited).

    Raises:
        TimeoutError: not ready by the deadline; the message says what was missing.
    """
    servers = [s.strip() for s in bootstrap_servers.split(",") if s.strip()]
    last_problem = "no attempt made"
    # First the cheap check: something listens on some bootstrap port.
    while True:
        if check_alive is not None:
            check_alive()
        if any(port_accepts(*_split(s), timeout=0.5) for s in servers):
            break
        last_problem = f"nothing accepts connections on {bootstrap_servers}"
        if time.monotonic() >= deadline:
            raise TimeoutError(last_problem)
        time.sleep(_POLL)
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap_servers,
            "socket.connection.setup.timeout.ms": 2000,
            "reconnect.backoff.max.ms": 200,
        },
        logger=_librdkafka_log,
    )
    wanted = set(expected_broker_ids)
    while True:
        if check_alive is not None:
            check_alive()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(last_problem)
        try:
            metadata = admin.list_topics(timeout=max(0.5, min(3.0, remaining)))
        except KafkaException as exc:
            last_problem = f"metadata request to {bootstrap_servers} failed: {exc}"
        else:
            missing = wanted - set(metadata.brokers)
            if not missing:
                _log.debug("%s answers; brokers %s", bootstrap_servers, sorted(metadata.brokers))
                return
            last_problem = (
                f"{bootstrap_servers} answers but lists brokers {sorted(metadata.brokers)}, "
                f"not yet {sorted(missing)}"
            )
        time.sleep(_POLL)
