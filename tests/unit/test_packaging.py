"""The wheel ships every package: pyproject's explicit package list names each folder.

The list is explicit because the import package kgroup lives in client/ (find_packages
cannot rename), so a new subpackage that is not added there is silently left out of
a non-editable install.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _packages_on_disk() -> set[str]:
    found = set()
    for top, name in ((ROOT / "client", "kgroup"), (ROOT / "assignors", "kgroup.assignors")):
        for init in top.rglob("__init__.py"):
            rel = init.parent.relative_to(top).parts
            found.add(".".join((name, *rel)))
    return found


def test_every_package_folder_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    missing = sorted(_packages_on_disk() - listed)
    assert not missing, f"add these to [tool.setuptools] packages in pyproject.toml: {missing}"
