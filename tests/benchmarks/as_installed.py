"""Run a script as an application's install of kgroup would: ``python as_installed.py SCRIPT``.

Not a benchmark (no ``bench_`` prefix): the benchmarks launch kgroup member
processes through it (see ``benchlib.AS_INSTALLED_NOTE``).
"""

from __future__ import annotations

import runpy
import sys

if __name__ == "__main__":
    # kio imports hypothesis when it can; an application's install has no hypothesis.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
