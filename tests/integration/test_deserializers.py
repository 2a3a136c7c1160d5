"""A poison record on a real broker: librdkafka's position stays at it, close commits it.

The runtime tests cover the contract through the fake data plane; this one
checks that librdkafka's position follows the consumer putting the failed
record back (so the commit on close, read back by confluent-kafka, is the
poison record's offset), and that a restarted application meets it again.
"""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest
from confluent_kafka.serialization import StringDeserializer
from helpers import classic_conf, consumer_conf

from kgroup import Consumer, TopicPartition
from kgroup.dataplane import Record
from kgroup.errors import DeserializationError, ValueDeserializationError
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

POISON = b"\xff\xfe"
"""Not UTF-8: StringDeserializer('utf_8') raises on it."""
TIMEOUT = 30.0


def _conf(protocol: str, bootstrap: str, group: str) -> dict[str, object]:
    if protocol == "consumer":
        conf = consumer_conf(bootstrap, group)
    else:
        conf = classic_conf(bootstrap, group, "cooperative-sticky")
    conf["value.deserializer"] = StringDeserializer("utf_8")
    conf["auto.commit.interval.ms"] = 100
    return conf


def _until_poison(consumer: Consumer, got: list[Record]) -> DeserializationError:
    """Consume into ``got`` until the poison record raises; that error."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            got.extend(consumer.consume(100, 0.2))
        except DeserializationError as error:
            return error
    raise AssertionError(f"no DeserializationError within {TIMEOUT}s; got {len(got)} records")


def _seen(records: list[Record]) -> list[tuple[int | None, object]]:
    """Offsets and values as handed out (confluent_kafka.Message types values bytes)."""
    return [(r.offset(), r.value()) for r in records]


def _committed(bootstrap: str, group: str, tp: TopicPartition) -> int:
    peer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [answer] = peer.committed([ck.TopicPartition(tp.topic, tp.partition)], timeout=TIMEOUT)
    finally:
        peer.close()
    offset: int = answer.offset
    return offset


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_poison_record_is_committed_at_not_past_and_met_again_after_a_restart(
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    protocol: str,
) -> None:
    bootstrap = kafka_bootstrap_servers
    topic = make_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    for value in [b"0", b"1", POISON, b"3", b"4"]:
        producer.produce(topic, value, partition=0)
    assert producer.flush(TIMEOUT) == 0
    group = make_group_id()

    got: list[Record] = []
    with Consumer(_conf(protocol, bootstrap, group)) as consumer:
        consumer.subscribe([topic])
        error = _until_poison(consumer, got)
        assert isinstance(error, ValueDeserializationError)
        assert (error.topic_partition, error.offset, error.record.value()) == (tp, 2, POISON)
        assert _seen(got) == [(0, "0"), (1, "1")]
        assert consumer.position([tp]) == {tp: 2}
        # Past an auto-commit interval of polls meeting it again.
        for _ in range(3):
            assert _until_poison(consumer, got).offset == 2
            time.sleep(0.1)  # not synchronisation: lets auto-commit intervals pass
        assert len(got) == 2
    assert _committed(bootstrap, group, tp) == 2

    # A restarted application starts at the poison record, and skips it by seeking.
    got = []
    with Consumer(_conf(protocol, bootstrap, group)) as consumer:
        consumer.subscribe([topic])
        error = _until_poison(consumer, got)
        assert (error.offset, got) == (2, [])
        consumer.seek(error.topic_partition, error.offset + 1)
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 2 and time.monotonic() < deadline:
            got.extend(consumer.consume(100, 0.2))
        assert _seen(got) == [(3, "3"), (4, "4")]
    assert _committed(bootstrap, group, tp) == 5
