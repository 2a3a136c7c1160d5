"""Profile of the consume path at small records: kgroup sync and async against the plain loop.

Not a benchmark (no ``bench_`` prefix, writes nothing): the measurements
behind the "Consume path" section of docs/performance.md, reproducible.
Run standalone from the repository root:

    python tests/benchmarks/profile_consume.py [--records N] [--size B] [--pairs P] [--freeze]
        [--keep-batch] [--import MODULES]

Starts its own broker through ``kgroup.testing``, produces ``--records``
records of ``--size`` bytes once into a 12-partition topic, then runs
``--pairs`` interleaved rounds of three fresh processes (the plain
confluent-kafka loop at kgroup's data-plane settings, ``kgroup.Consumer``,
``kgroup.AsyncConsumer`` on asyncio), each reading every record with
``consume(1000)`` and touching each the way bench_throughput.py does. Each
process reports, over the window from its first record to its last: the
rate, its main thread's CPU time, the garbage collector's passes per
generation and the time they took (``gc.callbacks``), the tracked objects
left at the end, how many batches came back full, and (async consumer only) how
many data-plane calls waited for records: the ones that went to a worker
thread because the queue was empty. ``--freeze`` adds, per round, a plain, a kgroup
sync and a kgroup async process that call ``gc.freeze()`` once their first batch is
in: with the full passes out of every process, what is left is the per-record work.
Each kgroup process's rate is also compared with the plain process of its round that
froze alike, and the median of those per-round ratios printed.
``--import MODULES`` has every process import those modules first (comma- or
space-separated), standing in for an application's own code: the collector's
cost depends on the size of the whole process, not of the library alone.
``--keep-batch`` has every loop keep its last batch until the next call has
returned, as ``batch = consumer.consume(...)`` in a loop does: the collector
then finds a whole batch alive whenever it runs, also before a take.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib

PARTITIONS = 12
BATCH = 1000
KINDS = ("plain", "kgroup sync", "kgroup async")


class _Window:
    """What one worker measures from its first record on."""

    def __init__(self, freeze: bool, keep: bool) -> None:
        self.freeze = freeze
        self.keep = keep
        self.last: list[Any] = []
        self.count = 0
        self.batches = 0
        self.full = 0
        self.waits: int | None = None
        self.gc_passes: Counter[int] = Counter()
        self.gc_seconds: defaultdict[int, float] = defaultdict(float)
        self._pass_started = 0.0
        self._started = 0.0
        self._cpu = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._pass_started = time.perf_counter()
        elif self._started:
            generation = int(info["generation"])
            self.gc_passes[generation] += 1
            self.gc_seconds[generation] += time.perf_counter() - self._pass_started

    def batch(self, records: list[Any]) -> None:
        if records and not self._started:
            if self.freeze:
                gc.freeze()
            self._started = time.perf_counter()
            self._cpu = time.thread_time()
        if self._started:
            self.batches += 1
            self.full += len(records) == BATCH
        for record in records:
            self.count += 1
            len(record.value() or b"")
        if self.keep:
            self.last = records

    def result(self) -> dict[str, Any]:
        window = time.perf_counter() - self._started
        return {
            "rate": self.count / window,
            "cpu": time.thread_time() - self._cpu,
            "gc": {g: [self.gc_passes[g], self.gc_seconds[g]] for g in sorted(self.gc_passes)},
            "objects": len(gc.get_objects()),
            "batches": self.batches,
            "full": self.full,
            "waits": self.waits,
        }


class _CountingDataPlane:
    """The consumer's data plane, counting the ``consume`` calls that wait for records."""

    def __init__(self, inner: Any, window: _Window) -> None:
        self._inner = inner
        self._window = window

    def consume(self, max_records: int, timeout: float) -> list[Any]:
        if timeout > 0:
            self._window.waits = (self._window.waits or 0) + 1
        return cast(list[Any], self._inner.consume(max_records, timeout))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _kgroup_config(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"profile-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def _worker(kind: str, bootstrap: str, topic: str, want: int, freeze: bool) -> dict[str, Any]:
    for module in _modules(os.environ.get("PROFILE_IMPORT", "")):
        importlib.import_module(module)
    window = _Window(freeze, os.environ.get("PROFILE_KEEP_BATCH") == "1")
    if kind == "plain":
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # noqa: PLC0415

        settings: dict[str, str] = json.loads(os.environ["PROFILE_KGROUP_SETTINGS"])
        plain = Consumer(
            {
                **settings,
                "bootstrap.servers": bootstrap,
                "group.id": f"profile-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
            }
        )
        plain.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while window.count < want:
            window.batch([m for m in plain.consume(BATCH, 1.0) if m.error() is None])
        result = window.result()
        plain.close()
        return result

    import kgroup  # noqa: PLC0415

    if kind == "kgroup sync":
        with kgroup.Consumer(_kgroup_config(bootstrap)) as consumer:
            consumer.subscribe([topic])
            while window.count < want:
                window.batch(consumer.consume(BATCH, 1.0))
            return window.result()

    async def run() -> dict[str, Any]:
        async with kgroup.AsyncConsumer(_kgroup_config(bootstrap)) as consumer:
            consumer.subscribe([topic])
            window.waits = 0
            consumer._dataplane = _CountingDataPlane(consumer._dataplane, window)
            while window.count < want:
                window.batch(await consumer.consume(BATCH, 1.0))
            return window.result()

    return asyncio.run(run())


def _modules(spec: str) -> list[str]:
    return [name for name in spec.replace(",", " ").split() if name]


def _line(label: str, r: dict[str, Any]) -> str:
    passes = " ".join(f"g{g}:{n}/{s * 1e3:.0f}ms" for g, (n, s) in r["gc"].items())
    return (
        f"  {label:<28} {r['rate']:>11,.0f} rec/s  main-thread CPU {r['cpu']:5.2f} s  "
        f"gc {passes}  objects {r['objects']:,}  full {r['full']}/{r['batches']}  "
        f"waits {'-' if r['waits'] is None else r['waits']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="record value size in bytes")
    parser.add_argument("--pairs", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--freeze", action="store_true", help="also run with gc.freeze()")
    parser.add_argument(
        "--keep-batch",
        action="store_true",
        help="every loop keeps its last batch during the next call (batch = consume(...))",
    )
    parser.add_argument(
        "--import",
        dest="modules",
        default="",
        metavar="MODULES",
        help="modules every process imports first, standing in for an application's code",
    )
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, bootstrap, topic, count, freeze = args.worker
        benchlib.as_installed()
        print(json.dumps(_worker(kind, bootstrap, topic, int(count), freeze == "1")), flush=True)
        return

    from kgroup.dataplane.librdkafka import DATAPLANE_DEFAULTS  # noqa: PLC0415
    from kgroup.testing import KafkaBroker, create_topic  # noqa: PLC0415

    for module in _modules(args.modules):
        importlib.import_module(module)  # a typo fails here, before the broker starts
    env = {
        **os.environ,
        "PROFILE_KGROUP_SETTINGS": json.dumps(dict(DATAPLANE_DEFAULTS)),
        "PROFILE_IMPORT": args.modules,
        "PROFILE_KEEP_BATCH": "1" if args.keep_batch else "0",
    }
    runs = [(kind, False) for kind in KINDS]
    if args.freeze:
        runs += [("plain", True), ("kgroup sync", True), ("kgroup async", True)]
    rates: dict[str, list[float]] = {}
    with KafkaBroker() as broker:
        bootstrap = broker.bootstrap_servers
        topic = f"profile-consume-{args.size}"
        create_topic(bootstrap, topic, partitions=PARTITIONS)
        benchlib.produce_bulk(bootstrap, topic, args.records, args.size, PARTITIONS)
        for round_ in range(args.pairs):
            print(f"round {round_ + 1} (load {benchlib.load_average()})", flush=True)
            for kind, freeze in runs:
                label = kind + (" + gc.freeze()" if freeze else "")
                argv = [sys.executable, __file__, "--worker", kind, bootstrap, topic]
                argv += [str(args.records), "1" if freeze else "0"]
                done = subprocess.run(
                    argv,
                    capture_output=True,
                    text=True,
                    timeout=900,
                    check=False,
                    env=env,
                )
                if done.returncode != 0:
                    raise RuntimeError(f"{label} failed:\n{done.stderr[-3000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                rates.setdefault(label, []).append(result["rate"])
                print(_line(label, result), flush=True)
    print("medians (per-round ratio to the plain process that froze alike: median, range):")
    for label, values in rates.items():
        peer = "plain + gc.freeze()" if label.endswith("gc.freeze()") else "plain"
        paired = [ours / theirs for ours, theirs in zip(values, rates[peer], strict=True)]
        versus = (
            f"  {statistics.median(paired):.2f}x ({min(paired):.2f}-{max(paired):.2f})"
            if label != peer
            else ""
        )
        print(
            f"  {label:<28} {statistics.median(values):>11,.0f} rec/s ({len(values)} runs)" + versus
        )


if __name__ == "__main__":
    main()
