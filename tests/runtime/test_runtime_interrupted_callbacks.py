"""A listener method interrupted by a BaseException (Ctrl-C, SystemExit, a
cancellation) neither stalls the group nor skips the close's leave.

The front end used to catch ``Exception`` only around a listener method: a
KeyboardInterrupt raised inside ``on_partitions_assigned`` left the member
waiting for a callback that never completed, so it fetched nothing and the
group's next rebalance could not finish; inside the close's revoke callback it
ended the close before the commit and the leave, and the group waited a
session timeout for the member. The member is now told the callback ended
(failed), and the interrupt still reaches the application: from the poll, or
from ``close()`` once the member has committed and left. ``Interrupt`` stands
in for KeyboardInterrupt (same path: a BaseException that is no Exception)
without risking the test session.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from kgroup import AsyncConsumer, Consumer
from kgroup.dataplane import Record
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

from .helpers import DEADLINE, consumer_config, drive, produce_each, tps

pytestmark = pytest.mark.anyio

CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 2_000, "heartbeat.interval.ms": 100}
PROTOCOLS = pytest.mark.parametrize(
    "protocol", [{"group.protocol": "consumer"}, CLASSIC], ids=["consumer", "classic"]
)


class Interrupt(BaseException):
    """What Ctrl-C raises, as far as the consumer can tell: a BaseException."""


class InterruptOnce:
    """A listener whose first non-empty call of ``kind`` raises :class:`Interrupt`."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.armed = True
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []

    def _called(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        self.events.append((kind, partitions))
        if kind == self.kind and partitions and self.armed:
            self.armed = False
            raise Interrupt

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self._called("assigned", partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self._called("revoked", partitions)


async def _poll_through(consumer: AsyncConsumer, sink: list[Record], until: Any) -> int:
    """Poll until ``until()``, counting the Interrupts the polls raised."""
    interrupts = 0
    with anyio.fail_after(DEADLINE):
        while not until():
            try:
                sink.extend(await consumer.consume(100, 0.01))
            except Interrupt:
                interrupts += 1
    return interrupts


def _orders(broker: FakeBroker) -> None:
    """The topic every scenario reads: 2 partitions of 5 records."""
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)


def _committed_and_left(broker: FakeBroker, group_id: str, listener: InterruptOnce) -> None:
    """The interrupted close still ran the revoke callback, committed and left."""
    assert listener.events[-1] == ("revoked", tps("orders", 0, 1))
    assert broker.committed(group_id) == dict.fromkeys(tps("orders", 0, 1), 5)
    group = broker.consumer_group(group_id) or broker.classic_group(group_id)
    assert group is not None
    assert not group.members, "the member did not leave: the group waits a session timeout"


@PROTOCOLS
async def test_an_interrupted_assign_callback_does_not_stall_the_member_or_the_group(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    _orders(broker)
    config = consumer_config(broker, group_id, **protocol)
    listener = InterruptOnce("assigned")
    got: list[Record] = []
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as a:
        a.subscribe(["orders"], listener)
        interrupts = await _poll_through(a, got, until=lambda: len(got) == 10)
        assert interrupts == 1
        assert not listener.armed
        # The group can still rebalance: a second member gets its share.
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as b:
            b.subscribe(["orders"])
            await drive(a, b, until=lambda: len(a.assignment()) == 1 == len(b.assignment()))


@PROTOCOLS
async def test_an_interrupted_revoke_callback_in_close_still_commits_and_leaves_then_raises(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    _orders(broker)
    config = consumer_config(broker, group_id, **protocol)
    listener = InterruptOnce("revoked")
    got: list[Record] = []
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"], listener)
        await drive(consumer, until=lambda: len(got) == 10, sink={consumer: got})
        with anyio.fail_after(DEADLINE), pytest.raises(Interrupt):
            await consumer.close()
    _committed_and_left(broker, group_id, listener)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@PROTOCOLS
def test_the_blocking_consumer_commits_and_leaves_when_its_close_is_interrupted(
    backend: str, protocol: dict[str, Any]
) -> None:
    with FakeBroker().running_in_thread(backend) as broker:
        _orders(broker)
        config = consumer_config(broker, "blocking", **protocol)
        listener = InterruptOnce("revoked")
        got: list[Record] = []
        consumer = Consumer(config, backend=backend, dataplane=broker.dataplane())
        consumer.subscribe(["orders"], listener)
        deadline = time.monotonic() + DEADLINE
        while len(got) < 10:
            assert time.monotonic() < deadline, "records did not arrive"
            got.extend(consumer.consume(100, 0.01))
        with pytest.raises(Interrupt):
            consumer.close()
        _committed_and_left(broker, "blocking", listener)
        consumer.close()  # idempotent: nothing left to raise
