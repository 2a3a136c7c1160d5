"""Benchmark: consume throughput of one consumer, kgroup vs confluent-kafka, kafka-python, aiokafka.

Run standalone (not collected by pytest), from the repository root:

    python tests/benchmarks/bench_throughput.py [--records N] [--sizes 100,1000] [--no-write]

Starts its own broker through ``kgroup.testing``, produces ``--records``
records of each size once (a confluent-kafka producer) into a 12-partition
topic, then lets each client read all of them with one consumer, each in a
fresh process:

- ``confluent-kafka``: a plain ``confluent_kafka.Consumer`` loop over all 12
  partitions (``assign``, no group) at librdkafka's defaults;
- ``confluent-kafka (kgroup settings)``: the same loop with kgroup's data-plane
  defaults (``kgroup.dataplane.librdkafka.DATAPLANE_DEFAULTS``): the floor of
  kgroup's data plane at equal settings;
- ``kgroup sync`` / ``kgroup async``: ``kgroup.Consumer`` / ``AsyncConsumer``
  (asyncio) subscribed on the new protocol, ``consume(1000)``;
- ``kafka-python`` / ``aiokafka``: ``assign`` of all partitions (no group),
  ``poll`` / ``getmany``;
- the equal-settings three again with `` + gc.freeze()``: each calls
  ``gc.freeze()`` once its first record is in, which takes the garbage
  collector's full passes out of the process (docs/consumer.md, "Reading small
  records at high rates"): what is left between them is per-record work.

Every loop touches each record the same way (counts it and adds the length
of its value). Rates are measured from the first record to the last (group
join and connection set-up excluded; the *total* column includes them); peak
RSS is the process's ``VmHWM``. Prints three tables (every client at its
defaults; kgroup and the plain loop at equal settings; the same frozen) and a
summary of the issue-15 goals, and rewrites the ``bench:throughput`` section of
docs/performance.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib

PARTITIONS = 12
PLAIN = "confluent-kafka"
PLAIN_EQUAL = "confluent-kafka (kgroup settings)"
FROZEN = " + gc.freeze()"
KGROUP = ("kgroup sync", "kgroup async")
DEFAULTS_TABLE = (PLAIN, *KGROUP, "kafka-python", "aiokafka")
EQUAL_TABLE = (PLAIN_EQUAL, *KGROUP)
FROZEN_TABLE = tuple(client + FROZEN for client in EQUAL_TABLE)
CLIENTS = (PLAIN, *EQUAL_TABLE, *FROZEN_TABLE, "kafka-python", "aiokafka")
BATCH = 1000


# ---------------------------------------------------------------- workers (child processes)


def _result(start: float, first: float, last: float, count: int, nbytes: int) -> dict[str, Any]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "count": count,
        "bytes": nbytes,
        "window": last - first,
        "total": last - start,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": _peak_rss_mib(),
    }


def _peak_rss_mib() -> float:
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so a child
    # would report its parent's (the producing driver's) peak.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _worker_confluent(
    bootstrap: str,
    topic: str,
    want: int,
    settings: dict[str, str] | None = None,
    freeze: bool = False,
) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # noqa: PLC0415

    start = time.perf_counter()
    consumer = Consumer(
        {
            **(settings or {}),
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-floor-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    count = nbytes = 0
    first = 0.0
    while count < want:
        for message in consumer.consume(BATCH, 1.0):
            if message.error() is not None:
                continue
            if not count:
                if freeze:
                    gc.freeze()
                first = time.perf_counter()
            count += 1
            nbytes += len(message.value() or b"")
    last = time.perf_counter()
    consumer.close()
    return _result(start, first, last, count, nbytes)


def _kgroup_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-kgroup-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def _worker_kgroup_sync(
    bootstrap: str, topic: str, want: int, freeze: bool = False
) -> dict[str, Any]:
    import kgroup  # noqa: PLC0415

    start = time.perf_counter()
    count = nbytes = 0
    first = 0.0
    with kgroup.Consumer(_kgroup_config(bootstrap)) as consumer:
        consumer.subscribe([topic])
        while count < want:
            for message in consumer.consume(BATCH, 1.0):
                if not count:
                    if freeze:
                        gc.freeze()
                    first = time.perf_counter()
                count += 1
                nbytes += len(message.value() or b"")
        last = time.perf_counter()
    return _result(start, first, last, count, nbytes)


def _worker_kgroup_async(
    bootstrap: str, topic: str, want: int, freeze: bool = False
) -> dict[str, Any]:
    import asyncio  # noqa: PLC0415

    import kgroup  # noqa: PLC0415

    async def run() -> dict[str, Any]:
        start = time.perf_counter()
        count = nbytes = 0
        first = 0.0
        async with kgroup.AsyncConsumer(_kgroup_config(bootstrap)) as consumer:
            consumer.subscribe([topic])
            while count < want:
                for message in await consumer.consume(BATCH, 1.0):
                    if not count:
                        if freeze:
                            gc.freeze()
                        first = time.perf_counter()
                    count += 1
                    nbytes += len(message.value() or b"")
            last = time.perf_counter()
        return _result(start, first, last, count, nbytes)

    return asyncio.run(run())


def _worker_kafka_python(bootstrap: str, topic: str, want: int) -> dict[str, Any]:
    from kafka import KafkaConsumer, TopicPartition  # noqa: PLC0415

    start = time.perf_counter()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    count = nbytes = 0
    first = 0.0
    while count < want:
        for records in consumer.poll(timeout_ms=1000, max_records=BATCH).values():
            for record in records:
                if not count:
                    first = time.perf_counter()
                count += 1
                nbytes += len(record.value)
    last = time.perf_counter()
    consumer.close()
    return _result(start, first, last, count, nbytes)


def _worker_aiokafka(bootstrap: str, topic: str, want: int) -> dict[str, Any]:
    import asyncio  # noqa: PLC0415

    from aiokafka import AIOKafkaConsumer, TopicPartition  # noqa: PLC0415

    async def run() -> dict[str, Any]:
        start = time.perf_counter()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        count = nbytes = 0
        first = 0.0
        try:
            while count < want:
                batches = await consumer.getmany(timeout_ms=1000, max_records=BATCH)
                for records in batches.values():
                    for record in records:
                        if not count:
                            first = time.perf_counter()
                        count += 1
                        nbytes += len(record.value)
            last = time.perf_counter()
        finally:
            await consumer.stop()
        return _result(start, first, last, count, nbytes)

    return asyncio.run(run())


def _worker_confluent_equal(
    bootstrap: str, topic: str, want: int, freeze: bool = False
) -> dict[str, Any]:
    # The driver passes kgroup's settings in the environment: importing them
    # here would load kgroup into the plain loop's process (and its RSS).
    settings: dict[str, str] = json.loads(os.environ["BENCH_KGROUP_SETTINGS"])
    return _worker_confluent(bootstrap, topic, want, settings, freeze)


def _frozen(worker: Callable[..., dict[str, Any]]) -> Callable[[str, str, int], dict[str, Any]]:
    def run(bootstrap: str, topic: str, want: int) -> dict[str, Any]:
        return worker(bootstrap, topic, want, freeze=True)

    return run


WORKERS: dict[str, Callable[[str, str, int], dict[str, Any]]] = {
    PLAIN: _worker_confluent,
    PLAIN_EQUAL: _worker_confluent_equal,
    "kgroup sync": _worker_kgroup_sync,
    "kgroup async": _worker_kgroup_async,
    PLAIN_EQUAL + FROZEN: _frozen(_worker_confluent_equal),
    "kgroup sync" + FROZEN: _frozen(_worker_kgroup_sync),
    "kgroup async" + FROZEN: _frozen(_worker_kgroup_async),
    "kafka-python": _worker_kafka_python,
    "aiokafka": _worker_aiokafka,
}


# ---------------------------------------------------------------- driver


def run_worker(client: str, bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    from kgroup.dataplane.librdkafka import DATAPLANE_DEFAULTS  # noqa: PLC0415

    env = {**os.environ, "BENCH_KGROUP_SETTINGS": json.dumps(dict(DATAPLANE_DEFAULTS))}
    result = subprocess.run(
        [sys.executable, __file__, "--worker", client, bootstrap, topic, str(count)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=env,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{client} failed:\n{result.stderr[-3000:]}")
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--sizes", default="100,1000", help="record value sizes in bytes")
    parser.add_argument("--repeats", type=int, default=3, help="runs per client and size")
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    benchlib.start_watch()
    if args.worker:
        client, bootstrap, topic, count = args.worker
        benchlib.as_installed()
        print(json.dumps(WORKERS[client](bootstrap, topic, int(count))), flush=True)
        return

    from kgroup.testing import KafkaBroker, create_topic, delete_topics  # noqa: PLC0415

    sizes = [int(s) for s in args.sizes.split(",")]
    clients = [c for c in args.clients.split(",") if c]
    results: dict[tuple[int, str], list[dict[str, Any]]] = {}
    loads: list[str] = []
    with KafkaBroker() as broker:
        bootstrap = broker.bootstrap_servers
        for size in sizes:
            topic = f"bench-throughput-{size}"
            create_topic(bootstrap, topic, partitions=PARTITIONS)
            took = benchlib.produce_bulk(bootstrap, topic, args.records, size, PARTITIONS)
            print(f"produced {args.records:,} x {size} B in {took:.1f} s", flush=True)
            for rep in range(args.repeats):
                for client in clients:  # interleaved, so load spikes hit every client alike
                    result = run_worker(client, bootstrap, topic, args.records)
                    results.setdefault((size, client), []).append(result)
                    rate = result["count"] / result["window"]
                    print(
                        f"  {size:>5} B  rep {rep + 1} {client:<34} {rate:>12,.0f} rec/s "
                        f"{result['bytes'] / result['window'] / 1e6:8.1f} MB/s "
                        f"total {result['total']:6.2f} s cpu {result['cpu']:6.2f} s "
                        f"rss {result['rss']:6.1f} MiB",
                        flush=True,
                    )
                    loads.append(benchlib.load_average())
            delete_topics(bootstrap, [topic])
    tables = render(results)
    print()
    print("\n\n".join(tables))
    if not args.no_write:
        command = (
            f"python tests/benchmarks/bench_throughput.py --records {args.records} "
            f"--sizes {args.sizes} --repeats {args.repeats}"
        )
        write(tables, command, records=args.records, repeats=args.repeats, loads=loads)


Results = dict[tuple[int, str], list[dict[str, Any]]]


def _rates(runs: list[dict[str, Any]]) -> list[float]:
    return [r["count"] / r["window"] for r in runs]


def _table(results: Results, clients: tuple[str, ...], versus: tuple[str, ...]) -> str:
    """One row per size and client in ``clients``, with ratios to each client of ``versus``."""
    median = {key: statistics.median(_rates(runs)) for key, runs in results.items()}
    lines = [
        "| size | client | runs | records/s median (min-max) | MB/s median | "
        + "".join(f"vs {other} | " for other in versus)
        + "peak RSS MiB median | CPU s median | total s median |",
        "|---:|---|---:|---:|---:|" + "---:|" * len(versus) + "---:|---:|---:|",
    ]
    for size in sorted({s for s, _ in results}):
        for client in clients:
            runs = results.get((size, client))
            if not runs:
                continue
            rate = median[(size, client)]
            ratios = ""
            for other in versus:
                theirs = median.get((size, other))
                ratios += f"{rate / theirs:.2f}x | " if theirs else "| "
            low, high = min(_rates(runs)), max(_rates(runs))
            mbs = statistics.median(r["bytes"] / r["window"] / 1e6 for r in runs)
            lines.append(
                f"| {size} B | {client} | {len(runs)} | {rate:,.0f} ({low:,.0f}-{high:,.0f}) "
                f"| {mbs:.1f} | {ratios}{statistics.median(r['rss'] for r in runs):.0f} "
                f"| {statistics.median(r['cpu'] for r in runs):.2f} "
                f"| {statistics.median(r['total'] for r in runs):.2f} |"
            )
    return "\n".join(lines)


def _goal(name: str, ratio: float | None, target: float) -> str:
    if ratio is None:
        return f"{name}: not measured"
    verdict = "met" if ratio >= target else f"NOT met (short by {(target - ratio) / target:.0%})"
    return f"{name} {ratio:.2f}x (target >= {target:g}x: {verdict})"


def render(results: Results) -> tuple[str, str, str, str]:
    """The defaults, equal-settings and frozen tables and the goals summary (ratios of medians)."""
    median = {key: statistics.median(_rates(runs)) for key, runs in results.items()}

    def ratio(size: int, ours: str, theirs: str) -> float | None:
        a, b = median.get((size, ours)), median.get((size, theirs))
        return a / b if a and b else None

    defaults = _table(results, DEFAULTS_TABLE, (PLAIN, "aiokafka"))
    equal = _table(results, EQUAL_TABLE, (PLAIN_EQUAL,))
    frozen = _table(results, FROZEN_TABLE, (PLAIN_EQUAL + FROZEN,))
    goals = []
    for size in sorted({s for s, _ in results}):
        for client in KGROUP:
            goals.append(
                _goal(f"{size} B {client} / aiokafka", ratio(size, client, "aiokafka"), 1.5)
            )
            goals.append(_goal(f"{size} B {client} / {PLAIN}", ratio(size, client, PLAIN), 1.0))
            goals.append(
                _goal(f"{size} B {client} / {PLAIN_EQUAL}", ratio(size, client, PLAIN_EQUAL), 0.95)
            )
        goals.append(
            _goal(f"{size} B kgroup async / kgroup sync", ratio(size, KGROUP[1], KGROUP[0]), 0.95)
        )
    summary = "summary (issue 15 goals, ratios of median records/s in this run):\n\n" + "\n".join(
        f"- {goal}" for goal in goals
    )
    paired = _paired(results)
    if paired:
        summary += (
            "\n\nequal settings round by round (each kgroup run against the plain loop's run "
            "of the same round, seconds apart: the spread shows what one "
            "comparison can resolve):\n\n" + "\n".join(f"- {line}" for line in paired)
        )
    return defaults, equal, frozen, summary


def _paired(results: Results) -> list[str]:
    """Per-round ratios of each kgroup client to the plain loop at kgroup's settings.

    Frozen clients against the frozen plain loop.
    """
    lines = []
    for size in sorted({s for s, _ in results}):
        for suffix in ("", FROZEN):
            plain = PLAIN_EQUAL + suffix
            theirs = _rates(results.get((size, plain), []))
            for client in (name + suffix for name in KGROUP):
                ours = _rates(results.get((size, client), []))
                ratios = [a / b for a, b in zip(ours, theirs, strict=False)]
                if not ratios:
                    continue
                lines.append(
                    f"{size} B {client} / {plain}: median {statistics.median(ratios):.2f}x, "
                    f"{min(ratios):.2f}-{max(ratios):.2f}x over {len(ratios)} rounds, "
                    f"{sum(r >= 0.95 for r in ratios)} of them at 0.95x or more"
                )
    return lines


def write(
    tables: tuple[str, str, str, str],
    command: str,
    *,
    records: int,
    repeats: int,
    loads: list[str],
) -> None:
    from kgroup.dataplane.librdkafka import DATAPLANE_DEFAULTS  # noqa: PLC0415

    defaults, equal, frozen, summary = tables
    settings = ", ".join(f"`{k}={v}`" for k, v in DATAPLANE_DEFAULTS.items())
    benchlib.write_section(
        "throughput",
        [
            f"## Throughput: one consumer reading {records:,} records from 12 partitions",
            "",
            f"{repeats} runs per client and size, interleaved (every client once, then "
            "again); each client runs in a fresh process and reads every record of a "
            "12-partition topic (produced once per size by a confluent-kafka producer; one "
            "broker, `kgroup.testing` settings). `confluent-kafka` is a plain "
            "`Consumer.consume(1000)` loop over assigned partitions at librdkafka's defaults; "
            "`confluent-kafka (kgroup settings)` is the same loop with kgroup's data-plane "
            f"defaults ({settings}; see *Data-plane defaults* below). kgroup sync / async are "
            "`kgroup.Consumer` / `AsyncConsumer` (asyncio) subscribed on the new protocol "
            "with `consume(1000)`; kafka-python and aiokafka `assign` all partitions (no "
            "group) and use `poll` / `getmany` with at most 1000 records. Auto-commit is "
            "off; every loop counts each record and adds the length of its value, as "
            "`for message in consumer.consume(1000, 1.0)`, which lets go of each batch "
            "before the next call (a loop that keeps its last batch while it takes the next "
            "gives the garbage collector more to do: see *Consume path: where the CPU goes*). "
            "Rates are "
            "from the first record to the last; *total* includes start-up and the group "
            "join; *CPU* is the process's user + system time (start-up included); *peak "
            f"RSS* is its `VmHWM`. {benchlib.AS_INSTALLED_NOTE}.",
            "",
            "### Defaults vs defaults",
            "",
            "Every client as an application gets it, with no setting changed.",
            "",
            defaults,
            "",
            "### Equal settings",
            "",
            "kgroup against the plain confluent-kafka loop given the same librdkafka "
            "settings: what kgroup's own layers cost.",
            "",
            equal,
            "",
            "### Equal settings, the collector's full passes taken out",
            "",
            "The same three loops, each calling `gc.freeze()` once its first record is in "
            "(what an application reading small records at high rates can do: see "
            "[consumer.md](consumer.md#reading-small-records-at-high-rates)). A full pass "
            "of the garbage collector visits every object the process tracks, and kgroup's "
            "modules double the count of a process that imports confluent-kafka alone; "
            "frozen, neither process pays for its size, and what is left between them is "
            "per-record work.",
            "",
            frozen,
            "",
            summary,
            "",
            f"- {benchlib.machine_line()}",
            "- load average (1/5/15 min) after each client: "
            + "; ".join(loads)
            + " (the benchmark's own processes included; the last line says what other work "
            "used)",
            f"- versions: kgroup {benchlib.version('kgroup')}, confluent-kafka "
            f"{benchlib.version('confluent-kafka')}, kafka-python "
            f"{benchlib.version('kafka-python')}, aiokafka {benchlib.version('aiokafka')}, "
            "Apache Kafka broker 4.4.0",
            f"- date: {benchlib.now()}",
            f"- command: `{command}`",
        ],
    )


if __name__ == "__main__":
    main()
