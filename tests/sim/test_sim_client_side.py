"""The KIP-848 draft's client-side assignor mode in the simulator: a big group and the mix."""

from __future__ import annotations

from kgroup.assignors import AssignmentSpec, TargetAssignment, UniformAssignor
from kgroup.membership import MemberState
from kgroup.testing.sim import Simulation, generate
from kgroup.testing.sim.client_assignors import VersionedAssignor


class CountingAssignor(VersionedAssignor):
    """A Python client assignor that counts its runs."""

    def __init__(self) -> None:
        super().__init__("py-counting", min_version=0, max_version=1, inner=UniformAssignor())
        self.runs = 0

    def assign(self, spec: AssignmentSpec) -> TargetAssignment:
        self.runs += 1
        return super().assign(spec)


def test_fifty_members_with_a_python_assignor_converge_on_its_assignment() -> None:
    assignor = CountingAssignor()
    sim = Simulation(seed=50, topics={"orders": 200, "audit": 40})
    for i in range(50):
        sim.add_member(
            f"m{i}",
            topics={"orders", "audit"},
            client_assignors=(assignor,),
            assign_time=0.5,
            start_at=0.02 * i,
        )
    sim.crash("m7", at=3.0, restart_after=1.0)  # maybe the one computing
    sim.run_until_converged(faults_end=5.0)
    coord = sim.coordinator
    assert coord.group_epoch == coord.assignment_epoch
    assert assignor.runs >= 1
    fetched = sim.assignment()
    assert len(fetched) == 50
    owners = [tp for parts in fetched.values() for tp in parts]
    assert len(owners) == len(set(owners)) == 240
    # Balanced as the Python assignor (uniform) balances: 4 or 5 partitions each.
    assert {len(parts) for parts in fetched.values()} <= {4, 5}
    # Each member fetches exactly what the installed target gives it.
    for name in fetched:
        member = sim.member(name)
        assert member is not None
        assert member.state is MemberState.STABLE


def test_the_seeded_mix_covers_the_client_side_faults() -> None:
    families = [generate(seed).families for seed in range(2000)]
    client = [f for f in families if "client-side assignors" in f]
    assert len(client) >= 100
    assert sum("assignor errors" in f for f in client) >= 30
    assert sum("crash while computing" in f for f in client) >= 30
    # Epoch races: members join while one computes (join storms, restarts).
    assert sum("join storm" in f for f in client) >= 20
