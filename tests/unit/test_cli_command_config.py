"""``--command-config FILE`` of ``kgroup groups`` / ``kgroup migrate``: security settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kgroup.transport
from kgroup.cli import main
from kgroup.cli_groups import load_command_config
from kgroup.errors import ConfigError
from kgroup.transport.security import SaslMechanism, SecurityConfig, SecurityProtocol


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
