"""Benchmark: rebalance latency on the new protocol, kgroup vs the Java client vs librdkafka.

Run standalone (not collected by pytest), from the repository root:

    python tests/benchmarks/bench_rebalance.py [--repeats N] [--quick]
        [--kinds kgroup,java,librdkafka] [--no-write]

Starts its own broker through ``kgroup.testing`` (the harness's settings for
every client: heartbeat interval 0.5 s, session timeout 6 s, no assignment
batching, ``uniform`` assignor). Members are processes driven by the peer
harness (``tests/peers``); every group is made of one kind. Per repetition,
on a fresh 33-partition topic that a background producer feeds with one
record per partition every 10 ms:

- (a) cold start: all 10 members subscribe at once (processes already
  running); time until the last listener call of the balanced assignment;
- (b) join: an 11th member subscribes; time until it has handed out a record
  of every partition it was assigned;
- (c) leave: a member closes; time until the others have handed out a record
  of every partition it held;
- (d) for partitions whose owner did not change in (b) or (c), the longest gap
  between two records handed out, from the step until it completed (plus
  0.5 s), next to the same measure over the 2 s before the step: a
  stop-the-world rebalance shows up as a gap far above that baseline.

Times use each member's CLOCK_MONOTONIC stamps of its own listener calls and
records. Prints a table and a summary line; rewrites the ``bench:rebalance``
section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import itertools

import benchlib
from installed_peers import InstalledPeers
from peers import Peer, balanced

PARTITIONS = 33
MEMBERS = 10
KINDS = ("kgroup", "java", "librdkafka")
GAP_TAIL = 500_000_000  # ns: the gap window runs this long past a step's completion
METRICS = (
    "a",
    "b-assigned",
    "b",
    "b-first",
    "c-assigned",
    "c",
    "c-first",
    "d-join",
    "d-leave",
    "d-base",
)
NAMES = {
    "a": "(a) 10 members: cold start to stable assignment (s)",
    "b-assigned": "(b) 11th member: join to its last assignment callback (s)",
    "b": "(b) 11th member: join to consuming its partitions (s)",
    "c-assigned": "(c) member close: to the last assignment callback of its partitions (s)",
    "c": "(c) member close: to its partitions consumed by others (s)",
    "b-first": "(b) 11th member: assigned callback to the partition's first record, worst (s)",
    "c-first": "(c) member close: assigned callback to the partition's first record, worst (s)",
    "d-join": "(d) longest gap on unmoved partitions during (b) (s)",
    "d-leave": "(d) longest gap on unmoved partitions during (c) (s)",
    "d-base": "(d) baseline: longest gap in the 2 s before a step (s)",
}


def callback_to_first_record(peers: Sequence[Peer], partitions: set[int], since: int) -> float:
    """Longest time (s) over ``partitions`` from the call assigning one to its first record."""
    worst = 0.0
    for peer in peers:
        calls = [
            e for e in peer.snapshot() if e.name == "assigned" and e.at >= since and e.partitions()
        ]
        records = peer.records()
        for call in calls:
            for p in call.partitions() & partitions:
                after = [at for q, _, at in records if q == p and at >= call.at]
                if after:
                    worst = max(worst, (min(after) - call.at) / 1e9)
    return worst


class Feeder:
    """One record per partition every 10 ms, from a process of its own.

    Not a thread of the driver: the driver's work on the members' events would
    hold the GIL and show up as gaps in production, that is in consumption.
    """

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--feed", bootstrap, topic], stdin=subprocess.PIPE
        )

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # end of input: flush and exit
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def feed(bootstrap: str, topic: str, interval: float = 0.01) -> None:
    """The feeder process: produce until stdin closes."""
    from confluent_kafka import Producer  # noqa: PLC0415

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    stop = threading.Event()

    def watch() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    while not stop.is_set():
        for p in range(PARTITIONS):
            producer.produce(topic, b"x" * 16, partition=p)
        producer.poll(0)
        stop.wait(interval)
    producer.flush(10)


def owners(peers: Sequence[Peer]) -> dict[int, str]:
    return {p: peer.name for peer in peers for p in peer.held()}


def stamps(peers: Sequence[Peer]) -> dict[int, list[int]]:
    """Record stamps (ns) per partition across ``peers``, sorted."""
    out: dict[int, list[int]] = {}
    for peer in peers:
        for p, _, at in peer.records():
            out.setdefault(p, []).append(at)
    for values in out.values():
        values.sort()
    return out


def longest_gap(times: list[int], start: int, end: int) -> float:
    """Longest gap (s) between records in [start, end], counting from the last one before."""
    before = [t for t in times if t < start]
    inside = [t for t in times if start <= t <= end]
    points = ([before[-1]] if before else [start]) + inside + [end]
    return max(b - a for a, b in itertools.pairwise(points)) / 1e9


def gaps(peers: Sequence[Peer], unmoved: set[int], start: int, end: int) -> float:
    by_partition = stamps(peers)
    return max((longest_gap(by_partition.get(p, []), start, end) for p in unmoved), default=0.0)


def settle_window(done: int) -> None:
    """Wait until the gap window (up to ``done`` + 0.5 s) is over and reported."""
    left = (done + GAP_TAIL) / 1e9 - time.monotonic_ns() / 1e9 + 0.3
    if left > 0:
        time.sleep(left)


def first_record_after(peers: Sequence[Peer], partitions: set[int], since: int) -> int | None:
    """When the last of ``partitions`` had a record handed out at or after ``since``."""
    firsts: dict[int, int] = {}
    for p, times in stamps(peers).items():
        if p in partitions:
            later = [t for t in times if t >= since]
            if later:
                firsts[p] = later[0]
    if set(firsts) != partitions:
        return None
    return max(firsts.values())


def one_repetition(bootstrap: str, kind: str, rep: int, timeout: float) -> dict[str, float]:
    from kgroup.testing import create_topic, delete_topics  # noqa: PLC0415

    topic = f"bench-rebalance-{kind}-{rep}-{uuid.uuid4().hex[:6]}"
    group = f"bench-rebalance-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    feeder = Feeder(bootstrap, topic)
    result: dict[str, float] = {}
    try:
        with InstalledPeers(bootstrap) as group_:
            members = [group_.launch(kind, group, name=f"{kind}-{i}") for i in range(MEMBERS)]
            for member in members:
                member.wait_event("ready", timeout)
            # (a) cold start
            t0 = time.monotonic_ns()
            for member in members:
                member.send(f"subscribe {topic}")
            group_.wait(lambda: balanced(members, PARTITIONS), timeout, "10 members balanced")
            settled = max(
                e.at for m in members for e in m.snapshot() if e.name in ("assigned", "revoked")
            )
            result["a"] = (settled - t0) / 1e9
            group_.wait(
                lambda: first_record_after(members, set(range(PARTITIONS)), settled) is not None,
                timeout,
                "records from every partition",
            )
            time.sleep(2.0)

            # (b) an 11th member joins
            extra = group_.start(kind, group, name=f"{kind}-extra", ready_timeout=timeout)
            everyone = [*members, extra]
            before = owners(members)
            t0 = time.monotonic_ns()
            extra.send(f"subscribe {topic}")
            group_.wait(lambda: balanced(everyone, PARTITIONS), timeout, "11 members balanced")
            mine = set(extra.held())
            group_.wait(
                lambda: first_record_after([extra], mine, t0) is not None,
                timeout,
                "the 11th member to consume its partitions",
            )
            done = first_record_after([extra], mine, t0)
            assert done is not None
            result["b"] = (done - t0) / 1e9
            result["b-assigned"] = (
                max(e.at for e in extra.snapshot() if e.name == "assigned" and e.partitions()) - t0
            ) / 1e9
            result["b-first"] = callback_to_first_record([extra], mine, t0)
            after = owners(everyone)
            unmoved = {p for p in range(PARTITIONS) if before.get(p) == after.get(p)}
            settle_window(done)
            result["d-join"] = gaps(everyone, unmoved, t0, done + GAP_TAIL)
            result["d-base-join"] = gaps(everyone, unmoved, t0 - 2_000_000_000, t0)
            time.sleep(2.0)

            # (c) a member closes
            leaver = members[0]
            rest = [m for m in everyone if m is not leaver]
            before = owners(everyone)
            released = set(leaver.held())
            t0 = time.monotonic_ns()
            leaver.send("close")
            group_.wait(lambda: balanced(rest, PARTITIONS), timeout, "10 members balanced again")
            group_.wait(
                lambda: first_record_after(rest, released, t0) is not None,
                timeout,
                "the leaver's partitions to be consumed by the others",
            )
            done = first_record_after(rest, released, t0)
            assert done is not None
            result["c"] = (done - t0) / 1e9
            result["c-assigned"] = (
                max(
                    e.at
                    for m in rest
                    for e in m.snapshot()
                    if e.name == "assigned" and e.at >= t0 and e.partitions() & released
                )
                - t0
            ) / 1e9
            result["c-first"] = callback_to_first_record(rest, released, t0)
            after = owners(rest)
            unmoved = {p for p in range(PARTITIONS) if before.get(p) == after.get(p)}
            settle_window(done)
            result["d-leave"] = gaps(rest, unmoved, t0, done + GAP_TAIL)
            result["d-base"] = max(
                result.pop("d-base-join"), gaps(rest, unmoved, t0 - 2_000_000_000, t0)
            )
            for member in rest:
                member.send("close")
            for member in rest:
                try:
                    member.wait_event("closed", 30)
                except AssertionError:
                    member.kill()
    finally:
        feeder.close()
        delete_topics(bootstrap, [topic])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="3 repetitions (overrides --repeats)")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    parser.add_argument("--feed", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    benchlib.start_watch()
    if args.feed:
        feed(*args.feed)
        return
    repeats = 3 if args.quick else args.repeats
    kinds = [k for k in args.kinds.split(",") if k]

    from kgroup.testing import KafkaBroker  # noqa: PLC0415

    results: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    loads: list[str] = []
    with KafkaBroker() as broker:
        for rep in range(repeats):
            for kind in kinds:  # interleaved, so load spikes hit every client alike
                r = one_repetition(broker.bootstrap_servers, kind, rep, args.timeout)
                results[kind].append(r)
                loads.append(benchlib.load_average())
                print(
                    f"  rep {rep + 1}/{repeats} {kind:<10} "
                    + " ".join(f"{m}={r[m]:.3f}" for m in METRICS),
                    flush=True,
                )
    table, summary = render(results, kinds)
    print()
    print(table)
    print(summary)
    if not args.no_write:
        command = "python tests/benchmarks/bench_rebalance.py " + (
            "--quick" if args.quick else f"--repeats {repeats}"
        )
        write(table, summary, command, repeats, loads)


def render(results: dict[str, list[dict[str, float]]], kinds: list[str]) -> tuple[str, str]:
    lines = [
        "| measure | " + " | ".join(f"{k} median (min-max)" for k in kinds) + " |",
        "|---|" + "---:|" * len(kinds),
    ]
    for metric in METRICS:
        cells = [benchlib.spread([r[metric] for r in results[k]]) for k in kinds]
        lines.append(f"| {NAMES[metric]} | " + " | ".join(cells) + " |")
    parts = []
    if "kgroup" in kinds:
        for other in kinds:
            if other == "kgroup":
                continue
            ratios = []
            for metric in ("a", "b", "c"):
                ours = statistics.median(r[metric] for r in results["kgroup"])
                theirs = statistics.median(r[metric] for r in results[other])
                ratios.append(f"{metric} {ours / theirs:.2f}x")
            parts.append(f"kgroup / {other} median: " + ", ".join(ratios))
    worst = {k: max(max(r["d-join"], r["d-leave"]) for r in results[k]) for k in kinds}
    first = {
        k: statistics.median(max(r["b-first"], r["c-first"]) for r in results[k]) for k in kinds
    }
    summary = (
        "summary: "
        + "; ".join(parts)
        + "; longest gap on an unmoved partition: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in worst.items())
        + "; assigned callback to first record, median of the worse of (b) and (c): "
        + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in first.items())
        + " (issue 15 goal for kgroup: <= 50 ms"
        + (f": {'met' if first['kgroup'] <= 0.05 else 'NOT met'})" if "kgroup" in first else ")")
        + ". aiokafka and kafka-python have no new-protocol member and take no part."
    )
    return "\n".join(lines), summary


def write(table: str, summary: str, command: str, repeats: int, loads: list[str]) -> None:
    benchlib.write_section(
        "rebalance",
        [
            "## Rebalance latency on the new protocol: kgroup vs Java vs librdkafka",
            "",
            f"Groups of one client kind, members in separate processes (the peer harness of "
            f"`tests/peers`), {PARTITIONS} partitions fed with one record per partition every "
            "10 ms (by a producer process of its own); one broker with the `kgroup.testing` "
            "settings for every client (heartbeat 0.5 s, session 6 s, no assignment batching, "
            "broker-side `uniform` assignor). "
            f"{repeats} repetitions per client, interleaved; median (min-max). (a) starts when "
            "the 10 already-running processes are told to subscribe (process and JVM start-up "
            "excluded); (b)-(c) end at the first record handed out on the last partition "
            "concerned; *assigned callback to first record* is, over the partitions a step "
            "moved, the longest time from the listener call that assigned one to its first "
            "record handed out. Members poll 100 ms at a time. The Java peers run with "
            "`-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xmx256m`; librdkafka's Python "
            f"binding and kgroup run in CPython processes. {benchlib.AS_INSTALLED_NOTE}.",
            "",
            table,
            "",
            summary,
            "",
            f"- {benchlib.machine_line()}",
            "- load average (1/5/15 min) after each repetition: "
            + "; ".join(loads)
            + " — 11 member processes of a kind and the feeder compete for the CPUs, and "
            "queued threads count in the load (the last line says what other work used)",
            f"- versions: kgroup {benchlib.version('kgroup')}, confluent-kafka "
            f"{benchlib.version('confluent-kafka')}, Java kafka-clients 4.4.0, "
            "Apache Kafka broker 4.4.0",
            f"- date: {benchlib.now()}",
            f"- command: `{command}`",
        ],
    )


if __name__ == "__main__":
    main()
