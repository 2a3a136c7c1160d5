"""KIP-320 against a real broker: kgroup commits each offset with the leader epoch of
the record before it, as the Java client and librdkafka do, and a consumer that
starts from such an offset checks it against the leader's log first
(OffsetForLeaderEpoch) — librdkafka 2.16, handed the epoch with an assigned
offset, does not — and hands the epoch on to librdkafka for its own fetches.

Without the epoch a committed offset cannot be checked after a log truncation
(an unclean leader election): the next owner falls back to auto.offset.reset,
which skips records (latest) or replays the partition (earliest), KAFKA-20507.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from helpers import classic_conf, consumer_conf, drain, produce, produce_values

from kgroup import Consumer, LogTruncationError
from kgroup.testing import KafkaBroker, create_topic
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.types import TopicPartition, Truncation

pytestmark = pytest.mark.integration

PARTITIONS = 3


def _conf(protocol: str, bootstrap: str, group: str) -> dict[str, Any]:
    extra = {"enable_auto_commit": False}
    if protocol == "classic":
        return classic_conf(bootstrap, group, "cooperative-sticky", **extra)
    return consumer_conf(bootstrap, group, **extra)


def _committed(bootstrap: str, group: str, topic: str) -> list[tuple[int, int, int | None]]:
    """What another client reads back: (partition, offset, leader epoch) per partition."""
    reader = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = reader.committed(
            [confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30
        )
    finally:
        reader.close()
    return sorted((tp.partition, tp.offset, tp.leader_epoch) for tp in found)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_commits_carry_the_leader_epoch_and_the_next_member_resumes_from_them(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, protocol: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=PARTITIONS)
    group = make_group_id()
    first = produce(bootstrap, topic, PARTITIONS, 30)

    with Consumer(_conf(protocol, bootstrap, group)) as consumer:
        consumer.subscribe([topic])
        assert set(drain(consumer, len(first), 30)) == first
        consumer.commit()
    # A new topic on one broker is led by its first leader: epoch 0 (-1, read
    # back as None, is what a commit without KIP-320 stores).
    assert _committed(bootstrap, group, topic) == [(p, 10, 0) for p in range(PARTITIONS)]

    # The next member starts from the committed offsets with their epoch;
    # librdkafka validates them and fetches exactly what came after.
    later = produce(bootstrap, topic, PARTITIONS, 30, start=30)
    with Consumer(_conf(protocol, bootstrap, group)) as consumer:
        consumer.subscribe([topic])
        values = drain(consumer, len(later), 30)
        assert sorted(values) == sorted(later)
        # Committing the new positions keeps the epoch too.
        consumer.commit()
    assert _committed(bootstrap, group, topic) == [(p, 20, 0) for p in range(PARTITIONS)]


def _leader_epoch(bootstrap: str, topic: str) -> int:
    """The partition's current leader epoch, as a fetched offset's epoch shows it."""
    reader = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "epoch-reader", "enable.auto.commit": False}
    )
    try:
        reader.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_END)])
        offsets = reader.offsets_for_times(
            [confluent_kafka.TopicPartition(topic, 0, -1)], timeout=30
        )
        epoch = offsets[0].leader_epoch
    finally:
        reader.close()
    assert epoch is not None
    return epoch


LATER = [f"new-{i}" for i in range(5)]
"""The records written at offsets 10-14 of ``t``-0 after the truncation."""


@pytest.fixture(scope="module")
def truncated() -> Iterator[str]:
    """A broker (its bootstrap servers) holding the log an unclean leader election leaves.

    Topic ``t`` holds offsets 0-9 of leader epoch 0 and, after a leader change,
    offsets 10-14 (:data:`LATER`) of a later epoch. A group that committed
    offset 20 at epoch 0 (:func:`_commit_past_the_truncation`) counted records
    the log no longer holds. One broker for the module: each test uses its own group.
    """
    with KafkaBroker() as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, "t", partitions=1)
        produce_values(bootstrap, "t", [(0, f"old-{i}") for i in range(10)])
        broker.restart()  # the partition gets a new leader epoch
        produce_values(bootstrap, "t", [(0, v) for v in LATER])
        assert _leader_epoch(bootstrap, "t") > 0
        yield bootstrap


def _commit_past_the_truncation(bootstrap: str, group: str) -> None:
    committer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committer.commit(
            offsets=[confluent_kafka.TopicPartition("t", 0, 20, leader_epoch=0)],
            asynchronous=False,
        )
    finally:
        committer.close()


def test_an_offset_truncated_by_a_leader_change_resumes_at_the_end_of_its_epoch(
    truncated: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The state an unclean leader election leaves: the group committed offset 20
    # at leader epoch 0, but the partition's log holds epoch 0 only up to offset
    # 10 (the rest was truncated) and a new leader epoch wrote offsets 10-14.
    # kgroup asks the leader where epoch 0 ends (OffsetForLeaderEpoch) and
    # resumes there (10). Unchecked (librdkafka 2.16 does not check an assigned
    # offset), offset 20 is out of range, and auto.offset.reset=earliest
    # replays offsets 0-9 (latest would skip 10-14).
    _commit_past_the_truncation(truncated, "g")
    with (
        caplog.at_level(logging.WARNING, logger="kgroup.runtime"),
        Consumer(consumer_conf(truncated, "g")) as consumer,
    ):
        consumer.subscribe(["t"])
        values = drain(consumer, len(LATER), 30)
    assert values == LATER
    assert "the log was truncated" in caplog.text


def _consume_until(consumer: Consumer, deadline: float) -> None:
    while time.monotonic() < deadline:
        consumer.consume(500, 0.2)


def test_with_auto_offset_reset_error_a_truncated_offset_raises_until_the_application_seeks(
    truncated: str,
) -> None:
    # The same log, but the application chose auto.offset.reset=error: kgroup
    # must not pick the start itself. poll raises LogTruncationError naming the
    # divergence point (10); the application's seek starts the partition there.
    _commit_past_the_truncation(truncated, "g-error")
    tp = TopicPartition("t", 0)
    conf = consumer_conf(truncated, "g-error", auto_offset_reset="error")
    with Consumer(conf) as consumer:
        consumer.subscribe(["t"])
        with pytest.raises(LogTruncationError) as caught:
            _consume_until(consumer, time.monotonic() + 30)
        assert caught.value.truncations == (
            Truncation(tp, committed=20, committed_epoch=0, resume_at=10, resume_epoch=0),
        )
        with pytest.raises(LogTruncationError):
            consumer.poll(1.0)  # again: nothing starts until the application seeks
        consumer.seek(tp, caught.value.divergent_offsets[tp])
        values = drain(consumer, len(LATER), 30)
    assert values == LATER


@pytest.mark.parametrize("reset", ["earliest", "error"])
def test_a_manually_assigned_partition_is_checked_for_the_truncation_too(
    truncated: str, reset: str, caplog: pytest.LogCaptureFixture
) -> None:
    # assign() without an offset starts from the group's committed offset, as a
    # member does: the same check, the same outcomes (no member, a plain fetch).
    group = f"g-manual-{reset}"
    _commit_past_the_truncation(truncated, group)
    tp = TopicPartition("t", 0)
    conf = consumer_conf(truncated, group, auto_offset_reset=reset)
    with (
        caplog.at_level(logging.WARNING, logger="kgroup.runtime"),
        Consumer(conf) as consumer,
    ):
        consumer.assign([tp])
        if reset == "error":
            with pytest.raises(LogTruncationError) as caught:
                _consume_until(consumer, time.monotonic() + 30)
            assert caught.value.divergent_offsets == {tp: 10}
            consumer.seek(tp, 10)
        values = drain(consumer, len(LATER), 30)
    assert values == LATER
    assert "the log was truncated" in caplog.text
