"""max.poll.interval.ms across a chain of rebalance callbacks inside one poll.

Found by the simulator (seed 696409): a member whose target changed while a
slow callback ran got the next callback in the same poll, and the next; each
took well under ``max.poll.interval.ms`` but the chain added up past it. The
member counted the whole chain as one poll, left the group as stale, rejoined
into the same chain and never settled. Java's poll loop restarts the poll
timer (a PollEvent) before each batch of callbacks; kgroup's front end now
does before each callback that follows another in the same poll.

The blocking Consumer met it: its event loop thread reacts to a finished
callback (and queues the next one) while the application's thread is still in
the same poll, so the next callback ran without the timer restarting.
(``AsyncConsumer`` yields to its loop between the two, which restarted the
timer by chance; the fix covers both, in the shared front-end core.)

The scenario: member a's first assigned callback lets member b in and hears
its new target (give up two partitions); then a revoke callback and an
assigned callback (nothing new) follow. Each callback is well within
``max.poll.interval.ms``, the three together are not.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from kgroup import Consumer
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

from .helpers import DEADLINE, Recorder, consumer_config, tps

MAX_POLL_MS = 2_000
"""Also the rebalance timeout: the revocation (target change to acknowledgement) stays within it."""
FIRST_WORK = 1.0
"""Seconds the first assigned callback works before the target changes."""
REVOKE_WORK = 0.7
ASSIGN_WORK = 0.6


class TargetWatch:
    """Whether a member has heard a target that takes partitions away from it."""

    def __init__(self, broker: FakeBroker, group_id: str, member_id: str) -> None:
        self._broker = broker
        self._group_id = group_id
        self._member_id = member_id
        self._beats_when_set = 0

    def heard(self) -> bool:
        group = self._broker.consumer_group(self._group_id)
        member = None if group is None else group.members.get(self._member_id)
        beats = sum(
            1
            for s in self._broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)
            if s.request.member_id == self._member_id
        )
        if member is not None and member.revoking and not self._beats_when_set:
            self._beats_when_set = beats
        # A heartbeat sent after the one answered with the new target: that
        # answer reached the member (one heartbeat is in flight at a time).
        return bool(self._beats_when_set) and beats > self._beats_when_set


class SlowListener:
    """Slow callbacks (the application's work, the scenario itself, not a synchronisation)."""

    def __init__(self) -> None:
        self.record = Recorder()
        self.chain: list[tuple[float, float]] = []
        """(start, end) of each callback, on time.monotonic()."""

    def chain_seconds(self) -> float:
        return self.chain[-1][1] - self.chain[0][0]


class BlockingSlowListener(SlowListener):
    def __init__(self, broker: FakeBroker, second: Consumer, watch: TargetWatch) -> None:
        super().__init__()
        self._broker = broker
        self._second = second
        self._watch = watch

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        started = time.monotonic()
        self.record.on_partitions_assigned(partitions)
        if len(self.record.events) == 1:
            time.sleep(FIRST_WORK)
            self._second.subscribe(["orders"])
            self._broker.wait_for(self._watch.heard, DEADLINE)
            time.sleep(0.1)
        else:
            time.sleep(ASSIGN_WORK)
        self.chain.append((started, time.monotonic()))

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        started = time.monotonic()
        self.record.on_partitions_revoked(partitions)
        time.sleep(REVOKE_WORK)
        self.chain.append((started, time.monotonic()))


def _config(broker: FakeBroker, group_id: str) -> dict[str, Any]:
    return consumer_config(
        broker, group_id, **{"max.poll.interval.ms": MAX_POLL_MS, "enable.auto.commit": False}
    )


def _assert_stayed_through_the_chain(
    broker: FakeBroker, listener: SlowListener, member_id: str
) -> None:
    # The chain really outlasted max.poll.interval.ms: assigned all four (while
    # the target changed), revoked two, assigned nothing new, back to back.
    record = listener.record
    assert record.events == [
        ("assigned", tps("orders", 0, 1, 2, 3)),
        ("revoked", record.of("revoked")[0]),
        ("assigned", frozenset()),
    ]
    assert len(record.of("revoked")[0]) == 2
    assert listener.chain_seconds() > MAX_POLL_MS / 1000
    # No poll timeout: nothing lost, no stale leave (epoch -1) before the close.
    leaves = [
        s
        for s in broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        if s.request.member_id == member_id and s.request.member_epoch == -1
    ]
    assert leaves == []


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_chain_of_callbacks_in_one_blocking_poll_keeps_the_member_in_the_group(
    backend: str,
) -> None:
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 4)
        conf = _config(broker, "chain")
        with (
            Consumer(conf, backend=backend, dataplane=broker.dataplane()) as a,
            Consumer(conf, backend=backend, dataplane=broker.dataplane()) as b,
        ):
            listener = BlockingSlowListener(broker, b, TargetWatch(broker, "chain", a.member_id))
            a.subscribe(["orders"], listener=listener)
            deadline = time.monotonic() + 3 * DEADLINE
            while not (len(listener.chain) == 3 and len(b.assignment()) == 2):
                assert time.monotonic() < deadline, f"not settled: {listener.record.events}"
                a.consume(100, 0.01)
                b.consume(100, 0.01)
            _assert_stayed_through_the_chain(broker, listener, a.member_id)
