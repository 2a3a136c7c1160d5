"""A topic deleted and created again under the same name while a kgroup member consumes it.

Kafka gives the new topic a new id and deletes the group's offsets of the old
one; the member's fetch of the old position (20 per partition here) finds the
new, shorter log out of range and librdkafka resets it to the beginning. Found
on this broker before the fix, with a classic member: librdkafka's batched
consume never moves a position back, so after reading offsets 0-2 of the new
log the position still said 20; auto-commit committed it, and the next member
started at 20, skipping 17 records per partition. ``committed()`` of the topic
retried the old id until its timeout (UNKNOWN_TOPIC_ID), and a commit raised it.

Now the commit learns of the new id (the broker refuses the old one), leaves
the partitions out and fetches them anew; so the final commit is what was read.
"""

from __future__ import annotations

import time

import pytest
from helpers import classic_conf, consumer_conf, drain, partitions_of, produce, text

from kgroup import Consumer
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.testing.topics import create_topic, delete_topics

PARTITIONS = 2


def _conf(bootstrap: str, group: str, protocol: str) -> dict[str, object]:
    # Auto-commit every 200 ms: the commit that would carry the old position
    # comes while the member reads the new topic, as in an application.
    if protocol == "classic":
        return classic_conf(bootstrap, group, "cooperative-sticky", auto_commit_interval_ms=200)
    return consumer_conf(bootstrap, group, auto_commit_interval_ms=200)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_commit_after_the_topic_was_recreated_skips_none_of_the_new_records(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, protocol: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=PARTITIONS)
    group = make_group_id()
    partitions = partitions_of(topic, PARTITIONS)
    produce(bootstrap, topic, PARTITIONS, 40)  # offsets 0-19 in each partition

    with Consumer(_conf(bootstrap, group, protocol)) as consumer:
        consumer.subscribe([topic])
        assert len(drain(consumer, 40, 30)) == 40

        delete_topics(bootstrap, [topic])
        create_topic(bootstrap, topic, partitions=PARTITIONS)
        new = produce(bootstrap, topic, PARTITIONS, 6, start=1000)  # offsets 0-2 in each

        # The group's offsets went with the old topic, and the answer comes at
        # once (before the fix: a timeout, retrying the old topic id).
        started = time.monotonic()
        before = consumer.committed(partitions, timeout=20)
        assert time.monotonic() - started < 10
        assert all(offset is None or offset <= 3 for offset in before.values()), before

        # Read the new records (again, where the member fetched anew) until the
        # position says what was read.
        read: list[str] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            read.extend(text(m) for m in consumer.consume(100, 0.2))
            if new <= set(read) and consumer.position(partitions) == dict.fromkeys(partitions, 3):
                break
        assert set(read) == new
        assert consumer.position(partitions) == dict.fromkeys(partitions, 3)
    # close() committed the positions.

    later = produce(bootstrap, topic, PARTITIONS, 60, start=2000)  # offsets 3-32
    with Consumer(_conf(bootstrap, group, protocol)) as consumer:
        assert consumer.committed(partitions) == dict.fromkeys(partitions, 3)
        consumer.subscribe([topic])
        values = drain(consumer, len(later), 30)
    assert sorted(values) == sorted(later)
