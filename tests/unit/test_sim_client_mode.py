"""The simulated coordinator's client-side assignor mode (the KIP-848 draft), on its own."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from kgroup.error_codes import ErrorCode
from kgroup.membership import HeartbeatRequest, HeartbeatResponse
from kgroup.membership.consumer import (
    ClientAssignor,
    InstallAssignmentRequest,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
)
from kgroup.testing.groups.consumer import INVALID_ASSIGNMENT
from kgroup.testing.sim import ConsumerGroupCoordinator, CoordinatorConfig, SimCluster
from kgroup.types import TopicIdPartition

GROUP = "g"
PY = ClientAssignor("py", min_version=0, max_version=2, metadata_version=2)
OLD = ClientAssignor("py", min_version=0, max_version=1, metadata_version=1)
ALT = ClientAssignor("alt", min_version=0, max_version=0, metadata_version=0)


class World:
    """A coordinator with a manual clock; its observer records illegal assignments."""

    def __init__(self, partitions: int = 4) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[Any], None], Any]] = []
        self.illegal: list[str] = []
        self.cluster = SimCluster(random.Random(1))
        self.topic = self.cluster.create("t", partitions)
        self.coord = ConsumerGroupCoordinator(
            GROUP,
            CoordinatorConfig(heartbeat_interval_ms=1000, session_timeout_ms=60_000),
            self.cluster,
            schedule=lambda at, fn, arg: self.timers.append((at, fn, arg)),
            clock=lambda: self.now,
            observer=self,
        )

    # observer
    def released(self, *_: Any) -> None: ...
    def removed(self, *_: Any) -> None: ...
    def commit_accepted(self, *_: Any) -> None: ...
    def note(self, text: str) -> None: ...
    def illegal_assignment(self, message: str) -> None:
        self.illegal.append(message)

    def advance(self, to: float) -> None:
        for timer in sorted(self.timers, key=lambda t: t[0]):
            if timer[0] <= to:
                self.timers.remove(timer)
                self.now = timer[0]
                timer[1](timer[2])
        self.now = to

    def join(self, member: str, *assignors: ClientAssignor) -> HeartbeatResponse:
        return self.coord.heartbeat(
            HeartbeatRequest(
                group_id=GROUP,
                member_id=member,
                member_epoch=0,
                rebalance_timeout_ms=5_000,
                subscribed_topic_names=("t",),
                topic_partitions=frozenset(),
                client_assignors=assignors,
            ),
            self.now,
        )

    def beat(self, member: str, epoch: int) -> HeartbeatResponse:
        if epoch == 0:  # still joining: every epoch-0 heartbeat is a full one
            return self.join(member, *self.coord.members[member].client_assignors)
        req = HeartbeatRequest(group_id=GROUP, member_id=member, member_epoch=epoch)
        return self.coord.heartbeat(req, self.now)

    def prepare(self, member: str, epoch: int = 0) -> PrepareAssignmentResponse:
        return self.coord.prepare_assignment(
            PrepareAssignmentRequest(GROUP, member, epoch), self.now
        )

    def install(
        self,
        member: str,
        state: PrepareAssignmentResponse,
        assignment: dict[str, list[int]],
        **kw: Any,
    ) -> int:
        tid = self.topic.topic_id
        members = tuple(
            (m, frozenset(TopicIdPartition(tid, p) for p in ps)) for m, ps in assignment.items()
        )
        req = InstallAssignmentRequest(
            group_id=GROUP,
            member_id=member,
            member_epoch=kw.pop("epoch", 0),
            group_epoch=kw.pop("group_epoch", state.group_epoch),
            error=kw.pop("error", 0),
            members=() if kw.pop("empty", False) else members,
        )
        return self.coord.install_assignment(req, self.now)


def test_a_client_assignor_all_members_support_is_used_and_one_member_is_asked() -> None:
    w = World()
    first = w.join("a", PY)
    assert first.should_compute_assignment
    assert first.member_epoch == 0
    assert first.assignment is None  # nothing computed yet: it stays joining
    second = w.join("b", PY)
    assert not second.should_compute_assignment  # one member computes
    state = w.prepare("a")
    assert (state.error_code, state.assignor_name, state.group_epoch) == (0, "py", 2)
    assert {m.member_id for m in state.members} == {"a", "b"}
    assert w.install("a", state, {"a": [0, 1], "b": [2, 3]}) == 0
    assert w.coord.assignment_epoch == 2
    resp = w.beat("b", 0)
    assert resp.member_epoch == 2
    assert resp.assignment is not None
    assert sorted(resp.assignment[w.topic.topic_id]) == [2, 3]


def test_without_a_common_client_assignor_the_server_assignor_assigns() -> None:
    w = World()
    w.join("a", ALT)
    resp = w.join("b", PY)
    assert not resp.should_compute_assignment
    assert w.coord.assignment_epoch == w.coord.group_epoch == 2


def test_precedence_follows_the_members_lists() -> None:
    w = World()
    w.join("a", ALT, PY)
    w.join("b", ALT, PY)
    assert w.prepare("a").assignor_name == "alt"


def test_the_member_able_to_read_every_metadata_version_is_chosen() -> None:
    w = World()
    w.join("old", OLD)  # reads up to version 1, writes 1
    w.join("new", PY)  # reads 0..2
    w.coord._computer = None  # as after a timeout: choose again among both
    assert w.beat("old", 0).should_compute_assignment is False
    assert w.beat("new", 0).should_compute_assignment is True


def test_prepare_and_install_are_refused_to_others_and_at_stale_epochs() -> None:
    w = World()
    w.join("a", PY)
    w.join("b", PY)
    assert w.prepare("b").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert w.prepare("a", epoch=3).error_code == ErrorCode.STALE_MEMBER_EPOCH
    assert w.prepare("nobody").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    state = w.prepare("a")
    assert w.install("b", state, {"a": [0, 1, 2, 3]}) == ErrorCode.UNKNOWN_MEMBER_ID


def test_an_assignor_error_keeps_the_previous_target_and_asks_again() -> None:
    w = World()
    w.join("a", PY)
    state = w.prepare("a")
    assert w.install("a", state, {"a": [0, 1, 2, 3]}) == 0
    assert w.beat("a", 0).member_epoch == 1
    w.join("b", PY)
    state = w.prepare("a", epoch=1)
    assert w.install("a", state, {}, epoch=1, error=1, empty=True) == 0
    assert w.coord.assignment_epoch == 1
    assert w.coord.target("a") == frozenset(TopicIdPartition(w.topic.topic_id, p) for p in range(4))
    assert w.beat("a", 1).should_compute_assignment  # asked again


def test_an_assignment_for_an_older_epoch_is_installed_and_computed_again_at_once() -> None:
    w = World()
    w.join("a", PY)
    state = w.prepare("a")  # group epoch 1
    w.join("b", PY)  # group epoch 2 while a computes
    assert w.install("a", state, {"a": [0, 1, 2, 3]}) == 0
    assert w.coord.assignment_epoch == 1
    assert w.coord.group_epoch == 2
    resp = w.beat("a", 0)
    assert resp.member_epoch == 1  # the installed assignment is used ...
    assert resp.should_compute_assignment  # ... and a new one is asked for at once
    again = w.prepare("a", epoch=1)
    assert again.group_epoch == 2


def test_an_invalid_install_is_refused_and_reported() -> None:
    w = World()
    w.join("a", PY)
    state = w.prepare("a")
    assert w.install("a", state, {"a": [0, 1]}) == INVALID_ASSIGNMENT
    assert w.coord.assignment_epoch == 0
    assert w.illegal
    assert "unassigned" in w.illegal[0]


def test_a_member_that_does_not_install_in_time_is_replaced_by_another() -> None:
    w = World()
    w.join("a", PY)
    w.join("b", PY)
    w.advance(5.0)  # a's rebalance timeout (5 s) from its notification
    assert w.beat("a", 0).should_compute_assignment is False
    assert w.beat("b", 0).should_compute_assignment is True
    assert "a" in w.coord.members  # not fenced: only the session fences


def test_a_reload_forgets_the_computation_and_asks_again() -> None:
    w = World()
    w.join("a", PY)
    w.prepare("a")
    reloaded = ConsumerGroupCoordinator(
        GROUP,
        w.coord.config,
        w.cluster,
        schedule=lambda at, fn, arg: None,
        clock=lambda: w.now,
        observer=w,
        persisted=w.coord.persist(),
    )
    assert reloaded.members["a"].client_assignors == (PY,)
    req = HeartbeatRequest(
        group_id=GROUP,
        member_id="a",
        member_epoch=0,
        rebalance_timeout_ms=5000,
        subscribed_topic_names=("t",),
        topic_partitions=frozenset(),
    )
    assert reloaded.heartbeat(req, w.now).should_compute_assignment


def test_a_member_whose_version_range_overlaps_no_others_is_refused() -> None:
    w = World()
    w.join("a", OLD)  # reads 0..1
    far = ClientAssignor("py", min_version=2, max_version=3, metadata_version=3)
    resp = w.join("b", far)
    assert resp.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert "do not overlap" in (resp.error_message or "")
    assert "b" not in w.coord.members
