"""A local SparkSession for the report's tests, and helpers that turn events into DataFrames.

One session serves the whole test session (Spark's JVM takes seconds to start).
Its settings favour many tiny jobs over throughput: one shuffle partition, no
whole-stage code generation and the JIT's quick tier only (on a busy two-core
machine that halves the time of a report over a few thousand events). It has
Spark's Kafka connector on its classpath, resolved with Maven like the broker's
jars, for the topic-source test.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from kgroup.report.job import build_session
from kgroup.report.source import FileSource, parse, read_lines
from kgroup.report.synth import SynthConfig, SynthResult, generate
from kgroup.telemetry import TelemetryEvent, encode

FAST_SMALL_JOBS = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.sql.adaptive.enabled": "false",
    "spark.default.parallelism": "1",
}

# Small, churny, one injected fault: every table of the report gets rows.
SMALL_FLEET = SynthConfig(
    members=6,
    partitions=24,
    hours=0.5,
    churn_per_hour=24,
    commit_interval_s=10,
    files=3,
    seed=7,
)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session(
        "local[2]",
        kafka=True,
        driver_memory="1g",
        shuffle_partitions=1,
        conf=FAST_SMALL_JOBS,
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


EventsFrame = Callable[[Iterable[TelemetryEvent | str]], DataFrame]


@pytest.fixture(scope="session")
def events_frame(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> EventsFrame:
    """Parsed events from telemetry events (or raw lines), through the report's own reader.

    The lines go through a file, as the report reads them: a DataFrame built
    from a Python list would need Spark's Python workers, which cost more
    than the tests' queries themselves.
    """
    folder = tmp_path_factory.mktemp("events")
    counter = itertools.count()

    def frame(events: Iterable[TelemetryEvent | str]) -> DataFrame:
        path = folder / f"events-{next(counter)}.jsonl"
        path.write_text("".join((e if isinstance(e, str) else encode(e)) + "\n" for e in events))
        parsed = parse(read_lines(spark, FileSource((str(path),))))
        return parsed.filter("valid").drop("valid")

    return frame


@pytest.fixture(scope="session")
def injected_fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SynthResult]:
    """Synthetic telemetry of SMALL_FLEET with one misbehaving member."""
    out = tmp_path_factory.mktemp("injected-fleet")
    config = dataclasses.replace(SMALL_FLEET, inject_double_ownership=1)
    return out / "telemetry", generate(config, out)


@pytest.fixture(scope="session")
def clean_fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SynthResult]:
    """Synthetic telemetry of SMALL_FLEET, all members well-behaved."""
    out = tmp_path_factory.mktemp("clean-fleet")
    return out / "telemetry", generate(SMALL_FLEET, out)
