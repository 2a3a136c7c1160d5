"""The report's tables, as Spark DataFrame transformations.

Every function takes DataFrames and returns a DataFrame; nothing here
collects data to the driver. Times are Unix seconds (``double``) as in the
telemetry; :mod:`kgroup.report.job` turns them into timestamps when it writes
Parquet.

Definitions (``docs/report.md`` explains them at length):

ownership
    One row per interval in which a member *fetched* a partition: from its
    ``fetch_started`` to its next ``fetch_stopped`` for that partition.
    ``end_reason`` is the stop's reason (``revoked``, ``lost``, ``closed``),
    or ``no_stop_seen`` when the member's telemetry ends before a stop (it
    was killed, or the data ends): the interval then ends at the member's
    last event.
double_ownership
    Overlaps of two members' intervals on one partition (a safety violation).
unowned_gaps
    Stretches in which nobody fetched a partition that someone fetched
    before, with the cause (how the previous interval ended, and the error
    the previous owner last reported).
handovers
    For every interval followed by another one on the same partition: from
    the end of fetching to the next owner's first fetch (negative: overlap).
rebalances
    A member's rebalance runs from its ``rebalance_started`` to its
    ``rebalance_ended``; overlapping member rebalances of one group form one
    group rebalance (start, end, trigger, members involved).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

__all__ = [
    "NO_STOP_SEEN",
    "compute_tables",
    "double_ownership",
    "fencing",
    "fetch_operations",
    "handovers",
    "latency",
    "member_rebalances",
    "membership",
    "ownership",
    "rebalances",
    "summary",
    "unowned_gaps",
]

NO_STOP_SEEN = "no_stop_seen"
"""``end_reason`` of an interval whose member's telemetry ended while it fetched."""

# Errors a member reported at most this long before a gap began are named as its cause.
_CAUSE_WINDOW_S = 120.0

_UNBOUNDED = Window.unboundedPreceding


def _member_events(events: DataFrame) -> DataFrame:
    return events.filter(F.col("member_id") != "")


def fetch_operations(events: DataFrame) -> DataFrame:
    """One row per partition of every fetch_started / fetch_stopped event."""
    carried = ["member_id", "instance_id", "host", "ts", "seq", "epoch", "reason"]
    return (
        _member_events(events)
        .filter(F.col("kind").isin("fetch_started", "fetch_stopped"))
        .select(
            "group",
            *carried,
            F.when(F.col("kind") == "fetch_started", F.lit("start"))
            .otherwise(F.lit("stop"))
            .alias("op"),
            F.explode("partitions").alias("tp"),
        )
        .select(
            "group",
            F.col("tp.topic").alias("topic"),
            F.col("tp.partition").alias("partition"),
            *carried,
            "op",
        )
    )


def _last_seen(events: DataFrame) -> DataFrame:
    return _member_events(events).groupBy("group", "member_id").agg(F.max("ts").alias("last_seen"))


def ownership(events: DataFrame) -> DataFrame:
    """Fetching intervals: group, topic, partition, member_id, instance_id, host, epoch,
    start, end, duration_s, end_reason, end_epoch."""
    key = ["group", "topic", "partition", "member_id"]
    order = Window.partitionBy(*key).orderBy("ts", "seq")
    ops = fetch_operations(events).withColumn("prev_op", F.lag("op").over(order))
    # Keep state changes only: a start while already fetching, or a stop while
    # not fetching (its start may be in a file rotated away), changes nothing.
    transitions = ops.filter(
        ((F.col("op") == "start") & (F.col("prev_op").isNull() | (F.col("prev_op") == "stop")))
        | ((F.col("op") == "stop") & (F.col("prev_op") == "start"))
    )
    # What follows a start among the transitions is its stop (they alternate).
    paired = (
        transitions.withColumn("next_ts", F.lead("ts").over(order))
        .withColumn("next_reason", F.lead("reason").over(order))
        .withColumn("next_epoch", F.lead("epoch").over(order))
        .filter(F.col("op") == "start")
    )
    return (
        paired.join(_last_seen(events), ["group", "member_id"], "left")
        .select(
            "group",
            "topic",
            "partition",
            "member_id",
            "instance_id",
            "host",
            "epoch",
            F.col("ts").alias("start"),
            F.coalesce("next_ts", "last_seen").alias("end"),
            F.coalesce("next_reason", F.lit(NO_STOP_SEEN)).alias("end_reason"),
            F.col("next_epoch").alias("end_epoch"),
        )
        .withColumn("duration_s", F.col("end") - F.col("start"))
    )


def double_ownership(intervals: DataFrame, clock_skew_s: float = 0.0) -> DataFrame:
    """Overlapping intervals of two members on one partition.

    group, topic, partition, member_a, member_b (a < b), instance_a, instance_b,
    epoch_a, epoch_b, start, end, overlap_s, end_reason_a, end_reason_b,
    within_skew (the overlap is no longer than ``clock_skew_s``: members on
    different hosts compare wall clocks, so such an overlap may be an artefact).
    """
    a = intervals.alias("a")
    b = intervals.alias("b")
    joined = a.join(
        b,
        (F.col("a.group") == F.col("b.group"))
        & (F.col("a.topic") == F.col("b.topic"))
        & (F.col("a.partition") == F.col("b.partition"))
        & (F.col("a.member_id") < F.col("b.member_id"))
        & (F.col("a.start") < F.col("b.end"))
        & (F.col("b.start") < F.col("a.end")),
    )
    start = F.greatest("a.start", "b.start")
    end = F.least("a.end", "b.end")

    def both(column: str, name: str) -> list[Column]:
        # One interval column of each side, as name_a and name_b.
        return [F.col(f"{side}.{column}").alias(f"{name}_{side}") for side in ("a", "b")]

    return joined.select(
        *(F.col(f"a.{key}").alias(key) for key in ("group", "topic", "partition")),
        *both("member_id", "member"),
        *both("instance_id", "instance"),
        *both("epoch", "epoch"),
        start.alias("start"),
        end.alias("end"),
        (end - start).alias("overlap_s"),
        *both("end_reason", "end_reason"),
        ((end - start) <= F.lit(clock_skew_s)).alias("within_skew"),
    )


def _member_errors(events: DataFrame) -> DataFrame:
    return (
        _member_events(events)
        .filter(
            F.col("kind").isin("fenced", "partitions_lost", "heartbeat_error")
            & F.col("error").isNotNull()
        )
        .select(
            F.col("group").alias("error_group"),
            F.col("member_id").alias("error_member"),
            F.col("ts").alias("error_ts"),
            "error",
        )
    )


def _gap_columns(previous: str, *, end: Column, next_member: Column) -> list[Column]:
    """A gap's columns: from the end of struct ``previous`` (an interval) to ``end``."""
    return [
        F.col("group"),
        F.col("topic"),
        F.col("partition"),
        F.col(f"{previous}.end").alias("start"),
        end.alias("end"),
        F.col(f"{previous}.end_reason").alias("cause"),
        F.col(f"{previous}.member_id").alias("prev_member"),
        next_member.alias("next_member"),
    ]


def unowned_gaps(events: DataFrame, intervals: DataFrame) -> DataFrame:
    """Times nobody fetched a partition that was fetched before.

    group, topic, partition, start, end, duration_s, cause (how the previous
    coverage ended: revoked, lost, closed, no_stop_seen), cause_error (the last
    error the previous owner reported shortly before), prev_member,
    next_member (null: nobody took the partition before the group's
    telemetry ends; only counted after a revocation or a loss).
    """
    order = Window.partitionBy("group", "topic", "partition").orderBy("start", "member_id")
    # The interval reaching furthest so far: coverage is the union of intervals.
    reach = F.max(F.struct("end", "end_reason", "member_id")).over(
        order.rowsBetween(_UNBOUNDED, -1)
    )
    inner = (
        intervals.withColumn("prev", reach)
        .filter(F.col("prev.end") < F.col("start"))
        .select(*_gap_columns("prev", end=F.col("start"), next_member=F.col("member_id")))
    )
    group_end = events.groupBy("group").agg(F.max("ts").alias("group_end"))
    last = intervals.groupBy("group", "topic", "partition").agg(
        F.max(F.struct("end", "end_reason", "member_id")).alias("last")
    )
    trailing = (
        last.join(group_end, "group")
        .filter(
            F.col("last.end_reason").isin("revoked", "lost")
            & (F.col("group_end") > F.col("last.end"))
        )
        .select(
            *_gap_columns("last", end=F.col("group_end"), next_member=F.lit(None).cast("string"))
        )
    )
    gaps = inner.unionByName(trailing).withColumn("duration_s", F.col("end") - F.col("start"))
    errors = _member_errors(events)
    with_errors = gaps.join(
        errors,
        (F.col("group") == F.col("error_group"))
        & (F.col("prev_member") == F.col("error_member"))
        & (F.col("error_ts") <= F.col("start") + F.lit(1e-3))
        & (F.col("error_ts") >= F.col("start") - F.lit(_CAUSE_WINDOW_S)),
        "left",
    )
    return with_errors.groupBy(
        "group",
        "topic",
        "partition",
        "start",
        "end",
        "duration_s",
        "cause",
        "prev_member",
        "next_member",
    ).agg(F.max_by("error", "error_ts").alias("cause_error"))


def handovers(intervals: DataFrame) -> DataFrame:
    """From the end of each interval to the start of the next one on the partition.

    group, topic, partition, from_member, to_member, from_epoch, to_epoch,
    released (end of fetching), release_reason, first_fetch, gap_s
    (negative: the next owner started before the previous one stopped).
    """
    order = Window.partitionBy("group", "topic", "partition").orderBy("start", "member_id")
    return (
        intervals.withColumn("to_member", F.lead("member_id").over(order))
        .withColumn("to_epoch", F.lead("epoch").over(order))
        .withColumn("first_fetch", F.lead("start").over(order))
        .filter(F.col("to_member").isNotNull())
        .select(
            "group",
            "topic",
            "partition",
            F.col("member_id").alias("from_member"),
            "to_member",
            F.col("epoch").alias("from_epoch"),
            "to_epoch",
            F.col("end").alias("released"),
            F.col("end_reason").alias("release_reason"),
            "first_fetch",
            (F.col("first_fetch") - F.col("end")).alias("gap_s"),
        )
    )


def member_rebalances(events: DataFrame) -> DataFrame:
    """Each member's rebalances: group, member_id, start, end (null if it never ended),
    duration_s, trigger, epoch_from, epoch_to, error, completed."""
    order = Window.partitionBy("group", "member_id").orderBy("ts", "seq")
    marks = (
        _member_events(events)
        .filter(F.col("kind").isin("rebalance_started", "rebalance_ended"))
        .withColumn("next_kind", F.lead("kind").over(order))
        .withColumn("next_ts", F.lead("ts").over(order))
        .withColumn("next_epoch", F.lead("epoch").over(order))
        .withColumn("next_error", F.lead("error").over(order))
        .filter(F.col("kind") == "rebalance_started")
    )
    done = F.coalesce(F.col("next_kind") == "rebalance_ended", F.lit(False))
    return marks.select(
        "group",
        "member_id",
        F.col("ts").alias("start"),
        F.when(done, F.col("next_ts")).alias("end"),
        F.when(done, F.col("next_ts") - F.col("ts")).alias("duration_s"),
        "trigger",
        F.col("epoch").alias("epoch_from"),
        F.when(done, F.col("next_epoch")).alias("epoch_to"),
        F.when(done, F.col("next_error")).alias("error"),
        done.alias("completed"),
    )


def rebalances(member_rebalance: DataFrame) -> DataFrame:
    """Group rebalances: overlapping member rebalances of a group, merged.

    group, rebalance (1, 2, ... per group), start, end, duration_s, trigger
    (of the member that started first), triggers, members (ids), member_count,
    epoch_from, epoch_to, incomplete (member rebalances that never ended).
    """
    order = Window.partitionBy("group").orderBy("start", "member_id")
    marked = (
        member_rebalance.withColumn("until", F.coalesce("end", "start"))
        .withColumn("reach", F.max("until").over(order.rowsBetween(_UNBOUNDED, -1)))
        .withColumn(
            "opens",
            F.when(F.col("reach").isNull() | (F.col("start") > F.col("reach")), 1).otherwise(0),
        )
        .withColumn("rebalance", F.sum("opens").over(order.rowsBetween(_UNBOUNDED, 0)))
    )
    return (
        marked.groupBy("group", "rebalance")
        .agg(
            F.min("start").alias("start"),
            F.max("until").alias("end"),
            F.min_by("trigger", F.struct("start", "member_id")).alias("trigger"),
            F.array_sort(F.collect_set("trigger")).alias("triggers"),
            F.array_sort(F.collect_set("member_id")).alias("members"),
            F.min("epoch_from").alias("epoch_from"),
            F.max("epoch_to").alias("epoch_to"),
            F.sum(F.when(~F.col("completed"), 1).otherwise(0)).alias("incomplete"),
        )
        .withColumn("duration_s", F.col("end") - F.col("start"))
        .withColumn("member_count", F.size("members"))
    )


def _percentiles(values: DataFrame) -> DataFrame:
    pct = F.percentile_approx("value", [0.5, 0.9, 0.99], 10_000)
    return (
        values.groupBy("group", "metric")
        .agg(F.count("value").alias("count"), pct.alias("p"), F.max("value").alias("max_s"))
        .select(
            "group",
            "metric",
            "count",
            F.col("p")[0].alias("p50_s"),
            F.col("p")[1].alias("p90_s"),
            F.col("p")[2].alias("p99_s"),
            "max_s",
        )
    )


def latency(events: DataFrame, member_rebalance: DataFrame) -> DataFrame:
    """Latency percentiles per group and metric: ``callback:<name>``,
    ``commit:<ok|error>``, ``member_rebalance``. Columns count, p50_s, p90_s,
    p99_s, max_s."""
    callbacks = events.filter(F.col("kind") == "callback").select(
        "group",
        F.concat(F.lit("callback:"), F.col("callback")).alias("metric"),
        F.col("duration_s").alias("value"),
    )
    commits = events.filter(F.col("kind") == "commit").select(
        "group",
        F.concat(F.lit("commit:"), F.coalesce("error", F.lit("ok"))).alias("metric"),
        F.col("latency_s").alias("value"),
    )
    member = member_rebalance.filter("completed").select(
        "group", F.lit("member_rebalance").alias("metric"), F.col("duration_s").alias("value")
    )
    return _percentiles(callbacks.unionByName(commits).unionByName(member))


def fencing(events: DataFrame) -> DataFrame:
    """Every fencing: group, ts, member_id, instance_id, host, error, error_code, epoch."""
    return events.filter(F.col("kind") == "fenced").select(
        "group", "ts", "member_id", "instance_id", "host", "error", "error_code", "epoch"
    )


def _first_where(condition: Column, *fields: str) -> Column:
    return F.min(F.when(condition, F.struct("ts", *fields)))


def membership(events: DataFrame) -> DataFrame:
    """One row per member: group, member_id, instance_id, host, client_id, protocol,
    first_seen, last_seen, joined, left, leave_reason (null: it never said it
    left), joins, fenced."""
    kind = F.col("kind")
    return (
        _member_events(events)
        .groupBy("group", "member_id")
        .agg(
            # Header fields, the same in all of a member's events (max skips nulls).
            *(
                F.max(field).alias(field)
                for field in ("instance_id", "host", "client_id", "protocol")
            ),
            F.min("ts").alias("first_seen"),
            F.max("ts").alias("last_seen"),
            F.min(F.when(kind == "member_joined", F.col("ts"))).alias("joined"),
            F.max(F.when(kind == "member_left", F.struct("ts", "reason"))).alias("_left"),
            F.sum(F.when(kind == "member_joined", 1).otherwise(0)).alias("joins"),
            F.sum(F.when(kind == "fenced", 1).otherwise(0)).alias("fenced"),
        )
        .withColumn("left", F.col("_left.ts"))
        .withColumn("leave_reason", F.col("_left.reason"))
        .drop("_left")
    )


def summary(
    *,
    events: DataFrame,
    intervals: DataFrame,
    doubles: DataFrame,
    gaps: DataFrame,
    group_rebalances: DataFrame,
    fenced: DataFrame,
    members: DataFrame,
) -> DataFrame:
    """One row per group: counts and totals of every table (the report's headline)."""
    base = events.groupBy("group").agg(
        F.count(F.lit(1)).alias("events"),
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
    )
    parts = [
        members.groupBy("group").agg(F.count(F.lit(1)).alias("members")),
        intervals.groupBy("group").agg(
            F.count(F.lit(1)).alias("ownership_intervals"),
            F.countDistinct("topic", "partition").alias("partitions"),
        ),
        doubles.groupBy("group").agg(
            F.sum(F.when(~F.col("within_skew"), 1).otherwise(0)).alias("double_ownership"),
            F.sum(F.when(F.col("within_skew"), 1).otherwise(0)).alias(
                "double_ownership_within_skew"
            ),
            F.sum(F.when(~F.col("within_skew"), F.col("overlap_s")).otherwise(0.0)).alias(
                "double_ownership_s"
            ),
        ),
        gaps.groupBy("group").agg(
            F.count(F.lit(1)).alias("unowned_gaps"),
            F.sum("duration_s").alias("unowned_s"),
            F.max("duration_s").alias("longest_gap_s"),
        ),
        group_rebalances.groupBy("group").agg(
            F.count(F.lit(1)).alias("rebalances"),
            F.percentile_approx("duration_s", 0.5).alias("rebalance_p50_s"),
            F.max("duration_s").alias("rebalance_max_s"),
        ),
        fenced.groupBy("group").agg(F.count(F.lit(1)).alias("fencings")),
    ]
    out = base
    for part in parts:
        out = out.join(part, "group", "left")
    zero_counts = [
        "members",
        "ownership_intervals",
        "partitions",
        "double_ownership",
        "double_ownership_within_skew",
        "unowned_gaps",
        "rebalances",
        "fencings",
    ]
    out = out.fillna(0, subset=zero_counts).fillna(0.0, subset=["double_ownership_s", "unowned_s"])
    return out


def compute_tables(
    events: DataFrame,
    clock_skew_s: float = 0.0,
    *,
    stage: Callable[[str, DataFrame], DataFrame] | None = None,
) -> dict[str, DataFrame]:
    """Every table of the report from parsed events, by name, each defined once from the
    tables it depends on.

    ``stage(name, table)`` is called with each table as soon as it is defined, and what it
    returns stands for the table from then on: :func:`kgroup.report.job.run_report` writes
    the table to Parquet and reads it back, so that Spark computes each table once instead
    of once per table that uses it. Without ``stage`` every table stays lazy.

    The session needs ``spark.sql.constraintPropagation.enabled=false`` (as
    :func:`kgroup.report.job.build_session` sets): with it, Spark's optimizer
    does not finish planning the rebalance tables.
    """
    tables: dict[str, DataFrame] = {}

    def add(name: str, table: DataFrame) -> DataFrame:
        tables[name] = table if stage is None else stage(name, table)
        return tables[name]

    intervals = add("ownership", ownership(events))
    member_rb = add("member_rebalances", member_rebalances(events))
    doubles = add("double_ownership", double_ownership(intervals, clock_skew_s))
    gaps = add("unowned_gaps", unowned_gaps(events, intervals))
    add("handovers", handovers(intervals))
    group_rb = add("rebalances", rebalances(member_rb))
    add("latency", latency(events, member_rb))
    fenced = add("fencing", fencing(events))
    members = add("membership", membership(events))
    add(
        "summary",
        summary(
            events=events,
            intervals=intervals,
            doubles=doubles,
            gaps=gaps,
            group_rebalances=group_rb,
            fenced=fenced,
            members=members,
        ),
    )
    return tables
