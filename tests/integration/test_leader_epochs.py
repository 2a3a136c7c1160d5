"""KIP-320 against a real broker: kgroup commits each offset with the leader epoch of
the record before it, as the Java client and librdkafka do, and a member that
starts from such an offset hands the epoch to librdkafka, which validates the
offset against the leader's log before fetching.

Without the epoch a committed offset cannot be checked after a log truncation
(an unclean leader election): the next owner falls back to auto.offset.reset,
which skips records (latest) or replays the partition (earliest), KAFKA-20507.
"""

from __future__ import annotations

from typing import Any

import confluent_kafka
import pytest
from helpers import classic_conf, consumer_conf, drain, produce

from kgroup import Consumer
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

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
