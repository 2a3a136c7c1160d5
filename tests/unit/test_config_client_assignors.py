"""Client-side assignors (the KIP-848 draft's mode) are refused at construction on Apache Kafka."""

from __future__ import annotations

from typing import Any

import pytest

from kgroup import Consumer
from kgroup.config import CLIENT_ASSIGNORS_KEY, ConsumerConfig, GroupProtocol
from kgroup.errors import ConfigError

BASE: dict[str, Any] = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"}


@pytest.mark.parametrize("protocol", ["consumer", "classic", "auto"])
@pytest.mark.parametrize("key", ["group.client.assignors", "group.local.assignors"])
def test_client_assignors_fail_with_what_to_use_instead(key: str, protocol: str) -> None:
    conf = {**BASE, "group.protocol": protocol, key: "my-python-assignor"}
    with pytest.raises(ConfigError) as err:
        ConsumerConfig.from_dict(conf)
    message = str(err.value)
    assert message.startswith(f"{key} cannot be used")
    assert "do not offer the client-side assignor mode" in message
    assert "group.remote.assignor" in message
    assert "group.protocol=classic" in message
    assert "partition.assignment.strategy" in message


def test_the_consumer_fails_at_construction_before_any_connection() -> None:
    # Port 9 (discard) on localhost: nothing would answer; the error comes first.
    conf = {"bootstrap.servers": "127.0.0.1:9", "group.id": "g", CLIENT_ASSIGNORS_KEY: "a"}
    with pytest.raises(ConfigError, match="group.remote.assignor"):
        Consumer(conf)


def test_the_test_only_client_side_mode_accepts_the_names() -> None:
    conf = {**BASE, CLIENT_ASSIGNORS_KEY: "py-sticky, py-range"}
    config = ConsumerConfig.from_dict(conf, client_side_mode=True)
    assert config.group_client_assignors == ("py-sticky", "py-range")
    assert config.group_protocol is GroupProtocol.CONSUMER
    assert CLIENT_ASSIGNORS_KEY not in config.passthrough
    assert ConsumerConfig.from_dict(BASE).group_client_assignors == ()


def test_the_client_side_mode_still_names_a_malformed_value() -> None:
    with pytest.raises(ConfigError, match="must be assignor names"):
        ConsumerConfig.from_dict({**BASE, CLIENT_ASSIGNORS_KEY: [""]}, client_side_mode=True)
    with pytest.raises(ConfigError, match="group.local.assignors cannot be used"):
        ConsumerConfig.from_dict({**BASE, "group.local.assignors": "a"}, client_side_mode=True)
