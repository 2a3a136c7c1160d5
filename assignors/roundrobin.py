"""The classic ``roundrobin`` assignor, as the Java client's ``RoundRobinAssignor`` behaves."""

from __future__ import annotations

from kgroup.assignors._common import partitions_of, sorted_members
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
        topic_sets = {m: frozenset(subs[m].topics) for m in members}
        all_topics = set().union(*topic_sets.values()) if topic_sets else set()
        out: dict[str, list[TopicPartition]] = {m: [] for m in members}
        if not members:
            return GroupAssignment.of(out)
        position = 0
        n = len(members)
        for tp in partitions_of(all_topics, cluster.partition_counts):
            # Advance the circle to the next member subscribed to this topic; at
            # least one is, since the topic came from some member's subscription.
            while tp.topic not in topic_sets[members[position]]:
                position = (position + 1) % n
            out[members[position]].append(tp)
            position = (position + 1) % n
        return GroupAssignment.of(out)
