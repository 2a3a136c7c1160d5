"""kgroup's pytest plugin changes a test run only where the run asks for it.

Each test runs pytest in a subprocess on a project of the user's own (a temp
dir with its own ini file), in this environment, where kgroup is installed.
"""

from __future__ import annotations

from importlib.metadata import distribution

import pytest

PLUGIN = "kgroup.testing.pytest_plugin"

# A user's project that has its own `containers` marker, unrelated to kgroup's.
USER_INI = """\
[pytest]
addopts = --strict-markers
markers =
    containers: this project's own tests of its containers
"""

USER_TESTS = """\
import pytest

@pytest.mark.containers
def test_own_containers_test():
    pass

def test_plain():
    pass
"""

# Uses a harness fixture that needs no broker.
FIXTURE_TEST = """\
import pytest

@pytest.mark.integration
def test_group_ids_are_unique(make_group_id):
    first, second = make_group_id("orders"), make_group_id("orders")
    assert first.startswith("orders-") and first != second
"""


@pytest.fixture
def user_project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".ini", pytest=USER_INI)
    pytester.makepyfile(test_user=USER_TESTS)
    return pytester


def test_kgroup_registers_no_pytest11_entry_point() -> None:
    # An entry-point plugin is loaded in every pytest run of the environment.
    groups = {ep.group for ep in distribution("kgroup").entry_points}
    assert "pytest11" not in groups


def test_users_containers_test_runs_unchanged(user_project: pytest.Pytester) -> None:
    result = user_project.runpytest_subprocess("-v")
    result.assert_outcomes(passed=2, deselected=0)
    result.stdout.fnmatch_lines(["*test_own_containers_test PASSED*"])


def test_harness_fixtures_are_absent_unless_asked(user_project: pytest.Pytester) -> None:
    user_project.makepyfile(test_fixture=FIXTURE_TEST.replace("@pytest.mark.integration\n", ""))
    result = user_project.runpytest_subprocess()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*fixture 'make_group_id' not found*"])


def test_asked_with_p_option(user_project: pytest.Pytester) -> None:
    user_project.makepyfile(test_fixture=FIXTURE_TEST)
    result = user_project.runpytest_subprocess("-v", "-p", PLUGIN)
    # The plugin's `integration` marker is registered (--strict-markers passes)
    # and the user's own `containers` test still runs.
    result.assert_outcomes(passed=3, deselected=0)
    result.stdout.fnmatch_lines(["*test_own_containers_test PASSED*"])


def test_asked_with_pytest_plugins_line(user_project: pytest.Pytester) -> None:
    user_project.makeconftest(f"pytest_plugins = [{PLUGIN!r}]\n")
    user_project.makepyfile(test_fixture=FIXTURE_TEST)
    result = user_project.runpytest_subprocess("-v")
    result.assert_outcomes(passed=3, deselected=0)
    result.stdout.fnmatch_lines(["*test_own_containers_test PASSED*"])
