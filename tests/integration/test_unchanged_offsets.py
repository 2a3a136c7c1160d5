"""On a real broker: the consumer's own commits leave out offsets already committed.

An idle member used to commit every position every ``auto.commit.interval.ms``
(as the Java client does), rewriting the same offsets, and the metadata an
application committed with an offset, to ``__consumer_offsets``; librdkafka
sends only offsets that moved. Both protocols.
"""

from __future__ import annotations

import logging

import pytest
from helpers import classic_conf, consumer_conf, drain, produce, wait_until

from kgroup import Consumer, OffsetAndMetadata, TopicPartition
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

SKIPPED = "again: unchanged since committed"


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_an_idle_member_commits_nothing_and_keeps_the_committed_metadata(
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    protocol: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="kgroup.runtime")
    bootstrap = kafka_bootstrap_servers
    topic = make_topic(partitions=2)
    want = produce(bootstrap, topic, 2, 10)  # 5 a partition
    group = make_group_id()
    if protocol == "consumer":
        conf = consumer_conf(bootstrap, group)
    else:
        conf = classic_conf(bootstrap, group, "cooperative-sticky")
    conf["auto.commit.interval.ms"] = 100
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = Consumer(conf)
    try:
        consumer.subscribe([topic])
        assert len(drain(consumer, len(want), timeout=30)) == len(want)
        # Polls make the auto-commits: the positions are committed once.
        wait_until(
            lambda: consumer.consume(10, 0.05) == [] and consumer.committed([t1]) == {t1: 5},
            30,
            "the auto-commit of the positions",
        )
        # The metadata goes with an explicit commit of the same offset.
        consumer.commit({t0: OffsetAndMetadata(5, "checkpoint-42")})
        commits = consumer.metrics().commits

        def skipped() -> int:
            return sum(SKIPPED in r.getMessage() for r in caplog.records)

        before = skipped()
        wait_until(
            lambda: consumer.consume(10, 0.05) == [] and skipped() >= before + 5,
            30,
            "five auto-commit intervals",
        )
        assert consumer.metrics().commits == commits
        assert consumer.committed_with_metadata([t0, t1]) == {
            t0: OffsetAndMetadata(5, "checkpoint-42"),
            t1: OffsetAndMetadata(5, ""),
        }
    finally:
        consumer.close()
