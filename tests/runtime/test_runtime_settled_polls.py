"""A settled member's polls reach its poll timer without a thread hop each.

The blocking front end told the member of the application's polls once a
second through the event loop's portal (a thread hop each), which measured a
fifth of an idle member's CPU. A member in its stable state needs polls only
for ``max.poll.interval.ms``, so the front end now notes them and the driver
passes the latest on shortly before the timer would expire: a member whose
application keeps polling stays in the group, one whose application stops is
still removed one poll interval after its last poll, not before. Blocking
Consumer (where the hop was), both protocols, asyncio and trio.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kgroup import Consumer
from kgroup.protocol import ApiKey
from kgroup.runtime.driver import Driver
from kgroup.testing.fake import FakeBroker

from .helpers import DEADLINE, consumer_config, tps

MAX_POLL_MS = 1_000
PROTOCOLS = [
    pytest.param({}, id="consumer"),
    pytest.param(
        {"group.protocol": "classic", "heartbeat.interval.ms": 100, "session.timeout.ms": 3_000},
        id="classic",
    ),
]


@pytest.fixture(params=["asyncio", "trio"])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When the front end told the driver of a poll through the loop (a hop)."""
    told: list[float] = []
    original = Driver.poll_called

    def poll_called(self: Driver) -> None:
        told.append(time.monotonic())
        original(self)

    monkeypatch.setattr(Driver, "poll_called", poll_called)
    return told


@contextlib.contextmanager
def settled_member(
    backend: str, group_id: str, protocol: dict[str, Any]
) -> Iterator[tuple[FakeBroker, Consumer]]:
    """A blocking consumer holding both partitions of ``orders``, its rebalance done."""
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 2)
        config = consumer_config(
            broker, group_id, **{"max.poll.interval.ms": MAX_POLL_MS, **protocol}
        )
        with Consumer(config, backend=backend, dataplane=broker.dataplane()) as consumer:
            consumer.subscribe(["orders"])
            deadline = time.monotonic() + DEADLINE
            while consumer.assignment() != tps("orders", 0, 1):
                assert time.monotonic() < deadline, "the member did not settle in time"
                consumer.consume(10, 0.02)
            # The poll that follows the last rebalance step may still be told.
            consumer.consume(10, 0.02)
            yield broker, consumer


def poll_for(consumer: Consumer, intervals: int) -> float:
    """Poll as an application waiting for records does, for ``intervals`` poll intervals;
    returns when the last poll was made."""
    end = time.monotonic() + intervals * MAX_POLL_MS / 1000
    while time.monotonic() < end:
        consumer.consume(10, 0.02)
    return time.monotonic()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_settled_member_whose_application_keeps_polling_stays_without_a_hop_per_second(
    backend: str, protocol: dict[str, Any], hops: list[float]
) -> None:
    with settled_member(backend, "polling", protocol) as (_broker, consumer):
        epoch, settled_hops = consumer.member_epoch, len(hops)
        # The member is told (without hops) before each expiry and stays.
        poll_for(consumer, 4)
        assert consumer.assignment() == tps("orders", 0, 1)
        assert consumer.member_epoch == epoch
        # Before: one hop per 0.1 s (a tenth of max.poll.interval.ms), ~40 here.
        assert len(hops) == settled_hops


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_settled_member_whose_application_stops_polling_leaves_one_interval_after_its_last_poll(
    backend: str, protocol: dict[str, Any]
) -> None:
    with settled_member(backend, "stopping", protocol) as (broker, consumer):
        member_id = consumer.member_id
        last_poll = poll_for(consumer, 2)

        def left() -> bool:
            return any(_leave(seen, member_id) for seen in broker.requests)

        broker.wait_for(left, DEADLINE)
        left_at = next(seen.at for seen in broker.requests if _leave(seen, member_id))
    # The noted polls are at most a poll-event interval (0.1 s here) old.
    assert left_at - last_poll >= MAX_POLL_MS / 1000 - 0.1


def _leave(seen: Any, member_id: str) -> bool:
    if seen.api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT:
        return bool(seen.request.member_id == member_id and seen.request.member_epoch < 0)
    if seen.api_key == ApiKey.LEAVE_GROUP:
        return any(m.member_id == member_id for m in seen.request.members)
    return False
