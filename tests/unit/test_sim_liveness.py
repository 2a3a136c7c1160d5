"""The simulator reproduces issue 29's stall (a static protocol roll); the repair fixes it."""

from __future__ import annotations

from kgroup.testing.sim import FaultKind, InjectedBug, Invariant, generate, run, soak

# Seeds of the CI window's start; the first with the roll family fails without the repair.
WINDOW = range(0, 600)


def test_without_the_repair_a_static_protocol_roll_leaves_partitions_unowned() -> None:
    report = soak(WINDOW, bug=InjectedBug.NO_LIVENESS_REPAIR, stop_after=1)
    assert not report.ok
    failure = report.failures[0]
    assert failure.violation is not None
    assert failure.violation.invariant is Invariant.LIVENESS
    assert "owned by nobody" in failure.violation.message
    assert failure.scenario is not None
    assert failure.scenario.families == ("static protocol roll",)
    assert failure.seed == 88  # reported in docs/simulation.md
    # The same seed passes with the repair on: a member looked and rejoined.
    fixed = run(failure.scenario)
    assert fixed.ok, fixed.violation
    assert dict(fixed.stats).get("liveness repair", 0) >= 1


def test_with_the_repair_every_roll_seed_of_the_window_converges() -> None:
    seeds = [s for s in WINDOW if "static protocol roll" in generate(s).families]
    assert len(seeds) >= 10
    broken = 0
    for seed in seeds:
        scenario = generate(seed)
        assert all(f.kind is FaultKind.ROLL for f in scenario.faults)
        assert run(scenario).ok, seed
        broken += not run(scenario, bug=InjectedBug.NO_LIVENESS_REPAIR).ok
    # The stall is common in the family, not a one-seed accident.
    assert broken >= 3


def test_the_roll_converts_the_group_and_a_static_replacement_bumps_no_epoch() -> None:
    scenario = generate(88)
    members = {m.name: m for m in scenario.members}
    assert all(m.instance_id is not None and m.protocol == "classic" for m in members.values())
    first = min(members.values(), key=lambda m: m.start_at)
    assert all(m.start_at > first.start_at + 1.0 for m in members.values() if m is not first)
    result = run(scenario, bug=InjectedBug.NO_LIVENESS_REPAIR, trace=True)
    trace = "\n".join(result.trace)
    assert "converts the classic group" in trace
    assert "replaces" in trace  # static replacements, not joins as new members
