"""Telemetry read from the Kafka sink's topic (Spark's Kafka source, a real broker) gives the
same tables as the same telemetry read from JSON Lines files."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from kgroup.report import analysis
from kgroup.report.source import FileSource, KafkaSource, parse, read_lines
from kgroup.report.synth import SynthResult
from kgroup.telemetry import KafkaTopicSink, decode
from kgroup.testing.pytest_plugin import MakeTopic


def test_topic_and_files_give_the_same_tables(
    spark: SparkSession,
    injected_fleet: tuple[Path, SynthResult],
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
) -> None:
    telemetry, synth = injected_fleet
    topic = make_topic(partitions=3)
    # Through the real sink: decode each line and let KafkaTopicSink produce it.
    sink = KafkaTopicSink(
        topic, {"bootstrap.servers": kafka_bootstrap_servers}, queue_size=synth.events + 1
    )
    for path in sorted(telemetry.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            sink.emit(decode(line))
    sink.close(timeout=60)
    stats = sink.stats
    assert (stats.written, stats.dropped, stats.failed) == (synth.events, 0, 0)

    def events(source: FileSource | KafkaSource) -> DataFrame:
        # Read and parsed once (a local checkpoint), not once per table.
        parsed = parse(read_lines(spark, source)).localCheckpoint()
        assert parsed.filter(~F.col("valid")).count() == 0
        return parsed.filter("valid").drop("valid")

    from_files = events(FileSource((str(telemetry),)))
    from_topic = events(KafkaSource(kafka_bootstrap_servers, topic))
    assert from_topic.count() == synth.events
    assertDataFrameEqual(from_topic, from_files)
    files_tables = analysis.compute_tables(from_files)
    topic_tables = analysis.compute_tables(from_topic)
    assert set(files_tables) == set(topic_tables)
    for name, expected in files_tables.items():
        # Array columns (members, triggers) are sorted, so rows compare exactly.
        assertDataFrameEqual(topic_tables[name], expected)
    assert topic_tables["double_ownership"].count() == len(synth.injected)
