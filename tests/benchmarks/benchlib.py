"""Shared by the benchmark scripts: machine facts and writing a section of docs/performance.md.

Not a benchmark itself (no ``bench_`` prefix); the scripts import it from
their own directory.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
AS_INSTALLED = Path(__file__).resolve().parent / "as_installed.py"


AS_INSTALLED_NOTE = (
    "kgroup's protocol library (kio) imports Hypothesis when it is installed (about 20 MiB "
    "of RSS and 0.3 s of start-up); kgroup hides it from that import unless pytest or "
    "Hypothesis is loaded already, and the benchmark's kgroup processes, run as an "
    "application's install without Hypothesis, block it outright"
)


def as_installed() -> None:
    """Make this process import kgroup as an application's install would (see AS_INSTALLED_NOTE).

    Call before importing kgroup. Only ever used in benchmark child processes.
    """
    import sys  # noqa: PLC0415

    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]


def as_installed_argv(argv: list[str]) -> list[str]:
    """``argv`` of a ``python [-u] SCRIPT ...`` command, run through as_installed.py."""
    head = 2 if len(argv) > 1 and argv[1] == "-u" else 1
    return [*argv[:head], str(AS_INSTALLED), *argv[head:]]


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_line() -> str:
    return (
        f"machine: `{platform.machine()}`, {len(os.sched_getaffinity(0))} CPUs (nproc), "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"


MAX_FOREIGN_CPU = 0.3
"""Above this CPU use by other processes (cores, averaged over the run), other work
makes a run's figures untrustworthy: the benchmark prints them but does not write
docs/performance.md.

Measured as the machine's user CPU time (``/proc/stat``) less the benchmark's own
process tree's: the load average cannot tell, as a benchmark whose own processes
outnumber the cores (eleven members, a broker) queues them, and every queued
thread counts in the load as if it were someone else's. User time only: the
kernel's own threads work for the benchmark too (writing back the gigabytes of
files bench_report writes counted 0.6 cores of system time outside its tree)."""


def _machine_user_seconds() -> float:
    """CPU time every core spent running processes' own code since boot, in seconds."""
    with open("/proc/stat", "rb") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    return (fields[0] + fields[1]) / _CLOCK_TICKS


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _tree(root: int) -> set[int]:
    """``root`` and every process descended from it (by /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def _cpu_by_process(pids: set[int]) -> dict[int, tuple[int, int]]:
    """(user + system, user) CPU ticks each of the processes ``pids`` has used itself
    (its waited-for children left out); processes that ended meanwhile are left out."""
    found = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # utime, stime: fields 14-15 of stat(5), 12-13 after the name.
        user, system = int(fields[11]), int(fields[12])
        found[pid] = (user + system, user)
    return found


@dataclass(frozen=True, slots=True)
class LoadReport:
    """How busy the machine was while a benchmark ran."""

    before: float
    """The 1-minute load average when the benchmark started."""
    peak: float
    """The highest 1-minute load average sampled during the run."""
    own: float
    """The benchmark's own processes' CPU use (cores, averaged over the run)."""
    foreign: float
    """Other processes' CPU use (cores, averaged over the run): the machine's user
    time less the benchmark's own (see :data:`MAX_FOREIGN_CPU`)."""

    @property
    def quiet(self) -> bool:
        return self.foreign <= MAX_FOREIGN_CPU

    def line(self) -> str:
        return (
            f"load (1-min average): {self.before:.2f} before the run, {self.peak:.2f} at its "
            f"highest during it; CPU: {self.own:.2f} cores used by the benchmark's own "
            f"processes, {self.foreign:.2f} by other work (user time; a run writes "
            f"docs/performance.md only with other work at {MAX_FOREIGN_CPU} cores or less)"
        )


class MachineWatch:
    """Samples the load average and the benchmark's own CPU use once a second.

    Its own CPU is summed over every process of its tree seen at a sample, each
    up to its last sample: a process that ends is not always waited for by its
    parent (a Spark JVM stopped with its session), so its parent's cutime
    would not carry it. A process that lives less than a sample is missed.
    """

    def __init__(self, interval: float = 1.0) -> None:
        self._interval = interval
        self._started = time.monotonic()
        self._before = os.getloadavg()[0]
        self._peak = self._before
        self._lock = threading.Lock()
        start = _cpu_by_process(_tree(os.getpid()))
        self._baseline = dict(start)  # the processes' use before the watch
        self._latest = dict(start)
        self._user_start = _machine_user_seconds()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="machine-watch", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        seen = _cpu_by_process(_tree(os.getpid()))
        with self._lock:
            self._latest.update(seen)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._peak = max(self._peak, os.getloadavg()[0])
            self._sample()

    def report(self) -> LoadReport:
        """The load so far (the watch keeps running)."""
        self._sample()
        wall = max(time.monotonic() - self._started, 1e-9)
        with self._lock:
            used = [
                (
                    total - self._baseline.get(pid, (0, 0))[0],
                    user - self._baseline.get(pid, (0, 0))[1],
                )
                for pid, (total, user) in self._latest.items()
            ]
        own = sum(total for total, _ in used) / _CLOCK_TICKS / wall
        own_user = sum(user for _, user in used) / _CLOCK_TICKS / wall
        user = (_machine_user_seconds() - self._user_start) / wall
        peak = max(self._peak, os.getloadavg()[0])
        return LoadReport(self._before, peak, own, max(0.0, user - own_user))


_WATCH: MachineWatch | None = None


def start_watch() -> MachineWatch:
    """Start watching the machine; call first thing in a benchmark's main()."""
    global _WATCH  # noqa: PLW0603 - one watch per benchmark process
    _WATCH = MachineWatch()
    return _WATCH


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def spread(values: Sequence[float]) -> str:
    """``median (min-max)`` of ``values``."""
    if not values:
        return "n/a"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def write_section(name: str, lines: Sequence[str]) -> bool:
    """Replace (or append) the ``bench:NAME`` section of docs/performance.md with ``lines``,
    followed by the run's load; returns False, writing nothing, when the machine was busy
    with other work (:data:`MAX_FOREIGN_CPU`) or nobody watched it (:func:`start_watch`)."""
    if _WATCH is None:
        print("not writing docs/performance.md: the run did not watch the machine's load")
        return False
    load = _WATCH.report()
    print(f"- {load.line()}")
    if not load.quiet:
        print(
            "not writing docs/performance.md: other work was running on the machine; "
            "run the benchmark again alone"
        )
        return False
    lines = [*lines, f"- {load.line()}"]
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    section = "\n".join([start, *lines, end])
    text = DOC.read_text() if DOC.exists() else "# Performance\n\nWritten by the benchmarks.\n"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text)
    print(f"updated {DOC}")
    return True


def produce_bulk(bootstrap: str, topic: str, count: int, size: int, partitions: int) -> float:
    """Produce ``count`` random records of ``size`` bytes round-robin over ``partitions``
    as fast as the producer goes (big batches, leader acks); the seconds it took."""
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
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300) != 0:
        raise RuntimeError("records left unflushed")
    return time.perf_counter() - start
