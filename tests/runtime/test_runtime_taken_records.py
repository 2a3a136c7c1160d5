"""A batch taken from the data plane counts as not handed out until it is settled.

The blocking consumer's event loop runs in a thread of its own and reads
positions whenever the group moves: a partition revoked while the
application's thread holds a batch it just took (before deserializing it,
before it can put a failing record back) used to be stopped at a position
past the batch, and the revocation's commit went past records that never
reached the application. Its next owner then started after them: lost.

Here a second member joins at exactly that moment (the first member's take
waits until its loop stopped the revoked partition), and the deserializer
then refuses the batch's first record, so the whole batch goes back.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import anyio
import pytest
from confluent_kafka.serialization import SerializationContext

from kgroup import AsyncConsumer, Consumer
from kgroup.dataplane import Record
from kgroup.errors import DeserializationError
from kgroup.runtime import DataPlaneInterface
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

from .helpers import DEADLINE, consumer_config

PER_PARTITION = 20
ALL = {(p, o) for p in (0, 1) for o in range(PER_PARTITION)}


class _ArmedDataPlane:
    """The fake data plane; its armed take runs ``on_take`` with the batch in hand."""

    def __init__(self, inner: DataPlaneInterface) -> None:
        self._inner = inner
        self.on_take: Any = None
        self.before_wait: Any = None
        """Called (once) at the start of the next take that may wait, armed or not."""
        self.taken: list[tuple[int, int]] = []
        self.stopped = threading.Event()
        self.unassigned: set[TopicPartition] = set()

    def consume(self, max_records: int, timeout: float) -> list[Record]:
        if timeout > 0 and self.before_wait is not None:
            before_wait, self.before_wait = self.before_wait, None
            before_wait()
        batch = self._inner.consume(max_records, timeout)
        if batch and self.on_take is not None:
            on_take, self.on_take = self.on_take, None
            self.taken = [(r.partition() or 0, r.offset() or 0) for r in batch]
            on_take()
        return batch

    def unassign(self, partitions: Any) -> None:
        partitions = set(partitions)
        self._inner.unassign(partitions)
        self.unassigned |= partitions
        self.stopped.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _RefuseOnce:
    """A value deserializer that refuses one record when armed."""

    def __init__(self) -> None:
        self.armed = False

    def __call__(self, value: bytes | None, ctx: SerializationContext) -> object:
        if self.armed:
            self.armed = False
            raise ValueError("refused once")
        return value


@contextmanager
def _polling_in_a_thread(consumer: Consumer, sink: list[Record]) -> Iterator[None]:
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            sink.extend(consumer.consume(100, 0.01))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(DEADLINE)


def _poll_until_the_armed_take(
    consumer: Consumer, plane: _ArmedDataPlane, sink: list[Record]
) -> None:
    deadline = time.monotonic() + DEADLINE
    while plane.on_take is not None:
        assert time.monotonic() < deadline, "the armed take never ran"
        sink.extend(consumer.consume(100, 0.05))


def _poll_until_interrupted(
    consumer: Consumer, plane: _InterruptedAfterTheTake, sink: list[Record]
) -> None:
    deadline = time.monotonic() + DEADLINE
    while plane.interrupt:
        assert time.monotonic() < deadline, "the interrupted take never ran"
        sink.extend(consumer.consume(100, 0.05))


def _orders(broker: FakeBroker, partitions: int) -> None:
    """Topic "orders" with PER_PARTITION records in each partition."""
    broker.create_topic("orders", partitions)
    for n in range(PER_PARTITION):
        for p in range(partitions):
            broker.produce("orders", p, f"{p}:{n}".encode())


async def _first_record(consumer: AsyncConsumer) -> list[Record]:
    """Subscribe ``consumer`` to ``orders`` and consume until a record comes."""
    consumer.subscribe(["orders"])
    got: list[Record] = []
    with anyio.fail_after(DEADLINE):
        while not got:
            got.extend(await consumer.consume(1, 0.05))
    return got


def _keys(records: list[Record]) -> set[tuple[int, int]]:
    return {(r.partition() or 0, r.offset() or 0) for r in records}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_partition_revoked_while_a_batch_is_in_hand_is_committed_before_the_batch(
    backend: str,
) -> None:
    with FakeBroker().running_in_thread(backend) as broker:
        _orders(broker, 2)
        refuse = _RefuseOnce()
        config = consumer_config(
            broker,
            "in-hand",
            **{"auto.commit.interval.ms": 600_000, "value.deserializer": refuse},
        )
        first_plane = _ArmedDataPlane(broker.dataplane())
        first_got: list[Record] = []
        second_got: list[Record] = []
        with (
            Consumer(
                config, backend=backend, dataplane=cast(DataPlaneInterface, first_plane)
            ) as first,
            Consumer(config, backend=backend, dataplane=broker.dataplane()) as second,
        ):
            first.subscribe(["orders"])
            deadline = time.monotonic() + DEADLINE
            while not first_got:
                assert time.monotonic() < deadline, "the first member got no record"
                first_got.extend(first.consume(1, 0.05))

            def second_joins_and_takes_a_partition() -> None:
                # The batch is in hand: the group moves now, and the first
                # member's loop stops the partition it gives up.
                second.subscribe(["orders"])
                with _polling_in_a_thread(second, second_got):
                    assert first_plane.stopped.wait(DEADLINE), "no partition was revoked"
                refuse.armed = True

            first_plane.on_take = second_joins_and_takes_a_partition
            with pytest.raises(DeserializationError):
                _poll_until_the_armed_take(first, first_plane, first_got)
            assert len(first_plane.unassigned) == 1
            (gone,) = first_plane.unassigned
            in_batch = sorted(o for p, o in first_plane.taken if p == gone.partition)
            assert in_batch, "the batch held no record of the revoked partition"

            deadline = time.monotonic() + DEADLINE
            while _keys(first_got) | _keys(second_got) != ALL:
                assert time.monotonic() < deadline, (
                    f"never read: {sorted(ALL - _keys(first_got) - _keys(second_got))}"
                )
                first_got.extend(first.consume(100, 0.01))
                second_got.extend(second.consume(100, 0.01))
            # The revocation's commit stopped before the batch: the new owner
            # read the revoked partition's records of it.
            assert {(gone.partition, o) for o in in_batch} <= _keys(second_got)
            assert broker.committed("in-hand").get(gone, 0) <= in_batch[0]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_batch_a_cancelled_wait_took_while_its_partition_was_revoked_is_not_lost() -> None:
    """The async consumer's record wait runs in a worker thread while the event loop
    goes on; the task is cancelled (``wait_for``) with the records in hand."""
    with FakeBroker().running_in_thread("asyncio") as broker:
        _orders(broker, 2)
        config = consumer_config(broker, "in-hand-async", **{"auto.commit.interval.ms": 600_000})
        first_plane = _ArmedDataPlane(broker.dataplane())
        first_got: list[Record] = []
        second_got: list[Record] = []
        loop = asyncio.get_running_loop()
        consuming = asyncio.current_task()
        assert consuming is not None
        with Consumer(config, dataplane=broker.dataplane()) as second:
            async with AsyncConsumer(
                config, dataplane=cast(DataPlaneInterface, first_plane)
            ) as first:
                first.subscribe(["orders"])
                with anyio.fail_after(DEADLINE):
                    while not first_got:
                        first_got.extend(await first.consume(1, 0.05))
                    # Nothing buffered from here on: the next take is a worker's wait.
                    first_got.extend(await first.consume(1000, 0))
                delivered = threading.Event()

                def produce_late_records() -> None:
                    # In the worker, so that the wait (not a take on the loop) gets them.
                    broker.produce("orders", 0, b"0:late")
                    broker.produce("orders", 1, b"1:late")

                def second_joins_then_the_wait_is_cancelled() -> None:
                    second.subscribe(["orders"])
                    with _polling_in_a_thread(second, second_got):
                        assert first_plane.stopped.wait(DEADLINE), "no partition was revoked"
                    loop.call_soon_threadsafe(consuming.cancel)
                    loop.call_soon_threadsafe(loop.call_soon, delivered.set)
                    assert delivered.wait(DEADLINE)

                first_plane.before_wait = produce_late_records
                first_plane.on_take = second_joins_then_the_wait_is_cancelled
                with anyio.fail_after(DEADLINE):
                    while first_plane.on_take is not None:
                        try:
                            first_got.extend(await first.consume(1000, 0.5))
                        except asyncio.CancelledError:
                            consuming.uncancel()
                            break
                assert len(first_plane.unassigned) == 1
                (gone,) = first_plane.unassigned
                in_batch = [o for p, o in first_plane.taken if p == gone.partition]
                assert in_batch == [PER_PARTITION], "the wait took the late record of each"
                wanted = ALL | {(0, PER_PARTITION), (1, PER_PARTITION)}
                with anyio.fail_after(DEADLINE):
                    while _keys(first_got) | _keys(second_got) != wanted:
                        first_got.extend(await first.consume(100, 0.01))
                        second_got.extend(second.consume(100, 0.01))
                assert (gone.partition, PER_PARTITION) in _keys(second_got)


@pytest.mark.anyio
async def test_no_record_of_the_old_subscription_comes_after_unsubscribe() -> None:
    """As the Java client and librdkafka: the member stops its partitions on the event
    loop moments later, and a poll in between returned their buffered records."""
    with FakeBroker().running_in_thread("asyncio") as broker:
        _orders(broker, 1)
        config = consumer_config(broker, "unsubscribed")
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
            got = await _first_record(consumer)
            consumer.unsubscribe()
            assert await consumer.consume(100, 0) == []
            with anyio.fail_after(DEADLINE):
                while consumer.assignment():
                    assert await consumer.consume(100, 0.01) == []
        # The commit before the revocation covered exactly what was returned.
        assert broker.committed("unsubscribed") == {TopicPartition("orders", 0): len(got)}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_no_record_of_the_old_subscription_comes_after_unsubscribe_blocking(backend: str) -> None:
    with FakeBroker().running_in_thread(backend) as broker:
        _orders(broker, 1)
        config = consumer_config(broker, "unsubscribed-blocking")
        with Consumer(config, backend=backend, dataplane=broker.dataplane()) as consumer:
            consumer.subscribe(["orders"])
            got: list[Record] = []
            deadline = time.monotonic() + DEADLINE
            while not got:
                assert time.monotonic() < deadline, "no record came"
                got.extend(consumer.consume(1, 0.05))
            consumer.unsubscribe()
            assert consumer.consume(100, 0) == []
            deadline = time.monotonic() + DEADLINE
            while consumer.assignment():
                assert time.monotonic() < deadline, "the partition was never revoked"
                assert consumer.consume(100, 0.01) == []
        assert broker.committed("unsubscribed-blocking") == {TopicPartition("orders", 0): len(got)}


class _InterruptedAfterTheTake(_ArmedDataPlane):
    """Ctrl-C arrives once right after a take, before the batch reaches the front end."""

    def consume(self, max_records: int, timeout: float) -> list[Record]:
        batch = super().consume(max_records, timeout)
        if batch and self.interrupt:
            self.interrupt = False
            self.taken = [(r.partition() or 0, r.offset() or 0) for r in batch]
            raise KeyboardInterrupt
        return batch

    interrupt = False


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_batch_ctrl_c_cut_off_after_the_take_is_read_again_and_commits_go_on(
    backend: str,
) -> None:
    """An application that catches KeyboardInterrupt and polls on (a notebook): the
    batch comes again, and the positions (the commits) move past it."""
    with FakeBroker().running_in_thread(backend) as broker:
        _orders(broker, 1)
        config = consumer_config(broker, "interrupted", **{"enable.auto.commit": False})
        plane = _InterruptedAfterTheTake(broker.dataplane())
        tp = TopicPartition("orders", 0)
        with Consumer(config, backend=backend, dataplane=cast(DataPlaneInterface, plane)) as c:
            c.subscribe(["orders"])
            got: list[Record] = []
            deadline = time.monotonic() + DEADLINE
            while not got:
                assert time.monotonic() < deadline, "no record came"
                got.extend(c.consume(2, 0.05))
            plane.interrupt = True
            with pytest.raises(KeyboardInterrupt):
                _poll_until_interrupted(c, plane, got)
            assert plane.taken, "the interrupted take never ran"
            while len(got) < PER_PARTITION:
                assert time.monotonic() < deadline, f"only {len(got)} records came"
                got.extend(c.consume(100, 0.05))
            assert [r.offset() for r in got] == list(range(PER_PARTITION))
            assert c.commit() == {tp: PER_PARTITION}


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["consumer", "classic"])
async def test_subscribing_again_right_after_unsubscribe_reads_on(protocol: str) -> None:
    """The withheld partitions are released (revoked, unassigned) before the member
    joins again: none stays withheld, every record comes, none twice past a commit."""
    with FakeBroker().running_in_thread("asyncio") as broker:
        _orders(broker, 2)
        extra: dict[str, object] = {"group.protocol": protocol}
        if protocol == "classic":
            extra["heartbeat.interval.ms"] = 100
        config = consumer_config(broker, f"again-{protocol}", **extra)
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
            got = await _first_record(consumer)
            consumer.unsubscribe()
            consumer.subscribe(["orders"])
            with anyio.fail_after(DEADLINE):
                while _keys(got) != ALL:
                    got.extend(await consumer.consume(100, 0.05))
