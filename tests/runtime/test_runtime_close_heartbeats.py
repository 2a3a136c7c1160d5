"""A classic member heartbeats while close() runs a slow revoke callback, asyncio and trio.

The release before a LeaveGroup (the revocation commit, the revoke callback
where the application commits, the commits it started) may outlast
``session.timeout.ms``. A member silent meanwhile was expired by the
coordinator: the application's commit in its revoke callback was refused and
its records since the last commit were redelivered to the next owner. It
heartbeats through the release now, as the Java client's heartbeat thread does.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from kgroup import AsyncConsumer
from kgroup.dataplane import Record
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker, SeenRequest, Verdict
from kgroup.types import TopicPartition

from .helpers import consumer_config, drive, produce_each, tps

pytestmark = pytest.mark.anyio

SESSION_MS = 2_000
"""As the other classic runtime tests. The fake coordinator's session timer and
the member's own run on the real clock: successful heartbeats more than a
session apart expire the member. Broker and consumer share one event loop; on a
machine loaded with busy processes, 100 ms heartbeats were measured up to 0.4 s
apart, and a stalled loop (a starved process, a long GC pause) of just over a
1 s session failed the test the way a missing heartbeat would."""
CALLBACK_SECONDS = 5.0
"""How long the revoke callback works: two and a half sessions."""


class SlowCommittingListener:
    """A revoke callback that processes for a while, then commits what was consumed."""

    def __init__(self) -> None:
        self.consumer: AsyncConsumer | None = None
        self.revoked: list[frozenset[TopicPartition]] = []
        self.lost: list[frozenset[TopicPartition]] = []
        self.committed: dict[TopicPartition, int] | None = None
        self.error: BaseException | None = None

    async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        pass

    async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.revoked.append(partitions)
        if not partitions:
            return
        assert self.consumer is not None
        # The application's slow work on the partitions it gives up (the
        # scenario itself, not a synchronisation).
        await anyio.sleep(CALLBACK_SECONDS)
        try:
            self.committed = await self.consumer.commit()
        except Exception as exc:
            self.error = exc

    async def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.lost.append(partitions)


def _config(broker: FakeBroker, group_id: str) -> dict[str, Any]:
    return consumer_config(
        broker,
        group_id,
        **{
            "group.protocol": "classic",
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 100,
            # The only commit is the application's, in its revoke callback.
            "enable.auto.commit": False,
        },
    )


async def _consume_all_then_close(
    broker: FakeBroker, group_id: str, listener: SlowCommittingListener
) -> float:
    """Consume the 10 records of orders-0/1, close; returns when the close began (monotonic)."""
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)
    got: list[Record] = []
    async with AsyncConsumer(_config(broker, group_id), dataplane=broker.dataplane()) as consumer:
        listener.consumer = consumer
        consumer.subscribe(["orders"], listener=listener)
        await drive(consumer, until=lambda: len(got) == 10, sink={consumer: got})
        began = time.monotonic()  # the fake's clock (SeenRequest.at)
    # Leaving the block closed the consumer.
    return began


async def test_the_commit_of_a_revoke_callback_outlasting_the_session_is_accepted(
    broker: FakeBroker, group_id: str
) -> None:
    member_at_leave: list[bool] = []

    def still_a_member(seen: SeenRequest) -> None:
        group = broker.classic_group(group_id)
        member_ids = [m.member_id for m in seen.request.members]
        member_at_leave.append(group is not None and all(m in group.members for m in member_ids))

    broker.intercept(ApiKey.LEAVE_GROUP, still_a_member)
    listener = SlowCommittingListener()
    began = await _consume_all_then_close(broker, group_id, listener)

    assert listener.revoked[-1] == tps("orders", 0, 1)
    assert listener.error is None
    assert listener.committed == {tp: 5 for tp in tps("orders", 0, 1)}
    assert broker.committed(group_id) == {tp: 5 for tp in tps("orders", 0, 1)}
    assert listener.lost == []
    # Heartbeats went out all through the callback, and the LeaveGroup after
    # it found the member still in the group: a clean leave, not an expiry.
    during = [s for s in broker.requests_of(ApiKey.HEARTBEAT) if s.at >= began]
    assert len(during) >= CALLBACK_SECONDS / (SESSION_MS / 1000)
    assert member_at_leave == [True]
    group = broker.classic_group(group_id)
    assert group is not None
    assert group.members == {}


async def test_a_release_whose_heartbeats_go_unanswered_for_a_session_commits_nothing(
    broker: FakeBroker, group_id: str
) -> None:
    listener = SlowCommittingListener()
    silenced: list[bool] = []

    def silence_once_closing(seen: SeenRequest) -> Verdict:
        # Heartbeats of the release are never answered (the coordinator is
        # unreachable): the coordinator expires the member meanwhile.
        closing = bool(listener.revoked and listener.revoked[-1])
        silenced.append(closing)
        return Verdict.NO_ANSWER if closing else Verdict.PASS

    broker.intercept(ApiKey.HEARTBEAT, silence_once_closing, times=None)
    await _consume_all_then_close(broker, group_id, listener)

    assert any(silenced)
    group = broker.classic_group(group_id)
    assert group is not None
    # The fake coordinator expired the silent member (no LeaveGroup reached it).
    assert group.members == {}
    assert broker.requests_of(ApiKey.LEAVE_GROUP) == []
    # The member knew its session was over before the callback committed: the
    # partitions were lost, so the commit covered nothing (none was sent).
    assert listener.error is None
    assert listener.committed == {}
    assert broker.requests_of(ApiKey.OFFSET_COMMIT) == []
    assert broker.committed(group_id) == {}
