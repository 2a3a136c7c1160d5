"""The CI budget of the simulator: at least 10,000 seeded scenarios on every run.

``KGROUP_SIM_SEEDS`` and ``KGROUP_SIM_START`` move the window (a nightly job
can run other seeds); the default is seeds 0..9999, so CI is reproducible.
A failure prints each failing seed's shrunk scenario, its trace and the
command that replays it.
"""

from __future__ import annotations

import os
import time

import pytest

from kgroup.testing.sim import (
    InjectedBug,
    Invariant,
    Result,
    replay_command,
    run,
    run_scenario,
    shrink,
    soak,
)

SEEDS = int(os.environ.get("KGROUP_SIM_SEEDS", "10000"))
START = int(os.environ.get("KGROUP_SIM_START", "0"))
# A loaded shared machine may run slower than the budget; do not fail on time alone.
TIMEOUT = 1200


def _explain(failure: Result) -> str:
    """The failure's report, with a shrunk scenario when shrinking keeps it failing."""
    assert failure.violation is not None
    assert failure.scenario is not None
    small = shrink(failure.scenario, failure.violation.invariant, bug=failure.bug)
    shrunk = run(small, bug=failure.bug, trace=True)
    head = (
        f"shrunk to {len(small.faults)} faults and {len(small.members)} members "
        f"(from {len(failure.scenario.faults)} and {len(failure.scenario.members)}); "
        f"the full run replays with: {replay_command(failure.seed, failure.bug)}"
    )
    return head + "\n" + shrunk.report(trace_lines=150)


@pytest.mark.timeout(TIMEOUT)
def test_ten_thousand_seeded_scenarios_keep_every_invariant(sim_summary: list[str]) -> None:
    began = time.perf_counter()
    report = soak(range(START, START + SEEDS), stop_after=3)
    elapsed = time.perf_counter() - began
    line = (
        f"{report.count} scenarios, seeds {START}..{START + report.count - 1}, "
        f"{elapsed:.1f} s, {report.steps} steps, {len(report.failures)} failed"
    )
    sim_summary.append(line)
    print(line)
    assert report.ok, "\n\n".join(_explain(f) for f in report.failures)
    assert report.count == SEEDS


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize(
    ("bug", "caught"),
    [
        (
            InjectedBug.ACK_BEFORE_REVOKE,
            {
                Invariant.CALLBACK_WHILE_FETCHING,
                Invariant.FETCH_NOT_OWNED,
                Invariant.DOUBLE_FETCH,
                Invariant.SESSION_LOST_FETCH,
            },
        ),
        (InjectedBug.COORDINATOR_SKIPS_RELEASE, {Invariant.DOUBLE_FETCH}),
        # Issue 29: a static protocol roll leaves partitions owned by nobody.
        (InjectedBug.NO_LIVENESS_REPAIR, {Invariant.LIVENESS}),
        # Issue 30: without the session margin a lapsed member's stop, waiting for
        # the record wait in progress, ends after the coordinator expired it.
        (
            InjectedBug.NO_SESSION_MARGIN,
            {Invariant.SESSION_LOST_FETCH, Invariant.DOUBLE_FETCH},
        ),
    ],
)
def test_an_injected_bug_is_caught_within_the_budget_and_its_seed_replays_to_the_same_trace(
    bug: InjectedBug, caught: set[Invariant], sim_summary: list[str]
) -> None:
    report = soak(range(START, START + SEEDS), bug=bug, stop_after=1)
    assert not report.ok, f"{bug.name} survived {report.count} scenarios"
    failure = report.failures[0]
    assert failure.violation is not None
    assert failure.violation.invariant in caught
    replay = run_scenario(failure.seed, bug=bug, trace=True)
    assert replay.violation == failure.violation
    assert replay.trace == failure.trace
    assert replay_command(failure.seed, bug) in failure.report()
    # The seed fails because of the bug, not because of the scenario.
    assert run_scenario(failure.seed).ok
    sim_summary.append(
        f"injected {bug.name} caught by seed {failure.seed} after {report.count} scenarios: "
        f"{failure.violation}"
    )
