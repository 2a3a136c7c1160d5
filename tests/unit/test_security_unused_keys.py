"""Security keys that neither kgroup nor librdkafka would use are named in a WARNING.

``SecurityConfig.from_config`` accepts them (librdkafka and the Java client do
too) but says which keys are ignored and what to set instead, so that
credentials with a forgotten ``security.protocol`` do not silently give a
plaintext, unauthenticated connection. Values never appear: they may be secrets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from kgroup import ConsumerConfig
from kgroup.config_security import SecurityConfig

PASSWORD = "pa55-word-never-shown"
CLIENT_SECRET = "client-secret-never-shown"
LOGGER = "kgroup.transport.security"


def oauth_cb(_config: str | None) -> tuple[str, float]:
    return ("token", time.time() + 60)


CREDENTIALS: Mapping[str, object] = {"sasl.username": "alice", "sasl.password": PASSWORD}
PLAIN: Mapping[str, object] = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    **CREDENTIALS,
}
CALLBACK: Mapping[str, object] = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "OAUTHBEARER",
    "oauth_cb": oauth_cb,
}
OIDC: Mapping[str, object] = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "OAUTHBEARER",
    "sasl.oauthbearer.method": "oidc",
    "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:9/token",
    "sasl.oauthbearer.client.id": "orders-app",
    "sasl.oauthbearer.client.secret": CLIENT_SECRET,
}


@pytest.fixture
def ca_file(tmp_path: Path) -> str:
    # Only its existence is checked: the protocols below do not load it.
    path = tmp_path / "ca.pem"
    path.write_text("not loaded\n", encoding="utf-8")
    return str(path)


def warnings_for(config: Mapping[str, object], caplog: pytest.LogCaptureFixture) -> list[str]:
    """The WARNING messages ``from_config`` logged for ``config``; checks no value leaked."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        SecurityConfig.from_config(config)
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    for message in messages:
        assert PASSWORD not in message
        assert CLIENT_SECRET not in message
    return messages


def only(messages: list[str]) -> str:
    assert len(messages) == 1, messages
    return messages[0]


class TestCredentialsWithoutASaslProtocol:
    def test_username_and_password_with_the_default_protocol(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        # The classic mistake: credentials set, protocol forgotten.
        message = only(warnings_for(CREDENTIALS, caplog))
        assert message.startswith(
            "sasl.username, sasl.password are set but security.protocol is PLAINTEXT"
        )
        assert "not authenticated" in message
        assert "set security.protocol=SASL_SSL or SASL_PLAINTEXT" in message

    def test_a_mechanism_with_ssl_points_to_sasl_ssl(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        config = {**PLAIN, "security.protocol": "SSL"}
        message = only(warnings_for(config, caplog))
        assert message.startswith(
            "sasl.mechanism, sasl.username, sasl.password are set but security.protocol is SSL"
        )
        assert "set security.protocol=SASL_SSL," in message

    def test_oauthbearer_keys_count_too(self, caplog: pytest.LogCaptureFixture) -> None:
        config = {**OIDC, "security.protocol": "PLAINTEXT"}
        message = only(warnings_for(config, caplog))
        for key in OIDC:
            if key != "security.protocol":
                assert key in message


class TestTlsKeysWithoutATlsProtocol:
    def test_plaintext(self, caplog: pytest.LogCaptureFixture, ca_file: str) -> None:
        config = {"ssl.ca.location": ca_file, "enable.ssl.certificate.verification": "false"}
        message = only(warnings_for(config, caplog))
        assert message.startswith(
            "ssl.ca.location, enable.ssl.certificate.verification are set but "
            "security.protocol is PLAINTEXT"
        )
        assert "not encrypted" in message
        assert "set security.protocol=SSL or SASL_SSL" in message

    def test_sasl_plaintext_points_to_sasl_ssl(
        self, caplog: pytest.LogCaptureFixture, ca_file: str
    ) -> None:
        message = only(warnings_for({**PLAIN, "ssl.ca.location": ca_file}, caplog))
        assert message.startswith("ssl.ca.location is set but security.protocol is SASL_PLAINTEXT")
        assert "set security.protocol=SASL_SSL," in message

    def test_both_forgotten_gives_both_warnings(
        self, caplog: pytest.LogCaptureFixture, ca_file: str
    ) -> None:
        config = {**PLAIN, "security.protocol": "PLAINTEXT", "ssl.ca.location": ca_file}
        messages = warnings_for(config, caplog)
        assert len(messages) == 2, messages
        assert "not authenticated" in messages[0]
        assert "not encrypted" in messages[1]


class TestMechanismMismatches:
    def test_username_and_password_with_oauthbearer(self, caplog: pytest.LogCaptureFixture) -> None:
        # librdkafka warns about sasl.username here as well.
        message = only(warnings_for({**CALLBACK, **CREDENTIALS}, caplog))
        assert message.startswith(
            "sasl.username, sasl.password are set but sasl.mechanism is OAUTHBEARER"
        )
        assert "used only by PLAIN and SCRAM" in message

    @pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
    def test_oauthbearer_keys_with_a_password_mechanism(
        self, caplog: pytest.LogCaptureFixture, mechanism: str
    ) -> None:
        config = {
            **PLAIN,
            "sasl.mechanism": mechanism,
            "oauth_cb": oauth_cb,
            "sasl.oauthbearer.client.secret": CLIENT_SECRET,
        }
        message = only(warnings_for(config, caplog))
        assert message.startswith(
            f"oauth_cb, sasl.oauthbearer.client.secret are set but sasl.mechanism is {mechanism}"
        )
        assert "set sasl.mechanism=OAUTHBEARER" in message


class TestOAuthBearerMethods:
    def test_oauthbearer_config_with_oidc(self, caplog: pytest.LogCaptureFixture) -> None:
        config = {**OIDC, "sasl.oauthbearer.config": "principal=alice"}
        message = only(warnings_for(config, caplog))
        assert message.startswith(
            "sasl.oauthbearer.config is set but sasl.oauthbearer.method is oidc"
        )
        assert "handed only to oauth_cb" in message
        assert "principal=alice" not in message

    def test_oidc_keys_with_the_callback(
        self, caplog: pytest.LogCaptureFixture, ca_file: str
    ) -> None:
        config = {
            **CALLBACK,
            "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:9/token",
            "sasl.oauthbearer.client.secret": CLIENT_SECRET,
            "sasl.oauthbearer.scope": "kafka",
            "https.ca.location": ca_file,
        }
        message = only(warnings_for(config, caplog))
        assert message.startswith(
            "sasl.oauthbearer.token.endpoint.url, sasl.oauthbearer.client.secret, "
            "sasl.oauthbearer.scope, https.ca.location are set but "
            "sasl.oauthbearer.method is default"
        )
        assert "set sasl.oauthbearer.method=oidc without oauth_cb" in message

    def test_oauthbearer_config_with_the_callback_is_used(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        # The callback receives it: nothing to warn about.
        assert warnings_for({**CALLBACK, "sasl.oauthbearer.config": "scope=x"}, caplog) == []


@pytest.mark.parametrize(
    "name",
    ["empty", "plain", "plain-ssl", "tls", "callback", "oidc", "oidc-scope-and-ca"],
)
def test_a_config_whose_keys_are_all_used_logs_no_warning(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    configs: dict[str, Mapping[str, object]] = {
        "empty": {},
        "plain": PLAIN,
        "plain-ssl": {**PLAIN, "security.protocol": "SASL_SSL"},
        "tls": {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"},
        "callback": CALLBACK,
        "oidc": OIDC,
        "oidc-scope-and-ca": {
            **OIDC,
            "sasl.oauthbearer.scope": "kafka",
            "https.ca.location": "probe",
        },
    }
    assert warnings_for(configs[name], caplog) == []


def test_a_consumer_config_logs_the_warning_once(caplog: pytest.LogCaptureFixture) -> None:
    conf = {"bootstrap.servers": "127.0.0.1:9", "group.id": "g", **CREDENTIALS}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        config = ConsumerConfig.from_dict(conf)
    unused = [r for r in caplog.records if "security.protocol is PLAINTEXT" in r.getMessage()]
    assert len(unused) == 1
    assert unused[0].levelno == logging.WARNING
    assert PASSWORD not in caplog.text
    # Still accepted, as librdkafka and the Java client accept it: a warning, not an error.
    assert config.security.protocol.value == "PLAINTEXT"
