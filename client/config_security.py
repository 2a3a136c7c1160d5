"""The validated security config: one reading of the security keys for everything.

:class:`SecurityConfig` is built once from the consumer's dict (the keys
librdkafka and the Java client use: ``security.protocol``, ``ssl.*``,
``sasl.*``, ``oauth_cb``). The same value drives kgroup's own connections
(bootstrap, coordinator, metadata: :mod:`kgroup.transport.security`) and is
rendered back into librdkafka's keys for the data plane by
:meth:`SecurityConfig.librdkafka_config`, so the two can never disagree.

It lives with the config rather than in the transport because both the
transport and the data plane read it, and the data plane may not import the
transport. Which keys are security keys (:func:`is_security_key`) and which
hold secrets (:data:`SECRET_KEYS`), and how an ACL denial is explained to the
user (:func:`explain_denial`), are facts of the same keys and live here too.

Secrets (passwords, private keys, client secrets, tokens) are held in
:class:`Secret`, whose ``repr`` and ``str`` never show the value.
"""

from __future__ import annotations

import contextlib
import enum
import hmac
import logging
import os
import ssl
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, TypeVar

from kgroup._settings import bool_setting, text_setting
from kgroup.errors import AuthorizationError, BrokerError, ConfigError

__all__ = [
    "SECRET_KEYS",
    "SECURITY_KEYS",
    "EndpointIdentification",
    "OAuthBearerMethod",
    "OAuthBearerSettings",
    "OAuthCallback",
    "SaslMechanism",
    "SaslSettings",
    "Secret",
    "SecurityConfig",
    "SecurityProtocol",
    "TlsSettings",
    "explain_denial",
    "is_security_key",
    "reason_of",
    "unsupported_key_message",
    "unused_key_warnings",
]


class Secret:
    """A secret string whose ``repr`` and ``str`` never show it.

    Call :meth:`reveal` at the one place the value is needed (the wire, or
    librdkafka's config). Equality compares in constant time.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"a Secret holds a str, got {type(value).__name__}")
        self._value = value

    def reveal(self) -> str:
        """The secret itself. Never log or format the result."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, len(self._value)))


# The logger keeps the name it had when this code lived in the transport:
# docs/security.md tells users to watch it for unused-key warnings.
_log = logging.getLogger("kgroup.transport.security")

_E = TypeVar("_E", bound=enum.Enum)


class SecurityProtocol(enum.Enum):
    """Kafka's ``security.protocol`` values."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        """Whether connections are wrapped in TLS."""
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        """Whether connections authenticate with SASL after ApiVersions."""
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class SaslMechanism(enum.Enum):
    """The SASL mechanisms kgroup implements (``sasl.mechanism``)."""

    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    OAUTHBEARER = "OAUTHBEARER"


class OAuthBearerMethod(enum.Enum):
    """``sasl.oauthbearer.method``: where OAUTHBEARER tokens come from."""

    DEFAULT = "default"
    """From the ``oauth_cb`` callback."""
    OIDC = "oidc"
    """From an OAuth/OIDC token endpoint, with the client-credentials grant."""


class EndpointIdentification(enum.Enum):
    """``ssl.endpoint.identification.algorithm``: whether the broker's hostname is checked."""

    HTTPS = "https"
    """The certificate must name the host kgroup connects to (the default)."""
    NONE = "none"
    """The certificate chain is verified but the hostname is not."""


OAuthCallback = Callable[[str | None], Any]
"""confluent-kafka's ``oauth_cb``: called with ``sasl.oauthbearer.config``, returns
``(token, expiry_epoch_seconds)`` or ``(token, expiry, principal, extensions)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsSettings:
    """The ``ssl.*`` keys. Locations are paths; ``*_pem`` are PEM text."""

    ca_location: str | None = None
    ca_pem: str | None = None
    certificate_location: str | None = None
    certificate_pem: str | None = None
    key_location: str | None = None
    key_pem: Secret | None = None
    key_password: Secret | None = None
    endpoint_identification: EndpointIdentification = EndpointIdentification.HTTPS
    verify_certificates: bool = True
    """``enable.ssl.certificate.verification``; false only for throw-away tests."""

    @property
    def has_client_certificate(self) -> bool:
        """Whether a client certificate is configured (mutual TLS)."""
        return self.certificate_location is not None or self.certificate_pem is not None

    def create_context(self) -> ssl.SSLContext:
        """An :class:`ssl.SSLContext` for connecting to brokers.

        With no CA configured, the system trust store is used.

        Raises:
            ConfigError: a file is missing or does not load; the message names the key.
        """
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if not self.verify_certificates:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif self.endpoint_identification is EndpointIdentification.NONE:
            context.check_hostname = False
        if self.ca_location is not None:
            path = Path(self.ca_location)
            try:
                if path.is_dir():
                    context.load_verify_locations(capath=str(path))
                else:
                    context.load_verify_locations(cafile=str(path))
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    f"ssl.ca.location={self.ca_location!r} could not be loaded ({reason_of(exc)}); "
                    "give a PEM file or a directory of hashed PEM certificates"
                ) from None
        if self.ca_pem is not None:
            try:
                context.load_verify_locations(cadata=self.ca_pem)
            except (ssl.SSLError, ValueError) as exc:
                raise ConfigError(
                    f"ssl.ca.pem is not a PEM certificate ({reason_of(exc)})"
                ) from None
        if self.ca_location is None and self.ca_pem is None and self.verify_certificates:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.has_client_certificate:
            self._load_client_certificate(context)
        return context

    def _load_client_certificate(self, context: ssl.SSLContext) -> None:
        password = self.key_password.reveal() if self.key_password is not None else None
        with _pem_files(self) as (cert_file, key_file):
            try:
                context.load_cert_chain(cert_file, key_file, password=password)
            except ssl.SSLError as exc:
                raise ConfigError(
                    "the client certificate and key do not load "
                    f"({reason_of(exc)}); check ssl.certificate.* and ssl.key.* "
                    "(and ssl.key.password for an encrypted key)"
                ) from None
            except OSError as exc:
                raise ConfigError(
                    f"the client certificate or key file cannot be read: {exc.strerror} "
                    f"({exc.filename})"
                ) from None


@contextlib.contextmanager
def _pem_files(tls: TlsSettings) -> Iterator[tuple[str, str]]:
    # The standard library loads a certificate chain only from files, so PEM
    # text goes through a private temporary directory that is removed at once.
    import tempfile  # noqa: PLC0415 (imported only when PEM text is configured)

    with tempfile.TemporaryDirectory(prefix="kgroup-tls-") as tmp:
        cert_file = tls.certificate_location
        key_file = tls.key_location
        if tls.certificate_pem is not None:
            cert_file = os.path.join(tmp, "certificate.pem")
            _write_private(cert_file, tls.certificate_pem)
        if tls.key_pem is not None:
            key_file = os.path.join(tmp, "key.pem")
            _write_private(key_file, tls.key_pem.reveal())
        assert cert_file is not None
        assert key_file is not None
        yield cert_file, key_file


def _write_private(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def reason_of(exc: BaseException) -> str:
    """The short reason of a TLS or file error, for messages that name the key."""
    reason = getattr(exc, "reason", None) if isinstance(exc, ssl.SSLError) else None
    if reason:
        return str(reason)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


@dataclass(frozen=True, slots=True, kw_only=True)
class OAuthBearerSettings:
    """The ``sasl.oauthbearer.*`` keys and ``oauth_cb``."""

    method: OAuthBearerMethod = OAuthBearerMethod.DEFAULT
    callback: OAuthCallback | None = None
    config: str | None = None
    """``sasl.oauthbearer.config``, handed to ``oauth_cb`` as librdkafka does."""
    token_endpoint_url: str | None = None
    client_id: str | None = None
    client_secret: Secret | None = None
    scope: str | None = None
    extensions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """``sasl.oauthbearer.extensions``: sent with OIDC tokens only, as librdkafka does
    (a callback's token carries the extensions the callback returns)."""
    https_ca_location: str | None = None
    """``https.ca.location``: the CA (file or directory) that signs the token endpoint's
    certificate; ``probe`` (librdkafka's word) or unset: the system trust store."""
    https_ca_pem: str | None = None
    """``https.ca.pem``: the same CA as PEM text."""

    def create_https_context(self) -> ssl.SSLContext:
        """The TLS context for the OIDC token endpoint (``https.ca.*``).

        Raises:
            ConfigError: the CA does not load; the message names the key.
        """
        location = self.https_ca_location if self.https_ca_location != "probe" else None
        if location is None and self.https_ca_pem is None:
            return ssl.create_default_context()
        # Only the configured CA is trusted, as librdkafka (curl) does with it.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        key = "https.ca.location" if location is not None else "https.ca.pem"
        try:
            if location is not None and Path(location).is_dir():
                context.load_verify_locations(capath=location)
            elif location is not None:
                context.load_verify_locations(cafile=location)
            else:
                context.load_verify_locations(cadata=self.https_ca_pem)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ConfigError(
                f"{key} could not be loaded ({reason_of(exc)}); give PEM certificate(s)"
            ) from None
        return context


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslSettings:
    """The ``sasl.*`` keys."""

    mechanism: SaslMechanism
    username: str | None = None
    password: Secret | None = None
    oauthbearer: OAuthBearerSettings | None = None


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    """How to secure connections to brokers. Build it with :meth:`from_config`.

    Raises ConfigError on construction when the parts do not fit together (a SASL
    protocol without a usable mechanism, for instance).
    """

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    tls: TlsSettings | None = None
    sasl: SaslSettings | None = None

    def __post_init__(self) -> None:
        if self.protocol.uses_sasl and self.sasl is None:
            raise ConfigError(
                f"security.protocol={self.protocol.value} needs sasl.mechanism: kgroup "
                "implements PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER "
                "(librdkafka's default, GSSAPI, is not supported)"
            )

    # --- building ---------------------------------------------------------------

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> SecurityConfig:
        """From the security keys of a consumer config (other keys are ignored).

        Raises:
            ConfigError: a bad value, a missing companion key, or a security key
                kgroup's connections do not implement; the message names the key.
        """
        for key in config:
            if is_security_key(key) and key not in SECURITY_KEYS:
                raise ConfigError(unsupported_key_message(key))
        protocol = _choice(
            SecurityProtocol, config.get("security.protocol", "PLAINTEXT"), "security.protocol"
        )
        tls = _tls_settings(config)
        sasl = _sasl_settings(config, protocol)
        built = cls(protocol, tls, sasl)
        if protocol.uses_tls:
            # Load every file now, so a bad path fails at construction naming
            # its key rather than on the first connection.
            built.create_ssl_context()
        for warning in unused_key_warnings(config, protocol, sasl):
            _log.warning("%s", warning)
        return built

    # --- using ------------------------------------------------------------------

    def create_ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for this config, or None when the protocol has no TLS.

        Raises:
            ConfigError: a certificate, key or CA does not load.
        """
        if not self.protocol.uses_tls:
            return None
        return (self.tls or TlsSettings()).create_context()

    def librdkafka_config(self) -> dict[str, object]:
        """The same settings in librdkafka's keys, for the data plane.

        The values are revealed here: the result goes straight into
        ``confluent_kafka.Consumer`` and must not be logged.
        """
        conf: dict[str, object] = {"security.protocol": self.protocol.value}

        def put(*pairs: tuple[str, object]) -> None:
            # Unset settings stay out (librdkafka's defaults apply); secrets go in revealed.
            for key, value in pairs:
                if value is not None:
                    conf[key] = value.reveal() if isinstance(value, Secret) else value

        tls = self.tls
        if tls is not None:
            put(
                ("ssl.ca.location", tls.ca_location),
                ("ssl.ca.pem", tls.ca_pem),
                ("ssl.certificate.location", tls.certificate_location),
                ("ssl.certificate.pem", tls.certificate_pem),
                ("ssl.key.location", tls.key_location),
                ("ssl.key.pem", tls.key_pem),
                ("ssl.key.password", tls.key_password),
                ("ssl.endpoint.identification.algorithm", tls.endpoint_identification.value),
                ("enable.ssl.certificate.verification", str(tls.verify_certificates).lower()),
            )
        sasl = self.sasl
        if sasl is not None and self.protocol.uses_sasl:
            put(
                ("sasl.mechanism", sasl.mechanism.value),
                ("sasl.username", sasl.username),
                ("sasl.password", sasl.password),
            )
            oauth = sasl.oauthbearer
            if oauth is not None:
                put(
                    ("sasl.oauthbearer.method", oauth.method.value),
                    ("oauth_cb", oauth.callback),
                    ("sasl.oauthbearer.config", oauth.config),
                    ("sasl.oauthbearer.token.endpoint.url", oauth.token_endpoint_url),
                    ("sasl.oauthbearer.client.id", oauth.client_id),
                    ("sasl.oauthbearer.scope", oauth.scope),
                    ("sasl.oauthbearer.client.secret", oauth.client_secret),
                )
                if oauth.extensions:
                    conf["sasl.oauthbearer.extensions"] = ",".join(
                        f"{k}={v}" for k, v in oauth.extensions.items()
                    )
                put(
                    ("https.ca.location", oauth.https_ca_location),
                    ("https.ca.pem", oauth.https_ca_pem),
                )
        return conf

    def librdkafka_probe_config(self) -> dict[str, str]:
        """As :meth:`librdkafka_config`, for a config probe that starts no real client.

        librdkafka calls ``oauth_cb`` and fetches OIDC tokens as soon as a client
        is created; a probe must not call the user's code or the network, so the
        token source is left out (librdkafka accepts OAUTHBEARER without one).
        """
        conf = self.librdkafka_config()
        conf.pop("oauth_cb", None)
        if self.sasl is not None and self.sasl.mechanism is SaslMechanism.OAUTHBEARER:
            for key in (
                "sasl.oauthbearer.method",
                "sasl.oauthbearer.token.endpoint.url",
                "sasl.oauthbearer.client.id",
                "sasl.oauthbearer.client.secret",
                "sasl.oauthbearer.scope",
            ):
                conf.pop(key, None)
        return {key: str(value) for key, value in conf.items()}

    def describe(self) -> str:
        """A one-line summary for logs (never a secret)."""
        parts = [self.protocol.value]
        if self.sasl is not None and self.protocol.uses_sasl:
            parts.append(self.sasl.mechanism.value)
            if self.sasl.username:
                parts.append(f"user={self.sasl.username}")
        if self.tls is not None and self.protocol.uses_tls and self.tls.has_client_certificate:
            parts.append("client certificate")
        return " ".join(parts)


# --- parsing -------------------------------------------------------------------

_TLS_KEYS: Final = (
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
)
_SASL_KEYS: Final = (
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
    "oauth_cb",
)
# librdkafka verifies the OIDC token endpoint with these; kgroup's OIDC source must too.
_HTTPS_KEYS: Final = ("https.ca.location", "https.ca.pem")
SECURITY_KEYS: Final[frozenset[str]] = frozenset(
    ("security.protocol", *_TLS_KEYS, *_SASL_KEYS, *_HTTPS_KEYS)
)
"""Every security key kgroup implements (for its connections and the data plane's)."""

SECRET_KEYS: Final[frozenset[str]] = frozenset(
    {"sasl.password", "ssl.key.password", "ssl.key.pem", "sasl.oauthbearer.client.secret"}
)
"""Keys whose values are secrets: never echoed, logged or kept outside a :class:`Secret`."""

_SECURITY_PREFIXES: Final = (
    "security.",
    "ssl.",
    "sasl.",
    "ssl_",
    "https.",
    "enable.ssl.",
    "enable.sasl.",
)

# Java client keys people carry over; librdkafka (and so kgroup) spells them differently.
_JAVA_HINTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "sasl.jaas.config": "set sasl.username and sasl.password (or oauth_cb) instead",
        "ssl.truststore.location": "give the CA as PEM with ssl.ca.location or ssl.ca.pem",
        "ssl.truststore.password": "give the CA as PEM with ssl.ca.location or ssl.ca.pem",
        "ssl.truststore.type": "give the CA as PEM with ssl.ca.location or ssl.ca.pem",
        "ssl.keystore.location": (
            "give the client certificate and key as PEM with ssl.certificate.location "
            "and ssl.key.location (or ssl.certificate.pem and ssl.key.pem)"
        ),
        "ssl.keystore.password": "use ssl.key.password for an encrypted PEM key",
        "ssl.keystore.type": "give the certificate and key as PEM",
        "sasl.login.callback.handler.class": "use oauth_cb or sasl.oauthbearer.method=oidc",
    }
)


def is_security_key(key: str) -> bool:
    """Whether ``key`` configures security (kgroup's connections must honour it too)."""
    return key == "oauth_cb" or key.startswith(_SECURITY_PREFIXES)


def unsupported_key_message(key: str) -> str:
    """Why ``key`` (a security key kgroup does not implement) is refused, and what to set."""
    hint = _JAVA_HINTS.get(key)
    if hint is not None:
        return f"{key} is a Java client key that kgroup does not take: {hint}"
    return (
        f"{key} is not a security setting kgroup implements for its own connections, "
        "and kgroup and its data plane must connect the same way; remove it. Supported: "
        + ", ".join(sorted(SECURITY_KEYS))
    )


def _text(value: object, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key} must be a non-empty string")
    return value.strip()


def _choice(choices: type[_E], raw: object, key: str) -> _E:
    """``raw`` as one of ``choices``, whatever its case (each enum's values share one case).

    Raises:
        ConfigError: ``raw`` is not one of them; the message lists them.
    """
    text = _text(raw, key)
    for choice in choices:
        if choice.value.casefold() == text.casefold():
            return choice
    *others, last = (choice.value for choice in choices)
    raise ConfigError(f"{key} {text} is not supported by kgroup; use {', '.join(others)} or {last}")


def _optional_text(config: Mapping[str, object], key: str) -> str | None:
    # Never echoed: any security key may hold a secret; secrets keep their spaces.
    return text_setting(config, key, echo=False, strip=key not in SECRET_KEYS)


def _optional_secret(config: Mapping[str, object], key: str) -> Secret | None:
    value = _optional_text(config, key)
    return None if value is None else Secret(value)


def _tls_settings(config: Mapping[str, object]) -> TlsSettings | None:
    if not any(key in config for key in _TLS_KEYS):
        return None
    endpoint = _choice(
        EndpointIdentification,
        config.get("ssl.endpoint.identification.algorithm", "https"),
        "ssl.endpoint.identification.algorithm",
    )
    tls = TlsSettings(
        ca_location=_optional_text(config, "ssl.ca.location"),
        ca_pem=_optional_text(config, "ssl.ca.pem"),
        certificate_location=_optional_text(config, "ssl.certificate.location"),
        certificate_pem=_optional_text(config, "ssl.certificate.pem"),
        key_location=_optional_text(config, "ssl.key.location"),
        key_pem=_optional_secret(config, "ssl.key.pem"),
        key_password=_optional_secret(config, "ssl.key.password"),
        endpoint_identification=endpoint,
        verify_certificates=bool_setting(config, "enable.ssl.certificate.verification", True),
    )
    for one, other in (
        ("ssl.certificate.location", "ssl.certificate.pem"),
        ("ssl.key.location", "ssl.key.pem"),
    ):
        if one in config and other in config:
            raise ConfigError(f"set {one} or {other}, not both")
    has_key = tls.key_location is not None or tls.key_pem is not None
    if tls.has_client_certificate and not has_key:
        raise ConfigError(
            "a client certificate (ssl.certificate.*) needs its private key: "
            "set ssl.key.location or ssl.key.pem"
        )
    if has_key and not tls.has_client_certificate:
        raise ConfigError(
            "a private key (ssl.key.*) needs its certificate: "
            "set ssl.certificate.location or ssl.certificate.pem"
        )
    for key, path in (
        ("ssl.ca.location", tls.ca_location),
        ("ssl.certificate.location", tls.certificate_location),
        ("ssl.key.location", tls.key_location),
    ):
        if path is not None and not os.path.exists(path):
            raise ConfigError(f"{key}={path!r} does not exist")
    return tls


def _mechanism(config: Mapping[str, object]) -> SaslMechanism | None:
    single = config.get("sasl.mechanism")
    plural = config.get("sasl.mechanisms")
    if single is not None and plural is not None and single != plural:
        raise ConfigError(
            "sasl.mechanism and sasl.mechanisms are the same setting and disagree; set one"
        )
    raw = single if single is not None else plural
    if raw is None:
        return None
    return _choice(SaslMechanism, raw, "sasl.mechanism")


def _sasl_settings(config: Mapping[str, object], protocol: SecurityProtocol) -> SaslSettings | None:
    mechanism = _mechanism(config)
    if mechanism is None:
        if protocol.uses_sasl:
            raise ConfigError(
                f"security.protocol={protocol.value} needs sasl.mechanism (PLAIN, "
                "SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)"
            )
        return None
    username = _optional_text(config, "sasl.username")
    password = _optional_secret(config, "sasl.password")
    oauth: OAuthBearerSettings | None = None
    if mechanism is SaslMechanism.OAUTHBEARER:
        oauth = _oauth_settings(config)
    elif username is None or password is None:
        raise ConfigError(f"sasl.mechanism={mechanism.value} needs sasl.username and sasl.password")
    return SaslSettings(
        mechanism=mechanism, username=username, password=password, oauthbearer=oauth
    )


# Used only by OAUTHBEARER.
_OAUTH_KEYS: Final = (
    "oauth_cb",
    *(key for key in _SASL_KEYS if key.startswith("sasl.oauthbearer.")),
    *_HTTPS_KEYS,
)
# Read by the OIDC token source only; a callback (method=default) makes its own
# token. (sasl.oauthbearer.extensions has a warning of its own in _oauth_settings.)
_OIDC_ONLY_KEYS: Final = (
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.scope",
    *_HTTPS_KEYS,
)


def unused_key_warnings(
    config: Mapping[str, object], protocol: SecurityProtocol, sasl: SaslSettings | None
) -> list[str]:
    """Why security keys set in ``config`` are used by neither kgroup nor librdkafka.

    One message per finding, naming the keys (never a value) and what to set
    instead. The classic case: credentials set and ``security.protocol``
    forgotten, so the connection is plaintext and unauthenticated. librdkafka
    warns for two of these (``sasl.mechanism`` without a SASL protocol,
    ``sasl.username`` with a mechanism that takes no username); the Java
    client's only notice is its log line of configurations "supplied but not
    used". Neither refuses them, so kgroup does not either.
    """
    found: list[str] = []
    if not protocol.uses_sasl:
        keys = _set_keys(config, (*_SASL_KEYS, *_HTTPS_KEYS))
        if keys:
            wanted = "SASL_SSL" if protocol.uses_tls else "SASL_SSL or SASL_PLAINTEXT"
            found.append(
                f"{_names(keys)} set but security.protocol is {protocol.value}: "
                f"{_pronoun(keys)} not used and connections are not authenticated; "
                f"set security.protocol={wanted}, or remove {_object(keys)}"
            )
    if not protocol.uses_tls:
        keys = _set_keys(config, _TLS_KEYS)
        if keys:
            wanted = "SASL_SSL" if protocol.uses_sasl else "SSL or SASL_SSL"
            found.append(
                f"{_names(keys)} set but security.protocol is {protocol.value}: "
                f"{_pronoun(keys)} not used and connections are not encrypted; "
                f"set security.protocol={wanted}, or remove {_object(keys)}"
            )
    if not protocol.uses_sasl or sasl is None:
        return found
    mechanism = sasl.mechanism.value
    if sasl.mechanism is not SaslMechanism.OAUTHBEARER:
        keys = _set_keys(config, _OAUTH_KEYS)
        if keys:
            found.append(
                f"{_names(keys)} set but sasl.mechanism is {mechanism}: {_pronoun(keys)} used "
                f"only with OAUTHBEARER, and {mechanism} authenticates with sasl.username and "
                f"sasl.password; remove {_object(keys)}, or set sasl.mechanism=OAUTHBEARER"
            )
        return found
    keys = _set_keys(config, ("sasl.username", "sasl.password"))
    if keys:
        found.append(
            f"{_names(keys)} set but sasl.mechanism is OAUTHBEARER: {_pronoun(keys)} used only "
            "by PLAIN and SCRAM (as in librdkafka); OAUTHBEARER tokens come from oauth_cb or "
            f"sasl.oauthbearer.method=oidc; remove {_object(keys)}"
        )
    oauth = sasl.oauthbearer
    if oauth is not None and oauth.method is OAuthBearerMethod.OIDC:
        keys = _set_keys(config, ("sasl.oauthbearer.config",))
        if keys:
            found.append(
                "sasl.oauthbearer.config is set but sasl.oauthbearer.method is oidc: it is "
                "handed only to oauth_cb, and the OIDC token request is made from "
                "sasl.oauthbearer.client.id, .client.secret, .scope and .extensions; remove it"
            )
    elif oauth is not None:
        keys = _set_keys(config, _OIDC_ONLY_KEYS)
        if keys:
            found.append(
                f"{_names(keys)} set but sasl.oauthbearer.method is default (tokens from "
                f"oauth_cb): {_pronoun(keys)} used only with sasl.oauthbearer.method=oidc; "
                f"remove {_object(keys)}, or set sasl.oauthbearer.method=oidc without oauth_cb"
            )
    return found


def _set_keys(config: Mapping[str, object], keys: Iterable[str]) -> list[str]:
    return [key for key in keys if config.get(key) is not None]


def _names(keys: list[str]) -> str:
    return f"{keys[0]} is" if len(keys) == 1 else f"{', '.join(keys)} are"


def _pronoun(keys: list[str]) -> str:
    return "it is" if len(keys) == 1 else "they are"


def _object(keys: list[str]) -> str:
    return "it" if len(keys) == 1 else "them"


def _oauth_settings(config: Mapping[str, object]) -> OAuthBearerSettings:
    method = _choice(
        OAuthBearerMethod,
        config.get("sasl.oauthbearer.method", "default"),
        "sasl.oauthbearer.method",
    )
    callback = config.get("oauth_cb")
    if callback is not None and not callable(callback):
        raise ConfigError("oauth_cb must be a callable: config_str -> (token, expiry_seconds)")
    extensions: dict[str, str] = {}
    raw_ext = _optional_text(config, "sasl.oauthbearer.extensions")
    if raw_ext is not None:
        for item in raw_ext.split(","):
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ConfigError(
                    "sasl.oauthbearer.extensions must look like key=value,key2=value2"
                )
            extensions[name.strip()] = value.strip()
    settings = OAuthBearerSettings(
        method=method,
        callback=callback,
        config=_optional_text(config, "sasl.oauthbearer.config"),
        token_endpoint_url=_optional_text(config, "sasl.oauthbearer.token.endpoint.url"),
        client_id=_optional_text(config, "sasl.oauthbearer.client.id"),
        client_secret=_optional_secret(config, "sasl.oauthbearer.client.secret"),
        scope=_optional_text(config, "sasl.oauthbearer.scope"),
        extensions=MappingProxyType(extensions),
        https_ca_location=_optional_text(config, "https.ca.location"),
        https_ca_pem=_optional_text(config, "https.ca.pem"),
    )
    if settings.https_ca_location is not None and settings.https_ca_pem is not None:
        raise ConfigError("set https.ca.location or https.ca.pem, not both")
    location = settings.https_ca_location
    if location is not None and location != "probe" and not os.path.exists(location):
        raise ConfigError(f"https.ca.location={location!r} does not exist")
    if method is OAuthBearerMethod.DEFAULT:
        if extensions:
            # Accepted (confluent-kafka configs carry it) but, as in librdkafka,
            # used only by the OIDC source: a callback's token carries the
            # extensions the callback returns, on kgroup's connections and the
            # data plane's alike. librdkafka ignores it silently; kgroup says so.
            _log.warning(
                "sasl.oauthbearer.extensions is used only with sasl.oauthbearer.method=oidc "
                "(as in librdkafka); with oauth_cb, return the extensions from the callback: "
                "(token, expiry, principal, {name: value})"
            )
        if callback is None:
            raise ConfigError(
                "sasl.mechanism=OAUTHBEARER needs a token source: set oauth_cb (a callable "
                "returning (token, expiry_epoch_seconds)) or sasl.oauthbearer.method=oidc "
                "with sasl.oauthbearer.token.endpoint.url, .client.id and .client.secret"
            )
    else:
        if callback is not None:
            raise ConfigError(
                "oauth_cb and sasl.oauthbearer.method=oidc are two token sources; choose one"
            )
        missing = [
            key
            for key, value in (
                ("sasl.oauthbearer.token.endpoint.url", settings.token_endpoint_url),
                ("sasl.oauthbearer.client.id", settings.client_id),
                ("sasl.oauthbearer.client.secret", settings.client_secret),
            )
            if value is None
        ]
        if missing:
            raise ConfigError("sasl.oauthbearer.method=oidc needs " + ", ".join(missing))
        url = settings.token_endpoint_url or ""
        if not url.startswith(("https://", "http://")):
            raise ConfigError(
                "sasl.oauthbearer.token.endpoint.url must be an http:// or https:// URL"
            )
        # Load the CA now, so a bad one fails at construction naming its key.
        settings.create_https_context()
    return settings


def explain_denial(
    error: BrokerError,
    *,
    group: str | None = None,
    topics: Iterable[str] = (),
    operation: str | None = None,
) -> BrokerError:
    """``error`` with a message naming the denied resource and operation, if it is an ACL denial.

    Brokers often send authorization failures without a message; this says
    which group or topics and what a consumer needs there. Other errors are
    returned unchanged.
    """
    if not isinstance(error, AuthorizationError) or (group and group in (error.message or "")):
        return error
    broker_says = f" (broker: {error.message})" if error.message else ""
    if error.name == "GROUP_AUTHORIZATION_FAILED":
        detail = (
            f"{operation or 'READ'} on group {group!r} denied to the authenticated principal; "
            f"a consumer needs READ (which implies DESCRIBE) on its group: add an ACL"
        )
    elif error.name == "TOPIC_AUTHORIZATION_FAILED":
        names = ", ".join(repr(t) for t in sorted(set(topics))) or "a subscribed topic"
        detail = (
            f"{operation or 'READ/DESCRIBE'} on topic {names} denied to the authenticated "
            "principal; a consumer needs READ (which implies DESCRIBE) on its topics: add an ACL"
        )
    elif error.name == "CLUSTER_AUTHORIZATION_FAILED":
        detail = f"{operation or 'the operation'} on the cluster denied to the principal"
    else:
        detail = f"{operation or 'the operation'} denied to the principal"
    return type(error)(error.code, error.name, error.retriable, detail + broker_says)
