"""The ten-line example of docs/simulation.md runs as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "simulation.md"


def test_the_ten_line_example_of_the_simulation_docs_runs() -> None:
    text = DOC.read_text()
    block = re.search(r"<!-- sim-example -->\n```python\n(.*?)```", text, re.S)
    assert block is not None, "docs/simulation.md lost its example block"
    code = block.group(1)
    assert len(code.strip().splitlines()) <= 13  # ten lines of simulation, plus a tiny listener
    scope: dict[str, object] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), scope)
    sim = scope["sim"]
    assignment = sim.assignment()  # type: ignore[attr-defined]
    fetched = [tp for parts in assignment.values() for tp in parts]
    assert sorted(tp.partition for tp in fetched) == list(range(12))
    assert "orders" in out.getvalue()
