"""The wheel built from this checkout installs and runs alone.

One module-scoped fixture builds the wheel from a copy of the checkout (so the
build leaves no build/ or egg-info behind), creates a fresh virtual
environment (no system site packages, not this test run's venv) and installs
the wheel into it with its base dependencies from PyPI. The tests then ask
that environment what a user of ``pip install kgroup`` would get.

PyPI unreachable is a failure that says so, not a skip: a skipped test would
let a wheel that cannot install pass CI.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What a build reads: pyproject.toml names the rest (the readme, the license
# file, the two source folders and their package data).
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "client", "assignors")

# Distributions a base install must not bring: the report's Spark and plotting,
# the test harness's tools, the dev tools.
NOT_IN_BASE = (
    "pyspark",
    "matplotlib",
    "pytest",
    "hypothesis",
    "testcontainers",
    "docker",
    "trustme",
    "ruff",
    "mypy",
    "mkdocs",
)

# Top-level modules only an extra provides. A kgroup module may fail to import
# in a base install only for one of these (it is then reached only through
# that extra's feature), never for anything else.
EXTRA_ONLY_MODULES = frozenset({"pyspark", "matplotlib", "pytest", "_pytest"})

# Modules a base install must import: the consumers, the CLI, and the parts of
# the test harness that ship in the wheel (simulator, fake broker, fuzzer).
MUST_IMPORT = (
    "kgroup",
    "kgroup.cli",
    "kgroup.assignors",
    "kgroup.aiokafka",
    "kgroup.testing",
    "kgroup.testing.sim",
    "kgroup.testing.fake",
    "kgroup.protocol.fuzz",
    "kgroup.report",
)

PIP_TIMEOUT_S = 240


@dataclass(frozen=True)
class Installed:
    """A fresh venv with the wheel installed."""

    wheel: Path
    python: Path
    bin: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a command from the venv's bin/, outside this checkout."""
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=self.bin.parent,
            # Nothing of this test run's environment may leak in.
            env={"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(Path.home())},
        )


def checkout_version() -> str:
    """The version client/_version.py declares: the one source."""
    tree = ast.parse((ROOT / "client" / "_version.py").read_text())
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "__version__"
            and isinstance(node.value, ast.Constant)
        ):
            return str(node.value.value)
    raise AssertionError("client/_version.py assigns no __version__ string")


def pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # pip's own settings (PIP_INDEX_URL, proxies) pass through; a PYTHONPATH
    # would put this checkout's modules in front of the installed ones.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT_S,
        check=False,
        env=env,
    )


def fail_with(step: str, proc: subprocess.CompletedProcess[str]) -> None:
    output = (proc.stdout + proc.stderr)[-4000:]
    hint = ""
    if any(
        word in output
        for word in ("NewConnectionError", "Could not find a version", "No matching distribution")
    ):
        hint = (
            "\nThis test installs the wheel's dependencies from PyPI: is PyPI reachable "
            "from this machine (or PIP_INDEX_URL set to a mirror)?"
        )
    pytest.fail(f"{step} failed (exit {proc.returncode}):\n{output}{hint}", pytrace=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)

    dist = work / "dist"
    built = pip(Path(sys.executable), "wheel", "--no-deps", "-w", str(dist), str(source))
    if built.returncode != 0:
        fail_with("building the wheel (pip wheel, isolated build from PyPI)", built)
    (wheel,) = dist.glob("kgroup-*.whl")

    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    added = pip(python, "install", "--no-input", str(wheel))
    if added.returncode != 0:
        fail_with("installing the wheel with its base dependencies from PyPI", added)
    return Installed(wheel=wheel, python=python, bin=env_dir / "bin")


def test_the_venv_is_fresh(installed: Installed) -> None:
    proc = installed.run(
        "python", "-c", "import sys, json; print(json.dumps([sys.prefix, sys.path]))"
    )
    assert proc.returncode == 0, proc.stderr
    prefix, path = json.loads(proc.stdout)
    assert Path(prefix) == installed.bin.parent
    # Neither this run's venv nor the system's site-packages.
    site_dirs = [entry for entry in path if entry.endswith("site-packages")]
    assert site_dirs, path
    assert all(entry.startswith(prefix) for entry in site_dirs), site_dirs


def test_license_is_in_the_wheel(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        licenses = [
            name for name in wheel.namelist() if name.endswith(".dist-info/licenses/LICENSE")
        ]
        assert len(licenses) == 1, wheel.namelist()
        text = wheel.read(licenses[0]).decode()
        metadata_name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = wheel.read(metadata_name).decode()
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "License-Expression: Apache-2.0" in metadata.splitlines()


def test_version_is_the_checkouts(installed: Installed) -> None:
    version = checkout_version()
    assert installed.wheel.name.startswith(f"kgroup-{version}-")
    proc = installed.run(
        "python",
        "-c",
        "import importlib.metadata as m, kgroup; print(m.version('kgroup'), kgroup.__version__)",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [version, version]
    shown = installed.run("kgroup", "--version")
    assert shown.returncode == 0, shown.stderr
    assert version in shown.stdout.split()


def test_cli_runs(installed: Installed) -> None:
    top = installed.run("kgroup", "--help")
    assert top.returncode == 0, top.stderr
    assert "usage: kgroup" in top.stdout
    groups = installed.run("kgroup", "groups", "--help")
    assert groups.returncode == 0, groups.stderr
    assert "usage: kgroup groups" in groups.stdout


def test_base_install_brings_no_extras(installed: Installed) -> None:
    listed = pip(installed.python, "list", "--format=json")
    assert listed.returncode == 0, listed.stderr
    names = {entry["name"].lower().replace("_", "-") for entry in json.loads(listed.stdout)}
    assert "kgroup" in names
    assert sorted(names & set(NOT_IN_BASE)) == []


def test_modules_import_without_extras(installed: Installed) -> None:
    # Every module of the wheel (but the __main__ entry points), imported in
    # the base install: a failure is allowed only for a module an extra
    # provides.
    script = f"""
import importlib, json, pkgutil, kgroup
must = {list(MUST_IMPORT)!r}
failed = {{}}
for name in must:
    importlib.import_module(name)
for info in pkgutil.walk_packages(kgroup.__path__, "kgroup."):
    if info.name.endswith(".__main__"):
        continue  # runs the CLI when imported
    try:
        importlib.import_module(info.name)
    except ModuleNotFoundError as exc:
        failed[info.name] = exc.name
print(json.dumps(failed))
"""
    proc = installed.run("python", "-c", script)
    assert proc.returncode == 0, proc.stderr
    failed: dict[str, str] = json.loads(proc.stdout)
    unexpected = {
        module: missing
        for module, missing in failed.items()
        if missing.split(".")[0] not in EXTRA_ONLY_MODULES
    }
    assert unexpected == {}
