"""The steps of a revocation run in the poll that starts them, asyncio and trio.

A poll that releases the commit before a revocation waits for its answer and
runs the revoke callback itself; a callback's successor (the assign callback
after a revoke) runs in the same poll. Each used to wait for the next poll: a
poll interval per step, which with slow polls and callbacks overran the
rebalance timeout and got a member removed round after round (simulator seed
254489).

The application here has records waiting on every poll, as a busy consumer
does: a poll returns as soon as it has them, so nothing but the front end's
own wait keeps a step in the poll that started it.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from kio.schema.errors import ErrorCode

from kgroup import AsyncConsumer, Consumer
from kgroup.protocol import ApiKey
from kgroup.runtime.work import RevocationCommitWork
from kgroup.testing.fake import FakeBroker, SeenRequest, Verdict
from kgroup.types import TopicPartition

from .helpers import DEADLINE, consumer_config, produce_each

pytestmark = pytest.mark.anyio

CLASSIC = {
    "group.protocol": "classic",
    "partition.assignment.strategy": "cooperative-sticky",
    "session.timeout.ms": 2_000,
    "heartbeat.interval.ms": 100,
}
PROTOCOLS = pytest.mark.parametrize(
    "protocol", [{"group.protocol": "consumer"}, CLASSIC], ids=["consumer", "classic"]
)


class PollCounter:
    """The application's poll number, and each callback with the poll it ran in."""

    def __init__(self) -> None:
        self.polls = 0
        self.callbacks: list[tuple[str, frozenset[TopicPartition], int]] = []

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.callbacks.append(("assigned", partitions, self.polls))

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.callbacks.append(("revoked", partitions, self.polls))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.callbacks.append(("lost", partitions, self.polls))

    def revoked(self) -> list[tuple[frozenset[TopicPartition], int]]:
        return [(p, n) for kind, p, n in self.callbacks if kind == "revoked" and p]


async def _rebalance_under_load(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> tuple[PollCounter, list[int]]:
    """``a`` owns both partitions of a busy topic; ``b`` joins; ``a`` polls until it
    has revoked one and heard the rebalance's last callback. Returns ``a``'s
    callbacks and the poll number each commit reached the broker in."""
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 2_000)
    # Only the commits before a revocation: no interval auto-commit in the test.
    config = consumer_config(broker, group_id, **protocol, **{"auto.commit.interval.ms": 600_000})
    counter = PollCounter()
    commits_in_poll: list[int] = []

    def note(_seen: SeenRequest) -> ErrorCode | None:
        commits_in_poll.append(counter.polls)
        return None  # answered by the model

    broker.intercept(ApiKey.OFFSET_COMMIT, note, times=None)
    async with (
        AsyncConsumer(config, dataplane=broker.dataplane()) as a,
        AsyncConsumer(config, dataplane=broker.dataplane()) as b,
    ):
        a.subscribe(["orders"], listener=counter)
        with anyio.fail_after(DEADLINE):
            while len(a.assignment()) < 2 or not counter.callbacks:
                counter.polls += 1
                await a.consume(5, 0.05)
        b.subscribe(["orders"])
        with anyio.fail_after(DEADLINE):
            while not (counter.revoked() and len(a.assignment()) == 1 and b.assignment()):
                counter.polls += 1
                # Records wait in every poll: it returns as soon as it has some.
                await a.consume(5, 1.0)
                await b.consume(5, 0.0)
                await anyio.sleep(0.02)  # a's application processes its batch
    return counter, commits_in_poll


@PROTOCOLS
async def test_the_revoke_callback_runs_in_the_poll_that_sent_the_commit_before_it(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    counter, commits_in_poll = await _rebalance_under_load(broker, group_id, protocol)
    # The first revocation is the rebalance's (the others come with the close).
    revoked, revoke_poll = counter.revoked()[0]
    assert len(revoked) == 1
    # The commit before the revocation is a's first (no interval auto-commit).
    assert commits_in_poll, "no commit before the revocation"
    assert commits_in_poll[0] == revoke_poll


async def test_the_assign_callback_after_a_revoke_runs_in_the_same_poll(
    broker: FakeBroker, group_id: str
) -> None:
    # Classic cooperative: the member's assign callback follows its revoke
    # callback in every round (empty here), as the Java client's onJoinComplete.
    counter, _ = await _rebalance_under_load(broker, group_id, CLASSIC)
    kinds = [(kind, n) for kind, _, n in counter.callbacks]
    revoke_at = kinds.index(("revoked", counter.revoked()[0][1]))
    kind, poll = kinds[revoke_at + 1]
    assert (kind, poll) == ("assigned", kinds[revoke_at][1])


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@PROTOCOLS
def test_the_blocking_consumer_runs_the_revoke_callback_in_the_poll_that_sent_the_commit(
    backend: str, protocol: dict[str, Any]
) -> None:
    # The blocking shell waits on its own thread for the loop's hand-over.
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 2)
        produce_each(broker, "orders", 2, 2_000)
        config = consumer_config(
            broker, "blocking", **protocol, **{"auto.commit.interval.ms": 600_000}
        )
        counter = PollCounter()
        commits_in_poll: list[int] = []

        def note(_seen: SeenRequest) -> None:
            commits_in_poll.append(counter.polls)

        broker.intercept(ApiKey.OFFSET_COMMIT, note, times=None)
        with (
            Consumer(config, backend=backend, dataplane=broker.dataplane()) as a,
            Consumer(config, backend=backend, dataplane=broker.dataplane()) as b,
        ):
            a.subscribe(["orders"], listener=counter)
            deadline = time.monotonic() + DEADLINE
            while len(a.assignment()) < 2 or not counter.callbacks:
                assert time.monotonic() < deadline, "a never owned both partitions"
                counter.polls += 1
                a.consume(5, 0.05)
            b.subscribe(["orders"])
            deadline = time.monotonic() + DEADLINE
            while not (counter.revoked() and b.assignment()):
                assert time.monotonic() < deadline, "the rebalance did not end"
                counter.polls += 1
                a.consume(5, 1.0)
                b.consume(5, 0.0)
                time.sleep(0.02)  # a's application processes its batch
            revoked, revoke_poll = counter.revoked()[0]
            assert len(revoked) == 1
            assert commits_in_poll[0] == revoke_poll


def _revocation_commit_queued(consumer: AsyncConsumer) -> bool:
    """The member queued the commit before a revocation for the application's next poll."""
    return any(isinstance(w, RevocationCommitWork) for w in consumer._driver.app_work)


@PROTOCOLS
async def test_a_poll_without_a_timeout_does_not_wait_forever_for_an_unanswered_commit(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    # The commit before the revocation is never answered: the poll that releases
    # it waits at most the request timeout, and returns the records it has.
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)  # read before the rebalance: a commit is due
    config = consumer_config(broker, group_id, **protocol, **{"auto.commit.interval.ms": 600_000})
    unanswered = broker.intercept(ApiKey.OFFSET_COMMIT, lambda _seen: Verdict.NO_ANSWER)
    async with (
        AsyncConsumer(config, dataplane=broker.dataplane()) as a,
        AsyncConsumer(config, dataplane=broker.dataplane()) as b,
    ):
        a.subscribe(["orders"], listener=PollCounter())
        with anyio.fail_after(DEADLINE):
            read = 0
            while read < 10:
                read += len(await a.consume(5, 0.05))
        b.subscribe(["orders"])
        # a does not poll: the member revokes in the background and queues the
        # commit for a's next poll.
        with anyio.fail_after(DEADLINE):
            while not _revocation_commit_queued(a):
                await b.consume(5, 0.01)
        produce_each(broker, "orders", 2, 10)
        started = time.monotonic()
        with anyio.fail_after(DEADLINE):
            assert await a.consume(5, -1)  # no timeout, records waiting
        assert unanswered.calls
        assert time.monotonic() - started < 2.0 + 0.5  # request.timeout.ms, and some slack
