"""The telemetry event schema and its JSON form: every kind round-trips, the names are stable."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgroup.telemetry import (
    BODY_TYPES,
    HEADER_FIELDS,
    SCHEMA_VERSION,
    CallbackCompleted,
    CallbackKind,
    CommitCompleted,
    CommittedOffset,
    EpochChanged,
    EventBody,
    EventHeader,
    EventKind,
    Fenced,
    FetchStarted,
    FetchStopped,
    HeartbeatFailed,
    LeaveReason,
    MemberJoined,
    MemberLeft,
    PartitionsAssigned,
    PartitionsLost,
    PartitionsRevoked,
    RebalanceEnded,
    RebalanceStarted,
    StateChanged,
    StopReason,
    TelemetryDecodeError,
    TelemetryEvent,
    TelemetryProtocol,
    decode,
    encode,
    from_dict,
    to_dict,
)
from kgroup.types import TopicPartition

HEADER = EventHeader(
    ts=1763720000.123456,
    mono=8123.004,
    seq=17,
    group="orders",
    member_id="m-1",
    instance_id=None,
    client_id="billing",
    host="web-3",
    pid=4711,
    protocol=TelemetryProtocol.CONSUMER,
)
TPS = (TopicPartition("orders", 3), TopicPartition("orders", 4))

# One body of every kind, with every optional field set.
SAMPLES: list[EventBody] = [
    MemberJoined(epoch=1),
    MemberLeft(reason=LeaveReason.CLOSED, epoch=7),
    StateChanged(old_state="JOINING", new_state="RECONCILING", trigger="HEARTBEAT_OK"),
    EpochChanged(old_epoch=3, new_epoch=5),
    PartitionsAssigned(partitions=TPS, epoch=5),
    PartitionsRevoked(partitions=TPS, epoch=6),
    PartitionsLost(partitions=TPS, epoch=6, error="FENCED_MEMBER_EPOCH"),
    FetchStarted(partitions=TPS, epoch=5),
    FetchStopped(partitions=TPS, epoch=6, reason=StopReason.REVOKED),
    CommitCompleted(
        offsets=(CommittedOffset("orders", 3, 1200),), epoch=5, latency_s=0.004, error=None
    ),
    HeartbeatFailed(error="COORDINATOR_NOT_AVAILABLE", error_code=15, retriable=True, epoch=5),
    Fenced(error="FENCED_MEMBER_EPOCH", error_code=110, epoch=5),
    CallbackCompleted(
        callback=CallbackKind.REVOKED, partitions=TPS, duration_s=0.25, error="ValueError"
    ),
    RebalanceStarted(trigger="assignment_changed", epoch=5),
    RebalanceEnded(epoch=6, duration_s=1.5, error=None),
]


def test_samples_cover_every_kind() -> None:
    assert {b.KIND for b in SAMPLES} == set(EventKind)
    assert set(BODY_TYPES) == set(EventKind)


@pytest.mark.parametrize("body", SAMPLES, ids=lambda b: b.KIND.value)
def test_every_kind_round_trips_through_json(body: EventBody) -> None:
    event = TelemetryEvent(HEADER, body)
    line = encode(event)
    assert "\n" not in line
    assert decode(line) == event
    assert decode(line.encode()) == event


def test_json_form_is_flat_with_stable_names() -> None:
    event = TelemetryEvent(HEADER, FetchStopped(partitions=TPS, epoch=6, reason=StopReason.LOST))
    assert json.loads(encode(event)) == {
        "v": SCHEMA_VERSION,
        "kind": "fetch_stopped",
        "ts": 1763720000.123456,
        "mono": 8123.004,
        "seq": 17,
        "group": "orders",
        "member_id": "m-1",
        "instance_id": None,
        "client_id": "billing",
        "host": "web-3",
        "pid": 4711,
        "protocol": "consumer",
        "partitions": [{"topic": "orders", "partition": 3}, {"topic": "orders", "partition": 4}],
        "epoch": 6,
        "reason": "lost",
    }
    assert tuple(json.loads(encode(event)))[: len(HEADER_FIELDS)] == HEADER_FIELDS


def test_commit_offsets_and_result() -> None:
    ok = CommitCompleted(offsets=(CommittedOffset("t", 0, 5),), epoch=2, latency_s=0.01)
    failed = dataclasses.replace(ok, error="REBALANCE_IN_PROGRESS")
    assert ok.ok
    assert not failed.ok
    raw = to_dict(TelemetryEvent(HEADER, failed))
    assert raw["offsets"] == [{"topic": "t", "partition": 0, "offset": 5}]
    assert raw["error"] == "REBALANCE_IN_PROGRESS"
    assert raw["latency_s"] == 0.01


def test_no_body_field_shadows_a_header_field() -> None:
    for cls in BODY_TYPES.values():
        names = {f.name for f in dataclasses.fields(cls)}
        assert not names & set(HEADER_FIELDS), cls.__name__


def test_events_are_frozen() -> None:
    event = TelemetryEvent(HEADER, MemberJoined(epoch=1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.header.seq = 3  # type: ignore[misc]


def _raw(**changes: Any) -> dict[str, Any]:
    raw = to_dict(TelemetryEvent(HEADER, FetchStarted(partitions=TPS, epoch=5)))
    raw.update(changes)
    return raw


def test_unknown_fields_are_ignored_for_forward_compatibility() -> None:
    event = from_dict(_raw(added_in_a_later_minor="x"))
    assert event.body == FetchStarted(partitions=TPS, epoch=5)


def test_optional_fields_may_be_absent() -> None:
    raw = to_dict(TelemetryEvent(HEADER, PartitionsLost(partitions=TPS, epoch=2)))
    del raw["error"]
    del raw["instance_id"]
    event = from_dict(raw)
    assert event.body == PartitionsLost(partitions=TPS, epoch=2, error=None)
    assert event.header.instance_id is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_raw(v=SCHEMA_VERSION + 1), "schema version 2.*Upgrade kgroup"),
        (_raw(v="1"), "'v'"),
        (_raw(kind="teleported"), "unknown event kind 'teleported'"),
        (_raw(epoch="5"), "field 'epoch' must be an integer"),
        (_raw(epoch=True), "field 'epoch' must be an integer"),
        (_raw(ts="now"), "field 'ts' must be a number"),
        (_raw(protocol="auto"), "field 'protocol' must be one of 'consumer', 'classic'"),
        (_raw(partitions=[{"topic": "t"}]), r"field 'partitions\[0\].partition'"),
        (_raw(partitions="t-0"), "field 'partitions' must be a list of objects"),
        ({k: v for k, v in _raw().items() if k != "group"}, "field 'group' is missing"),
    ],
)
def test_bad_events_are_refused_naming_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(TelemetryDecodeError, match=message):
        from_dict(raw)


def test_decode_refuses_non_json_and_non_objects() -> None:
    with pytest.raises(TelemetryDecodeError, match="not a JSON line"):
        decode('{"v": 1, "kind": ')
    with pytest.raises(TelemetryDecodeError, match="is a JSON object, got list"):
        decode("[1, 2]")


def test_decode_error_is_a_kgroup_error_and_a_value_error() -> None:
    from kgroup.errors import KgroupError  # noqa: PLC0415

    assert issubclass(TelemetryDecodeError, KgroupError)
    assert issubclass(TelemetryDecodeError, ValueError)


_text = st.text(min_size=0, max_size=12)
_tps = st.lists(st.builds(TopicPartition, _text, st.integers(0, 2**31 - 1)), max_size=5).map(tuple)
_floats = st.floats(allow_nan=False, allow_infinity=False)


@given(
    header=st.builds(
        EventHeader,
        ts=_floats,
        mono=_floats,
        seq=st.integers(0, 2**63),
        group=_text,
        member_id=_text,
        instance_id=st.none() | _text,
        client_id=_text,
        host=_text,
        pid=st.integers(0, 2**22),
        protocol=st.sampled_from(TelemetryProtocol),
    ),
    body=st.one_of(
        st.builds(PartitionsAssigned, partitions=_tps, epoch=st.integers(-1, 2**31)),
        st.builds(
            FetchStopped,
            partitions=_tps,
            epoch=st.integers(-1, 2**31),
            reason=st.sampled_from(StopReason),
        ),
        st.builds(
            CommitCompleted,
            offsets=st.lists(
                st.builds(CommittedOffset, _text, st.integers(0, 99), st.integers(-1, 2**62)),
                max_size=4,
            ).map(tuple),
            epoch=st.integers(-1, 99),
            latency_s=_floats,
            error=st.none() | _text,
        ),
        st.builds(StateChanged, old_state=_text, new_state=_text, trigger=st.none() | _text),
    ),
)
def test_arbitrary_events_round_trip(header: EventHeader, body: EventBody) -> None:
    event = TelemetryEvent(header, body)
    assert decode(encode(event)) == event


def test_importing_telemetry_loads_neither_librdkafka_nor_spark() -> None:
    code = (
        "import sys, kgroup, kgroup.telemetry;"
        "bad = [m for m in ('confluent_kafka', 'pyspark') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""
