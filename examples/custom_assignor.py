"""A custom classic-protocol assignor that uses subscription user data.

Each member advertises how many worker threads it runs (its *capacity*) in the
user data of its subscription; the leader deals partitions in proportion to the
members' capacities, keeping partitions with their previous owners where it can.

It is a plain class with the five members of
:class:`kgroup.assignors.ConsumerPartitionAssignor`, no inheritance needed. Run it:

    python examples/custom_assignor.py

It computes an assignment for a sample group, checks it with the same validation
the group leader runs before SyncGroup, and prints it.
"""

from __future__ import annotations

import argparse
import struct

from kgroup.assignors import (
    Assignment,
    Cluster,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupMetadata,
    GroupSubscription,
    RebalanceProtocol,
    Subscription,
    resolve_assignors,
    validate_assignment,
)
from kgroup.types import TopicPartition

_VERSION = 1
_FORMAT = struct.Struct(">hi")  # user-data version, capacity


class CapacityAssignor:
    """``capacity``: partitions in proportion to each member's advertised capacity.

    Eager only: it may move a partition straight from one member to another.
    """

    name = "capacity"
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def __init__(self, capacity: int = 1) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.assigned: tuple[TopicPartition, ...] = ()

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        """This member's capacity, versioned so the format can evolve."""
        return _FORMAT.pack(_VERSION, self.capacity)

    @staticmethod
    def capacity_of(subscription: Subscription) -> int:
        """A member's capacity; members that sent none (or garbage) count as 1."""
        data = subscription.user_data
        if data is None or len(data) < _FORMAT.size:
            return 1
        version, capacity = _FORMAT.unpack_from(data)
        return capacity if version >= _VERSION and capacity > 0 else 1

    def assign(self, cluster: Cluster, subscriptions: GroupSubscription) -> GroupAssignment:
        """Largest-remainder shares of each topic, previous owners first (from owned partitions)."""
        subs = subscriptions.subscriptions
        result: dict[str, list[TopicPartition]] = {m: [] for m in subs}
        for topic in sorted({t for s in subs.values() for t in s.topics}):
            count = cluster.partitions_for(topic)
            members = sorted(m for m, s in subs.items() if topic in s.topics)
            if not count or not members:
                continue
            shares = self._shares(count, {m: self.capacity_of(subs[m]) for m in members})
            free = [TopicPartition(topic, p) for p in range(count)]
            # Keep what members owned, up to their share.
            for m in members:
                for tp in subs[m].owned_partitions:
                    if tp in free and _count(result[m], topic) < shares[m]:
                        result[m].append(tp)
                        free.remove(tp)
            # Fill the rest in member order.
            for m in members:
                while _count(result[m], topic) < shares[m]:
                    result[m].append(free.pop(0))
        return GroupAssignment.of(result)

    @staticmethod
    def _shares(count: int, capacities: dict[str, int]) -> dict[str, int]:
        total = sum(capacities.values())
        exact = {m: count * c / total for m, c in capacities.items()}
        shares = {m: int(x) for m, x in exact.items()}
        # Hand out what rounding down left over, largest fractions first.
        leftover = count - sum(shares.values())
        for m in sorted(exact, key=lambda m: (shares[m] - exact[m], m))[:leftover]:
            shares[m] += 1
        return shares

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:
        """Remember what this member got (an application could resize its pool here)."""
        self.assigned = assignment.partitions


def _count(partitions: list[TopicPartition], topic: str) -> int:
    return sum(tp.topic == topic for tp in partitions)


def main() -> None:
    # No broker: the assignor is pure code, so it can be tried (and tested) offline.
    argparse.ArgumentParser(
        description="A custom classic-protocol assignor, run offline on a sample group "
        "(no broker needed; examples/classic_consumer.py --capacity uses it in a real group)."
    ).parse_args()
    # Configure the member: the custom assignor first, a built-in as fallback.
    mine = CapacityAssignor(capacity=4)
    assignors = resolve_assignors([mine, "range"])
    assert isinstance(assignors[0], ConsumerPartitionAssignor)
    print("partition.assignment.strategy ->", [a.name for a in assignors])

    # What the leader would receive from JoinGroup for a sample group.
    cluster = Cluster({"orders": 12, "payments": 6})
    topics = ("orders", "payments")
    big = CapacityAssignor(capacity=4).subscription_user_data(frozenset(topics))
    small = CapacityAssignor(capacity=2).subscription_user_data(frozenset(topics))
    group = GroupSubscription(
        {
            "consumer-a": Subscription(topics, user_data=big),
            "consumer-b": Subscription(topics, user_data=small),
            "consumer-c": Subscription(("orders",), user_data=small),
        }
    )

    assignment = mine.assign(cluster, group)
    # The leader's check before SyncGroup: raises InvalidAssignmentError on a bug.
    validate_assignment(mine.name, cluster, group, assignment, RebalanceProtocol.EAGER)

    for member in assignment:
        capacity = CapacityAssignor.capacity_of(group[member])
        partitions = ", ".join(str(tp) for tp in assignment.partitions(member))
        print(f"{member} (capacity {capacity}): {partitions}")

    # Each member learns its own assignment after SyncGroup.
    mine.on_assignment(assignment["consumer-a"], GroupMetadata("sample-group", 1, "consumer-a"))
    print("consumer-a now owns", len(mine.assigned), "partitions")


if __name__ == "__main__":
    main()
