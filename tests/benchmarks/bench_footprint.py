"""Benchmark: an idle member's memory and CPU: kgroup, librdkafka, Java, kafka-python, aiokafka.

Run standalone (not collected by pytest), from the repository root:

    python tests/benchmarks/bench_footprint.py [--seconds 60] [--members 3]
        [--kinds kgroup,librdkafka,...] [--reading-kinds kgroup,librdkafka] [--no-write]

Starts its own broker through ``kgroup.testing`` (heartbeat interval 0.5 s for
every client). For each client kind, ``--members`` member processes (the peer
harness of ``tests/peers``) join a group of their own on a 12-partition topic
that receives no records; once every group is balanced, all members idle
together for ``--seconds`` — heartbeating, and polling 100 ms at a time like
an application waiting for records. kafka-python and aiokafka have no
new-protocol member: theirs (``idle_member.py``) are in classic groups with
the same heartbeat interval. Per process, from /proc: resident memory
(VmRSS) at the end and CPU time (user + system, the scheduler's nanosecond
count per thread) spent in the window.
A second window does the same for ``--reading-kinds``, whose members also read
the consumer's assignment before every poll (rows ``KIND+assignment()``).
Prints a table and a summary line; rewrites the ``bench:footprint`` section
of docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
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
import benchlib
from installed_peers import InstalledPeers
from peers import DEFAULT_JVM_OPTIONS, Peer, balanced
from peers.python_peer import READ_ASSIGNMENT

KINDS = ("kgroup", "librdkafka", "java", "kafka-python", "aiokafka")
READING = "+assignment()"
"""A kind's suffix: its members also read the consumer's assignment before every poll."""
CLASSIC_KINDS = ("kafka-python", "aiokafka")
IDLE_MEMBER = Path(__file__).resolve().parent / "idle_member.py"


class _ClassicMember:
    """An ``idle_member.py`` process; ``held`` is its latest reported assignment."""

    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, name: str) -> None:
        self.kind, self.name = kind, name
        self.held: set[int] = set()
        self.process = subprocess.Popen(
            [sys.executable, "-u", str(IDLE_MEMBER), kind, bootstrap, group, topic],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.pid = self.process.pid
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            words = line.split()
            if len(words) == 2 and words[0] == "assigned":
                self.held = set() if words[1] == "-" else {int(p) for p in words[1].split(",")}

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _classic_balanced(members: Sequence[_ClassicMember]) -> bool:
    held = [m.held for m in members]
    sizes = [len(h) for h in held]
    return (
        sum(sizes) == PARTITIONS
        and set().union(*held) == set(range(PARTITIONS))
        and max(sizes) - min(sizes) <= 1
    )


PARTITIONS = 12
TICKS = os.sysconf("SC_CLK_TCK")


def ticked_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads, also those that ended),
    from /proc/PID/stat: in clock ticks (10 ms here)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14, 15)


def _task_seconds(task: Path) -> float:
    # The scheduler's own run time of the thread, in nanoseconds (user + system).
    return int((task / "schedstat").read_text().split()[0]) / 1e9


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a process's live threads by role: ``app`` (the main thread: the
    poll loop), ``librdkafka`` (threads named ``rdk:*``) and ``other`` (the rest:
    kgroup's event loop, the peer's idle stdin reader, a JVM's threads), from
    /proc/PID/task/*/schedstat (nanoseconds: an idle member spends a few clock
    ticks in a minute, and /proc/PID/stat counts whole ticks)."""
    out = {"app": 0.0, "librdkafka": 0.0, "other": 0.0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
            seconds = _task_seconds(task)
        except OSError:
            continue  # the thread ended meanwhile
        role = (
            "app" if task.name == str(pid) else "librdkafka" if comm.startswith("rdk:") else "other"
        )
        out[role] += seconds
    return out


def cpu_seconds(pid: int) -> tuple[float, float]:
    """A process's CPU seconds: the sum over its live threads (nanoseconds, see
    :func:`thread_cpu`), and :func:`ticked_cpu_seconds` (which also counts threads
    that ended, to check that none did)."""
    return sum(thread_cpu(pid).values()), ticked_cpu_seconds(pid)


def window_cpu(pid: int, start: tuple[float, float], name: str) -> float:
    """CPU seconds of ``pid`` since ``start`` (from :func:`cpu_seconds`)."""
    precise, ticked = (end - begin for end, begin in zip(cpu_seconds(pid), start, strict=True))
    if ticked - precise > 2 / TICKS:
        # A thread ended in the window, taking its time out of the live threads' sum.
        print(f"  ({name}: threads ended in the window; CPU counted in clock ticks)", flush=True)
        return ticked
    return precise


POLL_S = 0.1
"""The peers' idle poll (``consume`` with a 100 ms timeout)."""
HEARTBEAT_S = 0.5
"""The test broker's heartbeat interval."""


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--members", type=int, default=3, help="member processes per kind")
    parser.add_argument("--kinds", default=",".join(KINDS), help="client kinds of the first window")
    parser.add_argument(
        "--reading-kinds",
        default="kgroup,librdkafka",
        help=f"client kinds of a second window whose members also read the assignment "
        f"before every poll (reported as KIND{READING}); empty: no second window",
    )
    parser.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    args = parser.parse_args()
    benchlib.start_watch()
    rounds = [
        [k for k in args.kinds.split(",") if k],
        [f"{k}{READING}" for k in args.reading_kinds.split(",") if k],
    ]

    from kgroup.testing import KafkaBroker  # noqa: PLC0415

    rows: list[tuple[str, list[float], list[float]]] = []
    threads: list[tuple[str, float, float, float]] = []
    elapsed = args.seconds
    with KafkaBroker() as broker:
        for number, kinds in enumerate(rounds):
            if kinds:
                elapsed = idle_window(
                    broker.bootstrap_servers, kinds, args, number, rows=rows, threads=threads
                )
    table, summary = render(rows, elapsed)
    split = render_threads(threads)
    print()
    print(table)
    print(summary)
    print()
    print(split)
    if not args.no_write:
        command = (
            f"python tests/benchmarks/bench_footprint.py --seconds {args.seconds:g} "
            f"--members {args.members}"
        )
        write(table, summary, split, command, args.members)


def render_threads(threads: list[tuple[str, float, float, float]]) -> str:
    """Where a Python member's idle CPU goes, per poll and per heartbeat interval."""
    lines = [
        "| client | poll loop thread, per 100 ms poll (us) | other Python threads "
        "(kgroup's event loop), per 0.5 s heartbeat interval (us) | librdkafka's threads "
        "(ms per s) |",
        "|---|---:|---:|---:|",
    ]
    for kind, app, other, rdk in threads:
        lines.append(f"| {kind} | {app * 1e6:.0f} | {other * 1e6:.0f} | {rdk * 1e3:.2f} |")
    return "\n".join(lines)


def idle_window(
    bootstrap: str,
    kinds: list[str],
    args: argparse.Namespace,
    number: int,
    *,
    rows: list[tuple[str, list[float], list[float]]],
    threads: list[tuple[str, float, float, float]],
) -> float:
    """Start ``kinds``' members, let them idle together, add a row per kind; the window (s)."""
    from kgroup.testing import create_topic  # noqa: PLC0415

    with InstalledPeers(bootstrap) as peers:
        groups: dict[str, Sequence[Peer | _ClassicMember]] = {}
        classic: list[_ClassicMember] = []
        try:
            for kind in kinds:
                client, reading = kind.removesuffix(READING), kind.endswith(READING)
                topic = f"bench-footprint-{client}-{number}"
                create_topic(bootstrap, topic, partitions=PARTITIONS)
                group = f"bench-footprint-{client}-{number}-{uuid.uuid4().hex[:6]}"
                if client in CLASSIC_KINDS:
                    started = [
                        _ClassicMember(client, bootstrap, group, topic, f"{kind}-{i}")
                        for i in range(args.members)
                    ]
                    classic.extend(started)
                    groups[kind] = started
                else:
                    config = {READ_ASSIGNMENT: "true"} if reading else None
                    groups[kind] = [
                        peers.start(client, group, name=f"{kind}-{i}", topic=topic, config=config)
                        for i in range(args.members)
                    ]

            def unsettled() -> list[str]:
                return [
                    kind
                    for kind, ms in groups.items()
                    if not (
                        _classic_balanced([m for m in ms if isinstance(m, _ClassicMember)])
                        if kind.removesuffix(READING) in CLASSIC_KINDS
                        else balanced([m for m in ms if isinstance(m, Peer)], PARTITIONS)
                    )
                ]

            deadline = time.monotonic() + 120
            while waiting := unsettled():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the groups of {waiting} did not balance within 120 s")
                time.sleep(0.1)
            time.sleep(2.0)  # past the join's own work
            start = {p.pid: cpu_seconds(p.pid) for ms in groups.values() for p in ms}
            split_start = {
                p.pid: thread_cpu(p.pid)
                for kind, ms in groups.items()
                if kind.removesuffix(READING) in ("kgroup", "librdkafka")
                for p in ms
            }
            began = time.monotonic()
            print(f"idling {args.seconds:.0f} s: {', '.join(kinds)} ...", flush=True)
            time.sleep(args.seconds)
            elapsed = time.monotonic() - began
            for kind, members in groups.items():
                for member in members:
                    assert member.alive(), f"{member.name} died"
                cpu = [window_cpu(m.pid, start[m.pid], m.name) for m in members]
                rss = [rss_mib(m.pid) for m in members]
                rows.append((kind, rss, cpu))
                if all(m.pid in split_start for m in members):
                    splits = [
                        {r: v - split_start[m.pid][r] for r, v in thread_cpu(m.pid).items()}
                        for m in members
                    ]
                    threads.append(
                        (
                            kind,
                            statistics.median(t["app"] for t in splits) / (elapsed / POLL_S),
                            statistics.median(t["other"] for t in splits) / (elapsed / HEARTBEAT_S),
                            statistics.median(t["librdkafka"] for t in splits) / elapsed,
                        )
                    )
                print(
                    f"  {kind:<24} RSS {statistics.median(rss):7.1f} MiB  "
                    f"CPU {statistics.median(cpu):6.2f} s / {elapsed:.0f} s",
                    flush=True,
                )
            for members in groups.values():
                for member in members:
                    if isinstance(member, Peer):
                        member.send("close")
        finally:
            for member in classic:
                member.close()
    return elapsed


def render(rows: list[tuple[str, list[float], list[float]]], elapsed: float) -> tuple[str, str]:
    lines = [
        "| client | processes | RSS MiB median (min-max) | CPU s in window median (min-max) "
        "| CPU % of one core |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind, rss, cpu in rows:
        lines.append(
            f"| {kind} | {len(rss)} | {benchlib.spread(rss)} | {benchlib.spread(cpu)} "
            f"| {statistics.median(cpu) / elapsed * 100:.2f} |"
        )
    med = {k: (statistics.median(r), statistics.median(c)) for k, r, c in rows}
    parts = []
    if "kgroup" in med:
        for other in med:
            if other != "kgroup" and not other.endswith(READING):
                parts.append(
                    f"kgroup / {other}: RSS {med['kgroup'][0] / med[other][0]:.2f}x, "
                    f"CPU {med['kgroup'][1] / max(med[other][1], 1e-9):.2f}x"
                )
    summary = f"summary (idle {elapsed:.0f} s, per process): " + "; ".join(parts)
    goals = []
    for suffix in ("", READING):
        ours, theirs = f"kgroup{suffix}", f"librdkafka{suffix}"
        if ours in med and theirs in med:
            rss_ratio = med[ours][0] / med[theirs][0]
            cpu_ratio = med[ours][1] / max(med[theirs][1], 1e-9)
            goals.append(
                f"{ours} / {theirs}: CPU {cpu_ratio:.2f}x (target <= 2x: "
                f"{'met' if cpu_ratio <= 2 else 'NOT met'}), RSS {rss_ratio:.2f}x "
                f"(target <= 1.5x: {'met' if rss_ratio <= 1.5 else 'NOT met'})"
            )
    if goals:
        summary += " — issue 33 goals: " + "; ".join(goals)
    return "\n".join(lines), summary


def write(table: str, summary: str, split: str, command: str, members: int) -> None:
    benchlib.write_section(
        "footprint",
        [
            "## Footprint: an idle member's memory and CPU",
            "",
            f"Per client kind, {members} member processes in a group of their own on a "
            f"{PARTITIONS}-partition topic with no records, all kinds idling in the same "
            "window after their groups balanced: heartbeats every 0.5 s (the broker's "
            "setting for every client) and a poll every 100 ms (the peer harness's loop). "
            "RSS is VmRSS at the end of the window; CPU is the run time of the whole "
            "process (every thread, user + system) during the window, from the scheduler's "
            "nanosecond counters (/proc/PID/task/*/schedstat: /proc/PID/stat counts 10 ms "
            "ticks, a tenth of an idle member's minute). The kgroup and librdkafka members are "
            "CPython processes running `tests/peers/python_peer.py` (interpreter and imports "
            "included); the Java members run `tests/peers/java/Peer.java` with "
            f"`{' '.join(DEFAULT_JVM_OPTIONS)}`. kafka-python and aiokafka have no "
            "new-protocol member: theirs (`tests/benchmarks/idle_member.py`) idle in classic "
            "groups of their own with `heartbeat_interval_ms=500`, `session_timeout_ms=6000` "
            f"and a 100 ms poll. The `{READING}` rows are a second window of the same members "
            "reading the consumer's assignment before every poll, as a loop that checks what "
            "it owns does. "
            f"{benchlib.AS_INSTALLED_NOTE}. Targets (issue 33): kgroup "
            "<= 2x librdkafka's CPU and <= 1.5x its RSS, with and without that read.",
            "",
            table,
            "",
            summary,
            "",
            "Where a kgroup or librdkafka member's CPU goes (per-thread CPU from "
            "/proc/PID/task, medians over the members; per poll and per heartbeat "
            "interval: the window's CPU divided by the window over the interval):",
            "",
            split,
            "",
            f"- {benchlib.machine_line()}",
            f"- load average (1/5/15 min) when written: {benchlib.load_average()} (the "
            "benchmark's own processes included; the last line says what other work used)",
            f"- versions: kgroup {benchlib.version('kgroup')}, confluent-kafka "
            f"{benchlib.version('confluent-kafka')}, kafka-python "
            f"{benchlib.version('kafka-python')}, aiokafka {benchlib.version('aiokafka')}, "
            "Java kafka-clients 4.4.0 on "
            f"{java_version()}, Apache Kafka broker 4.4.0",
            f"- date: {benchlib.now()}",
            f"- command: `{command}`",
        ],
    )


def java_version() -> str:
    import subprocess  # noqa: PLC0415

    result = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    first = (result.stderr or result.stdout).splitlines()
    return first[0].strip() if first else "java (unknown version)"


if __name__ == "__main__":
    main()
