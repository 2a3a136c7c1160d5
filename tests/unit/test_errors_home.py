"""Every exception kgroup raises for users to catch is defined in kgroup.errors.

Each module of the package is imported (in a child process: some pull in
pyspark or confluent-kafka) and every :class:`~kgroup.errors.KgroupError`
subclass found is checked for where it is defined. The simulator's errors
(how a simulation run fails, a test tool's own) and one private harness error
(caught and retried inside the harness) are the only ones allowed elsewhere.
"""

from __future__ import annotations

import json
import subprocess
import sys

import kgroup.errors

_ELSEWHERE = {
    "kgroup.testing.sim.errors.InvariantViolationError",
    "kgroup.testing.groups.errors.ScenarioError",
    "kgroup.testing.groups.errors.SimulationError",
    "kgroup.testing.process._PortConflictError",
}

_FIND = """
import importlib, json, pkgutil
import kgroup
from kgroup.errors import KgroupError

for info in pkgutil.walk_packages(kgroup.__path__, "kgroup."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)

def below(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from below(sub)

print(json.dumps(sorted({f"{c.__module__}.{c.__qualname__}" for c in below(KgroupError)})))
"""


def _every_kgroup_error() -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _FIND], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    found: list[str] = json.loads(out)
    return found


def test_every_kgroup_error_is_defined_in_kgroup_errors() -> None:
    found = _every_kgroup_error()
    assert "kgroup.errors.WakeupError" in found  # the walk found the package's errors
    elsewhere = {name for name in found if not name.startswith("kgroup.errors.")}
    assert elsewhere == _ELSEWHERE


def test_every_error_kgroup_errors_defines_is_exported() -> None:
    defined = {
        name
        for name, value in vars(kgroup.errors).items()
        if isinstance(value, type)
        and issubclass(value, kgroup.errors.KgroupError)
        and value.__module__ == "kgroup.errors"
        and not name.startswith("_")
    }
    assert defined <= set(kgroup.errors.__all__)
