"""The blocking Consumer through the fake broker (served from its own thread).

The consumer's event loop and the fake broker's each run in a thread of their
own, on the backend under test.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from kgroup import Consumer
from kgroup.dataplane import Record
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

from .helpers import DEADLINE, Recorder, consumer_config, tps


@pytest.fixture(params=["asyncio", "trio"])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def poll_until(consumer: Consumer, until: Callable[[], bool], sink: list[Record]) -> None:
    """Poll (where callbacks run) until ``until()`` holds; TimeoutError after the deadline."""
    deadline = time.monotonic() + DEADLINE
    while not until():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        sink.extend(consumer.consume(100, 0.01))


def test_blocking_consumer_joins_consumes_commits_and_leaves(backend: str) -> None:
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 2)
        broker.produce("orders", 0, b"a")
        broker.produce("orders", 1, b"b")
        listener = Recorder()
        got: list[Record] = []
        config = consumer_config(broker, "blocking")
        with Consumer(config, backend=backend, dataplane=broker.dataplane()) as consumer:
            consumer.subscribe(["orders"], listener=listener)

            def joined() -> bool:
                group = broker.consumer_group("blocking")
                return group is not None and consumer.member_id in group.members

            # The member joins in the background, before any poll.
            broker.wait_for(joined, DEADLINE)
            poll_until(consumer, lambda: len(got) == 2, got)
            assert sorted((r.partition(), r.value()) for r in got) == [(0, b"a"), (1, b"b")]
            assert consumer.commit() == {
                TopicPartition("orders", 0): 1,
                TopicPartition("orders", 1): 1,
            }
            member_id = consumer.member_id

        assert broker.committed("blocking") == {
            TopicPartition("orders", 0): 1,
            TopicPartition("orders", 1): 1,
        }
        assert listener.events == [
            ("assigned", tps("orders", 0, 1)),
            ("revoked", tps("orders", 0, 1)),
        ]
        last = broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)[-1]
        assert (last.request.member_id, last.request.member_epoch) == (member_id, -1)


def test_blocking_classic_consumer_rebalances_when_a_second_member_joins(backend: str) -> None:
    classic = {
        "group.protocol": "classic",
        "session.timeout.ms": 2000,
        "heartbeat.interval.ms": 100,
    }
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 2)
        config = consumer_config(broker, "blocking-classic", **classic)
        sink: list[Record] = []
        with (
            Consumer(config, backend=backend, dataplane=broker.dataplane()) as first,
            Consumer(config, backend=backend, dataplane=broker.dataplane()) as second,
        ):
            first.subscribe(["orders"])
            poll_until(first, lambda: first.assignment() == tps("orders", 0, 1), sink)
            second.subscribe(["orders"])

            def split() -> bool:
                # Both applications keep polling: the rebalance needs both.
                sink.extend(second.consume(100, 0.01))
                return len(first.assignment()) == len(second.assignment()) == 1

            poll_until(first, split, sink)
            assert first.assignment() | second.assignment() == tps("orders", 0, 1)
            group = broker.classic_group("blocking-classic")
            assert group is not None
            assert first.member_epoch == second.member_epoch == group.generation_id


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_blocking_commit_in_revoke_callback_during_close_is_accepted(
    backend: str, protocol: str
) -> None:
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 2)
        broker.produce("orders", 0, b"a")
        broker.produce("orders", 1, b"b")
        got: list[Record] = []
        committed: list[dict[TopicPartition, int] | None] = []
        extra: dict[str, object] = {"group.protocol": protocol, "enable.auto.commit": False}
        if protocol == "classic":
            extra |= {"session.timeout.ms": 2_000, "heartbeat.interval.ms": 100}
        config = consumer_config(broker, "closing", **extra)
        consumer = Consumer(config, backend=backend, dataplane=broker.dataplane())

        class CommitOnRevoke:
            def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                committed.append(consumer.commit())

        consumer.subscribe(["orders"], listener=CommitOnRevoke())
        poll_until(consumer, lambda: len(got) == 2, got)
        consumer.close()

        everything = {TopicPartition("orders", 0): 1, TopicPartition("orders", 1): 1}
        assert committed == [everything]
        assert broker.committed("closing") == everything


class ReadsAssignment:
    """A listener that reads assignment() inside its callbacks, as Java applications do."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.seen: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.seen.append(("assigned", self.consumer.assignment()))

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.seen.append(("revoked", self.consumer.assignment()))


def test_assignment_and_paused_are_read_without_a_call_into_the_loop(backend: str) -> None:
    """The loop publishes them after every change: a read in a callback sees what the
    callback is about, a read after assign() or pause() sees that call's effect."""
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 2)
        config = consumer_config(broker, "snapshot")
        with Consumer(config, backend=backend, dataplane=broker.dataplane()) as consumer:
            listener = ReadsAssignment(consumer)
            consumer.subscribe(["orders"], listener=listener)
            poll_until(consumer, lambda: bool(listener.seen), [])
            assert listener.seen == [("assigned", tps("orders", 0, 1))]
            consumer.pause([TopicPartition("orders", 0)])
            assert consumer.paused() == tps("orders", 0)
            consumer.resume([TopicPartition("orders", 0)])
            assert consumer.paused() == frozenset()
            # A read must not cross into the loop's thread: with the loop's
            # portal gone, it still answers.
            calls = consumer._portal.call
            consumer._portal.call = None  # type: ignore[assignment]
            try:
                assert consumer.assignment() == tps("orders", 0, 1)
                assert consumer.paused() == frozenset()
            finally:
                consumer._portal.call = calls  # type: ignore[method-assign]
            consumer.unsubscribe()
            poll_until(consumer, lambda: len(listener.seen) == 2, [])
        # Revoked while still held: the callback reads the partitions it gives up.
        assert listener.seen[1] == ("revoked", tps("orders", 0, 1))
