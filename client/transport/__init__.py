"""The transport layer (anyio; asyncio and trio): connections, the cluster client, backoff.

- :class:`KafkaClient`: bootstrap, pooled connections by node id, metadata cache,
  group coordinator lookup and rediscovery.
- :class:`BrokerConnection` / :func:`connect`: one broker connection with
  correlation-id dispatch, timeouts and the ApiVersions handshake.
- :class:`Backoff`: Kafka's exponential backoff with jitter (:class:`kgroup.types.Backoff`,
  re-exported).
- :class:`SecurityConfig` / :func:`open_stream` / :data:`Authenticator`: the
  seam for TLS and SASL (only PLAINTEXT today).
"""

from kgroup.transport.backoff import Backoff
from kgroup.transport.client import KafkaClient, RequestBuilder, parse_bootstrap_servers
from kgroup.transport.connection import BrokerConnection, ConnectionState, connect
from kgroup.transport.metadata import BrokerAddress, ClusterMetadata, PartitionInfo, TopicInfo
from kgroup.transport.security import (
    Authenticator,
    SecurityConfig,
    SecurityProtocol,
    open_stream,
)

__all__ = [
    "Authenticator",
    "Backoff",
    "BrokerAddress",
    "BrokerConnection",
    "ClusterMetadata",
    "ConnectionState",
    "KafkaClient",
    "PartitionInfo",
    "RequestBuilder",
    "SecurityConfig",
    "SecurityProtocol",
    "TopicInfo",
    "connect",
    "open_stream",
    "parse_bootstrap_servers",
]
