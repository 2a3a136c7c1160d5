"""kgroup.membership is sans-IO: its modules import only the standard library and kgroup.types
(and kgroup.error_codes, a leaf of the standard library only).

Every import statement of every module under the package is checked (module
level or not), so a machine cannot grow a dependency on the transport, the
protocol layer, the runtime or a third-party library without this test naming
the module and the import that did it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import kgroup.membership

PACKAGE = Path(kgroup.membership.__file__).parent
ROOT = "kgroup.membership"
# kgroup.error_codes is a leaf value like kgroup.types: the standard library only.
ALLOWED_KGROUP = ("kgroup.types", "kgroup.error_codes", ROOT)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((ROOT, *parts))


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``; relative ones resolved."""
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def allowed(name: str) -> bool:
    top = name.partition(".")[0]
    if top == "kgroup":
        return any(name == ok or name.startswith(ok + ".") for ok in ALLOWED_KGROUP)
    return top in sys.stdlib_module_names


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_the_package_has_its_three_subpackages() -> None:
    names = {module_name(p) for p in MODULES}
    for sub in ("common", "consumer", "classic"):
        assert f"{ROOT}.{sub}" in names


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_module_imports_only_the_standard_library_and_kgroup_types(path: Path) -> None:
    bad = [f"line {line}: import {name}" for line, name in imports_of(path) if not allowed(name)]
    assert not bad, f"{module_name(path)} imports beyond the stdlib and kgroup.types: {bad}"


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("collections.abc", True),
        ("kgroup.types", True),
        ("kgroup.error_codes", True),
        ("kgroup.membership.common.events", True),
        ("kgroup.transport", False),
        ("kgroup.errors", False),
        ("kgroup", False),
        ("kio", False),
        ("anyio", False),
    ],
)
def test_the_rule_itself(name: str, ok: bool) -> None:
    # The check would pass vacuously if ``allowed`` let everything through.
    assert allowed(name) is ok
