"""Secured Kafka brokers for tests: TLS, mutual TLS, SASL, ACLs.

:class:`SecuredKafkaBroker` starts a :class:`~kgroup.testing.KafkaBroker`
(a local JVM) with, next to its open ``PLAINTEXT`` listener (for the harness
itself: readiness, topics, ACLs), four secured client listeners:

==================  ==============  ==============================================
listener            protocol        authentication
==================  ==============  ==============================================
``SASL_PLAINTEXT``  SASL_PLAINTEXT  PLAIN, SCRAM-SHA-256/512, OAUTHBEARER (unsecured JWS)
``SASL_SSL``        SASL_SSL        PLAIN, SCRAM-SHA-256/512 (not OAUTHBEARER)
``SSL``             SSL             none (server certificate only)
``MTLS``            SSL             client certificate required; principal = its CN
==================  ==============  ==============================================

A test CA is generated on the fly (``trustme``); the broker's certificate
names ``localhost`` only, and the secured listeners are advertised as
``localhost``. Users get random passwords, valid for PLAIN and SCRAM (SCRAM
credentials are written at format time with ``kafka-storage format
--add-scram``). The standard authorizer is on: ``User:ANONYMOUS`` (the
plaintext listener and the controllers) and ``User:admin`` are super users,
everyone else needs ACLs (:meth:`SecuredKafkaBroker.allow`)::

    with SecuredKafkaBroker(users=("alice", "bob")) as broker:
        broker.allow("alice", group="orders-app", topic="orders")
        conf = broker.client_config("sasl-scram", user="alice")
        consumer = kgroup.Consumer({**conf, "group.id": "orders-app"})

:meth:`~SecuredKafkaBroker.client_config` returns configs with real secrets,
for code; :func:`redacted` masks them for printing.
"""

from __future__ import annotations

import base64
import enum
import json
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Self

from kgroup.config_security import SECRET_KEYS
from kgroup.errors import HarnessError
from kgroup.testing._lifecycle import StartsOnEnter
from kgroup.testing.config import pick_free_ports
from kgroup.testing.process import KafkaBroker

__all__ = [
    "SECURED_LISTENERS",
    "SecuredKafkaBroker",
    "SecurityProfile",
    "TestCertificateAuthority",
    "print_client_config",
    "redacted",
    "unsecured_jwt",
]

SECURED_LISTENERS: Final = ("SASL_PLAINTEXT", "SASL_SSL", "SSL", "MTLS")
_PROTOCOL_MAP: Final = (
    "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
    "SASL_SSL:SASL_SSL,SSL:SSL,MTLS:SSL"
)
_ADVERTISED_HOST: Final = "localhost"
_PLAIN_MODULE: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE: Final = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class SecurityProfile(enum.Enum):
    """Ready-made client set-ups (``kgroup broker up --security``)."""

    SASL_SCRAM = "sasl-scram"
    """SASL_SSL with SCRAM-SHA-512."""
    SASL_PLAIN = "sasl-plain"
    """SASL_PLAINTEXT with PLAIN."""
    TLS = "tls"
    """SSL with the test CA (no client certificate)."""
    MTLS = "mtls"
    """SSL with a client certificate (mutual TLS)."""


def redacted(config: Mapping[str, object]) -> dict[str, object]:
    """``config`` with every secret value replaced by ``***``, for printing."""
    return {key: ("***" if key in SECRET_KEYS else value) for key, value in config.items()}


def print_client_config(
    broker: SecuredKafkaBroker, profile: SecurityProfile | str, directory: Path
) -> Path:
    """For ``kgroup broker up --security``: print ``profile``'s client config, secrets masked.

    The full config (secrets included) goes to ``client-config.json`` in
    ``directory``, readable by the owner only; its path is printed on stderr.
    """
    config = broker.client_config(profile)
    path = directory / "client-config.json"
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    path.chmod(0o600)
    print(json.dumps(redacted(config)))
    print(f"kgroup: the full client config (with secrets) is in {path}", file=sys.stderr)
    return path


def unsecured_jwt(
    subject: str, lifetime: float, *, scope: str | None = None, issued_at: float | None = None
) -> tuple[str, float]:
    """An unsecured JWS (``alg: none``) as Kafka's default OAUTHBEARER validator accepts it.

    Returns ``(token, expiry_epoch_seconds)``, the shape ``oauth_cb`` returns.
    For tests only: anyone can mint such a token.
    """
    now = time.time() if issued_at is None else issued_at
    expiry = now + lifetime

    def part(data: Mapping[str, object]) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    claims: dict[str, object] = {"sub": subject, "iat": int(now), "exp": int(expiry)}
    if scope is not None:
        claims["scope"] = scope
    return f"{part({'alg': 'none'})}.{part(claims)}.", float(int(expiry))


def _trustme() -> Any:
    try:
        import trustme  # noqa: PLC0415 - an optional test dependency
    except ImportError:
        raise HarnessError(
            "secured brokers need the 'trustme' package: pip install 'kgroup[test]'"
        ) from None
    return trustme


def _pkcs8(key_pem: bytes) -> bytes:
    # Kafka's PEM key stores read PKCS#8 keys only; trustme writes SEC1 EC keys.
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class TestCertificateAuthority:
    """A throw-away CA writing PEM files into ``directory``."""

    __test__ = False  # not a pytest test class despite its name

    def __init__(self, directory: Path) -> None:
        self._ca = _trustme().CA()
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.ca_path = directory / "ca.pem"
        self._ca.cert_pem.write_to_path(str(self.ca_path))

    @property
    def ca_pem(self) -> str:
        """The CA certificate as PEM text."""
        return str(self._ca.cert_pem.bytes().decode())

    def issue(self, name: str, *hosts: str, common_name: str | None = None) -> tuple[Path, Path]:
        """Issue a certificate; return the paths of its PEM chain and PKCS#8 key files."""
        leaf = self._ca.issue_cert(*(hosts or (name,)), common_name=common_name or name)
        cert_path = self.directory / f"{name}.crt.pem"
        key_path = self.directory / f"{name}.key.pem"
        cert_path.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
        key_path.write_bytes(_pkcs8(leaf.private_key_pem.bytes()))
        key_path.chmod(0o600)
        return cert_path, key_path


class SecuredKafkaBroker(StartsOnEnter):
    """A :class:`~kgroup.testing.KafkaBroker` with TLS, SASL and ACLs; see the module doc.

    Args:
        users: SASL users to create (random passwords; PLAIN and SCRAM).
        overrides: more broker settings.
        oauth_reauth_ms: ``connections.max.reauth.ms`` for OAUTHBEARER on the
            SASL_PLAINTEXT listener: sessions end at this age or when the token
            expires, whichever is first, so clients must re-authenticate
            (KIP-368). None: sessions do not expire.
        authorizer: run the standard authorizer (ACLs).
        work_dir: where certificates, keys and the broker's files go (default: a
            temporary directory removed by :meth:`close`).
        **broker_options: passed to :class:`~kgroup.testing.KafkaBroker`.
    """

    def __init__(
        self,
        users: Iterable[str] = ("alice",),
        *,
        overrides: Mapping[str, str] | None = None,
        oauth_reauth_ms: int | None = None,
        authorizer: bool = True,
        work_dir: Path | str | None = None,
        **broker_options: Any,
    ) -> None:
        self._owns_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="kgroup-secured-"))
        self.passwords: dict[str, str] = {"admin": secrets.token_urlsafe(16)}
        for user in users:
            if not user.isidentifier():
                raise HarnessError(f"user names must be identifiers, got {user!r}")
            self.passwords[user] = secrets.token_urlsafe(16)
        self.ca = TestCertificateAuthority(self.work_dir / "tls")
        cert, key = self.ca.issue("broker", _ADVERTISED_HOST, common_name=_ADVERTISED_HOST)
        ports = pick_free_ports(len(SECURED_LISTENERS))
        self.ports: dict[str, int] = dict(zip(SECURED_LISTENERS, ports, strict=True))
        props = self._security_properties(cert, key, oauth_reauth_ms, authorizer)
        props.update({str(k): str(v) for k, v in (overrides or {}).items()})
        self.broker = KafkaBroker(
            props,
            work_dir=self.work_dir / "kafka",
            extra_listeners={name: (_ADVERTISED_HOST, port) for name, port in self.ports.items()},
            format_args=self._scram_format_args(),
            **broker_options,
        )

    # --- configuration --------------------------------------------------------

    def _security_properties(
        self, cert: Path, key: Path, oauth_reauth_ms: int | None, authorizer: bool
    ) -> dict[str, str]:
        plain_users = " ".join(f'user_{u}="{p}"' for u, p in self.passwords.items())
        props = {
            "listener.security.protocol.map": _PROTOCOL_MAP,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self._keystore(cert, key)),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca.ca_path),
            "listener.name.mtls.ssl.client.auth": "required",
            # The principal of a client certificate is its CN, not the whole DN.
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": (
                "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
            ),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
                f'{_OAUTH_MODULE} required unsecuredLoginStringClaim_sub="admin";'
            ),
        }
        for listener in ("sasl_plaintext", "sasl_ssl"):
            props[f"listener.name.{listener}.plain.sasl.jaas.config"] = (
                f"{_PLAIN_MODULE} required {plain_users};"
            )
            for mechanism in ("scram-sha-256", "scram-sha-512"):
                props[f"listener.name.{listener}.{mechanism}.sasl.jaas.config"] = (
                    f"{_SCRAM_MODULE} required;"
                )
        if oauth_reauth_ms is not None:
            props["listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms"] = str(
                oauth_reauth_ms
            )
        if authorizer:
            props["authorizer.class.name"] = (
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            )
            props["super.users"] = "User:admin;User:ANONYMOUS"
        return props

    def _keystore(self, cert: Path, key: Path) -> Path:
        store = self.ca.directory / "broker.keystore.pem"
        store.write_bytes(key.read_bytes() + cert.read_bytes())
        store.chmod(0o600)
        return store

    def _scram_format_args(self) -> list[str]:
        args: list[str] = []
        for user, password in self.passwords.items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        return args

    # --- life cycle -----------------------------------------------------------

    def start(self) -> Self:
        """Start the broker (see :meth:`kgroup.testing.KafkaBroker.start`)."""
        self.broker.start()
        return self

    def close(self) -> None:
        """Stop the broker and remove its files (if this object created the directory)."""
        self.broker.close()
        if self._owns_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        # Unlike a bare broker, this handle owns files (keystores, JAAS) made before the
        # start, so a failed start must still remove them.
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    # --- addresses and client configs -------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """The open PLAINTEXT listener (super user ``ANONYMOUS``): for the harness itself."""
        return self.broker.bootstrap_servers

    def address(self, listener: str) -> str:
        """``localhost:<port>`` of a secured listener (``SASL_SSL``, ``MTLS`` ...)."""
        return f"{_ADVERTISED_HOST}:{self.ports[listener.upper()]}"

    def client_certificate(self, user: str) -> tuple[Path, Path]:
        """A client certificate whose CN (and so principal) is ``user``: (cert, key) paths."""
        cert = self.ca.directory / f"client-{user}.crt.pem"
        key = self.ca.directory / f"client-{user}.key.pem"
        if not cert.exists():
            issued = self.ca.issue(f"client-{user}", user, common_name=user)
            assert issued == (cert, key)
        return cert, key

    def client_config(
        self,
        profile: SecurityProfile | str,
        *,
        user: str = "alice",
        mechanism: str | None = None,
    ) -> dict[str, object]:
        """The client settings for ``profile`` as ``user`` (secrets included).

        ``mechanism`` replaces the profile's SASL mechanism (``SCRAM-SHA-256`` ...).
        """
        chosen = SecurityProfile(profile)
        ca = str(self.ca.ca_path)
        if chosen is SecurityProfile.TLS:
            return {
                "bootstrap.servers": self.address("SSL"),
                "security.protocol": "SSL",
                "ssl.ca.location": ca,
            }
        if chosen is SecurityProfile.MTLS:
            cert, key = self.client_certificate(user)
            return {
                "bootstrap.servers": self.address("MTLS"),
                "security.protocol": "SSL",
                "ssl.ca.location": ca,
                "ssl.certificate.location": str(cert),
                "ssl.key.location": str(key),
            }
        if chosen is SecurityProfile.SASL_PLAIN:
            conf: dict[str, object] = {
                "bootstrap.servers": self.address("SASL_PLAINTEXT"),
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism or "PLAIN",
            }
        else:
            conf = {
                "bootstrap.servers": self.address("SASL_SSL"),
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism or "SCRAM-SHA-512",
                "ssl.ca.location": ca,
            }
        conf["sasl.username"] = user
        conf["sasl.password"] = self.passwords[user]
        return conf

    def oauth_config(self, oauth_cb: Any) -> dict[str, object]:
        """OAUTHBEARER on the SASL_PLAINTEXT listener with ``oauth_cb`` as token source."""
        return {
            "bootstrap.servers": self.address("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": oauth_cb,
        }

    # --- ACLs -------------------------------------------------------------------

    def allow(
        self,
        user: str,
        *,
        group: str | None = None,
        topic: str | None = None,
        operations: Sequence[str] = ("READ",),
        timeout: float = 30.0,
    ) -> None:
        """Grant ``User:<user>`` ``operations`` (ALLOW) on a group and/or a topic.

        READ implies DESCRIBE, which is what a consumer needs on its group and
        topics. Created through the Admin API on the open listener.

        Raises:
            HarnessError: the broker refused the ACLs.
        """
        ck = _admin_module()
        AclBinding, AclOperation = ck.AclBinding, ck.AclOperation  # noqa: N806
        ResourceType, ResourcePatternType = ck.ResourceType, ck.ResourcePatternType  # noqa: N806
        AclPermissionType = ck.AclPermissionType  # noqa: N806

        bindings = []
        for kind, name in ((ResourceType.GROUP, group), (ResourceType.TOPIC, topic)):
            if name is None:
                continue
            for operation in operations:
                bindings.append(
                    AclBinding(
                        kind,
                        name,
                        ResourcePatternType.LITERAL,
                        f"User:{user}",
                        "*",
                        AclOperation[operation.upper()],
                        AclPermissionType.ALLOW,
                    )
                )
        if not bindings:
            raise HarnessError("allow() needs a group or a topic")
        admin = ck.AdminClient({"bootstrap.servers": self.bootstrap_servers})
        for binding, future in admin.create_acls(bindings).items():
            try:
                future.result(timeout=timeout)
            except Exception as exc:
                raise HarnessError(f"creating the ACL {binding} failed: {exc}") from exc
        # ACLs travel through the metadata log; the broker applies them a moment later.
        self._await_acls(admin, len(bindings), user, timeout)

    def _await_acls(self, admin: Any, count: int, user: str, timeout: float) -> None:
        ck = _admin_module()
        wanted = ck.AclBindingFilter(
            ck.ResourceType.ANY,
            None,
            ck.ResourcePatternType.ANY,
            f"User:{user}",
            None,
            ck.AclOperation.ANY,
            ck.AclPermissionType.ANY,
        )
        deadline = time.monotonic() + timeout
        while True:
            found = admin.describe_acls(wanted).result(timeout=timeout)
            if len(found) >= count or time.monotonic() >= deadline:
                return
            time.sleep(0.1)


def _admin_module() -> Any:
    # confluent-kafka is the data plane's library; its Admin API creates the ACLs.
    import confluent_kafka.admin  # noqa: PLC0415

    return confluent_kafka.admin
