"""Benchmark: stop-the-world when a member joins, eager vs cooperative vs the new protocol.

Run standalone (not collected by pytest):

    python tests/benchmarks/bench_stop_the_world.py [--repeats N] [--rate R] [--no-write]

One broker started by ``kgroup.testing.KafkaBroker`` (fast-test defaults). Per
run, a fresh 12-partition topic fed continuously (``--rate`` records per
second per partition, one producer thread), a group of three kgroup members
(threads of this process, each polling ``consume(500, 0.05)``) consuming it;
once they are balanced and have consumed for ``--settle`` seconds, a fourth
member subscribes. For the partitions that do not move (same owner before the
join and after the group settled) the benchmark takes, as seen by the member
that keeps them, the longest time between two consecutive consumed batches
across the join; as a baseline, the longest such gap on any partition in the
``--settle`` seconds before the join. It also takes the joiner's time from
``subscribe`` to its first record, and from ``subscribe`` until all four
members hold partitions.

Protocols: eager (classic, ``partition.assignment.strategy=range``),
cooperative (classic, ``cooperative-sticky``) and the new protocol
(``group.protocol=consumer``, the broker's ``uniform`` assignor); runs are
interleaved (eager, cooperative, new, eager, ...).

Prints a table and a summary line, and rewrites its own section of
docs/performance.md (between the bench:stop-the-world markers).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Message, Producer

import kgroup
from kgroup import TopicPartition
from kgroup.testing import KafkaBroker, create_topic

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib

PARTITIONS = 12
PROTOCOLS: dict[str, dict[str, Any]] = {
    "eager": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
    "cooperative": {
        "group.protocol": "classic",
        "partition.assignment.strategy": "cooperative-sticky",
    },
    "new protocol": {"group.protocol": "consumer"},
}
LABELS = {
    "eager": "eager (classic, range)",
    "cooperative": "cooperative (classic, cooperative-sticky)",
    "new protocol": "new protocol (consumer, broker uniform)",
}
CLASSIC_TIMINGS = {"heartbeat.interval.ms": 500, "session.timeout.ms": 6000}


class _Producer:
    """Feeds every partition of ``topic`` at ``rate`` records per second, until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self._topic, self._interval = topic, 1.0 / rate
        self._stop = threading.Event()
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._loop, name="producer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            tick = time.monotonic()
            while not self._stop.is_set():
                for p in range(PARTITIONS):
                    self._producer.produce(self._topic, b"x" * 100, partition=p)
                self._producer.poll(0)
                tick += self._interval
                self._stop.wait(max(0.0, tick - time.monotonic()))
            self._producer.flush(10)
        except BaseException as exc:
            self.errors.append(exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


@dataclass
class _Member:
    """A kgroup consumer polling in its own thread, noting when each partition delivered."""

    name: str
    consumer: kgroup.Consumer
    topic: str
    times: dict[int, list[float]] = field(default_factory=dict)
    events: list[tuple[float, str, frozenset[TopicPartition]]] = field(default_factory=list)
    first_record_at: float | None = None
    errors: list[BaseException] = field(default_factory=list)
    stop_flag: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    # the rebalance listener
    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "assigned", partitions))

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "revoked", partitions))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "lost", partitions))

    def start(self) -> None:
        self.consumer.subscribe([self.topic], self)
        self.thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        try:
            while not self.stop_flag.is_set():
                batch: list[Message] = self.consumer.consume(500, 0.05)
                now = time.monotonic()
                for message in batch:
                    partition = message.partition()
                    if message.error() is None and partition is not None:
                        self.times.setdefault(partition, []).append(now)
                if batch and self.first_record_at is None:
                    self.first_record_at = now
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            try:
                self.consumer.close(15)
            except BaseException as exc:
                self.errors.append(exc)

    def assignment(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def stop(self) -> None:
        self.stop_flag.set()


@dataclass
class Run:
    protocol: str
    unmoved: int
    unmoved_revoked: int
    longest_gap: float
    baseline_gap: float
    settled: float
    first_record: float
    load: str


def _owners(members: Sequence[_Member]) -> dict[int, str] | None:
    """partition -> owner if the members hold every partition exactly once, all non-empty."""
    owners: dict[int, str] = {}
    for m in members:
        held = m.assignment()
        if not held:
            return None
        for p in held:
            if p in owners:
                return None
            owners[p] = m.name
    return owners if len(owners) == PARTITIONS else None


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.01)
    return time.monotonic()


def _longest_gap(times: Sequence[float], since: float, until: float) -> float:
    """Longest gap between consecutive deliveries ending after ``since`` (censored at ``until``)."""
    longest = 0.0
    previous: float | None = None
    for t in times:
        if t > until:
            break
        if previous is not None and t > since:
            longest = max(longest, t - previous)
        previous = t
    if previous is not None:
        longest = max(longest, until - max(previous, since))
    return longest


def one_run(
    bootstrap: str, protocol: str, args: argparse.Namespace, log: Callable[[str], None]
) -> Run:
    topic = f"stw-{protocol.replace(' ', '-')}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    group = f"stw-{uuid.uuid4().hex[:8]}"
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "latest",
        **PROTOCOLS[protocol],
    }
    if conf["group.protocol"] == "classic":
        conf.update(CLASSIC_TIMINGS)
    producer = _Producer(bootstrap, topic, args.rate)
    members: list[_Member] = []
    try:
        for i in range(3):
            members.append(_Member(f"member-{i + 1}", kgroup.Consumer(conf), topic))
            members[-1].start()

        def balanced_and_flowing() -> bool:
            owners = _owners(members)
            if owners is None:
                return False
            now = time.monotonic()
            by_name = {m.name: m for m in members}
            return all(
                by_name[o].times.get(p) and now - by_name[o].times[p][-1] < 0.5
                for p, o in owners.items()
            )

        _wait(balanced_and_flowing, 60, "three members balanced and consuming")
        before = _owners(members)
        time.sleep(args.settle)
        if _owners(members) != before or before is None:
            raise RuntimeError("the three-member group was not stable during the settle period")

        joiner = _Member("member-4", kgroup.Consumer(conf), topic)
        members.append(joiner)
        joined_at = time.monotonic()
        joiner.start()
        settled_at = _wait(
            lambda: _owners(members) is not None, 60, "four members holding partitions"
        )
        _wait(lambda: joiner.first_record_at is not None, 60, "the joiner's first record")
        time.sleep(args.settle)
        ended_at = time.monotonic()
        after = _owners(members)
        if after is None:
            raise RuntimeError("the four-member group changed during the measurement")
        unmoved = [p for p, owner in before.items() if after.get(p) == owner]
        by_name = {m.name: m for m in members}
        gaps = [
            _longest_gap(by_name[before[p]].times.get(p, []), joined_at, ended_at) for p in unmoved
        ]
        baseline = max(
            _longest_gap(by_name[before[p]].times.get(p, []), joined_at - args.settle, joined_at)
            for p in before
        )
        revoked = {
            tp.partition
            for m in members
            for at, kind, parts in m.events
            if at >= joined_at and kind != "assigned"
            for tp in parts
        }
        assert joiner.first_record_at is not None
        run = Run(
            protocol,
            len(unmoved),
            len(revoked & set(unmoved)),
            max(gaps) if gaps else float("nan"),
            baseline,
            settled_at - joined_at,
            joiner.first_record_at - joined_at,
            benchlib.load_average(),
        )
        log(
            f"  {protocol:<13} unmoved {run.unmoved:>2} (revoked {run.unmoved_revoked:>2}) "
            f"longest gap {run.longest_gap:6.3f} s  baseline {run.baseline_gap:6.3f} s  "
            f"settled {run.settled:6.3f} s  joiner first record {run.first_record:6.3f} s  "
            f"load {run.load} ({group})"
        )
        log(f"  closing {group}")
        return run
    finally:
        for m in members:
            m.stop()
        for m in members:
            if m.thread is not None:
                m.thread.join(30)
        producer.stop()
        problems = [e for m in members for e in m.errors] + producer.errors
        if problems:
            raise RuntimeError(f"a member or the producer failed: {problems!r}")


def table(runs: Mapping[str, Sequence[Run]]) -> str:
    lines = [
        "| protocol | unmoved partitions | of them revoked | longest gap on unmoved "
        "partitions (s) | baseline: longest gap before the join (s) | join to all four "
        "holding partitions (s) | joiner: subscribe to first record (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for protocol, rs in runs.items():
        lines.append(
            f"| {LABELS[protocol]} | {statistics.median(r.unmoved for r in rs):.0f} "
            f"| {statistics.median(r.unmoved_revoked for r in rs):.0f} "
            f"| {benchlib.spread([r.longest_gap for r in rs])} "
            f"| {benchlib.spread([r.baseline_gap for r in rs])} "
            f"| {benchlib.spread([r.settled for r in rs])} "
            f"| {benchlib.spread([r.first_record for r in rs])} |"
        )
    return "\n".join(lines)


def summary(runs: Mapping[str, Sequence[Run]]) -> str:
    med = {p: statistics.median(r.longest_gap for r in rs) for p, rs in runs.items()}
    base = statistics.median(r.baseline_gap for rs in runs.values() for r in rs)
    parts = ", ".join(f"{p} {v:.2f} s" for p, v in med.items())
    ratios = ", ".join(
        f"eager / {p} {med['eager'] / v:.1f}x" for p, v in med.items() if p != "eager" and v > 0
    )
    return (
        f"summary: longest gap on unmoved partitions when a 4th member joins (median): {parts}; "
        f"{ratios}; normal longest gap before the join {base:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rate", type=float, default=50.0, help="records per second per partition")
    parser.add_argument(
        "--settle", type=float, default=3.0, help="seconds consumed before and after the join"
    )
    parser.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    args = parser.parse_args()
    benchlib.start_watch()

    runs: dict[str, list[Run]] = {p: [] for p in PROTOCOLS}
    loads: list[str] = []
    started = time.monotonic()
    with KafkaBroker() as broker:
        print(f"broker {broker.version} at {broker.bootstrap_servers}", flush=True)
        for i in range(args.repeats):
            print(f"repetition {i + 1}", flush=True)
            for protocol in PROTOCOLS:
                run = one_run(broker.bootstrap_servers, protocol, args, print)
                runs[protocol].append(run)
                loads.append(run.load)
        broker_version = broker.version
    text_table, text_summary = table(runs), summary(runs)
    print()
    print(text_table)
    print(text_summary)
    print(f"took {time.monotonic() - started:.0f} s")
    if args.no_write:
        return
    command = (
        f"python tests/benchmarks/bench_stop_the_world.py --repeats {args.repeats} "
        f"--rate {args.rate:g} --settle {args.settle:g}"
    )
    benchlib.write_section(
        "stop-the-world",
        [
            "## Stop-the-world: a fourth member joins a group of three",
            "",
            "One broker with the `kgroup.testing` settings (new-protocol heartbeat 0.5 s, no "
            "assignment batching, no initial rebalance delay); the classic members use "
            "`heartbeat.interval.ms=500`, `session.timeout.ms=6000`. Per run: a fresh "
            f"12-partition topic fed at {args.rate:g} records/s per partition by one producer "
            "thread; three kgroup members (threads of one process, each polling "
            f"`consume(500, 0.05)`) balanced and consuming for {args.settle:g} s; then a "
            "fourth subscribes, and the run goes on until all four hold partitions, the "
            f"joiner has a record, and {args.settle:g} s more. *Unmoved partitions* have the "
            "same owner before and after; *of them revoked* were nonetheless revoked (listener "
            "calls) during the join. The *longest gap* is the longest time, over unmoved "
            "partitions, between two consecutive batches of a partition consumed by its owner, "
            "counting gaps that end after the join (a gap still open at the end counts up to "
            f"the end). The *baseline* is the same over every partition in the {args.settle:g} s "
            f"before the join. {args.repeats} runs per protocol, interleaved; median (min-max).",
            "",
            text_table,
            "",
            text_summary,
            "",
            "Reading it: an eager member stops consuming when it revokes everything, which "
            "happens once a heartbeat tells it of the rebalance (up to "
            "`heartbeat.interval.ms` after the join), and resumes after SyncGroup; so its gap "
            "is the rebalance minus that delay, on every partition, including the ones it "
            "gets back. Cooperative members keep consuming what they keep (two JoinGroup "
            "rounds, hence the longer join-to-settled time); new-protocol members other than "
            "the one giving partitions up are not involved at all.",
            "",
            f"- {benchlib.machine_line()}",
            f"- load average (1/5/15 min) after each run: {'; '.join(loads)} (the "
            "benchmark's own processes included; the last line says what other work used)",
            f"- versions: kgroup {benchlib.version('kgroup')}, confluent-kafka "
            f"{benchlib.version('confluent-kafka')} (kgroup's data plane and the producer), "
            f"Apache Kafka broker {broker_version}",
            f"- date: {benchlib.now()}; the run took {time.monotonic() - started:.0f} s",
            f"- command: `{command}`",
        ],
    )


if __name__ == "__main__":
    main()
