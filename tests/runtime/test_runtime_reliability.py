"""Reliability fixes (issue 10) through the fake broker, asyncio and trio, both protocols."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kgroup import AsyncConsumer
from kgroup.dataplane import Record
from kgroup.errors import CommitFailedError, IllegalGenerationError, RebalanceInProgressError
from kgroup.protocol import ApiKey
from kgroup.testing.fake import ClassicState, FakeBroker, SeenRequest, Verdict
from kgroup.types import TopicPartition

from .helpers import (
    Recorder,
    SharedLog,
    consumer_config,
    drive,
    next_offsets,
    produce_each,
    told,
    tps,
)

pytestmark = pytest.mark.anyio

CLASSIC = {
    "group.protocol": "classic",
    "session.timeout.ms": 2_000,
    "heartbeat.interval.ms": 100,
}
PROTOCOLS = pytest.mark.parametrize(
    "protocol", [{"group.protocol": "consumer"}, CLASSIC], ids=["consumer", "classic"]
)


@PROTOCOLS
@pytest.mark.parametrize("how", ["commit", "commit_async"])
async def test_commit_in_revoke_callback_during_close_is_accepted_and_resumed_from(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any], how: str
) -> None:
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)
    config = consumer_config(broker, group_id, **protocol, **{"enable.auto.commit": False})
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    results: list[tuple[Mapping[TopicPartition, int], BaseException | None]] = []

    async with AsyncConsumer(config, dataplane=broker.dataplane()) as first:

        class CommitOnRevoke:
            async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
                done = next_offsets(got[first])
                mine = {tp: done[tp] for tp in partitions if tp in done}
                if how == "commit":
                    results.append((await first.commit(mine), None))
                else:
                    first.commit_async(mine, callback=lambda o, e: results.append((o, e)))

        first.subscribe(["orders"], listener=CommitOnRevoke())
        await drive(first, until=lambda: len(got[first]) == 10, sink=got)
        # Nothing committed yet: whatever is committed below came from close().
        assert broker.committed(group_id) == {}
    # Leaving the block closed the consumer, which ran the revoke callback.

    everything = {tp: 5 for tp in tps("orders", 0, 1)}
    if how == "commit":
        assert results == [(everything, None)]
    assert broker.committed(group_id) == everything

    # A new member resumes after the commit: it reads only what came later.
    broker.produce("orders", 0, b"after")
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as second:
        second.subscribe(["orders"])
        assert await second.committed(sorted(everything)) == everything
        await drive(second, until=lambda: len(got[second]) == 1, sink=got)
        assert [(r.partition(), r.offset(), r.value()) for r in got[second]] == [(0, 5, b"after")]


def _busy(seconds: float) -> None:
    """Synchronous work that holds the event loop (the application's processing)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@PROTOCOLS
async def test_processing_buffered_records_without_awaiting_still_heartbeats_and_commits(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    broker.create_topic("orders", 1)
    config = consumer_config(broker, group_id, **protocol)
    got: list[Record] = []
    results: list[BaseException | None] = []
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(consumer.assignment()) == 1)
        produce_each(broker, "orders", 1, 1_000)
        await drive(consumer, until=lambda: len(got) >= 1, sink={consumer: got})
        consumer.commit_async(callback=lambda _offsets, error: results.append(error))
        start = time.monotonic()  # the fake's clock
        # 1,000 records at 0.5 ms each (0.5 s or more: many heartbeat intervals of 100 ms),
        # and nothing awaited but poll() itself, whose records are all buffered.
        while len(got) < 1_000:
            record = await consumer.poll(1.0)
            assert record is not None
            got.append(record)
            _busy(0.0005)
        end = time.monotonic()

        heartbeat_key = ApiKey.HEARTBEAT if protocol is CLASSIC else ApiKey.CONSUMER_GROUP_HEARTBEAT
        beats = [r.at for r in broker.requests_of(heartbeat_key) if start <= r.at <= end]
        # The interval is 100 ms: at least half of the expected heartbeats went out.
        assert len(beats) >= (end - start) / 0.1 / 2
        assert results == [None]


@pytest.mark.parametrize(
    ("code", "cause"),
    [
        (ErrorCode.illegal_generation, IllegalGenerationError),
        (ErrorCode.rebalance_in_progress, RebalanceInProgressError),
    ],
)
async def test_classic_commit_refused_by_a_rebalance_is_a_retriable_commit_failed_error(
    broker: FakeBroker, group_id: str, code: ErrorCode, cause: type[BaseException]
) -> None:
    broker.create_topic("orders", 1)
    broker.produce("orders", 0, b"a")
    got: list[Record] = []
    async with AsyncConsumer(
        consumer_config(broker, group_id, **CLASSIC), dataplane=broker.dataplane()
    ) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(got) == 1, sink={consumer: got})
        refuse = broker.intercept(ApiKey.OFFSET_COMMIT, lambda _seen: code)

        with pytest.raises(CommitFailedError, match="rebalanced") as failed:
            await consumer.commit()
        assert isinstance(failed.value.__cause__, cause)
        assert len(refuse.calls) == 1  # refused at once, not retried until the timeout

        # Not fatal: the application polls again and its next commit lands.
        refuse.remove()
        assert await consumer.consume(1, 0.05) == []
        assert await consumer.commit() == {TopicPartition("orders", 0): 1}
        assert broker.committed(group_id) == {TopicPartition("orders", 0): 1}


async def test_member_without_heartbeats_for_a_session_timeout_self_fences_and_rejoins(
    anyio_backend: str, group_id: str
) -> None:
    async with FakeBroker(session_timeout_ms=1_000) as broker:
        broker.create_topic("orders", 2)
        listener = Recorder()
        config = consumer_config(
            broker,
            group_id,
            **{"request.timeout.ms": 300, "group.consumer.session.timeout.ms": 1_000},
        )
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
            consumer.subscribe(["orders"], listener=listener)
            await drive(consumer, until=lambda: told(consumer, listener, 2))

            # The coordinator stops answering this member (a network partition):
            # its heartbeats, and its rejoin too until the partition heals, so
            # the rejoin cannot complete before the loss is looked at.
            stall = broker.intercept(
                ApiKey.CONSUMER_GROUP_HEARTBEAT, lambda _seen: Verdict.NO_ANSWER, times=None
            )
            await drive(consumer, until=lambda: bool(listener.of("lost")))
            lost_at = time.monotonic()
            answered = [
                r.at
                for r in broker.requests_of(ApiKey.CONSUMER_GROUP_HEARTBEAT)
                if r.at < stall.calls[0].at
            ]
            # Lost within a session timeout (plus a poll slice) of the last answered heartbeat,
            # without hearing from the broker, and nothing committed for the lost partitions.
            assert lost_at - max(answered) < 1.0 + 0.5
            assert listener.events == [
                ("assigned", tps("orders", 0, 1)),
                ("lost", tps("orders", 0, 1)),
            ]
            assert consumer.assignment() == frozenset()
            assert broker.requests_of(ApiKey.OFFSET_COMMIT) == []

            # The partition heals: the member rejoins and owns its partitions again.
            stall.remove()
            await drive(consumer, until=lambda: told(consumer, listener, 2))
            assert listener.of("assigned") == [tps("orders", 0, 1)] * 2
            assert consumer.member_epoch > 0


async def test_classic_member_without_heartbeats_for_a_session_timeout_loses_and_rejoins(
    anyio_backend: str, group_id: str
) -> None:
    async with FakeBroker() as broker:
        broker.create_topic("orders", 2)
        listener = Recorder()
        config = consumer_config(
            broker,
            group_id,
            **{**CLASSIC, "session.timeout.ms": 1_000, "request.timeout.ms": 300},
        )
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
            consumer.subscribe(["orders"], listener=listener)
            await drive(consumer, until=lambda: told(consumer, listener, 2))
            [join] = broker.requests_of(ApiKey.JOIN_GROUP)[-1:]
            member_id = broker.requests_of(ApiKey.SYNC_GROUP)[-1].request.member_id
            assert member_id

            # The coordinator stops answering this member (a network partition):
            # its heartbeats go unanswered, and its JoinGroup does not get
            # through either until the partition heals (the connection drops:
            # an unanswered JoinGroup would be waited for a rebalance timeout),
            # so the rejoin cannot complete before the loss is looked at.
            stall = broker.intercept(ApiKey.HEARTBEAT, lambda _seen: Verdict.NO_ANSWER, times=None)
            stall_join = broker.intercept(ApiKey.JOIN_GROUP, lambda _seen: Verdict.DROP, times=None)
            await drive(consumer, until=lambda: bool(listener.of("lost")))
            lost_at = time.monotonic()
            stalled_at = stall.calls[0].at
            # The last time the coordinator vouched for the member: a heartbeat
            # answered, or the SyncGroup that installed the assignment.
            answered = [
                r.at
                for api in (ApiKey.HEARTBEAT, ApiKey.SYNC_GROUP)
                for r in broker.requests_of(api)
                if r.at < stalled_at
            ]
            # Lost within a session timeout (plus a poll slice) of that, without
            # hearing from the broker, and nothing committed for the lost partitions.
            assert lost_at - max(answered) < 1.0 + 0.5
            assert listener.events == [
                ("assigned", tps("orders", 0, 1)),
                ("lost", tps("orders", 0, 1)),
            ]
            assert consumer.assignment() == frozenset()
            assert broker.requests_of(ApiKey.OFFSET_COMMIT) == []

            # The partition heals: the member rejoins with its member id and owns
            # its partitions again.
            stall.remove()
            stall_join.remove()
            await drive(consumer, until=lambda: told(consumer, listener, 2))
            rejoins = [r for r in broker.requests_of(ApiKey.JOIN_GROUP) if r.at > join.at]
            assert rejoins[0].request.member_id == member_id
            assert listener.of("assigned") == [tps("orders", 0, 1)] * 2


async def _drive_or_show(
    shared: SharedLog,
    *consumers: AsyncConsumer,
    until: Any,
    sink: Mapping[AsyncConsumer, list[Record]] | None = None,
) -> None:
    try:
        await drive(*consumers, until=until, sink=sink)
    except TimeoutError:
        raise AssertionError(f"timed out; callbacks so far: {shared.events}") from None


def _delta_violations(events: list[tuple[str, frozenset[TopicPartition]]]) -> list[str]:
    """Callbacks that are not deltas of what the application was told it held.

    ``assigned`` must name only partitions not held; ``revoked`` and ``lost``
    only partitions held (a lost callback arriving after the partitions were
    assigned again would name partitions of the new assignment).
    """
    held: set[TopicPartition] = set()
    problems = []
    for i, (kind, partitions) in enumerate(events):
        if kind == "assigned":
            if partitions & held:
                problems.append(f"#{i} assigned {sorted(partitions & held)} already held")
            held |= partitions
        else:
            if partitions - held:
                problems.append(f"#{i} {kind} {sorted(partitions - held)} not held")
            held -= partitions
    return problems


@PROTOCOLS
async def test_callbacks_stay_deltas_across_a_session_loss_a_handover_and_a_rejoin(
    anyio_backend: str, group_id: str, protocol: dict[str, Any]
) -> None:
    # Regression (issue 10): the lost callback of a member that lost its
    # session must reach its application before the assignment it gets when it
    # rejoins, and name only what it held: never partitions already re-assigned.
    classic = protocol is CLASSIC
    timeouts = (
        {**CLASSIC, "session.timeout.ms": 1_000}
        if classic
        else {**protocol, "group.consumer.session.timeout.ms": 1_000}
    )
    async with FakeBroker(session_timeout_ms=1_000) as broker:
        broker.create_topic("orders", 4)
        shared = SharedLog()
        la, lb = shared.listener("a"), shared.listener("b")
        config = consumer_config(broker, group_id, **{**timeouts, "request.timeout.ms": 300})
        async with (
            AsyncConsumer(config, dataplane=broker.dataplane()) as a,
            AsyncConsumer(config, dataplane=broker.dataplane()) as b,
        ):
            a.subscribe(["orders"], listener=la)
            b.subscribe(["orders"], listener=lb)

            def split() -> bool:
                held = [la.owned(), lb.owned()]
                return (
                    all(held)
                    and told(a, la)
                    and told(b, lb)
                    and not (held[0] & held[1])
                    and held[0] | held[1] == tps("orders", 0, 1, 2, 3)
                )

            await drive(a, b, until=split)
            cut_member = a.member_id
            heartbeat = ApiKey.HEARTBEAT if classic else ApiKey.CONSUMER_GROUP_HEARTBEAT

            def from_a(seen: SeenRequest) -> bool:
                member: str = seen.request.member_id
                return member == cut_member

            stall = broker.intercept(
                heartbeat, lambda _seen: Verdict.NO_ANSWER, times=None, when=from_a
            )
            before = la.owned()
            # a loses its session (the broker may hand its partitions to b, or
            # take a back at once: a classic member rejoins with its member id).
            await _drive_or_show(shared, a, b, until=lambda: bool(la.of("lost")))
            stall.remove()
            await _drive_or_show(shared, a, b, until=split)
            assert _delta_violations(la.events) == [], la.events
            assert _delta_violations(lb.events) == [], lb.events
            lost_at = shared.events.index(("a", "lost", la.of("lost")[0]))
            a_assigned = [
                i
                for i, (who, kind, parts) in enumerate(shared.events)
                if who == "a" and kind == "assigned" and parts
            ]
            # Held before the loss; the lost callback ran before the rejoin's assignment.
            assert a_assigned[0] < lost_at < a_assigned[-1], shared.events
            assert la.of("lost") == [before]


async def test_classic_member_unconfirmed_in_a_long_join_round_stops_and_resumes_where_it_stopped(
    broker: FakeBroker, group_id: str
) -> None:
    # A cooperative member whose JoinGroup is parked for longer than its session
    # timeout (the round waits for a member that does not rejoin) cannot tell a
    # parked JoinGroup from a lost one: it stops fetching after a session
    # timeout without confirmation, keeps its partition, and once the round
    # keeps it there resumes where it stopped (no record handed out twice).
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)
    common = {
        **CLASSIC,
        "partition.assignment.strategy": "cooperative-sticky",
        "enable.auto.commit": False,
        "max.poll.interval.ms": 3_000,  # the round's deadline, as the rebalance timeout
    }
    quick = consumer_config(broker, group_id, **{**common, "session.timeout.ms": 1_000})
    patient = consumer_config(broker, group_id, **{**common, "session.timeout.ms": 10_000})
    a_plane = broker.dataplane()
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    shared = SharedLog()
    a_log, b_log, c_log = shared.listener("a"), shared.listener("b"), shared.listener("c")
    async with (
        AsyncConsumer(quick, dataplane=a_plane) as a,
        AsyncConsumer(patient, dataplane=broker.dataplane()) as b,
        AsyncConsumer(patient, dataplane=broker.dataplane()) as c,
    ):

        def offsets_of_a(partition: int) -> list[int | None]:
            return [r.offset() for r in got[a] if r.partition() == partition]

        a.subscribe(["orders"], listener=a_log)
        await drive(a, until=lambda: told(a, a_log, 2), sink=got)
        b.subscribe(["orders"], listener=b_log)
        await _drive_or_show(
            shared, a, b, until=lambda: told(a, a_log, 1) and told(b, b_log, 1), sink=got
        )
        [kept] = a.assignment()
        await drive(a, b, until=lambda: len(offsets_of_a(kept.partition)) == 5, sink=got)

        # b stops rejoining (its JoinGroups never reach the coordinator); c
        # joining starts a round that now waits for b until the rebalance timeout.
        b_id = b.member_id
        broker.intercept(
            ApiKey.JOIN_GROUP,
            lambda _seen: Verdict.NO_ANSWER,
            times=None,
            when=lambda seen: seen.request.member_id == b_id,
        )
        told_before = list(a_log.events)
        c.subscribe(["orders"], listener=c_log)

        def group_now() -> tuple[ClassicState, frozenset[str]]:
            group = broker.classic_group(group_id)
            assert group is not None
            return group.state, frozenset(group.members)

        await drive(a, b, c, until=lambda: a_plane.assigned == frozenset(), sink=got)
        # Stopped while the round was still open, owning its partition, told nothing.
        assert group_now()[0] is ClassicState.PREPARING_REBALANCE
        assert a.assignment() == frozenset({kept})
        # (The round b joined may still add its empty cooperative "assigned".)
        assert [e for e in a_log.events[len(told_before) :] if e[1]] == []

        for n in range(5, 10):
            broker.produce("orders", kept.partition, f"{kept.partition}-{n}".encode())
        await _drive_or_show(
            shared,
            a,
            c,
            until=lambda: (
                group_now()[0] is ClassicState.STABLE
                and b_id not in group_now()[1]
                and len(offsets_of_a(kept.partition)) >= 10
            ),
            sink=got,
        )
        assert kept in a.assignment()
        assert offsets_of_a(kept.partition) == list(range(10))
        assert not a_log.of("lost")
