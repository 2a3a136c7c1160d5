"""A consumer whose cluster does not answer: at start-up, and calls that need no answer.

Measured on a real broker before the fix: a consumer created while its
cluster was unreachable (a broker restarting, a pod up before the cluster's
DNS name resolves) failed for good: ``NoBrokersAvailableError`` from every
poll, about 2.5 million of them in 50 s of a poll loop, and it never joined
once the broker was back. The Java client and librdkafka keep trying. kgroup
now raises the failure once (the application learns of a wrong address at
once) and keeps trying until a server answers or the consumer is closed.

The fake refuses bootstrap by dropping the connection on the Metadata request
that ends each bootstrap attempt. ``committed()`` of no partitions answers at
once, as Java's (it waited for a coordinator that did not answer).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import anyio
import pytest

from kgroup import AsyncConsumer, GroupProtocol
from kgroup.dataplane import Record
from kgroup.errors import NoBrokersAvailableError, RequestTimeoutError
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker, SeenRequest, Verdict
from kgroup.types import TopicPartition

from .helpers import DEADLINE, consumer_config, drive, produce_each

pytestmark = pytest.mark.anyio

CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 2_000, "heartbeat.interval.ms": 100}
BOTH = (TopicPartition("orders", 0), TopicPartition("orders", 1))
PROTOCOLS = pytest.mark.parametrize(
    "protocol", [{"group.protocol": "consumer"}, CLASSIC], ids=["consumer", "classic"]
)


def _refuse(seen: SeenRequest) -> Verdict:
    return Verdict.DROP


async def _first_error(consumer: AsyncConsumer) -> BaseException:
    """Poll until a poll raises; the exception."""
    with anyio.fail_after(DEADLINE):
        while True:
            try:
                await consumer.poll(0.01)
            except Exception as exc:
                return exc


@PROTOCOLS
async def test_a_consumer_started_before_its_cluster_answers_raises_once_then_joins_and_consumes(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 3)
    refused = broker.intercept(ApiKey.METADATA, _refuse, times=3)
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    config = consumer_config(broker, group_id, **protocol)
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        error = await _first_error(consumer)
        assert isinstance(error, NoBrokersAvailableError)
        assert broker.bootstrap_servers in str(error)
        # Not fatal: later polls raise nothing (drive would fail on an error)
        # while the consumer tries again and joins once the cluster answers.
        await drive(consumer, until=lambda: len(got[consumer]) == 6, sink=got)
        assert len(refused.calls) == 3
        assert consumer.assignment() == set(BOTH)
        await consumer.commit()
    assert broker.committed(group_id) == dict.fromkeys(BOTH, 3)


async def test_close_while_no_bootstrap_server_answers_ends_without_joining(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 1)
    refused = broker.intercept(ApiKey.METADATA, _refuse, times=None)
    config = consumer_config(broker, group_id)
    consumer = AsyncConsumer(config, dataplane=broker.dataplane())
    async with consumer:
        consumer.subscribe(["orders"])
        assert isinstance(await _first_error(consumer), NoBrokersAvailableError)
        # It keeps trying, quietly: polls return nothing and raise nothing.
        await drive(consumer, until=lambda: len(refused.calls) >= 3)
        with pytest.raises(RequestTimeoutError, match="could not connect in time"):
            await consumer.committed([BOTH[0]], timeout=0.2)
        with anyio.fail_after(DEADLINE):
            await consumer.close()
    assert not broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    assert not broker.requests_of(ApiKey.OFFSET_COMMIT)


async def test_close_drops_a_bootstrap_attempt_still_waiting_for_its_answer(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 1)
    silent = broker.intercept(ApiKey.METADATA, lambda seen: Verdict.NO_ANSWER, times=None)
    # The attempt would wait a minute for its answer; close must not.
    config = consumer_config(broker, group_id, **{"request.timeout.ms": 60_000})
    consumer = AsyncConsumer(config, dataplane=broker.dataplane())
    async with consumer:
        consumer.subscribe(["orders"])
        await broker.wait_until(lambda: len(silent.calls) == 1)
        with anyio.fail_after(DEADLINE):
            await consumer.close()
    assert len(silent.calls) == 1
    assert not broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)


async def test_auto_chooses_the_protocol_once_the_cluster_answers(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 1)
    produce_each(broker, "orders", 1, 2)
    broker.disable_consumer_protocol()
    refused = broker.intercept(ApiKey.METADATA, _refuse, times=2)
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    config = consumer_config(broker, group_id, **{**CLASSIC, "group.protocol": "auto"})
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        assert isinstance(await _first_error(consumer), NoBrokersAvailableError)
        await drive(consumer, until=lambda: len(got[consumer]) == 2, sink=got)
        assert consumer.group_protocol is GroupProtocol.CLASSIC
        assert len(refused.calls) == 2
    assert not broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)


async def test_committed_of_no_partitions_answers_at_once_without_a_request(
    broker: FakeBroker, group_id: str
) -> None:
    # Found with a classic member that had just lost its partitions to a broker
    # outage: committed(consumer.assignment()) with the assignment empty waited
    # its whole timeout for a coordinator, then raised RequestTimeoutError.
    broker.create_topic("orders", 1)
    silent = broker.intercept(ApiKey.FIND_COORDINATOR, lambda seen: Verdict.NO_ANSWER, times=None)
    async with AsyncConsumer(consumer_config(broker, group_id), dataplane=broker.dataplane()) as c:
        with anyio.fail_after(DEADLINE):
            assert await c.committed([], timeout=30) == {}
    assert not silent.calls
    assert not broker.requests_of(ApiKey.OFFSET_FETCH)
