"""ConsumerConfig: parsing, defaults, and errors that name the key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from kgroup.config import AutoOffsetReset, ConsumerConfig, GroupProtocol
from kgroup.errors import ConfigError

BASE: dict[str, Any] = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"}


def build(**extra: Any) -> ConsumerConfig:
    conf = dict(BASE)
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return ConsumerConfig.from_dict(conf)


def test_defaults_match_the_java_client() -> None:
    config = ConsumerConfig.from_dict(BASE)
    assert config.group_protocol is GroupProtocol.CONSUMER
    assert config.enable_auto_commit is True
    assert config.auto_commit_interval_ms == 5_000
    assert config.auto_offset_reset is AutoOffsetReset.LATEST
    assert config.max_poll_interval_ms == 300_000
    assert config.retry_backoff_ms == 100
    assert config.retry_backoff_max_ms == 1_000
    assert config.bootstrap_servers == ("127.0.0.1:9092",)
    assert dict(config.passthrough) == {}


def test_several_bootstrap_servers_are_split_and_stripped() -> None:
    config = ConsumerConfig.from_dict({**BASE, "bootstrap.servers": "a:1, b:2 ,c:3"})
    assert config.bootstrap_servers == ("a:1", "b:2", "c:3")


@pytest.mark.parametrize("missing", ["bootstrap.servers", "group.id"])
def test_missing_required_key_is_named(missing: str) -> None:
    conf = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(ConfigError, match=f"{missing} is required"):
        ConsumerConfig.from_dict(conf)


@pytest.mark.parametrize("server", ["localhost", ":9092", "host:port", "host:"])
def test_malformed_bootstrap_server_is_named(server: str) -> None:
    with pytest.raises(ConfigError, match="must look like host:port"):
        ConsumerConfig.from_dict({**BASE, "bootstrap.servers": server})


@pytest.mark.parametrize(
    "key", ["partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"]
)
def test_classic_only_keys_are_refused_with_the_new_protocol(key: str) -> None:
    with pytest.raises(ConfigError, match=f"{key} cannot be used with group.protocol=consumer"):
        ConsumerConfig.from_dict({**BASE, key: "1000" if key.endswith("ms") else "range"})


def test_classic_only_keys_are_accepted_with_the_classic_protocol() -> None:
    config = ConsumerConfig.from_dict(
        {
            **BASE,
            "group.protocol": "classic",
            "partition.assignment.strategy": "cooperative-sticky, range",
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": "1000",
        }
    )
    assert config.group_protocol is GroupProtocol.CLASSIC
    assert config.partition_assignment_strategy == ("cooperative-sticky", "range")
    assert config.session_timeout_ms == 10_000
    assert config.heartbeat_interval_ms == 1_000


def test_remote_assignor_is_refused_with_the_classic_protocol() -> None:
    with pytest.raises(ConfigError, match="group.remote.assignor cannot be used"):
        ConsumerConfig.from_dict(
            {**BASE, "group.protocol": "classic", "group.remote.assignor": "range"}
        )


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_max_poll_records_is_refused_as_a_share_consumers_key(protocol: str) -> None:
    # librdkafka accepts it and ignores it outside share consumers: it would do nothing.
    with pytest.raises(ConfigError, match="max.poll.records is a share consumer's setting"):
        ConsumerConfig.from_dict({**BASE, "group.protocol": protocol, "max.poll.records": 100})


def test_unknown_group_protocol_lists_valid_values() -> None:
    with pytest.raises(ConfigError, match="group.protocol must be one of consumer, classic, auto"):
        ConsumerConfig.from_dict({**BASE, "group.protocol": "eager"})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("earliest", AutoOffsetReset.EARLIEST),
        ("smallest", AutoOffsetReset.EARLIEST),
        ("beginning", AutoOffsetReset.EARLIEST),
        ("latest", AutoOffsetReset.LATEST),
        ("largest", AutoOffsetReset.LATEST),
        ("end", AutoOffsetReset.LATEST),
        ("ERROR", AutoOffsetReset.ERROR),
    ],
)
def test_offset_reset_accepts_librdkafka_aliases(raw: str, expected: AutoOffsetReset) -> None:
    assert build(auto_offset_reset=raw).auto_offset_reset is expected


def test_bad_offset_reset_is_named() -> None:
    with pytest.raises(ConfigError, match="auto.offset.reset must be earliest, latest or error"):
        build(auto_offset_reset="first")


@pytest.mark.parametrize("value", ["yes", 2, "maybe", 1.0])
def test_bad_bool_is_named(value: object) -> None:
    with pytest.raises(ConfigError, match="enable.auto.commit must be true or false"):
        ConsumerConfig.from_dict({**BASE, "enable.auto.commit": value})


@pytest.mark.parametrize("value", ["soon", True, 1.5, -1])
def test_bad_int_is_named(value: object) -> None:
    with pytest.raises(ConfigError, match=r"max\.poll\.interval\.ms must be"):
        ConsumerConfig.from_dict({**BASE, "max.poll.interval.ms": value})


@pytest.mark.parametrize("key", ["group.instance.id", "client.rack"])
def test_empty_identity_strings_are_refused(key: str) -> None:
    # The broker answers INVALID_REQUEST to these; refuse them before connecting.
    with pytest.raises(ConfigError, match=f"{key} must be a non-empty string"):
        ConsumerConfig.from_dict({**BASE, key: ""})


def test_heartbeat_must_be_below_session_timeout() -> None:
    with pytest.raises(ConfigError, match="must be lower than session.timeout.ms"):
        ConsumerConfig.from_dict(
            {
                **BASE,
                "group.protocol": "classic",
                "session.timeout.ms": 3000,
                "heartbeat.interval.ms": 3000,
            }
        )


def test_backoff_max_must_not_be_below_backoff() -> None:
    with pytest.raises(ConfigError, match="retry.backoff.max.ms"):
        build(retry_backoff_ms=500, retry_backoff_max_ms=100)


def test_unowned_keys_pass_through_and_are_validated() -> None:
    seen: list[Mapping[str, str]] = []

    def validator(keys: Mapping[str, str]) -> None:
        seen.append(dict(keys))
        if "fetch.wiat.max.ms" in keys:
            raise ConfigError('No such configuration property: "fetch.wiat.max.ms"')

    config = ConsumerConfig.from_dict(
        {**BASE, "fetch.wait.max.ms": 10, "security.protocol": "plaintext"},
        validate_passthrough=validator,
    )
    assert dict(config.passthrough) == {"fetch.wait.max.ms": "10", "security.protocol": "plaintext"}
    assert seen == [dict(config.passthrough)]
    assert config.security_protocol == "PLAINTEXT"
    assert dict(config.security_settings()) == {"security.protocol": "plaintext"}
    with pytest.raises(ConfigError, match=r"fetch\.wiat\.max\.ms"):
        ConsumerConfig.from_dict({**BASE, "fetch.wiat.max.ms": 1}, validate_passthrough=validator)


def test_owned_keys_never_reach_the_data_plane() -> None:
    config = build(enable_auto_commit="false", auto_offset_reset="earliest")
    assert "enable.auto.commit" not in config.passthrough
    assert "group.id" not in config.passthrough
    assert config.enable_auto_commit is False


def test_config_is_frozen() -> None:
    config = ConsumerConfig.from_dict(BASE)
    with pytest.raises(AttributeError):
        config.group_id = "other"  # type: ignore[misc]
