"""Every code block in README.md and docs/*.md runs, or says why it cannot.

Each fenced block is classified by its info string (the words after the fence):

- ``python`` blocks run as a script in a subprocess (``sys.executable``), and
  ``sh`` / ``bash`` blocks in ``bash -eo pipefail``, each with a timeout,
  against the session's real broker (``kafka_broker``);
- a block whose info string says ``fragment`` is not run; the words after
  ``fragment`` must say why (```` ```python fragment: needs a secured cluster ````),
  so a reader knows what the block leaves out;
- ``text``, ``json`` and ``mermaid`` blocks are output, data and diagrams;
- anything else (no language, ``console`` ...) fails: tag the block.

How blocks reach the broker, as written for a reader's own machine:
``localhost:9092`` in a block is replaced by the broker's address, and
``KAFKA_BOOTSTRAP_SERVERS`` (what ``kgroup broker up`` prints, and what the
``kgroup topics`` commands read) is set to it. Before any block runs, the topic
``orders`` (3 partitions) exists with records, so consumer examples have
something to read; blocks that consume stop on their own (after a few records).
Blocks run in a fresh directory each, where ``.venv`` links to the running
Python's environment, so ``.venv/bin/kgroup`` works as in the docs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kgroup.testing import KafkaBroker

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

RUNNABLE = {"python": "python", "sh": "bash", "bash": "bash", "shell": "bash"}
DISPLAY = {"text", "json", "mermaid"}
"""Languages of blocks that are not code: output, data, diagrams."""

TIMEOUT = 60.0
"""Seconds one block may run; the slowest (a consumer joining a group) needs a few."""

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    info: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def language(self) -> str:
        words = self.info.split()
        return words[0].lower() if words else ""

    @property
    def fragment_reason(self) -> str | None:
        """The reason after ``fragment`` ('' if none given); None if not a fragment."""
        match = re.search(r"\bfragment\b[:\s]*(.*)$", self.info)
        return None if match is None else match.group(1).strip()


def blocks(path: Path) -> Iterator[Block]:
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence = opening.group("fence")
        end = i + 1
        while end < len(lines) and not (
            lines[end].startswith(fence) and not lines[end].strip(fence[0]).strip()
        ):
            end += 1
        yield Block(path, i + 1, opening.group("info").strip(), "\n".join(lines[i + 1 : end]))
        i = end + 1


ALL = [block for path in DOCS for block in blocks(path)]
RUN = [b for b in ALL if b.fragment_reason is None and b.language in RUNNABLE]


def test_every_block_is_run_or_marked() -> None:
    problems = []
    for block in ALL:
        reason = block.fragment_reason
        if reason is not None:
            if not reason:
                problems.append(f"{block.where}: 'fragment' needs a reason after it")
        elif block.language not in RUNNABLE and block.language not in DISPLAY:
            problems.append(
                f"{block.where}: ```{block.info} is neither run nor marked: tag it "
                f"{sorted(RUNNABLE)} (run by this test), {sorted(DISPLAY)} (not code), "
                "or add 'fragment: <why it cannot run>'"
            )
    assert not problems, "\n".join(problems)
    assert len(RUN) >= 10, "the docs' runnable blocks went missing"


@pytest.fixture(scope="module")
def bootstrap(kafka_broker: KafkaBroker) -> str:
    """The broker's address, with ``orders`` created and holding records."""
    address = kafka_broker.bootstrap_servers
    kgroup_cli = [sys.executable, "-m", "kgroup.cli"]
    where = ["--bootstrap-servers", address]
    create = ["topics", "create", "orders", "--partitions", "3", "--if-not-exists"]
    subprocess.run([*kgroup_cli, *create, *where], check=True, timeout=TIMEOUT)
    produce = ["topics", "produce", "orders", "--count", "300"]
    subprocess.run([*kgroup_cli, *produce, *where], check=True, timeout=TIMEOUT)
    return address


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_block_runs(block: Block, bootstrap: str, tmp_path: Path) -> None:
    code = block.code.replace("localhost:9092", bootstrap)
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
    }
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    if RUNNABLE[block.language] == "python":
        script = tmp_path / "block.py"
        script.write_text(code + "\n")
        command = [sys.executable, str(script)]
    else:
        command = ["bash", "-eo", "pipefail", "-c", code]
    try:
        done = subprocess.run(
            command,
            check=False,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.where} did not finish in {TIMEOUT:.0f} s: {exc.stderr!r}")
    assert done.returncode == 0, (
        f"{block.where} exited {done.returncode}\n--- stdout\n{done.stdout[-3000:]}"
        f"\n--- stderr\n{done.stderr[-3000:]}"
    )


EXAMPLES = ROOT / "examples"
_TABLE_ROW = re.compile(r"^\| `examples/([a-z_]+\.py)` \|", re.M)


def test_the_examples_table_lists_exactly_the_examples() -> None:
    listed = set(_TABLE_ROW.findall((ROOT / "docs" / "getting-started.md").read_text()))
    present = {p.name for p in EXAMPLES.glob("*.py")}
    assert listed == present, (
        f"docs/getting-started.md's examples table: missing {sorted(present - listed)}, "
        f"stale {sorted(listed - present)}"
    )


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_an_examples_help_needs_no_broker(example: str, tmp_path: Path) -> None:
    # The external backend without an address fails at once: an example that
    # tried to start or reach a broker for --help would exit non-zero here.
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    env["KGROUP_BROKER_BACKEND"] = "external"
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / example), "--help"],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert example in done.stdout or "usage" in done.stdout.lower(), done.stdout
