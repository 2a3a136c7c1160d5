"""A consumer-protocol member fenced on a broker before KAFKA-19233 (Apache Kafka 4.0 / 4.1).

Such a broker checks the epoch 0 of a rejoin against the member it still holds
like any other epoch: unless 0 is that member's previous epoch it answers
FENCED_MEMBER_EPOCH, every time, until the held member's session times out.
Every broker version refuses a static member's rejoin the same way, with
UNRELEASED_INSTANCE_ID naming the member itself. kgroup then leaves with epoch
-1 (the broker removes the held member and releases its partitions) and
rejoins. See docs/new-protocol.md ("Rejoin refused").

The wire-level test pins those broker answers with kgroup's own requests; the
consumer test shows a kgroup member getting its partitions back at once. One
broker (4.0.2, the last 4.0 release) for the module. Its consumer session
timeout is raised to 20 s so that "back at once" and "back after the session
timeout" are far apart.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable, Iterator

import anyio
import pytest
from helpers import RECREATED_PARTITIONS, consume_across_recreation, consumer_conf

from kgroup import Consumer, TopicPartition
from kgroup.membership import HeartbeatRequest, HeartbeatResponse
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.requests import consumer_group_heartbeat
from kgroup.testing import KafkaBroker
from kgroup.testing.proxy import FaultProxy
from kgroup.testing.topics import create_topic
from kgroup.transport import KafkaClient

pytestmark = pytest.mark.integration

PRE_FIX_VERSION = "4.0.2"
SESSION_MS = 20_000
PARTITIONS = 4
HEARTBEAT = int(ApiKey.CONSUMER_GROUP_HEARTBEAT)
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
# The coordinator may still be loading right after the broker started.
_LOADING = frozenset({14, 15, 16})


@pytest.fixture(scope="module")
def old_broker() -> Iterator[KafkaBroker]:
    overrides = {
        "group.consumer.session.timeout.ms": str(SESSION_MS),
        "group.consumer.min.session.timeout.ms": str(SESSION_MS),
    }
    with KafkaBroker(overrides, version=PRE_FIX_VERSION) as broker:
        yield broker


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # one wire-level run is enough; the consumers above are blocking


async def _heartbeat(client: KafkaClient, request: HeartbeatRequest) -> HeartbeatResponse:
    for _ in range(100):
        raw = await client.coordinator_request(
            request.group_id,
            lambda versions: consumer_group_heartbeat.build(versions, request),
        )
        response = consumer_group_heartbeat.parse(consumer_group_heartbeat.narrow(raw))
        if response.error_code not in _LOADING:
            return response
        await anyio.sleep(0.1)
    raise AssertionError(f"the coordinator never answered {request}")


def _join(
    group: str, member_id: str, topics: tuple[str, ...], instance: str | None
) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=0,
        instance_id=instance,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=topics,
        topic_partitions=frozenset(),
    )


@pytest.mark.anyio
@pytest.mark.parametrize("instance", [None, "i-1"], ids=["dynamic", "static"])
async def test_the_broker_refuses_an_epoch_zero_rejoin_it_holds_and_accepts_a_leave(
    old_broker: KafkaBroker, instance: str | None
) -> None:
    """The facts the member's LEAVING_TO_REJOIN rests on, with kgroup's own requests."""
    topics = tuple(f"wire-{uuid.uuid4().hex[:8]}-{i}" for i in range(3))
    for topic in topics:
        create_topic(old_broker.bootstrap_servers, topic, partitions=2)
    group = f"g-{topics[0]}"
    member_id = str(uuid.uuid4())
    async with KafkaClient(old_broker.bootstrap_servers) as client:
        joined = await _heartbeat(client, _join(group, member_id, topics[:1], instance))
        epoch = joined.member_epoch
        # Two subscription changes that only add partitions: epoch + 2, previous epoch + 1.
        for n in (2, 3):
            grown = HeartbeatRequest(
                group_id=group,
                member_id=member_id,
                member_epoch=epoch,
                instance_id=instance,
                subscribed_topic_names=topics[:n],
            )
            epoch = (await _heartbeat(client, grown)).member_epoch
        assert epoch == joined.member_epoch + 2
        wrong = HeartbeatRequest(group, member_id, epoch + 5, instance_id=instance)
        assert (await _heartbeat(client, wrong)).error_code == FENCED_MEMBER_EPOCH
        refusal = FENCED_MEMBER_EPOCH if instance is None else UNRELEASED_INSTANCE_ID
        for _ in range(2):  # again and again: the member is held until its session ends
            rejoin = await _heartbeat(client, _join(group, member_id, topics, instance))
            assert rejoin.error_code == refusal
        leave = HeartbeatRequest(group, member_id, -1, instance_id=instance)
        assert (await _heartbeat(client, leave)).error_code == 0
        back = await _heartbeat(client, _join(group, member_id, topics, instance))
    assert back.error_code == 0
    assert back.member_epoch > epoch
    assert back.assignment is not None
    assert sum(len(parts) for parts in back.assignment.values()) == 6


def _as_fenced(payload: bytes) -> bytes:
    """A ConsumerGroupHeartbeat response turned into FENCED_MEMBER_EPOCH.

    ``payload``: correlation id (4 bytes), the flexible header's tagged fields
    (one byte, 0: none), ThrottleTimeMs (4), ErrorCode (2), ... The broker
    accepted the heartbeat, so it holds the member at its epoch as after a real
    FENCED_MEMBER_EPOCH answer (which changes nothing on the broker).
    """
    if payload[4] != 0:
        return payload  # unexpected tagged fields: leave it (the test then fails)
    return payload[:9] + struct.pack(">h", FENCED_MEMBER_EPOCH) + payload[11:]


def _poll(*consumers: Consumer) -> None:
    for consumer in consumers:
        consumer.poll(0.05)


def _wait(
    consumers: tuple[Consumer, ...], condition: Callable[[], bool], timeout: float, what: str
) -> float:
    """Poll ``consumers`` (their callbacks run in poll) until ``condition()``; seconds taken."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        _poll(*consumers)
    return time.monotonic() - start


class _Recorder:
    """a's listener: when it lost partitions and when it got partitions after that."""

    def __init__(self) -> None:
        self.lost_at: float | None = None
        self.back_at: float | None = None

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        if self.lost_at is None:
            self.lost_at = time.monotonic()

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        if self.lost_at is not None and partitions and self.back_at is None:
            self.back_at = time.monotonic()


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_a_member_fenced_on_a_pre_kafka_19233_broker_gets_partitions_back_at_once(
    old_broker: KafkaBroker, static: bool
) -> None:
    # static: the rejoin is refused UNRELEASED_INSTANCE_ID (for its own member id,
    # on every broker version), which was fatal before; dynamic: FENCED_MEMBER_EPOCH.
    topic = f"old-broker-{uuid.uuid4().hex[:8]}"
    group = f"g-{topic}"
    create_topic(old_broker.bootstrap_servers, topic, partitions=PARTITIONS)
    everything = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    session = {"group_consumer_session_timeout_ms": SESSION_MS}
    recorder = _Recorder()
    with FaultProxy(old_broker.bootstrap_servers).running_in_thread() as proxy:
        extra = {"group_instance_id": "static-a"} if static else {}
        a = Consumer(consumer_conf(proxy.bootstrap_servers, group, **session, **extra))
        b = Consumer(consumer_conf(old_broker.bootstrap_servers, group, **session))
        both = (a, b)
        try:
            a.subscribe([topic], listener=recorder)
            _wait((a,), lambda: a.assignment() == everything, 30, "a holding every partition")
            b.subscribe([topic])

            def split() -> bool:
                held_a, held_b = a.assignment(), b.assignment()
                return len(held_a) == len(held_b) == 2 and held_a | held_b == everything

            _wait(both, split, 30, "a and b holding two partitions each")
            # a gave up two partitions for b: epoch 2 or more, its previous one not 0,
            # so the 4.0 broker refuses its rejoin at epoch 0.
            epoch = a.member_epoch
            assert epoch >= 2
            member_id = a.member_id

            sent_before = proxy.stats().forwarded.get(HEARTBEAT, 0)
            proxy.corrupt(HEARTBEAT, count=1, make=_as_fenced)
            _wait(both, lambda: recorder.lost_at is not None, 10, "a losing its partitions")
            _wait(
                both,
                lambda: recorder.back_at is not None and split(),
                SESSION_MS / 1000 + 10,
                "a holding two partitions again",
            )
            heartbeats = proxy.stats().forwarded.get(HEARTBEAT, 0) - sent_before
        finally:
            for consumer in both:
                consumer.close(10)
    assert proxy.stats().corrupted.get(HEARTBEAT) == 1
    assert a.member_id == member_id  # the same member id throughout (KIP-1082)
    assert recorder.lost_at is not None
    assert recorder.back_at is not None
    took = recorder.back_at - recorder.lost_at
    # Before the fix: a rejoin refused every few milliseconds for the 20 s session
    # timeout (thousands of heartbeats), the partitions back only after it.
    assert took < 8.0, f"partitions back {took:.1f}s after they were lost"
    assert heartbeats <= 15, f"{heartbeats} heartbeats from the fence to the partitions back"


def test_a_topic_recreated_under_a_classic_member_is_noticed_where_commits_name_topics(
    old_broker: KafkaBroker,
) -> None:
    # Kafka 4.0 takes OffsetCommit by topic name (v9): it accepted the old
    # position for the new topic (committed 20 after 0-2 were read; the next
    # member skipped 17 records per partition). The position past the end of
    # the log the data plane fetched has the member describe the topic again.
    topic = f"recreated-{uuid.uuid4().hex[:8]}"
    create_topic(old_broker.bootstrap_servers, topic, partitions=RECREATED_PARTITIONS)
    consume_across_recreation(
        old_broker.bootstrap_servers, topic, f"g-recreated-{uuid.uuid4().hex[:8]}", "classic"
    )
