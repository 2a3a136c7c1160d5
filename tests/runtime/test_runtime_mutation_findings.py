"""Runtime behaviours the mutation audit found unpinned (see docs/testing.md), asyncio and trio."""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import pytest

from kgroup import AsyncConsumer, Consumer
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker, SeenRequest
from kgroup.types import TopicPartition

from .helpers import DEADLINE, Recorder, consumer_config, drive, told, tps

pytestmark = pytest.mark.anyio


class RevokeFailsOnce(Recorder):
    """A listener whose first revoke callback raises."""

    def __init__(self) -> None:
        super().__init__()
        self.revoke_calls: list[frozenset[TopicPartition]] = []

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.revoke_calls.append(partitions)
        if len(self.revoke_calls) == 1:
            raise RevokeFailedError("not now")
        super().on_partitions_revoked(partitions)


class RevokeFailedError(Exception):
    pass


async def test_a_revoke_callback_that_raised_is_run_again_before_the_partitions_move(
    broker: FakeBroker, group_id: str
) -> None:
    # The error reaches the application from poll *and* the member: the
    # revocation is not acknowledged, so the partitions stay with the first
    # member until a later poll ran the callback successfully.
    broker.create_topic("orders", 2)
    config = consumer_config(broker, group_id)
    async with (
        AsyncConsumer(config, dataplane=broker.dataplane()) as first,
        AsyncConsumer(config, dataplane=broker.dataplane()) as second,
    ):
        one, two = RevokeFailsOnce(), Recorder()
        first.subscribe(["orders"], listener=one)
        await drive(first, until=lambda: told(first, one, 2))
        second.subscribe(["orders"], listener=two)
        raised: list[BaseException] = []
        with anyio.fail_after(DEADLINE):
            while not one.revoke_calls:
                await second.consume(100, 0.01)
                try:
                    await first.consume(100, 0.01)
                except RevokeFailedError as exc:
                    raised.append(exc)
        assert len(raised) == 1
        # Nothing moved yet: the failed revocation was not acknowledged.
        assert first.assignment() == tps("orders", 0, 1)
        assert second.assignment() == frozenset()
        await drive(first, second, until=lambda: told(second, two, 1))
        moved = second.assignment()
        # The second member got its partition only after the callback succeeded.
        assert one.revoke_calls == [moved, moved]
        await drive(first, until=lambda: told(first, one, 1))
        assert one.of("revoked") == [moved]


def _record_commits(broker: FakeBroker, processed: Callable[[], int]) -> list[tuple[int, int]]:
    """Every offset committed from now on, with ``processed()`` (the records the
    application had finished) when the commit reached the broker."""
    commits: list[tuple[int, int]] = []

    def record(seen: SeenRequest) -> None:
        for topic in seen.request.topics:
            for partition in topic.partitions:
                commits.append((partition.committed_offset, processed()))

    broker.intercept(ApiKey.OFFSET_COMMIT, record, times=None)
    return commits


def _heartbeats_after(broker: FakeBroker) -> Callable[[], bool]:
    """Whether a heartbeat sent after now has arrived: the second one from now (the
    first may have been in flight already; a member has one in flight at a time)."""
    before = len(broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT))

    def later_heartbeat() -> bool:
        return len(broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)) >= before + 2

    return later_heartbeat


async def test_interval_auto_commit_never_covers_the_records_consume_is_handing_out(
    broker: FakeBroker, group_id: str
) -> None:
    # At-least-once: the interval auto-commit runs at the start of consume(),
    # where the application has finished every record it was handed, never
    # after the call took records it is about to hand out.
    broker.create_topic("orders", 1)
    for n in range(6):
        broker.produce("orders", 0, f"r{n}".encode())
    config = consumer_config(broker, group_id, **{"auto.commit.interval.ms": 1})
    processed = 0  # records the application finished: all it had when it called consume
    commits = _record_commits(broker, lambda: processed)
    received = 0
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        with anyio.fail_after(DEADLINE):
            while received < 6:
                processed = received
                got = len(await consumer.consume(1, 0.05))
                received += got
                if got:
                    # A commit this call started reaches the broker before the
                    # application counts the record as processed (its next
                    # call). Requests to the coordinator share one connection,
                    # in order: once a heartbeat sent after this call returned
                    # has arrived, so has any commit the call started. (Not
                    # anyio.wait_all_tasks_blocked(): on asyncio it polls every
                    # 0.1 s for a moment with no task runnable, and the 0.1 s
                    # heartbeat timer could keep it from ever seeing one.)
                    await broker.wait_until(_heartbeats_after(broker))
        processed = received  # the close commits what was handed out
    assert commits
    assert all(offset <= done for offset, done in commits), commits


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_blocking_interval_auto_commit_never_covers_the_records_consume_is_handing_out(
    backend: str,
) -> None:
    # As above, for the blocking Consumer (its own consume loop).
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 1)
        for n in range(4):
            broker.produce("orders", 0, f"r{n}".encode())
        config = consumer_config(broker, "blocking-auto", **{"auto.commit.interval.ms": 1})
        processed = 0
        commits = _record_commits(broker, lambda: processed)
        received = 0
        with Consumer(config, backend=backend, dataplane=broker.dataplane()) as consumer:
            consumer.subscribe(["orders"])
            deadline = time.monotonic() + DEADLINE
            while received < 4:
                assert time.monotonic() < deadline, "records not consumed in time"
                processed = received
                got = len(consumer.consume(1, 0.05))
                received += got
                if got:
                    # As above: once a heartbeat sent after this call returned
                    # has arrived, so has any commit the call started.
                    broker.wait_for(_heartbeats_after(broker), DEADLINE)
            processed = received
        assert commits
        assert all(offset <= done for offset, done in commits), commits
