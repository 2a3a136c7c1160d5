"""Helpers shared by the classic built-in assignors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kgroup.assignors.classic import Cluster, GroupSubscription, Subscription
from kgroup.types import TopicPartition

__all__ = [
    "member_order_key",
    "member_rack",
    "sorted_members",
    "use_rack_aware",
]


def member_order_key(member_id: str, subscription: Subscription) -> tuple[int, str]:
    """The order the Java client gives members: static members first by instance id, then ids."""
    if subscription.group_instance_id is not None:
        return (0, subscription.group_instance_id)
    return (1, member_id)


def sorted_members(subscriptions: GroupSubscription) -> list[str]:
    """Member ids in the Java client's member order (see :func:`member_order_key`)."""
    subs = subscriptions.subscriptions
    return sorted(subs, key=lambda m: member_order_key(m, subs[m]))


def member_rack(subscription: Subscription) -> str | None:
    """The member's rack; an empty ``client.rack`` counts as none, as in the Java client."""
    return subscription.rack_id or None


def use_rack_aware(
    member_racks: Iterable[str | None],
    partitions: Iterable[TopicPartition],
    cluster: Cluster,
) -> bool:
    """Whether rack-aware placement (KIP-881) applies to ``partitions``.

    As in the Java client: only if some member has a rack that holds a replica of
    some partition, and the partitions do not all have replicas on the same racks
    (if every partition is on every rack, matching racks changes nothing).
    """
    consumer_racks = {r for r in member_racks if r}
    if not consumer_racks:
        return False
    racks_seen: set[frozenset[str]] = set()
    all_partition_racks: set[str] = set()
    for tp in partitions:
        racks = cluster.racks_of(tp)
        racks_seen.add(racks)
        all_partition_racks.update(racks)
    if consumer_racks.isdisjoint(all_partition_racks):
        return False
    return any(racks != all_partition_racks for racks in racks_seen)


def partitions_of(topics: Iterable[str], counts: Mapping[str, int]) -> list[TopicPartition]:
    """Every partition of the known ``topics``, sorted by topic then partition."""
    return [
        TopicPartition(t, p) for t in sorted(set(topics)) if t in counts for p in range(counts[t])
    ]
