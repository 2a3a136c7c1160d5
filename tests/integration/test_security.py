"""Secured clusters: TLS, mutual TLS, SASL (PLAIN, SCRAM, OAUTHBEARER) and ACLs on a real broker.

One secured broker serves the module (see :mod:`kgroup.testing.security`): an
open PLAINTEXT listener for the harness (topics, producing, ACLs) and
SASL_PLAINTEXT, SASL_SSL, SSL and mutual-TLS listeners for the consumers under
test. The standard authorizer is on, so a consumer authenticated as ``alice``
gets through only because ACLs name ``User:alice`` -- for kgroup's own
requests (group READ: heartbeats, offsets) and for the data plane's fetches
(topic READ) alike.

Every log record (DEBUG and up) and every error message of the module is kept;
the last test greps them for the module's secrets.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import produce, text

import kgroup
from kgroup import Consumer
from kgroup.errors import (
    AuthenticationError,
    GroupAuthorizationFailedError,
    KgroupError,
    SecurityProtocolMismatchError,
    TlsError,
    TopicAuthorizationFailedError,
    UnsupportedSaslMechanismError,
)
from kgroup.testing import create_topic
from kgroup.testing.pytest_plugin import MakeGroupId
from kgroup.testing.security import (
    SecuredKafkaBroker,
    TestCertificateAuthority,
    unsecured_jwt,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from peers import PeerGroup, balanced, check_exclusive

pytestmark = pytest.mark.integration

# Several tests share this budget: a security failure must surface this fast.
ERROR_DEADLINE = 20.0


class _Captured(logging.Handler):
    """Keeps every log record of the module, formatted, for the secrets test."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        with self._guard:
            self.lines.append(line)


CAPTURED = _Captured()
ERRORS: list[str] = []
"""str() and repr() of every error the module's consumers raised, and other shown text."""
SECRETS: list[str] = []


def _remember(exc: BaseException) -> BaseException:
    ERRORS.extend([str(exc), repr(exc)])
    return exc


@pytest.fixture(scope="module")
def secured() -> Iterator[SecuredKafkaBroker]:
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(CAPTURED)
    root.setLevel(logging.DEBUG)
    # The kgroup loggers too: an earlier test in this process (a CLI command run
    # in-process, say) may have left "kgroup" at WARNING, hiding every DEBUG line.
    ours = logging.getLogger("kgroup")
    our_level = ours.level
    ours.setLevel(logging.DEBUG)
    try:
        # OAUTHBEARER sessions end at the token's expiry, so clients must
        # re-authenticate (KIP-368) during a run longer than a token's life.
        with SecuredKafkaBroker(users=("alice", "bob"), oauth_reauth_ms=60_000) as broker:
            SECRETS.extend(broker.passwords.values())
            yield broker
    finally:
        root.removeHandler(CAPTURED)
        root.setLevel(old_level)
        ours.setLevel(our_level)


def _topic(broker: SecuredKafkaBroker, name: str, records: int, partitions: int = 3) -> set[str]:
    create_topic(broker.bootstrap_servers, name, partitions=partitions)
    return produce(broker.bootstrap_servers, name, partitions, records)


def _consume_all(conf: dict[str, Any], topic: str, want: set[str], timeout: float = 60) -> None:
    got: set[str] = set()
    with Consumer(conf) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while not want <= got and time.monotonic() < deadline:
            got.update(text(m) for m in consumer.consume(500, 0.2))
        assert consumer.assignment(), "the member held no partition"
    assert want <= got, f"missing {len(want - got)} of {len(want)} records"


def _poll_for(consumer: Consumer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.2)


def _fails_fast(conf: dict[str, Any], topic: str, error: type[KgroupError]) -> KgroupError:
    """Subscribe and poll: ``error`` must come from poll within the deadline, typed.

    Also checks that the member never held a partition it could not fetch.
    """
    started = time.monotonic()
    with Consumer(conf) as consumer:
        consumer.subscribe([topic])
        with pytest.raises(error) as caught:
            _poll_for(consumer, ERROR_DEADLINE + 5)
        elapsed = time.monotonic() - started
        # Fatal: every later poll raises it again instead of retrying.
        with pytest.raises(error):
            consumer.poll(0)
        assert not consumer.assignment(), "a member that cannot go on still holds partitions"
    assert elapsed < ERROR_DEADLINE, f"took {elapsed:.1f}s"
    _remember(caught.value)
    return caught.value


PROFILES = [
    pytest.param("sasl-plain", "PLAIN", id="SASL_PLAINTEXT-PLAIN"),
    pytest.param("sasl-scram", "SCRAM-SHA-512", id="SASL_SSL-SCRAM-SHA-512"),
    pytest.param("tls", None, id="SSL-private-CA"),
    pytest.param("mtls", None, id="mutual-TLS"),
]


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
@pytest.mark.parametrize(("profile", "mechanism"), PROFILES)
def test_group_consumes_every_record(
    secured: SecuredKafkaBroker,
    make_group_id: MakeGroupId,
    profile: str,
    mechanism: str | None,
    protocol: str,
) -> None:
    group = make_group_id()
    topic = f"secured-{profile}-{protocol}"
    values = _topic(secured, topic, 60)
    # Only alice may use the group and read the topic: kgroup's group requests
    # and librdkafka's fetches both get through only when authenticated as her
    # (on the SSL listener without a client certificate the principal is
    # ANONYMOUS, a super user, and the proof is that TLS works at all).
    secured.allow("alice", group=group, topic=topic)
    conf = {
        **secured.client_config(profile, user="alice", mechanism=mechanism),
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
    }
    _consume_all(conf, topic, values)


def test_acls_stop_a_principal_without_them(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId
) -> None:
    # bob authenticates fine but has no ACL on the group: the broker checked
    # who kgroup's connection is, not just that it authenticated.
    group = make_group_id()
    topic = "secured-denied-group"
    _topic(secured, topic, 3)
    secured.allow("bob", topic=topic)
    conf = {**secured.client_config("sasl-scram", user="bob"), "group.id": group}
    error = _fails_fast(conf, topic, GroupAuthorizationFailedError)
    assert group in str(error)
    assert "READ" in str(error)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_denied_topic_is_a_typed_error_and_no_partition_is_held(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId, protocol: str
) -> None:
    group = make_group_id()
    topic = f"secured-denied-topic-{protocol}"
    _topic(secured, topic, 3)
    secured.allow("bob", group=group)
    conf = {
        **secured.client_config("sasl-plain", user="bob"),
        "group.id": group,
        "group.protocol": protocol,
    }
    error = _fails_fast(conf, topic, TopicAuthorizationFailedError)
    assert topic in str(error)


def test_denied_fetch_is_a_typed_error_naming_topic_and_read(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId
) -> None:
    # bob may use the group and describe the topic (so he joins and gets
    # partitions) but not READ it: the data plane's fetches are refused.
    group = make_group_id()
    topic = "secured-denied-read"
    _topic(secured, topic, 3)
    secured.allow("bob", group=group)
    secured.allow("bob", topic=topic, operations=("DESCRIBE",))
    conf = {
        **secured.client_config("sasl-plain", user="bob"),
        "group.id": group,
        "auto.offset.reset": "earliest",
    }
    started = time.monotonic()
    with Consumer(conf) as consumer:
        consumer.subscribe([topic])
        with pytest.raises(TopicAuthorizationFailedError) as caught:
            _poll_for(consumer, ERROR_DEADLINE + 5)
        assert time.monotonic() - started < ERROR_DEADLINE
        # Not retried into silence: every later poll raises it again.
        with pytest.raises(TopicAuthorizationFailedError):
            consumer.poll(0.5)
    _remember(caught.value)
    assert topic in str(caught.value)
    assert "READ" in str(caught.value)


def test_wrong_password_names_mechanism_and_broker(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId
) -> None:
    conf = {
        **secured.client_config("sasl-scram", user="alice"),
        "sasl.password": "not-the-password",
        "group.id": make_group_id(),
    }
    error = _fails_fast(conf, "anything", AuthenticationError)
    assert isinstance(error, AuthenticationError)
    assert error.mechanism == "SCRAM-SHA-512"
    assert secured.address("SASL_SSL") in str(error)
    assert "not-the-password" not in str(error)


def test_untrusted_ca_is_a_tls_error(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId, tmp_path: Any
) -> None:
    other = TestCertificateAuthority(tmp_path)
    conf = {
        **secured.client_config("tls"),
        "ssl.ca.location": str(other.ca_path),
        "group.id": make_group_id(),
    }
    error = _fails_fast(conf, "anything", TlsError)
    assert "unknown CA" in str(error)
    assert secured.address("SSL") in str(error)


def test_missing_client_certificate_on_a_mutual_tls_listener(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId
) -> None:
    conf = {
        **secured.client_config("tls"),
        "bootstrap.servers": secured.address("MTLS"),
        "group.id": make_group_id(),
    }
    error = _fails_fast(conf, "anything", TlsError)
    assert "client certificate" in str(error)


def test_hostname_mismatch_is_a_tls_error(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId
) -> None:
    # The broker's certificate names localhost only.
    port = secured.ports["SSL"]
    conf = {
        **secured.client_config("tls"),
        "bootstrap.servers": f"127.0.0.1:{port}",
        "group.id": make_group_id(),
    }
    error = _fails_fast(conf, "anything", TlsError)
    assert "hostname mismatch" in str(error)


def test_disabled_mechanism_lists_the_enabled_ones(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId
) -> None:
    conf = {
        **secured.client_config("sasl-scram", user="alice"),
        "sasl.mechanism": "OAUTHBEARER",
        "oauth_cb": lambda _config: unsecured_jwt("alice", 60),
        "group.id": make_group_id(),
    }
    del conf["sasl.username"], conf["sasl.password"]
    error = _fails_fast(conf, "anything", UnsupportedSaslMechanismError)
    assert isinstance(error, UnsupportedSaslMechanismError)
    assert set(error.enabled) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}


def test_plaintext_client_on_a_tls_port_is_explained(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId
) -> None:
    conf = {"bootstrap.servers": secured.address("SSL"), "group.id": make_group_id()}
    error = _fails_fast(conf, "anything", SecurityProtocolMismatchError)
    assert "security.protocol=SSL" in str(error)


def test_tls_client_on_a_plaintext_port_is_explained(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId
) -> None:
    conf = {
        **secured.client_config("tls"),
        "bootstrap.servers": secured.bootstrap_servers.replace("127.0.0.1", "localhost"),
        "group.id": make_group_id(),
    }
    error = _fails_fast(conf, "anything", SecurityProtocolMismatchError)
    assert "not a TLS listener" in str(error)


def test_oauthbearer_token_is_refreshed_during_a_run_longer_than_its_lifetime(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId
) -> None:
    lifetime = 6.0
    minted: list[str] = []
    guard = threading.Lock()

    def oauth_cb(_config: str | None) -> tuple[str, float]:
        token, expiry = unsecured_jwt("alice", lifetime)
        with guard:
            minted.append(token)
            SECRETS.append(token)
        return token, expiry

    group = make_group_id()
    topic = "secured-oauth"
    create_topic(secured.bootstrap_servers, topic, partitions=2)
    secured.allow("alice", group=group, topic=topic)
    conf = {
        **secured.oauth_config(oauth_cb),
        "group.id": group,
        "auto.offset.reset": "earliest",
    }
    want: set[str] = set()
    got: set[str] = set()
    start = time.monotonic()
    reauth_before = sum("re-authenticated" in line for line in CAPTURED.lines)
    with Consumer(conf) as consumer:
        consumer.subscribe([topic])
        batch = 0
        # Three token lifetimes: every connection must renew its session to
        # keep being served, and records keep arriving throughout.
        while time.monotonic() - start < 3 * lifetime:
            want |= produce(secured.bootstrap_servers, topic, 2, 5, start=batch * 5)
            batch += 1
            step_end = time.monotonic() + 1.0
            while time.monotonic() < step_end:
                got.update(text(m) for m in consumer.consume(100, 0.2))
        deadline = time.monotonic() + 20
        while not want <= got and time.monotonic() < deadline:
            got.update(text(m) for m in consumer.consume(100, 0.2))
        # The member is still in good standing after its first tokens expired.
        consumer.commit()
    assert want <= got, f"missing {len(want - got)} records"
    assert len(minted) >= 3, f"only {len(minted)} tokens minted in {3 * lifetime}s"
    reauths = sum("re-authenticated" in line for line in CAPTURED.lines) - reauth_before
    assert reauths >= 1, "kgroup's connections never re-authenticated"


def test_mixed_group_of_kgroup_and_confluent_kafka_on_sasl_ssl(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId
) -> None:
    from confluent_kafka import Consumer as CkConsumer  # noqa: PLC0415

    group = make_group_id()
    topic = "secured-mixed"
    values = _topic(secured, topic, 120, partitions=4)
    secured.allow("alice", group=group, topic=topic)
    conf = secured.client_config("sasl-scram", user="alice")
    peer = CkConsumer(
        {
            **conf,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    peer.subscribe([topic])
    got: set[str] = set()
    peer_got: set[str] = set()
    try:
        with Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"}) as ours:
            ours.subscribe([topic])
            deadline = time.monotonic() + 60
            both = False
            while time.monotonic() < deadline:
                got.update(text(m) for m in ours.consume(100, 0.1))
                for message in peer.consume(100, 0.1):
                    if message.error() is None:
                        peer_got.add(text(message))
                both = both or (bool(ours.assignment()) and bool(peer.assignment()))
                if both and values <= got | peer_got:
                    break
            assert both, "the two members never shared the group"
    finally:
        peer.close()
    assert values <= got | peer_got


def test_mixed_group_of_kgroup_librdkafka_and_java_members_on_sasl_ssl(
    secured: SecuredKafkaBroker, make_group_id: MakeGroupId
) -> None:
    # Each member in a process of its own (tests/peers), all on SASL_SSL with
    # SCRAM-SHA-512 as alice; the Java client takes the Java spelling of the keys.
    group = make_group_id()
    topic = "secured-peers"
    partitions, per_partition = 6, 20
    _topic(secured, topic, partitions * per_partition, partitions=partitions)
    secured.allow("alice", group=group, topic=topic)
    conf = secured.client_config("sasl-scram", user="alice")
    python_conf = {k: str(v) for k, v in conf.items() if k != "bootstrap.servers"}
    java_conf = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="alice" password="{secured.passwords["alice"]}";'
        ),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(secured.ca.ca_path),
    }
    with PeerGroup(str(conf["bootstrap.servers"])) as peers:
        members = [
            peers.start(kind, group, name=kind, config=config, topic=topic)
            for kind, config in (
                ("kgroup", python_conf),
                ("librdkafka", python_conf),
                ("java", java_conf),
            )
        ]
        peers.wait(lambda: balanced(members, partitions), 90, "three members to split 6 partitions")
        want = {(p, o) for p in range(partitions) for o in range(per_partition)}

        def consumed() -> set[tuple[int, int]]:
            return {(p, o) for m in members for p, o, _ in m.records()}

        peers.wait(lambda: consumed() >= want, 60, "every record to be consumed")
        for member in members:
            member.close()
        check_exclusive(members)


def test_printed_client_config_masks_the_password(
    secured: SecuredKafkaBroker, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    from kgroup.testing.security import print_client_config  # noqa: PLC0415

    path = print_client_config(secured, "sasl-scram", tmp_path)
    shown = capsys.readouterr()
    ERRORS.extend([shown.out, shown.err])
    assert '"sasl.password": "***"' in shown.out
    assert secured.passwords["alice"] in path.read_text()
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_zz_no_secret_in_any_log_record_or_error(secured: SecuredKafkaBroker) -> None:
    # Runs last in the module: greps what every test above logged and raised.
    conf = {
        **secured.client_config("sasl-scram", user="alice"),
        "group.id": "g",
    }
    config = kgroup.ConsumerConfig.from_dict(conf)
    ERRORS.extend([repr(config), str(config), repr(config.security)])
    secrets = [s for s in SECRETS if s]
    assert secrets, "no secrets collected"
    assert len(CAPTURED.lines) > 100, "the DEBUG log was not captured"
    for secret in secrets:
        for line in CAPTURED.lines:
            assert secret not in line, f"a secret in a log record: {line[:200]}"
        for message in ERRORS:
            assert secret not in message, f"a secret in an error or output: {message[:200]}"
