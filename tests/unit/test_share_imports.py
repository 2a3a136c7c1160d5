"""kgroup.dataplane.share is sans-IO: the standard library, kio, cramjam (and kio's crc32c),
kgroup.types, kgroup.errors, kgroup.error_codes and its own modules; nothing else.

Every import statement of every module under the package is checked (module
level or not), so the share data path's bookkeeping cannot grow a dependency on
the transport, the runtime, librdkafka or anyio without this test naming the
module and the import that did it. (Importing the package still runs
``kgroup.dataplane``'s ``__init__``, which imports librdkafka's data plane:
the rule is about what these modules use, as the import contracts are.)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import kgroup.dataplane.share

PACKAGE = Path(kgroup.dataplane.share.__file__).parent
ROOT = "kgroup.dataplane.share"
ALLOWED_KGROUP = ("kgroup.types", "kgroup.errors", "kgroup.error_codes", ROOT)
ALLOWED_THIRD_PARTY = ("kio", "cramjam", "crc32c")


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
    return top in ALLOWED_THIRD_PARTY or top in sys.stdlib_module_names


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_the_package_has_its_four_modules() -> None:
    names = {module_name(p) for p in MODULES}
    for sub in ("session", "acknowledgements", "inflight", "records"):
        assert f"{ROOT}.{sub}" in names


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_module_imports_only_what_a_sans_io_data_path_may(path: Path) -> None:
    bad = [f"line {line}: import {name}" for line, name in imports_of(path) if not allowed(name)]
    assert not bad, f"{module_name(path)} imports beyond its allow-list: {bad}"


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("collections.abc", True),
        ("kio.records.readers", True),
        ("cramjam", True),
        ("kgroup.errors", True),
        ("kgroup.dataplane.share.records", True),
        ("kgroup.dataplane", False),
        ("kgroup.dataplane.librdkafka", False),
        ("kgroup.transport", False),
        ("kgroup.membership", False),
        ("confluent_kafka", False),
        ("anyio", False),
    ],
)
def test_the_rule_itself(name: str, ok: bool) -> None:
    # The check would pass vacuously if ``allowed`` let everything through.
    assert allowed(name) is ok
