"""key.deserializer / value.deserializer on the native consumers, through the fake broker.

A record a deserializer fails on is never lost (the Java client's
RecordDeserializationException): the records before it come first, the poll
that reaches it raises naming it, every later poll raises again until the
application seeks past it, and no commit (auto, on close) passes it.
Both consumers, asyncio and trio.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from confluent_kafka.serialization import (
    MessageField,
    SerializationContext,
    SerializationError,
    StringDeserializer,
)

from kgroup import AsyncConsumer, Consumer
from kgroup.dataplane import Record
from kgroup.errors import (
    DeserializationError,
    KeyDeserializationError,
    ValueDeserializationError,
)
from kgroup.testing.fake import FakeBroker
from kgroup.types import TopicPartition

from .helpers import DEADLINE, consumer_config

pytestmark = pytest.mark.anyio

PROTOCOLS = [
    pytest.param({}, id="consumer"),
    pytest.param({"group.protocol": "classic", "heartbeat.interval.ms": 100}, id="classic"),
]
T0 = TopicPartition("t", 0)
POISON = b"\xff\xfe"
"""Not UTF-8: StringDeserializer('utf_8') raises on it."""


def fill(broker: FakeBroker, values: list[bytes]) -> None:
    broker.create_topic("t", 1)
    for value in values:
        broker.produce("t", 0, value)


def values(batch: list[Record]) -> list[object]:
    """The values as handed out: confluent_kafka.Message types them bytes, here they are not."""
    return [r.value() for r in batch]


async def first_batch(consumer: AsyncConsumer) -> list[Record]:
    """The first non-empty consume() (the fake hands out everything buffered at once)."""
    with anyio.fail_after(DEADLINE):
        while True:
            batch = await consumer.consume(100, 0.01)
            if batch:
                return batch


async def raises_at(consumer: AsyncConsumer) -> DeserializationError:
    """Poll until the poison record is reached; the error it raised."""
    with anyio.fail_after(DEADLINE):
        while True:
            try:
                batch = await consumer.consume(100, 0.01)
            except DeserializationError as error:
                return error
            assert not batch, f"records returned where the poison record was due: {batch}"


@pytest.mark.parametrize("extra", PROTOCOLS)
async def test_keys_and_values_come_back_deserialized_with_confluents_context(
    broker: FakeBroker, group_id: str, extra: dict[str, object]
) -> None:
    broker.create_topic("t", 1)
    broker.records.append("t", 0, "héllo".encode(), key=b"7", headers=[("h", b"1")])
    broker.produce("t", 0, None, key=None)
    contexts: list[tuple[bytes | None, str, str, Any]] = []

    def key_of(data: bytes | None, ctx: SerializationContext) -> int | None:
        contexts.append((data, ctx.topic, ctx.field, ctx.headers))
        return None if data is None else int(data)

    config = consumer_config(
        broker,
        group_id,
        **{
            "auto.offset.reset": "earliest",
            "key.deserializer": key_of,
            "value.deserializer": StringDeserializer("utf_8"),
            **extra,
        },
    )
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["t"])
        got: list[Record] = []
        with anyio.fail_after(DEADLINE):
            while len(got) < 2:
                got += await consumer.consume(100, 0.01)
    assert [(r.offset(), r.key(), r.value()) for r in got] == [(0, 7, "héllo"), (1, None, None)]
    assert contexts == [(b"7", "t", MessageField.KEY, [("h", b"1")]), (None, "t", "key", None)]


@pytest.mark.parametrize("extra", PROTOCOLS)
async def test_a_poison_value_stops_the_partition_at_it_until_seeked_past(
    broker: FakeBroker, group_id: str, extra: dict[str, object]
) -> None:
    fill(broker, [b"0", b"1", b"2", POISON, b"4", b"5"])
    config = consumer_config(
        broker,
        group_id,
        **{
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "value.deserializer": StringDeserializer("utf_8"),
            **extra,
        },
    )
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["t"])
        # The records before the poison one come first, deserialized.
        assert values(await first_batch(consumer)) == ["0", "1", "2"]
        error = await raises_at(consumer)
        assert isinstance(error, ValueDeserializationError)
        assert (error.topic_partition, error.offset, error.field) == (T0, 3, "value")
        assert "t-0 at offset 3" in str(error)
        assert (error.record.offset(), error.record.value()) == (3, POISON)
        assert isinstance(error.cause, SerializationError)
        assert error.__cause__ is error.cause
        # The position stays at the record: a commit of the positions does not pass it.
        assert consumer.position([T0]) == {T0: 3}
        assert await consumer.commit() == {T0: 3}
        # Polling again without a seek meets it again.
        again = await raises_at(consumer)
        assert (again.topic_partition, again.offset) == (T0, 3)
        consumer.seek(T0, error.offset + 1)
        seeked = await first_batch(consumer)
        assert ([r.offset() for r in seeked], values(seeked)) == ([4, 5], ["4", "5"])
        assert await consumer.commit() == {T0: 6}


async def test_a_poison_key_is_a_key_deserialization_error(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("t", 1)
    broker.produce("t", 0, b"v", key=POISON)
    values_seen: list[bytes | None] = []

    def value_of(data: bytes | None, ctx: SerializationContext) -> bytes | None:
        values_seen.append(data)
        return data

    config = consumer_config(
        broker,
        group_id,
        **{
            "auto.offset.reset": "earliest",
            "key.deserializer": StringDeserializer("utf_8"),
            "value.deserializer": value_of,
        },
    )
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["t"])
        error = await raises_at(consumer)
        assert isinstance(error, KeyDeserializationError)
        assert (error.topic_partition, error.offset, error.field) == (T0, 0, "key")
        assert error.record.key() == POISON
        # The key failed first: the value deserializer never ran on the record.
        assert values_seen == []


@pytest.mark.parametrize("extra", PROTOCOLS)
async def test_neither_auto_commit_nor_close_commits_past_the_poison_record(
    broker: FakeBroker, group_id: str, extra: dict[str, object]
) -> None:
    fill(broker, [b"0", b"1", POISON, b"3"])
    config = consumer_config(
        broker,
        group_id,
        **{
            "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 20,
            "value.deserializer": StringDeserializer("utf_8"),
            **extra,
        },
    )
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["t"])
        assert len(await first_batch(consumer)) == 2
        # The application keeps polling (and failing) past an auto-commit interval.
        with anyio.fail_after(DEADLINE):
            while T0 not in broker.committed(group_id):
                await raises_at(consumer)
        assert broker.committed(group_id) == {T0: 2}
    # close() committed (the revocation's commit): still at the poison record.
    assert broker.committed(group_id) == {T0: 2}


async def test_a_manual_assignment_closes_at_the_poison_record(
    broker: FakeBroker, group_id: str
) -> None:
    fill(broker, [b"0", POISON, b"2"])
    config = consumer_config(
        broker,
        group_id,
        **{"auto.offset.reset": "earliest", "value.deserializer": StringDeserializer("utf_8")},
    )
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.assign([T0])
        assert len(await first_batch(consumer)) == 1
        await raises_at(consumer)
    assert broker.committed(group_id) == {T0: 1}


# ------------------------------------------------------------- the blocking Consumer


@pytest.fixture(params=["asyncio", "trio"])
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def blocking_until(consumer: Consumer, check: Callable[[], Any]) -> Any:
    """Poll until ``check()`` returns something truthy (callbacks run in polls)."""
    deadline = time.monotonic() + DEADLINE
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")


@pytest.mark.parametrize("extra", PROTOCOLS)
def test_the_blocking_consumer_deserializes_and_stops_at_a_poison_record(
    backend: str, extra: dict[str, object]
) -> None:
    group_id = f"blocking-deser-{backend}-{len(extra)}"
    with FakeBroker().running_in_thread(backend) as broker:
        fill(broker, [b"0", b"1", POISON, b"3"])
        config = consumer_config(
            broker,
            group_id,
            **{
                "auto.offset.reset": "earliest",
                "key.deserializer": lambda data, ctx: (ctx.topic, data),
                "value.deserializer": StringDeserializer("utf_8"),
                **extra,
            },
        )
        with Consumer(config, backend=backend, dataplane=broker.dataplane()) as consumer:
            consumer.subscribe(["t"])
            batch = blocking_until(consumer, lambda: consumer.consume(100, 0.01))
            assert [(r.key(), r.value()) for r in batch] == [(("t", None), "0"), (("t", None), "1")]

            def fails() -> DeserializationError | None:
                try:
                    assert not consumer.consume(100, 0.01)
                except DeserializationError as error:
                    return error
                return None

            error = blocking_until(consumer, fails)
            assert isinstance(error, ValueDeserializationError)
            assert (error.topic_partition, error.offset) == (T0, 2)
            assert consumer.position([T0]) == {T0: 2}
            assert blocking_until(consumer, fails).offset == 2  # again, without a seek
            with pytest.raises(ValueDeserializationError):
                consumer.poll(DEADLINE)
        # close() committed at the poison record, not past it.
        assert broker.committed(group_id) == {T0: 2}


class _Interrupt(BaseException):
    """What Ctrl-C raises inside a deserializer, as far as the consumer can tell."""


def _interrupting_once() -> Callable[[bytes | None, SerializationContext], object]:
    calls = [0]

    def value_of(data: bytes | None, ctx: SerializationContext) -> object:
        calls[0] += 1
        if calls[0] == 2:
            raise _Interrupt
        return data

    return value_of


async def test_ctrl_c_inside_a_deserializer_loses_no_record(
    broker: FakeBroker, group_id: str
) -> None:
    # The records were taken from the data plane: the position had moved past
    # them, so the next poll skipped them and close() committed past them.
    fill(broker, [b"a", b"b", b"c"])
    config = consumer_config(
        broker,
        group_id,
        **{"auto.offset.reset": "earliest", "value.deserializer": _interrupting_once()},
    )
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["t"])
        with anyio.fail_after(DEADLINE), pytest.raises(_Interrupt):
            await first_batch(consumer)
        assert values(await first_batch(consumer)) == [b"a", b"b", b"c"]
        assert consumer.position([T0]) == {T0: 3}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_ctrl_c_inside_a_deserializer_loses_no_record_blocking(backend: str) -> None:
    with FakeBroker().running_in_thread(backend) as broker:
        fill(broker, [b"a", b"b", b"c"])
        config = consumer_config(
            broker,
            "interrupted",
            **{"auto.offset.reset": "earliest", "value.deserializer": _interrupting_once()},
        )
        with Consumer(config, backend=backend, dataplane=broker.dataplane()) as consumer:
            consumer.subscribe(["t"])
            deadline = time.monotonic() + DEADLINE
            with pytest.raises(_Interrupt):
                _consume_until_records(consumer, deadline)
            assert values(_consume_until_records(consumer, deadline)) == [b"a", b"b", b"c"]
            assert consumer.position([T0]) == {T0: 3}


def _consume_until_records(consumer: Consumer, deadline: float) -> list[Record]:
    while time.monotonic() < deadline:
        batch = consumer.consume(100, 0.01)
        if batch:
            return batch
    raise AssertionError("no records before the deadline")
