"""Behaviours of the member machines that kgroup.testing.sim found wanting.

Each test is named after the behaviour it expects and is built from the
scenario that exposed it (the seed and its shrunk trace are in the reason).
A strict xfail marks a real member bug waiting for its fix in
kgroup.membership: when the fix lands, the test passes, the strict xfail
fails, and the marker must go.
"""

from __future__ import annotations

import dataclasses

from kgroup.testing.sim import (
    Simulation,
    SimulationConfig,
    run_scenario,
)


def _cut_off_member_sim() -> Simulation:
    config = dataclasses.replace(SimulationConfig(), check_session_loss=True)
    sim = Simulation(seed=5856, topics={"t": 4}, config=config)
    sim.add_member("m0", topics=frozenset({"t"}))
    sim.add_member("m1", topics=frozenset({"t"}), start_at=0.5)
    # m0 is cut off for well over the session timeout (6 s): the coordinator
    # fences it and hands its partitions to m1 while m0 cannot hear about it.
    sim.partition("m0", at=5.0, duration=15.0)
    return sim


def test_a_member_cut_off_for_a_session_timeout_stops_fetching() -> None:
    # Found by seed 5856 before members had a session-loss timer: m0, cut off,
    # kept fetching (and started newly assigned partitions) after the
    # coordinator had expired it. Members now stop fetching and report their
    # partitions lost after a session timeout without a successful heartbeat;
    # the opt-in SESSION_LOST_FETCH invariant checks exactly that.
    sim = _cut_off_member_sim()
    sim.run_until_converged(faults_end=20.0)


def test_a_zombie_that_starts_fetching_at_its_old_epoch_does_not_break_double_fetch() -> None:
    # Seed 5856 under the default invariants: the zombie fetches at epoch 11, the
    # new owner at 19, so no epoch is shared (the same tolerance Kafka has).
    assert run_scenario(5856).ok


def _static_leader_bounce_sim() -> Simulation:
    sim = Simulation(seed=961, topics={"t": 6})
    for i in range(3):
        sim.add_member(
            f"m{i}",
            topics=frozenset({"t"}),
            instance_id=f"i{i}",
            protocol="classic",
            assignors=("roundrobin",),
            start_at=0.1 * i,  # m0 joins first and leads
        )
    # The static leader is bounced (no LeaveGroup: no rebalance, KIP-345) and
    # the topic grows while it is away; its new process rejoins a stable group.
    sim.close("m0", at=5.0, restart_after=1.5)
    sim.add_partitions("t", 2, at=5.5)
    return sim


# Found by seed 961 once classic groups joined the mix: the runtime ignored
# JoinGroup v9's skip_assignment, so a static leader rejoining a stable group
# (KIP-345) ran its assignor, the coordinator ignored the result, and the
# metadata watch compared against that ignored run: t0-8 and t0-9 stayed
# unassigned. Now the leader skips the run and watches from the partitions the
# group's assignment covers.
def test_a_static_leader_rejoining_a_stable_group_still_notices_new_partitions() -> None:
    _static_leader_bounce_sim().run_until_converged(faults_end=8.0)
