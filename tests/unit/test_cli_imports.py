"""The CLI package's modules import one another at module level only, and never the package.

The import contracts (``cli-layers``, ``cli-acyclic`` in pyproject.toml) see
every import but cannot tell a function-local one, which is how a cycle
hides; nor do they check the package module ``kgroup.cli`` itself (the
layers' container), which imports every command module, so a command module
importing it closes a cycle. This test checks both.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kgroup.cli

PACKAGE = Path(kgroup.cli.__file__).parent
MODULES = sorted(PACKAGE.glob("*.py"))
SUBMODULES = frozenset(p.stem for p in MODULES) - {"__init__", "__main__"}


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        # Relative: kgroup.cli is a flat package, so "." is kgroup.cli itself.
        module = "kgroup.cli" if node.level == 1 else "kgroup"
        if node.module:
            module = f"{module}.{node.module}"
    else:
        module = node.module or ""
    if module != "kgroup.cli":
        return [module]
    # `from kgroup.cli import common` imports a submodule; `... import main`, the package.
    return [
        f"{module}.{alias.name}" if alias.name in SUBMODULES else module for alias in node.names
    ]


def violations(source: str) -> list[str]:
    """The imports in ``source`` that break the two rules, as ``line N: ...``."""
    found: list[str] = []
    tree = ast.parse(source)
    local: set[int] = set()
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            local.update(
                id(node)
                for node in ast.walk(function)
                if isinstance(node, ast.Import | ast.ImportFrom)
            )
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for name in _imported(node):
            if name == "kgroup.cli":
                found.append(f"line {node.lineno}: imports the package kgroup.cli")
            elif name.startswith("kgroup.cli.") and id(node) in local:
                found.append(f"line {node.lineno}: function-local import of {name}")
    return found


@pytest.mark.parametrize("path", [p for p in MODULES if p.name != "__main__.py"], ids=str)
def test_cli_module_imports_its_siblings_at_module_level_and_not_the_package(path: Path) -> None:
    if path.name == "__init__.py":
        # The package imports every command at module level: that is its job.
        source = path.read_text(encoding="utf-8")
        assert not [v for v in violations(source) if "function-local" in v]
        return
    assert violations(path.read_text(encoding="utf-8")) == []


def test_the_package_has_its_modules() -> None:
    names = {p.stem for p in MODULES}
    assert {"broker", "common", "demo", "groups", "report", "state", "topics"} <= names


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from kgroup.cli.common import parse_key_value\n", []),
        ("def f():\n    from kgroup.cli.state import state_dir\n", ["function-local"]),
        ("def f():\n    import kgroup.cli.topics\n", ["function-local"]),
        ("from kgroup.cli import main\n", ["the package"]),
        ("def f():\n    from kgroup.cli import main\n", ["the package"]),
        ("from kgroup.cli import common\n", []),
        ("def f():\n    from . import state\n", ["function-local"]),
        ("def f():\n    from kgroup.admin import list_groups\n", []),
    ],
)
def test_the_rule_itself(source: str, expected: list[str]) -> None:
    # The check would pass vacuously if it found nothing in anything.
    found = violations(source)
    assert len(found) == len(expected)
    for message, word in zip(found, expected, strict=True):
        assert word in message
