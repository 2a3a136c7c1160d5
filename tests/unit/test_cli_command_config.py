"""``--command-config FILE`` of ``kgroup groups``, ``migrate`` and ``topics``: security settings."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

import kgroup.cli.topics
import kgroup.transport
from kgroup.cli import main
from kgroup.cli.common import load_command_config
from kgroup.config_security import SaslMechanism, SecurityConfig, SecurityProtocol
from kgroup.errors import ConfigError


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_properties_file_with_comments_and_both_separators_is_read(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "# as kafka-consumer-groups.sh takes it\n"
        "! another comment\n"
        "\n"
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism = SCRAM-SHA-256\n"
        "sasl.username: admin\n"
        "sasl.password=p=ss:word\n",
    )
    settings = load_command_config(path)
    assert settings == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "admin",
        "sasl.password": "p=ss:word",  # only the first separator splits
    }
    security = SecurityConfig.from_config(settings)
    assert security.protocol is SecurityProtocol.SASL_PLAINTEXT
    assert security.sasl is not None
    assert security.sasl.mechanism is SaslMechanism.SCRAM_SHA_256


def test_a_key_these_commands_do_not_use_is_named_with_its_line(tmp_path: Path) -> None:
    path = _file(tmp_path, "security.protocol=SSL\ngroup.id=orders\n")
    with pytest.raises(ConfigError, match=r"line 2: 'group.id' is not a setting"):
        load_command_config(path)


def test_a_line_without_a_separator_is_an_error_that_shows_no_secret(tmp_path: Path) -> None:
    path = _file(tmp_path, "sasl.password hunter2-is-the-password\n")
    with pytest.raises(ConfigError, match="line 1: expected key=value") as info:
        load_command_config(path)
    assert "hunter2-is-the" not in str(info.value)


def test_a_missing_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--command-config .*nope.properties: cannot read"):
        load_command_config(str(tmp_path / "nope.properties"))


def test_the_commands_connect_with_the_files_security_and_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    class _Refusing:
        # Stands in for KafkaClient: records how the command built it, then
        # fails as an unreachable cluster would.
        def __init__(self, servers: str, **kwargs: Any) -> None:
            seen["servers"], seen["kwargs"] = servers, kwargs

        async def __aenter__(self) -> _Refusing:
            raise ConfigError("no cluster in a unit test")

        async def __aexit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(kgroup.transport, "KafkaClient", _Refusing)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    path = _file(
        tmp_path,
        "bootstrap.servers=broker-1:9093\nclient.id=ops\n"
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.username=ops\nsasl.password=s3cret\n",
    )
    assert main(["groups", "list", "--command-config", path]) == 2
    assert seen["servers"] == "broker-1:9093"
    assert seen["kwargs"]["client_id"] == "ops"
    security = seen["kwargs"]["security"]
    assert security.protocol is SecurityProtocol.SASL_PLAINTEXT
    assert "s3cret" not in capsys.readouterr().err


# --- kgroup topics create | produce --command-config ------------------------------------


class _Recorder:
    """Stands in for confluent-kafka's AdminClient and Producer: keeps the config each
    was built with; the admin knows one topic, ``known``, with one partition led by 1."""

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, Any]] = {}

    def admin(self, config: dict[str, Any], **_kwargs: Any) -> Any:
        self.configs["admin"] = dict(config)
        partition = SimpleNamespace(error=None, leader=1)
        topic = SimpleNamespace(error=None, partitions={0: partition})
        metadata = SimpleNamespace(topics={"known": topic})
        return SimpleNamespace(list_topics=lambda **_kw: metadata)

    def producer(self, config: dict[str, Any]) -> Any:
        self.configs["producer"] = dict(config)
        return SimpleNamespace(poll=lambda _timeout: 0, flush=lambda _timeout: 0)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _Recorder:
    recorder = _Recorder()
    monkeypatch.setattr(kgroup.cli.topics, "AdminClient", recorder.admin)
    monkeypatch.setattr(kgroup.cli.topics, "Producer", recorder.producer)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("KGROUP_STATE_DIR", str(tmp_path / "no-state"))
    return recorder


SASL_SSL_FILE = (
    "bootstrap.servers=broker-1:9093\n"
    "client.id=ops\n"
    "security.protocol=SASL_SSL\n"
    "sasl.mechanism=SCRAM-SHA-512\n"
    "sasl.username=ops\n"
    "sasl.password=s3cret\n"
    "ssl.endpoint.identification.algorithm=none\n"
)


def test_topics_produce_builds_admin_and_producer_with_the_files_security(
    tmp_path: Path, recorder: _Recorder, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, SASL_SSL_FILE)
    argv = ["topics", "produce", "known", "--count", "0", "--command-config", path]
    assert main(argv) == 0
    rendered = SecurityConfig.from_config(load_command_config(path)).librdkafka_config()
    assert rendered["sasl.password"] == "s3cret"  # what librdkafka must receive
    for client in ("admin", "producer"):
        config = recorder.configs[client]
        assert {k: config[k] for k in rendered} == rendered, client
        assert config["bootstrap.servers"] == "broker-1:9093"
        assert config["client.id"] == "ops"
    shown = capsys.readouterr()
    assert "s3cret" not in shown.out + shown.err


def test_topics_create_uses_the_flags_servers_over_the_files(
    tmp_path: Path, recorder: _Recorder
) -> None:
    path = _file(tmp_path, SASL_SSL_FILE)
    argv = ["topics", "create", "known", "--if-not-exists", "--command-config", path]
    assert main([*argv, "--bootstrap-servers", "other:9093"]) == 0
    config = recorder.configs["admin"]
    assert config["bootstrap.servers"] == "other:9093"
    assert config["security.protocol"] == "SASL_SSL"
    assert config["sasl.mechanism"] == "SCRAM-SHA-512"


def test_topics_without_a_command_config_connect_in_plaintext(recorder: _Recorder) -> None:
    assert main(["topics", "create", "known", "--if-not-exists", "--bootstrap-servers", "b:1"]) == 0
    config = recorder.configs["admin"]
    assert config.get("security.protocol", "PLAINTEXT") == "PLAINTEXT"
    assert not any(key.startswith(("sasl.", "ssl.")) for key in config)


@pytest.mark.parametrize("command", ["create", "produce"])
@pytest.mark.parametrize(
    "case",
    [
        ("security.protocol=SSL\ngroup.id=orders\n", "line 2: 'group.id' is not a setting"),
        ("sasl.password hunter2-is-the-password\n", "line 1: expected key=value"),
        (
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.password=hunter2-is-the\n",
            "needs sasl.username and sasl.password",
        ),
        ("ssl.keystore.location=/x.jks\n", "ssl.keystore.location is a Java client key"),
    ],
)
def test_topics_refuse_a_bad_command_config_with_exit_2_naming_what_is_wrong(
    tmp_path: Path,
    recorder: _Recorder,
    capsys: pytest.CaptureFixture[str],
    command: str,
    case: tuple[str, str],
) -> None:
    text, complaint = case
    path = _file(tmp_path, text)
    assert (
        main(["topics", command, "t", "--bootstrap-servers", "b:1", "--command-config", path]) == 2
    )
    err = capsys.readouterr().err
    assert complaint in err
    assert "hunter2-is-the" not in err
    assert recorder.configs == {}, "no client is built from a refused file"


@pytest.mark.parametrize("command", ["create", "produce"])
def test_topics_with_a_missing_command_config_exit_2_naming_it(
    tmp_path: Path, recorder: _Recorder, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    missing = str(tmp_path / "nope.properties")
    argv = ["topics", command, "t", "--bootstrap-servers", "b:1", "--command-config", missing]
    assert main(argv) == 2
    assert f"--command-config {missing}: cannot read it" in capsys.readouterr().err
    assert recorder.configs == {}


@pytest.mark.parametrize(
    "case",
    [
        (
            KafkaError._AUTHENTICATION,
            "sasl_ssl://broker-1:9093/bootstrap: SASL authentication error: Authentication "
            "failed due to invalid credentials with SASL mechanism SCRAM-SHA-512",
            "SASL SCRAM-SHA-512 authentication with broker-1:9093 failed: SASL authentication "
            "error: Authentication failed due to invalid credentials",
        ),
        (
            KafkaError._SSL,
            "ssl://broker-1:9093/bootstrap: SSL handshake failed: certificate verify failed",
            "TLS handshake with broker-1:9093 failed: SSL handshake failed: certificate verify",
        ),
    ],
)
def test_topics_report_a_refused_login_at_once_not_as_an_unreachable_broker(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: tuple[int, str, str],
) -> None:
    code, report, expected = case
    # librdkafka's list_topics fails with a bare transport failure; what happened
    # arrives through error_cb when the client is polled.
    attempts: list[float] = []

    def admin(config: dict[str, Any], *, error_cb: Any, **_kwargs: Any) -> Any:
        def list_topics(*, timeout: float) -> Any:
            attempts.append(timeout)
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))

        return SimpleNamespace(
            list_topics=list_topics, poll=lambda _t: error_cb(KafkaError(code, report))
        )

    monkeypatch.setattr(kgroup.cli.topics, "AdminClient", admin)
    path = _file(tmp_path, SASL_SSL_FILE)
    assert main(["topics", "create", "t", "--command-config", path, "--timeout", "60"]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert "s3cret" not in err
    assert len(attempts) == 1, "a refused login is not retried until --timeout"


def test_topics_warn_about_credentials_in_a_file_without_a_sasl_protocol(
    tmp_path: Path, recorder: _Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    # The classic mistake in a command config: the file's credentials would go
    # nowhere and the commands would connect in plaintext.
    path = _file(tmp_path, "sasl.username=ops\nsasl.password=s3cret\n")
    with caplog.at_level(logging.WARNING, logger="kgroup.transport.security"):
        argv = ["topics", "create", "known", "--if-not-exists", "--bootstrap-servers", "b:1"]
        assert main([*argv, "--command-config", path]) == 0
    assert "security.protocol is PLAINTEXT" in caplog.text
    assert "set security.protocol=SASL_SSL or SASL_PLAINTEXT" in caplog.text
    assert "s3cret" not in caplog.text
