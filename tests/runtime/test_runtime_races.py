"""The driver's commit and close paths under races, through the fake broker (asyncio and trio).

Each test holds, fails or loses one request at a chosen moment (the fake's
interceptions) and sequences the rest on events the broker or the
application sees, never on sleeps:

- a commit in flight while the coordinator revokes its partition;
- an auto-commit in flight while the member is fenced;
- ``close()`` with a ``commit_async`` outstanding (two regressions: with no
  revoke callback the member left before the commit ended, and a blocking
  ``close()`` could lose the callback of a commit ending as the runtime stopped);
- the coordinator moving in the middle of a revocation commit;
- an OffsetFetch answered after its partition was revoked again;
- a commit applied by the broker whose answer is lost;
- ``seek()`` from ``on_partitions_assigned`` racing with the OffsetFetch;
- a slow revoke callback while the coordinator sends another assignment.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import pytest
from kio.schema.errors import ErrorCode

from kgroup import AsyncConsumer, Consumer
from kgroup.dataplane import Record
from kgroup.errors import RequestTimeoutError
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker, SeenRequest, Verdict
from kgroup.types import TopicPartition

from .helpers import SharedLog, consumer_config, drive, produce_each, told, tps

pytestmark = pytest.mark.anyio

CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 2_000, "heartbeat.interval.ms": 100}
PROTOCOLS = pytest.mark.parametrize(
    "protocol", [{"group.protocol": "consumer"}, CLASSIC], ids=["consumer", "classic"]
)
MANUAL = {"enable.auto.commit": False}

Results = list[tuple[dict[TopicPartition, int], BaseException | None]]


class Hold:
    """An interception handler that holds each request until :meth:`release`, then passes it
    to the model (which answers as it is *then*: the request reached the broker late)."""

    def __init__(self) -> None:
        self._released = anyio.Event()

    def release(self) -> None:
        self._released.set()

    async def __call__(self, _seen: SeenRequest) -> Verdict:
        await self._released.wait()
        return Verdict.PASS


def _orders(broker: FakeBroker, group_id: str, **extra: Any) -> dict[str, Any]:
    """Topic ``orders``: 2 partitions of 5 records each; a manual-commit config for them."""
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)
    return consumer_config(broker, group_id, **MANUAL, **extra)


def _from(member_id: str) -> Callable[[SeenRequest], bool]:
    def check(seen: SeenRequest) -> bool:
        sender: str = seen.request.member_id
        return sender == member_id

    return check


def _heartbeats_of(broker: FakeBroker, member_id: str) -> list[SeenRequest]:
    return [
        r
        for r in broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        if r.request.member_id == member_id
    ]


def _committed_partitions(seen: SeenRequest, broker: FakeBroker) -> frozenset[TopicPartition]:
    """The partitions an OffsetCommit request names (by name, or by id from v10)."""
    names = {broker.topic(t).topic_id: t for t in ("orders",)}
    return frozenset(
        TopicPartition(
            topic.name if seen.version < 10 else names[topic.topic_id], int(p.partition_index)
        )
        for topic in seen.request.topics
        for p in topic.partitions
    )


def _offsets(records: list[Record], partition: int) -> list[int | None]:
    return [r.offset() for r in records if r.partition() == partition]


@pytest.mark.parametrize("revoke_callback", [True, False], ids=["revoke-callback", "no-listener"])
async def test_commit_async_in_flight_when_a_revocation_starts_lands_before_the_partition_moves(
    broker: FakeBroker, group_id: str, revoke_callback: bool
) -> None:
    # Without a listener there is no revoke callback to wait in; the member
    # waits for the commit all the same (the fix of the close regression below).
    config = _orders(broker, group_id)
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    results: Results = []
    shared = SharedLog()
    la, lb = shared.listener("a"), shared.listener("b")
    a_plane = broker.dataplane()
    async with (
        AsyncConsumer(config, dataplane=a_plane) as a,
        AsyncConsumer(config, dataplane=broker.dataplane()) as b,
    ):
        a.subscribe(["orders"], listener=la if revoke_callback else None)
        await drive(a, until=lambda: len(got[a]) == 10, sink=got)
        hold = Hold()
        held = broker.intercept(ApiKey.OFFSET_COMMIT, hold)
        a.commit_async(callback=lambda offsets, error: results.append((dict(offsets), error)))
        await broker.wait_until(lambda: bool(held.calls))

        def unassigned() -> frozenset[TopicPartition]:
            return frozenset().union(
                *(c.partitions for c in a_plane.calls if c.method == "unassign")
            )

        # b joins: the coordinator asks a to give one partition up; a stops fetching it.
        b.subscribe(["orders"], listener=lb)
        await drive(a, b, until=lambda: bool(unassigned()))
        moved = unassigned()
        assert len(moved) == 1
        beats = len(_heartbeats_of(broker, a.member_id))
        # a keeps heartbeating (several intervals) but does not release the
        # partition while the commit made before the revocation is in flight.
        await drive(a, b, until=lambda: len(_heartbeats_of(broker, a.member_id)) >= beats + 3)
        assert broker.assignment(group_id, b.member_id) == frozenset()
        assert moved <= a.assignment()
        assert results == []

        hold.release()
        await drive(
            a,
            b,
            until=lambda: len(a.assignment()) == 1 and told(b, lb, 1) and bool(results),
        )
        assert results == [({tp: 5 for tp in tps("orders", 0, 1)}, None)]
        assert b.assignment() == moved
        if revoke_callback:
            assert la.of("revoked") == [moved]
        # The commit landed before b owned the partition: b starts after a's records.
        [partition] = moved
        broker.produce("orders", partition.partition, b"after")
        await drive(a, b, until=lambda: len(got[b]) == 1, sink=got)
        assert _offsets(got[b], partition.partition) == [5]


async def test_commit_reaching_the_broker_after_its_partition_was_released_is_not_applied_to_it(
    broker: FakeBroker, group_id: str
) -> None:
    # An awaited commit() in another task of the application does not hold
    # the revocation (unlike commit_async, whose callback the revoke callback
    # may wait for): the member releases the partition, the coordinator moves
    # it, and the commit that reaches the broker afterwards carries an epoch
    # that moved on. It is retried with the new epoch for the partition the
    # member still owns only.
    config = _orders(broker, group_id)
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    shared = SharedLog()
    la, lb = shared.listener("a"), shared.listener("b")
    committed: list[dict[TopicPartition, int]] = []
    async with (
        AsyncConsumer(config, dataplane=broker.dataplane()) as a,
        AsyncConsumer(config, dataplane=broker.dataplane()) as b,
    ):
        a.subscribe(["orders"], listener=la)
        await drive(a, until=lambda: len(got[a]) == 10, sink=got)
        epoch = a.member_epoch
        hold = Hold()
        held = broker.intercept(ApiKey.OFFSET_COMMIT, hold)

        async def commit_everything() -> None:
            committed.append(await a.commit())

        async with anyio.create_task_group() as tg:
            tg.start_soon(commit_everything)
            await broker.wait_until(lambda: bool(held.calls))
            b.subscribe(["orders"], listener=lb)
            await drive(a, b, until=lambda: told(a, la, 1) and told(b, lb, 1))
            [moved] = la.of("revoked")
            assert b.assignment() == moved
            assert a.member_epoch > epoch
            hold.release()

        [kept] = a.assignment()
        assert committed == [{kept: 5}]
        assert broker.committed(group_id) == {kept: 5}
        [first, *retries] = broker.requests_of(ApiKey.OFFSET_COMMIT)
        assert first.request.generation_id_or_member_epoch == epoch
        assert retries
        for retry in retries:
            assert _committed_partitions(retry, broker) == frozenset({kept})
            assert retry.request.generation_id_or_member_epoch == a.member_epoch


class _ReleaseOnRevoke:
    """A revoke callback that lets a held commit through (from the application's context)."""

    def __init__(self, hold: Hold) -> None:
        self.hold = hold
        self.revoked: list[frozenset[TopicPartition]] = []

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.revoked.append(partitions)
        self.hold.release()


@PROTOCOLS
async def test_commit_async_outstanding_at_close_lands_once_the_revoke_callback_lets_it_through(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    config = _orders(broker, group_id, **protocol)
    got: list[Record] = []
    results: Results = []
    hold = Hold()
    listener = _ReleaseOnRevoke(hold)
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"], listener=listener)
        await drive(consumer, until=lambda: len(got) == 10, sink={consumer: got})
        held = broker.intercept(ApiKey.OFFSET_COMMIT, hold)
        consumer.commit_async(
            callback=lambda offsets, error: results.append((dict(offsets), error))
        )
        await broker.wait_until(lambda: bool(held.calls))
        # The revoke callback close() runs lets the commit through: it lands
        # (the member still owns its partitions) and its callback runs in close().
        # (That close waits for it is pinned by the two tests below.)
        await consumer.close(timeout=5.0)

    assert listener.revoked == [tps("orders", 0, 1)]
    everything = {tp: 5 for tp in tps("orders", 0, 1)}
    assert results == [(everything, None)]
    assert broker.committed(group_id) == everything


@PROTOCOLS
async def test_close_with_an_unanswered_commit_async_gives_its_callback_the_timeout_then_leaves(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    # Regression (both protocols): with no revoke callback, close() left at
    # once, before the commit_async in flight ended (see the next test).
    classic = protocol is CLASSIC
    config = _orders(broker, group_id, **protocol, **{"request.timeout.ms": 300})
    got: list[Record] = []
    results: Results = []
    # No revoke callback: nothing in the application waits for the commit.
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(got) == 10, sink={consumer: got})
        broker.intercept(ApiKey.OFFSET_COMMIT, lambda _seen: Verdict.NO_ANSWER, times=None)
        consumer.commit_async(
            callback=lambda offsets, error: results.append((dict(offsets), error))
        )
        await broker.wait_until(lambda: bool(broker.requests_of(ApiKey.OFFSET_COMMIT)))
        started = time.monotonic()
        await consumer.close(timeout=5.0)
        took = time.monotonic() - started

    # Bounded by the commit's own timeout (request.timeout.ms), far below close's.
    assert took < 2.0
    [(offsets, error)] = results
    assert offsets == {tp: 5 for tp in tps("orders", 0, 1)}
    assert isinstance(error, RequestTimeoutError)
    assert broker.committed(group_id) == {}
    # The member left only once the commit had timed out (300 ms after it was
    # sent; a little less as the broker saw it, a moment after the client sent it).
    [commit] = broker.requests_of(ApiKey.OFFSET_COMMIT)
    if classic:
        [leave] = broker.requests_of(ApiKey.LEAVE_GROUP)
    else:
        [leave] = [
            r
            for r in broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)
            if r.request.member_epoch == -1
        ]
    assert leave.at - commit.at >= 0.25


async def test_close_without_a_revoke_callback_leaves_only_after_an_outstanding_commit_async(
    broker: FakeBroker, group_id: str
) -> None:
    # Regression: with no on_partitions_revoked to wait in, close() released
    # the partitions and left while a commit_async was still in flight; the
    # commit then reached a coordinator that no longer knew the member
    # (ILLEGAL_GENERATION / CommitFailedError) and the records since the last
    # commit were delivered again. Java's close waits for pending async commits too.
    # (The classic variant is the unanswered-commit test above: a closing
    # classic member sends no heartbeats to sequence on.)
    config = _orders(broker, group_id)
    got: list[Record] = []
    results: Results = []
    left_before_release: list[bool] = []
    hold = Hold()
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(got) == 10, sink={consumer: got})
        member_id = consumer.member_id

        def beats() -> list[SeenRequest]:
            return _heartbeats_of(broker, member_id)

        def left() -> bool:
            return any(r.request.member_epoch == -1 for r in beats())

        held = broker.intercept(ApiKey.OFFSET_COMMIT, hold)
        consumer.commit_async(
            callback=lambda offsets, error: results.append((dict(offsets), error))
        )
        await broker.wait_until(lambda: bool(held.calls))

        async def release_once_closing_waits(before: int) -> None:
            # The closing member keeps heartbeating while it waits for the
            # commit (several intervals); it must not have left by then.
            await broker.wait_until(lambda: left() or len(beats()) >= before + 3)
            left_before_release.append(left())
            hold.release()

        async with anyio.create_task_group() as tg:
            tg.start_soon(release_once_closing_waits, len(beats()))
            await consumer.close(timeout=5.0)

    assert left_before_release == [False]
    everything = {tp: 5 for tp in tps("orders", 0, 1)}
    assert results == [(everything, None)]
    assert broker.committed(group_id) == everything
    assert left()


@PROTOCOLS
async def test_coordinator_moving_during_a_revocation_commit_is_followed_before_the_release(
    anyio_backend: str, group_id: str, protocol: dict[str, Any]
) -> None:
    async with FakeBroker(nodes=2) as broker:
        broker.create_topic("orders", 2)
        produce_each(broker, "orders", 2, 5)
        # Only the commits before a revocation: no interval auto-commit in the test.
        config = consumer_config(
            broker, group_id, **protocol, **{"auto.commit.interval.ms": 600_000}
        )
        got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
        shared = SharedLog()
        la, lb = shared.listener("a"), shared.listener("b")
        async with (
            AsyncConsumer(config, dataplane=broker.dataplane()) as a,
            AsyncConsumer(config, dataplane=broker.dataplane()) as b,
        ):
            a.subscribe(["orders"], listener=la)
            await drive(a, until=lambda: len(got[a]) == 10, sink=got)
            assert broker.committed(group_id) == {}

            def move(_seen: SeenRequest) -> ErrorCode:
                # The coordinator moves while the revocation commit is on its way.
                broker.set_coordinator(group_id, 1)
                return ErrorCode.not_coordinator

            moved_away = broker.intercept(ApiKey.OFFSET_COMMIT, move, node=0)
            b.subscribe(["orders"], listener=lb)
            await drive(
                a, b, until=lambda: told(a, la, 1) and told(b, lb, 1) and bool(b.assignment())
            )

            assert len(moved_away.calls) == 1
            [refused] = moved_away.calls
            [landed] = broker.requests_of(ApiKey.OFFSET_COMMIT, node=1)
            # The same commit, retried on the new coordinator.
            assert _committed_partitions(landed, broker) == _committed_partitions(refused, broker)
            revoked = frozenset().union(*la.of("revoked"))
            assert revoked >= b.assignment()
            assert broker.committed(group_id) == {tp: 5 for tp in revoked}
            # It landed before the release: the new owner starts after a's records.
            [mine] = b.assignment()
            broker.produce("orders", mine.partition, b"after")
            await drive(a, b, until=lambda: len(got[b]) == 1, sink=got)
            assert _offsets(got[b], mine.partition) == [5]


@PROTOCOLS
async def test_offset_fetch_answered_after_its_partition_was_revoked_does_not_start_it(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    config = _orders(broker, group_id, **protocol)
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    shared = SharedLog()
    la, lb = shared.listener("a"), shared.listener("b")
    a_plane, b_plane = broker.dataplane(), broker.dataplane()
    hold = Hold()
    async with (
        AsyncConsumer(config, dataplane=a_plane) as a,
        AsyncConsumer(config, dataplane=b_plane) as b,
    ):
        held = broker.intercept(ApiKey.OFFSET_FETCH, hold)
        a.subscribe(["orders"], listener=la)
        # a is told it owns both partitions; their committed offsets are still on the way.
        await drive(a, until=lambda: told(a, la, 2) and bool(held.calls))
        assert a_plane.calls == []

        b.subscribe(["orders"], listener=lb)
        await drive(
            a,
            b,
            until=lambda: told(a, la, 1) and told(b, lb, 1) and bool(b.assignment()),
            sink=got,
        )
        [moved] = b.assignment()
        [kept] = a.assignment()
        hold.release()
        await drive(a, b, until=lambda: len(got[a]) == 5 and len(got[b]) == 5, sink=got)

        # The late answer started only what a still owns; the moved partition
        # was never fetched by a (its records went to b alone).
        assigned = frozenset().union(*(c.partitions for c in a_plane.calls if c.method == "assign"))
        assert assigned == frozenset({kept})
        assert {r.partition() for r in got[a]} == {kept.partition}
        assert _offsets(got[b], moved.partition) == [0, 1, 2, 3, 4]


@PROTOCOLS
async def test_commit_applied_whose_answer_is_lost_is_retried_once_and_returns(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    config = _orders(broker, group_id, **protocol)
    got: list[Record] = []
    everything = {tp: 5 for tp in tps("orders", 0, 1)}
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(got) == 10, sink={consumer: got})
        lost = broker.intercept(ApiKey.OFFSET_COMMIT, lambda _seen: Verdict.LOSE_ANSWER)

        with anyio.fail_after(2.0):  # request.timeout.ms: no hang on the lost answer
            assert await consumer.commit() == everything

        assert len(lost.calls) == 1
        [first, retry] = broker.requests_of(ApiKey.OFFSET_COMMIT)
        # The same offsets again, on a fresh connection, with the same epoch
        # (generation): applying them twice is harmless.
        assert retry.connection_id != first.connection_id
        assert _committed_partitions(retry, broker) == _committed_partitions(first, broker)
        assert (
            retry.request.generation_id_or_member_epoch
            == first.request.generation_id_or_member_epoch
        )
        assert broker.committed(group_id) == everything
        # The member is undisturbed: no rebalance, and it goes on consuming.
        broker.produce("orders", 0, b"after")
        await drive(consumer, until=lambda: len(got) == 11, sink={consumer: got})
        assert (got[-1].partition(), got[-1].offset()) == (0, 5)
        assert consumer.assignment() == tps("orders", 0, 1)


@PROTOCOLS
async def test_seeks_before_the_offset_fetch_answer_win_over_the_committed_offsets(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    broker.create_topic("orders", 3)
    produce_each(broker, "orders", 3, 6)
    config = consumer_config(broker, group_id, **protocol, **MANUAL)
    p0, p1, p2 = (TopicPartition("orders", p) for p in range(3))
    # An earlier member committed 1 for every partition.
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as earlier:
        earlier.subscribe(["orders"])
        await drive(earlier, until=lambda: len(earlier.assignment()) == 3)
        assert await earlier.commit({p0: 1, p1: 1, p2: 1}) == {p0: 1, p1: 1, p2: 1}

    got: list[Record] = []
    hold = Hold()
    held = broker.intercept(ApiKey.OFFSET_FETCH, hold)
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:

        class SeekOnAssign:
            def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
                if p0 in partitions:
                    consumer.seek(p0, 4)

        consumer.subscribe(["orders"], listener=SeekOnAssign())
        await drive(consumer, until=lambda: bool(held.calls))
        # The application seeks another partition while the fetch is in flight.
        consumer.seek(p1, 3)
        hold.release()
        await drive(consumer, until=lambda: len(got) == 2 + 3 + 5, sink={consumer: got})

    # The seeks won; the partition not sought starts at its committed offset.
    assert _offsets(got, 0) == [4, 5]
    assert _offsets(got, 1) == [3, 4, 5]
    assert _offsets(got, 2) == [1, 2, 3, 4, 5]


async def test_slow_revoke_callback_while_the_target_changes_again_keeps_callbacks_ordered(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 6)
    config = consumer_config(broker, group_id, **MANUAL)
    shared = SharedLog()
    la, lb, lc = shared.listener("a"), shared.listener("b"), shared.listener("c")
    a_plane = broker.dataplane()
    slow: list[int] = []
    async with (
        AsyncConsumer(config, dataplane=a_plane) as a,
        AsyncConsumer(config, dataplane=broker.dataplane()) as b,
        AsyncConsumer(config, dataplane=broker.dataplane()) as c,
    ):

        class SlowRevoke:
            """a's listener: its first revoke callback outlasts several heartbeat
            intervals, and a third member joins meanwhile (a new target for a)."""

            def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
                la.on_partitions_assigned(partitions)

            async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                la.on_partitions_revoked(partitions)
                if slow:
                    return
                slow.append(len(_heartbeats_of(broker, a.member_id)))
                c.subscribe(["orders"], listener=lc)

                def c_joined_and_a_heartbeated() -> bool:
                    group = broker.consumer_group(group_id)
                    assert group is not None
                    return (
                        c.member_id in group.members
                        and len(_heartbeats_of(broker, a.member_id)) >= slow[0] + 3
                    )

                await broker.wait_until(c_joined_and_a_heartbeated)

        a.subscribe(["orders"], listener=SlowRevoke())
        await drive(a, until=lambda: told(a, la, 6))
        b.subscribe(["orders"], listener=lb)

        def settled() -> bool:
            held = [la.owned(), lb.owned(), lc.owned()]
            return (
                all(len(h) == 2 for h in held)
                and told(a, la)
                and told(b, lb)
                and told(c, lc)
                and frozenset().union(*held) == tps("orders", *range(6))
            )

        try:
            await drive(a, b, c, until=settled)
        except TimeoutError:
            raise AssertionError(f"timed out; callbacks so far: {shared.events}") from None

        # The target that changed during the slow callback was reconciled after it.
        assert slow
        assert len(la.of("revoked")) >= 2, la.events
        # a's callbacks are deltas of what it held, in order.
        held: set[TopicPartition] = set()
        for kind, partitions in la.events:
            if kind == "assigned":
                assert not partitions & held, la.events
                held |= partitions
            else:
                assert partitions <= held, la.events
                held -= partitions
        # Every partition a gave up reached its next owner only after a's revoke callback.
        for who in ("b", "c"):
            for tp in frozenset().union(*shared.of(who, "assigned")):
                assert shared.index("a", "revoked", tp) < shared.index(who, "assigned", tp)
        # a's data plane: a revoked partition was never fetched again after it stopped.
        stopped: set[TopicPartition] = set()
        for call in a_plane.calls:
            if call.method == "unassign":
                stopped |= call.partitions
            elif call.method == "assign":
                assert not call.partitions & stopped, a_plane.calls
        assert a_plane.assigned == a.assignment() == la.owned()


async def test_auto_commit_in_flight_when_the_member_is_fenced_never_lands_for_the_lost_partitions(
    broker: FakeBroker, group_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Kafka's rule: a commit carrying an epoch the member no longer has is
    # refused (STALE_MEMBER_EPOCH, or UNKNOWN_MEMBER_ID once it is gone). The
    # client's part: it must not retry such a commit with its new epoch for
    # partitions it lost meanwhile, even those it owns again (another member
    # may have committed past them in between).
    caplog.set_level(logging.INFO, logger="kgroup.offsets")
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)
    # An interval auto-commit may take up to the interval: long enough for
    # the whole scenario to run while it is held.
    auto = consumer_config(
        broker, group_id, **{"auto.commit.interval.ms": 1_000, "request.timeout.ms": 5_000}
    )
    manual = consumer_config(broker, group_id, **MANUAL)
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    shared = SharedLog()
    la, lb = shared.listener("a"), shared.listener("b")
    commit_hold, rejoin_hold = Hold(), Hold()
    async with (
        AsyncConsumer(auto, dataplane=broker.dataplane()) as a,
        AsyncConsumer(manual, dataplane=broker.dataplane()) as b,
    ):
        a.subscribe(["orders"], listener=la)
        await drive(a, until=lambda: len(got[a]) == 10, sink=got)
        member_id, epoch = a.member_id, a.member_epoch
        held = broker.intercept(ApiKey.OFFSET_COMMIT, commit_hold, when=_from(member_id))
        await drive(a, until=lambda: bool(held.calls))
        [stale] = held.calls
        assert stale.request.generation_id_or_member_epoch == epoch

        # The coordinator drops a (its session expired); a's rejoin waits.
        rejoin = broker.intercept(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            rejoin_hold,
            when=lambda seen: (
                seen.request.member_id == member_id and seen.request.member_epoch == 0
            ),
        )
        broker.remove_member(group_id, member_id)
        await drive(a, until=lambda: bool(la.of("lost")) and bool(rejoin.calls))
        assert la.of("lost") == [tps("orders", 0, 1)]

        # b takes over, reads on and commits past what a had reached.
        for p in (0, 1):
            broker.produce("orders", p, b"more-5")
            broker.produce("orders", p, b"more-6")
        b.subscribe(["orders"], listener=lb)

        def b_read_everything() -> bool:
            return all(6 in _offsets(got[b], p) for p in (0, 1))

        await drive(a, b, until=b_read_everything, sink=got)
        passed = {tp: 7 for tp in tps("orders", 0, 1)}
        assert await b.commit() == passed

        # a rejoins (a new epoch) and gets one partition back from b.
        rejoin_hold.release()
        await drive(a, b, until=lambda: told(a, la, 1) and told(b, lb, 1), sink=got)
        assert a.member_epoch > epoch

        # Only now does the old commit reach the coordinator.
        commit_hold.release()
        await drive(a, b, until=lambda: "no longer owned" in caplog.text, sink=got)
        assert broker.committed(group_id) == passed
        later = [r for r in broker.requests_of(ApiKey.OFFSET_COMMIT) if r.at > stale.at]
        for request in later:
            if request.request.member_id == member_id:
                assert request.request.generation_id_or_member_epoch == a.member_epoch
                assert _committed_partitions(request, broker) <= a.assignment()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_blocking_close_delivers_the_callback_of_a_commit_async_ending_as_the_runtime_stops(
    backend: str, group_id: str
) -> None:
    # Regression: with nothing to revoke (manual assignment), close() waits
    # for the commit_async in flight while the runtime stops; its result was
    # queued just before the runtime ended, and close() stopped serving the
    # application's work as soon as it saw the runtime ended: the callback
    # was lost about one close in three. Several closes, to meet that race.
    partition = TopicPartition("orders", 0)
    with FakeBroker().running_in_thread(backend) as broker:
        broker.create_topic("orders", 1)
        for n in range(1, 9):
            broker.produce("orders", 0, f"{n}".encode())
            config = consumer_config(broker, f"{group_id}-{n}", **MANUAL)
            results: Results = []
            got: list[Record] = []

            def report(
                offsets: Mapping[TopicPartition, int],
                error: BaseException | None,
                results: Results = results,
            ) -> None:
                results.append((dict(offsets), error))

            with Consumer(config, backend=backend, dataplane=broker.dataplane()) as consumer:
                consumer.assign([partition])
                deadline = time.monotonic() + 5.0
                while len(got) < n and time.monotonic() < deadline:
                    got.extend(consumer.consume(100, 0.01))
                assert len(got) == n
                consumer.commit_async(callback=report)
                consumer.close(timeout=5.0)
            assert results == [({partition: n}, None)], f"close #{n}"
            assert broker.committed(f"{group_id}-{n}") == {partition: n}
