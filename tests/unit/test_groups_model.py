"""kgroup.testing.groups: what the fake broker reads of the group model, and its own rule."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import pytest

from kgroup.membership import (
    ClassicAssignment,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinProtocol,
    MemberSubscription,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kgroup.testing.fake._classic_group import ClassicGroup
from kgroup.testing.fake._consumer_group import ConsumerGroup
from kgroup.testing.fake._topics import Topics
from kgroup.testing.groups import (
    ClassicGroupState,
    ConsumerGroupCoordinator,
    CoordinatorConfig,
    ErrorCode,
    MemberRecord,
    ScenarioError,
)
from kgroup.testing.sim import SimCluster
from kgroup.types import TopicIdPartition, TopicPartition

GROUP = "g"


class _Quiet:
    def released(self, member_id: str, partitions: frozenset[TopicIdPartition], why: str) -> None:
        pass

    def removed(self, member_id: str, why: str) -> None:
        pass

    def commit_accepted(
        self, record: MemberRecord, epoch: int, partitions: frozenset[TopicPartition]
    ) -> None:
        pass

    def illegal_assignment(self, message: str) -> None:
        raise AssertionError(message)

    def note(self, text: str) -> None:
        pass


def _coordinator(**config: Any) -> tuple[ConsumerGroupCoordinator, SimCluster]:
    cluster = SimCluster(random.Random(1))
    cluster.create("t", 2)
    timers: list[tuple[float, Callable[[Any], None], Any]] = []
    coord = ConsumerGroupCoordinator(
        GROUP,
        CoordinatorConfig(heartbeat_interval_ms=100, session_timeout_ms=1000, **config),
        cluster,
        schedule=lambda at, fn, arg: timers.append((at, fn, arg)),
        clock=lambda: 0.0,
        observer=_Quiet(),
    )
    return coord, cluster


def _request(
    member: str, epoch: int, owned: frozenset[TopicIdPartition] | None
) -> HeartbeatRequest:
    full = epoch == 0
    return HeartbeatRequest(
        group_id=GROUP,
        member_id=member,
        member_epoch=epoch,
        rebalance_timeout_ms=5000 if full else None,
        subscribed_topic_names=("t",) if full else None,
        topic_partitions=owned,
    )


def _join(coord: ConsumerGroupCoordinator, member: str) -> HeartbeatResponse:
    return coord.heartbeat(_request(member, 0, frozenset()), 0.0)


def test_an_epoch_zero_rejoin_keeps_the_member_unless_the_rule_starts_it_over() -> None:
    kafka, _ = _coordinator()
    fake, _ = _coordinator(rejoin_starts_over=True)
    for coord in (kafka, fake):
        assert _join(coord, "a").member_epoch == 1
    # Kafka 4.2 (KAFKA-19233): the held member answers at its epoch, nothing bumps.
    assert (_join(kafka, "a").member_epoch, kafka.group_epoch) == (1, 1)
    # The fake's rule: a new member, a new epoch.
    again = _join(fake, "a")
    assert again.error_code == ErrorCode.NONE
    assert again.member_epoch > 1
    assert fake.group_epoch > 1


def test_the_two_rejoin_rules_do_not_combine() -> None:
    with pytest.raises(ScenarioError):
        CoordinatorConfig(pre_kafka_19233=True, rejoin_starts_over=True)


def test_offset_commits_and_fetches_are_judged_by_the_member_epoch_as_kafka_does() -> None:
    coord, _ = _coordinator()
    # An empty group takes commits from outside the group (epoch -1).
    assert coord.commit_error("", -1) is ErrorCode.NONE
    _join(coord, "a")
    assert coord.commit_error("a", 1) is ErrorCode.NONE
    # ConsumerGroup.validateMemberEpoch: ahead or behind, both are stale.
    assert coord.commit_error("a", 2) is ErrorCode.STALE_MEMBER_EPOCH
    assert coord.commit_error("a", 0) is ErrorCode.STALE_MEMBER_EPOCH
    assert coord.commit_error("", -1) is ErrorCode.UNKNOWN_MEMBER_ID
    assert coord.fetch_error("a", 1) is ErrorCode.NONE
    assert coord.fetch_error("a", 2) is ErrorCode.STALE_MEMBER_EPOCH
    assert coord.fetch_error("b", 1) is ErrorCode.UNKNOWN_MEMBER_ID


def test_the_group_state_uses_consumer_group_describes_names() -> None:
    coord, _ = _coordinator()
    assert coord.state == "Empty"
    _join(coord, "a")
    assert coord.state == "Stable"
    _join(coord, "b")  # its share is still a's: b waits for the release
    assert coord.state == "Reconciling"
    coord.group_epoch += 1
    assert coord.state == "Assigning"


def test_a_staged_target_is_what_members_move_to() -> None:
    coord, cluster = _coordinator()
    _join(coord, "a")
    topic = cluster.get("t")
    assert topic is not None
    kept = TopicIdPartition(topic.topic_id, 0)
    coord.group_epoch += 1
    coord.assignment_epoch = coord.group_epoch
    coord.replace_targets({"a": frozenset({kept})})
    answer = coord.heartbeat(_request("a", 1, None), 0.0)
    assert answer.assignment == {topic.topic_id: [0]}
    assert coord.members["a"].pending_revocation == {TopicIdPartition(topic.topic_id, 1)}


def test_the_fakes_sweep_runs_the_models_session_timer() -> None:
    topics = Topics()
    topics.create("t", 2)
    group = ConsumerGroup(
        GROUP,
        heartbeat_interval_ms=100,
        session_timeout_ms=1000,
        topics=topics,
        lock=threading.RLock(),
        now=10.0,
    )
    joined = group.heartbeat(_request("a", 0, frozenset()), "client-a", 10.0)
    assert joined.member_epoch == 1
    assert group.members["a"].client_id == "client-a"
    assert group.expire(10.9) == []
    assert group.expire(11.0) == ["a"]
    assert group.members == {}


def _classic_join(member_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=GROUP,
        member_id=member_id,
        instance_id=None,
        session_timeout_ms=1000,
        rebalance_timeout_ms=5000,
        protocols=(JoinProtocol("range", MemberSubscription(frozenset({"t"}))),),
    )


def test_the_fakes_classic_group_makes_kafkas_member_ids_and_expires_on_its_sweep() -> None:
    group = ClassicGroup(GROUP, lock=threading.RLock(), now=10.0)
    answers: list[JoinGroupResponse] = []
    group.join(_classic_join(""), "app", 10.0, answers.append)
    assert answers[-1].error_code == int(ErrorCode.MEMBER_ID_REQUIRED)
    member_id = answers[-1].member_id
    assert member_id.startswith("app-")
    group.join(_classic_join(member_id), "app", 10.0, answers.append)
    assert (answers[-1].error_code, answers[-1].generation_id) == (0, 1)
    assert group.state is ClassicGroupState.COMPLETING_REBALANCE
    # Waiting for the leader's assignment: a commit at the generation is refused.
    assert group.commit_error(member_id, None, 1) == int(ErrorCode.REBALANCE_IN_PROGRESS)
    assert group.commit_error(member_id, None, 0) == int(ErrorCode.ILLEGAL_GENERATION)
    synced: list[SyncGroupResponse] = []
    group.sync(
        SyncGroupRequest(GROUP, 1, member_id, None, "range", ((member_id, ClassicAssignment()),)),
        10.1,
        synced.append,
    )
    assert synced[-1].error_code == 0
    assert group.commit_error(member_id, None, 1) == 0
    assert group.expire(11.0) == []
    assert group.expire(11.1) == [member_id]
    assert group.members == {}
    # An empty group takes commits from outside the group only.
    assert group.commit_error("", None, -1) == 0
