"""Reliability fixes of issue 10 against a real Kafka broker, both protocols."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import classic_conf, consumer_conf, drain, drain_async, partitions_of, produce

from kgroup import AsyncConsumer, Consumer, TopicPartition
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration


def _conf(protocol: str, bootstrap: str, group: str) -> dict[str, Any]:
    if protocol == "classic":
        return classic_conf(bootstrap, group, "cooperative-sticky", enable_auto_commit=False)
    return consumer_conf(bootstrap, group, enable_auto_commit=False)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_commit_in_revoke_callback_during_close_is_accepted_and_a_new_member_resumes_after_it(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, protocol: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=3)
    group = make_group_id()
    first = produce(bootstrap, topic, 3, 90)
    committed: list[dict[TopicPartition, int] | None] = []
    conf = _conf(protocol, bootstrap, group)

    consumer = Consumer(conf)

    class CommitOnRevoke:
        def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
            committed.append(consumer.commit())

    consumer.subscribe([topic], CommitOnRevoke())
    assert set(drain(consumer, len(first), 30)) == first
    consumer.close()

    assert committed == [{tp: 30 for tp in partitions_of(topic, 3)}]
    second = produce(bootstrap, topic, 3, 30, start=90)
    with Consumer(conf) as again:
        again.subscribe([topic])
        values = drain(again, len(second), 30)
        # Resumes after the close's commit: nothing of the first batch again.
        assert sorted(values) == sorted(second)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("protocol", ["consumer", "classic"])
async def test_async_commit_in_revoke_callback_during_close_is_accepted(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, protocol: str
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=3)
    group = make_group_id()
    first = produce(bootstrap, topic, 3, 60)
    committed: list[dict[TopicPartition, int]] = []
    conf = _conf(protocol, bootstrap, group)

    async with AsyncConsumer(conf) as consumer:

        class CommitOnRevoke:
            async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                committed.append(await consumer.commit())

        consumer.subscribe([topic], CommitOnRevoke())
        assert set(await drain_async(consumer, len(first), 30)) == first

    assert committed == [{tp: 20 for tp in partitions_of(topic, 3)}]
    async with AsyncConsumer(conf) as again:
        assert await again.committed(sorted(partitions_of(topic, 3))) == {
            tp: 20 for tp in partitions_of(topic, 3)
        }
