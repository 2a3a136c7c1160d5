"""Shared by the benchmark scripts: machine facts and writing a section of docs/performance.md.

Not a benchmark itself (no ``bench_`` prefix); the scripts import it from
their own directory.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
AS_INSTALLED = Path(__file__).resolve().parent / "as_installed.py"


AS_INSTALLED_NOTE = (
    "kgroup's protocol library (kio) imports hypothesis when it is installed, and the "
    "development environment the benchmarks run in has it (a test dependency); an "
    "application's install does not, so the benchmark's kgroup processes block that "
    "import (about 20 MiB of RSS and 0.3 s of start-up that no user pays)"
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


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def spread(values: Sequence[float]) -> str:
    """``median (min-max)`` of ``values``."""
    if not values:
        return "n/a"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def write_section(name: str, lines: Sequence[str]) -> None:
    """Replace (or append) the ``bench:NAME`` section of docs/performance.md with ``lines``."""
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
