"""The telemetry key in the consumer config, the metrics' histograms and librdkafka statistics.

No broker: the config layer, :class:`~kgroup.telemetry.metrics.Histogram` and
the statistics parser are plain functions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgroup.config import TELEMETRY_DIR_ENV, ConsumerConfig
from kgroup.errors import ConfigError
from kgroup.telemetry import SinkType
from kgroup.telemetry.metrics import BUCKET_BOUNDS, Histogram, parse_librdkafka_statistics
from kgroup.types import TopicPartition

BASE = {"bootstrap.servers": "localhost:9092", "group.id": "g"}


def test_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TELEMETRY_DIR_ENV, raising=False)
    assert ConsumerConfig.from_dict(BASE).telemetry is None


def test_one_key_turns_it_on_and_no_telemetry_key_reaches_librdkafka(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    config = ConsumerConfig.from_dict(
        {
            **BASE,
            "telemetry.sink": f"jsonl:{tmp_path}/",
            "telemetry.jsonl.max.bytes": 1000,
            "fetch.min.bytes": 1,
        },
        validate_passthrough=lambda keys: seen.append(dict(keys)),
    )
    assert config.telemetry is not None
    assert config.telemetry.sink is SinkType.JSONL
    assert config.telemetry.jsonl_max_bytes == 1000
    assert dict(config.passthrough) == {"fetch.min.bytes": "1"}
    assert seen == [{"fetch.min.bytes": "1"}]


def test_a_callback_is_kept_as_the_function() -> None:
    def sink(event: object) -> None: ...

    config = ConsumerConfig.from_dict({**BASE, "telemetry.callback": sink})
    assert config.telemetry is not None
    assert config.telemetry.callback is sink
    assert "telemetry.callback" not in config.passthrough


def test_a_misspelt_telemetry_key_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"unknown telemetry key 'telemetry\.snik'"):
        ConsumerConfig.from_dict({**BASE, "telemetry.snik": "jsonl:/tmp/x/"})


def test_the_test_suites_directory_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TELEMETRY_DIR_ENV, str(tmp_path))
    config = ConsumerConfig.from_dict(BASE)
    assert config.telemetry is not None
    assert config.telemetry.sink is SinkType.JSONL
    assert config.telemetry.path == f"{tmp_path}/"
    # An explicit key wins over the environment.
    explicit = ConsumerConfig.from_dict({**BASE, "telemetry.sink": "kafka:t"})
    assert explicit.telemetry is not None
    assert explicit.telemetry.sink is SinkType.KAFKA
    off = ConsumerConfig.from_dict({**BASE, "telemetry.sink": "off"})
    assert off.telemetry is None


def test_histogram_counts_buckets_and_estimates_quantiles() -> None:
    histogram = Histogram()
    assert histogram.snapshot().quantile(0.5) is None
    for value in (0.0005, 0.003, 0.003, 0.2, 7.0):
        histogram.record(value)
    snap = histogram.snapshot()
    assert snap.count == 5
    assert sum(snap.buckets) == 5
    assert snap.min_s == 0.0005
    assert snap.max_s == 7.0
    assert snap.mean_s == pytest.approx((0.0005 + 0.006 + 0.2 + 7.0) / 5)
    assert snap.buckets[BUCKET_BOUNDS.index(0.005)] == 2
    assert snap.quantile(0.5) == 0.005  # the bound of the median's bucket
    assert snap.quantile(1.0) == 7.0  # capped by the largest observation
    with pytest.raises(ValueError, match="q must be"):
        snap.quantile(0)


def test_lag_and_bytes_from_librdkafka_statistics() -> None:
    doc = {
        "rxmsg_bytes": 12345,
        "topics": {
            "orders": {
                "partitions": {
                    "0": {"fetch_state": "active", "hi_offset": 100, "ls_offset": 90,
                          "app_offset": 40},
                    "1": {"fetch_state": "active", "hi_offset": 10, "ls_offset": -1,
                          "app_offset": 10},
                    "2": {"fetch_state": "none", "hi_offset": 5, "app_offset": 1},
                    "-1": {"fetch_state": "none", "hi_offset": -1, "app_offset": -1},
                }
            }
        },
    }  # fmt: skip
    stats = parse_librdkafka_statistics(json.dumps(doc))
    assert stats is not None
    assert stats.bytes == 12345
    assert dict(stats.lag) == {TopicPartition("orders", 0): 50, TopicPartition("orders", 1): 0}
    assert parse_librdkafka_statistics("not json") is None
