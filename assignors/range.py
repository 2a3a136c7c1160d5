"""The classic ``range`` assignor, as the Java client's ``RangeAssignor`` behaves."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kgroup.assignors._common import (
    assignment_of_sorted,
    member_rack,
    sorted_members,
    subscribers_by_topic,
    topic_partitions,
    use_rack_aware,
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

__all__ = ["RangeAssignor"]


class _TopicState:
    """One topic's progress: who may still take how many, and what is left."""

    def __init__(
        self,
        topic: str,
        count: int,
        members: Sequence[str],
        racks: dict[str, str | None],
        cluster: Cluster,
    ) -> None:
        self.topic = topic
        self.count = count
        self.members = tuple(members)
        self.racks = racks
        self.cluster = cluster
        # Kept in partition order; a dict is an ordered set with O(1) removal.
        self.unassigned: dict[TopicPartition, None] = {
            TopicPartition(topic, p): None for p in range(count)
        }
        self.assigned_count = dict.fromkeys(self.members, 0)
        self.per_member = count // len(self.members) if self.members else 0
        self.extra_left = count % len(self.members) if self.members else 0
        self.rack_aware = use_rack_aware((racks[m] for m in self.members), self.unassigned, cluster)

    def racks_match(self, member: str, tp: TopicPartition) -> bool:
        # A member without a rack matches every partition (as in the Java client).
        rack = self.racks[member]
        return rack is None or rack in self.cluster.racks_of(tp)

    def max_assignable(self, member: str) -> int:
        limit = self.per_member + (1 if self.extra_left > 0 else 0)
        return max(0, limit - self.assigned_count[member])

    def give(
        self, member: str, tps: list[TopicPartition], out: dict[str, list[TopicPartition]]
    ) -> None:
        out[member].extend(tps)
        self.assigned_count[member] += len(tps)
        if self.assigned_count[member] > self.per_member:
            self.extra_left -= 1
        for tp in tps:
            del self.unassigned[tp]


def _assign_ranges(
    state: _TopicState,
    may_assign: Callable[[str, TopicPartition], bool],
    out: dict[str, list[TopicPartition]],
) -> None:
    for member in state.members:
        if not state.unassigned:
            break
        limit = state.max_assignable(member)
        chosen: list[TopicPartition] = []
        for tp in state.unassigned:
            if len(chosen) >= limit:
                break
            if may_assign(member, tp):
                chosen.append(tp)
        if chosen:
            state.give(member, chosen, out)


def _assign_co_partitioned(
    members: Sequence[str],
    count: int,
    states: Sequence[_TopicState],
    out: dict[str, list[TopicPartition]],
) -> None:
    # Topics with the same members and the same partition count: partition p of
    # every topic goes to the same member, the first whose rack matches p of all
    # of them, so that joins across the topics stay local.
    remaining = list(members)
    for p in range(count):
        for member in remaining:
            if all(
                s.racks_match(member, TopicPartition(s.topic, p)) and s.max_assignable(member) > 0
                for s in states
            ):
                for s in states:
                    s.give(member, [TopicPartition(s.topic, p)], out)
                if not any(s.max_assignable(member) > 0 for s in states):
                    remaining.remove(member)
                break
        if not remaining:
            break


class RangeAssignor:
    """``range``: per topic, contiguous ranges of partitions in member order.

    For each topic, the subscribed members are ordered (static members by
    ``group.instance.id`` first, then the rest by member id); with P partitions and
    N members the first ``P % N`` members get ``P // N + 1`` partitions and the
    others ``P // N``, each a contiguous range. Two members, three partitions:
    ``[0, 1]`` and ``[2]``.

    Rack-aware (KIP-881): when members have racks and partition replicas are not
    on the same racks everywhere, each member first takes, within its quota,
    partitions with a replica in its rack; topics with the same members and
    partition count keep partition p of each topic on the same member. The
    per-topic counts stay exactly those of the plain range assignment.

    Eager only, as in the Java client (range is not sticky).
    """

    name = "range"
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        """Range sends no user data."""
        return None

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:
        """Range keeps no state."""

    def assign(self, cluster: Cluster, subscriptions: GroupSubscription) -> GroupAssignment:
        """Compute the range assignment; see the class docstring."""
        subs = subscriptions.subscriptions
        racks = {m: member_rack(s) for m, s in subs.items()}
        members_of = subscribers_by_topic(subs, sorted_members(subscriptions))
        topics = [t for t in sorted(members_of) if cluster.partitions_for(t)]
        out: dict[str, list[TopicPartition]] = {m: [] for m in subs}
        # Without racks on both sides no topic can be rack-aware (see use_rack_aware):
        # skip building the per-partition state that only rack-aware placement needs.
        if cluster.replica_racks and any(racks.values()):
            states = [
                _TopicState(t, cluster.partitions_for(t) or 0, members_of[t], racks, cluster)
                for t in topics
            ]
            if any(s.rack_aware for s in states):
                _assign_rack_aware(states, out)
                return GroupAssignment.of(out)
        for topic in topics:
            _deal_ranges(topic, cluster.partitions_for(topic) or 0, members_of[topic], out)
        # Topics in name order, each member's range in partition order: already sorted.
        return assignment_of_sorted(out)


def _deal_ranges(
    topic: str, count: int, members: Sequence[str], out: dict[str, list[TopicPartition]]
) -> None:
    """Plain range: the first ``count % n`` members get one partition more than the rest."""
    per_member, extra = divmod(count, len(members))
    partitions = topic_partitions(topic, count)
    start = 0
    for i in range(min(len(members), count)):
        end = start + per_member + (1 if i < extra else 0)
        out[members[i]] += partitions[start:end]
        start = end


def _assign_rack_aware(states: Sequence[_TopicState], out: dict[str, list[TopicPartition]]) -> None:
    groups: dict[tuple[tuple[str, ...], int], list[_TopicState]] = {}
    for s in states:
        groups.setdefault((s.members, s.count), []).append(s)
    for (group_members, count), group in groups.items():
        if len(group) > 1:
            _assign_co_partitioned(group_members, count, group, out)
        elif group[0].rack_aware:
            _assign_ranges(group[0], group[0].racks_match, out)
    for s in states:
        _assign_ranges(s, lambda _m, _tp: True, out)
