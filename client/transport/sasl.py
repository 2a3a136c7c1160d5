"""SASL authentication of kgroup's connections, and OAUTHBEARER token sources.

:class:`SaslAuthenticator` is the :data:`~kgroup.transport.security.Authenticator`
a :class:`~kgroup.transport.KafkaClient` runs on every connection it opens
(bootstrap, coordinator, metadata) after ApiVersions: SaslHandshake v1, then
SaslAuthenticate until the mechanism is done. It returns the session lifetime
the broker granted, and the connection runs it again before that expires
(KIP-368 re-authentication).

OAUTHBEARER tokens come from a :class:`TokenSource`: confluent-kafka's
``oauth_cb`` (:class:`CallbackTokenSource`) or the OIDC client-credentials
grant (:class:`OidcTokenSource`). One source per client caches its token and
fetches a new one when 80% of its lifetime has passed, as librdkafka does.
"""

from __future__ import annotations

import base64
import json
import logging
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

import anyio

from kgroup.config_security import (
    OAuthBearerMethod,
    OAuthBearerSettings,
    SaslMechanism,
    SaslSettings,
    Secret,
)
from kgroup.errors import AuthenticationError, ConfigError
from kgroup.protocol.sasl import (
    OAuthBearerExchange,
    PlainExchange,
    SaslExchange,
    ScramExchange,
    authenticate_request,
    check_handshake,
    handshake_request,
    parse_authenticate,
)

if TYPE_CHECKING:
    import urllib.error

    from kgroup.transport.connection import BrokerConnection

__all__ = [
    "CallbackTokenSource",
    "OAuthToken",
    "OidcTokenSource",
    "SaslAuthenticator",
    "TokenSource",
    "token_source",
]

log = logging.getLogger("kgroup.transport.sasl")

_REFRESH_AT: Final = 0.8
"""Fraction of a token's lifetime after which a new one is fetched (librdkafka's)."""


@dataclass(frozen=True, slots=True)
class OAuthToken:
    """An OAUTHBEARER token. ``value`` is a :class:`Secret`."""

    value: Secret
    expires_at: float
    """Expiry, seconds since the epoch."""
    obtained_at: float
    principal: str | None = None
    extensions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def stale(self, now: float) -> bool:
        """Whether 80% of the token's lifetime has passed."""
        lifetime = max(0.0, self.expires_at - self.obtained_at)
        return now >= self.obtained_at + _REFRESH_AT * lifetime


class TokenSource:
    """Hands out a valid OAUTHBEARER token, fetching a new one when due."""

    def __init__(self) -> None:
        self._token: OAuthToken | None = None
        self._lock = anyio.Lock()
        self.fetches = 0
        """How many tokens were fetched (for diagnostics and tests)."""

    async def token(self, broker: str) -> OAuthToken:
        """The cached token, or a fresh one when the cached one is 80% through its life.

        Raises:
            AuthenticationError: the token could not be obtained.
        """
        async with self._lock:
            now = time.time()
            if self._token is None or self._token.stale(now):
                # User callbacks and HTTP block: run them off the event loop.
                self._token = await anyio.to_thread.run_sync(self._fetch, broker)
                self.fetches += 1
                log.debug(
                    "OAUTHBEARER token obtained (principal %s, expires in %.0fs)",
                    self._token.principal or "?",
                    self._token.expires_at - now,
                )
            return self._token

    def _fetch(self, broker: str) -> OAuthToken:
        raise NotImplementedError


class CallbackTokenSource(TokenSource):
    """Tokens from confluent-kafka's ``oauth_cb(config_str)``.

    The callback returns ``(token, expiry_epoch_seconds)`` or
    ``(token, expiry, principal, extensions)``, exactly as for confluent-kafka,
    so one callback serves kgroup's connections and the data plane.
    """

    def __init__(self, settings: OAuthBearerSettings) -> None:
        super().__init__()
        assert settings.callback is not None
        self._callback = settings.callback
        # sasl.oauthbearer.extensions is not read here: librdkafka uses it only
        # with method=oidc, and confluent-kafka hands librdkafka exactly what the
        # callback returns, so the data plane would send the callback's extensions
        # alone; kgroup's connections send the same.
        self._config = settings.config

    def _fetch(self, broker: str) -> OAuthToken:
        try:
            result: Any = self._callback(self._config)
        except Exception as exc:
            raise AuthenticationError(
                "OAUTHBEARER", broker, f"oauth_cb raised {type(exc).__name__}"
            ) from exc
        if not isinstance(result, tuple) or len(result) not in (2, 3, 4):
            raise AuthenticationError(
                "OAUTHBEARER",
                broker,
                "oauth_cb must return (token, expiry_epoch_seconds[, principal, extensions]), "
                f"got a {type(result).__name__}",
            )
        token, expiry = result[0], result[1]
        principal = result[2] if len(result) > 2 else None
        extensions = result[3] if len(result) > 3 else None
        if not isinstance(token, str) or not token:
            raise AuthenticationError(
                "OAUTHBEARER", broker, "oauth_cb returned an empty or non-string token"
            )
        if isinstance(expiry, bool) or not isinstance(expiry, (int, float)):
            raise AuthenticationError(
                "OAUTHBEARER", broker, "oauth_cb returned a non-numeric expiry"
            )
        returned = (
            {str(k): str(v) for k, v in extensions.items()}
            if isinstance(extensions, Mapping)
            else {}
        )
        return OAuthToken(
            Secret(token),
            float(expiry),
            time.time(),
            principal if isinstance(principal, str) else None,
            MappingProxyType(returned),
        )


class OidcTokenSource(TokenSource):
    """Tokens from an OAuth 2 token endpoint with the client-credentials grant.

    As librdkafka's ``sasl.oauthbearer.method=oidc``: a form POST with
    ``grant_type=client_credentials`` (and ``scope``), the client id and secret
    in HTTP Basic authentication; the expiry is the JWT's ``exp`` claim, or
    ``expires_in`` when the token is not a JWT.
    """

    def __init__(self, settings: OAuthBearerSettings, *, timeout: float = 30.0) -> None:
        super().__init__()
        assert settings.token_endpoint_url
        assert settings.client_id
        assert settings.client_secret
        self._url = settings.token_endpoint_url
        self._client_id = settings.client_id
        self._secret = settings.client_secret
        self._scope = settings.scope
        self._extensions = settings.extensions
        self._timeout = timeout
        # https.ca.* as librdkafka's OIDC fetch uses them: both trust the same CA.
        self._https_context = settings.create_https_context()

    def _fetch(self, broker: str) -> OAuthToken:
        # Imported on first use: urllib.request brings http.client and email
        # (about 1 MiB), which no member without an OAUTHBEARER endpoint needs.
        import urllib.error  # noqa: PLC0415
        import urllib.request  # noqa: PLC0415

        form = {"grant_type": "client_credentials"}
        if self._scope:
            form["scope"] = self._scope
        basic = base64.b64encode(
            f"{urllib.parse.quote(self._client_id)}:"
            f"{urllib.parse.quote(self._secret.reveal())}".encode()
        ).decode()
        request = urllib.request.Request(
            self._url,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            method="POST",
        )
        where = f"token endpoint {self._url}"
        try:
            with urllib.request.urlopen(
                request, timeout=self._timeout, context=self._https_context
            ) as reply:
                body = reply.read()
        except urllib.error.HTTPError as exc:
            raise AuthenticationError(
                "OAUTHBEARER", where, f"HTTP {exc.code} {exc.reason}{_oauth_error(exc)}"
            ) from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise AuthenticationError("OAUTHBEARER", where, f"unreachable: {reason}") from None
        try:
            reply_json = json.loads(body)
            token = reply_json["access_token"]
        except (ValueError, KeyError, TypeError):
            raise AuthenticationError(
                "OAUTHBEARER", where, "the reply has no access_token (not an OAuth token response)"
            ) from None
        if not isinstance(token, str) or not token:
            raise AuthenticationError("OAUTHBEARER", where, "the access_token is empty")
        now = time.time()
        claims = _jwt_claims(token)
        expiry = claims.get("exp")
        if isinstance(expiry, (int, float)) and not isinstance(expiry, bool):
            expires_at = float(expiry)
        elif isinstance(reply_json.get("expires_in"), (int, float)):
            expires_at = now + float(reply_json["expires_in"])
        else:
            raise AuthenticationError(
                "OAUTHBEARER", where, "the token has neither an exp claim nor expires_in"
            )
        subject = claims.get("sub")
        return OAuthToken(
            Secret(token),
            expires_at,
            now,
            subject if isinstance(subject, str) else None,
            self._extensions,
        )


def _oauth_error(exc: urllib.error.HTTPError) -> str:
    # RFC 6749 error replies carry an "error" code; anything else is left out, as
    # a misbehaving endpoint might echo the request (and its credentials).
    try:
        report = json.loads(exc.read())
    except (ValueError, OSError):
        return ""
    if isinstance(report, dict) and isinstance(report.get("error"), str):
        return f" ({report['error']})"
    return ""


def _jwt_claims(token: str) -> dict[str, Any]:
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, TypeError):
        return {}
    return claims if isinstance(claims, dict) else {}


def token_source(settings: OAuthBearerSettings) -> TokenSource:
    """The token source ``settings`` describe."""
    if settings.method is OAuthBearerMethod.OIDC:
        return OidcTokenSource(settings)
    if settings.callback is None:
        raise ConfigError(
            "sasl.mechanism=OAUTHBEARER needs oauth_cb or sasl.oauthbearer.method=oidc"
        )
    return CallbackTokenSource(settings)


class SaslAuthenticator:
    """Authenticates each new connection with the configured SASL mechanism.

    One per client: it holds the OAUTHBEARER token source shared by the
    client's connections. Called again on a connection to re-authenticate.
    """

    def __init__(self, settings: SaslSettings) -> None:
        self.settings = settings
        self.mechanism = settings.mechanism
        self.tokens: TokenSource | None = None
        if settings.mechanism is SaslMechanism.OAUTHBEARER:
            assert settings.oauthbearer is not None
            self.tokens = token_source(settings.oauthbearer)
        self.authentications = 0
        """How many SASL exchanges succeeded (first ones and re-authentications)."""

    def __repr__(self) -> str:
        return f"<SaslAuthenticator {self.mechanism.value}>"

    async def __call__(self, conn: BrokerConnection) -> float | None:
        """Authenticate ``conn``; return the session lifetime in seconds (0: unlimited).

        Raises:
            AuthenticationError: wrong credentials or a refused token.
            UnsupportedSaslMechanismError: the listener does not enable the mechanism.
            SecurityProtocolMismatchError: the listener does not use SASL.
        """
        broker = f"{conn.host}:{conn.port}"
        mechanism = self.mechanism.value
        exchange = await self._exchange(broker)
        response = await conn.authentication_request(handshake_request(conn.versions, mechanism))
        check_handshake(response, mechanism, broker)
        message: bytes | None = exchange.first()
        lifetime = 0.0
        while message is not None:
            response = await conn.authentication_request(
                authenticate_request(conn.versions, message)
            )
            try:
                result = parse_authenticate(response, mechanism, broker)
            except AuthenticationError as exc:
                rejection = getattr(exchange, "rejection", None)
                if rejection:
                    raise AuthenticationError(mechanism, broker, rejection) from exc
                raise
            lifetime = result.session_lifetime
            message = exchange.respond(result.auth_bytes)
        self.authentications += 1
        log.debug(
            "%s: SASL %s authenticated%s",
            conn,
            mechanism,
            f", session lifetime {lifetime:.1f}s" if lifetime else "",
        )
        return lifetime

    async def _exchange(self, broker: str) -> SaslExchange:
        settings = self.settings
        if self.mechanism is SaslMechanism.PLAIN:
            assert settings.username is not None
            assert settings.password is not None
            return PlainExchange(settings.username, settings.password.reveal(), broker=broker)
        if self.mechanism in (SaslMechanism.SCRAM_SHA_256, SaslMechanism.SCRAM_SHA_512):
            assert settings.username is not None
            assert settings.password is not None
            return ScramExchange(
                self.mechanism.value,
                settings.username,
                settings.password.reveal(),
                broker=broker,
            )
        assert self.tokens is not None
        token = await self.tokens.token(broker)
        return OAuthBearerExchange(token.value.reveal(), token.extensions, broker=broker)
