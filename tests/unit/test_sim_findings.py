"""Behaviours of the member machines that kgroup.testing.sim found wanting.

Each test is named after the behaviour it expects and is built from the
scenario that exposed it (the seed and its shrunk trace are in the reason).
A strict xfail marks a real member bug waiting for its fix in
kgroup.membership: when the fix lands, the test passes, the strict xfail
fails, and the marker must go.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kgroup.testing.sim import (
    Fault,
    FaultKind,
    MemberPlan,
    NetworkConditions,
    Result,
    Scenario,
    Simulation,
    SimulationConfig,
    run,
    run_scenario,
)


def _clean(seed: int) -> Result:
    """Run ``seed``; on a violation fail with its traced report (scenario, trace tail, replay)."""
    result = run_scenario(seed)
    if result.violation is not None:
        traced = run_scenario(seed, trace=True)
        raise AssertionError(traced.report())
    return result


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


def _classic_plan(
    name: str, start_at: float, poll: float, callback: float, **kw: Any
) -> MemberPlan:
    return MemberPlan(
        name,
        topics=frozenset({"t0", "t1"}),
        instance_id=f"i{name[1:]}",
        max_poll_interval_ms=kw.pop("max_poll_interval_ms", 6000),
        poll_interval=poll,
        callback_time=callback,
        start_at=start_at,
        protocol=kw.pop("protocol", "classic"),
        assignors=("cooperative-sticky", "range"),
        session_timeout_ms=6000,
    )


# Found by seed 23957 (shrunk): a cooperative classic member's SyncGroup answer
# for generation 2 was lost while the group converted to the consumer protocol.
# The conversion took generation 2's stored assignment as what the member owns,
# so t0-3 (still fetched by it from generation 1) went to another member at
# once; the member's commits of t0-3 then carried generation 2 (an auto-commit
# while rejoining, and the revocation commit after its next SyncGroup) and were
# accepted, rewinding the new owner's offsets. Now commits carry the generation
# of the assignment held (the last SyncGroup heard), and partitions left out of
# an assignment whose first SyncGroup went unanswered are given up as lost.
def test_a_classic_member_commits_only_partitions_it_owns_in_the_generation_it_commits_with() -> (
    None
):
    scenario = Scenario(
        seed=23957,
        size="small",
        families=("classic protocol", "rolling upgrade to the consumer protocol"),
        topics=(("t0", 6), ("t1", 5)),
        members=(
            _classic_plan("m0", 1.8052700144857514, 1.551669787257572, 0.07581657108466514),
            _classic_plan(
                "m1",
                7.609085862162886,
                1.514443552801117,
                0.01100502685856143,
                protocol="consumer",
            ),
            _classic_plan("m2", 5.454479967897719, 1.2946736636305065, 0.04321465706040108),
            _classic_plan(
                "m3",
                3.3466162966051227,
                1.472225031576789,
                0.010703069715447579,
                max_poll_interval_ms=15000,
            ),
        ),
        faults=(
            Fault(
                FaultKind.LOSSY,
                3.6390794217867266,
                duration=5.412874034509718,
                conditions=NetworkConditions(
                    drop_request=0.11250874221386728,
                    drop_response=0.2142903642197725,
                    duplicate=0.013559391577941154,
                    spike=0.02434280728984316,
                    spike_max=3.490783223110024,
                ),
            ),
        ),
        faults_end=9.265052397650207,
    )
    result = run(scenario)
    assert result.violation is None, str(result.violation)


def test_a_revocation_commit_held_over_a_conversion_is_the_brokers_window_not_a_member_bug() -> (
    None
):
    # A cooperative classic member heard an assignment that moves partitions away
    # and was committing them before its revoke callback when a consumer-protocol
    # member converted the group (seed 27191 until the static protocol roll family
    # took that seed; seed 33295 since). Apache Kafka takes the last classic
    # assignment as all the member owns, so those partitions are free at once, and
    # still accepts its commit at that generation (the Java client makes the same
    # commit). The simulator counts such commits instead of failing on them; any
    # other commit of a partition not owned still fails.
    result = _clean(33295)
    assert dict(result.stats).get("commit_held_over_conversion", 0) > 0


def test_a_sync_group_out_over_a_conversion_is_the_brokers_fetch_window() -> None:
    # Seed 148290 (soak range; seed 174478 once the simulated data plane stopped
    # fetching after the record wait in progress; seed 279515, m1, since the
    # simulator runs the runtime core): m8 (cooperative classic) sent its generation 2
    # SyncGroup, which was lost; the leader's SyncGroup completed generation 2
    # (moving t0-4 away from m8) and a consumer-protocol member then converted
    # the group. Apache Kafka takes generation 2's assignment as all m8 owns and
    # gives t0-4 to m6 at once, while m8 cannot know it lost t0-4 before its
    # SyncGroup times out (then it stops fetching, as seed 20034 pinned). The
    # simulator counts such fetches instead of failing on them, only until the
    # member hears that generation's assignment.
    result = _clean(279515)
    assert dict(result.stats).get("double_fetch_held_over_conversion", 0) > 0


def test_a_classic_member_whose_generation_is_reset_while_preparing_stops_fetching() -> None:
    # Seed 248656 (soak range): m4's heartbeat was answered ILLEGAL_GENERATION
    # while it was PREPARING (a revocation commit of a dropped topic retrying
    # through a coordinator load); it kept fetching its other partitions without
    # a generation, and without heartbeats, past its session: SESSION_LOST_FETCH.
    _clean(248656)


def test_a_classic_member_subscribing_again_during_its_unsubscribe_stays_in_the_group() -> None:
    # Seed 12313 (soak range): m1 unsubscribed while its rejoin's JoinGroup was
    # out, then subscribed again before that round ended; the release waiting for
    # the round ran anyway, so m1 left and stayed UNJOINED with a subscription.
    _clean(12313)


def test_a_classic_member_fetches_nothing_while_its_unanswered_sync_group_is_in_doubt() -> None:
    # Seed 20034 (soak range): m1's SyncGroup answer for generation 2 was lost,
    # the group converted and gave t0-6 (left out of m1's generation 2) to m2,
    # while m1, rejoining and then closing (its release waits for the round),
    # still fetched t0-6 from generation 1: DOUBLE_FETCH. After an unanswered
    # SyncGroup a classic member now stops fetching until the next one says
    # what it keeps.
    _clean(20034)


def test_a_classic_member_closing_during_a_join_round_stops_fetching_at_once() -> None:
    # Seed 36344 (soak range): m2's close arrived while its SyncGroup answer was
    # delayed; its release waited for the round (so that its commit is accepted)
    # but it went on fetching t0-2, which generation 2 had moved away and the
    # group's conversion then gave to m1: DOUBLE_FETCH. The release now stops
    # fetching when it starts waiting.
    _clean(36344)


def test_a_classic_leader_watches_every_topic_its_group_subscribes_to() -> None:
    # Seed 56395 (soak range), a simulator model bug: the simulated leader (on
    # t1) watched only its own topics, where the runtime's leader watches the
    # whole group's subscription, so t0's new partitions were never assigned.
    _clean(56395)


def test_a_classic_member_whose_join_is_lost_stops_fetching_after_a_session_timeout() -> None:
    # The first soak with SESSION_LOST_FETCH on by default: in each of these
    # seeds a cooperative classic member's JoinGroup (or its answer) was lost
    # in a lossy network; the coordinator expired the member a session timeout
    # after its last heartbeat while the member, waiting for the JoinGroup's
    # own timeout, went on fetching. It now stops fetching when the round has
    # not confirmed it for a session timeout.
    for seed in (22, 138, 148):
        _clean(seed)


def test_a_chain_of_callbacks_in_one_poll_restarts_the_poll_timer_between_them() -> None:
    # Soak 520000..719999: a consumer-protocol member with 1.5 s callbacks and a
    # 6 s max.poll.interval.ms heard new targets while its callbacks ran; the
    # next callback ran in the same poll, four in a row outlasted the poll
    # timeout, the member left as stale, rejoined into the same chain and the
    # group never converged (every ~12 s a new group epoch). The poll timer now
    # restarts before each callback that follows another in the same poll.
    _clean(696409)


def test_a_member_refused_its_rejoin_by_a_pre_kafka_19233_broker_leaves_and_rejoins() -> None:
    # Seed 1974 (a broker before KAFKA-19233, lossy network): m0's answer with
    # epoch 3 got lost, its client-side session timer fenced it at epoch 2, and
    # the coordinator, still holding it at epoch 3 (previous 2), refused every
    # rejoin at epoch 0 with FENCED_MEMBER_EPOCH: the member rejoined at once
    # each time, a tight loop until the coordinator's session timeout
    # (FENCE_LOOP). It now leaves with epoch -1 and rejoins, backing off if
    # refused again.
    _clean(1974)


def test_a_static_members_rejoin_accepted_but_unanswered_after_its_leave_is_no_fatal() -> None:
    # Seed 869: a static member fenced by its own session timer was refused its
    # rejoin for its own held instance id, left with -1 and rejoined; the
    # coordinator accepted that join but the answer timed out, and the retried
    # join was refused UNRELEASED_INSTANCE_ID again, for the member's own new
    # incarnation. It took that as another process holding the instance id and
    # failed fatally (hidden until UNEXPECTED_FATAL stopped excusing a static
    # member's UNRELEASED_INSTANCE_ID for its own id). It now leaves again after
    # the backoff; only a leave answered FENCED_INSTANCE_ID is fatal.
    _clean(869)


def test_a_classic_repair_waiting_for_its_leave_does_not_wake_in_a_loop() -> None:
    # Soak 250000..349999, seed 251948: an idle classic member's liveness repair
    # sent its LeaveGroup and held its join for the answer, while its next
    # wake-up stayed a retry deadline already past (a heartbeat answered
    # COORDINATOR_LOAD_IN_PROGRESS after a failover): it was woken at once, over
    # and over (BUSY_LOOP). The held join no longer reports that deadline.
    _clean(251948)


def test_the_steps_of_a_slow_classic_members_revocation_run_in_the_poll_that_starts_them() -> None:
    # Soak 250000..349999, seed 254489: in a rolling upgrade, slow classic
    # cooperative members (polls 1.2-2.4 s apart, callbacks up to 1.5 s) were
    # removed for not revoking within the rebalance timeout, round after round,
    # and 6 partitions stayed unowned. The commit before a revocation was
    # answered after the poll that released it returned, so the revoke callback
    # waited for the next poll, and the assign callback that follows it for the
    # one after. The poll now waits for that commit and runs both callbacks.
    _clean(254489)


def test_a_classic_member_whose_join_answer_was_lost_counts_its_session_from_a_heartbeat() -> None:
    # Soak 350000..449999, seed 443196: a static classic member's JoinGroup
    # answer was lost; the JoinGroup it sent again was answered at once from the
    # Stable group (no new session at the coordinator), its SyncGroup and
    # heartbeat were dropped, and the coordinator expired it while it fetched:
    # it had counted its session from that JoinGroup answer.
    _clean(443196)


def test_a_classic_member_counts_a_late_join_answers_session_from_the_join() -> None:
    # Soak 550000..649999, seed 617362: a classic cooperative leader's JoinGroup
    # answer was held up 3.6 s on a lossy network; its SyncGroup and heartbeat
    # answers were then lost, and the coordinator expired it (a session timeout
    # after completing the round) while it still fetched its kept partitions: it
    # had counted its session from the answer. It now counts from the sending.
    _clean(617362)


def test_a_classic_group_converted_during_its_initial_delay_records_its_last_leave() -> None:
    # Soak 790000..889999, seed 886605 (SIMULATOR_CONSISTENT, a bug of the
    # simulated coordinator): a stale initial rebalance delay held the classic
    # group's join rounds after a conversion and back, its last member's leave
    # wrote no record, and a failover reloaded the departed member with its
    # partitions while another member owned them.
    _clean(886605)
