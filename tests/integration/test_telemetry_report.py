"""The fleet report over telemetry of kgroup members in separate processes, on a real broker.

A churn run (members joining and leaving, one SIGKILLed, a static member
bounced) must show every member's ownership over time and no double
ownership; a run with a member that keeps fetching after its partitions were
revoked (``member_process.py``'s test-only ``keep_fetching`` switch) must be
flagged with the partition, both members and the interval.

Each run writes its telemetry to a directory of its own (an explicit
``telemetry.sink`` wins over the suite-wide switch), so the injected fault
never reaches the directory ``.ci/run`` checks.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import consumer_conf, partitions_of, wait_until
from process_helpers import MemberProcess, SteadyProducer, assignments_converged
from pyspark.sql import SparkSession

from kgroup import TopicPartition
from kgroup.report.job import ReportResult, build_session, run_report
from kgroup.report.source import FileSource
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

SESSION_TIMEOUT = 6.0  # group.consumer.session.timeout.ms of the test broker

Spawn = Callable[..., MemberProcess]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    # Tuned for many tiny jobs on a busy machine (as tests/report's session).
    # With the Kafka connector: the first session of a process starts Spark's
    # JVM, and jars given to a later session never reach its driver's class
    # loader (tests/report's Kafka-source test runs in the same pytest process).
    session = build_session(
        "local[2]",
        kafka=True,
        driver_memory="1g",
        shuffle_partitions=1,
        conf={
            "spark.sql.codegen.wholeStage": "false",
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "spark.sql.adaptive.enabled": "false",
            "spark.default.parallelism": "1",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    started: list[MemberProcess] = []

    def make(name: str, conf: dict[str, Any], topics: list[str], **options: Any) -> MemberProcess:
        member = MemberProcess(name, conf, topics, tmp_path, **options)
        started.append(member)
        return member

    yield make
    for member in started:
        member.cleanup()


def _conf(bootstrap: str, group: str, telemetry: Path, **extra: Any) -> dict[str, Any]:
    return {
        **consumer_conf(bootstrap, group, auto_commit_interval_ms=500, **extra),
        "telemetry.sink": f"jsonl:{telemetry}/",
    }


def _member_id(member: MemberProcess) -> str:
    """The member id the process last reported (kgroup's ids are the client's, kept for life)."""
    epoch = member.epoch()
    assert epoch is not None, member.tail()
    return epoch[0]


def _assigned_ever(member: MemberProcess) -> frozenset[TopicPartition]:
    return frozenset().union(*(e.partitions for e in member.of("assigned")))


def _records_since(member: MemberProcess, since: float) -> set[tuple[str, int, int]]:
    return {
        (t, p, o) for e in member.of("records") if e.t >= since for t, p, o in e.data["records"]
    }


def _fetching_all_it_holds(member: MemberProcess, since: float) -> Callable[[], bool]:
    def check() -> bool:
        got = {TopicPartition(t, p) for t, p, _ in _records_since(member, since)}
        return got >= member.assignment()

    return check


def _report(spark: SparkSession, telemetry: Path, out: Path) -> ReportResult:
    return run_report(spark, FileSource((str(telemetry),)), out)


def _rows(result: ReportResult, spark: SparkSession, table: str) -> list[dict[str, Any]]:
    # The test's small tables, collected to compare them (the job itself never collects).
    return [row.asDict() for row in spark.read.parquet(str(result.tables[table])).collect()]


def test_churn_run_shows_every_members_ownership_and_no_double_ownership(
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    *,
    spawn: Spawn,
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    telemetry = tmp_path / "telemetry"
    topic = make_topic(partitions=6)
    everything = partitions_of(topic, 6)
    group = make_group_id()
    dynamic = _conf(bootstrap, group, telemetry)
    static = _conf(bootstrap, group, telemetry, group_instance_id="static-s")
    producer = SteadyProducer(bootstrap, topic, 6, 0.05)
    try:
        a, b = spawn("a", dynamic, [topic]), spawn("b", dynamic, [topic])
        s1 = spawn("s1", static, [topic])
        wait_until(lambda: assignments_converged([a, b, s1], everything), 30, "three share")
        c = spawn("c", dynamic, [topic])  # joins
        wait_until(lambda: assignments_converged([a, b, s1, c], everything), 30, "four share")
        assert b.close() == 0  # leaves
        wait_until(lambda: assignments_converged([a, s1, c], everything), 30, "b's share moves")
        c_id = _member_id(c)
        c.signal(signal.SIGKILL)  # dies without a word
        assert c.wait_exit(5) == -signal.SIGKILL
        wait_until(
            lambda: assignments_converged([a, s1], everything),
            SESSION_TIMEOUT + 20,
            "c's share moves after the session timeout",
        )
        # A static bounce: the same instance id comes back in a new process
        # (whether within the session timeout depends on this machine's load;
        # test_consumer_processes checks that part).
        assert s1.close() == 0
        s2 = spawn("s2", static, [topic])
        wait_until(lambda: assignments_converged([a, s2], everything), 40, "two share")
        final = {"a": a.assignment(), "s2": s2.assignment()}
        started = time.monotonic()
        for member in (a, s2):  # records of every partition it holds: it fetches them all
            member.wait_for(_fetching_all_it_holds(member, started), 20, "records of its share")
        members = {name: _member_id(m) for name, m in (("a", a), ("b", b), ("s1", s1), ("s2", s2))}
        members["c"] = c_id
        for member in (a, s2):
            assert member.close() == 0
    finally:
        producer.stop()

    result = _report(spark, telemetry, tmp_path / "report")
    assert result.malformed == 0
    assert [(g.group, g.double_ownership) for g in result.groups] == [(group, 0)]
    assert _rows(result, spark, "double_ownership") == []
    ownership = _rows(result, spark, "ownership")
    by_member: dict[str, set[TopicPartition]] = {}
    for row in ownership:
        by_member.setdefault(row["member_id"], set()).add(
            TopicPartition(row["topic"], row["partition"])
        )
    # Every member's ownership over time: what its listener was ever given.
    processes = {"a": a, "b": b, "s1": s1, "s2": s2, "c": c}
    assert set(by_member) == set(members.values())
    for name, process in processes.items():
        # (A partition revoked before its committed offset arrived was never fetched.)
        assert by_member[members[name]], name
        assert by_member[members[name]] <= _assigned_ever(process), name
    for name, held in final.items():  # the survivors' last shares, seen fetched
        assert held <= by_member[members[name]], name
    reasons = {(row["member_id"], row["end_reason"]) for row in ownership}
    assert (members["b"], "closed") in reasons
    assert (members["c"], "no_stop_seen") in reasons  # killed: its telemetry just ends
    assert (members["c"], "closed") not in reasons
    instances = {row["member_id"]: row["instance_id"] for row in ownership}
    assert instances[members["s1"]] == instances[members["s2"]] == "static-s"
    # Every partition had an owner over the run, and at the end the two survivors.
    assert {TopicPartition(r["topic"], r["partition"]) for r in ownership} == everything
    assert result.html is not None
    assert result.html.stat().st_size > 0


def test_a_member_fetching_after_revocation_is_flagged(
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    *,
    spawn: Spawn,
    spark: SparkSession,
    tmp_path: Path,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    telemetry = tmp_path / "telemetry"
    topic = make_topic(partitions=4)
    everything = partitions_of(topic, 4)
    conf = _conf(bootstrap, make_group_id(), telemetry)
    producer = SteadyProducer(bootstrap, topic, 4, 0.05)
    try:
        rogue = spawn("rogue", conf, [topic], keep_fetching=everything)
        rogue.wait_for(lambda: rogue.assignment() == everything, 30, "the rogue owns everything")
        honest = spawn("honest", conf, [topic])
        wait_until(lambda: assignments_converged([rogue, honest], everything), 30, "two share")
        taken = honest.assignment()
        # The honest member fetches its share, then leaves; the rogue never stopped.
        honest.wait_for(
            lambda: {TopicPartition(t, p) for t, p, _ in honest.records} == taken,
            15,
            "records of every partition it took",
        )
        rogue_id, honest_id = _member_id(rogue), _member_id(honest)
        assert honest.close() == 0
        assert rogue.close() == 0
    finally:
        producer.stop()

    result = _report(spark, telemetry, tmp_path / "report")
    rows = _rows(result, spark, "double_ownership")
    assert {TopicPartition(r["topic"], r["partition"]) for r in rows} == taken
    assert {(r["member_a"], r["member_b"]) for r in rows} == {tuple(sorted((rogue_id, honest_id)))}
    honest_spans = [r for r in _rows(result, spark, "ownership") if r["member_id"] == honest_id]
    for row in rows:
        # The interval: from the honest member's start to its stop, within both.
        span = next(
            s
            for s in honest_spans
            if (s["topic"], s["partition"]) == (row["topic"], row["partition"])
        )
        assert row["start"] == span["start"]
        assert row["end"] == span["end"]
        assert row["overlap_s"] > 0
    assert [g.double_ownership for g in result.groups] == [len(taken)]
