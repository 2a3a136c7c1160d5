"""Package attributes imported on first use (PEP 562), for ``kgroup`` and ``kgroup.admin``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(namespace: dict[str, Any], table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``table[name]`` (a module path) for ``name``
    and keeps the value in ``namespace`` (the module's ``globals()``), so the next read
    is a plain one."""
    module_name = namespace["__name__"]

    def __getattr__(name: str) -> Any:  # noqa: N807 - the PEP 562 hook
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
