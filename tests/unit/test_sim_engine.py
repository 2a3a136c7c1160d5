"""kgroup.testing.sim: the engine, its invariants, seeded scenarios, shrinking and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import replace

import pytest

from kgroup.assignors import AssignmentSpec, MemberAssignment, TargetAssignment
from kgroup.assignors.classic import GroupMetadata
from kgroup.membership import ConsumerMember, MemberState
from kgroup.testing.sim import (
    ConsumerGroupCoordinator,
    Fault,
    FaultKind,
    InjectedBug,
    Invariant,
    InvariantViolationError,
    NetworkConditions,
    ScenarioError,
    Simulation,
    SimulationError,
    generate,
    replay_command,
    run,
    run_scenario,
    shrink,
)
from kgroup.testing.sim.__main__ import main
from kgroup.testing.sim._queue import EventQueue
from kgroup.testing.sim.invariants import EpochLedger
from kgroup.types import TopicPartition


def _partitions(sim: Simulation) -> Counter[TopicPartition]:
    return Counter(tp for parts in sim.assignment().values() for tp in parts)


# ------------------------------------------------------------------ the engine


def test_a_quiet_group_converges_with_every_partition_fetched_once() -> None:
    sim = Simulation(seed=3, topics={"orders": 7, "audit": 2})
    for i in range(3):
        sim.add_member(f"m{i}", topics=frozenset({"orders", "audit"}), start_at=0.3 * i)
    sim.run_until_converged()
    fetched = _partitions(sim)
    assert set(fetched) == {TopicPartition("orders", p) for p in range(7)} | {
        TopicPartition("audit", p) for p in range(2)
    }
    assert set(fetched.values()) == {1}
    for i in range(3):
        member = sim.member(f"m{i}")
        assert member is not None
        assert member.state is MemberState.STABLE


def test_a_crashed_member_is_replaced_after_its_session_expires() -> None:
    sim = Simulation(seed=4, topics={"t": 6})
    for i in range(3):
        sim.add_member(f"m{i}", topics=frozenset({"t"}))
    sim.crash("m1", at=3.0)
    converged = sim.run_until_converged(faults_end=3.0)
    # Its partitions move only once the coordinator gives up on it: a session
    # timeout after its last heartbeat, at most one interval before the crash.
    coordinator = sim.config.coordinator
    assert (
        converged
        > 3.0 + (coordinator.session_timeout_ms - coordinator.heartbeat_interval_ms) / 1000.0
    )
    assert set(sim.assignment()) == {"m0", "m2"}
    assert sum(_partitions(sim).values()) == 6


def test_a_static_bounce_within_the_session_timeout_moves_nothing() -> None:
    sim = Simulation(seed=5, topics={"t": 6})
    for i in range(3):
        sim.add_member(f"m{i}", topics=frozenset({"t"}), instance_id=f"i{i}")
    sim.run(5.0)
    before = sim.assignment()
    epoch = sim.coordinator.group_epoch
    sim.close("m1", at=6.0, restart_after=1.0)
    sim.run_until_converged(faults_end=6.0)
    assert sim.assignment() == before
    assert sim.coordinator.group_epoch == epoch


def test_members_survive_a_coordinator_failover_and_a_lossy_network() -> None:
    sim = Simulation(seed=6, topics={"t": 5})
    for i in range(4):
        sim.add_member(f"m{i}", topics=frozenset({"t"}), start_at=0.5 * i)
    sim.lossy(
        NetworkConditions(drop_request=0.2, drop_response=0.2, duplicate=0.1, spike=0.1),
        at=1.0,
        duration=8.0,
    )
    sim.failover(at=4.0, down=0.5, loading=1.0)
    sim.run_until_converged(faults_end=9.0)
    assert sim.stats["failover"] == 1
    assert sim.stats["timeout"] > 0
    assert sum(_partitions(sim).values()) == 5


class _Recording:
    """A listener that records what it is told."""

    def __init__(self) -> None:
        self.assigned: list[frozenset[TopicPartition]] = []
        self.revoked: list[frozenset[TopicPartition]] = []

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.assigned.append(partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.revoked.append(partitions)


class _EverythingToTheSmallestId:
    """A user assignor: every partition to the member with the smallest id."""

    name = "smallest"
    min_version = 0
    max_version = 0

    def metadata(self) -> bytes | None:
        return None

    def on_assignment(self, assignment: MemberAssignment, metadata: GroupMetadata) -> None:
        pass

    def assign(self, spec: AssignmentSpec) -> TargetAssignment:
        first = min(spec.members)
        return TargetAssignment(
            {
                first: MemberAssignment(
                    {t: frozenset(range(m.num_partitions)) for t, m in spec.topics.items()}
                )
            }
        )


def test_a_user_assignor_and_listener_run_in_the_simulator() -> None:
    listeners = {f"m{i}": _Recording() for i in range(3)}
    sim = Simulation(seed=8, topics={"t": 4}, assignors=[_EverythingToTheSmallestId()])
    for name, listener in listeners.items():
        sim.add_member(name, topics=frozenset({"t"}), listener=listener)
    sim.crash("m0", at=4.0, restart_after=0.5)
    sim.run_until_converged(faults_end=4.0)
    owners = {name for name, parts in sim.assignment().items() if parts}
    assert len(owners) == 1
    owner = owners.pop()
    member = sim.member(owner)
    assert member is not None
    assert member.member_id == min(sim.coordinator.members)
    assert listeners[owner].assigned[-1] | frozenset().union(*listeners[owner].assigned) >= {
        TopicPartition("t", p) for p in range(4)
    }
    assert all(listener.assigned for listener in listeners.values())


class _LosesPartitions(_EverythingToTheSmallestId):
    name = "loses"

    def assign(self, spec: AssignmentSpec) -> TargetAssignment:
        return TargetAssignment({})


def test_an_assignor_that_leaves_partitions_unassigned_breaks_the_run() -> None:
    sim = Simulation(seed=9, topics={"t": 2}, assignors=[_LosesPartitions()])
    sim.add_member("m0", topics=frozenset({"t"}))
    with pytest.raises(InvariantViolationError) as info:
        sim.run_until_converged()
    assert info.value.violation.invariant is Invariant.ILLEGAL_ASSIGNMENT
    assert "left t-0 unassigned" in info.value.violation.message


def test_a_commit_accepted_for_a_partition_the_member_does_not_own_is_caught() -> None:
    sim = Simulation(seed=10, topics={"t": 4})
    sim.add_member("m0", topics=frozenset({"t"}))
    sim.add_member("m1", topics=frozenset({"t"}))
    sim.run(6.0)
    m0 = sim.member("m0")
    m1 = sim.member("m1")
    assert isinstance(m0, ConsumerMember)
    assert m1 is not None
    theirs = next(iter(m1.assignment))
    sim.coordinator.commit(m0.member_id, m0.member_epoch, frozenset({theirs}))
    assert sim.violation is not None
    assert sim.violation.invariant is Invariant.COMMIT_NOT_OWNED
    with pytest.raises(InvariantViolationError):
        sim.run(7.0)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda s: s.add_member("m0", topics=frozenset({"t"})), "exists already"),
        (lambda s: s.add_member("x"), "subscribes to nothing"),
        (lambda s: s.add_member("", topics=frozenset({"t"})), "non-empty name"),
        (lambda s: s.crash("nobody", at=1.0), "no member called 'nobody'"),
        (lambda s: s.crash("m0", at=-1.0), "time >= 0"),
        (lambda s: s.create_topic("t", 2), "exists already"),
        (lambda s: s.create_topic("u", 0), "at least one partition"),
    ],
)
def test_bad_scenarios_are_rejected_with_a_clear_error(build: object, match: str) -> None:
    sim = Simulation(seed=0, topics={"t": 1})
    sim.add_member("m0", topics=frozenset({"t"}))
    with pytest.raises(ScenarioError, match=match):
        build(sim)  # type: ignore[operator]


def test_faults_after_the_end_of_faults_are_rejected() -> None:
    sim = Simulation(seed=0, topics={"t": 1})
    sim.add_member("m0", topics=frozenset({"t"}))
    sim.crash("m0", at=9.0)
    with pytest.raises(ScenarioError, match="after faults_end"):
        sim.run_until_converged(faults_end=5.0)


def test_network_conditions_are_probabilities() -> None:
    with pytest.raises(ScenarioError, match="drop_request"):
        NetworkConditions(drop_request=1.5)


# ------------------------------------------------------- seeds and determinism


def test_one_seed_gives_one_scenario() -> None:
    assert generate(1234) == generate(1234)
    assert generate(1234) != generate(1235)


def test_one_seed_replays_to_the_same_trace() -> None:
    first = run_scenario(21, trace=True)
    second = run_scenario(21, trace=True)
    assert first.trace == second.trace
    assert first.trace
    assert (first.violation, first.converged_at, first.steps, first.stats) == (
        second.violation,
        second.converged_at,
        second.steps,
        second.stats,
    )
    # Tracing observes the run without changing it.
    untraced = run_scenario(21)
    assert (untraced.steps, untraced.converged_at) == (first.steps, first.converged_at)


def test_the_scenario_mix_covers_every_fault_family() -> None:
    kinds: set[FaultKind] = set()
    sizes: set[str] = set()
    for seed in range(300):
        scenario = generate(seed)
        kinds |= {f.kind for f in scenario.faults}
        sizes.add(scenario.size)
    assert kinds == set(FaultKind)
    assert sizes == {"small", "medium", "big"}


def test_seeded_scenarios_keep_every_invariant() -> None:
    failures = [r for r in (run_scenario(seed) for seed in range(40)) if not r.ok]
    assert not failures, "\n\n".join(r.report() for r in failures)


# ------------------------------------------------------------ injected bugs


@pytest.mark.parametrize(
    ("bug", "caught"),
    [
        # The bug delays every stop by a second: the revoke callback then runs
        # while the partition still fetches (CALLBACK_WHILE_FETCHING), the
        # acknowledgement reaches the coordinator first (FETCH_NOT_OWNED,
        # DOUBLE_FETCH), or a stop at a session loss comes late (SESSION_LOST_FETCH).
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
        # Members without the session margin: a stop at a session loss waits for
        # the record wait in progress, past the coordinator's expiry.
        (
            InjectedBug.NO_SESSION_MARGIN,
            {Invariant.SESSION_LOST_FETCH, Invariant.DOUBLE_FETCH},
        ),
    ],
)
def test_an_injected_bug_is_caught(bug: InjectedBug, caught: set[Invariant]) -> None:
    results = [run_scenario(seed, bug=bug) for seed in range(30)]
    failed = [r for r in results if not r.ok]
    assert failed
    assert {r.violation.invariant for r in failed if r.violation} <= caught
    clean = run_scenario(failed[0].seed)
    assert clean.ok


def test_a_failing_scenario_shrinks_and_still_fails_the_same_way() -> None:
    bug = InjectedBug.ACK_BEFORE_REVOKE
    seed = next(
        s for s in range(100) if len(generate(s).faults) >= 3 and not run_scenario(s, bug=bug).ok
    )
    scenario = generate(seed)
    result = run(scenario, bug=bug)
    assert result.violation is not None
    small = shrink(scenario, result.violation.invariant, bug=bug, budget=60)
    assert len(small.faults) + len(small.members) < len(scenario.faults) + len(scenario.members)
    again = run(small, bug=bug)
    assert again.violation is not None
    assert again.violation.invariant is result.violation.invariant


def _first_failing(bug: InjectedBug) -> int:
    return next(s for s in range(100) if not run_scenario(s, bug=bug).ok)


def test_a_report_names_the_violation_and_the_replay_command() -> None:
    seed = _first_failing(InjectedBug.ACK_BEFORE_REVOKE)
    result = run_scenario(seed, bug=InjectedBug.ACK_BEFORE_REVOKE, trace=True)
    assert not result.ok
    text = result.report(trace_lines=10)
    assert str(result.violation) in text
    assert f"python -m kgroup.testing.sim --replay {seed} --inject-bug ack-before-revoke" in text
    assert replay_command(3) == "python -m kgroup.testing.sim --replay 3"


# ---------------------------------------------------------------------- CLI


def test_cli_soak_reports_count_range_and_failures(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "3", "--start", "10"]) == 0
    out = capsys.readouterr().out
    assert "3 scenarios, seeds 10..12" in out
    assert "0 failed" in out


def test_cli_replays_a_failing_seed_with_its_trace(capsys: pytest.CaptureFixture[str]) -> None:
    seed = str(_first_failing(InjectedBug.ACK_BEFORE_REVOKE))
    assert main(["--replay", seed, "--inject-bug", "ack-before-revoke", "--trace-lines", "5"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out
    assert "VIOLATION" in out
    assert f"--replay {seed} --inject-bug ack-before-revoke" in out


def test_cli_rejects_an_unknown_bug(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--replay", "1", "--inject-bug", "nope"])
    assert info.value.code == 2
    assert "choose from" in capsys.readouterr().err


# ---------------------------------------------------------------- building blocks


def test_events_due_at_the_same_time_run_in_the_order_they_were_scheduled() -> None:
    q = EventQueue()
    seen: list[str] = []
    for name in "abc":
        q.schedule(1.0, seen.append, name)
    q.schedule(0.5, seen.append, "first")
    q.run_until(2.0)
    assert seen == ["first", "a", "b", "c"]
    assert q.now == 2.0


def test_the_epoch_ledger_flags_two_owners_sharing_an_epoch() -> None:
    ledger = EpochLedger()
    tp = TopicPartition("t", 0)
    a, clash = ledger.start("a", tp, 3)
    assert clash is None
    assert ledger.advance(a, tp, 5) is None
    EpochLedger.stop(a)
    assert ledger.start("b", tp, 5)[1] == ("a", 3, 5)
    assert ledger.start("c", tp, 6)[1] is None
    # The same owner may fetch again at an epoch it fetched at before.
    assert ledger.start("a", tp, 4)[1] is None


def test_a_zombie_fetching_at_its_old_epoch_is_no_overlap_until_its_epoch_grows() -> None:
    ledger = EpochLedger()
    tp = TopicPartition("t", 0)
    zombie, _ = ledger.start("z", tp, 2)
    assert ledger.start("n", tp, 4)[1] is None  # the zombie keeps fetching at 2
    assert ledger.advance(zombie, tp, 3) is None
    assert ledger.advance(zombie, tp, 4) == ("n", 4, 4)


def test_fault_descriptions_are_one_line() -> None:
    fault = Fault(FaultKind.CRASH, 1.5, "m0", restart_after=2.0)
    assert fault.describe() == "  1.500s CRASH m0, restart after 2.00s"
    assert "\n" not in replace(fault, kind=FaultKind.STALL, duration=3.0).describe()


def test_topic_ids_in_a_run_come_from_the_seed() -> None:
    a = Simulation(seed=11, topics={"t": 1}).cluster.get("t")
    b = Simulation(seed=11, topics={"t": 1}).cluster.get("t")
    assert a is not None
    assert b is not None
    assert a.topic_id == b.topic_id
    assert isinstance(a.topic_id, uuid.UUID)


def test_a_replay_is_the_same_in_another_process_with_other_string_hashing() -> None:
    # Set iteration order follows str hashing, which differs between processes;
    # a seed must replay identically anyway (the CLI replays in a new process).
    seed = str(_first_failing(InjectedBug.ACK_BEFORE_REVOKE))
    command = [sys.executable, "-m", "kgroup.testing.sim", "--replay", seed]
    command += ["--inject-bug", "ack-before-revoke", "--trace-lines", "100000"]
    outputs = []
    for hash_seed in ("1", "2"):
        done = subprocess.run(
            command,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 1, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert "VIOLATION" in outputs[0]


def test_a_simulator_inconsistency_is_reported_with_its_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: ConsumerGroupCoordinator) -> None:
        raise SimulationError("simulated coordinator bug: for this test")

    monkeypatch.setattr(ConsumerGroupCoordinator, "_compute_target", broken)
    result = run_scenario(12)
    assert result.violation is not None
    assert result.violation.invariant is Invariant.SIMULATOR_CONSISTENT
    assert "for this test" in result.violation.message


def test_partitions_start_on_the_data_plane_only_once_their_offset_fetch_answers() -> None:
    sim = Simulation(seed=13, topics={"t": 3}, trace=True)
    sim.add_member("m0", topics=frozenset({"t"}))
    sim.run_until_converged()
    lines = [line for line in sim.trace if " m0#1 " in line]
    asked = next(i for i, line in enumerate(lines) if "-> start fetching" in line)
    answered = next(i for i, line in enumerate(lines) if "answers offset fetch NONE" in line)
    started = next(i for i, line in enumerate(lines) if "data plane starts" in line)
    assert asked < answered < started
    member = sim.member("m0")
    assert member is not None
    assert sim.assignment()["m0"] == member.assignment


def test_a_seed_replays_the_same_in_any_process() -> None:
    # `--replay SEED` runs in a new process, whose string hashing differs. Seed
    # 239 used to take another path there: the coordinator handed a converted
    # classic member's partitions to the assignor in a set's order, and the
    # uniform assignor keeps a member's partitions topic by topic in the order
    # given. Two processes with different PYTHONHASHSEED must agree.
    script = (
        "from kgroup.testing.sim import run_scenario\n"
        "r = run_scenario(239, trace=True)\n"
        "print(r.steps)\n"
        "print('\\n'.join(r.trace))\n"
    )
    outputs = []
    for hash_seed in ("0", "1"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
