"""ShareConsumer and AsyncShareConsumer on the fake broker: faults a real broker cannot
easily produce on demand.

A ShareFetch answered SHARE_SESSION_NOT_FOUND, a connection dropped under a
ShareFetch, a heartbeat answered FENCED_MEMBER_EPOCH, a ShareFetch that is
never answered while the consumer closes. Each test checks what the share
consumer promises: the session is opened again, every record produced is
handed to the application and ends acknowledged (at-least-once: nothing is
lost), the member rejoins, and close() returns promptly.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from kio.schema.errors import ErrorCode

from kgroup import AsyncShareConsumer, ShareConsumer, ShareRecord
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker, RecordState, SeenRequest, Verdict

DEADLINE = 20.0
"""Seconds a test may take to see what it waits for (far more than it needs)."""


def _config(broker: FakeBroker, group_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": group_id,
        "fetch.max.wait.ms": 100,
        **extra,
    }


def _acknowledged(broker: FakeBroker, group_id: str, count: int) -> bool:
    view = broker.share_partition(group_id, "t", 0)
    return view is not None and all(
        view.state(o).state is RecordState.ACKNOWLEDGED for o in range(count)
    )


def _prepared(broker: FakeBroker, group_id: str, count: int) -> None:
    broker.create_topic("t", 1)
    # A short lock: records whose acknowledgements a fault lost come back quickly.
    broker.set_share_group_config(
        group_id, auto_offset_reset="earliest", record_lock_duration_ms=500
    )
    for i in range(count):
        broker.produce("t", 0, f"r{i}".encode())


async def _consume_until(
    consumer: AsyncShareConsumer, broker: FakeBroker, group_id: str, count: int
) -> list[ShareRecord]:
    """Consume (implicit mode accepts each batch on the next call) until the broker has
    every one of ``count`` records acknowledged; every record handed out."""
    seen: list[ShareRecord] = []
    with anyio.fail_after(DEADLINE):
        while not _acknowledged(broker, group_id, count):
            seen += await consumer.consume(100, 0.2)
            if len({r.offset() for r in seen}) == count:
                await consumer.commit()
    return seen


def _after_first_fetch(seen: SeenRequest) -> bool:
    # Not the fetch that opens the session: one that carries the last batch's acks.
    return int(seen.request.share_session_epoch) > 0


pytestmark = pytest.mark.anyio


async def test_consumes_and_accepts_every_record(broker: FakeBroker, group_id: str) -> None:
    _prepared(broker, group_id, 5)
    async with AsyncShareConsumer(_config(broker, group_id)) as consumer:
        await consumer.subscribe(["t"])
        seen = await _consume_until(consumer, broker, group_id, 5)
    assert sorted(r.value() or b"" for r in seen) == [f"r{i}".encode() for i in range(5)]
    assert {r.delivery_count() for r in seen} == {1}


async def test_a_fetch_answered_share_session_not_found_reopens_and_loses_nothing(
    broker: FakeBroker, group_id: str
) -> None:
    _prepared(broker, group_id, 3)
    refused = broker.intercept(
        ApiKey.SHARE_FETCH, lambda _s: ErrorCode.share_session_not_found, when=_after_first_fetch
    )
    async with AsyncShareConsumer(_config(broker, group_id)) as consumer:
        await consumer.subscribe(["t"])
        with anyio.fail_after(DEADLINE):
            first: list[ShareRecord] = []
            while not first:
                first = await consumer.consume(100, 0.2)
            for i in range(3, 6):
                broker.produce("t", 0, f"r{i}".encode())
        seen = first + await _consume_until(consumer, broker, group_id, 6)
    assert len(refused.calls) == 1
    fetches = broker.requests_of(ApiKey.SHARE_FETCH)
    after = fetches[fetches.index(refused.calls[0]) + 1 :]
    assert int(after[0].request.share_session_epoch) == 0  # a new session was opened
    assert {r.offset() for r in seen} == set(range(6))


async def test_a_connection_dropped_under_a_fetch_loses_nothing(
    broker: FakeBroker, group_id: str
) -> None:
    _prepared(broker, group_id, 3)
    dropped = broker.intercept(ApiKey.SHARE_FETCH, lambda _s: Verdict.DROP, when=_after_first_fetch)
    async with AsyncShareConsumer(_config(broker, group_id)) as consumer:
        await consumer.subscribe(["t"])
        with anyio.fail_after(DEADLINE):
            first: list[ShareRecord] = []
            while not first:
                first = await consumer.consume(100, 0.2)
            for i in range(3, 6):
                broker.produce("t", 0, f"r{i}".encode())
        seen = first + await _consume_until(consumer, broker, group_id, 6)
    assert len(dropped.calls) == 1
    fetches = broker.requests_of(ApiKey.SHARE_FETCH)
    after = fetches[fetches.index(dropped.calls[0]) + 1 :]
    # The next fetch opens a session on a new connection (the broker closed the old
    # session with the connection and released what it held).
    assert int(after[0].request.share_session_epoch) == 0
    assert after[0].connection_id != dropped.calls[0].connection_id
    assert {r.offset() for r in seen} == set(range(6))


async def test_a_fenced_heartbeat_rejoins_and_consumption_goes_on(
    broker: FakeBroker, group_id: str
) -> None:
    _prepared(broker, group_id, 2)
    fenced = broker.intercept(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        lambda _s: ErrorCode.fenced_member_epoch,
        when=lambda seen: int(seen.request.member_epoch) > 0,
    )
    async with AsyncShareConsumer(_config(broker, group_id)) as consumer:
        await consumer.subscribe(["t"])
        await broker.wait_until(lambda: bool(fenced.calls), DEADLINE)
        member_id = fenced.calls[0].request.member_id

        def rejoined() -> bool:
            later = [
                s
                for s in broker.requests_of(ApiKey.SHARE_GROUP_HEARTBEAT)
                if s.at > fenced.calls[0].at and s.request.member_id == member_id
            ]
            return any(int(s.request.member_epoch) == 0 for s in later)

        await broker.wait_until(rejoined, DEADLINE)
        seen = await _consume_until(consumer, broker, group_id, 2)
        group = broker.share_group(group_id)
        assert group is not None
        assert member_id in group.members
    assert {r.offset() for r in seen} == {0, 1}


async def test_close_with_an_unanswered_fetch_returns_promptly(
    broker: FakeBroker, group_id: str
) -> None:
    _prepared(broker, group_id, 1)
    # The whole test is bounded: a close that waits on the silent fetch fails it
    # instead of hanging the run.
    with anyio.fail_after(DEADLINE):
        async with AsyncShareConsumer(_config(broker, group_id)) as consumer:
            await consumer.subscribe(["t"])
            await _consume_until(consumer, broker, group_id, 1)
            silent = broker.intercept(ApiKey.SHARE_FETCH, lambda _s: Verdict.NO_ANSWER, times=None)
            await broker.wait_until(lambda: bool(silent.calls), DEADLINE)
            started = time.monotonic()
            await consumer.close(timeout=2.0)
        # close() and leaving the block both end within close's timeout (and a margin),
        # not when the unanswered request would time out.
        assert time.monotonic() - started < 3.0


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_blocking_share_consumer_consumes_and_commits(backend: str) -> None:
    with FakeBroker().running_in_thread(backend) as broker:
        _prepared(broker, "blocking", 4)
        with ShareConsumer(_config(broker, "blocking"), backend=backend) as consumer:
            consumer.subscribe(["t"])
            seen: list[ShareRecord] = []
            deadline = time.monotonic() + DEADLINE
            while len(seen) < 4 and time.monotonic() < deadline:
                seen += consumer.consume(100, 0.2)
            results = consumer.commit()
            assert all(error is None for error in results.values())
            broker.wait_for(lambda: _acknowledged(broker, "blocking", 4), DEADLINE)
        assert sorted(r.offset() for r in seen) == [0, 1, 2, 3]
