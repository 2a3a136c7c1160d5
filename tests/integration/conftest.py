"""Fixtures shared by the integration tests.

The broker fixtures (``kafka_broker``, ``make_topic``, ...) come from kgroup's
pytest plugin; plain helper functions are in ``helpers.py``.

Telemetry: every kgroup consumer an integration test creates (in this process
or in a member process, which inherits the environment) writes JSON Lines
telemetry into one directory for the whole run, through the config layer's
``KGROUP_TELEMETRY_DIR`` switch. ``.ci/run`` then runs ``kgroup report`` over
it and fails on any double ownership by kgroup members. The directory is
``$KGROUP_TEST_TELEMETRY_DIR`` when set, else ``.build/telemetry/integration``
(emptied at the start of each run). A test that sets ``telemetry.*`` keys
itself (say, one that injects double ownership on purpose) writes elsewhere:
explicit keys win over the switch. A test marked
``@pytest.mark.provokes_double_ownership(reason)`` (a duplicate static
instance id, say: the protocol itself lets two members fetch until the broker
fences one) runs with telemetry off.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kgroup.config import TELEMETRY_DIR_ENV
from kgroup.errors import HarnessError
from kgroup.testing.backends import BrokerBackend, backend_from_env

TEST_TELEMETRY_DIR_ENV = "KGROUP_TEST_TELEMETRY_DIR"
"""Where the integration run's telemetry goes (``.ci/run`` sets it)."""

_DEFAULT_DIR = Path(__file__).resolve().parents[2] / ".build" / "telemetry" / "integration"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Async tests run once on asyncio and once on trio; a module may narrow this."""
    backend: str = request.param
    return backend


@pytest.fixture(scope="session")
def integration_telemetry_dir() -> Path:
    """The directory all kgroup consumers of this integration run write telemetry to."""
    chosen = os.environ.get(TEST_TELEMETRY_DIR_ENV, "").strip()
    directory = Path(chosen) if chosen else _DEFAULT_DIR
    if not chosen:
        shutil.rmtree(directory, ignore_errors=True)  # this run's telemetry only
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "provokes_double_ownership(reason): the test makes two kgroup members fetch one "
        "partition on purpose; its consumers write no telemetry to the run's directory",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The `containers` split is this suite's own (kgroup's pytest plugin selects
    # nothing in its users' runs), so it lives here, with the tests it splits.
    # They need the testcontainers backend. On another backend they are
    # deselected (reported as such), not skipped: nothing is pending, they
    # belong to the other run. An -m expression naming the marker is the
    # caller's explicit choice and is left alone (the tests then say what is missing).
    if "containers" in (config.getoption("markexpr", "") or ""):
        return
    try:
        if backend_from_env() is BrokerBackend.TESTCONTAINERS:
            return
    except HarnessError:
        return  # an unknown backend name: the broker fixture reports it
    kept = [item for item in items if item.get_closest_marker("containers") is None]
    if len(kept) != len(items):
        deselected = [item for item in items if item.get_closest_marker("containers") is not None]
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


@pytest.fixture(autouse=True)
def _telemetry_on(
    request: pytest.FixtureRequest,
    integration_telemetry_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Per test (not for the whole process): unit tests of the same pytest run
    # must see the config layer's default, telemetry off.
    marker = request.node.get_closest_marker("provokes_double_ownership")
    if marker is None:
        monkeypatch.setenv(TELEMETRY_DIR_ENV, str(integration_telemetry_dir))
    else:
        if not marker.args:
            raise pytest.UsageError("provokes_double_ownership needs a reason")
        monkeypatch.delenv(TELEMETRY_DIR_ENV, raising=False)
