"""Benchmark: kgroup's sticky assignors vs kafka-python's, on 1,000 members x 10,000 partitions.

Run standalone (not collected by pytest):

    python tests/benchmarks/bench_assignors.py [--repeats N] [--peer-repeats N] [--no-write]

Scenarios, all with identical subscriptions (100 topics x 100 partitions):

- fresh: nobody owns anything yet;
- rebalance: every member reports its previous assignment and one member left.

Prints a table and a summary line with ratios, and rewrites its own section of
docs/performance.md (between the bench:assignors markers).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
import uuid
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

from kafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyAssignorUserData,
    StickyPartitionAssignor,
)

from kgroup.assignors import (
    Cluster,
    CooperativeStickyAssignor,
    GroupSubscription,
    StickyAssignor,
    Subscription,
    UniformAssignor,
)
from kgroup.assignors.modern import AssignmentSpec, MemberSpec, TopicMetadata
from kgroup.assignors.sticky import decode_sticky_user_data, encode_sticky_user_data

MEMBERS = 1_000
TOPICS = 100
PARTITIONS_PER_TOPIC = 100
START = "<!-- bench:assignors:start -->"
END = "<!-- bench:assignors:end -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def build_inputs() -> tuple[Cluster, list[str], list[str]]:
    topics = [f"topic-{i:03d}" for i in range(TOPICS)]
    members = [f"consumer-{i:04d}-{'x' * 8}" for i in range(MEMBERS)]
    return Cluster(dict.fromkeys(topics, PARTITIONS_PER_TOPIC)), topics, members


class _PeerCluster:
    """The two things kafka-python's sticky assignor asks of its cluster metadata."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def topics(self) -> set[str]:
        return set(self.counts)

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.counts[topic]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--peer-repeats", type=int, default=1)
    parser.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    args = parser.parse_args()

    cluster, topics, members = build_inputs()
    fresh = GroupSubscription({m: Subscription(tuple(topics)) for m in members})
    previous = StickyAssignor().assign(cluster, fresh)
    leaver = members[len(members) // 2]

    def owned(cooperative: bool) -> GroupSubscription:
        subs = {}
        for m in members:
            if m == leaver:
                continue
            parts = previous.partitions(m)
            if cooperative:
                subs[m] = Subscription(tuple(topics), owned_partitions=parts, generation_id=1)
            else:
                subs[m] = Subscription(tuple(topics), user_data=encode_sticky_user_data(parts, 1))
        return GroupSubscription(subs)

    eager_rebalance, coop_rebalance = owned(False), owned(True)

    ids = {t: uuid.uuid5(uuid.NAMESPACE_DNS, t) for t in topics}
    spec_fresh = AssignmentSpec(
        {m: MemberSpec(frozenset(ids.values())) for m in members},
        {topic_id: TopicMetadata(name, PARTITIONS_PER_TOPIC) for name, topic_id in ids.items()},
    )
    first = UniformAssignor().assign(spec_fresh)
    spec_rebalance = AssignmentSpec(
        {
            m: MemberSpec(s.subscribed_topic_ids, first.members[m].partitions)
            for m, s in spec_fresh.members.items()
            if m != leaver
        },
        spec_fresh.topics,
    )

    rows: list[tuple[str, str, list[float]]] = []

    def run(name: str, scenario: str, fn: Callable[[], object], repeats: int) -> float:
        times = timed(fn, repeats)
        rows.append((name, scenario, times))
        print(
            f"  {name:<34} {scenario:<10} median {statistics.median(times) * 1000:9.1f} ms",
            flush=True,
        )
        return statistics.median(times)

    print(f"{MEMBERS} members x {TOPICS * PARTITIONS_PER_TOPIC} partitions", flush=True)
    ours = {
        "sticky fresh": run(
            "kgroup sticky", "fresh", lambda: StickyAssignor().assign(cluster, fresh), args.repeats
        ),
        "sticky rebalance": run(
            "kgroup sticky",
            "rebalance",
            lambda: StickyAssignor().assign(cluster, eager_rebalance),
            args.repeats,
        ),
        "cooperative fresh": run(
            "kgroup cooperative-sticky",
            "fresh",
            lambda: CooperativeStickyAssignor().assign(cluster, fresh),
            args.repeats,
        ),
        "cooperative rebalance": run(
            "kgroup cooperative-sticky",
            "rebalance",
            lambda: CooperativeStickyAssignor().assign(cluster, coop_rebalance),
            args.repeats,
        ),
    }
    run("kgroup uniform", "fresh", lambda: UniformAssignor().assign(spec_fresh), args.repeats)
    run(
        "kgroup uniform",
        "rebalance",
        lambda: UniformAssignor().assign(spec_rebalance),
        args.repeats,
    )

    peer = _peer_runner(cluster, fresh, eager_rebalance)
    peer_fresh = run("kafka-python sticky", "fresh", peer[0], args.peer_repeats)
    peer_rebalance = run("kafka-python sticky", "rebalance", peer[1], args.peer_repeats)

    ratios = {
        "sticky fresh": peer_fresh / ours["sticky fresh"],
        "sticky rebalance": peer_rebalance / ours["sticky rebalance"],
        "cooperative-sticky fresh": peer_fresh / ours["cooperative fresh"],
        "cooperative-sticky rebalance": peer_rebalance / ours["cooperative rebalance"],
    }
    summary = "summary: kafka-python sticky time / kgroup time = " + ", ".join(
        f"{k} {v:.0f}x" for k, v in ratios.items()
    )
    table = _table(rows)
    print()
    print(table)
    print(summary)
    if not args.no_write:
        _write_doc(table, summary, args)


def _peer_runner(
    cluster: Cluster, fresh: GroupSubscription, rebalance: GroupSubscription
) -> tuple[Callable[[], object], Callable[[], object]]:
    peer_cluster = _PeerCluster(dict(cluster.partition_counts))

    def members(subs: GroupSubscription) -> list[SimpleNamespace]:
        # kafka-python reads member_id and a decoded subscription (topics, user_data).
        # Its user data is the Java layout behind a 2-byte version, so ours is
        # re-encoded as its own StickyAssignorUserData (which it also accepts
        # decoded): fed Java-layout bytes it would drop the previous assignment.
        out = []
        for m, s in subs.subscriptions.items():
            user_data: object = None
            if s.user_data:
                previous = decode_sticky_user_data(s.user_data)
                by_topic: dict[str, list[int]] = {}
                for tp in previous.partitions:
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                user_data = StickyAssignorUserData(list(by_topic.items()), previous.generation)
            metadata = SimpleNamespace(topics=list(s.topics), user_data=user_data)
            out.append(SimpleNamespace(member_id=m, metadata=metadata))
        return out

    fresh_members, rebalance_members = members(fresh), members(rebalance)

    def go(ms: list[SimpleNamespace]) -> Callable[[], object]:
        return lambda: StickyPartitionAssignor().assign(peer_cluster, ms)

    return go(fresh_members), go(rebalance_members)


def _table(rows: list[tuple[str, str, list[float]]]) -> str:
    lines = [
        "| assignor | scenario | runs | median (ms) | min (ms) |",
        "|---|---|---:|---:|---:|",
    ]
    for name, scenario, times in rows:
        lines.append(
            f"| {name} | {scenario} | {len(times)} | {statistics.median(times) * 1000:.1f} "
            f"| {min(times) * 1000:.1f} |"
        )
    return "\n".join(lines)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _write_doc(table: str, summary: str, args: argparse.Namespace) -> None:
    machine = platform.machine()  # what `uname -m` prints
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = (
        f"python tests/benchmarks/bench_assignors.py --repeats {args.repeats} "
        f"--peer-repeats {args.peer_repeats}"
    )
    section = "\n".join(
        [
            START,
            "## Assignors: 1,000 members x 10,000 partitions",
            "",
            f"{MEMBERS} members, all subscribed to {TOPICS} topics of {PARTITIONS_PER_TOPIC} "
            "partitions. *fresh*: nobody owns anything; *rebalance*: every member reports its "
            "previous assignment and one member has left. kafka-python's pure-Python "
            "`StickyPartitionAssignor` runs on the same input in the same process.",
            "",
            table,
            "",
            summary,
            "",
            f"- machine: `{machine}`, {len(os.sched_getaffinity(0))} CPUs (nproc), Python "
            f"{platform.python_version()}; load average when written "
            f"{os.getloadavg()[0]:.1f} (other work on the machine inflates every figure)",
            f"- versions: kgroup {_version('kgroup')}, kafka-python {_version('kafka-python')}",
            f"- date: {now}",
            f"- command: `{command}`",
            END,
        ]
    )
    text = DOC.read_text() if DOC.exists() else "# Performance\n\nWritten by the benchmarks.\n"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)
    print(f"updated {DOC}")


if __name__ == "__main__":
    main()
