"""SecurityConfig: parsing the security keys, secrets kept hidden, the data plane's copy."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from kgroup import ConsumerConfig
from kgroup.config_security import (
    EndpointIdentification,
    OAuthBearerMethod,
    SaslMechanism,
    Secret,
    SecurityConfig,
    SecurityProtocol,
)
from kgroup.dataplane.librdkafka import validate_passthrough
from kgroup.errors import AuthenticationError, ConfigError
from kgroup.testing.security import redacted, unsecured_jwt
from kgroup.transport.sasl import CallbackTokenSource, OidcTokenSource, SaslAuthenticator

BASE = {"bootstrap.servers": "localhost:9092", "group.id": "g"}
PASSWORD = "pa55-word-not-to-be-seen"
CLIENT_SECRET = "client-secret-not-to-be-seen"


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_files(ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("tls")
    leaf = ca.issue_cert("alice")
    paths = {"ca": base / "ca.pem", "cert": base / "cert.pem", "key": base / "key.pem"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    leaf.cert_chain_pems[0].write_to_path(str(paths["cert"]))
    leaf.private_key_pem.write_to_path(str(paths["key"]))
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    paths["encrypted_key"] = base / "encrypted.pem"
    paths["encrypted_key"].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"key-pass"),
        )
    )
    return paths


# --- Secret -----------------------------------------------------------------------------


def test_secret_never_shows_its_value() -> None:
    secret = Secret(PASSWORD)
    assert PASSWORD not in repr(secret)
    assert PASSWORD not in str(secret)
    assert PASSWORD not in f"{secret} {secret!r}"
    assert secret.reveal() == PASSWORD
    assert secret == Secret(PASSWORD)
    assert secret != Secret("other")
    with pytest.raises(TypeError):
        Secret(123)  # type: ignore[arg-type]


# --- parsing ---------------------------------------------------------------------------


def test_plaintext_is_the_default() -> None:
    config = SecurityConfig.from_config({})
    assert config.protocol is SecurityProtocol.PLAINTEXT
    assert config.tls is None
    assert config.sasl is None
    assert config.create_ssl_context() is None


def test_scram_over_tls_keeps_the_password_secret(tls_files: dict[str, Path]) -> None:
    config = SecurityConfig.from_config(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "scram-sha-512",
            "sasl.username": "alice",
            "sasl.password": PASSWORD,
            "ssl.ca.location": str(tls_files["ca"]),
        }
    )
    assert config.protocol is SecurityProtocol.SASL_SSL
    assert config.sasl is not None
    assert config.sasl.mechanism is SaslMechanism.SCRAM_SHA_512
    assert config.sasl.password == Secret(PASSWORD)
    assert PASSWORD not in repr(config)
    assert PASSWORD not in config.describe()
    assert isinstance(config.create_ssl_context(), ssl.SSLContext)


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"security.protocol": "SASL_PLAINTEXT"}, "needs sasl.mechanism"),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"},
            "GSSAPI is not supported",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "a"},
            "needs sasl.username and sasl.password",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"},
            "needs a token source",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.client.id": "id",
            },
            "sasl.oauthbearer.token.endpoint.url",
        ),
        (
            {
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.method": "oidc",
                "oauth_cb": lambda _c: ("t", 1.0),
            },
            "choose one",
        ),
        ({"sasl.mechanism": "PLAIN", "sasl.mechanisms": "SCRAM-SHA-256"}, "disagree"),
        ({"ssl.truststore.location": "/x.jks"}, "Java client key"),
        ({"ssl.engine.location": "/x.so"}, "not a security setting kgroup implements"),
        ({"ssl.ca.location": "/no/such/ca.pem"}, "does not exist"),
        ({"ssl.endpoint.identification.algorithm": "dns"}, "https or none"),
        ({"enable.ssl.certificate.verification": "maybe"}, "true or false"),
        ({"sasl.mechanism": "OAUTHBEARER", "oauth_cb": "not callable"}, "callable"),
    ],
)
def test_bad_security_settings_name_the_key(conf: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SecurityConfig.from_config(conf)


def test_a_certificate_needs_its_key(tls_files: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match="ssl.key.location"):
        SecurityConfig.from_config({"ssl.certificate.location": str(tls_files["cert"])})
    with pytest.raises(ConfigError, match="ssl.certificate"):
        SecurityConfig.from_config({"ssl.key.location": str(tls_files["key"])})


def test_bad_values_of_secret_keys_are_not_echoed() -> None:
    with pytest.raises(ConfigError) as caught:
        SecurityConfig.from_config({"sasl.mechanism": "PLAIN", "sasl.password": " "})
    assert "sasl.password" in str(caught.value)


# --- TLS contexts ----------------------------------------------------------------------


def test_mutual_tls_files_load(tls_files: dict[str, Path]) -> None:
    config = SecurityConfig.from_config(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": str(tls_files["ca"]),
            "ssl.certificate.location": str(tls_files["cert"]),
            "ssl.key.location": str(tls_files["key"]),
        }
    )
    context = config.create_ssl_context()
    assert context is not None
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname


def test_pem_strings_and_an_encrypted_key_load(tls_files: dict[str, Path]) -> None:
    config = SecurityConfig.from_config(
        {
            "security.protocol": "SSL",
            "ssl.ca.pem": tls_files["ca"].read_text(),
            "ssl.certificate.pem": tls_files["cert"].read_text(),
            "ssl.key.pem": tls_files["encrypted_key"].read_text(),
            "ssl.key.password": "key-pass",
        }
    )
    assert config.create_ssl_context() is not None
    assert "key-pass" not in repr(config)
    assert "PRIVATE KEY" not in repr(config)


def test_wrong_key_password_is_a_config_error(tls_files: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match="do not load") as caught:
        SecurityConfig.from_config(
            {
                "security.protocol": "SSL",
                "ssl.certificate.location": str(tls_files["cert"]),
                "ssl.key.location": str(tls_files["encrypted_key"]),
                "ssl.key.password": "wrong-pass",
            }
        )
    assert "wrong-pass" not in str(caught.value)


def test_ca_that_is_not_pem_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ConfigError, match="ssl.ca.location"):
        SecurityConfig.from_config({"security.protocol": "SSL", "ssl.ca.location": str(bad)})


def test_ca_directory_and_no_hostname_check(tls_files: dict[str, Path]) -> None:
    config = SecurityConfig.from_config(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": str(tls_files["ca"].parent),
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert config.tls is not None
    assert config.tls.endpoint_identification is EndpointIdentification.NONE
    context = config.create_ssl_context()
    assert context is not None
    assert not context.check_hostname
    assert context.verify_mode is ssl.CERT_REQUIRED


def test_system_trust_store_when_no_ca_is_given() -> None:
    context = SecurityConfig.from_config({"security.protocol": "SSL"}).create_ssl_context()
    assert context is not None
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname


# --- the data plane gets the same settings ---------------------------------------------


def test_librdkafka_gets_the_same_settings_with_secrets(tls_files: dict[str, Path]) -> None:
    def oauth_cb(_config: str | None) -> tuple[str, float]:
        return ("t", 1.0)

    config = SecurityConfig.from_config(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": oauth_cb,
            "sasl.oauthbearer.config": "scope=x",
            "sasl.oauthbearer.extensions": "tenant=t1",
            "ssl.ca.location": str(tls_files["ca"]),
            "ssl.certificate.location": str(tls_files["cert"]),
            "ssl.key.location": str(tls_files["encrypted_key"]),
            "ssl.key.password": "key-pass",
        }
    )
    assert config.librdkafka_config() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "default",
        "oauth_cb": oauth_cb,
        "sasl.oauthbearer.config": "scope=x",
        "sasl.oauthbearer.extensions": "tenant=t1",
        "ssl.ca.location": str(tls_files["ca"]),
        "ssl.certificate.location": str(tls_files["cert"]),
        "ssl.key.location": str(tls_files["encrypted_key"]),
        "ssl.key.password": "key-pass",
        "ssl.endpoint.identification.algorithm": "https",
        "enable.ssl.certificate.verification": "true",
    }
    probe = config.librdkafka_probe_config()
    assert "oauth_cb" not in probe
    assert all(isinstance(v, str) for v in probe.values())


def test_consumer_config_keeps_secrets_out_of_passthrough_and_repr() -> None:
    seen: list[dict[str, str]] = []
    config = ConsumerConfig.from_dict(
        {
            **BASE,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": PASSWORD,
        },
        validate_passthrough=lambda keys: seen.append(dict(keys)),
    )
    assert "sasl.password" not in config.passthrough
    assert PASSWORD not in repr(config)
    assert PASSWORD not in str(config)
    assert config.security.sasl is not None
    assert config.security.sasl.password == Secret(PASSWORD)
    assert config.security_protocol == "SASL_PLAINTEXT"
    # librdkafka is asked about the whole set, as it will get it.
    assert seen[0]["sasl.password"] == PASSWORD
    assert seen[0]["sasl.mechanism"] == "PLAIN"


def test_data_plane_and_transport_share_one_security_config() -> None:
    config = ConsumerConfig.from_dict(
        {
            **BASE,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": PASSWORD,
        },
        validate_passthrough=validate_passthrough,
    )
    rendered = config.security.librdkafka_config()
    assert rendered["sasl.password"] == PASSWORD
    assert rendered["sasl.mechanism"] == "SCRAM-SHA-256"
    assert rendered["security.protocol"] == "SASL_PLAINTEXT"


def test_librdkafka_refusal_does_not_echo_a_secret() -> None:
    with pytest.raises(ConfigError) as caught:
        validate_passthrough({"sasl.password": PASSWORD, "fetch.wait.max.ms": "nope"})
    assert PASSWORD not in str(caught.value)


def test_redacted_masks_every_secret_key() -> None:
    shown = redacted({"sasl.password": PASSWORD, "ssl.key.password": "k", "sasl.username": "a"})
    assert shown == {"sasl.password": "***", "ssl.key.password": "***", "sasl.username": "a"}


# --- OAUTHBEARER token sources ---------------------------------------------------------


def _oauth(**conf: Any) -> Any:
    config = SecurityConfig.from_config({"sasl.mechanism": "OAUTHBEARER", **conf})
    assert config.sasl is not None
    assert config.sasl.oauthbearer is not None
    return config.sasl.oauthbearer


@pytest.mark.anyio
async def test_callback_tokens_are_cached_until_80_percent_of_their_life() -> None:
    calls: list[str | None] = []

    def oauth_cb(config: str | None) -> tuple[str, float, str, dict[str, str]]:
        calls.append(config)
        token, _expiry = unsecured_jwt("alice", 0.5)
        return token, time.time() + 0.5, "alice", {"tenant": "t1"}

    source = CallbackTokenSource(_oauth(oauth_cb=oauth_cb, **{"sasl.oauthbearer.config": "c"}))
    first = await source.token("b:1")
    assert await source.token("b:1") is first
    assert calls == ["c"]
    assert first.principal == "alice"
    assert dict(first.extensions) == {"tenant": "t1"}
    await anyio.sleep(0.45)
    assert await source.token("b:1") is not first
    assert len(calls) == 2


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("result", "message"),
    [
        ("just-a-token", "must return"),
        (("", 1.0), "empty"),
        (("t", "soon"), "non-numeric"),
    ],
)
async def test_bad_oauth_cb_results_are_authentication_errors(result: Any, message: str) -> None:
    source = CallbackTokenSource(_oauth(oauth_cb=lambda _c: result))
    with pytest.raises(AuthenticationError, match=message):
        await source.token("b:1")


@pytest.mark.anyio
async def test_oauth_cb_exceptions_are_authentication_errors() -> None:
    def oauth_cb(_config: str | None) -> tuple[str, float]:
        raise RuntimeError("idp down")

    with pytest.raises(AuthenticationError, match="oauth_cb raised RuntimeError"):
        await CallbackTokenSource(_oauth(oauth_cb=oauth_cb)).token("b:1")


class _TokenEndpoint(BaseHTTPRequestHandler):
    """A loopback OAuth token endpoint for the client-credentials grant."""

    seen: list[dict[str, str]] = []  # noqa: RUF012 - shared with the test on purpose

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        form = dict(p.split("=", 1) for p in self.rfile.read(length).decode().split("&"))
        auth = base64.b64decode(self.headers["Authorization"].split()[1]).decode()
        type(self).seen.append({**form, "auth": auth})
        if auth != f"kgroup:{CLIENT_SECRET}":
            self._reply(401, {"error": "invalid_client"})
            return
        token, _expiry = unsecured_jwt("svc-kgroup", 120)
        self._reply(200, {"access_token": token, "token_type": "bearer", "expires_in": 120})

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def token_endpoint() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _TokenEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _TokenEndpoint.seen.clear()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/token"
    finally:
        server.shutdown()
        thread.join()


def _oidc(url: str, secret: str) -> Any:
    return _oauth(
        **{
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": url,
            "sasl.oauthbearer.client.id": "kgroup",
            "sasl.oauthbearer.client.secret": secret,
            "sasl.oauthbearer.scope": "kafka",
        }
    )


@pytest.mark.anyio
async def test_oidc_client_credentials_grant(token_endpoint: str) -> None:
    settings = _oidc(token_endpoint, CLIENT_SECRET)
    assert settings.method is OAuthBearerMethod.OIDC
    token = await OidcTokenSource(settings).token("b:1")
    assert token.principal == "svc-kgroup"
    assert token.expires_at > time.time() + 100
    assert _TokenEndpoint.seen == [
        {"grant_type": "client_credentials", "scope": "kafka", "auth": f"kgroup:{CLIENT_SECRET}"}
    ]
    assert token.value.reveal() not in repr(token)


@pytest.mark.anyio
async def test_oidc_refusal_names_the_endpoint_without_the_secret(token_endpoint: str) -> None:
    with pytest.raises(AuthenticationError, match="HTTP 401") as caught:
        await OidcTokenSource(_oidc(token_endpoint, "wrong-secret")).token("b:1")
    assert token_endpoint in str(caught.value)
    assert "invalid_client" in str(caught.value)
    assert "wrong-secret" not in str(caught.value)


def test_sasl_authenticator_repr_shows_no_secret() -> None:
    config = SecurityConfig.from_config(
        {"sasl.mechanism": "PLAIN", "sasl.username": "a", "sasl.password": PASSWORD}
    )
    assert config.sasl is not None
    assert PASSWORD not in repr(SaslAuthenticator(config.sasl))


# --- the CLI ----------------------------------------------------------------------------


def test_cli_accepts_security_profiles_for_a_single_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kgroup.cli import build_parser, main  # noqa: PLC0415 - keeps the module light

    args = build_parser().parse_args(["broker", "up", "--security", "mtls"])
    assert args.security == "mtls"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["broker", "up", "--security", "kerberos"])
    monkeypatch.setenv("KGROUP_STATE_DIR", str(tmp_path))
    assert main(["broker", "up", "--security", "tls", "--nodes", "3"]) != 0
    assert "single node" in capsys.readouterr().err
