"""Telemetry events and ``metrics()`` of real consumers against the fake broker, asyncio and trio.

Events go to a ``telemetry.callback`` shared by the consumers of a test, so
the list is one timeline in the order the events happened.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

import pytest

from kgroup import AsyncConsumer
from kgroup.dataplane import Record
from kgroup.telemetry import (
    CallbackCompleted,
    CallbackKind,
    CommitCompleted,
    Fenced,
    FetchStarted,
    FetchStopped,
    LeaveReason,
    MemberJoined,
    MemberLeft,
    PartitionsAssigned,
    PartitionsLost,
    PartitionsRevoked,
    RebalanceEnded,
    RebalanceStarted,
    StopReason,
    TelemetryEvent,
    TelemetryProtocol,
)
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

from .helpers import SharedLog, consumer_config, drive, produce_each, told, tps

pytestmark = pytest.mark.anyio

CLASSIC = {
    "group.protocol": "classic",
    "session.timeout.ms": 2_000,
    "heartbeat.interval.ms": 100,
    "partition.assignment.strategy": "cooperative-sticky",
}


def _of(events: list[TelemetryEvent], client: str, body: type[Any]) -> list[Any]:
    """Bodies of type ``body`` emitted by the consumer with ``client.id`` ``client``.

    (Not by member id: a classic member has none before its first JoinGroup answer.)
    """
    return [e.body for e in events if e.header.client_id == client and isinstance(e.body, body)]


def _fetch_intervals(
    events: list[TelemetryEvent],
) -> dict[TopicPartition, list[tuple[str, int, int | None]]]:
    """Per partition: (member id, index of its fetch start, index of its stop or None)."""
    open_at: dict[tuple[str, TopicPartition], int] = {}
    intervals: dict[TopicPartition, list[tuple[str, int, int | None]]] = defaultdict(list)
    for i, event in enumerate(events):
        body, member = event.body, event.header.member_id
        if isinstance(body, FetchStarted):
            for tp in body.partitions:
                assert (member, tp) not in open_at, f"{member} started {tp} twice"
                open_at[(member, tp)] = i
        elif isinstance(body, FetchStopped):
            for tp in body.partitions:
                intervals[tp].append((member, open_at.pop((member, tp)), i))
    for (member, tp), start in open_at.items():
        intervals[tp].append((member, start, None))
    return intervals


def _assert_never_fetched_twice(events: list[TelemetryEvent]) -> None:
    for tp, spans in _fetch_intervals(events).items():
        spans.sort(key=lambda s: s[1])
        for (m1, _, end), (m2, start, _) in itertools.pairwise(spans):
            assert end is not None, f"{tp}: {m1} never stopped, yet {m2} fetched it"
            assert end < start, f"{tp}: {m1} and {m2} fetched it at once"


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
async def test_a_handover_is_told_in_order_on_both_protocols(
    broker: FakeBroker, group_id: str, protocol: str
) -> None:
    broker.create_topic("orders", 4)
    everything = tps("orders", 0, 1, 2, 3)
    events: list[TelemetryEvent] = []
    extra = CLASSIC if protocol == "classic" else {}
    config = consumer_config(broker, group_id, **extra, **{"telemetry.callback": events.append})
    log = SharedLog()
    a, b = "first", "second"
    async with (
        AsyncConsumer({**config, "client.id": a}, dataplane=broker.dataplane()) as first,
        AsyncConsumer({**config, "client.id": b}, dataplane=broker.dataplane()) as second,
    ):
        one, two = log.listener("first"), log.listener("second")
        first.subscribe(["orders"], listener=one)
        await drive(first, until=lambda: told(first, one, 4))
        second.subscribe(["orders"], listener=two)
        await drive(
            first,
            second,
            until=lambda: (
                told(first, one, 2)
                and told(second, two, 2)
                and first.member_epoch == second.member_epoch
            ),
        )
        moved = second.assignment()
        await drive(
            first,
            second,
            until=lambda: (
                frozenset().union(*(s.partitions for s in _of(events, b, FetchStarted))) == moved
                # The first member's rebalance ends once its own last step (a
                # cooperative rejoin's callback) ran, which may come later.
                and len(_of(events, a, RebalanceEnded)) >= 2
            ),
        )

    assert {e.header.protocol for e in events} == {TelemetryProtocol(protocol)}
    # Even a classic member's events from before its JoinGroup answer carry its id.
    assert all(e.header.member_id for e in events)
    assert {e.header.group for e in events} == {group_id}
    # Sequence numbers count every event of an emitter, without gaps.
    for client in (a, b):
        seqs = [e.header.seq for e in events if e.header.client_id == client]
        assert seqs == list(range(len(seqs)))

    assert [j.epoch > 0 for j in _of(events, a, MemberJoined)] == [True]
    assert _of(events, a, RebalanceStarted)[0].trigger == "join"
    assert all(r.error is None for r in _of(events, a, RebalanceEnded)[:2])
    assert frozenset(_of(events, a, PartitionsAssigned)[0].partitions) == everything
    revoked = frozenset().union(*(r.partitions for r in _of(events, a, PartitionsRevoked)))
    assert moved <= revoked
    stops = _of(events, a, FetchStopped)
    assert frozenset().union(*(s.partitions for s in stops if s.reason is StopReason.REVOKED)) == (
        moved
    )
    # close(): the rest stopped for that reason, and the member left.
    closed = frozenset().union(*(s.partitions for s in stops if s.reason is StopReason.CLOSED))
    assert closed == everything - moved
    assert [left.reason for left in _of(events, a, MemberLeft)] == [LeaveReason.CLOSED]
    callbacks = _of(events, a, CallbackCompleted)
    assert {c.callback for c in callbacks} >= {CallbackKind.ASSIGNED, CallbackKind.REVOKED}
    assert all(c.duration_s >= 0 and c.error is None for c in callbacks)
    _assert_never_fetched_twice(events)


async def test_fencing_names_the_error_and_the_lost_partitions(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 2)
    events: list[TelemetryEvent] = []
    log = SharedLog()
    listener = log.listener("c")
    config = consumer_config(
        broker, group_id, **{"telemetry.callback": events.append, "client.id": "c"}
    )
    member = "c"
    dataplane = broker.dataplane()
    async with AsyncConsumer(config, dataplane=dataplane) as consumer:
        consumer.subscribe(["orders"], listener=listener)
        await drive(
            consumer,
            until=lambda: told(consumer, listener, 2) and dataplane.assigned == tps("orders", 0, 1),
        )
        broker.remove_member(group_id, consumer.member_id)  # as if its session had expired
        await drive(
            consumer,
            until=lambda: (
                len(log.of("c", "assigned")) == 2 and dataplane.assigned == tps("orders", 0, 1)
            ),
        )
        metrics = consumer.metrics()

    fenced = _of(events, member, Fenced)
    assert [f.error for f in fenced] == ["UNKNOWN_MEMBER_ID"]
    lost = _of(events, member, PartitionsLost)
    assert [(frozenset(x.partitions), x.error) for x in lost] == [
        (tps("orders", 0, 1), "UNKNOWN_MEMBER_ID")
    ]
    lost_stops = [s for s in _of(events, member, FetchStopped) if s.reason is StopReason.LOST]
    assert frozenset().union(*(s.partitions for s in lost_stops)) == tps("orders", 0, 1)
    reasons = [left.reason for left in _of(events, member, MemberLeft)]
    assert reasons[0] is LeaveReason.FENCED
    assert len(_of(events, member, MemberJoined)) == 2  # joined, fenced, joined again
    assert "fenced" in [r.trigger for r in _of(events, member, RebalanceStarted)]
    assert metrics.fenced == 1
    assert metrics.heartbeat_errors >= 1
    _assert_never_fetched_twice(events)


async def test_metrics_count_records_commits_heartbeats_and_rebalances(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    events: list[TelemetryEvent] = []
    config = consumer_config(
        broker, group_id, **{"enable.auto.commit": False, "telemetry.callback": events.append}
    )
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(got[consumer]) == 10, sink=got)
        committed = await consumer.commit()
        metrics = consumer.metrics()

    assert metrics.records == 10
    assert metrics.commits == 1
    assert metrics.commit_failures == 0
    assert metrics.commit_latency.count == 1
    assert metrics.rebalances == 1
    assert metrics.rebalance_latency.count == 1
    assert metrics.heartbeats >= 1
    assert metrics.heartbeat_rtt.count >= 1
    assert metrics.heartbeat_rtt.quantile(0.5) is not None
    assert metrics.fenced == 0
    # The fake data plane has no librdkafka statistics: no numbers rather than guesses.
    assert metrics.bytes is None
    assert dict(metrics.lag) == {}
    assert metrics.telemetry is not None
    assert metrics.telemetry.dropped == 0
    commits = [e.body for e in events if isinstance(e.body, CommitCompleted)]
    assert len(commits) == 1
    assert commits[0].ok
    assert {(o.topic, o.partition, o.offset) for o in commits[0].offsets} == {
        (tp.topic, tp.partition, offset) for tp, offset in committed.items()
    }


async def test_metrics_without_telemetry_and_a_failing_sink_do_not_hurt_the_consumer(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 1)
    produce_each(broker, "orders", 1, 3)

    def broken(event: TelemetryEvent) -> None:
        raise OSError("the sink is gone")

    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    plain = consumer_config(broker, group_id)
    failing = consumer_config(broker, f"{group_id}-b", **{"telemetry.callback": broken})
    async with (
        AsyncConsumer(plain, dataplane=broker.dataplane()) as quiet,
        AsyncConsumer(failing, dataplane=broker.dataplane()) as noisy,
    ):
        quiet.subscribe(["orders"])
        noisy.subscribe(["orders"])
        await drive(quiet, noisy, until=lambda: len(got[quiet]) == len(got[noisy]) == 3, sink=got)
        assert quiet.metrics().telemetry is None
        assert quiet.metrics().records == noisy.metrics().records == 3
        stats = noisy.metrics().telemetry
        assert stats is not None
        assert stats.failed > 0
        assert stats.written == 0
