"""TLS and SASL on kgroup's connections, against in-process servers (asyncio and trio).

SASL runs against the scripted broker of ``test_transport`` with a SCRAM
server from ``scramp`` (the same library kgroup's client side uses) and PLAIN
and OAUTHBEARER checks written here; TLS against an anyio TLS listener with
``trustme`` certificates.
"""

from __future__ import annotations

import contextlib
import datetime
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
import scramp
import trustme
from anyio.abc import SocketAttribute
from anyio.streams.tls import TLSListener
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.static.primitive import i64Timedelta
from test_transport import FakeBroker, FakeConnection, brokers

from kgroup.errors import (
    AuthenticationError,
    RequestTimeoutError,
    SecurityProtocolMismatchError,
    TlsError,
    UnsupportedSaslMechanismError,
)
from kgroup.protocol import SUPPORTED_VERSIONS, RequestFrame
from kgroup.protocol.apis import VersionRange
from kgroup.protocol.sasl import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    OAuthBearerExchange,
    PlainExchange,
    ScramExchange,
)
from kgroup.transport import SecurityConfig, connect, open_stream
from kgroup.transport.sasl import SaslAuthenticator
from kgroup.transport.security import client_certificate_refusal, looks_like_tls

pytestmark = pytest.mark.anyio

PASSWORD = "s3cret-pa55word"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


# --- the mechanisms, sans-IO ------------------------------------------------------------


def test_plain_message_is_authzid_user_password() -> None:
    exchange = PlainExchange("alice", PASSWORD, broker="b:1")
    assert exchange.first() == b"\0alice\0" + PASSWORD.encode()
    assert exchange.respond(b"") is None
    assert PASSWORD not in repr(exchange)


def _scram_server(mechanism: str, password: str) -> scramp.ScramServer:
    m = scramp.ScramMechanism(mechanism)
    salt, stored, server, iterations = m.make_auth_info(password, iteration_count=4096)
    return m.make_server(lambda _user: (salt, stored, server, iterations))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_against_a_scram_server(mechanism: str) -> None:
    server = _scram_server(mechanism, PASSWORD)
    client = ScramExchange(mechanism, "alice", PASSWORD, broker="b:1")
    server.set_client_first(client.first().decode())
    final = client.respond(server.get_server_first().encode())
    assert final is not None
    server.set_client_final(final.decode())
    assert client.respond(server.get_server_final().encode()) is None
    assert PASSWORD not in repr(client)


def test_scram_server_with_another_password_is_an_authentication_error() -> None:
    server = _scram_server("SCRAM-SHA-256", "another")
    client = ScramExchange("SCRAM-SHA-256", "alice", PASSWORD, broker="b:1")
    server.set_client_first(client.first().decode())
    final = client.respond(server.get_server_first().encode())
    assert final is not None
    with pytest.raises(scramp.ScramException):
        server.set_client_final(final.decode())
    # A forged server-final (the server does not know the password) is refused too.
    with pytest.raises(AuthenticationError, match="SCRAM-SHA-256"):
        client.respond(b"v=AAAA")


def test_oauthbearer_message_carries_token_and_extensions() -> None:
    exchange = OAuthBearerExchange("tok.en.", {"tenant": "t1"}, broker="b:1")
    assert exchange.first() == b"n,,\x01auth=Bearer tok.en.\x01tenant=t1\x01\x01"
    # A refused token: the server reports JSON, the client acknowledges with ^A.
    assert exchange.respond(b'{"status":"invalid_token"}') == b"\x01"
    assert exchange.rejection == "the broker rejected the token: status invalid_token"


def test_tls_records_are_recognised() -> None:
    assert looks_like_tls(bytes([0x15, 0x03, 0x03, 0x00]))
    assert looks_like_tls(bytes([0x16, 0x03, 0x01, 0x02]))
    assert not looks_like_tls(bytes([0x00, 0x00, 0x01, 0x00]))


# --- SASL against a scripted broker -------------------------------------------------------


class SaslBroker:
    """Answers SaslHandshake/SaslAuthenticate like a broker's SASL listener."""

    def __init__(
        self,
        *,
        enabled: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"),
        password: str = PASSWORD,
        lifetime_ms: int = 0,
        sasl_listener: bool = True,
    ) -> None:
        self.enabled = enabled
        self.password = password
        self.lifetime_ms = lifetime_ms
        self.sasl_listener = sasl_listener
        self.handshakes: list[str] = []
        self.tokens: list[str] = []
        self.authenticated = 0
        self._mechanism = ""
        self._scram: scramp.ScramServer | None = None
        ranges = {int(k): v for k, v in SUPPORTED_VERSIONS.items()}
        ranges[SASL_HANDSHAKE] = VersionRange(0, 1)
        ranges[SASL_AUTHENTICATE] = VersionRange(0, 2)
        self.fake = FakeBroker(self.handle, ranges=ranges)

    async def handle(self, conn: FakeConnection, frame: RequestFrame) -> None:
        request: Any = frame.request
        key = int(frame.header.request_api_key)
        if key == SASL_HANDSHAKE:
            await conn.reply(frame, self._handshake(request.mechanism))
        elif key == SASL_AUTHENTICATE:
            await conn.reply(frame, self._authenticate(bytes(request.auth_bytes)))
        else:
            raise AssertionError(f"unexpected {request}")

    def _handshake(self, mechanism: str) -> SaslHandshakeResponse:
        self.handshakes.append(mechanism)
        self._mechanism = mechanism
        if not self.sasl_listener:
            code = ErrorCode.illegal_sasl_state
        elif mechanism in self.enabled:
            code = ErrorCode.none
            if mechanism.startswith("SCRAM"):
                self._scram = _scram_server(mechanism, self.password)
        else:
            code = ErrorCode.unsupported_sasl_mechanism
        return SaslHandshakeResponse(error_code=code, mechanisms=self.enabled)

    def _authenticate(self, data: bytes) -> SaslAuthenticateResponse:
        if self._mechanism == "PLAIN":
            ok = data.split(b"\0")[2].decode() == self.password
            return self._result(ok, b"")
        if self._mechanism == "OAUTHBEARER":
            token = data.split(b"\x01")[1].removeprefix(b"auth=Bearer ").decode()
            self.tokens.append(token)
            return self._result(True, b"")
        assert self._scram is not None
        text = data.decode()
        try:
            if text.startswith("n,"):
                self._scram.set_client_first(text)
                return self._result(None, self._scram.get_server_first().encode())
            self._scram.set_client_final(text)
            return self._result(True, self._scram.get_server_final().encode())
        except scramp.ScramException:
            return self._result(False, b"")

    def _result(self, ok: bool | None, data: bytes) -> SaslAuthenticateResponse:
        if ok is False:
            return SaslAuthenticateResponse(
                error_code=ErrorCode.sasl_authentication_failed,
                error_message="Authentication failed: Invalid username or password",
                auth_bytes=b"",
                session_lifetime=i64Timedelta.parse(datetime.timedelta(0)),
            )
        if ok:
            self.authenticated += 1
        lifetime = datetime.timedelta(milliseconds=self.lifetime_ms if ok else 0)
        return SaslAuthenticateResponse(
            error_code=ErrorCode.none,
            error_message=None,
            auth_bytes=data,
            session_lifetime=i64Timedelta.parse(lifetime),
        )


def _security(**conf: Any) -> SecurityConfig:
    return SecurityConfig.from_config({"security.protocol": "SASL_PLAINTEXT", **conf})


def _authenticator(**conf: Any) -> SaslAuthenticator:
    security = _security(**conf)
    assert security.sasl is not None
    return SaslAuthenticator(security.sasl)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_password_mechanisms_authenticate(mechanism: str) -> None:
    broker = SaslBroker()
    auth = _authenticator(
        **{"sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": PASSWORD}
    )
    async with brokers(broker.fake), connect("127.0.0.1", broker.fake.port, authenticator=auth):
        assert broker.handshakes == [mechanism]
        assert broker.authenticated == 1
        assert auth.authentications == 1


async def test_wrong_password_names_mechanism_and_broker() -> None:
    broker = SaslBroker(password="the-right-one")
    auth = _authenticator(
        **{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": PASSWORD}
    )
    async with brokers(broker.fake):
        with pytest.raises(AuthenticationError) as caught:
            async with connect("127.0.0.1", broker.fake.port, authenticator=auth):
                pass
    error = caught.value
    assert error.mechanism == "SCRAM-SHA-512"
    assert error.broker == f"127.0.0.1:{broker.fake.port}"
    assert "Invalid username or password" in str(error)
    assert PASSWORD not in str(error)


async def test_disabled_mechanism_lists_the_enabled_ones() -> None:
    broker = SaslBroker(enabled=("SCRAM-SHA-256", "SCRAM-SHA-512"))
    auth = _authenticator(
        **{"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": PASSWORD}
    )
    async with brokers(broker.fake):
        with pytest.raises(UnsupportedSaslMechanismError, match="SCRAM-SHA-256, SCRAM-SHA-512"):
            async with connect("127.0.0.1", broker.fake.port, authenticator=auth):
                pass


async def test_sasl_on_a_listener_without_sasl_is_explained() -> None:
    broker = SaslBroker(sasl_listener=False)
    auth = _authenticator(
        **{"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": PASSWORD}
    )
    async with brokers(broker.fake):
        with pytest.raises(SecurityProtocolMismatchError, match="does not use SASL"):
            async with connect("127.0.0.1", broker.fake.port, authenticator=auth):
                pass


async def test_session_is_renewed_before_it_expires_and_requests_keep_flowing() -> None:
    tokens = iter(range(1000))

    def oauth_cb(_config: str | None) -> tuple[str, float]:
        # A fresh token each call: a token lives 0.1 s, so each renewal needs one.
        return f"token-{next(tokens)}", time.time() + 0.1

    broker = SaslBroker(lifetime_ms=200)
    auth = _authenticator(**{"sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb})
    async with (
        brokers(broker.fake),
        connect("127.0.0.1", broker.fake.port, authenticator=auth) as conn,
    ):
        with anyio.fail_after(10):
            while conn.reauthentications < 3:
                await anyio.sleep(0.05)
    assert broker.authenticated >= 4
    # Each session got a token that was fresh for it.
    assert len(set(broker.tokens)) == len(broker.tokens)


# --- TLS against an in-process TLS server ----------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@asynccontextmanager
async def tls_server(
    ca: trustme.CA, *, hosts: tuple[str, ...] = ("localhost",), require_client: bool = False
) -> AsyncIterator[int]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*hosts).configure_cert(context)
    if require_client:
        ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    listener = TLSListener(tcp, context, standard_compatible=False)

    async def serve(stream: anyio.abc.ByteStream) -> None:
        with contextlib.suppress(Exception):  # the client side is under test
            await stream.receive()

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield tcp.extra(SocketAttribute.local_port)
        tg.cancel_scope.cancel()


@asynccontextmanager
async def plaintext_server(reply: bytes = b"") -> AsyncIterator[int]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)

    async def serve(stream: anyio.abc.ByteStream) -> None:
        await stream.receive()
        if reply:
            await stream.send(reply)
        await stream.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield listener.extra(SocketAttribute.local_port)
        tg.cancel_scope.cancel()


def _tls(ca_path: Path | None, **conf: Any) -> SecurityConfig:
    settings: dict[str, Any] = {"security.protocol": "SSL", **conf}
    if ca_path is not None:
        settings["ssl.ca.location"] = str(ca_path)
    return SecurityConfig.from_config(settings)


@pytest.fixture
def ca_path(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


async def test_tls_connects_with_the_private_ca(ca: trustme.CA, ca_path: Path) -> None:
    async with tls_server(ca) as port:
        stream = await open_stream("localhost", port, _tls(ca_path), timeout=5)
        await stream.aclose()


async def test_unknown_ca_is_a_tls_error(ca: trustme.CA, tmp_path: Path) -> None:
    other = tmp_path / "other.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    async with tls_server(ca) as port:
        with pytest.raises(TlsError, match="unknown CA") as caught:
            await open_stream("localhost", port, _tls(other), timeout=5)
    assert caught.value.broker == f"localhost:{port}"


async def test_hostname_mismatch_is_a_tls_error(ca: trustme.CA, ca_path: Path) -> None:
    async with tls_server(ca, hosts=("broker.example",)) as port:
        with pytest.raises(TlsError, match="hostname mismatch"):
            await open_stream("localhost", port, _tls(ca_path), timeout=5)
        # Unless the user turned the hostname check off.
        unchecked = _tls(ca_path, **{"ssl.endpoint.identification.algorithm": "none"})
        stream = await open_stream("localhost", port, unchecked, timeout=5)
        await stream.aclose()


async def test_expired_certificate_is_a_tls_error(ca_path: Path, ca: trustme.CA) -> None:
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(
        "localhost", not_before=past, not_after=past + datetime.timedelta(days=1)
    ).configure_cert(context)
    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(TLSListener(tcp, context).serve, _drain)
        with pytest.raises(TlsError, match="expired"):
            await open_stream(
                "localhost", tcp.extra(SocketAttribute.local_port), _tls(ca_path), timeout=5
            )
        tg.cancel_scope.cancel()


async def _drain(stream: anyio.abc.ByteStream) -> None:
    with contextlib.suppress(Exception):
        await stream.receive()


def test_refused_client_certificate_is_explained(ca_path: Path) -> None:
    # TLS 1.3 servers refuse a client certificate after the client's handshake
    # is done: the alert arrives on the first read, wrapped by anyio.
    security = _tls(ca_path)
    alert = ssl.SSLError(1, "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] alert certificate required")
    wrapped = anyio.BrokenResourceError()
    wrapped.__cause__ = alert
    error = client_certificate_refusal("b:1", wrapped, security)
    assert isinstance(error, TlsError)
    assert "requires a client certificate" in str(error)
    assert client_certificate_refusal("b:1", anyio.BrokenResourceError(), security) is None


async def test_tls_client_on_a_plaintext_port_is_explained(ca_path: Path) -> None:
    async with plaintext_server() as port:
        with pytest.raises(SecurityProtocolMismatchError, match="not a TLS listener"):
            await open_stream("localhost", port, _tls(ca_path), timeout=5)


async def test_plaintext_client_on_a_tls_port_is_explained() -> None:
    # What a TLS listener sends back to a Kafka frame: a TLS alert record.
    alert = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32])
    async with plaintext_server(alert) as port:
        with pytest.raises(SecurityProtocolMismatchError, match="security.protocol=SSL"):
            async with connect("127.0.0.1", port, connect_timeout=5):
                pass


async def test_a_silent_broker_is_a_timeout_not_a_stall() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    accepted: list[anyio.abc.ByteStream] = []

    async def hold(stream: anyio.abc.ByteStream) -> None:
        accepted.append(stream)
        await anyio.sleep_forever()

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, hold)
        port = listener.extra(SocketAttribute.local_port)
        started = anyio.current_time()
        with pytest.raises(RequestTimeoutError, match="within 0.5s"):
            async with connect("127.0.0.1", port, connect_timeout=0.5, request_timeout=30):
                pass
        assert anyio.current_time() - started < 5
        tg.cancel_scope.cancel()
