"""The ``kgroup report`` Spark job: telemetry in, Parquet tables and an HTML report out.

The job stays a Spark job end to end: the telemetry is parsed into a Parquet
``events`` table, every other table is computed from Parquet by Spark and
written as Parquet, and only small final aggregates (one summary row per
group, histogram bins, at most a few thousand intervals for the plots) reach
the driver, for the HTML page.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kgroup.errors import ReportInputError
from kgroup.report import analysis
from kgroup.report.source import KafkaSource, Source, parse, read_lines

__all__ = [
    "TABLES",
    "GroupSummary",
    "ReportResult",
    "build_session",
    "run_report",
    "run_report_in_session",
]

_log = logging.getLogger("kgroup.report")

TABLES = (
    "events",
    "ownership",
    "double_ownership",
    "unowned_gaps",
    "handovers",
    "member_rebalances",
    "rebalances",
    "latency",
    "fencing",
    "membership",
    "summary",
)
"""The Parquet tables the job writes under ``<out>/tables``."""

# Plot budgets: what the HTML page draws is bounded whatever the input size.
_GANTT_PARTITIONS = 24
_GANTT_INTERVALS = 4000
_HEATMAP_MEMBERS = 400
_TIMELINE_MEMBERS = 60
_TIME_BUCKETS = 240
_TOP_ROWS = 50
_MAX_GROUPS_IN_HTML = 10


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """The headline numbers of one group (a row of the ``summary`` table)."""

    group: str
    events: int
    first_ts: float
    last_ts: float
    members: int
    partitions: int
    ownership_intervals: int
    double_ownership: int
    double_ownership_within_skew: int
    double_ownership_s: float
    unowned_gaps: int
    unowned_s: float
    longest_gap_s: float | None
    rebalances: int
    rebalance_p50_s: float | None
    rebalance_max_s: float | None
    fencings: int


@dataclass(frozen=True, slots=True)
class ReportResult:
    """What :func:`run_report` produced."""

    out_dir: Path
    tables: Mapping[str, Path]
    html: Path | None
    groups: tuple[GroupSummary, ...]
    events: int
    malformed: int
    seconds: float

    @property
    def double_ownership(self) -> int:
        """Double-ownership intervals beyond the clock-skew tolerance, over all groups."""
        return sum(g.double_ownership for g in self.groups)


def build_session(
    master: str = "local[*]",
    *,
    kafka: bool = False,
    driver_memory: str | None = "2g",
    shuffle_partitions: int | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession for the report (Spark's UI off, UTC, the Kafka connector if asked).

    Sessions made elsewhere need ``spark.sql.constraintPropagation.enabled=false``
    to plan the report's queries in reasonable time.

    ``driver_memory`` and the jars only take effect when this starts Spark's JVM
    (not when a session already runs in this process).
    """
    builder = (
        SparkSession.builder.master(master)
        .appName("kgroup report")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # Catalyst's constraint propagation explodes on the report's plans
        # (windows over windows, as in rebalances(member_rebalances(...))):
        # planning never finishes and the driver runs out of memory.
        .config("spark.sql.constraintPropagation.enabled", "false")
    )
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if kafka:
        from kgroup.report.jars import resolve_kafka_connector  # noqa: PLC0415

        jars = resolve_kafka_connector()
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def run_report_in_session(
    source: Source,
    out_dir: str | Path,
    *,
    master: str = "local[*]",
    driver_memory: str | None = "2g",
    conf: Mapping[str, str] | None = None,
    clock_skew_s: float = 0.0,
    html: bool = True,
) -> ReportResult:
    """:func:`run_report` in a session of :func:`build_session` (the Kafka connector if
    ``source`` is a topic), stopped afterwards unless it was running already.

    What ``kgroup report`` runs: a session already running in this process (an
    application embedding the command, a test) is used as it is and left running.
    """
    owned = SparkSession.getActiveSession() is None
    spark = build_session(
        master,
        kafka=isinstance(source, KafkaSource),
        driver_memory=driver_memory,
        conf=conf,
    )
    try:
        return run_report(spark, source, out_dir, clock_skew_s=clock_skew_s, html=html)
    finally:
        if owned:
            spark.stop()


def _write(df: DataFrame, path: Path) -> Path:
    df.write.mode("overwrite").parquet(str(path))
    return path


def run_report(
    spark: SparkSession,
    source: Source,
    out_dir: str | Path,
    *,
    clock_skew_s: float = 0.0,
    html: bool = True,
) -> ReportResult:
    """Read ``source``, write every table under ``<out_dir>/tables`` and ``report.html``.

    Raises:
        ReportInputError: the input does not exist or holds no telemetry event.
    """
    started = time.monotonic()
    out = Path(out_dir)
    tables_dir = out / "tables"
    if tables_dir.exists():
        shutil.rmtree(tables_dir)
    tables_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}

    _log.info("reading telemetry from %s", source.describe())
    staged = parse(read_lines(spark, source), keep_raw=True)
    # Partitioned by validity: readers prune the malformed rows for free, and
    # the malformed lines stay inspectable (column raw).
    staged.write.mode("overwrite").partitionBy("valid").parquet(str(tables_dir / "events"))
    paths["events"] = tables_dir / "events"
    everything = spark.read.parquet(str(tables_dir / "events"))
    # Partition values come back as strings ("true" / "false").
    valid = F.col("valid").cast("boolean")
    counts = {
        row["valid"]: row["count"]
        for row in everything.groupBy(valid.alias("valid")).count().collect()
    }
    malformed, event_count = counts.get(False, 0), counts.get(True, 0)
    events = everything.filter(valid).drop("valid", "raw")
    if event_count == 0:
        raise ReportInputError(
            f"no telemetry events in {source.describe()}"
            + (f" ({malformed} lines were not events)" if malformed else "")
        )
    if malformed:
        _log.warning(
            "%d input lines were not telemetry events (table events, valid=false)", malformed
        )

    def stage(name: str, table: DataFrame) -> DataFrame:
        # Each table is written and read back, so that Spark computes it once
        # instead of once per table that uses it.
        if name == "summary":
            table = table.coalesce(1)  # one row per group: one file
        paths[name] = _write(table, tables_dir / name)
        return spark.read.parquet(str(paths[name]))

    read = analysis.compute_tables(events, clock_skew_s, stage=stage)
    groups = tuple(
        GroupSummary(**row.asDict()) for row in read["summary"].orderBy(F.desc("events")).collect()
    )

    html_path = None
    if html:
        from kgroup.report.html import render_report  # noqa: PLC0415 - matplotlib

        page = render_report(
            groups=groups,
            data=[_html_data(read, g) for g in groups[:_MAX_GROUPS_IN_HTML]],
            source=source.describe(),
            events=event_count,
            malformed=malformed,
            clock_skew_s=clock_skew_s,
            more_groups=max(0, len(groups) - _MAX_GROUPS_IN_HTML),
        )
        html_path = out / "report.html"
        html_path.write_text(page, encoding="utf-8")
    result = ReportResult(
        out_dir=out,
        tables=paths,
        html=html_path,
        groups=groups,
        events=event_count,
        malformed=malformed,
        seconds=time.monotonic() - started,
    )
    _log.info(
        "report of %d events in %.1f s: %d groups, %d double-ownership intervals",
        event_count,
        result.seconds,
        len(groups),
        result.double_ownership,
    )
    return result


# --- data for the HTML page: small, bounded collections -------------------------------------


def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in df.collect()]


def _log_histogram(
    values: DataFrame, column: str, *, low: float = 1e-4, high: float = 1e4, per_decade: int = 4
) -> dict[str, Any]:
    """Counts of positive values in logarithmic bins (bin -1: zero or negative), by Spark."""
    bins = round(math.log10(high / low) * per_decade)
    x = F.col(column)
    index = F.when(x <= 0, F.lit(-1)).otherwise(
        F.least(
            F.greatest(F.floor((F.log10(x) - math.log10(low)) * per_decade), F.lit(0)),
            F.lit(bins - 1),
        )
    )
    counted = values.filter(x.isNotNull()).groupBy(index.cast("int").alias("bin")).count().collect()
    counts = [0] * bins
    non_positive = 0
    for row in counted:
        if row["bin"] < 0:
            non_positive = row["count"]
        else:
            counts[row["bin"]] += row["count"]
    edges = [low * 10 ** (i / per_decade) for i in range(bins + 1)]
    return {"edges": edges, "counts": counts, "non_positive": non_positive}


def _ownership_heatmap(
    intervals: DataFrame, members: list[str], t0: float, t1: float
) -> dict[str, Any]:
    """Partitions each member fetched at the end of each time bucket (Spark computes it)."""
    width = max((t1 - t0) / _TIME_BUCKETS, 1e-6)
    steps = intervals.filter(F.col("member_id").isin(members)).select(
        "member_id",
        F.explode(
            F.array(
                F.struct(F.col("start").alias("ts"), F.lit(1).alias("delta")),
                F.struct(F.col("end").alias("ts"), F.lit(-1).alias("delta")),
            )
        ).alias("s"),
    )
    from pyspark.sql import Window  # noqa: PLC0415

    order = Window.partitionBy("member_id").orderBy("s.ts", "s.delta")
    running = steps.withColumn("owned", F.sum("s.delta").over(order)).withColumn(
        "bucket",
        F.least(
            F.floor((F.col("s.ts") - F.lit(t0)) / F.lit(width)).cast("int"),
            F.lit(_TIME_BUCKETS - 1),
        ),
    )
    last = running.groupBy("member_id", "bucket").agg(
        F.max_by("owned", F.struct("s.ts", F.col("s.delta") * -1)).alias("owned")
    )
    index = {m: i for i, m in enumerate(members)}
    grid = [[-1] * _TIME_BUCKETS for _ in members]
    for row in last.collect():
        grid[index[row["member_id"]]][row["bucket"]] = row["owned"]
    # Carry the count forward through buckets without a change.
    for line in grid:
        current = 0
        for i, value in enumerate(line):
            if value >= 0:
                current = value
            line[i] = current
    return {"t0": t0, "t1": t1, "members": members, "grid": grid}


def _html_data(tables: Mapping[str, DataFrame], group: GroupSummary) -> dict[str, Any]:
    def of(name: str) -> DataFrame:
        return tables[name].filter(F.col("group") == group.group)

    intervals = of("ownership")
    doubles = of("double_ownership")
    members_df = of("membership")
    doubled = doubles.select("topic", "partition").distinct().withColumn("doubled", F.lit(1))
    chosen = (
        intervals.groupBy("topic", "partition")
        .count()
        .join(doubled, ["topic", "partition"], "left")
        .orderBy(F.desc_nulls_last("doubled"), F.desc("count"), "topic", "partition")
        .limit(_GANTT_PARTITIONS)
        .select("topic", "partition")
    )
    gantt = _rows(
        intervals.join(chosen, ["topic", "partition"])
        .select("topic", "partition", "member_id", "start", "end", "end_reason", "epoch")
        .orderBy("start")
        .limit(_GANTT_INTERVALS)
    )
    double_rows = _rows(doubles.orderBy(F.desc("overlap_s")).limit(_TOP_ROWS))
    member_rows = _rows(
        members_df.orderBy("first_seen", "member_id").limit(
            max(_HEATMAP_MEMBERS, _TIMELINE_MEMBERS)
        )
    )
    heatmap = _ownership_heatmap(
        intervals,
        [m["member_id"] for m in member_rows[:_HEATMAP_MEMBERS]],
        group.first_ts,
        group.last_ts,
    )
    fenced_rows = _rows(of("fencing").orderBy("ts").limit(_TOP_ROWS * 4))
    gaps = of("unowned_gaps")
    return {
        "group": group,
        "gantt": gantt,
        # The Gantt shows partitions with double ownership first, so the
        # longest overlaps are on it (the plot skips the others).
        "gantt_doubles": double_rows,
        "doubles": double_rows,
        "members": member_rows[:_TIMELINE_MEMBERS],
        "member_total": group.members,
        "heatmap": heatmap,
        "fencing": fenced_rows,
        "gap_causes": _rows(
            gaps.groupBy("cause", "cause_error")
            .agg(
                F.count(F.lit(1)).alias("count"),
                F.sum("duration_s").alias("total_s"),
                F.max("duration_s").alias("max_s"),
            )
            .orderBy(F.desc("count"))
        ),
        "longest_gaps": _rows(gaps.orderBy(F.desc("duration_s")).limit(20)),
        "gap_hist": _log_histogram(of("handovers"), "gap_s"),
        "rebalance_hist": _log_histogram(of("rebalances"), "duration_s"),
        "longest_rebalances": _rows(
            of("rebalances")
            .orderBy(F.desc("duration_s"))
            .limit(20)
            .select(
                "start",
                "duration_s",
                "trigger",
                "member_count",
                "epoch_from",
                "epoch_to",
                "incomplete",
            )
        ),
        "latency": _rows(of("latency").orderBy("metric")),
    }


def summaries_text(groups: Iterable[GroupSummary]) -> list[str]:
    """One line per group for the terminal."""
    return [
        f"group {g.group}: {g.events} events, {g.members} members, {g.partitions} partitions, "
        f"{g.rebalances} rebalances, {g.unowned_gaps} unowned gaps, "
        f"{g.double_ownership} double-ownership intervals, {g.fencings} fencings"
        for g in groups
    ]


def kafka_source(
    bootstrap_servers: str, topic: str, options: Sequence[tuple[str, str]] = ()
) -> KafkaSource:
    """A :class:`KafkaSource` with extra ``kafka.*`` options."""
    return KafkaSource(bootstrap_servers, topic, dict(options))
