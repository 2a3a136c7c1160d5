"""The report's tables on hand-written telemetry, checked with Spark's own DataFrame assertions."""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from kgroup.report import analysis
from kgroup.report.schema import EVENT_SCHEMA
from kgroup.report.source import FileSource, parse, read_lines
from kgroup.telemetry import (
    BODY_TYPES,
    HEADER_FIELDS,
    CallbackCompleted,
    CallbackKind,
    CommitCompleted,
    EventBody,
    EventHeader,
    Fenced,
    FetchStarted,
    FetchStopped,
    HeartbeatFailed,
    LeaveReason,
    MemberJoined,
    MemberLeft,
    RebalanceEnded,
    RebalanceStarted,
    StopReason,
    TelemetryEvent,
    TelemetryProtocol,
    encode,
)
from kgroup.types import TopicPartition

from .conftest import EventsFrame

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)


class Fleet:
    """Builds events member by member, numbering each member's events like an emitter."""

    def __init__(self, group: str = "g") -> None:
        self.group = group
        self.events: list[TelemetryEvent] = []
        self._seq: dict[str, itertools.count[int]] = defaultdict(itertools.count)

    def at(self, ts: float, member: str, body: EventBody) -> Fleet:
        header = EventHeader(
            ts=ts,
            mono=ts,
            seq=next(self._seq[member]),
            group=self.group,
            member_id=member,
            instance_id=None,
            client_id="c",
            host="h",
            pid=1,
            protocol=TelemetryProtocol.CONSUMER,
        )
        self.events.append(TelemetryEvent(header, body))
        return self

    def frame(self, events_frame: EventsFrame) -> DataFrame:
        return events_frame(self.events)


def assert_rows(actual: DataFrame, rows: list[tuple[object, ...]]) -> None:
    """``actual`` holds exactly ``rows`` (in any order; floats within Spark's default tolerance).

    Compared with Spark's own assertion; the expected side is a list of Rows
    rather than a DataFrame, which would need Spark's Python workers to build.
    """
    columns = actual.columns
    assert all(len(row) == len(columns) for row in rows), columns
    assertDataFrameEqual(actual, [Row(**dict(zip(columns, row, strict=True))) for row in rows])


def start(*tps: TopicPartition, epoch: int) -> FetchStarted:
    return FetchStarted(partitions=tps, epoch=epoch)


def stop(*tps: TopicPartition, epoch: int, reason: StopReason) -> FetchStopped:
    return FetchStopped(partitions=tps, epoch=epoch, reason=reason)


def hand_over() -> Fleet:
    """A fetches t-0 and t-1; t-0 moves to B, who closes; A's telemetry ends at 40."""
    return (
        Fleet()
        .at(1, "A", MemberJoined(epoch=1))
        .at(10, "A", start(T0, T1, epoch=1))
        .at(12, "A", start(T0, epoch=1))  # again: already fetching, changes nothing
        .at(15, "A", stop(T2, epoch=1, reason=StopReason.REVOKED))  # never started: ignored
        .at(
            19,
            "A",
            HeartbeatFailed(error="NOT_COORDINATOR", error_code=16, retriable=True, epoch=1),
        )
        .at(20, "A", stop(T0, epoch=2, reason=StopReason.REVOKED))
        .at(21, "B", start(T0, epoch=3))
        .at(30, "B", stop(T0, epoch=3, reason=StopReason.CLOSED))
        .at(30, "B", MemberLeft(reason=LeaveReason.CLOSED, epoch=-1))
        .at(40, "A", CommitCompleted(offsets=(), epoch=2, latency_s=0.01))
    )


def test_ownership_timeline(events_frame: EventsFrame) -> None:
    actual = analysis.ownership(hand_over().frame(events_frame))
    assert_rows(
        actual,
        [
            ("g", "t", 0, "A", None, "h", 1, 10.0, 20.0, "revoked", 2, 10.0),
            ("g", "t", 1, "A", None, "h", 1, 10.0, 40.0, "no_stop_seen", None, 30.0),
            ("g", "t", 0, "B", None, "h", 3, 21.0, 30.0, "closed", 3, 9.0),
        ],
    )


def test_unowned_gap_names_its_cause_and_the_last_error(events_frame: EventsFrame) -> None:
    events = hand_over().frame(events_frame)
    actual = analysis.unowned_gaps(events, analysis.ownership(events))
    assert_rows(
        actual.select(
            "group", "topic", "partition", "start", "end", "duration_s", "cause",
            "prev_member", "next_member", "cause_error",
        ),
        [("g", "t", 0, 20.0, 21.0, 1.0, "revoked", "A", "B", "NOT_COORDINATOR")],
    )  # fmt: skip


def test_a_partition_revoked_and_never_taken_is_a_trailing_gap(events_frame: EventsFrame) -> None:
    fleet = (
        Fleet()
        .at(10, "A", start(T0, epoch=1))
        .at(20, "A", stop(T0, epoch=2, reason=StopReason.LOST))
        .at(50, "A", MemberJoined(epoch=3))
    )
    events = fleet.frame(events_frame)
    gaps = analysis.unowned_gaps(events, analysis.ownership(events))
    row = gaps.select("start", "end", "cause", "next_member").collect()
    assert [tuple(r) for r in row] == [(20.0, 50.0, "lost", None)]


def test_handover_gap(events_frame: EventsFrame) -> None:
    events = hand_over().frame(events_frame)
    actual = analysis.handovers(analysis.ownership(events))
    assert_rows(actual, [("g", "t", 0, "A", "B", 1, 3, 20.0, "revoked", 21.0, 1.0)])


def test_clean_hand_over_has_no_double_ownership(events_frame: EventsFrame) -> None:
    events = hand_over().frame(events_frame)
    assert analysis.double_ownership(analysis.ownership(events)).count() == 0


def test_double_ownership_is_flagged_with_partition_members_and_interval(
    events_frame: EventsFrame,
) -> None:
    fleet = (
        Fleet()
        .at(100, "C", start(T0, T1, epoch=4))
        .at(120, "D", start(T0, epoch=5))  # C has not stopped yet
        .at(130, "C", stop(T0, T1, epoch=4, reason=StopReason.LOST))
        .at(150, "D", stop(T0, epoch=5, reason=StopReason.CLOSED))
        # E hands t-2 to F, whose clock runs 4 ms behind: within a 10 ms tolerance.
        .at(200, "E", start(T2, epoch=6))
        .at(210, "E", stop(T2, epoch=7, reason=StopReason.REVOKED))
        .at(209.996, "F", start(T2, epoch=7))
        .at(220, "F", stop(T2, epoch=7, reason=StopReason.CLOSED))
    )
    actual = analysis.double_ownership(
        analysis.ownership(fleet.frame(events_frame)), clock_skew_s=0.01
    )
    assert_rows(
        actual,
        [
            ("g", "t", 0, "C", "D", None, None, 4, 5, 120.0, 130.0, 10.0,
             "lost", "closed", False),
            ("g", "t", 2, "E", "F", None, None, 6, 7, 209.996, 210.0, 0.004,
             "revoked", "closed", True),
        ],
    )  # fmt: skip


def test_group_rebalances_merge_overlapping_member_rebalances(events_frame: EventsFrame) -> None:
    fleet = (
        Fleet()
        .at(5.0, "A", RebalanceStarted(trigger="join", epoch=0))
        .at(5.5, "B", RebalanceStarted(trigger="assignment_changed", epoch=1))
        .at(6.0, "A", RebalanceEnded(epoch=2, duration_s=1.0))
        .at(7.0, "B", RebalanceEnded(epoch=2, duration_s=1.5))
        .at(50.0, "C", RebalanceStarted(trigger="fenced", epoch=0))  # C never finishes
    )
    member_rb = analysis.member_rebalances(fleet.frame(events_frame))
    actual = analysis.rebalances(member_rb).select(
        "group", "rebalance", "start", "end", "duration_s", "trigger", "triggers",
        "members", "member_count", "epoch_from", "epoch_to", "incomplete",
    )  # fmt: skip
    assert_rows(
        actual,
        [
            ("g", 1, 5.0, 7.0, 2.0, "join", ["assignment_changed", "join"], ["A", "B"], 2, 0, 2, 0),
            ("g", 2, 50.0, 50.0, 0.0, "fenced", ["fenced"], ["C"], 1, 0, None, 1),
        ],
    )


def test_latency_percentiles(events_frame: EventsFrame) -> None:
    fleet = Fleet()
    for i in range(1, 101):
        fleet.at(
            i,
            "A",
            CallbackCompleted(callback=CallbackKind.REVOKED, partitions=(T0,), duration_s=i / 1000),
        )
    fleet.at(
        200, "A", CommitCompleted(offsets=(), epoch=1, latency_s=0.5, error="REBALANCE_IN_PROGRESS")
    )
    events = fleet.frame(events_frame)
    actual = analysis.latency(events, analysis.member_rebalances(events))
    assert_rows(
        actual,
        [
            ("g", "callback:on_partitions_revoked", 100, 0.050, 0.090, 0.099, 0.100),
            ("g", "commit:REBALANCE_IN_PROGRESS", 1, 0.5, 0.5, 0.5, 0.5),
        ],
    )


def test_fencing_and_membership(events_frame: EventsFrame) -> None:
    fleet = (
        Fleet()
        .at(1, "A", MemberJoined(epoch=1))
        .at(9, "A", Fenced(error="FENCED_MEMBER_EPOCH", error_code=110, epoch=3))
        .at(10, "A", MemberJoined(epoch=5))
        .at(30, "A", MemberLeft(reason=LeaveReason.CLOSED, epoch=-1))
        .at(2, "B", MemberJoined(epoch=1))
        .at(25, "B", CommitCompleted(offsets=(), epoch=1, latency_s=0.01))
    )
    events = fleet.frame(events_frame)
    fenced = analysis.fencing(events)
    assert_rows(fenced, [("g", 9.0, "A", None, "h", "FENCED_MEMBER_EPOCH", 110, 3)])
    members = analysis.membership(events).select(
        "member_id", "first_seen", "last_seen", "joined", "left", "leave_reason", "joins", "fenced"
    )
    assert_rows(
        members,
        [
            ("A", 1.0, 30.0, 1.0, 30.0, "closed", 2, 1),
            ("B", 2.0, 25.0, 2.0, None, None, 1, 0),
        ],
    )


def test_lines_that_are_not_events_are_marked_invalid(spark: SparkSession, tmp_path: Path) -> None:
    good = encode(hand_over().events[1])
    future = good.replace('"v":1', '"v":2')
    wrong_type = good.replace('"epoch":1', '"epoch":"one"')
    lines = [good, "not json", "[1, 2]", future, wrong_type, '{"v":1,"kind":"teleported"}']
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    parsed = parse(read_lines(spark, FileSource((str(tmp_path),))), keep_raw=True)
    rows = parsed.select("valid", "raw").collect()
    assert sorted((r["valid"], r["raw"]) for r in rows) == sorted(
        [(True, None)] + [(False, line) for line in lines[1:]]
    )


def test_spark_schema_has_every_field_the_encoder_writes() -> None:
    names = set(HEADER_FIELDS)
    for cls in BODY_TYPES.values():
        names |= {f.name for f in dataclasses.fields(cls)}
    assert set(EVENT_SCHEMA.fieldNames()) == names


@pytest.mark.parametrize("kind", ["fetch_started", "fetch_stopped"])
def test_fetch_operations_explode_partitions(events_frame: EventsFrame, kind: str) -> None:
    ops = analysis.fetch_operations(hand_over().frame(events_frame)).filter(
        F.col("op") == ("start" if kind == "fetch_started" else "stop")
    )
    expected = {"fetch_started": 4, "fetch_stopped": 3}[kind]
    assert ops.count() == expected


def test_compute_tables_builds_on_what_stage_returns(events_frame: EventsFrame) -> None:
    events = hand_over().frame(events_frame)
    staged: list[str] = []

    def stage(name: str, table: DataFrame) -> DataFrame:
        staged.append(name)
        # Dropping A's intervals shows in every table built on the ownership table.
        return table.filter(F.col("member_id") != "A") if name == "ownership" else table

    lazy = analysis.compute_tables(events)
    tables = analysis.compute_tables(events, stage=stage)
    assert staged == list(tables) == list(lazy)
    assert set(tables) == {
        "ownership", "member_rebalances", "double_ownership", "unowned_gaps", "handovers",
        "rebalances", "latency", "fencing", "membership", "summary",
    }  # fmt: skip
    # The only hand-over is A's to B.
    assert lazy["handovers"].count() == 1
    assert tables["handovers"].count() == 0
    assert lazy["summary"].select("ownership_intervals").collect() == [Row(ownership_intervals=3)]
    assert tables["summary"].select("ownership_intervals").collect() == [Row(ownership_intervals=1)]
