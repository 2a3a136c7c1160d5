"""SASL on the Kafka wire: SaslHandshake v1 + SaslAuthenticate, and the mechanisms' messages.

Sans-IO: this module builds kio requests and the bytes each mechanism sends,
and turns responses into values or typed errors. The transport
(:mod:`kgroup.transport.sasl`) sends them. SCRAM is the ``scramp`` library's;
kgroup only carries its messages.

The exchange, after ApiVersions on a SASL listener::

    SaslHandshake(mechanism)         -> the broker's enabled mechanisms, or an error
    SaslAuthenticate(client bytes)   -> server bytes, session lifetime  (repeated
                                        while the mechanism has more to say)

Nothing here formats a password, a token or a SCRAM proof into a message or a
``repr``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup.errors import (
    AuthenticationError,
    SecurityProtocolMismatchError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    broker_error,
)
from kgroup.protocol.apis import VersionRange, request_class
from kgroup.protocol.negotiation import NegotiatedVersions

__all__ = [
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "SASL_VERSIONS",
    "AuthenticateResult",
    "OAuthBearerExchange",
    "PlainExchange",
    "SaslExchange",
    "ScramExchange",
    "authenticate_request",
    "check_handshake",
    "handshake_request",
    "parse_authenticate",
]


SASL_HANDSHAKE: Final = 17
SASL_AUTHENTICATE: Final = 36

# Kept out of kgroup.protocol.apis.SUPPORTED_VERSIONS on purpose: these two are
# sent only by the authenticator, before the connection is handed to anyone.
SASL_VERSIONS: Final[Mapping[int, VersionRange]] = MappingProxyType(
    {
        # v1 hands the SASL exchange to SaslAuthenticate (v0 sent raw SASL bytes).
        SASL_HANDSHAKE: VersionRange(1, 1),
        # v1 returns the session lifetime (KIP-368 re-authentication).
        SASL_AUTHENTICATE: VersionRange(0, 2),
    }
)


def _version(versions: NegotiatedVersions, api_key: int, name: str) -> int:
    ours = SASL_VERSIONS[api_key]
    theirs = versions.broker.get(api_key)
    common = ours.intersect(theirs) if theirs is not None else None
    if common is None:
        raise UnsupportedVersionError(
            f"the broker does not support {name} {ours} (it supports "
            f"{theirs if theirs is not None else 'no version'}); kgroup needs Kafka 1.0 or newer "
            "for SASL"
        )
    return common.max


def handshake_request(versions: NegotiatedVersions, mechanism: str) -> RequestPayload:
    """A SaslHandshake request choosing ``mechanism``.

    Raises:
        UnsupportedVersionError: the broker lacks SaslHandshake v1 (pre-1.0 brokers).
    """
    cls: Any = request_class(SASL_HANDSHAKE, _version(versions, SASL_HANDSHAKE, "SaslHandshake"))
    request: RequestPayload = cls(mechanism=mechanism)
    return request


def check_handshake(response: ResponsePayload, mechanism: str, broker: str) -> None:
    """Raise unless the broker accepted ``mechanism`` in its SaslHandshake response.

    Raises:
        UnsupportedSaslMechanismError: the listener does not enable it (lists what it enables).
        SecurityProtocolMismatchError: the listener does not use SASL at all.
        BrokerError: another error code.
    """
    data: Any = response
    code = data.error_code
    if code == ErrorCode.none:
        return
    enabled = tuple(str(m) for m in (data.mechanisms or ()))
    if code == ErrorCode.unsupported_sasl_mechanism:
        raise UnsupportedSaslMechanismError(mechanism, broker, enabled)
    if code == ErrorCode.illegal_sasl_state:
        raise SecurityProtocolMismatchError(
            broker,
            "SASL",
            "the listener does not use SASL (it refused the SASL handshake); set "
            "security.protocol=PLAINTEXT or SSL for it, or use its SASL listener",
        )
    raise broker_error(code)


def authenticate_request(versions: NegotiatedVersions, auth_bytes: bytes) -> RequestPayload:
    """A SaslAuthenticate request carrying one message of the mechanism."""
    version = _version(versions, SASL_AUTHENTICATE, "SaslAuthenticate")
    cls: Any = request_class(SASL_AUTHENTICATE, version)
    request: RequestPayload = cls(auth_bytes=auth_bytes)
    return request


@dataclass(frozen=True, slots=True)
class AuthenticateResult:
    """What a successful SaslAuthenticate returned."""

    auth_bytes: bytes
    """The server's message to the mechanism."""
    session_lifetime: float
    """Seconds until the broker expires the session (KIP-368); 0 for never."""

    def __repr__(self) -> str:
        # Server messages (SCRAM server-final ...) are not secrets but stay out of logs.
        return f"AuthenticateResult(session_lifetime={self.session_lifetime:g})"


def parse_authenticate(
    response: ResponsePayload, mechanism: str, broker: str
) -> AuthenticateResult:
    """The server's bytes and session lifetime, or the failure as a typed error.

    Raises:
        AuthenticationError: SASL_AUTHENTICATION_FAILED (wrong credentials, refused
            token), with the broker's own message.
        BrokerError: another error code.
    """
    data: Any = response
    code = data.error_code
    if code != ErrorCode.none:
        message = data.error_message or ErrorCode(code).name.upper()
        if code in (ErrorCode.sasl_authentication_failed, ErrorCode.illegal_sasl_state):
            raise AuthenticationError(mechanism, broker, message)
        raise broker_error(code, data.error_message)
    lifetime = getattr(data, "session_lifetime", None)
    seconds = lifetime.total_seconds() if isinstance(lifetime, datetime.timedelta) else 0.0
    return AuthenticateResult(bytes(data.auth_bytes or b""), max(0.0, seconds))


class SaslExchange:
    """One mechanism's side of an authentication, message by message.

    :meth:`first` is the client's opening message; :meth:`respond` takes each
    server message and returns the next client message, or None when done.
    """

    mechanism: str = ""

    def first(self) -> bytes:
        """The client's first message."""
        raise NotImplementedError

    def respond(self, challenge: bytes) -> bytes | None:
        """The next client message for ``challenge``, or None when authenticated.

        Raises:
            AuthenticationError: the server's message shows the exchange failed.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.mechanism}>"


class PlainExchange(SaslExchange):
    """SASL PLAIN (RFC 4616): one message with the username and password."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str, *, broker: str = "") -> None:
        self._message = b"\0" + username.encode() + b"\0" + password.encode()
        self._broker = broker

    def first(self) -> bytes:
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        return None


class ScramExchange(SaslExchange):
    """SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, KIP-84), computed by ``scramp``."""

    def __init__(self, mechanism: str, username: str, password: str, *, broker: str) -> None:
        # Imported here: scramp loads asn1crypto, about 6 MiB of resident memory
        # that a consumer without SCRAM would carry for nothing.
        import scramp  # noqa: PLC0415

        self.mechanism = mechanism
        self._broker = broker
        self._errors: tuple[type[Exception], ...] = (scramp.ScramException, UnicodeDecodeError)
        self._client = scramp.ScramClient([mechanism], username, password)
        self._step = 0

    def first(self) -> bytes:
        return str(self._client.get_client_first()).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        self._step += 1
        try:
            if self._step == 1:
                self._client.set_server_first(challenge.decode())
                return str(self._client.get_client_final()).encode()
            if self._step == 2:
                self._client.set_server_final(challenge.decode())
                return None
        except self._errors as exc:
            # scramp's messages describe the protocol step, never the password.
            raise AuthenticationError(
                self.mechanism, self._broker, f"SCRAM exchange failed: {exc}"
            ) from None
        raise AuthenticationError(
            self.mechanism, self._broker, "the broker sent more SCRAM messages than expected"
        )


_KVSEP: Final = b"\x01"


class OAuthBearerExchange(SaslExchange):
    """OAUTHBEARER (RFC 7628, KIP-255): the token and extensions in one message."""

    mechanism = "OAUTHBEARER"

    def __init__(
        self, token: str, extensions: Mapping[str, str] | None = None, *, broker: str
    ) -> None:
        parts = [b"n,,", _KVSEP, b"auth=Bearer ", token.encode()]
        for key, value in sorted((extensions or {}).items()):
            parts += [_KVSEP, key.encode(), b"=", value.encode()]
        parts += [_KVSEP, _KVSEP]
        self._message = b"".join(parts)
        self._broker = broker
        self._failed = False
        self._status = ""

    def first(self) -> bytes:
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        if not challenge:
            return None
        if self._failed:
            raise AuthenticationError(self.mechanism, self._broker, self._status)
        # RFC 7628: a non-empty server message is an error report; the client
        # answers with a lone separator and the server then fails the exchange.
        self._failed = True
        self._status = "the broker rejected the token: " + _oauth_status(challenge)
        return _KVSEP

    @property
    def rejection(self) -> str | None:
        """The broker's reason when it reported the token as invalid."""
        return self._status or None


def _oauth_status(challenge: bytes) -> str:
    try:
        report = json.loads(challenge.decode())
    except (ValueError, UnicodeDecodeError):
        return "unreadable error report"
    if isinstance(report, dict):
        status = report.get("status", "?")
        scope = report.get("scope")
        return f"status {status}" + (f", scope {scope}" if scope else "")
    return "unreadable error report"
