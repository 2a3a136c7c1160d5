"""Benchmark: one share consumer draining a topic, kgroup vs Apache Kafka's KafkaShareConsumer.

Run standalone (not collected by pytest), from the repository root:

    python tests/benchmarks/bench_share.py [--records N] [--repeats R] [--no-write]

Starts its own broker through ``kgroup.testing`` (or uses ``--bootstrap``),
produces ``--records`` records of 100 B once per partition count (a
confluent-kafka producer, round-robin over the partitions), then lets each
client drain all of them as the only member of a fresh share group (its
``share.auto.offset.reset`` set to ``earliest`` first), each in a fresh
process, interleaved (every client once, then again):

- ``java``: ``KafkaShareConsumer`` (``tests/peers/java/SharePeer.java``) in
  implicit mode at its defaults (``max.poll.records`` 500), on a JVM with its
  default options; the rate is timed inside the JVM;
- ``kgroup sync`` / ``kgroup async``: ``kgroup.ShareConsumer`` /
  ``kgroup.AsyncShareConsumer`` (asyncio) in implicit mode at their
  defaults, ``consume(500)``;
- ``kgroup prototype``: the test suite's ``ShareDriver``
  (``tests/integration/share_helpers.py``), acknowledgements sent ahead of
  each fetch; not run unless named in ``--clients``.

Every loop counts each record and adds the length of its value. The rate is
from the first record to the last (join and connection set-up excluded);
*process* is the whole process's wall time, start-up, join and close
included, from the driver's side; *CPU* is the process's user + system time.
Prints a table with each kgroup client's ratio to Java and rewrites the
``bench:share-throughput`` section of docs/performance.md (not under load:
see benchlib).
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

TESTS = Path(__file__).resolve().parents[1]
VALUE_SIZE = 100
BATCH = 500  # KafkaShareConsumer's max.poll.records default
JAVA = "java"
CLIENTS = (JAVA, "kgroup sync", "kgroup async")
OPTIONAL = ("kgroup prototype",)
KGROUP = ("kgroup sync", "kgroup async", "kgroup prototype")


# ---------------------------------------------------------------- workers (child processes)


def _result(first: float, last: float, count: int, nbytes: int) -> dict[str, Any]:
    return {"count": count, "bytes": nbytes, "window": last - first}


def _config(bootstrap: str, group: str) -> dict[str, Any]:
    # Implicit acknowledgement is the default on both sides; nothing else is set.
    return {"bootstrap.servers": bootstrap, "group.id": group}


def _worker_kgroup_sync(bootstrap: str, topic: str, group: str, want: int) -> dict[str, Any]:
    import kgroup  # noqa: PLC0415

    count = nbytes = 0
    first = last = 0.0
    with kgroup.ShareConsumer(_config(bootstrap, group)) as consumer:
        consumer.subscribe([topic])
        while count < want:
            for record in consumer.consume(BATCH, 1.0):
                if not count:
                    first = time.perf_counter()
                count += 1
                nbytes += len(record.value() or b"")
        last = time.perf_counter()
    return _result(first, last, count, nbytes)


def _worker_kgroup_async(bootstrap: str, topic: str, group: str, want: int) -> dict[str, Any]:
    import kgroup  # noqa: PLC0415

    async def run() -> dict[str, Any]:
        count = nbytes = 0
        first = last = 0.0
        async with kgroup.AsyncShareConsumer(_config(bootstrap, group)) as consumer:
            await consumer.subscribe([topic])
            while count < want:
                for record in await consumer.consume(BATCH, 1.0):
                    if not count:
                        first = time.perf_counter()
                    count += 1
                    nbytes += len(record.value() or b"")
            last = time.perf_counter()
        return _result(first, last, count, nbytes)

    return asyncio.run(run())


def _worker_kgroup_prototype(bootstrap: str, topic: str, group: str, want: int) -> dict[str, Any]:
    import anyio  # noqa: PLC0415

    sys.path.insert(0, str(TESTS / "integration"))
    from share_helpers import ShareDriver  # noqa: PLC0415

    from kgroup.dataplane.share.inflight import AcknowledgementMode  # noqa: PLC0415
    from kgroup.dataplane.share.session import FetchLimits  # noqa: PLC0415
    from kgroup.transport.client import KafkaClient  # noqa: PLC0415

    async def run() -> dict[str, Any]:
        count = nbytes = 0
        first = last = 0.0
        async with KafkaClient(bootstrap) as client:
            driver = ShareDriver(
                client,
                group,
                mode=AcknowledgementMode.IMPLICIT,
                limits=FetchLimits(max_records=BATCH, batch_size=BATCH),
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(driver.run, [topic])
                await driver.wait_until(lambda: bool(driver.fetching))
                while count < want:
                    # Buffered records first: a ShareFetch while holding every available
                    # record would wait its whole max_wait for more.
                    if driver.inflight.buffered:
                        batch = driver.inflight.poll(BATCH)
                    else:
                        batch = await driver.fetch(BATCH)
                    for record in batch:
                        if not count:
                            first = time.perf_counter()
                        count += 1
                        nbytes += len(record.value() or b"")
                    # Acknowledgements ahead of the next fetch (see share_helpers).
                    await driver.commit()
                last = time.perf_counter()
                await driver.close()
        return _result(first, last, count, nbytes)

    return asyncio.run(run())


WORKERS = {
    "kgroup sync": _worker_kgroup_sync,
    "kgroup async": _worker_kgroup_async,
    "kgroup prototype": _worker_kgroup_prototype,
}


# ---------------------------------------------------------------- driver


def new_group(bootstrap: str) -> str:
    """A fresh share group that starts at the earliest offset."""
    from kgroup.admin.share import set_share_auto_offset_reset  # noqa: PLC0415
    from kgroup.transport.client import KafkaClient  # noqa: PLC0415

    group = f"bench-share-{uuid.uuid4().hex[:10]}"

    async def reset() -> None:
        async with KafkaClient(bootstrap) as client:
            await set_share_auto_offset_reset(client, group, "earliest")

    asyncio.run(reset())
    return group


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_java(bootstrap: str, topic: str, group: str, want: int) -> dict[str, Any]:
    sys.path.insert(0, str(TESTS))
    from peers import java_classpath  # noqa: PLC0415
    from peers.share_peer import SharePeerGroup  # noqa: PLC0415

    java_classpath()  # compiles the peer once, outside the timing
    timeout = max(120.0, want / 2_000)
    with SharePeerGroup(bootstrap) as peers:
        cpu = _children_cpu()
        start = time.perf_counter()
        # Subscribed with a budget of 0: joined but not polling until drain.
        (peer,) = peers.start_shares(group, ["implicit"], topic=topic, budget=0, jvm_options=())
        drained = peer.drain(want, timeout)
        peer.close()
        wall = time.perf_counter() - start
    if drained.count < want:
        raise RuntimeError(f"java drained {drained.count} of {want} records in {timeout:.0f} s")
    return {
        "count": drained.count,
        "bytes": drained.bytes,
        "window": drained.window,
        "wall": wall,
        "cpu": _children_cpu() - cpu,
    }


def run_worker(client: str, bootstrap: str, topic: str, group: str, want: int) -> dict[str, Any]:
    if client == JAVA:
        return run_java(bootstrap, topic, group, want)
    cpu = _children_cpu()
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, __file__, "--worker", client, bootstrap, topic, group, str(want)],
        capture_output=True,
        text=True,
        timeout=max(300.0, want / 2_000),
        check=False,
    )
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{client} failed:\n{result.stderr[-3000:]}")
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    data["wall"] = wall
    data["cpu"] = _children_cpu() - cpu
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="runs per client and topic")
    parser.add_argument("--partitions", default="1,4", help="partition counts of the topics")
    parser.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        help=f"comma-separated, of {', '.join(CLIENTS + OPTIONAL)}",
    )
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    benchlib.start_watch()
    if args.worker:
        client, bootstrap, topic, group, count = args.worker
        benchlib.as_installed()
        print(json.dumps(WORKERS[client](bootstrap, topic, group, int(count))), flush=True)
        return

    clients = [c for c in args.clients.split(",") if c]
    unknown = sorted(set(clients) - set(CLIENTS + OPTIONAL))
    if unknown:
        parser.error(f"unknown clients {unknown}; choose from {CLIENTS + OPTIONAL}")
    counts = [int(p) for p in args.partitions.split(",")]
    if args.bootstrap:
        results, loads = measure(args.bootstrap, clients, counts, args.records, args.repeats)
    else:
        from kgroup.testing import KafkaBroker  # noqa: PLC0415

        with KafkaBroker() as broker:
            results, loads = measure(
                broker.bootstrap_servers, clients, counts, args.records, args.repeats
            )
    table, summary = render(results)
    print()
    print(table)
    print()
    print(summary)
    if not args.no_write:
        command = (
            f"python tests/benchmarks/bench_share.py --records {args.records} "
            f"--repeats {args.repeats} --partitions {args.partitions} --clients {args.clients}"
        )
        write(table, summary, command, records=args.records, repeats=args.repeats, loads=loads)


Results = dict[tuple[int, str], list[dict[str, Any]]]


def measure(
    bootstrap: str, clients: list[str], counts: list[int], records: int, repeats: int
) -> tuple[Results, list[str]]:
    from kgroup.testing import create_topic, delete_topics  # noqa: PLC0415

    results: Results = {}
    loads: list[str] = []
    for partitions in counts:
        topic = f"bench-share-{partitions}p-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, partitions=partitions)
        took = benchlib.produce_bulk(bootstrap, topic, records, VALUE_SIZE, partitions)
        print(f"produced {records:,} x {VALUE_SIZE} B to {partitions} partition(s) in {took:.1f} s")
        try:
            for rep in range(repeats):
                for client in clients:  # interleaved, so load spikes hit every client alike
                    result = run_worker(client, bootstrap, topic, new_group(bootstrap), records)
                    results.setdefault((partitions, client), []).append(result)
                    print(
                        f"  {partitions}p rep {rep + 1} {client:<18} "
                        f"{result['count'] / result['window']:>10,.0f} rec/s "
                        f"window {result['window']:6.2f} s process {result['wall']:6.2f} s "
                        f"cpu {result['cpu']:6.2f} s",
                        flush=True,
                    )
                    loads.append(benchlib.load_average())
        finally:
            delete_topics(bootstrap, [topic])
    return results, loads


def _rates(runs: list[dict[str, Any]]) -> list[float]:
    return [r["count"] / r["window"] for r in runs]


def _whole(runs: list[dict[str, Any]]) -> list[float]:
    return [r["count"] / r["wall"] for r in runs]


def render(results: Results) -> tuple[str, str]:
    """The table and the ratio summary (ratios of medians)."""
    rate = {key: statistics.median(_rates(runs)) for key, runs in results.items()}
    whole = {key: statistics.median(_whole(runs)) for key, runs in results.items()}
    lines = [
        "| partitions | client | runs | records/s median (min-max) | vs Java | "
        "whole-process records/s | vs Java | process s median | CPU s median |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    summary = []
    for partitions in sorted({p for p, _ in results}):
        java, java_whole = rate.get((partitions, JAVA)), whole.get((partitions, JAVA))
        for client in (JAVA, *KGROUP):
            runs = results.get((partitions, client))
            if not runs:
                continue
            mine, mine_whole = rate[(partitions, client)], whole[(partitions, client)]
            versus = f"{mine / java:.2f}x" if java else "n/a"
            versus_whole = f"{mine_whole / java_whole:.2f}x" if java_whole else "n/a"
            low, high = min(_rates(runs)), max(_rates(runs))
            lines.append(
                f"| {partitions} | {client} | {len(runs)} | {mine:,.0f} ({low:,.0f}-{high:,.0f}) "
                f"| {versus} | {mine_whole:,.0f} | {versus_whole} "
                f"| {statistics.median(r['wall'] for r in runs):.2f} "
                f"| {statistics.median(r['cpu'] for r in runs):.2f} |"
            )
            if client != JAVA:
                summary.append(
                    f"- {partitions} partition(s), {client} / Java: {versus} first record to "
                    f"last, {versus_whole} whole process"
                )
    text = "ratios of median records/s in this run:\n\n" + "\n".join(summary or ["- none"])
    return "\n".join(lines), text


def write(
    table: str, summary: str, command: str, *, records: int, repeats: int, loads: list[str]
) -> None:
    benchlib.write_section(
        "share-throughput",
        [
            f"## Share groups: one share consumer draining {records:,} records of {VALUE_SIZE} B",
            "",
            f"{repeats} runs per client and topic, interleaved; each run is a fresh process "
            "and the only member of a fresh share group (`share.auto.offset.reset=earliest`) "
            "draining a topic produced once by a confluent-kafka producer. `java` is Apache "
            "Kafka's `KafkaShareConsumer` in implicit mode at its defaults "
            "(`tests/peers/java/SharePeer.java`, default JVM options), timed inside the JVM; "
            "kgroup sync / async are `kgroup.ShareConsumer` / `AsyncShareConsumer` (asyncio) "
            f"in implicit mode at their defaults with `consume({BATCH})`. Every loop counts "
            "each record and adds the length of its value. *records/s* is from the first "
            "record to the last; *whole-process* divides the records by the process's wall "
            "time (start-up, join and close included; for Java the JVM's start too). "
            f"{benchlib.AS_INSTALLED_NOTE}.",
            "",
            table,
            "",
            summary,
            "",
            f"- {benchlib.machine_line()}",
            "- load average (1/5/15 min) after each client: " + "; ".join(loads),
            f"- versions: kgroup {benchlib.version('kgroup')}, Apache Kafka client and "
            "broker 4.4.0",
            f"- date: {benchlib.now()}",
            f"- command: `{command}`",
        ],
    )


if __name__ == "__main__":
    main()
