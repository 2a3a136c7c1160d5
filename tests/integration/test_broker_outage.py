"""The cluster stops answering: before the consumer connected, and under running members.

Found on this broker before the fix: a consumer created while the broker was
down failed for good (``NoBrokersAvailableError`` from every poll, about 2.5
million in 50 s of a poll loop) and never joined once the broker was back;
the Java client and librdkafka keep trying. Now the error is raised once and
the consumer joins when the broker answers.

Running members rode out an outage already (measured: a broker stopped for 8 s
and 40 s, and killed): these tests keep it so. The broker is this module's
own: the tests stop it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from helpers import (
    BothProtocols,
    EventLog,
    classic_conf,
    consumer_conf,
    drain,
    partitions_of,
    produce,
    text,
    wait_until,
)

from kgroup import Consumer
from kgroup.errors import NoBrokersAvailableError
from kgroup.testing import KafkaBroker, NodeState, create_topic
from kgroup.testing.pytest_plugin import MakeGroupId


@pytest.fixture(scope="module")
def own_broker() -> Iterator[KafkaBroker]:
    with KafkaBroker() as broker:
        yield broker


@pytest.fixture
def running(own_broker: KafkaBroker) -> Iterator[KafkaBroker]:
    """The module's broker, running again after a test that stopped it failed."""
    yield own_broker
    if own_broker.state is not NodeState.RUNNING:
        own_broker.start()


def test_consumers_started_while_the_broker_is_down_raise_once_and_consume_once_it_is_up(
    running: KafkaBroker, make_group_id: MakeGroupId
) -> None:
    bootstrap = running.bootstrap_servers
    create_topic(bootstrap, "before-up", partitions=2)
    want = produce(bootstrap, "before-up", 2, 20)
    running.stop()
    consumers = {
        "consumer": Consumer(consumer_conf(bootstrap, make_group_id())),
        "classic": Consumer(classic_conf(bootstrap, make_group_id(), "cooperative-sticky")),
    }
    try:
        errors: dict[str, list[BaseException]] = {name: [] for name in consumers}
        got: dict[str, set[str]] = {name: set() for name in consumers}

        def poll_all(done: Callable[[], bool]) -> Callable[[], bool]:
            """A wait_until condition: every consumer polls once, then ``done()``."""

            def condition() -> bool:
                for name, consumer in consumers.items():
                    try:
                        got[name].update(text(m) for m in consumer.consume(100, 0.1))
                    except NoBrokersAvailableError as exc:
                        errors[name].append(exc)
                return done()

            return condition

        for consumer in consumers.values():
            consumer.subscribe(["before-up"])
        wait_until(poll_all(lambda: all(errors.values())), 30, "each consumer to raise once")
        assert all(bootstrap in str(e[0]) for e in errors.values())
        # Still down: the consumers keep trying without raising again.
        keep_polling = poll_all(lambda: False)
        for _ in range(10):
            keep_polling()
        running.start()
        wait_until(poll_all(lambda: all(want <= g for g in got.values())), 60, "all read")
        assert {name: len(e) for name, e in errors.items()} == {"consumer": 1, "classic": 1}
        for consumer in consumers.values():
            assert consumer.assignment() == partitions_of("before-up", 2)
            assert consumer.commit() == dict.fromkeys(partitions_of("before-up", 2), 10)
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_running_members_ride_out_a_broker_restart_without_losing_a_record(
    running: KafkaBroker, make_group_id: MakeGroupId
) -> None:
    bootstrap = running.bootstrap_servers
    create_topic(bootstrap, "outage", partitions=4)
    with BothProtocols(bootstrap, "outage", 4, make_group_id) as groups:
        wait_until(groups.balanced, 60, "both groups balanced")
        before = groups.mark()
        running.stop()
        # Down until the classic members' sessions ran out without an answer.
        wait_until(
            lambda: all(groups.log.of(r.name, "lost") for r in groups.runners["classic"]),
            30,
            "the classic members to give their partitions up",
        )
        running.start()
        wait_until(groups.balanced, 60, "both groups balanced again")
        groups.read_every_record(60)
        # The consumer protocol's members kept their partitions through the outage:
        # the restarted coordinator loaded the group, epochs and all.
        assert groups.calls_since(before, "consumer") == {"consumer-1": [], "consumer-2": []}


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_close_while_the_broker_is_down_tells_the_listener_its_partitions_are_lost(
    running: KafkaBroker, make_group_id: MakeGroupId, protocol: str
) -> None:
    # Found before the fix: close(5) ended at its deadline with the commit
    # before the revocation unanswered, and no callback ran at all.
    bootstrap = running.bootstrap_servers
    topic = f"closing-{protocol}"
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, 2, 10)
    group = make_group_id()
    conf = (
        consumer_conf(bootstrap, group)
        if protocol == "consumer"
        else classic_conf(bootstrap, group, "cooperative-sticky")
    )
    log = EventLog()
    consumer = Consumer(conf)
    try:
        consumer.subscribe([topic], log.listener("m"))
        assert len(drain(consumer, 10, 30)) == 10
        assert log.held("m") == partitions_of(topic, 2)
        running.stop()
    finally:
        consumer.close(3)
    assert [(e.kind, e.partitions) for e in log.of("m")][-1] == ("lost", partitions_of(topic, 2))
    assert log.held("m") == frozenset()
