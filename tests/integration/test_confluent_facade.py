"""A confluent-kafka application's calls, run the same way on confluent-kafka and kgroup.confluent.

Each scenario (taken from confluent-kafka-python's own consumer tests: rebalance
callbacks and assignment from ``on_assign``, memberid, commit/committed
metadata round trips, store_offsets, error codes, lookups) runs against
``confluent_kafka.Consumer`` (the control) and ``kgroup.confluent.Consumer``,
each on the classic and the consumer protocol, with the same assertions.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.error import ValueDeserializationError
from confluent_kafka.serialization import MessageField, SerializationContext, StringDeserializer
from helpers import run_python

import kgroup.confluent
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = [pytest.mark.integration]

KINDS = ["confluent-classic", "confluent-consumer", "kgroup-classic", "kgroup-consumer"]
PER_PARTITION = 10
WAIT = 60.0
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(kind: str, kafka_bootstrap_servers: str, make_group_id: MakeGroupId) -> Iterator[Any]:
    """A factory of the consumer under test: the control or the facade, on the kind's protocol.

    Each gets a fresh group id and earliest offsets unless the test overrides
    them; every consumer made is closed after the test.
    """
    made: list[Any] = []
    library, protocol = kind.split("-")

    def factory(deserializing: bool = False, **overrides: Any) -> Any:
        config: dict[str, Any] = {
            "bootstrap.servers": kafka_bootstrap_servers,
            "group.id": make_group_id(),
            "auto.offset.reset": "earliest",
            "group.protocol": protocol,
        }
        config.update(overrides)
        peer = confluent_kafka if library == "confluent" else kgroup.confluent
        consumer = (peer.DeserializingConsumer if deserializing else peer.Consumer)(config)
        made.append(consumer)
        return consumer

    yield factory
    for consumer in made:
        with contextlib.suppress(RuntimeError):  # closed by the test already
            consumer.close()


def produce(bootstrap: str, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(partitions):
        for i in range(PER_PARTITION):
            producer.produce(
                topic,
                f"value-{partition}-{i}".encode(),
                key=f"k{i}".encode(),
                partition=partition,
                headers=[("h", f"{i}".encode())],
            )
    assert producer.flush(30) == 0


def take(consumer: Any, count: int) -> list[Any]:
    """``count`` messages (no error messages among them), within WAIT seconds."""
    messages: list[Any] = []
    deadline = time.monotonic() + WAIT
    while len(messages) < count:
        assert time.monotonic() < deadline, f"{len(messages)} of {count} messages"
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        messages.append(message)
    return messages


def error_code(call: Callable[[], object]) -> int:
    """The code of the ``KafkaException`` that ``call`` raises (the test fails if none)."""
    with pytest.raises(KafkaException) as caught:
        call()
    return int(caught.value.args[0].code())


def key(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def test_on_assign_sets_start_offsets_and_callbacks_get_the_facade(
    kind: str, make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, 2)
    calls: list[tuple[str, Any, list[tuple[str, int]]]] = []
    consumer = make(**{"enable.auto.commit": False})
    classic = kind.endswith("classic")

    def on_assign(who: Any, partitions: list[TopicPartition]) -> None:
        assert all(isinstance(tp, TopicPartition) for tp in partitions)
        calls.append(("assign", who, sorted(key(tp) for tp in partitions)))
        for tp in partitions:
            tp.offset = 3
        # Classic eager groups take the whole set with assign(), the others a delta.
        if classic:
            who.assign(partitions)
        else:
            who.incremental_assign(partitions)

    def on_revoke(who: Any, partitions: list[TopicPartition]) -> None:
        calls.append(("revoke", who, sorted(key(tp) for tp in partitions)))

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    messages = take(consumer, 2 * (PER_PARTITION - 3))
    by_partition = {p: sorted(m.offset() for m in messages if m.partition() == p) for p in (0, 1)}
    assert by_partition == {0: list(range(3, PER_PARTITION)), 1: list(range(3, PER_PARTITION))}
    assigns = [call for call in calls if call[0] == "assign"]
    assert assigns[0][1] is consumer
    assert sorted(p for call in assigns for p in call[2]) == [(topic, 0), (topic, 1)]
    assert sorted(key(tp) for tp in consumer.assignment()) == [(topic, 0), (topic, 1)]

    member = consumer.memberid()
    assert isinstance(member, str)
    assert member

    first = min((m for m in messages if m.partition() == 1), key=lambda m: m.offset())
    assert first.topic() == topic
    assert first.key() == b"k3"
    assert first.value() == b"value-1-3"
    assert first.headers() == [("h", b"3")]
    assert first.timestamp()[0] == confluent_kafka.TIMESTAMP_CREATE_TIME
    assert len(first) == len(b"value-1-3")

    consumer.close()
    with pytest.raises(RuntimeError):
        consumer.poll(0.1)
    with pytest.raises(RuntimeError):
        consumer.memberid()


def test_commit_committed_and_position_round_trip_with_metadata(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, 2)
    consumer = make(**{"enable.auto.commit": False})
    consumer.subscribe([topic])
    take(consumer, 2 * PER_PARTITION)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    positions = consumer.position([tp0, tp1])
    assert [(key(tp), tp.offset) for tp in positions] == [
        ((topic, 0), PER_PARTITION),
        ((topic, 1), PER_PARTITION),
    ]
    before = consumer.committed([tp0, tp1], timeout=10)
    assert [tp.offset for tp in before] == [confluent_kafka.OFFSET_INVALID] * 2

    done = consumer.commit(
        offsets=[TopicPartition(topic, 0, 5, metadata="progress")], asynchronous=False
    )
    assert [(key(tp), tp.offset, tp.error) for tp in done] == [((topic, 0), 5, None)]
    got = consumer.committed([tp0], timeout=10)
    assert [(key(tp), tp.offset, tp.metadata) for tp in got] == [((topic, 0), 5, "progress")]

    everything = consumer.commit(asynchronous=False)
    assert sorted((key(tp), tp.offset) for tp in everything) == [
        ((topic, 0), PER_PARTITION),
        ((topic, 1), PER_PARTITION),
    ]
    assert [tp.offset for tp in consumer.committed([tp0, tp1], timeout=10)] == [PER_PARTITION] * 2


def test_store_offsets_decides_what_commit_covers(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap_servers, topic, 1)
    consumer = make(**{"enable.auto.commit": False, "enable.auto.offset.store": False})
    consumer.subscribe([topic])
    messages = take(consumer, PER_PARTITION)
    consumer.store_offsets(message=messages[3])
    done = consumer.commit(asynchronous=False)
    assert [(key(tp), tp.offset) for tp in done] == [((topic, 0), 4)]
    consumer.store_offsets(offsets=[TopicPartition(topic, 0, 7)])
    consumer.commit(asynchronous=False)
    assert [tp.offset for tp in consumer.committed([TopicPartition(topic, 0)])] == [7]


def test_store_offsets_with_auto_store_on_is_invalid_arg(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap_servers, topic, 1)
    consumer = make(**{"enable.auto.commit": False})
    consumer.subscribe([topic])
    messages = take(consumer, 1)
    code = error_code(lambda: consumer.store_offsets(message=messages[0]))
    assert code == KafkaError._INVALID_ARG


def test_sync_commit_with_nothing_consumed_is_no_offset(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    topic = make_topic(partitions=1)
    consumer = make(**{"enable.auto.commit": False})
    consumer.subscribe([topic])
    consumer.poll(1.0)
    assert error_code(lambda: consumer.commit(asynchronous=False)) == KafkaError._NO_OFFSET


def test_commit_of_positions_skips_a_partition_without_a_position(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    # The usual commit(offsets=consumer.position(consumer.assignment())), with
    # one partition that has handed out nothing yet (OFFSET_INVALID).
    topic = make_topic(partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap_servers})
    for i in range(3):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    consumer = make(**{"enable.auto.commit": False})
    consumer.subscribe([topic])
    take(consumer, 3)
    positions = consumer.position([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    assert [tp.offset for tp in positions] == [3, confluent_kafka.OFFSET_INVALID]
    done = consumer.commit(offsets=positions, asynchronous=False)
    assert sorted((key(tp), tp.offset) for tp in done) == [
        ((topic, 0), 3),
        ((topic, 1), confluent_kafka.OFFSET_INVALID),
    ]
    assert consumer.commit(offsets=positions, asynchronous=True) is None
    committed = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    assert [tp.offset for tp in committed] == [3, confluent_kafka.OFFSET_INVALID]
    nothing = [TopicPartition(topic, 1)]
    assert error_code(lambda: consumer.commit(offsets=nothing, asynchronous=False)) == (
        KafkaError._NO_OFFSET
    )


def test_seek_to_the_end_leaves_no_position_to_commit(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    # "Skip the backlog": the position after seek(OFFSET_END) is unknown until
    # a message comes, so a commit then has nothing to commit. The facade used
    # to commit an earlier seek's offset, moving the group back.
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap_servers, topic, 1)
    consumer = make(**{"enable.auto.commit": False})
    consumer.subscribe([topic])
    take(consumer, PER_PARTITION)
    tp = TopicPartition(topic, 0)
    consumer.seek(TopicPartition(topic, 0, 5))
    assert [m.offset() for m in take(consumer, 5)] == [5, 6, 7, 8, 9]
    assert [(key(t), t.offset) for t in consumer.commit(asynchronous=False)] == [((topic, 0), 10)]
    consumer.seek(TopicPartition(topic, 0, confluent_kafka.OFFSET_END))
    assert [t.offset for t in consumer.position([tp])] == [confluent_kafka.OFFSET_INVALID]
    assert error_code(lambda: consumer.commit(asynchronous=False)) == KafkaError._NO_OFFSET
    assert [t.offset for t in consumer.committed([tp])] == [PER_PARTITION]


@pytest.mark.parametrize(
    "settings",
    [
        {"enable.auto.commit": "0", "enable.partition.eof": "1"},
        {"enable.auto.commit": 0, "enable.auto.offset.store": "t"},
        {"default.topic.config": {"auto.offset.reset": "smallest"}},
    ],
    ids=["text-0-1", "int-and-t", "default-topic-config"],
)
def test_config_spellings_confluent_kafka_accepts_construct(
    make: Any, settings: dict[str, Any]
) -> None:
    make(**settings).close()


def test_unknown_config_key_is_invalid_arg(kind: str, kafka_bootstrap_servers: str) -> None:
    cls = confluent_kafka.Consumer if kind.startswith("confluent") else kgroup.confluent.Consumer
    config = {"bootstrap.servers": kafka_bootstrap_servers, "group.id": "g", "no.such.key": 1}
    assert error_code(lambda: cls(config)) == KafkaError._INVALID_ARG


def test_lookups_watermarks_times_and_metadata(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, 2)
    consumer = make(**{"enable.auto.commit": False})
    consumer.subscribe([topic])
    take(consumer, 2 * PER_PARTITION)
    tp0 = TopicPartition(topic, 0)
    assert consumer.get_watermark_offsets(tp0, timeout=10) == (0, PER_PARTITION)
    found = consumer.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=10)
    assert [(key(tp), tp.offset) for tp in found] == [((topic, 0), 0)]
    future = int(time.time() * 1000) + 3_600_000
    missing = consumer.offsets_for_times([TopicPartition(topic, 1, future)], timeout=10)
    assert [(key(tp), tp.offset) for tp in missing] == [((topic, 1), confluent_kafka.OFFSET_END)]
    metadata = consumer.list_topics(topic, timeout=10)
    assert sorted(metadata.topics[topic].partitions) == [0, 1]


def test_pause_resume_and_seek(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap_servers, topic, 1)
    consumer = make(**{"enable.auto.commit": False})
    consumer.subscribe([topic])
    take(consumer, PER_PARTITION)
    tp0 = TopicPartition(topic, 0, 2)
    consumer.seek(tp0)
    again = take(consumer, 1)[0]
    assert (again.partition(), again.offset()) == (0, 2)
    consumer.pause([tp0])
    consumer.resume([tp0])
    assert take(consumer, 1)[0].offset() == 3


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_example_runs_as_a_confluent_application(
    protocol: str, kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, 2)
    result = run_python(
        str(EXAMPLES / "confluent_dropin.py"),
        kafka_bootstrap_servers,
        topic,
        make_group_id(),
        "--protocol",
        protocol,
        "--max-records",
        str(2 * PER_PARTITION),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"consumed {2 * PER_PARTITION} records" in result.stderr
    assert "b'value-1-9'" in result.stdout
    assert f"assigned [('{topic}', 0), ('{topic}', 1)]" in result.stderr


def test_partition_eof_follows_each_partitions_last_message(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, 2)
    consumer = make(**{"enable.auto.commit": False, "enable.partition.eof": True})
    consumer.subscribe([topic])
    seen: dict[int, list[int]] = {0: [], 1: []}
    ends: dict[int, int] = {}
    deadline = time.monotonic() + WAIT
    while len(ends) < 2:
        assert time.monotonic() < deadline, (seen, ends)
        message = consumer.poll(0.5)
        if message is None:
            continue
        error = message.error()
        if error is None:
            assert message.partition() not in ends, "a message after its partition's EOF"
            seen[message.partition()].append(message.offset())
            continue
        assert error.code() == KafkaError._PARTITION_EOF
        assert message.topic() == topic
        assert seen[message.partition()] == list(range(PER_PARTITION)), (seen, message.offset())
        ends[message.partition()] = message.offset()
    assert ends == {0: PER_PARTITION, 1: PER_PARTITION}
    # Reported once: nothing more until new messages arrive.
    assert consumer.poll(1.0) is None


def test_cooperative_rebalance_tells_deltas_to_both_members(
    kind: str, make: Any, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic = make_topic(partitions=4)
    group = make_group_id()
    calls: dict[str, list[tuple[str, set[int]]]] = {"a": [], "b": []}

    def recorder(name: str) -> dict[str, Any]:
        def on_assign(who: Any, partitions: list[TopicPartition]) -> None:
            calls[name].append(("assign", {tp.partition for tp in partitions}))
            who.incremental_assign(partitions)

        def on_revoke(who: Any, partitions: list[TopicPartition]) -> None:
            calls[name].append(("revoke", {tp.partition for tp in partitions}))
            who.incremental_unassign(partitions)

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    extra = {"partition.assignment.strategy": "cooperative-sticky"}
    settings = {"group.id": group, **(extra if kind.endswith("classic") else {})}
    first = make(**settings)
    first.subscribe([topic], **recorder("a"))

    def assigned(name: str) -> list[set[int]]:
        return [parts for what, parts in calls[name] if what == "assign" and parts]

    wait_until(lambda: bool(assigned("a")), first)
    assert assigned("a") == [{0, 1, 2, 3}]

    second = make(**settings)
    second.subscribe([topic], **recorder("b"))

    wait_until(lambda: bool(assigned("b")), first, second)
    given = assigned("b")
    assert len(given) == 1
    assert len(given[0]) == 2
    revoked = [parts for what, parts in calls["a"] if what == "revoke"]
    # Deltas: the first member gives up exactly what the second takes, keeps the rest.
    assert revoked == given
    assert {tp.partition for tp in first.assignment()} == {0, 1, 2, 3} - given[0]


def wait_until(condition: Any, *consumers: Any) -> None:
    """Poll every consumer in turn (their callbacks run in poll) until ``condition()``."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        for consumer in consumers:
            message = consumer.poll(0.2)
            assert message is None or message.error() is None


class AlarmError(Exception):
    pass


def test_a_signal_interrupts_a_blocked_poll(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    topic = make_topic(partitions=1)
    consumer = make()
    consumer.subscribe([topic])

    def interrupt(signum: int, frame: object) -> None:
        raise AlarmError

    previous = signal.signal(signal.SIGALRM, interrupt)
    started = time.monotonic()
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(AlarmError):
            consumer.poll(30.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 10.0


def test_max_poll_interval_exceeded_is_the_next_polls_error_then_lost_and_back(
    kind: str, make: Any, make_topic: MakeTopic
) -> None:
    topic = make_topic(partitions=1)
    classic = {"session.timeout.ms": 6000} if kind.endswith("classic") else {}
    consumer = make(**{"max.poll.interval.ms": 6000, **classic})
    calls: list[str] = []
    consumer.subscribe(
        [topic],
        on_assign=lambda _c, parts: calls.append("assign") if parts else None,
        on_revoke=lambda _c, _parts: calls.append("revoke"),
        on_lost=lambda _c, _parts: calls.append("lost"),
    )
    wait_until(lambda: calls == ["assign"], consumer)
    time.sleep(8.0)  # the scenario: the application does not poll for longer than the interval
    first = consumer.poll(1.0)
    assert first is not None
    assert first.error() is not None
    assert first.error().code() == KafkaError._MAX_POLL_EXCEEDED
    wait_until(lambda: calls[-2:] == ["lost", "assign"], consumer)
    assert calls == ["assign", "lost", "assign"]


def test_manual_assignment_starts_at_given_offsets_and_commits(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    topic = make_topic(partitions=2)
    produce(kafka_bootstrap_servers, topic, 2)
    consumer = make(**{"enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 6)])
    messages = take(consumer, PER_PARTITION - 6)
    assert [(m.partition(), m.offset()) for m in messages] == [(0, i) for i in range(6, 10)]
    consumer.incremental_assign([TopicPartition(topic, 1, 8)])
    more = take(consumer, 2)
    assert sorted((m.partition(), m.offset()) for m in more) == [(1, 8), (1, 9)]
    assert sorted(key(tp) for tp in consumer.assignment()) == [(topic, 0), (topic, 1)]

    done = consumer.commit(offsets=[TopicPartition(topic, 1, 9)], asynchronous=False)
    assert [(key(tp), tp.offset) for tp in done] == [((topic, 1), 9)]
    assert [tp.offset for tp in consumer.committed([TopicPartition(topic, 1)])] == [9]

    consumer.incremental_unassign([TopicPartition(topic, 0)])
    assert [key(tp) for tp in consumer.assignment()] == [(topic, 1)]
    consumer.unassign()
    assert consumer.assignment() == []


def test_assignment_misuse_error_codes(make: Any, make_topic: MakeTopic) -> None:
    topic = make_topic(partitions=1)
    consumer = make()
    consumer.assign([TopicPartition(topic, 0)])
    with pytest.raises(KafkaException) as twice:
        consumer.incremental_assign([TopicPartition(topic, 0)])
    assert twice.value.args[0].code() == KafkaError._CONFLICT
    with pytest.raises(KafkaException) as missing:
        consumer.incremental_unassign([TopicPartition(topic, 5)])
    assert missing.value.args[0].code() == KafkaError._INVALID_ARG
    with pytest.raises(TypeError):
        consumer.subscribe(topic)
    with pytest.raises(ValueError, match="num_messages"):
        consumer.consume(-1)


def test_deserializing_consumer_gives_deserialized_messages_and_typed_errors(
    make: Any, make_topic: MakeTopic, kafka_bootstrap_servers: str
) -> None:
    topic = make_topic(partitions=1)
    produce(kafka_bootstrap_servers, topic, 1)
    contexts: list[tuple[str, str]] = []

    def value_deserializer(data: bytes | None, ctx: SerializationContext) -> str:
        contexts.append((ctx.topic, ctx.field))
        assert data is not None
        text = data.decode()
        if text.endswith("-5"):
            raise ValueError("five is refused")
        return text.upper()

    consumer = make(
        deserializing=True,
        **{
            "enable.auto.commit": False,
            "key.deserializer": StringDeserializer("utf_8"),
            "value.deserializer": value_deserializer,
        },
    )
    consumer.subscribe([topic])
    got: list[tuple[int | None, Any, Any]] = []
    deadline = time.monotonic() + WAIT
    while len(got) < 5:
        assert time.monotonic() < deadline
        message = consumer.poll(0.5)
        if message is not None:
            got.append((message.offset(), message.key(), message.value()))
    assert got == [(i, f"k{i}", f"VALUE-0-{i}") for i in range(5)]
    assert contexts[0] == (topic, MessageField.VALUE)
    with pytest.raises(ValueDeserializationError) as caught:
        consumer.poll(WAIT)
    failed = caught.value.kafka_message
    assert failed is not None
    assert failed.offset() == 5
    assert isinstance(caught.value.exception, ValueError)
    following = consumer.poll(WAIT)
    assert following is not None
    assert following.offset() == 6
    with pytest.raises(NotImplementedError):
        consumer.consume(1, 0.1)
