"""kgroup.assignors is pure code: its modules import no I/O layer of kgroup and no I/O library."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kgroup.assignors

PACKAGE = Path(kgroup.assignors.__file__).parent
FORBIDDEN = (
    "kgroup.transport",
    "kgroup.dataplane",
    "kgroup.protocol",
    "kgroup.membership",
    "kio",
    "anyio",
    "asyncio",
    "trio",
    "socket",
    "confluent_kafka",
)


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_module_imports_nothing_that_does_io(path: Path) -> None:
    bad = {
        name
        for name in imported_modules(path)
        for forbidden in FORBIDDEN
        if name == forbidden or name.startswith(forbidden + ".")
    }
    assert not bad, f"{path.name} imports {sorted(bad)}"
