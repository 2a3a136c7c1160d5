"""Rack-aware placement (KIP-881) against the Java client's own rack test scenarios.

The cluster layout is the one the Java tests build: brokers ``0..n-1`` with the
given racks, partition i of the k-th topic (in declaration order) replicated on
brokers ``(i + j + offset) % n`` for ``j < replication factor``, where offset is
the number of partitions of the topics declared before it. Members are
``consumer0``, ``consumer1``, ... with one rack each.
"""

from __future__ import annotations

import pytest

from kgroup.assignors import (
    Cluster,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    GroupSubscription,
    RangeAssignor,
    StickyAssignor,
    Subscription,
)
from kgroup.types import TopicPartition

ALL = ["t1", "t2", "t3"]
SOME = ["t1", "t3"]
UNEVEN = {"t1": 6, "t2": 7, "t3": 2}
EVEN = {"t1": 5, "t2": 5, "t3": 5}


def racks(n: int) -> list[str | None]:
    return ["abcdef"[i % 6] for i in range(n)]


def layout(topics: dict[str, int], replication: int, broker_racks: list[str | None]) -> Cluster:
    replica_racks: dict[TopicPartition, frozenset[str]] = {}
    offset = 0
    for topic, count in topics.items():
        for p in range(count):
            brokers = ((p + j + offset) % len(broker_racks) for j in range(replication))
            replica_racks[TopicPartition(topic, p)] = frozenset(
                r for r in (broker_racks[b] for b in brokers) if r is not None
            )
        offset += count
    return Cluster(topics, replica_racks)


def run(
    assignor: ConsumerPartitionAssignor,
    cluster: Cluster,
    member_racks: list[str | None],
    member_topics: list[list[str]],
    owned: list[str] | None = None,
) -> list[str]:
    subs = {}
    for i, (rack, topics) in enumerate(zip(member_racks, member_topics, strict=True)):
        mine: tuple[TopicPartition, ...] = ()
        if owned:
            mine = tuple(
                TopicPartition(t, int(p))
                for t, _, p in (x.rpartition("-") for x in owned[i].split(", "))
            )
        subs[f"consumer{i}"] = Subscription(
            tuple(topics), owned_partitions=mine, generation_id=-1, rack_id=rack
        )
    result = assignor.assign(cluster, GroupSubscription(subs))
    return [
        ", ".join(sorted(str(tp) for tp in result.partitions(f"consumer{i}")))
        for i in range(len(member_racks))
    ]


@pytest.mark.parametrize(
    ("topics", "replication", "brokers", "members", "expected"),
    [
        (
            UNEVEN,
            1,
            racks(3),
            [ALL, ALL, ALL],
            [
                "t1-0, t1-3, t2-0, t2-3, t2-6",
                "t1-1, t1-4, t2-1, t2-4, t3-0",
                "t1-2, t1-5, t2-2, t2-5, t3-1",
            ],
        ),
        (
            UNEVEN,
            2,
            racks(3),
            [ALL, ALL, ALL],
            [
                "t1-0, t1-2, t2-0, t2-2, t2-3, t3-1",
                "t1-1, t1-3, t2-1, t2-4, t3-0",
                "t1-4, t1-5, t2-5, t2-6",
            ],
        ),
        (
            UNEVEN,
            3,
            racks(2),
            [ALL, ALL, ALL],
            [
                "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0",
                "t1-2, t1-3, t2-3, t2-4, t3-1",
                "t1-4, t1-5, t2-5, t2-6",
            ],
        ),
        (
            UNEVEN,
            1,
            racks(3),
            [ALL, ALL, SOME],
            [
                "t1-0, t1-3, t2-0, t2-2, t2-3, t2-6",
                "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0",
                "t1-2, t1-5, t3-1",
            ],
        ),
        (
            UNEVEN,
            2,
            racks(3),
            [ALL, ALL, SOME],
            [
                "t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1",
                "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0",
                "t1-4, t1-5",
            ],
        ),
        # Co-partitioned topics keep partition p together even against rack matching.
        (
            EVEN,
            1,
            racks(3),
            [ALL, ALL, ALL],
            [
                "t1-0, t1-1, t2-0, t2-1, t3-0, t3-1",
                "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3",
                "t1-4, t2-4, t3-4",
            ],
        ),
        (
            EVEN,
            2,
            racks(3),
            [ALL, ALL, SOME],
            [
                "t1-2, t2-0, t2-1, t2-3, t3-2",
                "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3",
                "t1-1, t1-4, t3-1, t3-4",
            ],
        ),
    ],
)
def test_range_matches_java(
    topics: dict[str, int],
    replication: int,
    brokers: list[str | None],
    members: list[list[str]],
    expected: list[str],
) -> None:
    cluster = layout(topics, replication, brokers)
    assert run(RangeAssignor(), cluster, racks(3), members) == expected


RACK_ALIGNED = [
    "t1-0, t1-3, t2-0, t2-3, t2-6",
    "t1-1, t1-4, t2-1, t2-4, t3-0",
    "t1-2, t1-5, t2-2, t2-5, t3-1",
]


@pytest.mark.parametrize("assignor_class", [StickyAssignor, CooperativeStickyAssignor])
@pytest.mark.parametrize(("replication", "brokers"), [(1, racks(3)), (2, racks(3)), (3, racks(2))])
def test_sticky_is_rack_aligned_and_then_stable(
    assignor_class: type[ConsumerPartitionAssignor],
    replication: int,
    brokers: list[str | None],
) -> None:
    cluster = layout(UNEVEN, replication, brokers)
    members = [ALL, ALL, ALL]
    assert run(assignor_class(), cluster, racks(3), members) == RACK_ALIGNED
    # Owning exactly that, nothing moves.
    assert run(assignor_class(), cluster, racks(3), members, RACK_ALIGNED) == RACK_ALIGNED


MISALIGNED = [
    "t1-0, t1-1, t1-2, t1-3, t1-4",
    "t1-5, t2-0, t2-1, t2-2, t2-3",
    "t2-4, t2-5, t2-6, t3-0, t3-1",
]


def test_misaligned_owned_partitions_are_moved_to_their_racks() -> None:
    cluster = layout(UNEVEN, 1, racks(3))
    # Eager: the final rack-aligned assignment at once.
    assert run(StickyAssignor(), cluster, racks(3), [ALL, ALL, ALL], MISALIGNED) == RACK_ALIGNED
    # Cooperative: only what stays put now; the moved partitions come next round.
    assert run(CooperativeStickyAssignor(), cluster, racks(3), [ALL, ALL, ALL], MISALIGNED) == [
        "t1-0, t1-3",
        "t2-1",
        "t2-5, t3-1",
    ]
