"""Every security key kgroup accepts reaches the data plane with the same meaning.

``SecurityConfig`` is parsed once and rendered back into librdkafka's keys for
the data plane (``librdkafka_config``). A key accepted (``SECURITY_KEYS``) but
forgotten in the rendering would have librdkafka fetch over a different
security setup than kgroup's own connections. The table below gives, for
every accepted key, a valid config that sets it and what librdkafka must
receive; a key without a row fails the first test.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, Final

import confluent_kafka
import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgroup import ConsumerConfig
from kgroup.config_security import (
    SECRET_KEYS,
    SECURITY_KEYS,
    SaslMechanism,
    SecurityConfig,
)
from kgroup.dataplane.librdkafka import validate_passthrough
from kgroup.errors import AuthenticationError, ConfigError
from kgroup.transport.sasl import CallbackTokenSource, OidcTokenSource

PASSWORD = " pa55 word "  # secrets keep their spaces
CLIENT_SECRET = "client-secret"
KEY_PASSWORD = "key-pass"
# A closed local port: librdkafka may try it (bootstrap, OIDC endpoint) but
# nothing outside this machine is contacted.
NOWHERE = "127.0.0.1:9"
TOKEN_URL = f"http://{NOWHERE}/oauth2/token"


def oauth_cb(_config: str | None) -> tuple[str, float]:
    return ("token", time.time() + 60)


@dataclass(frozen=True, repr=False)
class Files:
    """Test TLS material: a CA, a client certificate and its key (plain and encrypted)."""

    ca: Path
    ca_pem: str
    cert: Path
    cert_pem: str
    key: Path
    key_pem: str
    encrypted_key: Path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    ca = trustme.CA()
    leaf = ca.issue_cert("alice")
    base = tmp_path_factory.mktemp("parity-tls")
    (base / "ca.pem").write_bytes(ca.cert_pem.bytes())
    (base / "cert.pem").write_bytes(leaf.cert_chain_pems[0].bytes())
    (base / "key.pem").write_bytes(leaf.private_key_pem.bytes())
    key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), password=None)
    (base / "encrypted.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
        )
    )
    return Files(
        ca=base / "ca.pem",
        ca_pem=ca.cert_pem.bytes().decode(),
        cert=base / "cert.pem",
        cert_pem=leaf.cert_chain_pems[0].bytes().decode(),
        key=base / "key.pem",
        key_pem=leaf.private_key_pem.bytes().decode(),
        encrypted_key=base / "encrypted.pem",
    )


# --- the companions a key needs --------------------------------------------------------

TLS: Final = {"security.protocol": "SSL"}
PLAIN: Final = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": PASSWORD,
}
CALLBACK: Final = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "OAUTHBEARER",
    "oauth_cb": oauth_cb,
}
OIDC: Final = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "OAUTHBEARER",
    "sasl.oauthbearer.method": "oidc",
    "sasl.oauthbearer.token.endpoint.url": TOKEN_URL,
    "sasl.oauthbearer.client.id": "orders-app",
    "sasl.oauthbearer.client.secret": CLIENT_SECRET,
}


def _client_cert(f: Files) -> dict[str, object]:
    return {**TLS, "ssl.certificate.location": str(f.cert), "ssl.key.location": str(f.key)}


@dataclass(frozen=True)
class Case:
    """One accepted key: the value set, its companions, what librdkafka receives."""

    value: Callable[[Files], object]
    companions: Callable[[Files], Mapping[str, object]]
    librdkafka_key: str
    rendered: Callable[[Files], object]


def _same(value: object) -> Callable[[Files], object]:
    return lambda _f: value


CASES: Final[Mapping[str, Case]] = {
    # Enumerations are matched whatever their case and rendered in librdkafka's.
    "security.protocol": Case(
        _same("sasl_ssl"), lambda _f: PLAIN, "security.protocol", _same("SASL_SSL")
    ),
    "ssl.ca.location": Case(
        lambda f: str(f.ca), lambda _f: TLS, "ssl.ca.location", lambda f: str(f.ca)
    ),
    # PEM text loses its surrounding white space, which PEM does not need.
    "ssl.ca.pem": Case(
        lambda f: f.ca_pem, lambda _f: TLS, "ssl.ca.pem", lambda f: f.ca_pem.strip()
    ),
    "ssl.certificate.location": Case(
        lambda f: str(f.cert),
        lambda f: {**TLS, "ssl.key.location": str(f.key)},
        "ssl.certificate.location",
        lambda f: str(f.cert),
    ),
    "ssl.certificate.pem": Case(
        lambda f: f.cert_pem,
        lambda f: {**TLS, "ssl.key.location": str(f.key)},
        "ssl.certificate.pem",
        lambda f: f.cert_pem.strip(),
    ),
    "ssl.key.location": Case(
        lambda f: str(f.key),
        lambda f: {**TLS, "ssl.certificate.location": str(f.cert)},
        "ssl.key.location",
        lambda f: str(f.key),
    ),
    # A secret: kept exactly (spaces too) and revealed for librdkafka.
    "ssl.key.pem": Case(
        lambda f: f.key_pem,
        lambda f: {**TLS, "ssl.certificate.location": str(f.cert)},
        "ssl.key.pem",
        lambda f: f.key_pem,
    ),
    "ssl.key.password": Case(
        _same(KEY_PASSWORD),
        lambda f: {
            **TLS,
            "ssl.certificate.location": str(f.cert),
            "ssl.key.location": str(f.encrypted_key),
        },
        "ssl.key.password",
        _same(KEY_PASSWORD),
    ),
    "ssl.endpoint.identification.algorithm": Case(
        _same("NONE"), lambda _f: TLS, "ssl.endpoint.identification.algorithm", _same("none")
    ),
    # Booleans as librdkafka reads them: the text true/false.
    "enable.ssl.certificate.verification": Case(
        _same(False), lambda _f: TLS, "enable.ssl.certificate.verification", _same("false")
    ),
    "sasl.mechanism": Case(
        _same("scram-sha-512"), lambda _f: PLAIN, "sasl.mechanism", _same("SCRAM-SHA-512")
    ),
    # The plural spelling is librdkafka's alias of the singular.
    "sasl.mechanisms": Case(
        _same("SCRAM-SHA-256"),
        lambda _f: {k: v for k, v in PLAIN.items() if k != "sasl.mechanism"},
        "sasl.mechanism",
        _same("SCRAM-SHA-256"),
    ),
    "sasl.username": Case(_same("bob"), lambda _f: PLAIN, "sasl.username", _same("bob")),
    "sasl.password": Case(
        _same("  s3cret "), lambda _f: PLAIN, "sasl.password", _same("  s3cret ")
    ),
    "sasl.oauthbearer.method": Case(
        _same("OIDC"), lambda _f: OIDC, "sasl.oauthbearer.method", _same("oidc")
    ),
    "sasl.oauthbearer.config": Case(
        _same("scope=orders"), lambda _f: CALLBACK, "sasl.oauthbearer.config", _same("scope=orders")
    ),
    "sasl.oauthbearer.token.endpoint.url": Case(
        _same(f"http://{NOWHERE}/other"),
        lambda _f: OIDC,
        "sasl.oauthbearer.token.endpoint.url",
        _same(f"http://{NOWHERE}/other"),
    ),
    "sasl.oauthbearer.client.id": Case(
        _same("billing"), lambda _f: OIDC, "sasl.oauthbearer.client.id", _same("billing")
    ),
    "sasl.oauthbearer.client.secret": Case(
        _same(" other secret"),
        lambda _f: OIDC,
        "sasl.oauthbearer.client.secret",
        _same(" other secret"),
    ),
    "sasl.oauthbearer.scope": Case(
        _same("kafka"), lambda _f: OIDC, "sasl.oauthbearer.scope", _same("kafka")
    ),
    # librdkafka reads the extensions only with method=oidc (kgroup too, see below).
    "sasl.oauthbearer.extensions": Case(
        _same(" tenant = t1 ,pool=p2"),
        lambda _f: OIDC,
        "sasl.oauthbearer.extensions",
        _same("tenant=t1,pool=p2"),
    ),
    "oauth_cb": Case(_same(oauth_cb), lambda _f: CALLBACK, "oauth_cb", _same(oauth_cb)),
    # The CA librdkafka's OIDC fetch trusts for the token endpoint (kgroup's too).
    "https.ca.location": Case(
        lambda f: str(f.ca), lambda _f: OIDC, "https.ca.location", lambda f: str(f.ca)
    ),
    "https.ca.pem": Case(
        lambda f: f.ca_pem, lambda _f: OIDC, "https.ca.pem", lambda f: f.ca_pem.strip()
    ),
}

# What librdkafka_probe_config documents it leaves out: the token sources,
# which librdkafka would start (call oauth_cb, fetch an OIDC token) at creation.
PROBE_OMITS_ALWAYS: Final = frozenset({"oauth_cb"})
PROBE_OMITS_FOR_OAUTHBEARER: Final = frozenset(
    {
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.scope",
    }
)

# Rendered when their group of keys is in use although not set: librdkafka's
# own defaults, written out.
RENDERED_DEFAULTS: Final[Mapping[str, str]] = {
    "security.protocol": "PLAINTEXT",
    "ssl.endpoint.identification.algorithm": "https",
    "enable.ssl.certificate.verification": "true",
    "sasl.oauthbearer.method": "default",
}


class _Silent:
    def log(self, *_args: object) -> None:
        pass


def librdkafka_accepts(conf: Mapping[str, object]) -> None:
    """Create (never poll) a librdkafka consumer with ``conf``; raises if refused.

    librdkafka parses every property, checks the combination and loads the TLS
    files while it creates the client, before any connection.
    """
    confluent_kafka.Consumer(
        {**conf, "bootstrap.servers": NOWHERE, "group.id": "parity", "logger": _Silent()}
    ).close()


def case_config(key: str, f: Files) -> dict[str, object]:
    case = CASES[key]
    return {**case.companions(f), key: case.value(f)}


def test_the_table_covers_every_accepted_key_exactly() -> None:
    # A key added to SECURITY_KEYS needs a row here (and a rendering), and a
    # row for a key kgroup no longer accepts is stale.
    assert set(CASES) == set(SECURITY_KEYS)


@pytest.mark.parametrize("key", sorted(SECURITY_KEYS))
def test_each_accepted_key_reaches_librdkafka_with_its_meaning(key: str, files: Files) -> None:
    case = CASES.get(key)
    assert case is not None, f"{key} is accepted but has no parity case: add one to CASES"
    rendered = SecurityConfig.from_config(case_config(key, files)).librdkafka_config()
    assert case.librdkafka_key in rendered, f"{key} does not reach librdkafka"
    if key == "oauth_cb":
        assert rendered["oauth_cb"] is oauth_cb
    else:
        assert rendered[case.librdkafka_key] == case.rendered(files)


@pytest.mark.parametrize("key", sorted(SECURITY_KEYS))
def test_every_companion_reaches_librdkafka_too(key: str, files: Files) -> None:
    # Each key of each case's config, not only the one under test, is rendered
    # under its librdkafka key; nothing else is rendered but written-out defaults.
    conf = case_config(key, files)
    rendered = SecurityConfig.from_config(conf).librdkafka_config()
    expected = {CASES[k].librdkafka_key for k in conf}
    extra = set(rendered) - expected
    assert {k: rendered[k] for k in extra} == {k: RENDERED_DEFAULTS[k] for k in extra}
    assert expected <= set(rendered)


def _expected_probe(security: SecurityConfig) -> dict[str, str]:
    omitted = set(PROBE_OMITS_ALWAYS)
    if security.sasl is not None and security.sasl.mechanism is SaslMechanism.OAUTHBEARER:
        omitted |= PROBE_OMITS_FOR_OAUTHBEARER
    return {k: str(v) for k, v in security.librdkafka_config().items() if k not in omitted}


@pytest.mark.parametrize("key", sorted(SECURITY_KEYS))
def test_the_probe_leaves_out_the_token_sources_and_nothing_else(key: str, files: Files) -> None:
    security = SecurityConfig.from_config(case_config(key, files))
    assert security.librdkafka_probe_config() == _expected_probe(security)


@pytest.mark.parametrize("key", sorted(SECURITY_KEYS))
def test_librdkafka_accepts_the_probe_config(key: str, files: Files) -> None:
    librdkafka_accepts(
        SecurityConfig.from_config(case_config(key, files)).librdkafka_probe_config()
    )


@pytest.mark.parametrize("key", sorted(SECURITY_KEYS))
def test_librdkafka_accepts_the_data_plane_config(key: str, files: Files) -> None:
    # The whole rendering, OIDC keys included (the token endpoint is a closed
    # local port). oauth_cb stays out: librdkafka would call it at creation.
    rendered = SecurityConfig.from_config(case_config(key, files)).librdkafka_config()
    librdkafka_accepts({k: v for k, v in rendered.items() if k != "oauth_cb"})


# --- random valid configs ------------------------------------------------------------


@st.composite
def valid_configs(draw: st.DrawFn, f: Files) -> dict[str, object]:
    """A valid config: a protocol, its SASL family, and any subset of the optional keys."""
    protocol = draw(st.sampled_from(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]))
    conf: dict[str, object] = {}
    if draw(st.booleans()) or protocol != "PLAINTEXT":
        conf["security.protocol"] = draw(st.sampled_from([protocol, protocol.lower()]))
    tls_options: dict[str, object] = {
        "ssl.ca.location": str(f.ca),
        "ssl.ca.pem": f.ca_pem,
        "ssl.endpoint.identification.algorithm": draw(st.sampled_from(["https", "none"])),
        "enable.ssl.certificate.verification": draw(st.sampled_from([True, "false", "TRUE"])),
    }
    for key in draw(st.lists(st.sampled_from(sorted(tls_options)), unique=True)):
        conf[key] = tls_options[key]
    client_cert = draw(st.sampled_from(["none", "files", "pem", "encrypted"]))
    if client_cert == "files":
        conf.update({"ssl.certificate.location": str(f.cert), "ssl.key.location": str(f.key)})
    elif client_cert == "pem":
        conf.update({"ssl.certificate.pem": f.cert_pem, "ssl.key.pem": f.key_pem})
    elif client_cert == "encrypted":
        conf.update(
            {
                "ssl.certificate.location": str(f.cert),
                "ssl.key.location": str(f.encrypted_key),
                "ssl.key.password": KEY_PASSWORD,
            }
        )
    if "SASL" in protocol:
        family = draw(st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "cb", "oidc"]))
        spelling = draw(st.sampled_from(["sasl.mechanism", "sasl.mechanisms"]))
        if family in ("cb", "oidc"):
            source = CALLBACK if family == "cb" else OIDC
            conf.update({k: v for k, v in source.items() if k.startswith(("sasl.", "oauth_"))})
            conf.pop("sasl.mechanism")
            conf[spelling] = "OAUTHBEARER"
            if family == "cb" and draw(st.booleans()):
                conf["sasl.oauthbearer.config"] = "principal=alice"
            if family == "oidc":
                for key, value in (
                    ("sasl.oauthbearer.scope", "kafka"),
                    ("sasl.oauthbearer.extensions", "tenant=t1"),
                ):
                    if draw(st.booleans()):
                        conf[key] = value
                https_ca = draw(st.sampled_from(["none", "https.ca.location", "https.ca.pem"]))
                if https_ca != "none":
                    conf[https_ca] = str(f.ca) if https_ca == "https.ca.location" else f.ca_pem
        else:
            conf.update({spelling: family, "sasl.username": "alice", "sasl.password": PASSWORD})
    return conf


ENUM_KEYS: Final = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.oauthbearer.method",
        "ssl.endpoint.identification.algorithm",
    }
)


def _same_meaning(key: str, given: object, rendered: object) -> bool:
    """Whether librdkafka's ``rendered`` value means what the user's ``given`` one did."""
    if key == "oauth_cb":
        return rendered is given
    if key in SECRET_KEYS:
        return rendered == given  # revealed, spaces and all
    if key in ENUM_KEYS:
        return isinstance(rendered, str) and rendered.casefold() == str(given).casefold()
    if key == "enable.ssl.certificate.verification":
        return rendered == str(given).lower()
    if key == "sasl.oauthbearer.extensions":
        return rendered == "".join(str(given).split())
    return rendered == str(given).strip()


def _librdkafka_keys(conf: Mapping[str, object]) -> set[str]:
    return {CASES[k].librdkafka_key for k in conf}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_valid_configs_reach_librdkafka_whole(data: st.DataObject, files: Files) -> None:
    conf = data.draw(valid_configs(files))
    security = SecurityConfig.from_config(conf)
    rendered = security.librdkafka_config()
    # SASL keys are for SASL protocols only, on both sides.
    sasl_keys = {k for k in SECURITY_KEYS if k.startswith("sasl.") or k == "oauth_cb"}
    uses_sasl = security.protocol.uses_sasl
    wanted = _librdkafka_keys({k: v for k, v in conf.items() if uses_sasl or k not in sasl_keys})
    extra = set(rendered) - wanted
    assert wanted <= set(rendered)
    assert {k: rendered[k] for k in extra} == {k: RENDERED_DEFAULTS[k] for k in extra}
    for key, value in conf.items():
        librdkafka_key = CASES[key].librdkafka_key
        if librdkafka_key in rendered:
            assert _same_meaning(key, value, rendered[librdkafka_key]), key
    assert security.librdkafka_probe_config() == _expected_probe(security)
    librdkafka_accepts(security.librdkafka_probe_config())


# --- gaps this guard found ----------------------------------------------------------


def test_consumer_config_accepts_a_valid_oidc_config() -> None:
    # The config probe once took the user's own sasl.oauthbearer.method=oidc
    # next to the probe config, which leaves the client secret out; librdkafka
    # refused the pair ("client.secret is mandatory"), so a valid OIDC consumer
    # could not be created.
    conf = {**OIDC, "bootstrap.servers": NOWHERE, "group.id": "g", "sasl.oauthbearer.scope": "k"}
    config = ConsumerConfig.from_dict(conf, validate_passthrough=validate_passthrough)
    assert config.security.librdkafka_config()["sasl.oauthbearer.client.secret"] == CLIENT_SECRET


def test_the_config_probe_gets_the_security_keys_as_the_data_plane_does() -> None:
    seen: list[dict[str, str]] = []
    conf = {**OIDC, "bootstrap.servers": NOWHERE, "group.id": "g", "fetch.min.bytes": 1}
    config = ConsumerConfig.from_dict(conf, validate_passthrough=lambda k: seen.append(dict(k)))
    assert seen == [{"fetch.min.bytes": "1", **config.security.librdkafka_probe_config()}]


@pytest.mark.anyio
async def test_callback_tokens_carry_only_the_callbacks_extensions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # librdkafka reads sasl.oauthbearer.extensions only with method=oidc, and
    # confluent-kafka hands it exactly what oauth_cb returns: the data plane
    # sends the callback's extensions alone, so kgroup's connections must too.
    def with_extensions(_config: str | None) -> tuple[str, float, str, dict[str, str]]:
        return ("token", time.time() + 60, "alice", {"trace": "1"})

    with caplog.at_level(logging.WARNING, logger="kgroup.transport.security"):
        security = SecurityConfig.from_config(
            {**CALLBACK, "oauth_cb": with_extensions, "sasl.oauthbearer.extensions": "tenant=t1"}
        )
    assert "sasl.oauthbearer.extensions is used only with sasl.oauthbearer.method=oidc" in (
        caplog.text
    )
    assert security.sasl is not None
    assert security.sasl.oauthbearer is not None
    token = await CallbackTokenSource(security.sasl.oauthbearer).token("b:1")
    assert dict(token.extensions) == {"trace": "1"}
    bare = SecurityConfig.from_config({**CALLBACK, "sasl.oauthbearer.extensions": "tenant=t1"})
    assert bare.sasl is not None
    assert bare.sasl.oauthbearer is not None
    plain_token = await CallbackTokenSource(bare.sasl.oauthbearer).token("b:1")
    assert dict(plain_token.extensions) == {}


def test_no_warning_when_extensions_are_used_or_absent(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kgroup.transport.security"):
        SecurityConfig.from_config({**OIDC, "sasl.oauthbearer.extensions": "tenant=t1"})
        SecurityConfig.from_config(CALLBACK)
    assert caplog.records == []


def test_secret_keys_are_accepted_keys() -> None:
    assert SECRET_KEYS <= SECURITY_KEYS


def test_every_rendered_value_but_oauth_cb_is_text(files: Files) -> None:
    # librdkafka takes every property as text; only oauth_cb is an object.
    for key in CASES:
        rendered = SecurityConfig.from_config(case_config(key, files)).librdkafka_config()
        assert all(isinstance(v, str) for k, v in rendered.items() if k != "oauth_cb"), key


# --- the OIDC token endpoint's CA (https.ca.*) ------------------------------------------


class _TokenEndpoint(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"access_token": "opaque-token", "expires_in": 60}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def private_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def https_token_endpoint(private_ca: trustme.CA) -> Iterator[str]:
    """An OIDC token endpoint served over TLS with a certificate of ``private_ca``."""
    server = HTTPServer(("127.0.0.1", 0), _TokenEndpoint)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    private_ca.issue_cert("127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/token"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def _oidc_source(url: str, **https: object) -> OidcTokenSource:
    security = SecurityConfig.from_config(
        {**OIDC, "sasl.oauthbearer.token.endpoint.url": url, **https}
    )
    assert security.sasl is not None
    assert security.sasl.oauthbearer is not None
    return OidcTokenSource(security.sasl.oauthbearer, timeout=5)


@pytest.mark.anyio
@pytest.mark.parametrize("key", ["https.ca.location", "https.ca.pem"])
async def test_the_oidc_source_trusts_the_https_ca_librdkafka_trusts(
    key: str, https_token_endpoint: str, private_ca: trustme.CA, tmp_path: Path
) -> None:
    # https.ca.* once reached only librdkafka (kgroup did not know the keys):
    # the data plane trusted a private CA for the token endpoint, kgroup's
    # connections did not, and failed to authenticate.
    ca_file = tmp_path / "idp-ca.pem"
    private_ca.cert_pem.write_to_path(str(ca_file))
    value = str(ca_file) if key == "https.ca.location" else private_ca.cert_pem.bytes().decode()
    token = await _oidc_source(https_token_endpoint, **{key: value}).token("b:1")
    assert token.value.reveal() == "opaque-token"


@pytest.mark.anyio
async def test_without_the_https_ca_a_private_ca_endpoint_is_refused(
    https_token_endpoint: str,
) -> None:
    with pytest.raises(AuthenticationError, match="token endpoint"):
        await _oidc_source(https_token_endpoint).token("b:1")


@pytest.mark.parametrize(
    ("https", "message"),
    [
        ({"https.ca.location": "/nonexistent/ca.pem"}, r"https\.ca\.location=.* does not exist"),
        ({"https.ca.pem": "not a certificate"}, r"https\.ca\.pem could not be loaded"),
        (
            {"https.ca.location": "probe", "https.ca.pem": "x"},
            r"https\.ca\.location or https\.ca\.pem, not both",
        ),
    ],
)
def test_bad_https_ca_settings_name_the_key(https: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SecurityConfig.from_config({**OIDC, **https})


def test_probe_means_the_system_trust_store_as_in_librdkafka() -> None:
    security = SecurityConfig.from_config({**OIDC, "https.ca.location": "probe"})
    assert security.librdkafka_config()["https.ca.location"] == "probe"
    assert security.sasl is not None
    assert security.sasl.oauthbearer is not None
    context = security.sasl.oauthbearer.create_https_context()
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname


# --- the telemetry sink's producer connects as the consumer does ---------------------


def _telemetry_config(conf: Mapping[str, object]) -> Any:
    config = ConsumerConfig.from_dict(
        {"bootstrap.servers": NOWHERE, "group.id": "g", "telemetry.sink": "kafka:t", **conf}
    )
    assert config.telemetry is not None
    return config


@pytest.mark.parametrize("key", sorted(SECURITY_KEYS))
def test_the_telemetry_producer_gets_every_security_key(key: str, files: Files) -> None:
    # The Kafka sink's producer once copied only the raw security.*, sasl.* and
    # ssl.* keys: enable.ssl.certificate.verification, https.ca.* and oauth_cb
    # never reached it, so it connected differently from the consumer.
    config = _telemetry_config(case_config(key, files))
    rendered = config.security.librdkafka_config()
    producer = dict(config.telemetry.producer_config)
    if config.telemetry.oauth_cb is not None:
        producer["oauth_cb"] = config.telemetry.oauth_cb
    assert {k: v for k, v in producer.items() if k != "bootstrap.servers"} == {
        k: v if k == "oauth_cb" else str(v) for k, v in rendered.items()
    }


def test_the_telemetry_producer_keeps_its_own_overrides(files: Files) -> None:
    config = _telemetry_config(
        {
            **{k: v for k, v in PLAIN.items() if k != "sasl.mechanism"},
            "sasl.mechanisms": "plain",
            "telemetry.kafka.sasl.username": "telemetry",
        }
    )
    producer = config.telemetry.producer_config
    assert producer["sasl.username"] == "telemetry"
    assert producer["sasl.mechanism"] == "PLAIN"
    assert "sasl.mechanisms" not in producer


@pytest.mark.parametrize("spelling", ["sasl.mechanism", "sasl.mechanisms"])
def test_a_telemetry_override_of_the_mechanism_wins_under_either_spelling(spelling: str) -> None:
    # librdkafka reads both names as one setting, the last given winning: the
    # consumer's rendered sasl.mechanism, added after a telemetry.kafka.
    # sasl.mechanisms override, once replaced it.
    config = _telemetry_config({**PLAIN, f"telemetry.kafka.{spelling}": "SCRAM-SHA-256"})
    producer = dict(config.telemetry.producer_config)
    mechanisms = {k: v for k, v in producer.items() if k in ("sasl.mechanism", "sasl.mechanisms")}
    assert mechanisms == {spelling: "SCRAM-SHA-256"}


def test_the_consumer_config_repr_shows_no_telemetry_producer_secret(files: Files) -> None:
    # The producer settings hold the password; the telemetry config's repr once
    # printed them, and with it the consumer config's repr and str.
    config = _telemetry_config(
        {
            **PLAIN,
            **_client_cert(files),
            "ssl.key.location": str(files.encrypted_key),
            "ssl.key.password": KEY_PASSWORD,
        }
    )
    for shown in (repr(config), str(config), repr(config.telemetry)):
        assert PASSWORD not in shown
        assert KEY_PASSWORD not in shown


def test_the_telemetry_producer_takes_the_consumers_oauth_cb() -> None:
    config = _telemetry_config(CALLBACK)
    assert config.telemetry.oauth_cb is oauth_cb
    sink = config.telemetry.open_sink()  # librdkafka accepts the whole producer config
    sink.close(timeout=0)
