"""The transport layer (anyio; asyncio and trio): connections, the cluster client, backoff.

- :class:`KafkaClient`: bootstrap, pooled connections by node id, metadata cache,
  group coordinator lookup and rediscovery.
- :class:`BrokerConnection` / :func:`connect`: one broker connection with
  correlation-id dispatch, timeouts and the ApiVersions handshake.
- :class:`Backoff`: Kafka's exponential backoff with jitter (:class:`kgroup.types.Backoff`,
  re-exported).
- :class:`SecurityConfig` (from :mod:`kgroup.config_security`) / :func:`open_stream` /
  :data:`Authenticator`: TLS
  (stdlib ``ssl``) and SASL (:class:`SaslAuthenticator`: PLAIN, SCRAM-SHA-256/512,
  OAUTHBEARER with ``oauth_cb`` or OIDC) on every connection; :class:`Secret`
  hides secrets from ``repr``/``str``.
"""

from kgroup.config_security import Secret, SecurityConfig, SecurityProtocol
from kgroup.transport.backoff import Backoff
from kgroup.transport.client import KafkaClient, RequestBuilder, parse_bootstrap_servers
from kgroup.transport.connection import BrokerConnection, ConnectionState, connect
from kgroup.transport.metadata import BrokerAddress, ClusterMetadata, PartitionInfo, TopicInfo
from kgroup.transport.sasl import SaslAuthenticator
from kgroup.transport.security import Authenticator, open_stream

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
    "SaslAuthenticator",
    "Secret",
    "SecurityConfig",
    "SecurityProtocol",
    "TopicInfo",
    "connect",
    "open_stream",
    "parse_bootstrap_servers",
]
