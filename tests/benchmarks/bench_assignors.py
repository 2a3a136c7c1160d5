"""Benchmark: kgroup's assignors vs kafka-python 3.x's, over a grid of group and topic sizes.

Run standalone (not collected by pytest):

    python tests/benchmarks/bench_assignors.py [--repeats N] [--peer-repeats N]
        [--quick] [--no-write] [--members 10,100] [--partitions 10000]
        [--assignors range,roundrobin] [--no-uniform]

Grid: 10 / 100 / 1,000 members over 100 / 1,000 / 10,000 partitions (topics of
100 partitions each: 1, 10 and 100 topics), every member subscribed to every
topic. Scenarios, on identical input for both clients:

- fresh: nobody owns anything yet;
- join: a balanced group of N-1 members (each reporting the assignment the
  same kgroup assignor gave it, generation 1) and one new member that owns
  nothing;
- leave (sticky assignors only): every member but one reports its previous
  assignment of a balanced N-member group; one member has left.

Assignors: range, roundrobin, sticky and cooperative-sticky, each against
kafka-python's class of the same name (``RangePartitionAssignor``,
``RoundRobinPartitionAssignor``, ``StickyPartitionAssignor``,
``CooperativeStickyAssignor``), in the same process on the same input; and
kgroup's new-protocol ``uniform`` as a reference (kafka-python has none).
kgroup's and kafka-python's runs of a cell alternate (kgroup, kafka-python,
kgroup, ...), with a garbage collection before each run, so that the load of a
shared machine weighs on both alike; the ratios are the figures to compare.

A kafka-python cell whose first run takes longer than a second runs only once
(marked in the table); ``--quick`` skips kafka-python's sticky assignors where
members x partitions >= 1,000,000; ``--members``, ``--partitions``, ``--assignors``
and ``--no-uniform`` run part of the grid. All of these are for development only:
the committed section of docs/performance.md must come from a full run, and a
partial run does not write it.

Prints a table and a summary line with ratios, and rewrites its own section of
docs/performance.md (between the bench:assignors markers).
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kafka.coordinator.assignors.cooperative_sticky import (
    CooperativeStickyAssignor as PeerCooperativeSticky,
)
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyAssignorUserData,
    StickyPartitionAssignor,
)

from kgroup.assignors import (
    Cluster,
    CooperativeStickyAssignor,
    GroupAssignment,
    GroupSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    UniformAssignor,
    _caches,
)
from kgroup.assignors.consumer_protocol import AssignmentSpec, MemberSpec, TopicMetadata
from kgroup.assignors.sticky import encode_cooperative_user_data, encode_sticky_user_data

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib

MEMBER_COUNTS = (10, 100, 1_000)
PARTITION_COUNTS = (100, 1_000, 10_000)
PARTITIONS_PER_TOPIC = 100
CLASSIC = ("range", "roundrobin", "sticky", "cooperative-sticky")
STICKY = ("sticky", "cooperative-sticky")
SLOW_PEER_SECONDS = 1.0
STICKY_TARGET_MS = 30.0  # issue 15: sticky assignors at 1,000 members x 10,000 partitions
COLD_REPEATS = 3  # runs of the sticky assignors' join with kgroup's caches emptied first
QUICK_SKIP = 1_000_000  # --quick: skip kafka-python sticky cells with members x partitions >= this
GENERATION = 1

_KGROUP: dict[str, Callable[[], Any]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}
_PEER: dict[str, Callable[[], Any]] = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
    "cooperative-sticky": PeerCooperativeSticky,
}


@dataclass(frozen=True)
class Result:
    times: list[float]  # wall clock, s
    cpu_times: list[float]  # CPU time of the benchmark's thread, s

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times) * 1000

    @property
    def cpu_median_ms(self) -> float:
        return statistics.median(self.cpu_times) * 1000


@dataclass
class Cell:
    members: int
    partitions: int
    # (assignor, scenario) -> result; assignor "kafka-python X" for the peer
    results: dict[tuple[str, str], Result]


class _PeerCluster:
    """What kafka-python's assignors ask of their cluster metadata."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        self.counts = dict(counts)

    def topics(self) -> set[str]:
        return set(self.counts)

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.counts[topic]))


def timed_pair(
    ours: Callable[[], object],
    repeats: int,
    peer: Callable[[], object] | None,
    peer_repeats: int,
    stop_after: float,
) -> tuple[list[Timing], list[Timing]]:
    """Time ``ours`` and ``peer`` in alternation; ``peer`` runs once if its first run is slow.

    Alternating makes a burst of load on the shared machine hit both sides
    rather than one; a collection before each run keeps one side's garbage out
    of the other's time.
    """
    our_times: list[Timing] = []
    peer_times: list[Timing] = []
    for i in range(max(repeats, peer_repeats if peer is not None else 0)):
        if i < repeats:
            our_times.append(_time_one(ours))
        if (
            peer is not None
            and i < peer_repeats
            and not (peer_times and peer_times[0][0] > stop_after)
        ):
            peer_times.append(_time_one(peer))
    return our_times, peer_times


Timing = tuple[float, float]
"""One run: (wall clock s, CPU s of this thread)."""


def _time_one(fn: Callable[[], object]) -> Timing:
    gc.collect()
    start, start_cpu = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - start, time.thread_time() - start_cpu


def _kgroup_subscriptions(
    assignor: str,
    topics: Sequence[str],
    members: Sequence[str],
    owned: GroupAssignment | None,
) -> GroupSubscription:
    subs: dict[str, Subscription] = {}
    for m in members:
        parts = owned.partitions(m) if owned is not None else ()
        if owned is None or m not in owned.assignments:
            subs[m] = Subscription(tuple(topics))
        elif assignor == "sticky":
            # eager: the previous assignment travels in the user data (Java layout)
            subs[m] = Subscription(
                tuple(topics), user_data=encode_sticky_user_data(parts, GENERATION)
            )
        elif assignor == "cooperative-sticky":
            subs[m] = Subscription(
                tuple(topics),
                user_data=encode_cooperative_user_data(GENERATION),
                owned_partitions=parts,
                generation_id=GENERATION,
            )
        else:
            # range / roundrobin do not look at ownership; report it as a v1+ member does
            subs[m] = Subscription(tuple(topics), owned_partitions=parts, generation_id=GENERATION)
    return GroupSubscription(subs)


def _peer_members(
    assignor: str, topics: Sequence[str], members: Sequence[str], owned: GroupAssignment | None
) -> list[SimpleNamespace]:
    """The same subscriptions as kafka-python's leader decodes them."""
    out = []
    for m in members:
        parts = owned.partitions(m) if owned is not None else ()
        by_topic: dict[str, list[int]] = {}
        for tp in parts:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        has_owned = owned is not None and m in owned.assignments
        user_data: object = None
        owned_partitions: list[SimpleNamespace] = []
        generation = -1
        if has_owned and assignor == "sticky":
            # kafka-python accepts its own decoded user data object (see its parse_member_metadata)
            user_data = StickyAssignorUserData(list(by_topic.items()), GENERATION)
        elif has_owned:
            owned_partitions = [
                SimpleNamespace(topic=t, partitions=ps) for t, ps in by_topic.items()
            ]
            generation = GENERATION
        metadata = SimpleNamespace(
            topics=list(topics),
            user_data=user_data if assignor == "sticky" else b"",
            owned_partitions=owned_partitions,
            generation_id=generation,
        )
        out.append(SimpleNamespace(member_id=m, group_instance_id=None, metadata=metadata))
    return out


def _assign(make: Callable[[], Any], cluster: object, members: object) -> object:
    """One run as a leader does it: a fresh assignor instance, then ``assign``."""
    return make().assign(cluster, members)


def _check(assignment: GroupAssignment, total: int) -> None:
    seen = [tp for m in assignment for tp in assignment.partitions(m)]
    if len(seen) != len(set(seen)) or len(seen) > total:
        raise AssertionError("kgroup produced an assignment that is not exclusive")


def run_cell(
    n_members: int, n_partitions: int, args: argparse.Namespace, log: Callable[[str], None]
) -> Cell:
    topics = [f"topic-{i:03d}" for i in range(max(1, n_partitions // PARTITIONS_PER_TOPIC))]
    counts = dict.fromkeys(topics, min(n_partitions, PARTITIONS_PER_TOPIC))
    cluster = Cluster(counts)
    peer_cluster = _PeerCluster(counts)
    members = [f"consumer-{i:04d}-{'x' * 8}" for i in range(n_members)]
    joiner, leaver = members[-1], members[n_members // 2]
    others = members[:-1]
    remaining = [m for m in members if m != leaver]
    cell = Cell(n_members, n_partitions, {})

    def record(name: str, scenario: str, timings: list[Timing]) -> None:
        result = Result([wall for wall, _ in timings], [cpu for _, cpu in timings])
        cell.results[(name, scenario)] = result
        runs = len(timings)
        log(
            f"  {n_members:>5} x {n_partitions:>6} {name:<31} {scenario:<9} "
            f"median {result.median_ms:10.1f} ms, CPU {result.cpu_median_ms:10.1f} ms "
            f"({runs} run{'s' * (runs > 1)})"
        )

    for name in args.assignors:
        fresh_subs = GroupSubscription({m: Subscription(tuple(topics)) for m in members})
        before_join = _KGROUP[name]().assign(
            cluster, GroupSubscription({m: Subscription(tuple(topics)) for m in others})
        )
        scenarios: dict[str, tuple[list[str], GroupAssignment | None]] = {
            "fresh": (members, None),
            "join": (members, before_join),
        }
        if name in STICKY:
            scenarios["leave"] = (remaining, _KGROUP[name]().assign(cluster, fresh_subs))
        for scenario, (ms, owned) in scenarios.items():
            subs = _kgroup_subscriptions(name, topics, ms, owned)
            _check(_KGROUP[name]().assign(cluster, subs), n_partitions)
            skip_peer = args.quick and name in STICKY and n_members * n_partitions >= QUICK_SKIP
            peer = _peer_members(name, topics, ms, owned)
            ours, theirs = timed_pair(
                functools.partial(_assign, _KGROUP[name], cluster, subs),
                args.repeats,
                None if skip_peer else functools.partial(_assign, _PEER[name], peer_cluster, peer),
                args.peer_repeats,
                SLOW_PEER_SECONDS,
            )
            record(f"kgroup {name}", scenario, ours)
            if theirs:
                record(f"kafka-python {name}", scenario, theirs)
            if scenario == "join" and name in STICKY:
                # A leader's first assignment in its process: nothing cached yet.
                cold = []
                for _ in range(COLD_REPEATS):
                    _caches.clear()
                    cold.append(_time_one(functools.partial(_assign, _KGROUP[name], cluster, subs)))
                record(f"kgroup {name}", "join-cold", cold)
        if joiner in before_join.assignments:
            raise AssertionError("the joiner was part of the balanced group")
    if args.no_uniform:
        return cell

    ids = {t: uuid.uuid5(uuid.NAMESPACE_DNS, t) for t in topics}
    topic_meta = {topic_id: TopicMetadata(t, counts[t]) for t, topic_id in ids.items()}
    sub_ids = frozenset(ids.values())
    fresh_spec = AssignmentSpec({m: MemberSpec(sub_ids) for m in members}, topic_meta)
    balanced = UniformAssignor().assign(
        AssignmentSpec({m: MemberSpec(sub_ids) for m in others}, topic_meta)
    )
    join_spec = AssignmentSpec(
        {
            m: MemberSpec(sub_ids, balanced.members[m].partitions if m != joiner else {})
            for m in members
        },
        topic_meta,
    )
    full = UniformAssignor().assign(fresh_spec)
    leave_spec = AssignmentSpec(
        {m: MemberSpec(sub_ids, full.members[m].partitions) for m in remaining}, topic_meta
    )
    for scenario, spec in (("fresh", fresh_spec), ("join", join_spec), ("leave", leave_spec)):
        record(
            "kgroup uniform",
            scenario,
            timed_pair(
                functools.partial(UniformAssignor().assign, spec), args.repeats, None, 0, 0.0
            )[0],
        )
    return cell


def _fmt(ms: float) -> str:
    return f"{ms:,.1f}" if ms < 100 else f"{ms:,.0f}"


def _ratio(peer: Result, ours: Result) -> str:
    ratio = peer.median_ms / ours.median_ms
    return f"{ratio:.1f}x" if ratio < 10 else f"{ratio:,.0f}x"


def table(cells: Sequence[Cell]) -> str:
    head = ["members", "partitions", "scenario"]
    for name in CLASSIC:
        head += [f"{name} kgroup", f"{name} kafka-python (ratio)"]
    head.append("uniform kgroup")
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * 2 + "---|" + "---:|" * (len(head) - 3)]
    for cell in cells:
        for scenario in ("fresh", "join", "leave"):
            row = [f"{cell.members:,}", f"{cell.partitions:,}", scenario]
            for name in CLASSIC:
                ours = cell.results.get((f"kgroup {name}", scenario))
                peer = cell.results.get((f"kafka-python {name}", scenario))
                row.append(_fmt(ours.median_ms) if ours else "")
                if peer is None:
                    row.append("skipped (--quick)" if ours and name in STICKY else "")
                else:
                    once = "¹" if len(peer.times) == 1 else ""
                    ratio = f" ({_ratio(peer, ours)})" if ours else ""
                    row.append(f"{_fmt(peer.median_ms)}{once}{ratio}")
            uniform = cell.results.get(("kgroup uniform", scenario))
            row.append(_fmt(uniform.median_ms) if uniform else "")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def summary(cells: Sequence[Cell]) -> str:
    biggest = next((c for c in cells if c.members == 1_000 and c.partitions == 10_000), None)
    parts: list[str] = []
    slower: list[str] = []
    for name in CLASSIC:
        peer_key, ours_key = f"kafka-python {name}", f"kgroup {name}"
        ratios = []
        for c in cells:
            for s in ("fresh", "join", "leave"):
                if (peer_key, s) in c.results and (ours_key, s) in c.results:
                    ratio = c.results[(peer_key, s)].median_ms / c.results[(ours_key, s)].median_ms
                    ratios.append(ratio)
                    if ratio < 1:
                        slower.append(f"{name} {c.members:,} x {c.partitions:,} {s} {ratio:.2f}x")
        big = [
            f"{s} {_ratio(biggest.results[(peer_key, s)], biggest.results[(ours_key, s)])}"
            for s in ("fresh", "join")
            if biggest is not None and (peer_key, s) in biggest.results
        ]
        if not ratios:
            continue
        span = f"{min(ratios):.1f}x-{max(ratios):,.0f}x over the grid"
        parts.append(f"{name} {span}" + (f" (1,000 x 10,000: {', '.join(big)})" if big else ""))
    text = "summary: kafka-python time / kgroup time = " + "; ".join(parts)
    text += "; kgroup slower than kafka-python in " + (
        f"{len(slower)} cells ({', '.join(slower)})" if slower else "no cell"
    )
    sticky_big = [
        biggest.results[(f"kgroup {n}", s)]
        for n in STICKY
        for s in ("fresh", "join", "leave")
        if biggest is not None and (f"kgroup {n}", s) in biggest.results
    ]
    if biggest is not None and sticky_big:
        wall = max(r.median_ms for r in sticky_big)
        cpu = max(r.cpu_median_ms for r in sticky_big)

        def verdict(ms: float) -> str:
            return "met" if ms < STICKY_TARGET_MS else "NOT met"

        cold = ", ".join(
            f"{n} {biggest.results[(f'kgroup {n}', 'join-cold')].median_ms:,.1f} ms"
            for n in STICKY
            if (f"kgroup {n}", "join-cold") in biggest.results
        )
        text += (
            f"; slowest kgroup sticky/cooperative-sticky median at 1,000 x 10,000: "
            f"{wall:,.1f} ms wall clock, {cpu:,.1f} ms CPU (target under "
            f"{STICKY_TARGET_MS:.0f} ms: {verdict(wall)} on the wall clock, {verdict(cpu)} "
            f"on CPU time)"
        )
        if cold:
            text += f"; the same join as a process's first call (caches empty): {cold}"
    return text


def _counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if any(c <= 0 for c in counts):
        raise argparse.ArgumentTypeError(f"counts must be positive, got {text!r}")
    return counts


def _names(text: str) -> tuple[str, ...]:
    names = tuple(text.split(","))
    unknown = [n for n in names if n not in CLASSIC]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown assignor(s) {', '.join(unknown)}; choose among {', '.join(CLASSIC)}"
        )
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per kgroup cell")
    parser.add_argument(
        "--peer-repeats",
        type=int,
        default=3,
        help=f"runs per kafka-python cell (one if the first takes over {SLOW_PEER_SECONDS:.0f} s)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="skip kafka-python's sticky assignors on the largest cells (never writes the doc)",
    )
    parser.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    parser.add_argument(
        "--members",
        type=_counts,
        default=MEMBER_COUNTS,
        help="comma-separated member counts (part of the grid; never writes the doc)",
    )
    parser.add_argument(
        "--partitions",
        type=_counts,
        default=PARTITION_COUNTS,
        help="comma-separated partition counts (part of the grid; never writes the doc)",
    )
    parser.add_argument(
        "--assignors",
        type=_names,
        default=CLASSIC,
        help=f"comma-separated classic assignors among {', '.join(CLASSIC)} (never writes the doc)",
    )
    parser.add_argument(
        "--no-uniform", action="store_true", help="skip uniform (never writes the doc)"
    )
    args = parser.parse_args()
    benchlib.start_watch()
    partial = (
        args.quick
        or args.no_uniform
        or tuple(args.members) != MEMBER_COUNTS
        or tuple(args.partitions) != PARTITION_COUNTS
        or tuple(args.assignors) != CLASSIC
    )

    started = time.monotonic()
    cells = [
        run_cell(m, p, args, lambda line: print(line, flush=True))
        for m in args.members
        for p in args.partitions
    ]
    text_table, text_summary = table(cells), summary(cells)
    print()
    print(text_table)
    print(text_summary)
    print(f"took {time.monotonic() - started:.0f} s")
    if partial or args.no_write:
        return
    command = (
        f"python tests/benchmarks/bench_assignors.py --repeats {args.repeats} "
        f"--peer-repeats {args.peer_repeats}"
    )
    benchlib.write_section(
        "assignors",
        [
            "## Assignors: 10 / 100 / 1,000 members over 100 / 1,000 / 10,000 partitions",
            "",
            "Every member subscribes to every topic; topics have 100 partitions each (1, 10 "
            "and 100 topics). *fresh*: nobody owns anything. *join*: a balanced group of N-1 "
            "members, each reporting what the same kgroup assignor gave it (generation 1: "
            "sticky in its user data, cooperative-sticky as owned partitions), and one new "
            "member owning nothing. *leave* (sticky assignors and uniform): N-1 members of a "
            "balanced N-member group report their partitions. range and roundrobin do not "
            "look at ownership, so for them *join* is N members computed from scratch. "
            "kafka-python 3.x's pure-Python `RangePartitionAssignor`, "
            "`RoundRobinPartitionAssignor`, `StickyPartitionAssignor` and "
            "`CooperativeStickyAssignor` run in the same process on the same input, "
            "in alternation with kgroup's (one run each in turn, a garbage collection "
            "before each run). `uniform` is kgroup's copy of the broker's "
            "new-protocol assignor (no kafka-python counterpart), as a reference. "
            "Times are medians in milliseconds of the assignor's `assign` call alone; "
            f"kgroup cells run {args.repeats} times, kafka-python cells {args.peer_repeats} "
            f"times, or once (¹) when the first run took over {SLOW_PEER_SECONDS:.0f} s. "
            "The ratio is kafka-python / kgroup.",
            "",
            "kgroup's assignors keep three bounded caches across calls, of values that "
            "recur rebalance after rebalance: the TopicPartition values of each topic, the "
            "Java hash codes of member ids, and compiled layouts of recurring sticky "
            "user-data shapes (`kgroup.assignors._caches`). The table's repeated runs use "
            "them, as a leader's repeated rebalances do; the summary also gives the sticky "
            "assignors' join as a process's first call, with the caches emptied.",
            "",
            "Targets (issue 15): every cell at least as fast as kafka-python (ratio >= 1); "
            f"sticky and cooperative-sticky at 1,000 members x 10,000 partitions under "
            f"{STICKY_TARGET_MS:.0f} ms. On a shared machine the wall clock includes the "
            "time other processes hold the CPUs, so the summary gives the CPU time of the "
            "assigning thread too.",
            "",
            text_table,
            "",
            text_summary,
            "",
            f"- {benchlib.machine_line()}",
            f"- load average (1/5/15 min) when written: {benchlib.load_average()} "
            f"(over {os.cpu_count()} CPUs; other work on the machine inflates every figure)",
            f"- versions: kgroup {benchlib.version('kgroup')}, "
            f"kafka-python {benchlib.version('kafka-python')}",
            f"- date: {benchlib.now()}; the run took {time.monotonic() - started:.0f} s",
            f"- command: `{command}`",
        ],
    )


if __name__ == "__main__":
    main()
