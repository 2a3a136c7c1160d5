"""kgroup.Consumer (blocking) on the new protocol against a real Kafka broker.

The session broker runs the harness's fast settings: heartbeat 500 ms,
session timeout 6 s, no assignment batching.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any

import pytest
from helpers import (
    EventLog,
    Runner,
    consumer_conf,
    converged,
    drain,
    partitions_of,
    produce,
    wait_until,
)
from kio.static.protocol import RequestPayload, ResponsePayload

import kgroup
from kgroup import ConfigError, Consumer, ConsumerConfig, TopicPartition
from kgroup.errors import (
    InvalidSubscriptionError,
    NoBrokersAvailableError,
    UnreleasedInstanceIdError,
)
from kgroup.protocol import ApiKey, NegotiatedVersions
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport import KafkaClient, RequestBuilder

pytestmark = pytest.mark.integration


def _poll_for(consumer: Consumer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.1)


def test_single_member_consumes_everything_and_commits_survive_a_restart(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=12)
    group = make_group_id()
    first = produce(bootstrap, topic, 12, 600)
    log = EventLog()

    with Consumer(consumer_conf(bootstrap, group)) as consumer:
        consumer.subscribe([topic], log.listener("a"))
        values = drain(consumer, len(first), 30)
        assert set(values) == first
        assert consumer.assignment() == partitions_of(topic, 12)
        assert consumer.member_epoch > 0
        committed = consumer.commit()
        assert committed is not None
        assert sum(committed.values()) == 600
        assert consumer.committed(partitions_of(topic, 12)) == {
            tp: 50 for tp in partitions_of(topic, 12)
        }
    assert [e.kind for e in log.of("a")] == ["assigned", "revoked"]

    second = produce(bootstrap, topic, 12, 120, start=600)
    with Consumer(consumer_conf(bootstrap, group)) as consumer:
        consumer.subscribe([topic])
        values = drain(consumer, len(second), 30)
        # Resumes after the commit: nothing before it again, nothing after it skipped.
        assert set(values) == second
        assert len(values) == len(second)


def test_members_converge_hand_over_in_order_and_lose_nothing(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=6)
    group = make_group_id()
    everything = produce(bootstrap, topic, 6, 300)
    log = EventLog()
    conf = consumer_conf(bootstrap, group, auto_commit_interval_ms=200)
    all_partitions = partitions_of(topic, 6)

    runners = [Runner(conf, [topic], log, "a")]
    try:
        wait_until(lambda: converged(runners, all_partitions), 20, "a alone owns everything")
        runners.append(Runner(conf, [topic], log, "b"))
        wait_until(
            lambda: converged(runners, all_partitions) and all(r.assignment() for r in runners),
            20,
            "a and b converge",
        )
        runners.append(Runner(conf, [topic], log, "c"))
        wait_until(
            lambda: (
                converged(runners, all_partitions)
                and all(len(r.assignment()) == 2 for r in runners)
            ),
            20,
            "three members with two partitions each",
        )
        everything |= produce(bootstrap, topic, 6, 300, start=300)

        # b leaves with close(): its partitions move to a and c, who resume from
        # b's commits (made before its revoke callback).
        leaving = runners.pop(1)
        leaving.stop()
        wait_until(
            lambda: converged(runners, all_partitions) and all(r.assignment() for r in runners),
            20,
            "a and c take over b's share",
        )
        everything |= produce(bootstrap, topic, 6, 300, start=600)

        def consumed() -> set[str]:
            return set(runners[0].values) | set(runners[1].values) | set(leaving.values)

        wait_until(lambda: consumed() >= everything, 30, "every record consumed")
    finally:
        for runner in runners:
            runner.stop()
    assert consumed() == everything
    log.check_handover_order()
    # Every member committed what it consumed before giving partitions up or closing.
    with Consumer(consumer_conf(bootstrap, group)) as probe:
        assert probe.committed(all_partitions) == {tp: 150 for tp in all_partitions}
    # b was revoked what it had been assigned, as deltas.
    b_assigned: set[TopicPartition] = set().union(*(e.partitions for e in log.of("b", "assigned")))
    b_revoked: set[TopicPartition] = set().union(*(e.partitions for e in log.of("b", "revoked")))
    assert b_assigned == b_revoked
    assert not log.of("a", "lost")
    assert not log.of("c", "lost")


def test_static_member_rejoining_within_session_timeout_keeps_its_partitions(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=4)
    group = make_group_id()
    log = EventLog()
    all_partitions = partitions_of(topic, 4)
    static = consumer_conf(bootstrap, group, group_instance_id="static-1")
    dynamic = Runner(consumer_conf(bootstrap, group), [topic], log, "dynamic")
    first = Runner(static, [topic], log, "static")
    runners = [dynamic, first]
    try:
        wait_until(
            lambda: (
                converged(runners, all_partitions)
                and all(r.assignment() and log.held(r.name) == r.assignment() for r in runners)
            ),
            20,
            "two members share the topic, their listeners told",
        )
        before = first.assignment()
        dynamic_events = len(log.of("dynamic"))
        assert first.consumer.group_instance_id == "static-1"
        first.stop()  # leaves with epoch -2: the broker keeps its partitions
        again = Runner(static, [topic], log, "static-again")
        runners = [dynamic, again]
        wait_until(lambda: again.assignment() == before, 5, "the same partitions back")
        # The other member was never revoked anything meanwhile.
        assert len(log.of("dynamic")) == dynamic_events
    finally:
        for runner in runners:
            runner.stop()


def test_second_live_member_with_the_same_instance_id_fails_fatally(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    conf = consumer_conf(bootstrap, make_group_id(), group_instance_id="same")
    with Consumer(conf) as first:
        first.subscribe([topic])
        deadline = time.monotonic() + 20
        while first.assignment() != partitions_of(topic, 2) and time.monotonic() < deadline:
            first.poll(0.1)
        assert first.assignment() == partitions_of(topic, 2)
        with Consumer(conf) as second:
            second.subscribe([topic])
            with pytest.raises(UnreleasedInstanceIdError):
                _poll_for(second, 20)
        # The first member is unaffected.
        first.poll(0.5)
        assert first.assignment() == partitions_of(topic, 2)


def test_regex_subscription_picks_up_a_topic_created_later(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    prefix = f"rx{make_group_id('')}"
    first = make_topic(partitions=2, name=f"{prefix}-one")
    log = EventLog()
    with Consumer(consumer_conf(bootstrap, make_group_id())) as consumer:
        consumer.subscribe(pattern=re.compile(f"{prefix}-.*"), listener=log.listener("a"))
        deadline = time.monotonic() + 20
        while consumer.assignment() != partitions_of(first, 2) and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert consumer.assignment() == partitions_of(first, 2)
        second = make_topic(partitions=2, name=f"{prefix}-two")
        values = produce(bootstrap, second, 2, 20)
        got = drain(consumer, 20, 40)
        assert set(got) == values
        assert consumer.assignment() == partitions_of(first, 2) | partitions_of(second, 2)


def test_manual_commit_with_a_stale_epoch_is_retried_with_the_new_one(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    produce(bootstrap, topic, 2, 10)
    transport = _StaleCommits()
    conf = consumer_conf(bootstrap, make_group_id(), enable_auto_commit=False)
    with Consumer(conf, transport=transport.open) as consumer:
        consumer.subscribe([topic])
        assert len(drain(consumer, 10, 30)) == 10
        # Make the first commit attempt carry an epoch older than the one the
        # partitions were assigned in, as if the epoch moved on while it was in
        # flight; the broker answers STALE_MEMBER_EPOCH.
        sent = transport.sent
        transport.stale_next = True

        def real() -> int:
            return consumer.member_epoch

        committed = consumer.commit()
        assert committed == {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 5}
        assert sent == [real() - 1, real()]
        assert consumer.committed(partitions_of(topic, 2)) == committed


class _StaleCommits:
    """The consumer's cluster client (the ``transport=`` testing seam), watching OffsetCommit.

    Records the epoch of every OffsetCommit sent; with ``stale_next`` the next
    one goes out with the epoch before the member's.
    """

    def __init__(self) -> None:
        self.sent: list[int] = []
        self.stale_next = False

    def open(self, config: ConsumerConfig) -> KafkaClient:
        watcher = self

        class Client(KafkaClient):
            async def coordinator_request(
                self,
                group_id: str,
                request: RequestPayload | RequestBuilder,
                *,
                timeout: float | None = None,
            ) -> ResponsePayload:
                def build(versions: NegotiatedVersions) -> RequestPayload:
                    payload = request(versions) if callable(request) else request
                    return watcher.watch(payload)

                return await super().coordinator_request(group_id, build, timeout=timeout)

        return Client(config.bootstrap_servers, request_timeout=config.request_timeout_ms / 1000)

    def watch(self, payload: RequestPayload) -> RequestPayload:
        if int(payload.__api_key__) != ApiKey.OFFSET_COMMIT:
            return payload
        commit: Any = payload
        epoch = int(commit.generation_id_or_member_epoch)
        if self.stale_next:
            self.stale_next = False
            epoch -= 1
            payload = dataclasses.replace(commit, generation_id_or_member_epoch=epoch)
        self.sent.append(epoch)
        return payload


def test_commit_of_partitions_not_owned_is_dropped(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    other = make_topic(partitions=1)
    with Consumer(consumer_conf(bootstrap, make_group_id())) as consumer:
        consumer.subscribe([topic])
        wait_until(
            lambda: bool(consumer.consume(1, 0.1)) or bool(consumer.assignment()),
            20,
            "an assignment",
        )
        committed = consumer.commit({TopicPartition(topic, 0): 0, TopicPartition(other, 0): 7})
        assert committed == {TopicPartition(topic, 0): 0}
        assert consumer.committed([TopicPartition(other, 0)]) == {TopicPartition(other, 0): None}


class _ListenerError(Exception):
    pass


def test_listener_exception_surfaces_from_poll_and_the_callback_is_retried(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    expected = produce(bootstrap, topic, 2, 10)
    calls: list[frozenset[TopicPartition]] = []

    class FailsOnce:
        def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
            calls.append(partitions)
            if len(calls) == 1:
                raise _ListenerError("first call fails")

    with Consumer(consumer_conf(bootstrap, make_group_id())) as consumer:
        consumer.subscribe([topic], FailsOnce())
        with pytest.raises(_ListenerError):
            _poll_for(consumer, 20)
        got = drain(consumer, 10, 20)
        assert set(got) == expected
    assert calls == [partitions_of(topic, 2), partitions_of(topic, 2)]


def test_commit_async_reports_to_its_callback_in_a_later_poll(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=1)
    produce(bootstrap, topic, 1, 5)
    results: list[tuple[dict[TopicPartition, int], BaseException | None]] = []
    conf = consumer_conf(bootstrap, make_group_id(), enable_auto_commit=False)
    with Consumer(conf) as consumer:
        consumer.subscribe([topic])
        assert len(drain(consumer, 5, 20)) == 5
        consumer.commit_async(
            callback=lambda offsets, error: results.append((dict(offsets), error))
        )
        deadline = time.monotonic() + 10
        while not results and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert results == [({TopicPartition(topic, 0): 5}, None)]
        assert consumer.committed([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 5}


def test_poll_timeout_loses_the_partitions_and_the_next_poll_rejoins(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=2)
    log = EventLog()
    conf = consumer_conf(bootstrap, make_group_id(), max_poll_interval_ms=3000)
    with Consumer(conf) as consumer:
        consumer.subscribe([topic], log.listener("a"))
        deadline = time.monotonic() + 20
        while consumer.assignment() != partitions_of(topic, 2) and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert consumer.assignment() == partitions_of(topic, 2)
        member_id = consumer.member_id
        # The application is stuck longer than max.poll.interval.ms: the member
        # leaves in the background (heartbeats go on without the application).
        wait_until(lambda: consumer.member_epoch < 0, 10, "the member to leave on its own")
        assert consumer.assignment() == frozenset()
        # The next poll runs the lost callback and rejoins with the same id.
        deadline = time.monotonic() + 20
        while consumer.assignment() != partitions_of(topic, 2) and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert consumer.assignment() == partitions_of(topic, 2)
        assert consumer.member_id == member_id
    kinds = [e.kind for e in log.of("a")]
    assert kinds[:3] == ["assigned", "lost", "assigned"]
    assert log.of("a", "lost")[0].partitions == partitions_of(topic, 2)


def test_an_invalid_regex_is_refused_at_subscribe_and_the_consumer_stays_usable(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    # It used to reach the broker, whose INVALID_REGULAR_EXPRESSION was fatal:
    # every later poll raised it, even after subscribing to a valid topic.
    topic = make_topic(partitions=1)
    produce(kafka_broker.bootstrap_servers, topic, 1, 3)
    with Consumer(consumer_conf(kafka_broker.bootstrap_servers, make_group_id())) as consumer:
        with pytest.raises(InvalidSubscriptionError, match=r"'orders-\(' is not valid RE2"):
            consumer.subscribe(pattern="orders-(")
        assert consumer.subscription() == []
        consumer.subscribe([topic])
        assert len(drain(consumer, 3, 30)) == 3


def test_unreachable_bootstrap_server_is_a_clear_error_from_poll() -> None:
    conf = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "request.timeout.ms": 2000}
    started = time.monotonic()
    with Consumer(conf) as consumer:
        consumer.subscribe(["t"])
        with pytest.raises(NoBrokersAvailableError, match="127.0.0.1:1"):
            consumer.poll(15)
    assert time.monotonic() - started < 15


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"session.timeout.ms": 10000},
            "session.timeout.ms cannot be used with group.protocol=consumer",
        ),
        (
            {"partition.assignment.strategy": "range"},
            "partition.assignment.strategy cannot be used",
        ),
        ({"heartbeat.interval.ms": 1000}, "heartbeat.interval.ms cannot be used"),
        ({"no.such.key": "1"}, "no.such.key"),
        (
            {"group.protocol": "classic", "partition.assignment.strategy": "fancy"},
            "unknown assignor 'fancy'",
        ),
        (
            {"group.protocol": "classic", "group.remote.assignor": "uniform"},
            "group.remote.assignor cannot be used with group.protocol=classic",
        ),
    ],
)
def test_bad_config_fails_at_construction_naming_the_key(
    extra: dict[str, Any], message: str
) -> None:
    conf = {"bootstrap.servers": "127.0.0.1:9", "group.id": "g", **extra}
    with pytest.raises(ConfigError, match=re.escape(message)):
        Consumer(conf)


def test_missing_group_id_is_an_error() -> None:
    with pytest.raises(ConfigError, match="group.id"):
        kgroup.Consumer({"bootstrap.servers": "127.0.0.1:9"})
