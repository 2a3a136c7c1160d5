"""Benchmark: consume throughput of one consumer, kgroup vs confluent-kafka, kafka-python, aiokafka.

Run standalone (not collected by pytest), from the repository root:

    python tests/benchmarks/bench_throughput.py [--records N] [--sizes 100,1000] [--no-write]

Starts its own broker through ``kgroup.testing``, produces ``--records``
records of each size once (a confluent-kafka producer) into a 12-partition
topic, then lets each client read all of them with one consumer, each in a
fresh process:

- ``confluent-kafka``: a plain ``confluent_kafka.Consumer`` loop over all 12
  partitions (``assign``, no group): the floor of kgroup's data plane;
- ``kgroup sync`` / ``kgroup async``: ``kgroup.Consumer`` / ``AsyncConsumer``
  (asyncio) subscribed on the new protocol, ``consume(1000)``;
- ``kafka-python`` / ``aiokafka``: ``assign`` of all partitions (no group),
  ``poll`` / ``getmany``.

Every loop touches each record the same way (counts it and adds the length
of its value). Rates are measured from the first record to the last (group
join and connection set-up excluded; the *total* column includes them).
Prints a table and a summary line, and rewrites the ``bench:throughput``
section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib

PARTITIONS = 12
CLIENTS = ("confluent-kafka", "kgroup sync", "kgroup async", "kafka-python", "aiokafka")
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
    }


def _worker_confluent(bootstrap: str, topic: str, want: int) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # noqa: PLC0415

    start = time.perf_counter()
    consumer = Consumer(
        {
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


def _worker_kgroup_sync(bootstrap: str, topic: str, want: int) -> dict[str, Any]:
    import kgroup  # noqa: PLC0415

    start = time.perf_counter()
    count = nbytes = 0
    first = 0.0
    with kgroup.Consumer(_kgroup_config(bootstrap)) as consumer:
        consumer.subscribe([topic])
        while count < want:
            for message in consumer.consume(BATCH, 1.0):
                if not count:
                    first = time.perf_counter()
                count += 1
                nbytes += len(message.value() or b"")
        last = time.perf_counter()
    return _result(start, first, last, count, nbytes)


def _worker_kgroup_async(bootstrap: str, topic: str, want: int) -> dict[str, Any]:
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


WORKERS = {
    "confluent-kafka": _worker_confluent,
    "kgroup sync": _worker_kgroup_sync,
    "kgroup async": _worker_kgroup_async,
    "kafka-python": _worker_kafka_python,
    "aiokafka": _worker_aiokafka,
}


# ---------------------------------------------------------------- driver


def produce(bootstrap: str, topic: str, count: int, size: int) -> float:
    from confluent_kafka import Producer  # noqa: PLC0415

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "acks": 1,
        }
    )
    value = os.urandom(size)
    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300) != 0:
        raise RuntimeError("records left unflushed")
    return time.perf_counter() - start


def run_worker(client: str, bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, __file__, "--worker", client, bootstrap, topic, str(count)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
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
    if args.worker:
        client, bootstrap, topic, count = args.worker
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
            took = produce(bootstrap, topic, args.records, size)
            print(f"produced {args.records:,} x {size} B in {took:.1f} s", flush=True)
            for rep in range(args.repeats):
                for client in clients:  # interleaved, so load spikes hit every client alike
                    result = run_worker(client, bootstrap, topic, args.records)
                    results.setdefault((size, client), []).append(result)
                    rate = result["count"] / result["window"]
                    print(
                        f"  {size:>5} B  rep {rep + 1} {client:<16} {rate:>12,.0f} rec/s "
                        f"{result['bytes'] / result['window'] / 1e6:8.1f} MB/s "
                        f"total {result['total']:6.2f} s cpu {result['cpu']:6.2f} s",
                        flush=True,
                    )
                    loads.append(benchlib.load_average())
            delete_topics(bootstrap, [topic])
    table, summary = render(results)
    print()
    print(table)
    print(summary)
    if not args.no_write:
        command = (
            f"python tests/benchmarks/bench_throughput.py --records {args.records} "
            f"--sizes {args.sizes} --repeats {args.repeats}"
        )
        write(table, summary, command, records=args.records, repeats=args.repeats, loads=loads)


def render(results: dict[tuple[int, str], list[dict[str, Any]]]) -> tuple[str, str]:
    """Median rate per size and client (min-max); ratios of medians."""

    def rates(runs: list[dict[str, Any]]) -> list[float]:
        return [r["count"] / r["window"] for r in runs]

    median = {key: statistics.median(rates(runs)) for key, runs in results.items()}
    lines = [
        "| size | client | runs | records/s median (min-max) | MB/s median "
        "| vs confluent-kafka | total s median | CPU s median |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    ratios: list[str] = []
    for (size, client), runs in results.items():
        rate = median[(size, client)]
        floor = median.get((size, "confluent-kafka"))
        ratio = f"{rate / floor:.2f}x" if floor else ""
        if floor and client.startswith("kgroup"):
            ratios.append(f"{client} {size} B {rate / floor:.2f}x")
        mbs = statistics.median(r["bytes"] / r["window"] / 1e6 for r in runs)
        low, high = min(rates(runs)), max(rates(runs))
        lines.append(
            f"| {size} B | {client} | {len(runs)} | {rate:,.0f} ({low:,.0f}-{high:,.0f}) "
            f"| {mbs:.1f} | {ratio} | {statistics.median(r['total'] for r in runs):.2f} "
            f"| {statistics.median(r['cpu'] for r in runs):.2f} |"
        )
    peers = []
    for size in sorted({s for s, _ in results}):
        ours = median.get((size, "kgroup sync"))
        for other in ("kafka-python", "aiokafka"):
            theirs = median.get((size, other))
            if ours and theirs:
                peers.append(f"{size} B vs {other} {ours / theirs:.1f}x")
    summary = (
        "summary (ratios of median records/s): kgroup / confluent-kafka loop = "
        + ", ".join(ratios)
        + "; kgroup sync / classic pure-Python clients = "
        + ", ".join(peers)
    )
    return "\n".join(lines), summary


def write(
    table: str, summary: str, command: str, *, records: int, repeats: int, loads: list[str]
) -> None:
    benchlib.write_section(
        "throughput",
        [
            f"## Throughput: one consumer reading {records:,} records from 12 partitions",
            "",
            f"{repeats} runs per client and size, interleaved; each "
            "client runs in a fresh process and reads every record of a 12-partition "
            "topic (produced once per size by a confluent-kafka producer; one broker, "
            "`kgroup.testing` settings). `confluent-kafka` is a plain `Consumer.consume(1000)` "
            "loop over assigned partitions: the floor of kgroup's data plane. kgroup sync / "
            "async are `kgroup.Consumer` / `AsyncConsumer` (asyncio) subscribed on the new "
            "protocol with `consume(1000)`; kafka-python and aiokafka `assign` all partitions "
            "(no group) and use `poll` / `getmany` with at most 1000 records. All clients run "
            "with their default fetch settings and auto-commit off; every loop counts each "
            "record and adds the length of its value. Rates are from the first record to "
            "the last; *total* includes start-up and the group join; *CPU* is the consumer "
            "process's user + system time.",
            "",
            table,
            "",
            summary,
            "",
            f"- {benchlib.machine_line()}",
            "- load average (1/5/15 min) after each client: "
            + "; ".join(loads)
            + " — the machine is shared with other test runs, which inflates every figure",
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
