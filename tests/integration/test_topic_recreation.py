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
``test_old_broker.py`` runs the same on Kafka 4.0, which takes commits by topic
name: there the position past the new log's end gives it away.
"""

from __future__ import annotations

import pytest
from helpers import (
    RECREATED_PARTITIONS,
    classic_conf,
    consume_across_recreation,
    drain,
    partitions_of,
    produce,
    wait_until,
)

from kgroup import Consumer
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.testing.topics import delete_topics


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_commit_after_the_topic_was_recreated_skips_none_of_the_new_records(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, protocol: str
) -> None:
    topic = make_topic(partitions=RECREATED_PARTITIONS)
    consume_across_recreation(kafka_broker.bootstrap_servers, topic, make_group_id(), protocol)


def test_a_classic_group_drops_a_deleted_topic_once_the_leaders_commit_finds_it_gone(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    # metadata.max.age.ms at its default (5 minutes): without the commit's
    # signal the leader would look again only then.
    bootstrap = kafka_broker.bootstrap_servers
    doomed, kept = make_topic(partitions=2), make_topic(partitions=2)
    produce(bootstrap, doomed, 2, 4)
    conf = classic_conf(bootstrap, make_group_id(), "cooperative-sticky")
    with Consumer(conf) as consumer:
        consumer.subscribe([doomed, kept])
        assert len(drain(consumer, 4, 30)) == 4
        delete_topics(bootstrap, [doomed])
        consumer.commit()  # what auto-commit does within auto.commit.interval.ms
        wait_until(
            lambda: consumer.poll(0.1) is None and consumer.assignment() == partitions_of(kept, 2),
            30,
            "the group's assignment without the deleted topic",
        )
