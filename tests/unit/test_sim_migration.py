"""The simulated coordinator's translation of classic members, and the upgrade conversion."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from kgroup.membership import (
    ClassicAssignment,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinProtocol,
    MemberSubscription,
    SyncGroupRequest,
)
from kgroup.testing.groups.classic import (
    ClassicCoordinatorConfig,
    ClassicGroupCoordinator,
    ClassicGroupState,
)
from kgroup.testing.sim import ConsumerGroupCoordinator, CoordinatorConfig, ErrorCode, SimCluster
from kgroup.types import TopicPartition

GROUP = "g"


class World:
    """A consumer coordinator, a classic one, a manual clock, seeded member ids."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[Any], None], Any]] = []
        self.cluster = SimCluster(random.Random(1))
        self.cluster.create("t", 4)
        ids = iter(f"classic-{i}" for i in range(100))
        self.coord = ConsumerGroupCoordinator(
            GROUP,
            CoordinatorConfig(heartbeat_interval_ms=1000, session_timeout_ms=60_000),
            self.cluster,
            schedule=lambda at, fn, arg: self.timers.append((at, fn, arg)),
            clock=lambda: self.now,
            observer=self,
            new_member_id=lambda: next(ids),
        )
        self.classic = ClassicGroupCoordinator(
            GROUP,
            ClassicCoordinatorConfig(initial_rebalance_delay_ms=0),
            schedule=lambda at, fn, arg: self.timers.append((at, fn, arg)),
            clock=lambda: self.now,
            new_member_id=lambda: next(ids),
        )

    def released(self, *_: Any) -> None: ...
    def removed(self, *_: Any) -> None: ...
    def commit_accepted(self, *_: Any) -> None: ...
    def note(self, text: str) -> None: ...
    def illegal_assignment(self, message: str) -> None:
        raise AssertionError(message)

    def join(
        self, member_id: str = "", owned: frozenset[TopicPartition] = frozenset()
    ) -> JoinGroupResponse:
        return self.coord.classic_join(request(member_id, owned), self.now)


def request(
    member_id: str = "", owned: frozenset[TopicPartition] = frozenset(), name: str = "range"
) -> JoinGroupRequest:
    sub = MemberSubscription(topics=frozenset({"t"}), owned_partitions=owned)
    return JoinGroupRequest(
        group_id=GROUP,
        member_id=member_id,
        instance_id=None,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        protocols=(JoinProtocol(name, sub),),
    )


def sync(w: World, member_id: str, generation: int) -> Any:
    req = SyncGroupRequest(GROUP, generation, member_id, None, "range")
    return w.coord.classic_sync(req, w.now)


def tps(*ps: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition("t", p) for p in ps)


def test_a_classic_member_in_a_consumer_group_has_no_leader_and_gets_the_assignment() -> None:
    w = World()
    first = w.join()
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    resp = w.join(first.member_id)
    assert resp.error_code == 0
    assert resp.leader == ""
    assert resp.members == ()
    assert resp.generation_id == w.coord.members[first.member_id].epoch > 0
    answer = sync(w, first.member_id, resp.generation_id)
    assert answer.error_code == 0
    assert answer.assignment.partitions == tps(0, 1, 2, 3)
    assert (
        sync(w, first.member_id, resp.generation_id - 1).error_code == ErrorCode.ILLEGAL_GENERATION
    )


def test_an_unknown_member_id_is_refused_so_the_member_starts_over() -> None:
    w = World()
    assert w.join("classic-gone").error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_classic_member_that_must_revoke_is_told_to_rejoin_and_releases_on_its_join() -> None:
    w = World()
    a = w.join().member_id
    gen = w.join(a).generation_id
    assert sync(w, a, gen).assignment.partitions == tps(0, 1, 2, 3)
    b = w.join().member_id
    w.join(b)  # b joins: a must give up two partitions
    assert w.coord.classic_heartbeat(gen, a, None, w.now) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = w.join(a, owned=tps(0, 1, 2, 3))  # still owns everything
    kept = sync(w, a, rejoin.generation_id).assignment.partitions
    assert len(kept) == 2  # the revoked two are not in its assignment any more
    again = w.join(a, owned=kept)  # revoked: the coordinator releases them
    assert again.generation_id > gen
    assert w.coord.classic_heartbeat(again.generation_id, a, None, w.now) == 0
    b_gen = w.join(b).generation_id
    assert sync(w, b, b_gen).assignment.partitions == tps(0, 1, 2, 3) - kept


def test_an_upgrade_adopts_the_classic_members_at_their_generation_and_assignment() -> None:
    w = World()
    answers: list[Any] = []
    w.classic.join(request(), answers.append)
    member_id = answers[-1].member_id
    w.classic.join(request(member_id), answers.append)
    gen = answers[-1].generation_id
    w.classic.sync(
        SyncGroupRequest(
            GROUP, gen, member_id, None, "range", ((member_id, ClassicAssignment(tps(0, 1, 2, 3))),)
        ),
        answers.append,
    )
    assert w.classic.state is ClassicGroupState.STABLE
    generation, members, offsets = w.classic.export_for_upgrade()
    assert not w.classic.members  # the classic group is empty now
    w.coord.adopt_classic(generation, members, offsets, w.now)
    rec = w.coord.members[member_id]
    assert rec.epoch == generation == w.coord.group_epoch == w.coord.assignment_epoch
    names = {w.cluster.to_name(t) for t in rec.assigned}
    assert names == tps(0, 1, 2, 3)
    assert w.coord.classic_heartbeat(generation, member_id, None, w.now) == 0
    # A classic member's commits are checked against its generation (never
    # STALE_MEMBER_EPOCH, which a classic client does not know).
    tp = frozenset({TopicPartition("t", 0)})
    assert w.coord.commit(member_id, generation - 1, tp) is ErrorCode.ILLEGAL_GENERATION
    assert w.coord.commit(member_id, generation, tp) is ErrorCode.NONE


def test_the_last_leave_after_a_conversion_in_the_initial_delay_writes_the_empty_group() -> None:
    # Soak 790000..889999, seed 886605: a member joined the empty classic group
    # (initial rebalance delay running), a consumer-protocol member converted it
    # during the delay, and the group went back to classic. The stale delay then
    # held every later join round, so the last member's LeaveGroup never
    # completed one: no empty record was written, and after a failover the
    # coordinator reloaded the departed member with its old partitions.
    w = World()
    classic = ClassicGroupCoordinator(
        GROUP,
        ClassicCoordinatorConfig(initial_rebalance_delay_ms=3000),
        schedule=lambda at, fn, arg: w.timers.append((at, fn, arg)),
        clock=lambda: w.now,
        new_member_id=lambda: "classic-0",
    )
    answers: list[Any] = []
    classic.join(request(), answers.append)
    member_id = answers[-1].member_id
    classic.join(request(member_id), answers.append)  # held by the initial delay
    generation, members, offsets = classic.export_for_upgrade()
    w.now = 1.0
    classic.adopt_downgrade(generation + 2, members, offsets)
    assert classic.leave(member_id, None) == 0
    assert classic.state is ClassicGroupState.EMPTY
    assert classic.persisted.members == ()
    assert classic.persisted.generation == classic.generation
