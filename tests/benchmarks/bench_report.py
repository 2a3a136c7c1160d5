"""Benchmark: ``kgroup report`` (a local Spark job) over synthetic fleet telemetry of growing size.

Run standalone (not collected by pytest), from the repository root:

    python tests/benchmarks/bench_report.py [--hours 1,3,8] [--members 1000]
        [--partitions 100000] [--master local[*]] [--driver-memory 6g] [--no-write]

For each size, ``python -m kgroup.report.synth`` writes a fleet's telemetry
(``--members`` members over ``--partitions`` partitions for ``--hours`` hours
of churn, commits every 5 s: about 0.8 million events per hour at the
defaults) into a cache directory, reused by later runs with the same
arguments. Then ``python -m kgroup.report`` runs on it as a user runs it, in a
fresh process (Spark's JVM included): wall time, the job's own time (from
reading to the HTML page, without JVM start-up), and the peak resident memory
of the whole process tree (Python + JVM, sampled from /proc every 0.2 s).
Prints a table; rewrites the ``bench:report`` section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib

CACHE = Path(
    os.environ.get("KGROUP_BENCH_CACHE", Path.home() / ".cache" / "kgroup" / "bench-report")
)


def tree_rss_mib(root: int) -> float:
    """Resident memory of ``root`` and all its descendants, MiB."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    total = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def run_measured(cmd: list[str], log: Path) -> tuple[int, float, float]:
    """Run ``cmd``; return (exit code, wall seconds, peak tree RSS MiB)."""
    peak = 0.0
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, tree_rss_mib(proc.pid))
                done.wait(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = proc.wait()
        done.set()
        sampler.join()
    return code, time.monotonic() - started, peak


def synth(members: int, partitions: int, hours: float, seed: int) -> tuple[Path, int, int]:
    """Telemetry of this size (cached); returns (directory, events, bytes)."""
    out = CACHE / f"m{members}-p{partitions}-h{hours:g}-s{seed}"
    marker = out / "complete"
    if not marker.exists():
        shutil.rmtree(out, ignore_errors=True)
        print(f"generating {out.name} ...", flush=True)
        result = subprocess.run(
            [
                sys.executable, "-m", "kgroup.report.synth", "--out", str(out),
                "--members", str(members), "--partitions", str(partitions),
                "--hours", str(hours), "--seed", str(seed), "--files", "16",
            ],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        print(result.stdout.strip(), flush=True)
        events = int(re.search(r"wrote ([\d,]+) events", result.stdout).group(1).replace(",", ""))  # type: ignore[union-attr]
        marker.write_text(f"{events}\n")
    events = int(marker.read_text())
    size = sum(p.stat().st_size for p in (out / "telemetry").glob("*.jsonl"))
    return out / "telemetry", events, size


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--hours", default="1,3,8", help="comma-separated sizes (hours of churn)")
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    args = parser.parse_args()
    benchlib.start_watch()
    sizes = [float(h) for h in args.hours.split(",") if h]
    rows = []
    loads = []
    for hours in sizes:
        telemetry, events, size = synth(args.members, args.partitions, hours, args.seed)
        out = CACHE / "out"
        shutil.rmtree(out, ignore_errors=True)
        log = CACHE / f"report-h{hours:g}.log"
        cmd = [
            sys.executable, "-m", "kgroup.report", "--input", str(telemetry), "--out", str(out),
            "--master", args.master, "--driver-memory", args.driver_memory,
        ]  # fmt: skip
        print(f"report over {events:,} events ({size / 1e9:.2f} GB) ...", flush=True)
        code, wall, peak = run_measured(cmd, log)
        text = log.read_text()
        if code != 0:
            print(text[-3000:])
            raise SystemExit(f"kgroup report failed (exit {code}); log: {log}")
        job = float(re.search(r"report of \d+ events in ([\d.]+) s", text).group(1))  # type: ignore[union-attr]
        summary = re.search(r"group \S+: .*", text)
        rows.append((hours, events, size, wall, job, peak, summary.group(0) if summary else ""))
        loads.append(benchlib.load_average())
        print(
            f"  {hours:g} h: {events:,} events, wall {wall:.1f} s, job {job:.1f} s, "
            f"{events / job:,.0f} events/s, peak RSS {peak:,.0f} MiB",
            flush=True,
        )
    lines = [
        "## Fleet report: `kgroup report` over synthetic telemetry (local Spark)",
        "",
        f"Synthetic telemetry of one group of {args.members:,} members over "
        f"{args.partitions:,} partitions (`python -m kgroup.report.synth`: churn 30/h — joins, "
        "leaves, SIGKILLs, static bounces, fencings — and a commit per member every 5 s), "
        f"read from JSON Lines by `python -m kgroup.report --master {args.master} "
        f"--driver-memory {args.driver_memory}` in a fresh process. *wall*: the whole command, "
        "JVM start-up included; *job*: reading to the HTML page; *peak RSS*: Python and the "
        "JVM together, sampled every 0.2 s. The job writes every table to Parquet and collects "
        "only the HTML page's small aggregates to the driver.",
        "",
        "| hours | events | input (GB) | wall (s) | job (s) | events/s (job) | peak RSS (MiB) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for hours, events, size, wall, job, peak, _ in rows:
        lines.append(
            f"| {hours:g} | {events:,} | {size / 1e9:.2f} | {wall:.1f} | {job:.1f} | "
            f"{events / job:,.0f} | {peak:,.0f} |"
        )
    if len(rows) >= 2:
        (_, e0, _, _, j0, _, _), (_, e1, _, _, j1, _, _) = rows[0], rows[-1]
        lines += [
            "",
            f"scaling: {e1 / e0:.1f}x the events took {j1 / j0:.1f}x the job time "
            f"({rows[0][0]:g} h to {rows[-1][0]:g} h).",
        ]
    lines += [
        "",
        f"- {benchlib.machine_line()}",
        f"- load average (1/5/15 min) after each size: {'; '.join(loads)} (over "
        f"{len(os.sched_getaffinity(0))} CPUs; other work on the machine inflates every figure)",
        f"- versions: kgroup {benchlib.version('kgroup')}, pyspark {benchlib.version('pyspark')}, "
        f"Java: {java_version()}",
        f"- date: {benchlib.now()}",
        f"- command: `python tests/benchmarks/bench_report.py --hours {args.hours} --members "
        f"{args.members} --partitions {args.partitions} --master {args.master} "
        f"--driver-memory {args.driver_memory}`",
    ]
    print("\n".join(lines))
    if not args.no_write:
        benchlib.write_section("report", lines)


def java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    first = (out.stderr or out.stdout).splitlines()
    return first[0] if first else "unknown"


if __name__ == "__main__":
    main()
