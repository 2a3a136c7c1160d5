"""confluent-kafka's callback settings and ``logger`` on a real broker.

``error_cb``, ``stats_cb`` and ``logger`` are librdkafka's (the data plane's),
served inside poll; ``on_commit`` reports kgroup's own commits. ``oauth_cb``
serving both kgroup's connections and librdkafka's is covered on the secured
broker in ``test_security.py``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from typing import Any

import anyio
import confluent_kafka
import pytest
from helpers import consumer_conf, drain, produce
from kio.schema.alter_client_quotas.v1 import request as quotas
from kio.schema.errors import ErrorCode
from kio.static.primitive import f64

from kgroup import Consumer, TopicPartition
from kgroup.errors import NoBrokersAvailableError
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport import KafkaClient

pytestmark = pytest.mark.integration


def _poll_until(consumer: Consumer, done: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        consumer.poll(0.1)


def test_on_commit_reports_kgroups_commits_with_confluent_kafka_types(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    produce(bootstrap, topic, 1, 10)
    reports: list[tuple[Any, list[confluent_kafka.TopicPartition]]] = []
    conf = {
        **consumer_conf(bootstrap, make_group_id(), enable_auto_commit=False),
        "on_commit": lambda err, partitions: reports.append((err, partitions)),
    }
    with Consumer(conf) as consumer:
        consumer.subscribe([topic])
        assert len(drain(consumer, 10, 30)) == 10
        assert consumer.commit() == {TopicPartition(topic, 0): 10}
        _poll_until(consumer, lambda: reports, 10, "on_commit")
    err, partitions = reports[0]
    assert err is None
    assert [(p.topic, p.partition, p.offset) for p in partitions] == [(topic, 0, 10)]
    assert all(isinstance(p, confluent_kafka.TopicPartition) for p in partitions)


def test_librdkafka_callbacks_and_debug_log_lines_reach_python(
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    produce(bootstrap, topic, 1, 5)
    stats: list[str] = []
    caplog.set_level(logging.DEBUG, logger="kgroup.dataplane")
    conf = {
        **consumer_conf(bootstrap, make_group_id(), statistics_interval_ms=100, debug="consumer"),
        "stats_cb": stats.append,
    }
    with Consumer(conf) as consumer:
        consumer.subscribe([topic])
        assert len(drain(consumer, 5, 30)) == 5
        _poll_until(consumer, lambda: stats, 10, "stats_cb")
    assert json.loads(stats[0])["type"] == "consumer"
    # With debug set, librdkafka's lines go to the kgroup.dataplane.librdkafka
    # logger (not raw to stderr), at DEBUG.
    lines = [r for r in caplog.records if r.name == "kgroup.dataplane.librdkafka"]
    assert any(r.levelno == logging.DEBUG for r in lines), "no librdkafka debug line logged"

    # error_cb, from a consumer whose only bootstrap address refuses
    # connections. A dead address listed beside a working one is no
    # dependable source: librdkafka drops every bootstrap broker once the
    # first metadata answer names the cluster's own, and on a busy machine
    # that answer can come before its first attempt on the dead one.
    refused: list[confluent_kafka.KafkaError] = []
    dead = {**consumer_conf("127.0.0.1:1", make_group_id()), "error_cb": refused.append}
    with Consumer(dead) as consumer:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 10
        while not refused:
            assert time.monotonic() < deadline, "timed out waiting for error_cb"
            # kgroup's own client raises its NoBrokersAvailableError once
            # (the application may catch it and keep polling, as here).
            with contextlib.suppress(NoBrokersAvailableError):
                consumer.poll(0.1)
    assert all(isinstance(e, confluent_kafka.KafkaError) for e in refused)
    assert any("127.0.0.1:1" in e.str() for e in refused), [e.str() for e in refused]


def test_a_users_logger_receives_librdkafkas_lines(
    kafka_broker: KafkaBroker, make_group_id: MakeGroupId, caplog: pytest.LogCaptureFixture
) -> None:
    mine = logging.getLogger("app.kafka")
    caplog.set_level(logging.DEBUG, logger="app.kafka")
    conf = {
        **consumer_conf(kafka_broker.bootstrap_servers, make_group_id(), debug="broker"),
        "logger": mine,
    }
    with Consumer(conf) as consumer:
        _poll_until(
            consumer,
            lambda: any(r.name == "app.kafka" for r in caplog.records),
            10,
            "a librdkafka line on the app.kafka logger",
        )


async def _limit_fetch_rate(bootstrap: str, client_id: str, bytes_per_second: float) -> None:
    entry = quotas.EntryData(
        entity=(quotas.EntityData(entity_type="client-id", entity_name=client_id),),
        ops=(quotas.OpData(key="consumer_byte_rate", value=f64(bytes_per_second), remove=False),),
    )
    async with KafkaClient(bootstrap) as client:
        response: Any = await client.request(
            quotas.AlterClientQuotasRequest(entries=(entry,), validate_only=False)
        )
    assert [e.error_code for e in response.entries] == [ErrorCode.none]


def test_throttle_cb_hears_of_fetches_a_quota_throttled(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    produce(bootstrap, topic, 1, 2_000)
    # A quota for this test's client id only: 1 KiB/s of fetches, far below
    # what the records above need, so the broker throttles the first fetches.
    client_id = f"throttled-{uuid.uuid4().hex[:8]}"
    anyio.run(_limit_fetch_rate, bootstrap, client_id, 1024.0)
    events: list[confluent_kafka.ThrottleEvent] = []
    conf = {
        **consumer_conf(bootstrap, make_group_id(), client_id=client_id),
        "throttle_cb": events.append,
    }
    with Consumer(conf) as consumer:
        consumer.subscribe([topic])
        _poll_until(consumer, lambda: events, 30, "throttle_cb")
    assert isinstance(events[0], confluent_kafka.ThrottleEvent)
    assert events[0].throttle_time > 0
