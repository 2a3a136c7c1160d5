"""Helpers shared by the classic built-in assignors."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, repeat

from kgroup.assignors.classic import (
    Assignment,
    Cluster,
    GroupAssignment,
    GroupSubscription,
    Subscription,
)
from kgroup.types import TopicPartition

__all__ = [
    "assignment_of_sorted",
    "forget_interned",
    "make_assignment",
    "make_partitions",
    "member_order_key",
    "member_rack",
    "rack_aware_of",
    "sorted_members",
    "subscribers_by_topic",
    "topic_partitions",
    "use_rack_aware",
]

# Building a TopicPartition through its constructor costs a frozen dataclass's
# __init__: a Python-level call that sets each field through object.__setattr__.
# An assignor makes up to one per partition of the group per call (10,000 and
# more), and that alone took longer than kafka-python's whole range assignment,
# which never builds per-partition objects. So partitions are made here by
# allocating the instances and filling the two slots with the slot descriptors,
# in C-level loops (map), which is about four times faster. This is only sound
# while TopicPartition is a plain slotted record (no __post_init__ validation,
# exactly the fields topic and partition); otherwise fall back to the
# constructor. tests/unit/test_assignors_classic.py checks that the fast path is
# active and builds values equal to the constructor's.


def _slot_setter(name: str) -> Callable[[TopicPartition, object], None] | None:
    descriptor = vars(TopicPartition).get(name)
    if descriptor is None or type(descriptor).__name__ != "member_descriptor":
        return None
    setter: Callable[[TopicPartition, object], None] = descriptor.__set__
    return setter


_new: Callable[[type[TopicPartition]], TopicPartition] = object.__new__
_set_topic = _slot_setter("topic")
_set_partition = _slot_setter("partition")
FAST_PARTITIONS = (
    getattr(TopicPartition, "__slots__", None) == ("topic", "partition")
    and not hasattr(TopicPartition, "__post_init__")
    and _set_topic is not None
    and _set_partition is not None
)


def make_partitions(topic: str, numbers: Sequence[int]) -> list[TopicPartition]:
    """``[TopicPartition(topic, p) for p in numbers]``, built fast (see above)."""
    if not FAST_PARTITIONS or _set_topic is None or _set_partition is None:
        return [TopicPartition(topic, p) for p in numbers]
    n = len(numbers)
    made = list(map(_new, repeat(TopicPartition, n)))
    deque(map(_set_topic, made, repeat(topic, n)), maxlen=0)
    deque(map(_set_partition, made, numbers), maxlen=0)
    return made


# Interned partitions: topic -> (TopicPartition(topic, 0), ..., TopicPartition(topic, n - 1)).
# A leader assigns the same topics rebalance after rebalance, and even built fast
# (make_partitions) the partition values of a large topic set cost more than
# kafka-python's whole range assignment, which hands out plain ints. The values
# are immutable, so sharing them across calls (and GroupAssignments) is safe.
# Bounded: past 100,000 partitions in all (about 8 MB) the cache starts over.


class _Interned:
    """The interned partitions of each topic, up to ``limit`` partitions in all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.by_topic: dict[str, tuple[TopicPartition, ...]] = {}
        self.count = 0
        self.lock = threading.Lock()  # leaders of several groups may share a process

    def get(self, topic: str, count: int) -> tuple[TopicPartition, ...]:
        cached = self.by_topic.get(topic)
        if cached is not None and len(cached) >= count:
            return cached if len(cached) == count else cached[:count]
        made = tuple(make_partitions(topic, range(count)))
        with self.lock:
            if self.count + count > self.limit:
                self.by_topic.clear()
                self.count = 0
            if count <= self.limit:
                previous = self.by_topic.get(topic)
                self.by_topic[topic] = made
                self.count += count - (len(previous) if previous is not None else 0)
        return made


_INTERNED = _Interned(limit=100_000)


def forget_interned() -> None:
    """Drop the interned partitions (see :mod:`kgroup.assignors._caches`)."""
    with _INTERNED.lock:
        _INTERNED.by_topic.clear()
        _INTERNED.count = 0


def topic_partitions(topic: str, count: int) -> tuple[TopicPartition, ...]:
    """``TopicPartition(topic, p)`` for p in ``range(count)``, interned (see above)."""
    return _INTERNED.get(topic, count)


def _assignment_setters() -> tuple[Callable[[Assignment, object], None], ...] | None:
    # As for TopicPartition (above): Assignment's __post_init__ only turns the
    # partitions into a tuple, which the assignors hand over already.
    if getattr(Assignment, "__slots__", None) != ("partitions", "user_data"):
        return None
    setters = []
    for name in ("partitions", "user_data"):
        descriptor = vars(Assignment).get(name)
        if descriptor is None or type(descriptor).__name__ != "member_descriptor":
            return None
        setters.append(descriptor.__set__)
    return tuple(setters)


_ASSIGNMENT_SETTERS = _assignment_setters()


def make_assignment(partitions: tuple[TopicPartition, ...]) -> Assignment:
    """``Assignment(partitions)`` (no user data), built without the dataclass's __init__."""
    if _ASSIGNMENT_SETTERS is None:
        return Assignment(partitions)
    made: Assignment = object.__new__(Assignment)
    set_partitions, set_user_data = _ASSIGNMENT_SETTERS
    set_partitions(made, partitions)
    set_user_data(made, None)
    return made


def assignment_of_sorted(partitions: Mapping[str, Sequence[TopicPartition]]) -> GroupAssignment:
    """:meth:`GroupAssignment.of` for lists the assignor already built in sorted order.

    Sorting TopicPartitions compares them through the dataclass's Python-level
    ``__lt__``; an assignor that produces each member's partitions in order
    skips that (tens of thousands of comparisons on a large group).
    """
    return GroupAssignment({m: make_assignment(tuple(ps)) for m, ps in partitions.items()})


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
    return rack_aware_of(member_racks, (cluster.racks_of(tp) for tp in partitions))


def rack_aware_of(
    member_racks: Iterable[str | None], partition_racks: Iterable[frozenset[str]]
) -> bool:
    """:func:`use_rack_aware` given the replica racks of each partition."""
    consumer_racks = {r for r in member_racks if r}
    if not consumer_racks:
        return False
    racks_seen: set[frozenset[str]] = set()
    all_partition_racks: set[str] = set()
    for racks in partition_racks:
        racks_seen.add(racks)
        all_partition_racks.update(racks)
    if consumer_racks.isdisjoint(all_partition_racks):
        return False
    return any(racks != all_partition_racks for racks in racks_seen)


def subscribers_by_topic(
    subs: Mapping[str, Subscription], order: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    """Topic -> its subscribers, in ``order`` (the Java client's member order).

    Members are grouped by subscription first: groups mostly share one, and then
    every topic gets the same tuple (the same object: callers may cache by
    ``id``) without a per-member, per-topic loop.
    """
    groups: dict[tuple[str, ...], list[str]] = {}
    for m in order:
        groups.setdefault(subs[m].topics, []).append(m)
    lists_of: dict[str, list[list[str]]] = {}
    for topics, members in groups.items():
        for t in set(topics):
            lists_of.setdefault(t, []).append(members)
    rank = {m: i for i, m in enumerate(order)}
    shared: dict[int, tuple[str, ...]] = {}
    result: dict[str, tuple[str, ...]] = {}
    for t, lists in lists_of.items():
        if len(lists) == 1:
            if id(lists[0]) not in shared:
                shared[id(lists[0])] = tuple(lists[0])
            result[t] = shared[id(lists[0])]
        else:
            result[t] = tuple(sorted(chain.from_iterable(lists), key=rank.__getitem__))
    return result
