"""The default transport factory: how a driver opens its cluster client."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from kgroup import config_keys as keys
from kgroup.config import ConsumerConfig
from kgroup.runtime.interfaces import TransportInterface
from kgroup.transport import KafkaClient
from kgroup.types import Backoff

__all__ = ["open_kafka_client"]


def _connect_timeout(config: ConsumerConfig) -> float:
    """Seconds to open a connection (TCP and the ApiVersions handshake).

    ``socket.connection.setup.timeout.ms`` (librdkafka's and the Java client's
    key; the data plane gets it too), and never longer than
    ``request.timeout.ms``: a bootstrap server that never answers must fail
    within the timeouts the application configured.
    """
    setup = keys.SOCKET_CONNECTION_SETUP_TIMEOUT_MS.read(config.passthrough) / 1000
    return min(setup, config.request_timeout_ms / 1000)


def open_kafka_client(config: ConsumerConfig) -> AbstractAsyncContextManager[TransportInterface]:
    """The default :data:`~kgroup.runtime.interfaces.TransportFactory`: a KafkaClient."""
    return KafkaClient(
        config.bootstrap_servers,
        client_id=config.client_id,
        request_timeout=config.request_timeout_ms / 1000,
        connect_timeout=_connect_timeout(config),
        backoff=Backoff.from_ms(config.retry_backoff_ms, config.retry_backoff_max_ms),
        security=config.security,
    )
