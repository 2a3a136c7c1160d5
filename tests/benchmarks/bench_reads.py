"""Benchmark: the cost of a poll loop's cheap reads, kgroup's Consumer against confluent-kafka.

Run standalone (not collected by pytest), from the repository root:

    python tests/benchmarks/bench_reads.py [--calls 200000] [--no-write]

Starts its own broker through ``kgroup.testing`` (or uses
``$KAFKA_BOOTSTRAP_SERVERS``). A kgroup ``Consumer`` and a confluent-kafka
``Consumer``, each in a group of its own on the consumer protocol, join a
12-partition topic; once both hold their assignment, each read an application
may make on every poll (``assignment()``, ``memberid()`` / ``member_id``,
and kgroup's ``paused()``, which confluent-kafka lacks) is called ``--calls``
times, and the time per call is printed with kgroup's ratio to
confluent-kafka's. Rewrites the ``bench:reads`` section
of docs/performance.md (only when the machine was quiet).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib

PARTITIONS = 12


def per_call_ns(fn: Callable[[], object], calls: int) -> float:
    """Nanoseconds per call of ``fn``: the best of three timed loops."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter_ns() - started) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    args = parser.parse_args()
    benchlib.start_watch()

    import confluent_kafka  # noqa: PLC0415

    import kgroup  # noqa: PLC0415
    from kgroup.testing import KafkaBroker, create_topic  # noqa: PLC0415

    with ExitStack() as stack:
        bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
        if not bootstrap:
            bootstrap = stack.enter_context(KafkaBroker()).bootstrap_servers
        topic = f"reads-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, partitions=PARTITIONS)
        common = {"bootstrap.servers": bootstrap, "group.protocol": "consumer"}
        ours = stack.enter_context(
            kgroup.Consumer({**common, "group.id": f"reads-kgroup-{uuid.uuid4().hex[:8]}"})
        )
        theirs = confluent_kafka.Consumer({**common, "group.id": f"reads-ck-{uuid.uuid4().hex}"})
        stack.callback(theirs.close)
        ours.subscribe([topic])
        theirs.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(ours.assignment()) < PARTITIONS or len(theirs.assignment()) < PARTITIONS:
            if time.monotonic() > deadline:
                raise SystemExit("the consumers did not get their assignment within 60 s")
            ours.poll(0.05)
            theirs.poll(0.05)

        reads: list[tuple[str, Callable[[], object], Callable[[], object] | None]] = [
            ("assignment()", ours.assignment, theirs.assignment),
            ("member_id / memberid()", lambda: ours.member_id, theirs.memberid),
            ("paused() (confluent-kafka has none)", ours.paused, None),
        ]
        rows: list[tuple[str, float, float | None]] = []
        for name, kg, ck in reads:
            kg_ns = per_call_ns(kg, args.calls)
            ck_ns = None if ck is None else per_call_ns(ck, args.calls)
            rows.append((name, kg_ns, ck_ns))
            peer = (
                "" if ck_ns is None else f"  confluent-kafka {ck_ns:9.0f} ns  {kg_ns / ck_ns:.3f}x"
            )
            print(f"{name:36} kgroup {kg_ns:7.0f} ns{peer}")

    if args.no_write:
        return
    lines = [
        "## Cheap reads in a poll loop (blocking consumer)",
        "",
        f"`python tests/benchmarks/bench_reads.py --calls {args.calls}`: a kgroup `Consumer` "
        f"and a confluent-kafka `Consumer` on the consumer protocol, each holding all "
        f"{PARTITIONS} partitions of a topic; time per call, best of three loops.",
        "",
        "| read | kgroup (ns) | confluent-kafka (ns) | ratio |",
        "|---|---:|---:|---:|",
        *(
            f"| {name} | {kg:.0f} | {'-' if ck is None else f'{ck:.0f}'} | "
            f"{'-' if ck is None else f'{kg / ck:.3f}x'} |"
            for name, kg, ck in rows
        ),
        "",
        f"- {benchlib.machine_line()}; measured {benchlib.now()}",
    ]
    benchlib.write_section("reads", lines)


if __name__ == "__main__":
    main()
