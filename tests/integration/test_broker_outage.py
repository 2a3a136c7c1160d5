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

import threading
from collections.abc import Callable, Iterator

import confluent_kafka
import pytest
from helpers import (
    EventLog,
    Runner,
    classic_conf,
    consumer_conf,
    converged,
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


class _Producer:
    """Writes numbered records to every partition until stopped; keeps the acknowledged ones."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.acked: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 120_000}
        )
        self._thread = threading.Thread(target=self._run, args=(topic, partitions), daemon=True)
        self._thread.start()

    def _acked(self, error: object, message: confluent_kafka.Message) -> None:
        if error is None:
            with self._lock:
                self.acked.add(text(message))

    def _run(self, topic: str, partitions: int) -> None:
        n = 0
        while not self._stop.is_set():
            self._producer.produce(
                topic, value=f"r{n}".encode(), partition=n % partitions, on_delivery=self._acked
            )
            n += 1
            # Pacing the writes (not a wait for an event): ~200 records/s.
            self._producer.poll(0.005)

    def stop(self) -> set[str]:
        """Stop writing; every record written is acknowledged first. Idempotent."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(30)
            assert self._producer.flush(120) == 0, "records left undelivered"
        with self._lock:
            return set(self.acked)


def _read(members: list[Runner]) -> set[str]:
    return {v for r in members for v in list(r.values)}


def test_running_members_ride_out_a_broker_restart_without_losing_a_record(
    running: KafkaBroker, make_group_id: MakeGroupId
) -> None:
    bootstrap = running.bootstrap_servers
    create_topic(bootstrap, "outage", partitions=4)
    log = EventLog()
    groups = {
        "consumer": consumer_conf(bootstrap, make_group_id()),
        "classic": classic_conf(bootstrap, make_group_id(), "cooperative-sticky"),
    }
    runners = {
        name: [Runner(conf, "outage", log, f"{name}-{n}") for n in (1, 2)]
        for name, conf in groups.items()
    }
    producer = _Producer(bootstrap, "outage", 4)
    try:
        everything = partitions_of("outage", 4)

        def balanced() -> bool:
            # And every listener told of it (callbacks run in a later poll).
            return all(
                converged(members, everything)
                and all(m.assignment() and log.held(m.name) == m.assignment() for m in members)
                for members in runners.values()
            )

        wait_until(balanced, 60, "both groups balanced")
        before = {r.name: len(log.of(r.name)) for members in runners.values() for r in members}
        running.stop()
        # Down until the classic members' sessions ran out without an answer.
        wait_until(
            lambda: all(log.of(r.name, "lost") for r in runners["classic"]),
            30,
            "the classic members to give their partitions up",
        )
        running.start()
        wait_until(balanced, 60, "both groups balanced again")
        acked = producer.stop()
        for name, members in runners.items():
            wait_until(
                lambda members=members: acked <= _read(members),  # type: ignore[misc]
                60,
                f"the {name} group to read every acknowledged record",
            )
        # The consumer protocol's members kept their partitions through the outage:
        # the restarted coordinator loaded the group, epochs and all.
        for r in runners["consumer"]:
            assert log.of(r.name)[before[r.name] :] == [], r.name
    finally:
        producer.stop()
        for members in runners.values():
            for r in members:
                r.stop()
