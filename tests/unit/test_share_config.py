"""ShareConsumerConfig: the share keys, the connection keys, and what is refused (and why)."""

from __future__ import annotations

import pytest

from kgroup.dataplane.share.inflight import AcknowledgementMode
from kgroup.errors import ConfigError
from kgroup.share.config import AcknowledgementModeSetting, ShareConsumerConfig
from kgroup.share.driver import core_config

BASE = {"bootstrap.servers": "b1:9092,b2:9092", "group.id": "queue"}


def test_defaults_are_the_java_clients() -> None:
    config = ShareConsumerConfig.from_dict(BASE)
    assert config.group_id == "queue"
    assert config.connection.bootstrap_servers == ("b1:9092", "b2:9092")
    assert config.acknowledgement_mode is AcknowledgementModeSetting.IMPLICIT
    assert (config.max_poll_records, config.fetch_max_wait_ms) == (500, 500)
    assert config.share_fetch_buffer_bytes == 64 << 20


def test_share_keys_reach_the_runtime() -> None:
    config = ShareConsumerConfig.from_dict(
        {
            **BASE,
            "share.acknowledgement.mode": "EXPLICIT",
            "max.poll.records": "7",
            "fetch.max.wait.ms": 50,
            "fetch.min.bytes": 10,
            "fetch.max.bytes": 1000,
            "share.fetch.buffer.bytes": 4096,
            "client.rack": "rack-a",
            "client.id": "worker",
            "security.protocol": "PLAINTEXT",
        }
    )
    core = core_config(config)
    assert core.mode is AcknowledgementMode.EXPLICIT
    assert core.limits.max_records == 7
    assert (core.limits.max_wait_ms, core.limits.min_bytes, core.limits.max_bytes) == (50, 10, 1000)
    assert core.buffer_bytes == 4096
    assert core.rack_id == "rack-a"
    assert config.connection.client_id == "worker"


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("auto.offset.reset", "earliest", "set_share_auto_offset_reset"),
        ("group.protocol", "consumer", "share group protocol"),
        ("enable.auto.commit", "false", "share.acknowledgement.mode"),
        ("partition.assignment.strategy", "range", "broker assigns"),
        ("group.instance.id", "i-1", "static membership"),
        ("heartbeat.interval.ms", 100, "group.share.heartbeat.interval.ms"),
        ("value.deserializer", "x", "deserialize"),
    ],
)
def test_consumer_group_keys_are_refused_saying_what_to_do(
    key: str, value: object, says: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{key} cannot be used with a share consumer: .*{says}"):
        ShareConsumerConfig.from_dict({**BASE, key: value})


@pytest.mark.parametrize(
    ("conf", "names"),
    [
        ({"fetch.wait.max": 1}, "fetch.wait.max is not a share consumer config key"),
        ({"max.poll.records": 0}, "max.poll.records must be >= 1"),
        ({"fetch.max.wait.ms": "soon"}, "fetch.max.wait.ms must be an integer"),
        ({"share.acknowledgement.mode": "auto"}, "share.acknowledgement.mode must be"),
        ({"security.protocol": "CARRIER_PIGEON"}, "security.protocol"),
    ],
)
def test_bad_values_name_the_key(conf: dict[str, object], names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        ShareConsumerConfig.from_dict({**BASE, **conf})


def test_group_id_is_required() -> None:
    with pytest.raises(ConfigError, match="group.id is required"):
        ShareConsumerConfig.from_dict({"bootstrap.servers": "b:9092"})
