"""The consumer-protocol (KIP-848) assignors against the outcomes the broker's own tests expect.

Each case restates a scenario from Apache Kafka's group-coordinator assignor tests
(UniformAssignor builders, RangeAssignor) and checks our result is the broker's.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence

import pytest

from kgroup.assignors import (
    AssignmentSpec,
    AssignorError,
    MemberSpec,
    PartitionAssignor,
    RangeServerAssignor,
    SubscriptionType,
    TargetAssignment,
    TopicMetadata,
    UniformAssignor,
)
from kgroup.assignors.java_order import java_string_hash, java_uuid_hash
from kgroup.types import TopicIdPartition


def kafka_uuid(text: str) -> uuid.UUID:
    """A Kafka Uuid from its base64 form, as ``Uuid.fromString`` reads it."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
T4 = kafka_uuid("T4-Tw9fVTLCz5HbPp6YQsa")

Owned = Mapping[uuid.UUID, Sequence[int]]


def member(
    topics: set[uuid.UUID], owned: Owned | None = None, instance: str | None = None
) -> MemberSpec:
    return MemberSpec(
        frozenset(topics), {t: frozenset(ps) for t, ps in (owned or {}).items()}, instance
    )


def topics(**counts: int) -> dict[uuid.UUID, TopicMetadata]:
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return {ids[name]: TopicMetadata(name, n) for name, n in counts.items()}


def plain(result: TargetAssignment) -> dict[str, dict[uuid.UUID, set[int]]]:
    return {m: {t: set(ps) for t, ps in a.partitions.items()} for m, a in result.members.items()}


def test_java_hashes_match_known_values() -> None:
    # "A".hashCode() == 65 and "member".hashCode() == -1077769574 in Java.
    assert java_string_hash("A") == 65
    assert java_string_hash("member") == (-1077769574) & 0xFFFFFFFF
    # Uuid(0, 1).hashCode() == 1 (xor of the halves, folded).
    assert java_uuid_hash(uuid.UUID(int=1)) == 1


def test_both_satisfy_the_protocol() -> None:
    for assignor in (UniformAssignor(), RangeServerAssignor()):
        assert isinstance(assignor, PartitionAssignor)
        assert assignor.metadata() is None
        assert assignor.min_version <= assignor.max_version
    assert UniformAssignor().name == "uniform"
    assert RangeServerAssignor().name == "range"


class TestUniformHomogeneous:
    def test_no_subscription_gives_empty_result(self) -> None:
        spec = AssignmentSpec({"A": member(set())}, topics(t1=3))
        assert UniformAssignor().assign(spec).members == {}

    def test_unknown_topic_raises(self) -> None:
        spec = AssignmentSpec({"A": member({T2})}, topics(t1=3))
        with pytest.raises(AssignorError) as info:
            UniformAssignor().assign(spec)
        assert info.value.assignor == "uniform"

    def test_first_assignment_two_members_two_topics(self) -> None:
        # The broker's hash-set order puts topic 3 before topic 1, so A (with the
        # extra quota) takes both partitions of topic 3 and partition 0 of topic 1.
        spec = AssignmentSpec({"A": member({T1, T3}), "B": member({T1, T3})}, topics(t1=3, t3=2))
        assert plain(UniformAssignor().assign(spec)) == {
            "A": {T1: {0}, T3: {0, 1}},
            "B": {T1: {1, 2}},
        }

    def test_more_members_than_partitions(self) -> None:
        spec = AssignmentSpec(
            {"A": member({T3}), "B": member({T3}), "C": member({T3})}, topics(t3=2)
        )
        assert plain(UniformAssignor().assign(spec)) == {"A": {T3: {0}}, "B": {T3: {1}}, "C": {}}

    def test_unbalanced_previous_assignment_is_evened_out(self) -> None:
        spec = AssignmentSpec(
            {
                "A": member({T1, T2}, {T1: [0, 1], T2: [0, 1]}),
                "B": member({T1, T2}, {T1: [2], T2: [2]}),
            },
            topics(t1=3, t2=3),
        )
        assert plain(UniformAssignor().assign(spec)) == {
            "A": {T1: {0, 1}, T2: {0}},
            "B": {T1: {2}, T2: {1, 2}},
        }

    def test_partitions_added(self) -> None:
        spec = AssignmentSpec(
            {
                "A": member({T1, T2}, {T1: [0, 2], T2: [0]}),
                "B": member({T1, T2}, {T1: [1], T2: [1, 2]}),
            },
            topics(t1=6, t2=5),
        )
        assert plain(UniformAssignor().assign(spec)) == {
            "A": {T1: {0, 2, 3}, T2: {0, 3, 4}},
            "B": {T1: {1, 4, 5}, T2: {1, 2}},
        }

    def test_member_added(self) -> None:
        spec = AssignmentSpec(
            {
                "A": member({T1, T2}, {T1: [0, 2], T2: [0]}),
                "B": member({T1, T2}, {T1: [1], T2: [1, 2]}),
                "C": member({T1, T2}),
            },
            topics(t1=3, t2=3),
        )
        result = plain(UniformAssignor().assign(spec))
        assert result == {"A": {T1: {0, 2}}, "B": {T1: {1}, T2: {1}}, "C": {T2: {0, 2}}}


class TestUniformHeterogeneous:
    def test_first_assignment(self) -> None:
        spec = AssignmentSpec({"A": member({T1, T3}), "B": member({T3})}, topics(t1=3, t3=6))
        assert plain(UniformAssignor().assign(spec)) == {
            "A": {T1: {0, 1, 2}, T3: {4}},
            "B": {T3: {0, 1, 2, 3, 5}},
        }

    def test_more_members_than_partitions(self) -> None:
        spec = AssignmentSpec(
            {"A": member({T3}), "B": member({T3}), "C": member({T1})}, topics(t3=1, t1=2)
        )
        assert plain(UniformAssignor().assign(spec)) == {
            "A": {T3: {0}},
            "B": {},
            "C": {T1: {0, 1}},
        }

    def test_unbalanced_previous_assignment(self) -> None:
        spec = AssignmentSpec(
            {
                "A": member({T1}, {T1: [0, 1, 2]}),
                "B": member({T1, T2}, {T1: [3], T2: [0]}),
                "C": member({T1, T2, T3}, {T1: [4, 5], T2: [1, 2, 3], T3: [0, 1, 2, 3]}),
            },
            topics(t1=6, t2=4, t3=4),
        )
        assert plain(UniformAssignor().assign(spec)) == {
            "A": {T1: {0, 1, 2, 5}},
            "B": {T1: {3}, T2: {0, 1, 2, 3}},
            "C": {T1: {4}, T3: {0, 1, 2, 3}},
        }

    def test_partitions_added(self) -> None:
        spec = AssignmentSpec(
            {
                "A": member({T1, T3}, {T1: [0, 1, 2, 3], T3: [0, 1]}),
                "B": member({T1, T2, T3, T4}, {T2: [0, 1, 2], T4: [0, 1, 2]}),
            },
            topics(t1=6, t2=5, t3=3, t4=3),
        )
        assert plain(UniformAssignor().assign(spec)) == {
            "A": {T1: {0, 1, 2, 3, 4, 5}, T3: {0, 1, 2}},
            "B": {T2: {0, 1, 2, 3, 4}, T4: {0, 1, 2}},
        }

    def test_member_and_partitions_added(self) -> None:
        spec = AssignmentSpec(
            {
                "A": member({T1}, {T1: [0, 2], T2: [0]}),
                "B": member({T1, T2}, {T1: [1], T2: [1, 2]}),
                "C": member({T1, T2}),
            },
            topics(t1=6, t2=7),
        )
        assert plain(UniformAssignor().assign(spec)) == {
            "A": {T1: {0, 2, 3, 4, 5}},
            "B": {T1: {1}, T2: {1, 2, 6}},
            "C": {T2: {0, 3, 4, 5}},
        }

    def test_member_removed(self) -> None:
        spec = AssignmentSpec(
            {
                "A": member({T1, T3}, {T1: [0, 1, 2], T3: [0, 1]}),
                "B": member({T2}, {T2: [3, 4, 5, 6]}),
            },
            topics(t1=3, t2=8, t3=3),
        )
        assert plain(UniformAssignor().assign(spec)) == {
            "A": {T1: {0, 1, 2}, T3: {0, 1, 2}},
            "B": {T2: {0, 1, 2, 3, 4, 5, 6, 7}},
        }

    def test_subscription_removed(self) -> None:
        spec = AssignmentSpec(
            {
                "A": member({T1}, {T1: [0, 2], T2: [1, 3]}),
                "B": member({T1, T2}, {T1: [1], T2: [0, 2, 4]}),
            },
            topics(t1=3, t2=5),
        )
        assert plain(UniformAssignor().assign(spec)) == {
            "A": {T1: {0, 1, 2}},
            "B": {T2: {0, 1, 2, 3, 4}},
        }

    def test_partitions_run_out(self) -> None:
        spec = AssignmentSpec(
            {
                "A": member({T1, T2, T3}, {T1: [0, 1], T2: [0, 1], T3: [0, 1]}),
                "B": member({T1, T2, T3}),
            },
            topics(t1=2, t2=2, t3=2),
            declared_subscription_type=SubscriptionType.HETEROGENEOUS,
        )
        assert plain(UniformAssignor().assign(spec)) == {
            "A": {T2: {0}, T3: {0, 1}},
            "B": {T1: {0, 1}, T2: {1}},
        }

    def test_member_without_subscription_gets_nothing(self) -> None:
        spec = AssignmentSpec({"A": member({T1}), "B": member(set())}, topics(t1=3))
        assert plain(UniformAssignor().assign(spec)) == {"A": {T1: {0, 1, 2}}, "B": {}}


class TestRangeServer:
    def test_co_partitioned_ranges(self) -> None:
        spec = AssignmentSpec({"M0": member({T1, T2}), "M1": member({T1, T2})}, topics(t1=3, t2=3))
        assert plain(RangeServerAssignor().assign(spec)) == {
            "M0": {T1: {0, 1}, T2: {0, 1}},
            "M1": {T1: {2}, T2: {2}},
        }

    def test_static_members_first_by_instance_id(self) -> None:
        spec = AssignmentSpec(
            {
                "a": member({T1}),
                "z": member({T1}, instance="i1"),
                "y": member({T1}, instance="i0"),
            },
            topics(t1=5),
        )
        assert plain(RangeServerAssignor().assign(spec)) == {
            "y": {T1: {0, 1}},
            "z": {T1: {2, 3}},
            "a": {T1: {4}},
        }

    def test_heterogeneous_counts_subscribers_per_topic(self) -> None:
        spec = AssignmentSpec(
            {"A": member({T1, T2}), "B": member({T1}), "C": member({T2})}, topics(t1=3, t2=3)
        )
        assert plain(RangeServerAssignor().assign(spec)) == {
            "A": {T1: {0, 1}, T2: {0, 1}},
            "B": {T1: {2}},
            "C": {T2: {2}},
        }

    def test_more_members_than_partitions(self) -> None:
        spec = AssignmentSpec(
            {"A": member({T1}), "B": member({T1}), "C": member({T1})}, topics(t1=2)
        )
        result = RangeServerAssignor().assign(spec)
        assert plain(result) == {"A": {T1: {0}}, "B": {T1: {1}}, "C": {}}
        assert result.partitions("A") == {TopicIdPartition(T1, 0)}

    def test_unknown_topic_raises(self) -> None:
        spec = AssignmentSpec({"A": member({T4})}, topics(t1=2))
        with pytest.raises(AssignorError):
            RangeServerAssignor().assign(spec)
