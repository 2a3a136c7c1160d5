"""The simulated KIP-848 coordinator of kgroup.testing.sim, on its own (no members, no engine)."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kgroup.assignors import AssignmentSpec, MemberAssignment, TargetAssignment
from kgroup.membership import HeartbeatRequest, HeartbeatResponse
from kgroup.testing.sim import (
    AssignmentState,
    ConsumerGroupCoordinator,
    CoordinatorConfig,
    ErrorCode,
    MemberRecord,
    ScenarioError,
    SimCluster,
)
from kgroup.types import TopicIdPartition, TopicPartition

GROUP = "g"


class Recorder:
    """Observer and scheduler for a coordinator under test."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[Any], None], Any]] = []
        self.released: list[tuple[str, frozenset[TopicIdPartition], str]] = []
        self.removed: list[tuple[str, str]] = []
        self.commits: list[tuple[str, int, frozenset[TopicPartition]]] = []
        self.illegal: list[str] = []

    def schedule(self, at: float, fn: Callable[[Any], None], arg: Any) -> None:
        self.timers.append((at, fn, arg))

    def advance(self, to: float) -> None:
        """Move the clock to ``to``, firing due timers in time order (timers may add timers)."""
        while True:
            due = sorted((t for t in self.timers if t[0] <= to), key=lambda t: t[0])
            if not due:
                break
            first = due[0]
            self.timers.remove(first)
            self.now = first[0]
            first[1](first[2])
        self.now = to


class Observer:
    def __init__(self, rec: Recorder) -> None:
        self.rec = rec

    def released(self, member_id: str, partitions: frozenset[TopicIdPartition], why: str) -> None:
        self.rec.released.append((member_id, partitions, why))

    def removed(self, member_id: str, why: str) -> None:
        self.rec.removed.append((member_id, why))

    def commit_accepted(
        self, record: MemberRecord, epoch: int, partitions: frozenset[TopicPartition]
    ) -> None:
        self.rec.commits.append((record.member_id, epoch, partitions))

    def illegal_assignment(self, message: str) -> None:
        self.rec.illegal.append(message)

    def note(self, text: str) -> None:
        pass


def make(
    topics: dict[str, int] | None = None,
    config: CoordinatorConfig | None = None,
) -> tuple[ConsumerGroupCoordinator, Recorder, SimCluster]:
    rec = Recorder()
    cluster = SimCluster(random.Random(1))
    for name, n in (topics or {"t": 4}).items():
        cluster.create(name, n)
    coord = ConsumerGroupCoordinator(
        GROUP,
        config or CoordinatorConfig(heartbeat_interval_ms=1000, session_timeout_ms=6000),
        cluster,
        schedule=rec.schedule,
        clock=lambda: rec.now,
        observer=Observer(rec),
    )
    return coord, rec, cluster


def join(
    coord: ConsumerGroupCoordinator,
    member: str,
    *,
    names: tuple[str, ...] = ("t",),
    regex: str | None = None,
    instance: str | None = None,
    assignor: str | None = None,
    now: float = 0.0,
) -> HeartbeatResponse:
    return coord.heartbeat(
        HeartbeatRequest(
            group_id=GROUP,
            member_id=member,
            member_epoch=0,
            instance_id=instance,
            rebalance_timeout_ms=10_000,
            subscribed_topic_names=names,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=frozenset(),
        ),
        now,
    )


def beat(
    coord: ConsumerGroupCoordinator,
    member: str,
    epoch: int,
    owned: frozenset[TopicIdPartition] | None = None,
    *,
    instance: str | None = None,
    full: bool = False,
    now: float = 0.0,
) -> HeartbeatResponse:
    return coord.heartbeat(
        HeartbeatRequest(
            group_id=GROUP,
            member_id=member,
            member_epoch=epoch,
            instance_id=instance,
            rebalance_timeout_ms=10_000 if full else None,
            subscribed_topic_names=("t",) if full else None,
            topic_partitions=owned,
        ),
        now,
    )


def parts(resp: HeartbeatResponse) -> frozenset[TopicIdPartition]:
    assert resp.assignment is not None
    return frozenset(TopicIdPartition(t, p) for t, ps in resp.assignment.items() for p in ps)


def test_first_member_gets_every_partition_at_the_first_group_epoch() -> None:
    coord, _, cluster = make()
    resp = join(coord, "a")
    topic = cluster.get("t")
    assert topic is not None
    assert resp.error_code == 0
    assert resp.member_epoch == 1
    assert parts(resp) == topic.id_partitions()
    assert coord.members["a"].state is AssignmentState.STABLE


def test_a_partition_moves_only_after_its_previous_owner_stops_reporting_it() -> None:
    coord, rec, _ = make()
    a_parts = parts(join(coord, "a"))
    b = join(coord, "b")
    # The new target gives b half, but a still owns everything: b gets nothing yet.
    assert b.member_epoch == 2
    assert parts(b) == frozenset()
    a = beat(coord, "a", 1)
    kept = parts(a)
    assert a.member_epoch == 1  # revoking keeps the epoch
    assert len(kept) == 2
    assert coord.members["a"].state is AssignmentState.UNREVOKED_PARTITIONS
    # Not reported (null) means "unchanged": the revocation stays pending.
    assert beat(coord, "a", 1).assignment is None
    assert coord.members["a"].state is AssignmentState.UNREVOKED_PARTITIONS
    assert beat(coord, "b", 2).assignment is None
    # a acknowledges with only what it kept: it moves to the target epoch, the rest is freed.
    ack = beat(coord, "a", 1, kept)
    assert ack.member_epoch == 2
    assert rec.released == [("a", a_parts - kept, "revocation acknowledged")]
    assert parts(beat(coord, "b", 2)) == a_parts - kept


def test_still_reporting_a_revoked_partition_keeps_it_pending() -> None:
    coord, _, _ = make()
    everything = parts(join(coord, "a"))
    join(coord, "b")
    beat(coord, "a", 1)
    assert beat(coord, "a", 1, everything).assignment is None
    assert coord.members["a"].state is AssignmentState.UNREVOKED_PARTITIONS
    assert coord.owner_of(next(iter(everything))) == "a"


@pytest.mark.parametrize(
    ("epoch", "owned", "error"),
    [
        pytest.param(3, "", ErrorCode.FENCED_MEMBER_EPOCH, id="greater"),
        pytest.param(1, None, ErrorCode.FENCED_MEMBER_EPOCH, id="previous-without-owned"),
        pytest.param(1, "all", ErrorCode.FENCED_MEMBER_EPOCH, id="previous-not-subset"),
        pytest.param(1, "kept", ErrorCode.NONE, id="previous-with-subset"),
    ],
)
def test_member_epoch_validation(epoch: int, owned: str | None, error: ErrorCode) -> None:
    coord, _, _ = make()
    everything = parts(join(coord, "a"))
    join(coord, "b")
    kept = parts(beat(coord, "a", 1))
    beat(coord, "a", 1, kept)  # now at epoch 2, previous epoch 1
    assert coord.members["a"].epoch == 2
    sent = None if owned is None else {"all": everything, "kept": kept, "": frozenset()}[owned]
    resp = beat(coord, "a", epoch, sent, full=sent is not None)
    assert resp.error_code == error
    if error is ErrorCode.NONE:
        assert resp.member_epoch == 2


def test_unknown_member_is_told_so() -> None:
    coord, _, _ = make()
    assert beat(coord, "ghost", 4).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    leave = coord.heartbeat(HeartbeatRequest(GROUP, "ghost", -1), 0.0)
    assert leave.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_fenced_member_rejoins_with_epoch_zero_and_the_same_member_id() -> None:
    coord, _, _ = make()
    everything = parts(join(coord, "a"))
    assert beat(coord, "a", 7).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    again = join(coord, "a")
    assert again.error_code == 0
    assert again.member_epoch == 1
    assert parts(again) == everything


def test_a_pre_kafka_19233_coordinator_refuses_the_rejoin_until_the_member_left() -> None:
    # Measured on Apache Kafka 4.0.2 and 4.1.2: epoch 0 is checked like any epoch.
    config = CoordinatorConfig(
        heartbeat_interval_ms=1000, session_timeout_ms=6000, pre_kafka_19233=True
    )
    coord, _, _ = make(config=config)
    join(coord, "a")
    assert join(coord, "a").error_code == 0  # 0 is a's previous epoch: accepted
    join(coord, "b")
    kept = parts(beat(coord, "a", 1))
    beat(coord, "a", 1, kept)  # a released what b gets: epoch 2, previous 1
    assert coord.members["a"].epoch == 2
    for _ in range(2):
        refused = join(coord, "a")
        assert refused.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    left = coord.heartbeat(HeartbeatRequest(GROUP, "a", -1), 0.0)
    assert left.error_code == 0
    back = join(coord, "a")
    assert back.error_code == 0
    assert back.member_epoch > 2


def test_leaving_frees_partitions_and_bumps_the_group_epoch() -> None:
    coord, rec, _ = make()
    everything = parts(join(coord, "a"))
    join(coord, "b")
    assert coord.group_epoch == 2
    resp = coord.heartbeat(HeartbeatRequest(GROUP, "a", -1), 0.0)
    assert (resp.error_code, resp.member_epoch) == (0, -1)
    assert "a" not in coord.members
    assert rec.removed == [("a", "left the group")]
    assert coord.group_epoch == 3
    assert parts(beat(coord, "b", 2)) == everything


def test_a_static_member_that_left_temporarily_is_replaced_with_its_assignment() -> None:
    coord, _, _ = make()
    mine = parts(join(coord, "a1", instance="i"))
    join(coord, "b")
    kept = parts(beat(coord, "a1", 1, instance="i"))
    beat(coord, "a1", 1, kept, instance="i")
    epoch = coord.group_epoch
    left = coord.heartbeat(HeartbeatRequest(GROUP, "a1", -2, instance_id="i"), 0.0)
    assert left.member_epoch == -2
    assert coord.members["a1"].epoch == -2
    assert coord.owner_of(next(iter(kept))) == "a1"  # still owned while it is away
    back = join(coord, "a2", instance="i")
    assert back.error_code == 0
    assert parts(back) == kept
    assert "a1" not in coord.members
    assert coord.group_epoch == epoch  # no rebalance
    assert kept < mine


def test_a_static_instance_still_held_is_unreleased() -> None:
    coord, _, _ = make()
    join(coord, "a1", instance="i")
    assert join(coord, "a2", instance="i").error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    # As the broker: even the same member id must release the instance id first.
    assert join(coord, "a1", instance="i").error_code == ErrorCode.UNRELEASED_INSTANCE_ID


def test_a_replaced_static_process_is_fenced_by_instance_id() -> None:
    coord, _, _ = make()
    join(coord, "a1", instance="i")
    coord.heartbeat(HeartbeatRequest(GROUP, "a1", -2, instance_id="i"), 0.0)
    join(coord, "a2", instance="i")
    assert beat(coord, "a1", 1, instance="i").error_code == ErrorCode.FENCED_INSTANCE_ID


def test_the_session_timeout_removes_a_silent_member() -> None:
    coord, rec, _ = make()
    join(coord, "a", now=0.0)
    join(coord, "b", now=0.0)
    rec.advance(5.0)
    beat(coord, "b", 2, now=5.0)
    rec.advance(6.5)
    assert "a" not in coord.members
    assert "b" in coord.members
    assert rec.removed == [("a", "session timeout")]


def test_the_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    coord, rec, _ = make()
    join(coord, "a")
    join(coord, "b")
    beat(coord, "a", 1)
    assert coord.members["a"].state is AssignmentState.UNREVOKED_PARTITIONS
    for t in (2.0, 4.0, 6.0, 8.0):
        rec.advance(t)
        beat(coord, "a", 1, now=t)
        beat(coord, "b", 2, now=t)
    rec.advance(10.5)
    assert "a" not in coord.members
    assert rec.removed[0][0] == "a"
    assert "rebalance timeout" in rec.removed[0][1]


def test_a_failover_reloads_epochs_targets_and_assignments() -> None:
    coord, rec, cluster = make()
    join(coord, "a")
    join(coord, "b", instance="ib")
    kept = parts(beat(coord, "a", 1))
    snapshot = coord.persist()
    reloaded = ConsumerGroupCoordinator(
        GROUP,
        coord.config,
        cluster,
        schedule=rec.schedule,
        clock=lambda: rec.now,
        observer=Observer(rec),
        persisted=snapshot,
    )
    assert reloaded.persist() == snapshot
    assert reloaded.group_epoch == coord.group_epoch == 2
    assert reloaded.members["a"].state is AssignmentState.UNREVOKED_PARTITIONS
    assert reloaded.target("b") == coord.target("b")
    # The revocation continues where it was: the ack moves a on and frees the rest.
    assert beat(reloaded, "a", 1, kept).member_epoch == 2
    assert parts(beat(reloaded, "b", 2, instance="ib")) == coord.target("b")


def test_commits_are_accepted_only_from_a_member_at_its_current_epoch() -> None:
    coord, rec, _ = make()
    join(coord, "a")
    tp = frozenset({TopicPartition("t", 0)})
    assert coord.commit("a", 1, tp) is ErrorCode.NONE
    assert coord.commit("a", 2, tp) is ErrorCode.STALE_MEMBER_EPOCH
    assert coord.commit("nobody", 1, tp) is ErrorCode.UNKNOWN_MEMBER_ID
    assert rec.commits == [("a", 1, tp)]


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        pytest.param({"rebalance_timeout_ms": None}, ErrorCode.INVALID_REQUEST, id="no-timeout"),
        pytest.param({"topic_partitions": None}, ErrorCode.INVALID_REQUEST, id="null-owned"),
        pytest.param({"subscribed_topic_names": None}, ErrorCode.INVALID_REQUEST, id="no-sub"),
        pytest.param({"member_epoch": -3}, ErrorCode.INVALID_REQUEST, id="epoch-below-2"),
        pytest.param({"instance_id": ""}, ErrorCode.INVALID_REQUEST, id="empty-instance"),
        pytest.param({"member_id": ""}, ErrorCode.INVALID_REQUEST, id="empty-member"),
        pytest.param({"group_id": "other"}, ErrorCode.INVALID_REQUEST, id="other-group"),
        pytest.param({"server_assignor": "nope"}, ErrorCode.UNSUPPORTED_ASSIGNOR, id="assignor"),
        pytest.param(
            {"subscribed_topic_regex": "("}, ErrorCode.INVALID_REGULAR_EXPRESSION, id="regex"
        ),
    ],
)
def test_malformed_joins_are_rejected(changes: dict[str, Any], error: ErrorCode) -> None:
    coord, _, _ = make()
    fields: dict[str, Any] = {
        "group_id": GROUP,
        "member_id": "a",
        "member_epoch": 0,
        "rebalance_timeout_ms": 10_000,
        "subscribed_topic_names": ("t",),
        "topic_partitions": frozenset(),
    }
    fields.update(changes)
    assert coord.heartbeat(HeartbeatRequest(**fields), 0.0).error_code == error


def test_a_joining_member_with_partitions_is_invalid() -> None:
    coord, _, cluster = make()
    topic = cluster.get("t")
    assert topic is not None
    req = HeartbeatRequest(
        GROUP,
        "a",
        0,
        rebalance_timeout_ms=10_000,
        subscribed_topic_names=("t",),
        topic_partitions=frozenset({TopicIdPartition(topic.topic_id, 0)}),
    )
    assert coord.heartbeat(req, 0.0).error_code == ErrorCode.INVALID_REQUEST


def test_regex_subscriptions_follow_new_topics() -> None:
    coord, _, cluster = make({"t0": 2, "other": 3})
    resp = join(coord, "a", names=(), regex=r"t[0-9]+")
    assert len(parts(resp)) == 2
    epoch = coord.group_epoch
    cluster.create("t1", 3)
    resp = beat(coord, "a", resp.member_epoch)
    assert coord.group_epoch == epoch + 1
    assert len(parts(resp)) == 5


def test_the_most_common_server_assignor_wins() -> None:
    coord, _, _ = make()
    join(coord, "a", assignor="range")
    join(coord, "b", assignor="range")
    join(coord, "c", assignor="uniform")
    assert coord._select_assignor().name == "range"


class _LeavesOneOut:
    name = "leaves-one-out"
    min_version = 0
    max_version = 0

    def metadata(self) -> bytes | None:
        return None

    def on_assignment(self, assignment: MemberAssignment, metadata: object) -> None:
        pass

    def assign(self, spec: AssignmentSpec) -> TargetAssignment:
        first = next(iter(spec.members))
        return TargetAssignment(
            {
                first: MemberAssignment(
                    {t: frozenset(range(1, m.num_partitions)) for t, m in spec.topics.items()}
                )
            }
        )


def test_an_assignor_that_leaves_a_partition_unassigned_is_reported() -> None:
    coord, rec, _ = make(config=CoordinatorConfig(assignors=(_LeavesOneOut(),)))
    join(coord, "a")
    assert rec.illegal == ["assignor 'leaves-one-out' left t-0 unassigned"]


def test_coordinator_config_rejects_a_heartbeat_interval_above_the_session() -> None:
    with pytest.raises(ScenarioError, match="below"):
        CoordinatorConfig(heartbeat_interval_ms=6000, session_timeout_ms=6000)


def test_topic_ids_are_reproducible_from_the_seed() -> None:
    a, b = SimCluster(random.Random(5)), SimCluster(random.Random(5))
    assert a.create("x", 1).topic_id == b.create("x", 1).topic_id
    assert isinstance(a.create("y", 1).topic_id, uuid.UUID)
