"""Reading telemetry into Spark: JSON Lines files, or a Kafka topic through Spark's Kafka source.

Both sources become a DataFrame of one string column, ``value`` (a JSON line or
a record's value), which :func:`parse` turns into events with one parser, so
the two sources cannot disagree about what an event means.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kgroup.errors import ReportInputError
from kgroup.report.schema import EVENT_SCHEMA, valid_event

__all__ = ["FileSource", "KafkaSource", "Source", "parse", "read_lines"]


@dataclass(frozen=True, slots=True)
class FileSource:
    """JSON Lines files: files, directories (read recursively) or glob patterns."""

    paths: tuple[str, ...]

    def describe(self) -> str:
        return "files " + ", ".join(self.paths)


@dataclass(frozen=True, slots=True)
class KafkaSource:
    """A topic the Kafka telemetry sink writes, read from its earliest to its latest offsets."""

    bootstrap_servers: str
    topic: str
    options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Extra ``kafka.*`` options for Spark's Kafka source (security settings)."""

    def describe(self) -> str:
        return f"topic {self.topic} at {self.bootstrap_servers}"


Source = FileSource | KafkaSource


def _check_paths(paths: Sequence[str]) -> None:
    if not paths:
        raise ReportInputError("no input: give --input PATH (files, directories or globs)")
    for path in paths:
        if any(ch in path for ch in "*?[") or "://" in path:
            continue  # a glob or a remote filesystem: Spark resolves it
        if not Path(path).exists():
            raise ReportInputError(f"input {path} does not exist")


def read_lines(spark: SparkSession, source: Source) -> DataFrame:
    """The raw telemetry, one string column ``value`` per event.

    Records read from Kafka are deduplicated: the producer may deliver a
    record twice after a retry, and an event is identified by its full text
    (the header carries the emitter's clocks and sequence number).
    """
    if isinstance(source, FileSource):
        _check_paths(source.paths)
        # Hidden files (.crc, _SUCCESS) are skipped by Spark itself.
        return (
            spark.read.option("recursiveFileLookup", "true")
            .text(list(source.paths))
            .select(F.col("value"))
        )
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", source.bootstrap_servers)
        .option("subscribe", source.topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("failOnDataLoss", "false")
    )
    for key, value in source.options.items():
        reader = reader.option(key if key.startswith("kafka.") else f"kafka.{key}", value)
    return reader.load().select(F.col("value").cast("string").alias("value")).dropDuplicates()


def parse(lines: DataFrame, *, keep_raw: bool = False) -> DataFrame:
    """Parse JSON lines into events: the columns of the event schema plus ``valid``.

    Rows that are not telemetry events this report understands (not JSON, a
    field of the wrong type, a newer schema version) have ``valid`` false;
    they are counted, not read. With ``keep_raw``, a column ``raw`` holds the
    text of those rows (null for valid ones).
    """
    parsed = lines.filter(F.trim("value") != "").select(
        F.col("value").alias("_line"),
        F.from_json("value", EVENT_SCHEMA, {"mode": "PERMISSIVE"}).alias("e"),
    )
    out = parsed.select("_line", "e.*").withColumn("valid", valid_event())
    if keep_raw:
        out = out.withColumn("raw", F.when(~F.col("valid"), F.col("_line")))
    return out.drop("_line")
