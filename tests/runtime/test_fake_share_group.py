"""The fake broker's share groups, driven through kgroup's own wire modules.

Each test speaks ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
ShareAcknowledge and IncrementalAlterConfigs to :class:`FakeBroker` over
kgroup's transport, and checks what the share consumer relies on: the join
(the empty first assignment, then the partitions), the simple assignor's
sharing, the epoch rules and errors, share session epochs, acquisition with
delivery counts, ACCEPT / RELEASE / REJECT, lock timeouts, the delivery limit,
and that the record batches decode with kgroup's own reader.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import anyio
import pytest
from kio.schema.errors import ErrorCode

from kgroup.admin.share import (
    LOCK_DURATION,
    set_share_auto_offset_reset,
    set_share_group_config,
)
from kgroup.dataplane.share.acknowledgements import AcknowledgementBatch, AcknowledgeType
from kgroup.dataplane.share.records import decode_records
from kgroup.dataplane.share.session import (
    FetchLimits,
    ShareAcknowledgePlan,
    ShareFetchPlan,
)
from kgroup.errors import GroupConfigRefusedError
from kgroup.membership.share import ShareHeartbeatRequest
from kgroup.protocol import ApiKey
from kgroup.protocol.requests import (
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
)
from kgroup.protocol.requests.share_fetch import ShareFetchResult
from kgroup.testing.fake import FakeBroker, RecordState, ShareRecordState
from kgroup.transport import BrokerConnection, connect
from kgroup.transport.client import KafkaClient
from kgroup.types import TopicIdPartition

pytestmark = pytest.mark.anyio

Acks = Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]]
NO_ACKS: Acks = MappingProxyType({})
ACCEPT, RELEASE, REJECT = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT


def _port(broker: FakeBroker) -> int:
    return int(broker.address().split(":")[1])


async def _heartbeat(
    conn: BrokerConnection,
    group: str,
    member: str,
    epoch: int,
    topics: tuple[str, ...] | None = ("t",),
) -> Any:
    request = ShareHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics
    )
    response = await conn.request(share_group_heartbeat.build(conn.versions, request))
    return share_group_heartbeat.parse(share_group_heartbeat.narrow(response))


def _partitions(assignment: Mapping[Any, frozenset[int]] | None) -> set[int] | None:
    if assignment is None:
        return None
    return {p for parts in assignment.values() for p in parts}


async def _fetch(
    conn: BrokerConnection,
    group: str,
    member: str,
    epoch: int,
    partitions: Sequence[TopicIdPartition],
    *,
    acks: Acks = NO_ACKS,
    forgotten: Sequence[TopicIdPartition] = (),
    max_wait_ms: int = 50,
    max_records: int = 500,
) -> ShareFetchResult:
    plan = ShareFetchPlan(
        node=0,
        member_id=member,
        epoch=epoch,
        partitions=tuple(sorted(set(partitions) | set(acks))),
        forgotten=tuple(forgotten),
        acknowledgements=MappingProxyType(dict(acks)),
        limits=FetchLimits(max_wait_ms=max_wait_ms, max_records=max_records),
    )
    response = await conn.request(share_fetch.build(conn.versions, plan, group))
    return share_fetch.parse(share_fetch.narrow(response))


async def _acknowledge(
    conn: BrokerConnection, group: str, member: str, epoch: int, acks: Acks
) -> Any:
    plan = ShareAcknowledgePlan(0, member, epoch, MappingProxyType(dict(acks)))
    response = await conn.request(share_acknowledge.build(conn.versions, plan, group))
    return share_acknowledge.parse(share_acknowledge.narrow(response))


def _acked(tp: TopicIdPartition, *batches: tuple[int, int, AcknowledgeType]) -> Acks:
    return {tp: tuple(AcknowledgementBatch(f, last, (kind,)) for f, last, kind in batches)}


def _records(result: ShareFetchResult) -> list[tuple[int, bytes | None, int]]:
    """(offset, value, delivery count) of every acquired record, decoded."""
    out = []
    for part in result.partitions:
        decoded = decode_records("t", part.partition.partition, part.records)
        assert decoded.error is None
        counts = {
            o: a.delivery_count
            for a in part.acquired
            for o in range(a.first_offset, a.last_offset + 1)
        }
        assert sorted(counts) == [r.offset() for r in decoded.records]
        out += [(r.offset(), r.value(), counts[r.offset()]) for r in decoded.records]
    return sorted(out)


async def test_join_answers_empty_then_the_partitions_and_shares_them_among_more_members(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 2)
        async with connect("127.0.0.1", _port(broker)) as conn:
            joined = await _heartbeat(conn, "g", "a", 0)
            assert (joined.error_code, joined.member_epoch, _partitions(joined.assignment)) == (
                0,
                1,
                set(),
            )
            given = await _heartbeat(conn, "g", "a", 1, None)
            assert (given.member_epoch, _partitions(given.assignment)) == (1, {0, 1})
            unchanged = await _heartbeat(conn, "g", "a", 1, None)
            assert unchanged.assignment is None

            for member, epoch in (("b", 2), ("c", 3)):
                first = await _heartbeat(conn, "g", member, 0)
                assert (first.member_epoch, _partitions(first.assignment)) == (epoch, set())
            owned = {}
            for member, epoch in (("a", 1), ("b", 2), ("c", 3)):
                answer = await _heartbeat(conn, "g", member, epoch, None)
                assert answer.member_epoch == 3
                owned[member] = _partitions(answer.assignment) or set()
            # Three members, two partitions: each partition goes to two members.
            assert all(owned.values())
            assert sorted(p for parts in owned.values() for p in parts) == [0, 0, 1, 1]
            assert {tp.partition for tp in broker.assignment("g", "c")} == owned["c"]
            # A rejoin under the same id starts over: the empty first answer again.
            rejoined = await _heartbeat(conn, "g", "a", 0)
            assert (rejoined.member_epoch, _partitions(rejoined.assignment)) == (3, set())
            back = await _heartbeat(conn, "g", "a", 3, None)
            assert _partitions(back.assignment) == owned["a"]
            group = broker.share_group("g")
            assert group is not None
            assert {m: v.assigned for m, v in group.members.items()} == {
                m: frozenset(TopicIdPartition(topic_id, p) for p in parts)
                for m, parts in owned.items()
            }


async def test_heartbeat_errors_and_the_previous_epoch(anyio_backend: str) -> None:
    async with FakeBroker(session_timeout_ms=300) as broker:
        broker.create_topic("t", 1)
        async with connect("127.0.0.1", _port(broker)) as conn:
            assert (await _heartbeat(conn, "g", "", 0)).error_code == ErrorCode.invalid_request
            assert (await _heartbeat(conn, "g", "a", 0, None)).error_code == (
                ErrorCode.invalid_request
            )
            assert (await _heartbeat(conn, "g", "a", -2)).error_code == ErrorCode.invalid_request
            await _heartbeat(conn, "g", "a", 0)
            await _heartbeat(conn, "g", "b", 0)  # group epoch 2
            moved = await _heartbeat(conn, "g", "a", 1, None)
            assert moved.member_epoch == 2
            # The response that moved a to epoch 2 may have been lost: epoch 1 still works.
            assert (await _heartbeat(conn, "g", "a", 1, None)).error_code == 0
            fenced = await _heartbeat(conn, "g", "a", 7, None)
            assert fenced.error_code == ErrorCode.fenced_member_epoch
            unknown = await _heartbeat(conn, "g", "nobody", 2, None)
            assert unknown.error_code == ErrorCode.unknown_member_id

            left = await _heartbeat(conn, "g", "b", -1, None)
            assert (left.error_code, left.member_epoch) == (0, -1)
            again = await _heartbeat(conn, "g", "b", 2, None)
            assert again.error_code == ErrorCode.unknown_member_id

            group = broker.share_group("g")
            assert group is not None
            await broker.wait_until(lambda: not group.members)  # a's session times out
            assert (await _heartbeat(conn, "g", "a", 2, None)).error_code == (
                ErrorCode.unknown_member_id
            )
            consumer: Any = await conn.request(
                conn.versions.new_request(
                    ApiKey.CONSUMER_GROUP_HEARTBEAT,
                    group_id="g",
                    member_id="c",
                    member_epoch=0,
                    rebalance_timeout=datetime.timedelta(seconds=5),
                    subscribed_topic_names=("t",),
                    topic_partitions=(),
                )
            )
            assert consumer.error_code == ErrorCode.group_id_not_found


async def test_describe_shows_members_and_assignment(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        broker.create_topic("t", 2)
        async with connect("127.0.0.1", _port(broker), client_id="me") as conn:
            await _heartbeat(conn, "g", "a", 0)
            await _heartbeat(conn, "g", "a", 1, None)
            response = await conn.request(share_group_describe.build(conn.versions, ["g", "h"]))
            found, missing = share_group_describe.parse(share_group_describe.narrow(response))
            assert (found.error_code, found.state, found.group_epoch, found.assignor) == (
                0,
                "Stable",
                1,
                "simple",
            )
            (member,) = found.members
            assert (member.member_id, member.client_id, member.subscribed_topics) == (
                "a",
                "me",
                frozenset({"t"}),
            )
            assert {tp.partition for tp in member.assignment} == {0, 1}
            assert missing.error_code == ErrorCode.group_id_not_found


async def _joined(conn: BrokerConnection, group: str, member: str) -> None:
    await _heartbeat(conn, group, member, 0)
    await _heartbeat(conn, group, member, 1, None)


async def test_accept_release_reject_and_delivery_counts(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 1)
        tp = TopicIdPartition(topic_id, 0)
        broker.set_share_group_config("g", auto_offset_reset="earliest")
        for value in (b"r0", b"r1", b"r2"):
            broker.produce("t", 0, value)
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "g", "a")
            first = await _fetch(conn, "g", "a", 0, [tp])
            assert first.error_code == 0
            assert _records(first) == [(0, b"r0", 1), (1, b"r1", 1), (2, b"r2", 1)]
            assert first.acquisition_lock_timeout_ms == 30_000

            acks = {tp: (AcknowledgementBatch(0, 2, (ACCEPT, RELEASE, REJECT)),)}
            answered = await _acknowledge(conn, "g", "a", 1, acks)
            assert (answered.error_code, dict(answered.acknowledge_error_codes())) == (0, {tp: 0})
            view = broker.share_partition("g", "t", 0)
            assert view is not None
            assert [view.state(o).state for o in range(3)] == [
                RecordState.ACKNOWLEDGED,
                RecordState.AVAILABLE,
                RecordState.ARCHIVED,
            ]
            assert view.start_offset == 1

            again = await _fetch(conn, "g", "a", 2, [])
            assert _records(again) == [(1, b"r1", 2)]  # released: delivered again, counted
            # The accept rides on the fetch and is applied before it acquires.
            last = await _fetch(conn, "g", "a", 3, [], acks=_acked(tp, (1, 1, ACCEPT)))
            assert _records(last) == []
            assert dict(last.acknowledge_error_codes()) == {tp: 0}
            final = broker.share_partition("g", "t", 0)
            assert final is not None
            assert (final.start_offset, final.state(1)) == (
                3,
                ShareRecordState(RecordState.ACKNOWLEDGED, 2),
            )


async def test_acknowledging_what_the_member_does_not_hold_changes_nothing(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 1)
        tp = TopicIdPartition(topic_id, 0)
        broker.set_share_group_config("g", auto_offset_reset="earliest")
        broker.produce("t", 0, b"x")
        broker.produce("t", 0, b"y")
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "g", "a")
            assert len(_records(await _fetch(conn, "g", "a", 0, [tp], max_records=1))) == 1
            # Offset 1 was never acquired: the whole partition's acks are refused.
            refused = await _acknowledge(
                conn, "g", "a", 1, {tp: (AcknowledgementBatch(0, 1, (ACCEPT,)),)}
            )
            assert dict(refused.acknowledge_error_codes()) == {tp: ErrorCode.invalid_record_state}
            view = broker.share_partition("g", "t", 0)
            assert view is not None
            assert view.state(0) == ShareRecordState(RecordState.ACQUIRED, 1, "a")
            bad = await _acknowledge(
                conn,
                "g",
                "a",
                2,
                {TopicIdPartition(uuid.uuid4(), 0): (AcknowledgementBatch(0, 0, (ACCEPT,)),)},
            )
            assert list(bad.acknowledge_error_codes().values()) == [ErrorCode.unknown_topic_id]


async def test_lock_timeout_hands_the_record_to_another_member(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 1)
        tp = TopicIdPartition(topic_id, 0)
        broker.set_share_group_config(
            "g", auto_offset_reset="earliest", record_lock_duration_ms=200
        )
        broker.produce("t", 0, b"x")
        async with (
            connect("127.0.0.1", _port(broker)) as conn_a,
            connect("127.0.0.1", _port(broker)) as conn_b,
        ):
            await _joined(conn_a, "g", "a")
            await _heartbeat(conn_b, "g", "b", 0)
            taken = await _fetch(conn_a, "g", "a", 0, [tp])
            assert (_records(taken), taken.acquisition_lock_timeout_ms) == ([(0, b"x", 1)], 200)
            nothing = await _fetch(conn_b, "g", "b", 0, [tp])
            assert _records(nothing) == []  # a holds it

            def released() -> bool:
                view = broker.share_partition("g", "t", 0)
                return view is not None and view.state(0).state is RecordState.AVAILABLE

            await broker.wait_until(released)
            again = await _fetch(conn_b, "g", "b", 1, [], max_wait_ms=2_000)
            assert _records(again) == [(0, b"x", 2)]
            late = await _acknowledge(conn_a, "g", "a", 1, _acked(tp, (0, 0, ACCEPT)))
            assert dict(late.acknowledge_error_codes()) == {tp: ErrorCode.invalid_record_state}


async def test_the_delivery_limit_archives_a_record(anyio_backend: str) -> None:
    async with FakeBroker(share_delivery_count_limit=2) as broker:
        topic_id = broker.create_topic("t", 1)
        tp = TopicIdPartition(topic_id, 0)
        broker.set_share_group_config("g", auto_offset_reset="earliest")
        broker.produce("t", 0, b"poison")
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "g", "a")
            first = await _fetch(conn, "g", "a", 0, [tp])
            assert _records(first) == [(0, b"poison", 1)]
            second = await _fetch(conn, "g", "a", 1, [], acks=_acked(tp, (0, 0, RELEASE)))
            assert _records(second) == [(0, b"poison", 2)]
            assert broker.expire_acquisition_locks("g") == 1  # the second delivery times out
            view = broker.share_partition("g", "t", 0)
            assert view is not None
            assert (view.state(0), view.start_offset) == (
                ShareRecordState(RecordState.ARCHIVED, 2),
                1,
            )
            assert _records(await _fetch(conn, "g", "a", 2, [])) == []


async def test_share_session_epochs(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 2)
        tp0, tp1 = TopicIdPartition(topic_id, 0), TopicIdPartition(topic_id, 1)
        broker.set_share_group_config("g", auto_offset_reset="earliest")
        broker.produce("t", 0, b"held")
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "g", "a")
            missing = await _fetch(conn, "g", "a", 3, [tp0])
            assert missing.error_code == ErrorCode.share_session_not_found
            not_yet = await _acknowledge(conn, "g", "a", 1, _acked(tp0, (0, 0, ACCEPT)))
            assert not_yet.error_code == ErrorCode.share_session_not_found
            opened = await _fetch(conn, "g", "a", 0, [tp0, tp1])
            assert _records(opened) == [(0, b"held", 1)]
            (session,) = broker.share_sessions("g")
            assert (session.epoch, session.partitions) == (1, frozenset({tp0, tp1}))

            wrong = await _fetch(conn, "g", "a", 5, [])
            assert wrong.error_code == ErrorCode.invalid_share_session_epoch
            cannot_open = await _acknowledge(conn, "g", "a", 0, _acked(tp0, (0, 0, ACCEPT)))
            assert cannot_open.error_code == ErrorCode.invalid_share_session_epoch
            forget = await _fetch(conn, "g", "a", 1, [], forgotten=[tp1])
            assert forget.error_code == 0
            (session,) = broker.share_sessions("g")
            assert (session.epoch, session.partitions) == (2, frozenset({tp0}))

            reopen_with_acks = await _fetch(conn, "g", "a", 0, [], acks=_acked(tp0, (0, 0, ACCEPT)))
            assert reopen_with_acks.error_code == ErrorCode.invalid_request

            # Closing the session releases what the member still holds, not counting
            # that delivery.
            closed = await _acknowledge(conn, "g", "a", -1, {})
            assert closed.error_code == 0
            assert broker.share_sessions("g") == []
            view = broker.share_partition("g", "t", 0)
            assert view is not None
            assert view.state(0) == ShareRecordState(RecordState.AVAILABLE, 0)
            gone = await _acknowledge(conn, "g", "a", -1, {})
            assert gone.error_code == ErrorCode.share_session_not_found


async def test_a_fetch_waits_for_records_up_to_max_wait(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 1)
        tp = TopicIdPartition(topic_id, 0)
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "g", "a")
            empty = await _fetch(conn, "g", "a", 0, [tp], max_wait_ms=100)
            assert _records(empty) == []
            results: list[ShareFetchResult] = []

            async def waiting() -> None:
                results.append(await _fetch(conn, "g", "a", 1, [], max_wait_ms=10_000))

            # Well inside max_wait: the record produced wakes the waiting fetch.
            with anyio.fail_after(5):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(waiting)
                    await broker.wait_until(
                        lambda: len(broker.requests_of(ApiKey.SHARE_FETCH)) == 2
                    )
                    broker.produce("t", 0, b"late")
            assert _records(results[0]) == [(0, b"late", 1)]


async def test_latest_by_default_and_earliest_through_incremental_alter_configs(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 1)
        tp = TopicIdPartition(topic_id, 0)
        broker.produce("t", 0, b"before")
        async with KafkaClient(broker.bootstrap_servers) as client:
            await set_share_auto_offset_reset(client, "early", "earliest")
            with pytest.raises(GroupConfigRefusedError):
                await set_share_group_config(client, "early", LOCK_DURATION, "100")
            await set_share_group_config(client, "early", LOCK_DURATION, "15000")
        config = broker.share_group_config("early")
        assert (config.auto_offset_reset, config.record_lock_duration_ms) == ("earliest", 15_000)
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "late", "a")
            assert _records(await _fetch(conn, "late", "a", 0, [tp])) == []
            broker.produce("t", 0, b"after")
            assert _records(await _fetch(conn, "late", "a", 1, [])) == [(1, b"after", 1)]
            await _joined(conn, "early", "b")
            assert [v for _o, v, _c in _records(await _fetch(conn, "early", "b", 0, [tp]))] == [
                b"before",
                b"after",
            ]


async def test_a_closed_connection_closes_its_session_and_releases_records(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 1)
        tp = TopicIdPartition(topic_id, 0)
        broker.set_share_group_config("g", auto_offset_reset="earliest")
        broker.produce("t", 0, b"x")
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "g", "a")
            assert len(_records(await _fetch(conn, "g", "a", 0, [tp]))) == 1
        await broker.wait_until(lambda: not broker.share_sessions("g"))
        view = broker.share_partition("g", "t", 0)
        assert view is not None
        assert view.state(0) == ShareRecordState(RecordState.AVAILABLE, 0)


async def test_a_member_leaving_releases_its_records(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 1)
        tp = TopicIdPartition(topic_id, 0)
        broker.set_share_group_config("g", auto_offset_reset="earliest")
        broker.produce("t", 0, b"x")
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "g", "a")
            assert len(_records(await _fetch(conn, "g", "a", 0, [tp]))) == 1
            broker.remove_member("g", "a")
            assert broker.share_sessions("g") == []
            assert (await _fetch(conn, "g", "a", 1, [])).error_code == (
                ErrorCode.share_session_not_found
            )
            view = broker.share_partition("g", "t", 0)
            assert view is not None
            assert view.state(0) == ShareRecordState(RecordState.AVAILABLE, 0)


async def test_an_interception_answers_a_share_fetch_with_a_session_error(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 1)
        tp = TopicIdPartition(topic_id, 0)
        broker.intercept(ApiKey.SHARE_FETCH, lambda _seen: ErrorCode.share_session_not_found)
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "g", "a")
            refused = await _fetch(conn, "g", "a", 0, [tp])
            assert (refused.error_code, refused.partitions) == (
                ErrorCode.share_session_not_found,
                (),
            )
            assert broker.share_sessions("g") == []  # the model never saw it
            assert (await _fetch(conn, "g", "a", 0, [tp])).error_code == 0


async def test_renew_restarts_the_lock_and_a_renewing_fetch_acquires_nothing(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 1)
        tp = TopicIdPartition(topic_id, 0)
        broker.set_share_group_config(
            "g", auto_offset_reset="earliest", record_lock_duration_ms=300
        )
        broker.produce("t", 0, b"slow")
        broker.produce("t", 0, b"next")
        async with connect("127.0.0.1", _port(broker)) as conn:
            assert conn.versions.version(ApiKey.SHARE_FETCH) == 2
            await _joined(conn, "g", "a")
            assert _records(await _fetch(conn, "g", "a", 0, [tp], max_records=1)) == [
                (0, b"slow", 1)
            ]
            renew = _acked(tp, (0, 0, AcknowledgeType.RENEW))
            renewed = await _fetch(conn, "g", "a", 1, [], acks=renew, max_wait_ms=5_000)
            # A renewing fetch answers at once with nothing new: record 1 stays available.
            assert (_records(renewed), dict(renewed.acknowledge_error_codes())) == ([], {tp: 0})
            view = broker.share_partition("g", "t", 0)
            assert view is not None
            assert (view.state(0).state, view.state(1).state) == (
                RecordState.ACQUIRED,
                RecordState.AVAILABLE,
            )
            again = await _acknowledge(conn, "g", "a", 2, renew)
            assert (again.error_code, again.acquisition_lock_timeout_ms) == (0, 300)
            accepted = await _acknowledge(conn, "g", "a", 3, _acked(tp, (0, 0, ACCEPT)))
            assert dict(accepted.acknowledge_error_codes()) == {tp: 0}


async def test_a_partition_fetched_from_a_node_that_does_not_lead_it(anyio_backend: str) -> None:
    async with FakeBroker(nodes=2) as broker:
        topic_id = broker.create_topic("t", 2)
        tp1 = TopicIdPartition(topic_id, 1)  # led by node 1
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "g", "a")
            result = await _fetch(conn, "g", "a", 0, [tp1])
            (part,) = result.partitions
            assert (part.error_code, part.current_leader.leader_id) == (
                ErrorCode.not_leader_or_follower,
                1,
            )
            assert result.node_endpoints[1].port == int(broker.address(1).split(":")[1])


async def test_a_subscribed_topic_that_grows_moves_the_group_epoch(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        broker.create_topic("t", 1)
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "g", "a")
            broker.create_topic("t", 3)
            grown = await _heartbeat(conn, "g", "a", 1, None)
            assert (grown.member_epoch, _partitions(grown.assignment)) == (2, {0, 1, 2})


async def test_an_evicted_session_is_not_found_and_the_member_keeps_its_records(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 1)
        tp = TopicIdPartition(topic_id, 0)
        broker.set_share_group_config("g", auto_offset_reset="earliest")
        broker.produce("t", 0, b"x")
        async with connect("127.0.0.1", _port(broker)) as conn:
            await _joined(conn, "g", "a")
            assert len(_records(await _fetch(conn, "g", "a", 0, [tp]))) == 1
            assert broker.evict_share_sessions("g", "a") == 1
            lost = await _fetch(conn, "g", "a", 1, [], acks=_acked(tp, (0, 0, ACCEPT)))
            assert lost.error_code == ErrorCode.share_session_not_found
            # Reopened, the member still holds the record and may accept it.
            await _fetch(conn, "g", "a", 0, [tp])
            accepted = await _acknowledge(conn, "g", "a", 1, _acked(tp, (0, 0, ACCEPT)))
            assert dict(accepted.acknowledge_error_codes()) == {tp: 0}
            view = broker.share_partition("g", "t", 0)
            assert view is not None
            assert view.state(0) == ShareRecordState(RecordState.ACKNOWLEDGED, 1)


async def test_a_malformed_heartbeat_is_invalid_even_for_an_unknown_group(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker, connect("127.0.0.1", _port(broker)) as conn:
        assert (await _heartbeat(conn, "new", "", 3)).error_code == ErrorCode.invalid_request
        assert (await _heartbeat(conn, "new", "a", 3)).error_code == (ErrorCode.unknown_member_id)
        assert broker.share_group("new") is None
