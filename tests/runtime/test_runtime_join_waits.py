"""The application's record waits stay short from ``subscribe()`` until the join is sent.

librdkafka's wait cannot be cut short from the loop's thread, so the front end
sizes it (``FrontEndCore.wait_slice``): short while a group answer that may
bring a rebalance callback is awaited. Between ``subscribe()`` and the join
heartbeat the member first looks its topics up; nothing was counted as awaited
then and a member with no timer yet had no "quiet until" either, so the
application's next poll waited a whole slice (100 ms) and the first assigned
callback came up to that late: 50-100 ms after ``subscribe()`` against
librdkafka's 5 ms on Kafka 4.4. Blocking Consumer, both protocols, asyncio and trio.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from kgroup import Consumer
from kgroup._frontend import ANSWER_SLICE_MAX
from kgroup.protocol import ApiKey, NegotiatedVersions
from kgroup.testing.fake import FakeBroker, SeenRequest, Verdict

from .helpers import DEADLINE, consumer_config, tps

FIRST = {"consumer": ApiKey.CONSUMER_GROUP_HEARTBEAT, "classic": ApiKey.JOIN_GROUP}

PROTOCOLS = [
    pytest.param({}, id="consumer"),
    pytest.param({"group.protocol": "classic"}, id="classic"),
]


def _names_orders(seen: SeenRequest) -> bool:
    topics = getattr(seen.request, "topics", None) or ()
    return any(getattr(t, "name", None) == "orders" for t in topics)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_waits_are_short_while_the_subscription_is_looked_up(
    backend: str, group_id: str, protocol: dict[str, Any]
) -> None:
    release = threading.Event()
    held = threading.Event()

    async def hold(_seen: SeenRequest) -> Verdict:
        held.set()
        while not release.is_set():  # the broker's thread; the test's thread releases
            await anyio.sleep(0.001)
        return Verdict.PASS

    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 2)
        config = consumer_config(broker, group_id, **protocol)
        with Consumer(config, backend=backend, dataplane=broker.dataplane()) as consumer:
            consumer.consume(10, 0.01)  # connected, nothing subscribed
            broker.intercept(ApiKey.METADATA, hold, when=_names_orders)
            consumer.subscribe(["orders"])
            assert held.wait(DEADLINE), "the subscription's topic lookup never came"
            driver = consumer._driver
            assert driver.subscribing == 1
            # The application's next waits are answer-sized, not a whole slice.
            assert consumer._core.wait_slice() <= ANSWER_SLICE_MAX
            release.set()
            deadline = time.monotonic() + DEADLINE
            while consumer.assignment() != tps("orders", 0, 1):
                assert time.monotonic() < deadline, "the member did not join in time"
                consumer.consume(10, 0.02)
            assert driver.subscribing == 0


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_joins_schemas_are_loaded_before_subscribe(
    backend: str, group_id: str, protocol: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # kio builds a schema on first use (a few ms of CPU); the join's came between
    # subscribe() and the join, at a group's busiest moment. The coordinator's
    # warm-up loads them while the consumer waits for its first subscribe().
    loaded: list[ApiKey] = []
    original = NegotiatedVersions.response_class

    def response_class(self: NegotiatedVersions, api: ApiKey) -> Any:
        loaded.append(api)
        return original(self, api)

    monkeypatch.setattr(NegotiatedVersions, "response_class", response_class)
    first = FIRST[protocol.get("group.protocol", "consumer")]
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 2)
        config = consumer_config(broker, group_id, **protocol)
        with Consumer(config, backend=backend, dataplane=broker.dataplane()) as consumer:
            deadline = time.monotonic() + DEADLINE
            while first not in loaded or ApiKey.OFFSET_FETCH not in loaded:
                assert time.monotonic() < deadline, f"{first.name} was not loaded in time"
                consumer.consume(10, 0.01)
            assert not broker.requests_of(first)  # nothing subscribed: no join yet
