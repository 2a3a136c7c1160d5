"""Opening the byte stream to a broker: the seam for TLS and SASL.

Today only ``PLAINTEXT`` is implemented. The two places later security work
plugs in:

- :func:`open_stream` turns ``(host, port, security)`` into a byte stream; TLS
  wraps the TCP stream here (``anyio.connect_tcp(..., tls=True, ssl_context=...)``).
- An :data:`Authenticator` runs on every new connection after ApiVersions and
  before any other request; SASL (SaslHandshake + SaslAuthenticate) is one.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from kgroup.errors import ConfigError, KafkaConnectionError

if TYPE_CHECKING:
    from kgroup.transport.connection import BrokerConnection

__all__ = ["Authenticator", "SecurityConfig", "SecurityProtocol", "open_stream"]


class SecurityProtocol(enum.Enum):
    """Kafka's ``security.protocol`` values."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    """How to secure connections to brokers. Only ``PLAINTEXT`` is implemented so far."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> SecurityConfig:
        """From Kafka's ``security.protocol`` key (default ``PLAINTEXT``).

        Raises:
            ConfigError: the value is not a Kafka security protocol.
        """
        value = config.get("security.protocol", "PLAINTEXT")
        try:
            return cls(SecurityProtocol(str(value).upper()))
        except ValueError:
            choices = ", ".join(p.value for p in SecurityProtocol)
            raise ConfigError(
                f"security.protocol must be one of {choices}, got {value!r}"
            ) from None

    def require_supported(self) -> None:
        """Raise unless kgroup can connect with this configuration.

        Raises:
            ConfigError: a protocol other than PLAINTEXT; kgroup does not speak it yet.
        """
        if self.protocol is not SecurityProtocol.PLAINTEXT:
            raise ConfigError(
                f"security.protocol={self.protocol.value} is not supported by kgroup yet; "
                "only PLAINTEXT is"
            )


Authenticator = Callable[["BrokerConnection"], Awaitable[None]]
"""A hook run on each new connection after ApiVersions, before it is used.

It may send requests on the connection (``await connection.request(...)``);
raising fails the connection attempt.
"""


async def open_stream(
    host: str, port: int, security: SecurityConfig, *, timeout: float
) -> anyio.abc.ByteStream:
    """Open a byte stream to ``host:port`` secured as ``security`` says.

    Raises:
        ConfigError: the security protocol is not supported.
        KafkaConnectionError: the connection could not be made within ``timeout``.
    """
    security.require_supported()
    try:
        with anyio.fail_after(timeout):
            return await anyio.connect_tcp(host, port)
    except TimeoutError:
        raise KafkaConnectionError(
            f"connecting to {host}:{port} timed out after {timeout}s"
        ) from None
    except OSError as exc:
        raise KafkaConnectionError(f"connecting to {host}:{port} failed: {exc}") from exc
