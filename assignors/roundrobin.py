"""The classic ``roundrobin`` assignor, as the Java client's ``RoundRobinAssignor`` behaves."""

from __future__ import annotations

from bisect import bisect_left

from kgroup.assignors._common import (
    assignment_of_sorted,
    sorted_members,
    subscribers_by_topic,
    topic_partitions,
)
from kgroup.assignors.classic import (
    Assignment,
    Cluster,
    GroupAssignment,
    GroupMetadata,
    GroupSubscription,
    RebalanceProtocol,
)
from kgroup.types import TopicPartition

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor:
    """``roundrobin``: all partitions of all subscribed topics dealt out in turn.

    Partitions are sorted by topic then partition; members are ordered like the
    Java client's (static members by instance id first, then member ids) and
    visited in a circle; a member not subscribed to a partition's topic is
    skipped. With identical subscriptions member counts differ by at most one.
    Eager only (not sticky).
    """

    name = "roundrobin"
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        """Round-robin sends no user data."""
        return None

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:
        """Round-robin keeps no state."""

    def assign(self, cluster: Cluster, subscriptions: GroupSubscription) -> GroupAssignment:
        """Compute the round-robin assignment; see the class docstring."""
        subs = subscriptions.subscriptions
        members = sorted_members(subscriptions)
        out: dict[str, list[TopicPartition]] = {m: [] for m in members}
        if not members:
            return GroupAssignment.of(out)
        n = len(members)
        rank = {m: i for i, m in enumerate(members)}
        counts = cluster.partition_counts
        subscribers = subscribers_by_topic(subs, members)
        seats: dict[int, list[int]] = {}  # id of a subscriber tuple -> their places in the circle
        position = 0
        for topic in sorted(subscribers):
            count = counts.get(topic, 0)
            if not count:
                continue
            topic_subscribers = subscribers[topic]
            places = seats.get(id(topic_subscribers))
            if places is None:
                places = [rank[m] for m in topic_subscribers]
                seats[id(topic_subscribers)] = places
            # Walking the circle from `position`, skipping members that do not
            # subscribe to the topic, visits the subscribers in circle order from
            # the first one at or after `position`: partition k of the topic goes
            # to the (first + k)-th subscriber, modulo their number.
            e = len(places)
            first = bisect_left(places, position) % e
            partitions = topic_partitions(topic, count)
            for k in range(min(e, count)):
                out[members[places[(first + k) % e]]] += partitions[k::e]
            position = (places[(first + count - 1) % e] + 1) % n
        # Topics in name order, each member's share in partition order: already sorted.
        return assignment_of_sorted(out)
