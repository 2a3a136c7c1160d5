"""How kgroup secures its own connections: TLS streams, the SASL hook, TLS failures explained.

The settings themselves are :class:`kgroup.config_security.SecurityConfig`,
read once from the consumer's dict and shared with the data plane.

- :func:`open_stream` turns ``(host, port, security)`` into a byte stream; TLS
  (the standard library's :mod:`ssl`) wraps the TCP stream here.
- An :data:`Authenticator` runs on every new connection after ApiVersions and
  before any other request; SASL (:mod:`kgroup.transport.sasl`) is one.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

import anyio
import anyio.abc
from anyio.streams.tls import TLSStream

from kgroup.config_security import SecurityConfig, SecurityProtocol, reason_of
from kgroup.errors import KafkaConnectionError, SecurityProtocolMismatchError, TlsError

if TYPE_CHECKING:
    from kgroup.transport.connection import BrokerConnection

__all__ = [
    "Authenticator",
    "client_certificate_refusal",
    "explain_tls_on_plaintext",
    "looks_like_tls",
    "open_stream",
]


Authenticator = Callable[["BrokerConnection"], Awaitable["float | None"]]
"""A hook run on each new connection after ApiVersions, before it is used.

It may send requests on the connection (``await connection.request(...)``);
raising fails the connection attempt. It returns the session lifetime in
seconds the broker granted (KIP-368), or None/0 for none: the connection runs
the hook again before the session expires.
"""

# Bytes that open a TLS record: a handshake (0x16) or an alert (0x15), TLS 1.x.
_TLS_RECORD_TYPES: Final = frozenset({0x15, 0x16})


def looks_like_tls(prefix: bytes) -> bool:
    """Whether the first bytes a broker sent are a TLS record, not a Kafka frame."""
    return len(prefix) >= 3 and prefix[0] in _TLS_RECORD_TYPES and prefix[1] == 0x03


def explain_tls_on_plaintext(
    broker: str, protocol: SecurityProtocol
) -> SecurityProtocolMismatchError:
    """The error for a plaintext client that received TLS bytes."""
    wanted = "SASL_SSL" if protocol is SecurityProtocol.SASL_PLAINTEXT else "SSL (or SASL_SSL)"
    return SecurityProtocolMismatchError(
        broker,
        protocol.value,
        f"the port answered with TLS; it is a TLS listener: set security.protocol={wanted}",
    )


async def open_stream(
    host: str,
    port: int,
    security: SecurityConfig,
    *,
    timeout: float,
    ssl_context: ssl.SSLContext | None = None,
) -> anyio.abc.ByteStream:
    """Open a byte stream to ``host:port`` secured as ``security`` says.

    ``ssl_context`` is the context to reuse (a client builds it once); one is
    built from ``security`` when it is needed and not given.

    Raises:
        ConfigError: the TLS settings do not load.
        KafkaConnectionError: the TCP connection could not be made within ``timeout``.
        TlsError: the TLS handshake failed (untrusted, mismatched or expired certificate).
        SecurityProtocolMismatchError: the port does not speak TLS.
    """
    broker = f"{host}:{port}"
    if not security.protocol.uses_tls:
        try:
            with anyio.fail_after(timeout):
                return await anyio.connect_tcp(host, port)
        except TimeoutError:
            raise KafkaConnectionError(
                f"connecting to {broker} timed out after {timeout}s"
            ) from None
        except OSError as exc:
            raise KafkaConnectionError(f"connecting to {broker} failed: {exc}") from exc
    context = ssl_context or security.create_ssl_context()
    assert context is not None
    try:
        with anyio.fail_after(timeout):
            tcp = await anyio.connect_tcp(host, port)
    except TimeoutError:
        raise KafkaConnectionError(f"connecting to {broker} timed out after {timeout}s") from None
    except OSError as exc:
        raise KafkaConnectionError(f"connecting to {broker} failed: {exc}") from exc
    try:
        with anyio.fail_after(timeout):
            # Brokers close without a TLS close_notify; that is not an attack here
            # because Kafka frames carry their own length.
            return await TLSStream.wrap(
                tcp, hostname=host, ssl_context=context, standard_compatible=False
            )
    except TimeoutError:
        await tcp.aclose()
        raise TlsError(
            broker,
            f"no TLS handshake within {timeout}s: the port may not be a TLS listener "
            "(security.protocol=PLAINTEXT or SASL_PLAINTEXT there?)",
        ) from None
    except ssl.SSLCertVerificationError as exc:
        await tcp.aclose()
        raise TlsError(broker, _verification_reason(exc, host, security)) from None
    except (ssl.SSLError, OSError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
        await tcp.aclose()
        raise _handshake_failure(broker, exc, security) from None


def _verification_reason(
    exc: ssl.SSLCertVerificationError, host: str, security: SecurityConfig
) -> str:
    code = getattr(exc, "verify_code", None)
    message = getattr(exc, "verify_message", None) or reason_of(exc)
    tls = security.tls
    ca = (
        "the configured CA (ssl.ca.location / ssl.ca.pem)"
        if tls is not None and (tls.ca_location or tls.ca_pem)
        else "the system trust store (set ssl.ca.location for a private CA)"
    )
    if code in (18, 19, 20, 21, 2):
        return f"unknown CA: the broker's certificate is not signed by {ca} ({message})"
    if code == 10:
        return f"the broker's certificate has expired ({message})"
    if code == 9:
        return f"the broker's certificate is not valid yet ({message})"
    if code in (62, 64):  # hostname, IP address mismatch
        return (
            f"hostname mismatch: the broker's certificate is not valid for {host!r} ({message}); "
            "connect with a name the certificate lists, or set "
            "ssl.endpoint.identification.algorithm=none"
        )
    return f"the broker's certificate was rejected ({message})"


def _handshake_failure(
    broker: str, exc: BaseException, security: SecurityConfig
) -> TlsError | SecurityProtocolMismatchError:
    reason = reason_of(exc)
    eof = isinstance(exc, (anyio.EndOfStream, anyio.BrokenResourceError, ssl.SSLEOFError)) or (
        "EOF" in reason.upper() or "WRONG_VERSION_NUMBER" in reason.upper()
    )
    if eof or "RECORD_LAYER" in reason.upper() or "PACKET_LENGTH" in reason.upper():
        return SecurityProtocolMismatchError(
            broker,
            security.protocol.value,
            "the broker ended the TLS handshake without answering; it is not a TLS listener "
            "(set security.protocol=PLAINTEXT or SASL_PLAINTEXT for it)",
        )
    if "CERTIFICATE_REQUIRED" in reason.upper() or "HANDSHAKE_FAILURE" in reason.upper():
        tls = security.tls
        if tls is None or not tls.has_client_certificate:
            return TlsError(
                broker,
                f"the broker requires a client certificate (mutual TLS; {reason}): set "
                "ssl.certificate.location and ssl.key.location",
            )
    if "UNKNOWN_CA" in reason.upper() or "BAD_CERTIFICATE" in reason.upper():
        return TlsError(
            broker,
            f"the broker refused the client certificate ({reason}): it is not signed by a "
            "CA the broker trusts",
        )
    return TlsError(broker, reason)


def client_certificate_refusal(
    broker: str, exc: BaseException, security: SecurityConfig
) -> TlsError | None:
    """The TLS error for a broker that refused the client's certificate, if ``exc`` is one.

    With TLS 1.3 the server checks the client certificate after the client
    considers the handshake done, so the refusal arrives as an alert on the
    first read rather than from the handshake.
    """
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ssl.SSLError):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return None
    reason = reason_of(cause).upper()
    tls = security.tls
    has_certificate = tls is not None and tls.has_client_certificate
    refused = ("CERTIFICATE_REQUIRED", "UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN")
    if not has_certificate and any(alert in reason for alert in refused):
        # Java brokers answer a missing certificate with bad_certificate.
        return TlsError(
            broker,
            "the broker requires a client certificate (mutual TLS): set "
            "ssl.certificate.location and ssl.key.location (or the .pem forms)",
        )
    if any(alert in reason for alert in refused):
        return TlsError(
            broker,
            f"the broker refused the client certificate ({reason_of(cause)}): it is not signed "
            "by a CA the broker trusts, or has expired",
        )
    return None
