"""KIP-320 truncation through the runtime, with ``auto.offset.reset=error``.

The scene every test starts from (:func:`_truncated`): the group committed
offset 20 of ``orders-0`` at leader epoch 0; then an unclean leader election
made a replica holding offsets 0-9 of epoch 0 leader (epoch 1), and offsets
10-14 were written again, other records. ``orders-1`` is untouched (committed
at 3, records 3-4 new). A member starting from offset 20 asks the leader where
epoch 0 ends (10): the log was truncated below the committed offset.

With ``error`` kgroup must not choose where ``orders-0`` starts: poll raises
:class:`~kgroup.LogTruncationError` (again on every poll) until the application
seeks it; ``orders-1`` starts as usual. With ``earliest`` / ``latest`` the
member resumes at the divergence point (10) with a warning.

A consumer with ``assign()`` (no group membership) starting from the committed
offsets gets the same check and the same outcomes (the second half).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from kgroup import AsyncConsumer, Consumer, LogTruncationError
from kgroup.dataplane import Record
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker, FakeDataPlane, SeenRequest, Verdict
from kgroup.types import TopicPartition, Truncation

from .helpers import DEADLINE, Recorder, consumer_config, drive

pytestmark = pytest.mark.anyio

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
CONSUMER = {"group.protocol": "consumer"}
CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 2_000, "heartbeat.interval.ms": 100}
PROTOCOLS = pytest.mark.parametrize(
    "protocol", [{"group.protocol": "consumer"}, CLASSIC], ids=["consumer", "classic"]
)
CUT = Truncation(P0, committed=20, committed_epoch=0, resume_at=10, resume_epoch=0)
NEW = [f"new-{n}".encode() for n in range(5)]
"""The records written at offsets 10-14 of orders-0 after the truncation."""


async def _truncated(broker: FakeBroker, group_id: str, protocol: dict[str, Any]) -> None:
    """The scene of the module docs: committed {P0: 20, P1: 3} at epoch 0, P0 truncated at 10."""
    await _committed(broker, group_id, protocol)
    _truncate(broker)


async def _committed(broker: FakeBroker, group_id: str, protocol: dict[str, Any]) -> None:
    """The scene before the election: {P0: 20, P1: 3} committed at leader epoch 0."""
    broker.create_topic("orders", 2)
    for n in range(20):
        broker.produce("orders", 0, f"old-{n}".encode())
    for n in range(3):
        broker.produce("orders", 1, f"1-{n}".encode())
    config = consumer_config(broker, group_id, **protocol, **{"enable.auto.commit": False})
    got: dict[AsyncConsumer, list[Record]] = defaultdict(list)
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as first:
        first.subscribe(["orders"])
        await drive(first, until=lambda: len(got[first]) == 23, sink=got)
        assert await first.commit() == {P0: 20, P1: 3}
    assert broker.committed_leader_epochs(group_id) == {P0: 0, P1: 0}


def _truncate(broker: FakeBroker) -> None:
    """The unclean election of the module docs, and the records written after it."""
    assert broker.elect_leader("orders", 0, truncate_to=10) == 1
    for value in NEW:
        broker.produce("orders", 0, value)
    for n in range(3, 5):
        broker.produce("orders", 1, f"1-{n}".encode())


def _error_config(broker: FakeBroker, group_id: str, protocol: dict[str, Any]) -> dict[str, Any]:
    return consumer_config(broker, group_id, **protocol, **{"auto.offset.reset": "error"})


@contextlib.asynccontextmanager
async def _error_consumer(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> AsyncIterator[tuple[AsyncConsumer, FakeDataPlane]]:
    """The truncated scene, and a consumer with ``auto.offset.reset=error`` (not subscribed)."""
    await _truncated(broker, group_id, protocol)
    plane = broker.dataplane("error")
    async with AsyncConsumer(_error_config(broker, group_id, protocol), dataplane=plane) as c:
        yield c, plane


async def _poll_until_truncation(consumer: AsyncConsumer) -> LogTruncationError:
    with pytest.raises(LogTruncationError) as caught:
        await drive(consumer, until=lambda: False)
    return caught.value


async def _p0_waits_for_a_seek(c: AsyncConsumer, plane: FakeDataPlane) -> None:
    """Poll raises the truncation of P0, again on the next poll; P0 waits, P1 fetches."""
    error = await _poll_until_truncation(c)
    assert error.truncations == (CUT,)
    assert error.divergent_offsets == {P0: 10}
    assert error.partitions == {P0}
    assert "orders-0 was committed at offset 20 (leader epoch 0)" in str(error)
    assert "seek(orders-0, 10)" in str(error)
    # P0 is still owned (assigned) but does not fetch; P1 started normally.
    assert c.assignment() == {P0, P1}
    assert plane.assigned == {P1}
    # The next poll raises again: P0 still waits for the application.
    with pytest.raises(LogTruncationError) as again:
        await c.consume(100, 0.01)
    assert again.value.truncations == (CUT,)
    assert plane.assigned == {P1}
    assert _handed_out(plane, P0) == []


async def _reads_exactly_what_follows_the_truncation(
    c: AsyncConsumer, plane: FakeDataPlane
) -> None:
    """After a seek of P0 to 10: every record the log holds after the truncation, once."""
    await drive(
        c, until=lambda: len(_handed_out(plane, P0)) == 5 and len(_handed_out(plane, P1)) == 2
    )
    assert _handed_out(plane, P0) == list(zip(range(10, 15), NEW, strict=True))
    # P1 from its committed offset.
    assert _handed_out(plane, P1) == [(3, b"1-3"), (4, b"1-4")]
    assert await c.consume(100, 0.01) == []  # no error any more
    assert await c.commit() == {P0: 15, P1: 5}


def _handed_out(plane: FakeDataPlane, partition: TopicPartition) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of ``partition`` handed to the application."""
    found = []
    for r in plane.consumed:
        if r.partition() == partition.partition:
            offset, value = r.offset(), r.value()
            assert offset is not None
            assert isinstance(value, bytes)
            found.append((offset, value))
    return found


def _assigned_ever(plane: FakeDataPlane) -> frozenset[TopicPartition]:
    return frozenset(tp for c in plane.calls if c.method == "assign" for tp in c.partitions)


@PROTOCOLS
async def test_error_policy_raises_the_truncation_from_every_poll_and_starts_the_others(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    async with _error_consumer(broker, group_id, protocol) as (c, plane):
        c.subscribe(["orders"])
        await _p0_waits_for_a_seek(c, plane)
    # It never fetched, so the close committed nothing for it.
    assert broker.committed(group_id)[P0] == 20
    assert P0 not in _assigned_ever(plane)


@PROTOCOLS
async def test_a_seek_to_the_divergence_point_reads_exactly_the_records_after_the_truncation(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    async with _error_consumer(broker, group_id, protocol) as (c, plane):
        c.subscribe(["orders"])
        error = await _poll_until_truncation(c)
        for tp, offset in error.divergent_offsets.items():
            c.seek(tp, offset)
        await _reads_exactly_what_follows_the_truncation(c, plane)


@PROTOCOLS
async def test_a_seek_in_the_assigned_callback_starts_there_without_an_error(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    async with _error_consumer(broker, group_id, protocol) as (c, plane):

        class SeekOnAssign(Recorder):
            def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
                super().on_partitions_assigned(partitions)
                if P0 in partitions:
                    c.seek(P0, 12)  # the application chose: no offset kgroup did not

        c.subscribe(["orders"], listener=SeekOnAssign())
        await drive(c, until=lambda: len(_handed_out(plane, P0)) == 3)
        assert _handed_out(plane, P0) == list(zip(range(12, 15), NEW[2:], strict=True))


@PROTOCOLS
async def test_a_partition_waiting_for_a_seek_is_revoked_without_a_commit(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    listener = Recorder()
    async with _error_consumer(broker, group_id, protocol) as (c, plane):
        c.subscribe(["orders"], listener=listener)
        await _poll_until_truncation(c)
        c.unsubscribe()
        # Polls raise until the member has stopped P0 (the unsubscribe reaches it
        # on the loop); polling on after the error must let the loop run.
        with anyio.fail_after(DEADLINE):
            while not listener.of("revoked"):
                with contextlib.suppress(LogTruncationError):
                    await c.consume(100, 0.01)
        assert listener.of("revoked") == [frozenset({P0, P1})]
        assert await c.consume(100, 0.01) == []
        assert c.assignment() == frozenset()
    # P0 never fetched: its committed offset stays; P1's position was committed.
    assert broker.committed(group_id) == {P0: 20, P1: 5}
    assert P0 not in _assigned_ever(plane)
    # The next owner, with earliest, resumes P0 at the divergence point.
    other = broker.dataplane()
    earliest = consumer_config(broker, group_id, **protocol)
    async with AsyncConsumer(earliest, dataplane=other) as next_owner:
        next_owner.subscribe(["orders"])
        await drive(next_owner, until=lambda: len(_handed_out(other, P0)) == 5)
        assert _handed_out(other, P0) == list(zip(range(10, 15), NEW, strict=True))
        assert _handed_out(other, P1) == []


async def test_close_while_a_partition_waits_for_a_seek(broker: FakeBroker, group_id: str) -> None:
    protocol = {"group.protocol": "consumer"}
    listener = Recorder()
    async with _error_consumer(broker, group_id, protocol) as (c, plane):
        c.subscribe(["orders"], listener=listener)
        await _poll_until_truncation(c)
        # The context exit closes it: no error from the waiting partition.
    assert listener.of("revoked") == [frozenset({P0, P1})]
    assert broker.committed(group_id)[P0] == 20
    assert P0 not in _assigned_ever(plane)


@PROTOCOLS
async def test_earliest_resumes_at_the_divergence_point_with_a_warning(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    await _truncated(broker, group_id, protocol)
    plane = broker.dataplane()
    config = consumer_config(broker, group_id, **protocol, **{"auto.offset.reset": "earliest"})
    with caplog.at_level(logging.WARNING, logger="kgroup.runtime"):
        async with AsyncConsumer(config, dataplane=plane) as c:
            c.subscribe(["orders"])
            await drive(c, until=lambda: len(_handed_out(plane, P0)) == 5)
    assert _handed_out(plane, P0) == list(zip(range(10, 15), NEW, strict=True))
    assert "the log was truncated" in caplog.text
    assert "resuming at 10" in caplog.text


MAX_AGE_MS = 50


def _truncate_before_the_offset_fetch(broker: FakeBroker) -> None:
    """The election happens after the member described ``orders``, before it reads offsets.

    The OffsetFetch answer comes ``2 * MAX_AGE_MS`` later: the member's metadata is
    then older than a ``metadata.max.age.ms`` of ``MAX_AGE_MS``.
    """

    async def elect(_seen: SeenRequest) -> Verdict:
        _truncate(broker)
        await anyio.sleep(2 * MAX_AGE_MS / 1000)
        return Verdict.PASS

    broker.intercept(ApiKey.OFFSET_FETCH, elect)


@PROTOCOLS
async def test_a_member_whose_metadata_is_older_than_its_max_age_describes_the_topic_again(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    """Metadata older than ``metadata.max.age.ms`` must not hide a truncation."""
    await _committed(broker, group_id, protocol)
    _truncate_before_the_offset_fetch(broker)
    config = _error_config(broker, group_id, protocol) | {"metadata.max.age.ms": MAX_AGE_MS}
    plane = broker.dataplane("error")
    async with AsyncConsumer(config, dataplane=plane) as c:
        c.subscribe(["orders"])
        error = await _poll_until_truncation(c)
        assert error.truncations == (CUT,)
        assert plane.assigned == {P1}


@PROTOCOLS
async def test_a_member_whose_metadata_is_fresh_asks_for_none_before_starting(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    """The check relies on metadata younger than ``metadata.max.age.ms`` (Java's bound too)."""
    await _committed(broker, group_id, protocol)
    config = _error_config(broker, group_id, protocol)
    plane = broker.dataplane("error")
    async with AsyncConsumer(config, dataplane=plane) as c:
        c.subscribe(["orders"])
        await drive(c, until=lambda: plane.assigned == {P0, P1})
        fetched = broker.requests_of(ApiKey.OFFSET_FETCH)[-1].at
        assert [r for r in broker.requests_of(ApiKey.METADATA) if r.at > fetched] == []
        assert broker.requests_of(ApiKey.OFFSET_FOR_LEADER_EPOCH) == []


def _consume_until(consumer: Consumer, deadline: float) -> None:
    while time.monotonic() < deadline:
        consumer.consume(100, 0.01)


@pytest.mark.parametrize("start", ["subscribe", "assign"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_blocking_consumer_raises_the_truncation_and_starts_where_seeked(
    backend: str, start: str
) -> None:
    """A member (subscribe) and a manual consumer (assign) alike."""
    group = f"blocking-truncation-{start}"
    with FakeBroker().running_in_thread(backend) as broker:
        anyio.run(_truncated, broker, group, CONSUMER, backend=backend)
        plane = broker.dataplane("error")
        config = _error_config(broker, group, CONSUMER)
        with Consumer(config, backend=backend, dataplane=plane) as c:
            if start == "subscribe":
                c.subscribe(["orders"])
            else:
                c.assign([P0, P1])
            deadline = time.monotonic() + DEADLINE
            with pytest.raises(LogTruncationError) as caught:
                _consume_until(c, deadline)
            assert caught.value.truncations == (CUT,)
            with pytest.raises(LogTruncationError):
                c.poll(0.01)  # again, until the seek
            c.seek(P0, 12)
            while len(_handed_out(plane, P0)) < 3 and time.monotonic() < deadline:
                c.consume(100, 0.01)
            assert _handed_out(plane, P0) == list(zip(range(12, 15), NEW[2:], strict=True))


# ----------------------------------------------------------- manual assign()
#
# A consumer with assign() starts from the group's committed offsets too (no
# membership, a plain OffsetFetch): the same check applies, as the Java client
# validates manually assigned positions like subscribed ones. Offsets the
# application gives assign() are its choice, as a seek, and are not checked.


@pytest.mark.parametrize("reset", ["earliest", "latest"])
async def test_manual_assign_resumes_at_the_divergence_point_with_a_warning(
    broker: FakeBroker, group_id: str, reset: str, caplog: pytest.LogCaptureFixture
) -> None:
    await _truncated(broker, group_id, CONSUMER)
    plane = broker.dataplane(reset)
    config = consumer_config(broker, group_id, **{"auto.offset.reset": reset})
    with caplog.at_level(logging.WARNING, logger="kgroup.runtime"):
        async with AsyncConsumer(config, dataplane=plane) as c:
            c.assign([P0, P1])
            await drive(
                c,
                until=lambda: len(_handed_out(plane, P0)) == 5 and len(_handed_out(plane, P1)) == 2,
            )
            assert await c.consume(100, 0.01) == []
            assert await c.commit() == {P0: 15, P1: 5}
    # Neither replayed (earliest) nor skipped (latest): the records after the cut, once.
    assert _handed_out(plane, P0) == list(zip(range(10, 15), NEW, strict=True))
    assert _handed_out(plane, P1) == [(3, b"1-3"), (4, b"1-4")]
    assert "orders-0 was committed at offset 20 (leader epoch 0)" in caplog.text
    assert "resuming at 10" in caplog.text


@PROTOCOLS
async def test_manual_assign_with_error_raises_until_a_seek_starts_it_there(
    broker: FakeBroker, group_id: str, protocol: dict[str, Any]
) -> None:
    async with _error_consumer(broker, group_id, protocol) as (c, plane):
        c.assign([P0, P1])
        await _p0_waits_for_a_seek(c, plane)
        c.seek(P0, 10)
        await _reads_exactly_what_follows_the_truncation(c, plane)


async def test_an_offset_given_to_assign_is_not_checked(broker: FakeBroker, group_id: str) -> None:
    async with _error_consumer(broker, group_id, CONSUMER) as (c, plane):
        # P1 is truncated too now (committed 3, its log cut at 1): its committed
        # offset is checked, P0's truncated one is not used at all.
        broker.elect_leader("orders", 1, truncate_to=1)
        c.assign({P0: 12, P1: None})
        error = await _poll_until_truncation(c)
        assert error.truncations == (
            Truncation(P1, committed=3, committed_epoch=0, resume_at=1, resume_epoch=0),
        )
        assert plane.assigned == {P0}
        c.seek(P1, 1)
        await drive(c, until=lambda: len(_handed_out(plane, P0)) == 3)
        # P0 started where the application said, though its committed offset is cut.
        assert _handed_out(plane, P0) == list(zip(range(12, 15), NEW[2:], strict=True))
        assert _handed_out(plane, P1) == []


@pytest.mark.parametrize("call", ["unassign", "incremental_unassign", "assign"])
async def test_unassigning_a_partition_waiting_for_a_seek_ends_the_error(
    broker: FakeBroker, group_id: str, call: str
) -> None:
    async with _error_consumer(broker, group_id, CONSUMER) as (c, plane):
        c.assign([P0, P1])
        await _poll_until_truncation(c)
        left: frozenset[TopicPartition] = frozenset({P1})
        if call == "unassign":
            c.unassign()
            left = frozenset()
        elif call == "incremental_unassign":
            c.incremental_unassign([P0])
        else:
            c.assign([P1])  # replaces the assignment
        # The unassignment reaches the loop before the call returns: no error any more.
        # P1's records may come (the truncation can be raised before P1's first
        # batch was handed out), nothing of P0.
        batch = await c.consume(100, 0.01)
        assert {(m.topic(), m.partition()) for m in batch} <= {(p.topic, p.partition) for p in left}
        assert c.assignment() == left
        await drive(c, until=lambda: plane.assigned == left)
        c.incremental_assign([P0])  # assigned again: checked again
        again = await _poll_until_truncation(c)
        assert again.truncations == (CUT,)
    assert P0 not in _assigned_ever(plane)
    assert broker.committed(group_id)[P0] == 20


async def test_close_while_a_manual_partition_waits_for_a_seek(
    broker: FakeBroker, group_id: str
) -> None:
    async with _error_consumer(broker, group_id, CONSUMER) as (c, plane):
        c.assign([P0, P1])
        await _poll_until_truncation(c)
        with anyio.fail_after(DEADLINE):
            await c.close()
    # The close committed P1's progress (enable.auto.commit; what the polls before
    # the error handed out, if any), nothing for P0.
    assert broker.committed(group_id) == {P0: 20, P1: 3 + len(_handed_out(plane, P1))}
    assert P0 not in _assigned_ever(plane)


async def test_close_while_the_leader_is_asked_does_not_wait_for_its_answer(
    broker: FakeBroker, group_id: str
) -> None:
    await _truncated(broker, group_id, CONSUMER)

    def silent(_seen: SeenRequest) -> Verdict:
        return Verdict.NO_ANSWER

    broker.intercept(ApiKey.OFFSET_FOR_LEADER_EPOCH, silent, times=None)
    plane = broker.dataplane("error")
    config = {**_error_config(broker, group_id, CONSUMER), "request.timeout.ms": 30_000}
    async with AsyncConsumer(config, dataplane=plane) as c:
        c.assign([P0, P1])
        await broker.wait_until(lambda: bool(broker.requests_of(ApiKey.OFFSET_FOR_LEADER_EPOCH)))
        # Well within the check's own limit (5 s) for a silent leader.
        with anyio.fail_after(2.0):
            await c.close()
    assert _assigned_ever(plane) == frozenset()
    assert broker.committed(group_id) == {P0: 20, P1: 3}


async def test_a_manual_consumer_checks_against_the_leaders_of_now(
    broker: FakeBroker, group_id: str
) -> None:
    """Metadata learned before the election must not hide the truncation."""
    await _committed(broker, group_id, CONSUMER)
    plane = broker.dataplane("error")
    async with AsyncConsumer(_error_config(broker, group_id, CONSUMER), dataplane=plane) as c:
        c.assign([P1])  # learns the metadata of "orders" (leader epoch 0)
        await drive(c, until=lambda: plane.assigned == {P1})
        _truncate(broker)
        c.incremental_assign([P0])
        error = await _poll_until_truncation(c)
        assert error.truncations == (CUT,)
        assert plane.assigned == {P1}
