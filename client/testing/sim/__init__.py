"""kgroup.testing.sim: a deterministic simulator of a KIP-848 group coordinator.

It drives kgroup's real sans-IO member machines
(:class:`~kgroup.membership.ConsumerMember`) against a simulated group
coordinator, in virtual time, over a network that drops, delays, duplicates
and reorders messages, with crashes, restarts, partitions, coordinator
failovers and slow or failing listener callbacks, and checks safety
invariants after every step (see ``docs/simulation.md``)::

    from kgroup.testing.sim import Simulation

    sim = Simulation(seed=7, topics={"orders": 12}, assignors=[MyAssignor()])
    for i in range(4):
        sim.add_member(f"m{i}", topics={"orders"}, listener=MyListener())
    sim.crash("m1", at=5.0, restart_after=2.0)
    sim.run_until_converged(faults_end=10.0)  # raises InvariantViolationError
    print(sim.assignment())

Seeded scenarios: :func:`run_scenario` (one seed -> one reproducible run),
:func:`soak`, and the command line ``python -m kgroup.testing.sim --seeds N``
/ ``--replay SEED``.
"""

from kgroup.testing.groups.consumer import (
    AssignmentState,
    ConsumerGroupCoordinator,
    CoordinatorConfig,
    ErrorCode,
    MemberRecord,
    PersistedGroup,
    PersistedMember,
)
from kgroup.testing.sim.cluster import SimCluster, Topic
from kgroup.testing.sim.engine import (
    CoordinatorStatus,
    InjectedBug,
    MemberPlan,
    NetworkConditions,
    SimulatedCallbackError,
    Simulation,
    SimulationConfig,
)
from kgroup.testing.sim.errors import InvariantViolationError, ScenarioError, SimulationError
from kgroup.testing.sim.invariants import Invariant, Violation
from kgroup.testing.sim.scenario import (
    Fault,
    FaultKind,
    Result,
    Scenario,
    SoakReport,
    generate,
    replay_command,
    run,
    run_scenario,
    shrink,
    soak,
)

__all__ = [
    "AssignmentState",
    "ConsumerGroupCoordinator",
    "CoordinatorConfig",
    "CoordinatorStatus",
    "ErrorCode",
    "Fault",
    "FaultKind",
    "InjectedBug",
    "Invariant",
    "InvariantViolationError",
    "MemberPlan",
    "MemberRecord",
    "NetworkConditions",
    "PersistedGroup",
    "PersistedMember",
    "Result",
    "Scenario",
    "ScenarioError",
    "SimCluster",
    "SimulatedCallbackError",
    "Simulation",
    "SimulationConfig",
    "SimulationError",
    "SoakReport",
    "Topic",
    "Violation",
    "generate",
    "replay_command",
    "run",
    "run_scenario",
    "shrink",
    "soak",
]
