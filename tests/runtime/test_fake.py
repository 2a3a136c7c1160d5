"""The fake broker and data plane themselves: a few checks of what the runtime tests rely on."""

from __future__ import annotations

import datetime
from typing import Any

import anyio
import pytest
from kio.schema.errors import ErrorCode

from kgroup.dataplane.librdkafka import DataPlaneError, Record
from kgroup.errors import KafkaConnectionError, RequestTimeoutError
from kgroup.protocol import ApiKey
from kgroup.protocol.requests import offset_for_leader_epoch
from kgroup.protocol.requests.offset_for_leader_epoch import EpochEnd, EpochQuery
from kgroup.testing.fake import FakeBroker, RecordLog, SeenRequest, Verdict
from kgroup.testing.fake.dataplane import FakeDataPlane
from kgroup.transport import BrokerConnection, connect
from kgroup.types import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _heartbeat(conn: BrokerConnection, member: str, epoch: int, **fields: Any) -> Any:
    if epoch == 0:
        fields.setdefault("rebalance_timeout", datetime.timedelta(seconds=5))
        fields.setdefault("subscribed_topic_names", ("t",))
        fields.setdefault("topic_partitions", ())
    fields.setdefault("topic_partitions", None)
    return conn.versions.new_request(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        group_id="g",
        member_id=member,
        member_epoch=epoch,
        **fields,
    )


def _owned(conn: BrokerConnection, topic_id: Any, *partitions: int) -> Any:
    module: Any = conn.versions.request_module(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    return (module.TopicPartitions(topic_id=topic_id, partitions=partitions),)


def _partitions(response: Any) -> set[int] | None:
    if response.assignment is None:
        return None
    return {int(p) for t in response.assignment.topic_partitions for p in t.partitions}


@pytest.mark.anyio
async def test_consumer_group_model_over_the_wire(anyio_backend: str) -> None:
    async with FakeBroker(session_timeout_ms=300) as broker:
        topic_id = broker.create_topic("t", 2)
        async with connect("127.0.0.1", int(broker.address().split(":")[1])) as conn:
            joined: Any = await conn.request(_heartbeat(conn, "a", 0))
            assert (joined.error_code, joined.member_epoch, _partitions(joined)) == (
                ErrorCode.none,
                1,
                {0, 1},
            )
            second: Any = await conn.request(_heartbeat(conn, "b", 0))
            # b's share is still held by a: nothing yet, at the new group epoch.
            assert (second.member_epoch, _partitions(second)) == (2, set())
            told: Any = await conn.request(_heartbeat(conn, "a", 1))
            assert told.member_epoch == 1  # not bumped before it revokes
            (kept,) = _partitions(told) or set()
            still: Any = await conn.request(_heartbeat(conn, "b", 2))
            assert _partitions(still) is None  # unchanged: still nothing
            released: Any = await conn.request(
                _heartbeat(conn, "a", 1, topic_partitions=_owned(conn, topic_id, kept))
            )
            assert released.member_epoch == 2
            given: Any = await conn.request(_heartbeat(conn, "b", 2))
            assert _partitions(given) == {1 - kept}

            fenced: Any = await conn.request(_heartbeat(conn, "b", 7))
            assert fenced.error_code == ErrorCode.fenced_member_epoch
            unknown: Any = await conn.request(_heartbeat(conn, "nobody", 2))
            assert unknown.error_code == ErrorCode.unknown_member_id

            group = broker.consumer_group("g")
            assert group is not None
            await broker.wait_until(lambda: not group.members)  # sessions expire
            gone: Any = await conn.request(_heartbeat(conn, "a", 2))
            assert gone.error_code == ErrorCode.unknown_member_id


@pytest.mark.anyio
async def test_interceptions_answer_drop_or_stay_silent(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        port = int(broker.address().split(":")[1])

        def metadata(conn: BrokerConnection) -> Any:
            return conn.versions.new_request(
                ApiKey.METADATA,
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )

        async def slow(_seen: SeenRequest) -> Verdict:
            await anyio.sleep(0)
            return Verdict.PASS

        passed = broker.intercept(ApiKey.METADATA, slow, times=None)
        refused = broker.intercept(
            ApiKey.METADATA, lambda _s: ErrorCode.cluster_authorization_failed
        )
        async with connect("127.0.0.1", port, request_timeout=0.2) as conn:
            answer: Any = await conn.request(metadata(conn))
            assert answer.error_code == ErrorCode.cluster_authorization_failed
            answer = await conn.request(metadata(conn))  # one-shot: used up
            assert answer.error_code == ErrorCode.none
            assert (len(passed.calls), len(refused.calls)) == (2, 1)

            broker.intercept(ApiKey.METADATA, lambda _s: Verdict.NO_ANSWER)
            with pytest.raises(RequestTimeoutError):
                await conn.request(metadata(conn))
            # The broker left it open (a drop is a KafkaConnectionError, below); the
            # client closes a connection whose request timed out (issue 10).
            assert conn.closed

        async with connect("127.0.0.1", port, request_timeout=0.2) as conn:
            broker.intercept(ApiKey.METADATA, lambda _s: Verdict.DROP)
            with pytest.raises(KafkaConnectionError):
                await conn.request(metadata(conn))
        assert len(broker.requests_of(ApiKey.METADATA)) == 4


def handed(plane: FakeDataPlane) -> list[Record]:
    """A take settled at once, as the consumers' front ends settle it."""
    batch = plane.consume(10, 0)
    return plane.deliver(batch, len(batch))


def test_data_plane_starts_where_told_and_hands_out_in_order() -> None:
    log = RecordLog()
    log.create("t", 2)
    for n in range(3):
        log.append("t", 0, f"a{n}".encode())
    log.append("t", 1, b"b0")

    plane = FakeDataPlane(log, auto_offset_reset="latest")
    plane.assign({T0: 1, T1: None})  # committed offset 1; no offset: latest
    assert plane.positions([T0, T1]) == {}  # nothing handed out yet
    batch = handed(plane)
    assert [(r.partition(), r.offset(), r.value()) for r in batch] == [(0, 1, b"a1"), (0, 2, b"a2")]
    assert plane.positions([T0, T1]) == {T0: 3}

    plane.pause([T0])
    log.append("t", 0, b"a3")
    log.append("t", 1, b"b1")
    assert [(r.partition(), r.offset()) for r in handed(plane)] == [(1, 1)]
    plane.resume([T0])
    plane.seek(T1, 0)
    assert sorted((r.partition(), r.offset()) for r in handed(plane)) == [
        (0, 3),
        (1, 0),
        (1, 1),
    ]
    plane.unassign([T0])
    assert plane.assigned == frozenset({T1})
    assert plane.positions([T0, T1]) == {T1: 2}

    with pytest.raises(DataPlaneError, match=r"auto\.offset\.reset=error"):
        FakeDataPlane(log, auto_offset_reset="error").assign({T0: None})


@pytest.mark.anyio
async def test_describe_names_the_topics_a_heartbeat_gives_by_id(anyio_backend: str) -> None:
    async with FakeBroker() as broker:
        topic_id = broker.create_topic("t", 2)
        async with connect("127.0.0.1", int(broker.address().split(":")[1])) as conn:
            joined: Any = await conn.request(_heartbeat(conn, "a", 0))
            (given,) = joined.assignment.topic_partitions
            assert (given.topic_id, set(given.partitions)) == (topic_id, {0, 1})
            described: Any = await conn.request(
                conn.versions.new_request(
                    ApiKey.CONSUMER_GROUP_DESCRIBE,
                    group_ids=("g",),
                    include_authorized_operations=False,
                )
            )
            (member,) = described.groups[0].members
            for assignment in (member.assignment, member.target_assignment):
                (topic,) = assignment.topic_partitions
                assert (topic.topic_id, topic.topic_name, set(topic.partitions)) == (
                    topic_id,
                    "t",
                    {0, 1},
                )


@pytest.mark.anyio
async def test_an_unclean_election_truncates_the_log_and_leader_epochs_answer_from_history(
    anyio_backend: str,
) -> None:
    async with FakeBroker() as broker:
        broker.create_topic("t", 1)
        for n in range(20):
            broker.produce("t", 0, f"old-{n}".encode())
        # Epoch 1 begins at the log end (20); the unclean election of epoch 2
        # makes a replica leader that holds offsets 0-11 of epoch 0 only, and
        # the next record gets offset 12 again.
        assert broker.elect_leader("t", 0) == 1
        assert broker.elect_leader("t", 0, truncate_to=12) == 2
        assert broker.records.end_offset(T0) == 12
        assert broker.produce("t", 0, b"new-0") == 12
        async with connect("127.0.0.1", int(broker.address().split(":")[1])) as conn:

            async def ask(epoch: int, current: int) -> EpochEnd:
                request = offset_for_leader_epoch.build(
                    conn.versions, {T0: EpochQuery(epoch, current)}
                )
                response = await conn.request(request)
                return offset_for_leader_epoch.parse(offset_for_leader_epoch.narrow(response))[T0]

            # For the new leader epoch 0 ends where epoch 2 begins (12); it never
            # saw epoch 1, so the largest epoch not above 1 is 0.
            assert await ask(0, 2) == EpochEnd(0, 12, 0)
            assert await ask(1, 2) == EpochEnd(0, 12, 0)
            assert await ask(2, 2) == EpochEnd(2, 13, 0)  # the current epoch: the log end
            assert await ask(0, 1) == EpochEnd(-1, -1, int(ErrorCode.fenced_leader_epoch))
            assert await ask(0, 3) == EpochEnd(-1, -1, int(ErrorCode.unknown_leader_epoch))
