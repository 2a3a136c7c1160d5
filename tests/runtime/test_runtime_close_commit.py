"""The close-time revocation commit is not lost (issue 10), asyncio and trio.

- After a network partition heals, the connection a member's close-time commit
  goes out on may be a stale one: the commit times out or the connection drops.
  It is retried on a fresh connection until the close deadline, as Java's
  ``commitOffsetsSync`` retries until its timer expires (both protocols).
- A classic member closing while a join round completes (its peer just left)
  finishes the round first, so its commit carries a generation the coordinator
  accepts.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from kgroup import AsyncConsumer
from kgroup.dataplane import Record
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker, Verdict
from kgroup.types import TopicPartition

from .helpers import DEADLINE, Recorder, consumer_config, drive, produce_each, tps

pytestmark = pytest.mark.anyio

CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 2_000, "heartbeat.interval.ms": 100}
PROTOCOLS = pytest.mark.parametrize(
    "protocol", [{"group.protocol": "consumer"}, CLASSIC], ids=["consumer", "classic"]
)
FAILURES = pytest.mark.parametrize(
    "failure", [Verdict.NO_ANSWER, Verdict.DROP], ids=["timeout", "disconnect"]
)


@PROTOCOLS
@FAILURES
async def test_close_commit_failing_on_its_connection_is_retried_on_a_fresh_one(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any], failure: Verdict
) -> None:
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)
    config = consumer_config(
        broker,
        group_id,
        **protocol,
        # Only the close commits: no interval auto-commit within the test.
        **{"auto.commit.interval.ms": 600_000, "request.timeout.ms": 300},
    )
    got: list[Record] = []
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        await drive(consumer, until=lambda: len(got) == 10, sink={consumer: got})
        assert broker.committed(group_id) == {}
        # The first commit (the close's, before the revocation) is lost on its connection.
        lost = broker.intercept(ApiKey.OFFSET_COMMIT, lambda _seen: failure)
    # Leaving the block closed the consumer.

    assert len(lost.calls) == 1
    commits = broker.requests_of(ApiKey.OFFSET_COMMIT)
    assert len(commits) == 2
    # The retry went out on another connection than the one that failed.
    assert commits[1].connection_id != commits[0].connection_id
    assert broker.committed(group_id) == {tp: 5 for tp in tps("orders", 0, 1)}


async def test_classic_member_closing_during_the_rebalance_its_peer_left_commits_its_partitions(
    broker: FakeBroker, group_id: str
) -> None:
    # The fault suite's flake (issue 10): the last member stops right after the
    # other one left. Its close arrives while it is rejoining; abandoning that
    # round left its revocation commit refused (REBALANCE_IN_PROGRESS, then
    # UNKNOWN_MEMBER_ID once its session expired), so its records since the
    # last commit were redelivered.
    broker.create_topic("orders", 4)
    produce_each(broker, "orders", 4, 5)
    config = consumer_config(
        broker,
        group_id,
        **CLASSIC,
        **{
            "partition.assignment.strategy": "cooperative-sticky",
            "auto.commit.interval.ms": 600_000,
        },
    )
    got: dict[AsyncConsumer, list[Record]] = {}
    async with (
        AsyncConsumer(config, dataplane=broker.dataplane()) as a,
        AsyncConsumer(config, dataplane=broker.dataplane()) as b,
    ):
        got[a], got[b] = [], []
        a.subscribe(["orders"])
        b.subscribe(["orders"])
        await drive(
            a,
            b,
            until=lambda: sum(map(len, got.values())) == 20 and len(b.assignment()) == 2,
            sink=got,
        )
        joins = len(broker.requests_of(ApiKey.JOIN_GROUP))
        await a.close()
        # b hears of the rebalance in a heartbeat and rejoins; it closes as soon as
        # its JoinGroup is out (answered at once: b is alone now).
        await drive(b, until=lambda: len(broker.requests_of(ApiKey.JOIN_GROUP)) > joins)
        await b.close()

    assert broker.committed(group_id) == {tp: 5 for tp in tps("orders", 0, 1, 2, 3)}
    last_sync = broker.requests_of(ApiKey.SYNC_GROUP)[-1].request
    last_commit = broker.requests_of(ApiKey.OFFSET_COMMIT)[-1].request
    assert last_commit.generation_id_or_member_epoch == last_sync.generation_id


@PROTOCOLS
async def test_close_ending_before_the_partitions_were_handed_back_tells_the_listener_they_are_lost(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    # Found on a real broker stopped before close(5): the commit before the
    # revocation waited until the close deadline, the member gave up, and the
    # listener, told of the partitions, never heard they were gone (the Java
    # client runs the callbacks on close whatever the coordinator answers).
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)
    config = consumer_config(broker, group_id, **protocol, **{"auto.commit.interval.ms": 600_000})
    listener = Recorder()
    got: list[Record] = []
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"], listener)
        await drive(consumer, until=lambda: len(got) == 10, sink={consumer: got})
        assert listener.owned() == tps("orders", 0, 1)
        silent = broker.intercept(ApiKey.OFFSET_COMMIT, lambda _seen: Verdict.NO_ANSWER, times=None)
        with anyio.fail_after(DEADLINE):
            await consumer.close(0.5)

    assert len(silent.calls) >= 1
    assert broker.committed(group_id) == {}
    assert listener.events[-1] == ("lost", tps("orders", 0, 1))
    assert listener.owned() == frozenset()


class _NoRevokeMethod:
    """A listener with assigned and lost methods only (missing methods do nothing)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append(("assigned", partitions))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append(("lost", partitions))


@PROTOCOLS
async def test_a_clean_close_is_not_reported_as_lost_to_a_listener_without_a_revoke_method(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # The revocation has no method to run, so the front end never saw it and
    # took the partitions as still held: every clean close called
    # on_partitions_lost and warned that the coordinator did not answer.
    broker.create_topic("orders", 2)
    produce_each(broker, "orders", 2, 5)
    config = consumer_config(broker, group_id, **protocol)
    listener = _NoRevokeMethod()
    got: list[Record] = []
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"], listener)
        await drive(consumer, until=lambda: len(got) == 10, sink={consumer: got})
        with anyio.fail_after(DEADLINE):
            await consumer.close()

    assert broker.committed(group_id) == {
        TopicPartition("orders", 0): 5,
        TopicPartition("orders", 1): 5,
    }
    assert listener.events == [("assigned", tps("orders", 0, 1))]
    assert not [r for r in caplog.records if "close ended before" in r.getMessage()]
