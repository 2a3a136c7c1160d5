"""The sans-IO share runtime core: what it asks to send, given what happened (time passed in)."""

from __future__ import annotations

import uuid
from types import MappingProxyType
from typing import TypeVar

import pytest
from test_share_records import Rec, batch

from kgroup.dataplane.share.acknowledgements import AcknowledgementBatch, AcknowledgeType
from kgroup.dataplane.share.inflight import AcknowledgementMode
from kgroup.dataplane.share.session import CLOSE_EPOCH, FetchLimits
from kgroup.error_codes import ErrorCode
from kgroup.errors import UnacknowledgedRecordsError
from kgroup.membership.share import (
    SendShareHeartbeat,
    ShareHeartbeatResponse,
    ShareHeartbeatResponseReceived,
)
from kgroup.protocol.cluster import ClusterMetadata, PartitionInfo, TopicInfo
from kgroup.protocol.requests.share_acknowledge import (
    ShareAcknowledgePartition,
    ShareAcknowledgeResult,
)
from kgroup.protocol.requests.share_fetch import (
    AcquiredRecords,
    CurrentLeader,
    ShareFetchPartition,
    ShareFetchResult,
)
from kgroup.share.core import (
    CoreAction,
    FetchMetadata,
    SendShareAcknowledge,
    SendShareFetch,
    ShareCore,
    ShareCoreConfig,
)
from kgroup.types import TopicIdPartition, TopicPartition

_A = TypeVar("_A")
ORDERS = uuid.UUID(int=7)
TIP = TopicIdPartition(ORDERS, 0)
TP = TopicPartition("orders", 0)
LEADER = 1
NO_LEADER = CurrentLeader(-1, -1)


def cluster(leader: int = LEADER) -> ClusterMetadata:
    partition = PartitionInfo(0, leader, 0, (leader,), (leader,))
    topic = TopicInfo("orders", ORDERS, MappingProxyType({0: partition}))
    return ClusterMetadata(topics=MappingProxyType({"orders": topic}))


def only(actions: list[CoreAction], kind: type[_A]) -> list[_A]:
    return [a for a in actions if isinstance(a, kind)]


def heartbeat(core: ShareCore, now: float, partitions: list[int], epoch: int = 1) -> None:
    """Answer the heartbeat the core asked for with ``partitions`` of orders."""
    due = core.next_deadline()
    if due is not None and due <= now:
        core.tick(now)
    sent = only(core.poll(now), SendShareHeartbeat)
    assert len(sent) == 1
    response = ShareHeartbeatResponse(
        member_id=core.member_id,
        member_epoch=epoch,
        heartbeat_interval_ms=5000,
        assignment={ORDERS: partitions},
    )
    core.member_event(ShareHeartbeatResponseReceived(sent[0].seq, response), now)


def joined(
    mode: AcknowledgementMode = AcknowledgementMode.IMPLICIT, buffer_bytes: int = 1 << 20
) -> ShareCore:
    """A core assigned orders[0], its leader known; the first fetch not yet asked for."""
    core = ShareCore(
        ShareCoreConfig(
            "queue", mode=mode, limits=FetchLimits(max_wait_ms=100), buffer_bytes=buffer_bytes
        ),
        "m-1",
    )
    core.subscribe(["orders"], 0.0)
    heartbeat(core, 0.0, [0])
    asked = only(core.poll(0.0), FetchMetadata)
    assert asked
    core.on_metadata(cluster(), 0.0)
    assert core.assignment == {TP}
    return core


def fetch_answer(
    first: int, count: int, *, error: int = 0, delivery: int = 1, lock_ms: int = 30_000
) -> ShareFetchResult:
    records = batch(first, [Rec(i, b"k", b"v%d" % (first + i)) for i in range(count)])
    acquired = (AcquiredRecords(first, first + count - 1, delivery),) if count else ()
    part = ShareFetchPartition(TIP, 0, None, 0, None, NO_LEADER, records, acquired)
    return ShareFetchResult(error, None, lock_ms, () if error else (part,), {})


def ack_answer(error: int = 0) -> ShareAcknowledgeResult:
    return ShareAcknowledgeResult(
        0, None, (ShareAcknowledgePartition(TIP, error, None, NO_LEADER),), {}
    )


def the_fetch(actions: list[CoreAction]) -> SendShareFetch:
    fetches = only(actions, SendShareFetch)
    assert len(fetches) == 1, actions
    return fetches[0]


def test_a_fetch_goes_to_the_leader_once_the_assignment_and_metadata_are_known() -> None:
    core = joined()
    fetch = the_fetch(core.poll(0.0))
    assert fetch.plan.node == LEADER
    assert fetch.plan.partitions == (TIP,)
    assert fetch.plan.epoch == 0
    assert core.poll(0.1) == []  # one request in flight per session


def test_records_fetched_are_consumed_with_their_lock_deadline() -> None:
    core = joined()
    core.poll(0.0)
    core.on_fetch_answered(LEADER, fetch_answer(0, 3, lock_ms=15_000), 2.0)
    records = core.consume(10, 2.0)
    assert [r.offset() for r in records] == [0, 1, 2]
    assert core.inflight.expiring(2.0, 15.0) == records
    assert core.inflight.expiring(2.0, 14.9) == ()


def test_acknowledgements_go_ahead_of_the_next_fetch_in_a_share_acknowledge() -> None:
    core = joined()
    core.poll(0.0)
    core.on_fetch_answered(LEADER, fetch_answer(0, 3), 1.0)
    core.consume(10, 1.0)
    core.consume(10, 1.0)  # implicit: accepts the first batch
    actions = core.poll(1.0)
    assert only(actions, SendShareFetch) == []
    (ack,) = only(actions, SendShareAcknowledge)
    assert ack.plan.epoch == 1
    assert dict(ack.plan.acknowledgements) == {
        TIP: (AcknowledgementBatch(0, 2, (AcknowledgeType.ACCEPT,)),)
    }
    core.on_acknowledge_answered(LEADER, ack_answer())
    # Answered: the next fetch carries nothing.
    fetch = the_fetch(core.poll(1.1))
    assert dict(fetch.plan.acknowledgements) == {}
    assert fetch.plan.epoch == 2
    outcomes = core.take_outcomes()
    assert [(o.partition, sorted(o.offsets), o.error_code) for o in outcomes] == [
        (TIP, [0, 1, 2], 0)
    ]
    assert core.metrics()["records_acknowledged"] == {"ACCEPT": 3}


def test_no_fetch_starts_while_the_records_held_fill_the_buffer() -> None:
    core = joined(buffer_bytes=1)
    core.poll(0.0)
    core.on_fetch_answered(LEADER, fetch_answer(0, 2), 1.0)
    assert only(core.poll(1.0), SendShareFetch) == []
    core.consume(10, 1.0)
    assert only(core.poll(1.0), SendShareFetch) == []  # handed out, not yet accepted
    core.consume(10, 1.0)  # accepted: room again (after the acknowledgement goes)
    core.on_acknowledge_answered(LEADER, the_ack(core.poll(1.0)))
    assert only(core.poll(1.0), SendShareFetch)


def the_ack(actions: list[CoreAction]) -> ShareAcknowledgeResult:
    assert only(actions, SendShareAcknowledge)
    return ack_answer()


def test_partitions_leaving_the_assignment_are_forgotten() -> None:
    core = joined()
    core.poll(0.0)
    core.on_fetch_answered(LEADER, fetch_answer(0, 0), 1.0)
    heartbeat(core, 5.0, [], epoch=2)  # its poll also sent the next fetch
    assert core.assignment == frozenset()
    core.on_fetch_answered(LEADER, fetch_answer(0, 0), 5.1)
    fetch = the_fetch(core.poll(5.1))
    assert fetch.plan.partitions == ()
    assert fetch.plan.forgotten == (TIP,)


def test_a_session_error_reopens_the_session() -> None:
    core = joined()
    core.poll(0.0)
    core.on_fetch_answered(LEADER, fetch_answer(0, 0), 1.0)
    assert the_fetch(core.poll(1.0)).plan.epoch == 1
    core.on_fetch_answered(LEADER, fetch_answer(0, 0, error=ErrorCode.SHARE_SESSION_NOT_FOUND), 2.0)
    reopened = the_fetch(core.poll(2.0))
    assert reopened.plan.epoch == 0
    assert reopened.plan.partitions == (TIP,)


def test_a_request_without_answer_owes_its_acknowledgements_again() -> None:
    core = joined()
    core.poll(0.0)
    core.on_fetch_answered(LEADER, fetch_answer(0, 2), 1.0)
    core.consume(10, 1.0)
    core.commit()
    (ack,) = only(core.poll(1.0), SendShareAcknowledge)
    assert not core.committed()
    core.on_request_failed(LEADER)
    assert len(core.inflight.pending) == 2
    # The leader is looked up again, the session reopened by a fetch, then they go.
    assert only(core.poll(1.0), FetchMetadata)
    core.on_metadata(cluster(), 1.0)
    reopen = the_fetch(core.poll(1.0))
    assert reopen.plan.epoch == 0
    assert dict(reopen.plan.acknowledgements) == {}
    core.on_fetch_answered(LEADER, fetch_answer(2, 0), 1.5)
    (again,) = only(core.poll(1.5), SendShareAcknowledge)
    assert dict(again.plan.acknowledgements) == dict(ack.plan.acknowledgements)
    core.on_acknowledge_answered(LEADER, ack_answer())
    assert core.committed()


def test_explicit_mode_refuses_a_consume_while_records_are_unacknowledged() -> None:
    core = joined(AcknowledgementMode.EXPLICIT)
    core.poll(0.0)
    core.on_fetch_answered(LEADER, fetch_answer(0, 2), 1.0)
    first, second = core.consume(10, 1.0)
    core.acknowledge(first, AcknowledgeType.RELEASE)
    with pytest.raises(UnacknowledgedRecordsError):
        core.consume(10, 1.0)
    core.acknowledge(second, AcknowledgeType.REJECT)
    assert core.consume(10, 1.0) == ()
    (ack,) = only(core.poll(1.0), SendShareAcknowledge)
    assert dict(ack.plan.acknowledgements) == {
        TIP: (AcknowledgementBatch(0, 1, (AcknowledgeType.RELEASE, AcknowledgeType.REJECT)),)
    }


def test_close_accepts_the_last_batch_closes_the_session_then_leaves() -> None:
    core = joined()
    core.poll(0.0)
    core.on_fetch_answered(LEADER, fetch_answer(0, 2), 1.0)
    core.consume(10, 1.0)
    core.close(deadline=31.0, now=1.0)
    actions = core.poll(1.0)
    assert only(actions, SendShareHeartbeat) == []  # the leave waits for the session
    (close,) = only(actions, SendShareAcknowledge)
    assert close.plan.epoch == CLOSE_EPOCH
    assert dict(close.plan.acknowledgements) == {
        TIP: (AcknowledgementBatch(0, 1, (AcknowledgeType.ACCEPT,)),)
    }
    core.on_acknowledge_answered(LEADER, ack_answer())
    (leave,) = only(core.poll(1.2), SendShareHeartbeat)
    assert leave.leave
    assert leave.request.member_epoch == -1
    assert not core.closed
    core.member_event(
        ShareHeartbeatResponseReceived(
            leave.seq, ShareHeartbeatResponse(member_id=core.member_id, member_epoch=-1)
        ),
        1.3,
    )
    assert core.closed


def test_close_during_a_fetch_closes_the_session_once_it_is_answered() -> None:
    core = joined()
    core.poll(0.0)
    core.close(deadline=31.0, now=0.5)
    assert only(core.poll(0.5), SendShareAcknowledge) == []  # the fetch is in flight
    core.on_fetch_answered(LEADER, fetch_answer(0, 2), 0.6)
    (close,) = only(core.poll(0.6), SendShareAcknowledge)
    # Records that arrived after the close are not accepted: the broker releases them.
    assert close.plan.epoch == CLOSE_EPOCH
    assert dict(close.plan.acknowledgements) == {}


def test_the_members_fatal_error_is_raised_from_consume() -> None:
    core = ShareCore(ShareCoreConfig("queue"), "m-1")
    core.subscribe(["orders"], 0.0)
    (sent,) = only(core.poll(0.0), SendShareHeartbeat)
    denied = ShareHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    core.member_event(ShareHeartbeatResponseReceived(sent.seq, denied), 0.1)
    with pytest.raises(Exception, match="GROUP_AUTHORIZATION_FAILED|authoriz"):
        core.consume(1, 0.2)


def test_acknowledgements_no_request_can_carry_are_reported_failed_not_kept_forever() -> None:
    core = joined()
    core.poll(0.0)
    core.on_fetch_answered(LEADER, fetch_answer(0, 2), 1.0)
    core.consume(10, 1.0)
    # The session is lost (no answer) and the partition leaves the assignment.
    core.poll(1.0)  # the acknowledgement goes ...
    core.on_request_failed(LEADER)  # ... and is owed again on a session now gone
    heartbeat(core, 5.0, [], epoch=2)
    core.commit()
    core.poll(5.0)
    assert core.committed()
    (lost,) = core.take_outcomes()
    assert sorted(lost.offsets) == [0, 1]
    assert not lost.succeeded


def test_no_fetch_while_fetched_records_wait_to_be_handed_out() -> None:
    core = joined(AcknowledgementMode.EXPLICIT)
    core.poll(0.0)
    core.on_fetch_answered(LEADER, fetch_answer(0, 4), 1.0)
    assert core.poll(1.0) == []  # 4 acquired records wait: the broker's lock cap
    first = core.consume(3, 1.0)
    assert core.poll(1.0) == []  # one still waits
    for record in first:
        core.acknowledge(record, AcknowledgeType.ACCEPT)
    (last,) = core.consume(3, 1.0)
    # Every record handed out: the acknowledgements go first, then the next fetch.
    assert only(core.poll(1.0), SendShareAcknowledge)
    core.on_acknowledge_answered(LEADER, ack_answer())
    assert the_fetch(core.poll(1.1)).plan.epoch == 2  # the same session, fetching on
    assert last.offset() == 3
