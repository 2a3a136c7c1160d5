"""Shared by the simulation tests: summary lines printed at the end of the pytest run."""

from __future__ import annotations

import pytest

_SUMMARY: list[str] = []


@pytest.fixture
def sim_summary() -> list[str]:
    """Lines a test wants printed in pytest's terminal summary (count, seed range, time)."""
    return _SUMMARY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _SUMMARY:
        terminalreporter.section("kgroup.testing.sim")
        for line in _SUMMARY:
            terminalreporter.write_line(line)
