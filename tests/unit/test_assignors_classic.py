"""Example-based tests of the classic assignors, resolve_assignors and validate_assignment."""

from __future__ import annotations

import pickle

import pytest

from kgroup.assignors import (
    Assignment,
    AssignmentViolation,
    Cluster,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    GroupAssignment,
    GroupMetadata,
    GroupSubscription,
    InvalidAssignmentError,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    resolve_assignors,
    validate_assignment,
)
from kgroup.assignors.sticky import (
    decode_cooperative_user_data,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from kgroup.errors import ConfigError, KgroupError
from kgroup.types import TopicPartition


def tp(text: str) -> TopicPartition:
    topic, _, partition = text.rpartition("-")
    return TopicPartition(topic, int(partition))


def tps(*texts: str) -> tuple[TopicPartition, ...]:
    return tuple(tp(t) for t in texts)


def group(**topics: list[str]) -> GroupSubscription:
    return GroupSubscription({m: Subscription(tuple(ts)) for m, ts in topics.items()})


def parts(result: GroupAssignment) -> dict[str, list[str]]:
    return {m: [str(p) for p in result.partitions(m)] for m in result}


class TestRange:
    def test_two_members_three_partitions(self) -> None:
        result = RangeAssignor().assign(Cluster({"t": 3}), group(c1=["t"], c2=["t"]))
        assert parts(result) == {"c1": ["t-0", "t-1"], "c2": ["t-2"]}

    def test_two_topics_ranges_per_topic(self) -> None:
        # The Java client's RangeAssignorTest: t1 and t2 of 3 partitions, two members.
        result = RangeAssignor().assign(
            Cluster({"t1": 3, "t2": 3}), group(c1=["t1", "t2"], c2=["t1", "t2"])
        )
        assert parts(result) == {"c1": ["t1-0", "t1-1", "t2-0", "t2-1"], "c2": ["t1-2", "t2-2"]}

    def test_static_members_ordered_by_instance_id(self) -> None:
        subs = GroupSubscription(
            {
                "a": Subscription(("t",), group_instance_id="i2"),
                "b": Subscription(("t",), group_instance_id="i1"),
            }
        )
        assert parts(RangeAssignor().assign(Cluster({"t": 3}), subs)) == {
            "b": ["t-0", "t-1"],
            "a": ["t-2"],
        }

    def test_unknown_topic_is_skipped(self) -> None:
        result = RangeAssignor().assign(Cluster({"t": 1}), group(c1=["t", "gone"]))
        assert parts(result) == {"c1": ["t-0"]}

    def test_rack_aware_prefers_local_replicas_without_changing_counts(self) -> None:
        # Partition p has its only replica in rack "r{p % 2}"; c1 is in r1, c2 in r0.
        racks = {TopicPartition("t", p): frozenset({f"r{p % 2}"}) for p in range(4)}
        subs = GroupSubscription(
            {"c1": Subscription(("t",), rack_id="r1"), "c2": Subscription(("t",), rack_id="r0")}
        )
        result = RangeAssignor().assign(Cluster({"t": 4}, racks), subs)
        assert parts(result) == {"c1": ["t-1", "t-3"], "c2": ["t-0", "t-2"]}


class TestRoundRobin:
    def test_deals_in_turn_across_topics(self) -> None:
        result = RoundRobinAssignor().assign(
            Cluster({"t1": 3, "t2": 3}), group(c1=["t1", "t2"], c2=["t1", "t2"])
        )
        assert parts(result) == {"c1": ["t1-0", "t1-2", "t2-1"], "c2": ["t1-1", "t2-0", "t2-2"]}

    def test_skips_members_not_subscribed(self) -> None:
        result = RoundRobinAssignor().assign(
            Cluster({"t1": 1, "t2": 2}), group(c0=["t1"], c1=["t1", "t2"], c2=["t1"])
        )
        assert parts(result) == {"c0": ["t1-0"], "c1": ["t2-0", "t2-1"], "c2": []}


def owning(
    topics: list[str], owned: tuple[TopicPartition, ...] = (), generation: int = 1
) -> Subscription:
    return Subscription(tuple(topics), owned_partitions=owned, generation_id=generation)


T12 = ["topic1", "topic2"]


class TestStickyLikeJava:
    """Scenarios and outcomes of the Java client's AbstractStickyAssignorTest.

    Member ids are the Java tests' (``consumer1``...): with all subscriptions equal,
    the Java leader visits members in its HashMap order, which decides who keeps
    an extra partition, and we reproduce that order.
    """

    def test_fresh_assignment_deals_partitions_in_turn(self) -> None:
        subs = GroupSubscription({"consumer1": owning(T12), "consumer2": owning(T12)})
        result = parts(StickyAssignor().assign(Cluster({"topic1": 3, "topic2": 4}), subs))
        assert result == {
            "consumer1": ["topic1-0", "topic1-2", "topic2-1", "topic2-3"],
            "consumer2": ["topic1-1", "topic2-0", "topic2-2"],
        }

    def test_member_owning_min_quota_gets_the_extra_partition(self) -> None:
        subs = GroupSubscription(
            {
                "consumer1": owning(T12, tps("topic1-0", "topic2-1")),
                "consumer2": owning(T12, tps("topic1-1", "topic2-2")),
            }
        )
        result = parts(StickyAssignor().assign(Cluster({"topic1": 2, "topic2": 3}), subs))
        assert result == {
            "consumer1": ["topic1-0", "topic2-0", "topic2-1"],
            "consumer2": ["topic1-1", "topic2-2"],
        }

    def test_more_members_own_max_quota_than_allowed(self) -> None:
        subs = GroupSubscription(
            {
                "consumer1": owning(T12, tps("topic1-0", "topic2-0")),
                "consumer2": owning(T12, tps("topic1-1", "topic2-1")),
                "consumer3": owning(T12),
            }
        )
        cluster = Cluster({"topic1": 2, "topic2": 2})
        assert parts(StickyAssignor().assign(cluster, subs)) == {
            "consumer1": ["topic1-0"],
            "consumer2": ["topic1-1", "topic2-1"],
            "consumer3": ["topic2-0"],
        }
        # Cooperative: topic2-0 moves from consumer1 to consumer3, so it waits a round.
        assert parts(CooperativeStickyAssignor().assign(cluster, subs))["consumer3"] == []

    def test_members_under_min_quota_are_filled_first(self) -> None:
        subs = GroupSubscription(
            {
                "consumer1": owning(T12, tps("topic1-0")),
                "consumer2": owning(T12, tps("topic1-1")),
                "consumer3": owning(T12),
            }
        )
        result = parts(StickyAssignor().assign(Cluster({"topic1": 2, "topic2": 3}), subs))
        assert result == {
            "consumer1": ["topic1-0", "topic2-1"],
            "consumer2": ["topic1-1", "topic2-2"],
            "consumer3": ["topic2-0"],
        }

    def test_add_then_remove_two_members(self) -> None:
        cluster = Cluster({"topic1": 3, "topic2": 4})
        c1 = tps("topic1-0", "topic1-2", "topic2-1", "topic2-3")
        c2 = tps("topic1-1", "topic2-0", "topic2-2")
        grown = GroupSubscription(
            {
                "consumer1": owning(T12, c1),
                "consumer2": owning(T12, c2),
                "consumer3": owning(T12),
                "consumer4": owning(T12),
            }
        )
        result = StickyAssignor().assign(cluster, grown)
        assert parts(result) == {
            "consumer1": ["topic1-0", "topic2-1"],
            "consumer2": ["topic1-1", "topic2-0"],
            "consumer3": ["topic1-2", "topic2-3"],
            "consumer4": ["topic2-2"],
        }
        shrunk = GroupSubscription(
            {
                "consumer3": owning(T12, result.partitions("consumer3")),
                "consumer4": owning(T12, result.partitions("consumer4")),
            }
        )
        assert parts(StickyAssignor().assign(cluster, shrunk)) == {
            "consumer3": ["topic1-0", "topic1-2", "topic2-1", "topic2-3"],
            "consumer4": ["topic1-1", "topic2-0", "topic2-2"],
        }

    def test_claims_from_a_stale_generation_lose(self) -> None:
        owned = tps("topic-0", "topic-2", "topic2-1")
        subs = GroupSubscription(
            {
                "consumer1": owning(["topic", "topic2"], owned, generation=10),
                "consumer2": owning(["topic", "topic2"], owned, generation=9),
            }
        )
        result = parts(StickyAssignor().assign(Cluster({"topic": 3, "topic2": 3}), subs))
        assert result == {
            "consumer1": ["topic-0", "topic-2", "topic2-1"],
            "consumer2": ["topic-1", "topic2-0", "topic2-2"],
        }

    def test_claims_in_the_same_generation_cancel_out(self) -> None:
        subs = GroupSubscription(
            {
                "consumer1": owning(["topic"], tps("topic-0", "topic-1")),
                "consumer2": owning(["topic"], tps("topic-0", "topic-2")),
                "consumer3": owning(["topic"]),
            }
        )
        cluster = Cluster({"topic": 4})
        assert parts(StickyAssignor().assign(cluster, subs)) == {
            "consumer1": ["topic-1", "topic-3"],
            "consumer2": ["topic-2"],
            "consumer3": ["topic-0"],
        }
        # Cooperative: both claimants must revoke topic-0 before anyone gets it.
        assert parts(CooperativeStickyAssignor().assign(cluster, subs))["consumer3"] == []

    def test_user_data_round_trips_in_java_format(self) -> None:
        data = encode_sticky_user_data(tps("a-1", "a-0", "b-2"), 7)
        # int32 topics=2 | "a" | [0, 1] | "b" | [2] | generation 7
        assert data.hex() == (
            "00000002000161000000020000000000000001000162000000010000000200000007"
        )
        decoded = decode_sticky_user_data(data)
        assert decoded.partitions == tps("a-0", "a-1", "b-2")
        assert decoded.generation == 7
        assert decode_sticky_user_data(data[:-4]).generation is None  # v0: no generation
        assert decode_sticky_user_data(b"\x00").partitions == ()

    def test_kafka_python_user_data_is_read_too(self) -> None:
        # kafka-python 3 writes the Java body behind a 2-byte version (here 1).
        java = encode_sticky_user_data(tps("a-0", "a-1", "b-2"), 7)
        decoded = decode_sticky_user_data(b"\x00\x01" + java)
        assert decoded.partitions == tps("a-0", "a-1", "b-2")
        assert decoded.generation == 7

    def test_eager_sticky_uses_previous_assignment_from_user_data(self) -> None:
        member = StickyAssignor()
        assert member.subscription_user_data(frozenset({"t"})) is None
        member.on_assignment(Assignment(tps("t-2", "t-3")), GroupMetadata("g", 5, "c1"))
        user_data = member.subscription_user_data(frozenset({"t"}))
        subs = GroupSubscription(
            {"c1": Subscription(("t",), user_data=user_data), "c2": Subscription(("t",))}
        )
        assert parts(StickyAssignor().assign(Cluster({"t": 4}), subs))["c1"] == ["t-2", "t-3"]

    def test_rack_aware_places_partitions_in_the_members_rack(self) -> None:
        # Partition p's replicas are in rack r{p % 3}; one member per rack.
        racks = {TopicPartition("t", p): frozenset({f"r{p % 3}"}) for p in range(6)}
        subs = GroupSubscription({f"c{i}": Subscription(("t",), rack_id=f"r{i}") for i in range(3)})
        result = parts(StickyAssignor().assign(Cluster({"t": 6}, racks), subs))
        assert result == {"c0": ["t-0", "t-3"], "c1": ["t-1", "t-4"], "c2": ["t-2", "t-5"]}


class TestCooperativeSticky:
    def test_supports_cooperative_first_then_eager(self) -> None:
        assert CooperativeStickyAssignor().supported_protocols == (
            RebalanceProtocol.COOPERATIVE,
            RebalanceProtocol.EAGER,
        )

    def test_partition_moving_to_new_member_is_withheld(self) -> None:
        subs = GroupSubscription(
            {
                "c1": Subscription(("t",), owned_partitions=tps("t-0", "t-1", "t-2", "t-3")),
                "c2": Subscription(("t",)),
            }
        )
        cluster = Cluster({"t": 4})
        result = CooperativeStickyAssignor().assign(cluster, subs)
        assert parts(result) == {"c1": ["t-0", "t-1"], "c2": []}
        validate_assignment(
            "cooperative-sticky", cluster, subs, result, RebalanceProtocol.COOPERATIVE
        )
        # Second round: c1 revoked t-2 and t-3, and now they go to c2.
        subs2 = GroupSubscription(
            {
                "c1": Subscription(("t",), owned_partitions=tps("t-0", "t-1")),
                "c2": Subscription(("t",)),
            }
        )
        assert parts(CooperativeStickyAssignor().assign(cluster, subs2))["c2"] == ["t-2", "t-3"]

    def test_partition_claimed_twice_in_one_generation_waits_for_both(self) -> None:
        subs = GroupSubscription(
            {
                "c1": owning(["t"], tps("t-0", "t-1")),
                "c2": owning(["t"], tps("t-0", "t-2")),
            }
        )
        cluster = Cluster({"t": 3})
        eager = parts(StickyAssignor().assign(cluster, subs))
        assert "t-0" in eager["c1"] + eager["c2"]
        cooperative = parts(CooperativeStickyAssignor().assign(cluster, subs))
        assert cooperative == {"c1": ["t-1"], "c2": ["t-2"]}

    def test_stale_claim_does_not_hold_back_the_rightful_owner(self) -> None:
        subs = GroupSubscription(
            {
                "c1": owning(["t"], tps("t-0"), generation=5),
                "c2": owning(["t"], tps("t-0", "t-1"), generation=4),
            }
        )
        result = parts(CooperativeStickyAssignor().assign(Cluster({"t": 2}), subs))
        assert result == {"c1": ["t-0"], "c2": ["t-1"]}

    def test_generation_travels_in_user_data(self) -> None:
        member = CooperativeStickyAssignor()
        assert decode_cooperative_user_data(member.subscription_user_data(frozenset())) == -1
        member.on_assignment(Assignment(()), GroupMetadata("g", 9, "m"))
        assert decode_cooperative_user_data(member.subscription_user_data(frozenset())) == 9


class TestResolve:
    def test_comma_separated_names_in_order(self) -> None:
        resolved = resolve_assignors(" cooperative-sticky, range ")
        assert [a.name for a in resolved] == ["cooperative-sticky", "range"]

    def test_names_instances_and_classes(self) -> None:
        mine = RoundRobinAssignor()
        resolved = resolve_assignors(["sticky", mine, RangeAssignor])
        assert [a.name for a in resolved] == ["sticky", "roundrobin", "range"]
        assert resolved[1] is mine
        assert all(isinstance(a, ConsumerPartitionAssignor) for a in resolved)

    def test_java_class_names_are_accepted(self) -> None:
        resolved = resolve_assignors("org.apache.kafka.clients.consumer.RangeAssignor")
        assert [a.name for a in resolved] == ["range"]

    def test_unknown_name_is_a_config_error_listing_valid_names(self) -> None:
        with pytest.raises(ConfigError) as info:
            resolve_assignors("range,stiky")
        message = str(info.value)
        assert "'stiky'" in message
        for name in ("range", "roundrobin", "sticky", "cooperative-sticky"):
            assert name in message

    def test_non_assignor_object_and_empty_spec_are_rejected(self) -> None:
        with pytest.raises(ConfigError):
            resolve_assignors([object()])  # type: ignore[list-item]
        with pytest.raises(ConfigError):
            resolve_assignors("")
        with pytest.raises(ConfigError, match="unique"):
            resolve_assignors("range,range")

    def test_class_needing_arguments_is_a_config_error(self) -> None:
        class NeedsArgs(RangeAssignor):
            def __init__(self, weight: int) -> None:
                self.weight = weight

        with pytest.raises(ConfigError, match="NeedsArgs"):
            resolve_assignors([NeedsArgs])


class TestValidate:
    cluster = Cluster({"t": 2, "u": 1})

    def check(
        self,
        assignment: dict[str, tuple[TopicPartition, ...]],
        subs: GroupSubscription | None = None,
        protocol: RebalanceProtocol = RebalanceProtocol.EAGER,
    ) -> InvalidAssignmentError:
        subs = subs or group(a=["t", "u"], b=["t"])
        with pytest.raises(InvalidAssignmentError) as info:
            validate_assignment(
                "mine", self.cluster, subs, GroupAssignment.of(assignment), protocol
            )
        assert info.value.assignor == "mine"
        assert isinstance(info.value, KgroupError)
        return info.value

    def test_valid_assignment_passes(self) -> None:
        validate_assignment(
            "mine",
            self.cluster,
            group(a=["t", "u"], b=["t"]),
            GroupAssignment.of({"a": tps("t-0", "u-0"), "b": tps("t-1")}),
            RebalanceProtocol.EAGER,
        )

    def test_missing_partition(self) -> None:
        error = self.check({"a": tps("t-0"), "b": tps("t-1")})
        assert error.violation is AssignmentViolation.MISSING_PARTITION
        assert "u-0" in str(error)

    def test_duplicate_partition(self) -> None:
        error = self.check({"a": tps("t-0", "t-1", "u-0"), "b": tps("t-1")})
        assert error.violation is AssignmentViolation.DUPLICATE_PARTITION
        assert "t-1" in error.detail
        assert "'a'" in error.detail
        assert "'b'" in error.detail

    def test_unknown_member(self) -> None:
        error = self.check({"a": tps("t-0", "u-0"), "b": tps("t-1"), "ghost": ()})
        assert error.violation is AssignmentViolation.UNKNOWN_MEMBER
        assert "ghost" in error.detail

    def test_unsubscribed_topic(self) -> None:
        error = self.check({"a": tps("t-0"), "b": tps("t-1", "u-0")})
        assert error.violation is AssignmentViolation.UNSUBSCRIBED_TOPIC
        assert "u-0" in error.detail

    def test_unknown_partition(self) -> None:
        error = self.check({"a": tps("t-0", "u-0"), "b": tps("t-1", "t-7")})
        assert error.violation is AssignmentViolation.UNKNOWN_PARTITION
        assert "t-7" in error.detail

    def test_direct_transfer_under_cooperative(self) -> None:
        subs = GroupSubscription(
            {"a": Subscription(("t", "u"), owned_partitions=tps("t-1")), "b": Subscription(("t",))}
        )
        error = self.check(
            {"a": tps("t-0", "u-0"), "b": tps("t-1")}, subs, RebalanceProtocol.COOPERATIVE
        )
        assert error.violation is AssignmentViolation.DIRECT_TRANSFER
        assert "t-1" in error.detail
        # The same assignment is fine under eager: a revoked everything already.
        validate_assignment(
            "mine",
            self.cluster,
            subs,
            GroupAssignment.of({"a": tps("t-0", "u-0"), "b": tps("t-1")}),
            RebalanceProtocol.EAGER,
        )

    def test_error_pickles_with_its_fields(self) -> None:
        error = self.check({"a": tps("t-0"), "b": tps("t-1")})
        copy = pickle.loads(pickle.dumps(error))
        assert (copy.assignor, copy.violation, copy.detail) == (
            error.assignor,
            error.violation,
            error.detail,
        )
