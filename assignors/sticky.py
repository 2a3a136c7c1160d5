"""The classic ``sticky`` and ``cooperative-sticky`` assignors.

Both compute the same assignment, with the promises of the Java client's
``AbstractStickyAssignor``:

1. Balanced. With identical subscriptions, member partition counts differ by at
   most one. With differing subscriptions, a partition moves to a less loaded
   member that may take it while that narrows a gap of two or more (as balanced
   as that local search gets; the Java client promises no more either).
2. Sticky. Every member keeps the partitions it owned, up to its share; only
   partitions that balance requires to move, move. With an unchanged group and
   metadata (and no rack-aware placement), nothing moves.
3. Rack-aware (KIP-881), when members have racks and partitions are not on the
   same racks everywhere: as in the Java client, locality comes before
   stickiness. A member in a rack gives up owned partitions with no replica in
   its rack (unless no subscriber of the topic is in such a rack: then no
   placement is local, and moving the partition would gain nothing), and
   partitions to place go first to members in a rack holding a replica, within
   the same quotas, so balance is never traded for locality.

Identical subscriptions (the common case) run the Java client's "constrained"
algorithm step by step, visiting members in the order the Java leader's hash
map of member ids does, so a kgroup leader computes what a Java leader would
(up to the order of member ids that share a hash bucket, which follows the
order of the subscriptions given, and claims conflicting in other ways than
the Java tests exercise). Differing subscriptions run kgroup's own
algorithm (fewest candidates first to the least loaded, then balancing moves),
which keeps the promises above but may place moved partitions differently from
the Java client's.

Who owned what: two sources, as in the Java client.

- ``sticky`` (eager) reads the previous assignment and generation from its own
  user data, in the Java client's ``StickyAssignor`` user-data format (v1: the
  previous assignment and the generation; v0 without the generation), because
  eager members revoke everything before rejoining and so report no owned
  partitions. A subscription without such user data falls back to the owned
  partitions and generation of the subscription (consumer protocol v1/v2).
- ``cooperative-sticky`` reads the owned partitions of the subscription, and the
  generation from the subscription (v2+) or else from its user data (a 4-byte
  generation, the Java client's format).

When two members claim a partition, the claim from the higher generation wins;
claims from the same generation cancel out and the partition is reassigned. A
claim with no generation counts as generation -1.
"""

from __future__ import annotations

import heapq
import struct
from collections import Counter, deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kgroup.assignors._common import member_rack, sorted_members, use_rack_aware
from kgroup.assignors.classic import (
    Assignment,
    Cluster,
    GroupAssignment,
    GroupMetadata,
    GroupSubscription,
    RebalanceProtocol,
    Subscription,
)
from kgroup.assignors.java_order import grown_capacity, hash_order, java_string_hash
from kgroup.types import TopicPartition

__all__ = [
    "DEFAULT_GENERATION",
    "CooperativeStickyAssignor",
    "MemberData",
    "StickyAssignor",
    "decode_cooperative_user_data",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
    "sticky_assign",
]

DEFAULT_GENERATION = -1
"""The generation of a claim that carries none (as the Java client's ``DEFAULT_GENERATION``)."""

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class MemberData:
    """What a member claims to own, and the generation of that claim (None if unknown)."""

    partitions: tuple[TopicPartition, ...]
    generation: int | None = None


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int | None) -> bytes:
    """The Java ``StickyAssignor`` user data: v1 if ``generation`` is given, else v0.

    Layout (Kafka's schema encoding, big endian): an int32 count of topics, each
    an int16-length UTF-8 name and an int32 count of int32 partitions; then, in
    v1, the int32 generation.
    """
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_I32.pack(len(by_topic)))
    for topic, parts in by_topic.items():
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(parts))
        out += b"".join(_I32.pack(p) for p in parts)
    if generation is not None:
        out += _I32.pack(generation)
    return bytes(out)


def _parse_sticky(data: bytes, start: int) -> MemberData | None:
    """Parse the sticky user-data body at ``start``; None unless it uses up exactly all bytes."""
    view = memoryview(data)
    pos = start

    def take(n: int) -> memoryview:
        nonlocal pos
        if pos + n > len(view):
            raise ValueError("truncated")
        chunk = view[pos : pos + n]
        pos += n
        return chunk

    try:
        partitions: list[TopicPartition] = []
        (topics,) = _I32.unpack(take(4))
        for _ in range(max(topics, 0)):
            (length,) = _I16.unpack(take(2))
            if length < 0:
                raise ValueError("null topic name")
            topic = bytes(take(length)).decode()
            (count,) = _I32.unpack(take(4))
            if count > 0:
                numbers = struct.unpack(f">{count}i", take(4 * count))
                partitions.extend(TopicPartition(topic, p) for p in numbers)
        remaining = len(view) - pos
        if remaining == 0:
            return MemberData(tuple(partitions), None)  # v0: no generation
        if remaining == 4:
            return MemberData(tuple(partitions), _I32.unpack(take(4))[0])
        return None
    except (ValueError, UnicodeDecodeError, struct.error):
        return None


def decode_sticky_user_data(data: bytes) -> MemberData:
    """Read sticky user data: the Java client's v1 or v0 layout, or kafka-python 3's.

    kafka-python 3 writes the same body behind a 2-byte version; both are read so
    that kgroup, Java and kafka-python members can share a group (kgroup writes
    the Java layout). Bytes that parse as neither mean "no previous assignment"
    with the default generation, as in the Java client.
    """
    parsed = _parse_sticky(data, 0)
    if parsed is None and len(data) >= 2 and _I16.unpack_from(data)[0] in (0, 1):
        parsed = _parse_sticky(data, 2)
    return parsed if parsed is not None else MemberData((), DEFAULT_GENERATION)


def encode_cooperative_user_data(generation: int) -> bytes:
    """The Java ``CooperativeStickyAssignor`` user data: the generation as an int32."""
    return _I32.pack(generation)


def decode_cooperative_user_data(data: bytes | None) -> int | None:
    """The generation in :func:`encode_cooperative_user_data` bytes.

    None if there are no bytes; the default generation if they do not parse.
    """
    if data is None:
        return None
    if len(data) < 4:
        return DEFAULT_GENERATION
    return int(_I32.unpack_from(data)[0])


class _LoadIndex:
    """Least-loaded member lookups over fixed member sets, with changing loads.

    Each member set has a heap of (load, rank, member); an entry is current only
    if its load equals the member's load now. Every load change pushes a fresh
    entry into each heap the member is in, and stale entries are dropped when
    they reach the top, so a lookup costs O(log n) amortised.
    """

    def __init__(self, load: dict[str, int], rank: Mapping[str, int]) -> None:
        self.load = load
        self.rank = rank
        self.heaps: dict[Hashable, list[tuple[int, int, str]]] = {}
        self.keys_of: dict[str, list[Hashable]] = {}

    def add(self, key: Hashable, members: Iterable[str]) -> None:
        if key in self.heaps:
            return
        heap = [(self.load[m], self.rank[m], m) for m in members]
        heapq.heapify(heap)
        self.heaps[key] = heap
        for _, _, m in heap:
            self.keys_of.setdefault(m, []).append(key)

    def least(self, key: Hashable) -> str | None:
        heap = self.heaps.get(key)
        if not heap:
            return None
        while heap[0][0] != self.load[heap[0][2]]:
            heapq.heappop(heap)
        return heap[0][2]

    def change(self, member: str, delta: int) -> None:
        value = self.load[member] + delta
        self.load[member] = value
        entry = (value, self.rank[member], member)
        for key in self.keys_of.get(member, ()):
            heapq.heappush(self.heaps[key], entry)


def _resolve_owners(
    members: Sequence[str],
    member_data: Mapping[str, MemberData],
    topics_of: Mapping[str, frozenset[str]],
    counts: Mapping[str, int],
) -> dict[str, list[TopicPartition]]:
    """Valid claims per member: subscribed, existing, and not beaten by another claim."""
    best: dict[TopicPartition, tuple[int, str | None]] = {}
    for member in members:
        data = member_data.get(member)
        if data is None:
            continue
        generation = DEFAULT_GENERATION if data.generation is None else data.generation
        topics = topics_of[member]
        for tp in set(data.partitions):
            if tp.topic not in topics or not 0 <= tp.partition < counts.get(tp.topic, 0):
                continue
            current = best.get(tp)
            if current is None or generation > current[0]:
                best[tp] = (generation, member)
            elif generation == current[0] and current[1] != member:
                # Two members claim the partition in the same generation: neither
                # claim can be trusted, so the partition is reassigned.
                best[tp] = (generation, None)
    owned: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp, (_, owner) in best.items():
        if owner is not None:
            owned[owner].append(tp)
    for parts in owned.values():
        parts.sort()
    return owned


def sticky_assign(
    cluster: Cluster,
    subscriptions: GroupSubscription,
    member_data: Mapping[str, MemberData],
) -> dict[str, list[TopicPartition]]:
    """The sticky assignment of ``subscriptions`` given what members claim to own.

    This is the algorithm behind :class:`StickyAssignor` and
    :class:`CooperativeStickyAssignor` (see the module docstring for what it
    promises). Returns member id -> sorted partitions, one entry per member.
    """
    return _sticky(cluster, subscriptions, member_data)[0]


def _sticky(
    cluster: Cluster,
    subscriptions: GroupSubscription,
    member_data: Mapping[str, MemberData],
) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str]]:
    """:func:`sticky_assign`, plus who rightfully owns each claimed partition (by generation)."""
    subs = subscriptions.subscriptions
    members = sorted_members(subscriptions)
    if not members:
        return {}, {}
    counts = cluster.partition_counts
    # Members mostly share subscriptions: compute each distinct one once.
    known_topics: dict[tuple[str, ...], frozenset[str]] = {}
    topics_of: dict[str, frozenset[str]] = {}
    for m in members:
        topics = subs[m].topics
        if topics not in known_topics:
            known_topics[topics] = frozenset(t for t in topics if counts.get(t))
        topics_of[m] = known_topics[topics]
    owned = _resolve_owners(members, member_data, topics_of, counts)
    rightful = {tp: m for m, parts in owned.items() for tp in parts}
    racks = {m: member_rack(subs[m]) for m in members}
    all_topics = sorted(set().union(*topics_of.values()))
    all_partitions = [TopicPartition(t, p) for t in all_topics for p in range(counts[t])]
    rack_aware = use_rack_aware(racks.values(), all_partitions, cluster)

    if rack_aware:
        # As in the Java client, a member in a rack gives up owned partitions with
        # no replica in its rack: locality wins over stickiness once racks are set.
        # Unlike the Java client, only if some subscriber of the topic is in a rack
        # with a replica: otherwise no placement is local, and releasing the
        # partition would only move it between non-local members, round after round.
        local_racks_of_topic: dict[str, set[str]] = {}
        for m in members:
            rack = racks[m]
            if rack is not None:
                for t in topics_of[m]:
                    local_racks_of_topic.setdefault(t, set()).add(rack)
        for m in members:
            rack = racks[m]
            if rack is not None:
                owned[m] = [
                    tp
                    for tp in owned[m]
                    if rack in cluster.racks_of(tp)
                    or local_racks_of_topic.get(tp.topic, set()).isdisjoint(cluster.racks_of(tp))
                ]

    if len(set(topics_of.values())) == 1:
        # The Java leader visits members in the order of its HashMap of member ids.
        java_order = hash_order(list(subs), java_string_hash, grown_capacity(len(subs)))
        result = _assign_homogeneous(
            java_order,
            all_partitions=all_partitions,
            owned=owned,
            racks=racks,
            rack_aware=rack_aware,
            cluster=cluster,
        )
    else:
        result = _assign_heterogeneous(
            members,
            topics_of=topics_of,
            all_topics=all_topics,
            counts=counts,
            owned=owned,
            racks=racks,
            rack_aware=rack_aware,
            cluster=cluster,
        )
    return {m: sorted(result[m]) for m in subs}, rightful


def _assign_homogeneous(
    members: Sequence[str],
    *,
    all_partitions: Sequence[TopicPartition],
    owned: Mapping[str, list[TopicPartition]],
    racks: Mapping[str, str | None],
    rack_aware: bool,
    cluster: Cluster,
) -> dict[str, list[TopicPartition]]:
    """The Java client's constrained assignment (all members subscribe to the same topics).

    ``members`` must be in the order the Java leader iterates them (its hash map's).
    """
    total = len(all_partitions)
    min_quota, expected_over = divmod(total, len(members))
    max_quota = min_quota + (1 if expected_over else 0)
    over = 0  # members holding max_quota > min_quota; at most expected_over
    under: list[str] = []  # members below min_quota
    at_min: list[str] = []  # members at min_quota that may still take one more
    result: dict[str, list[TopicPartition]] = {m: [] for m in members}

    # 1. Keep owned partitions up to the member's share, in partition-then-topic order.
    for m in members:
        claims = sorted(owned[m], key=lambda tp: (tp.partition, tp.topic))
        if len(claims) < min_quota:
            result[m].extend(claims)
            under.append(m)
        elif len(claims) >= max_quota and over < expected_over:
            over += 1
            if over == expected_over:
                at_min.clear()
            result[m].extend(claims[:max_quota])
        else:
            result[m].extend(claims[:min_quota])
            if over < expected_over:
                at_min.append(m)

    taken = {tp for parts in result.values() for tp in parts}
    unassigned = [tp for tp in all_partitions if tp not in taken]
    under.sort()
    at_min.sort()

    # 2. Rack-aware: fill members from partitions with a replica in their rack,
    #    rarest racks first, up to the quotas.
    if rack_aware:
        members_in_rack: dict[str, int] = {}
        for m in members:
            rack = racks[m]
            if rack is not None:
                members_in_rack[rack] = members_in_rack.get(rack, 0) + 1
        unassigned.sort(key=lambda tp: sum(members_in_rack.get(r, 0) for r in cluster.racks_of(tp)))

        # How many members of each rack each list holds: a partition whose racks
        # have none is skipped at once instead of by scanning the whole list.
        under_racks = Counter(racks[m] for m in under)
        at_min_racks = Counter(racks[m] for m in at_min)

        def next_in_rack(
            tp: TopicPartition, candidates: list[str], present: Counter[str | None], first: int
        ) -> int:
            replica_racks = cluster.racks_of(tp)
            if not any(present[r] for r in replica_racks):
                return -1
            n = len(candidates)
            for i in range(n):
                index = (first + i) % n
                if racks[candidates[index]] in replica_racks:
                    return index
            return -1

        left: list[TopicPartition] = []
        next_under = 0
        for tp in unassigned:
            chosen: str | None = None
            index = next_in_rack(tp, under, under_racks, next_under)
            if index >= 0:
                chosen = under[index]
                count = len(result[chosen]) + 1
                if count >= min_quota:
                    del under[index]
                    under_racks[racks[chosen]] -= 1
                    if count < max_quota and over < expected_over:
                        at_min.append(chosen)
                        at_min_racks[racks[chosen]] += 1
                else:
                    index += 1
                next_under = index % len(under) if under else 0
            elif at_min:
                index = next_in_rack(tp, at_min, at_min_racks, 0)
                if index >= 0:
                    chosen = at_min[index]
                    if len(result[chosen]) + 1 == max_quota:
                        del at_min[index]
                        at_min_racks[racks[chosen]] -= 1
                        over += 1
                        if over == expected_over:
                            at_min.clear()
                            at_min_racks.clear()
            if chosen is None:
                left.append(tp)
            else:
                result[chosen].append(tp)
        unassigned = left

    # 3. Deal the rest in turn: first to members below min_quota, then one more
    #    each to members at min_quota until expected_over members hold max_quota.
    #    (A list index stands in for the Java iterator that removes as it goes.)
    position = 0
    pending_at_min = deque(at_min)
    for tp in unassigned:
        if position < len(under):
            chosen = under[position]
            position += 1
        elif not under:
            if not pending_at_min:
                raise AssertionError("no member has room left; the quotas are inconsistent")
            chosen = pending_at_min.popleft()
        else:
            position = 1
            chosen = under[0]
        result[chosen].append(tp)
        count = len(result[chosen])
        if count == min_quota and position > 0 and under[position - 1] == chosen:
            position -= 1
            del under[position]
            pending_at_min.append(chosen)
        elif count == max_quota:
            over += 1
    return result


def _assign_heterogeneous(
    members: Sequence[str],
    *,
    topics_of: Mapping[str, frozenset[str]],
    all_topics: Sequence[str],
    counts: Mapping[str, int],
    owned: Mapping[str, list[TopicPartition]],
    racks: Mapping[str, str | None],
    rack_aware: bool,
    cluster: Cluster,
) -> dict[str, list[TopicPartition]]:
    rank = {m: i for i, m in enumerate(members)}
    subscribers: dict[str, tuple[str, ...]] = {
        t: tuple(m for m in members if t in topics_of[m]) for t in all_topics
    }
    owner: dict[TopicPartition, str] = {}
    for m in members:
        for tp in owned[m]:
            owner[tp] = m
    load = {m: len(owned[m]) for m in members}
    index = _LoadIndex(load, rank)
    for group in set(subscribers.values()):
        index.add(group, group)
        if rack_aware:
            for rack in {racks[m] for m in group if racks[m] is not None}:
                index.add((group, rack), [m for m in group if racks[m] == rack])

    # Place unowned partitions, those with the fewest candidates first, each on a
    # least-loaded candidate (a rack-local one if it is no more loaded).
    every = (TopicPartition(t, p) for t in all_topics for p in range(counts[t]))
    unassigned = [tp for tp in every if tp not in owner]
    unassigned.sort(key=lambda tp: (len(subscribers[tp.topic]), tp))
    for tp in unassigned:
        group = subscribers[tp.topic]
        choice = index.least(group)
        assert choice is not None  # every topic here has a subscriber
        if rack_aware:
            for rack in sorted(cluster.racks_of(tp)):
                local = index.least((group, rack))
                if local is not None and load[local] <= load[choice]:
                    choice = local
                    break
        owner[tp] = choice
        index.change(choice, +1)

    # Balance: move a partition to a less loaded candidate while the gap is two
    # or more. Every move lowers the sum of squared loads, so this ends; the
    # pass limit only bounds the time on pathological subscriptions.
    for _ in range(64):
        moved = False
        for t in all_topics:
            group = subscribers[t]
            if len(group) < 2:
                continue
            for p in range(counts[t]):
                tp = TopicPartition(t, p)
                current = owner[tp]
                target = index.least(group)
                assert target is not None
                if load[current] - load[target] > 1:
                    owner[tp] = target
                    index.change(current, -1)
                    index.change(target, +1)
                    moved = True
        if not moved:
            break

    result: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp, m in owner.items():
        result[m].append(tp)
    return result


def _without_transfers(
    result: Mapping[str, list[TopicPartition]],
    subs: Mapping[str, Subscription],
    rightful: Mapping[TopicPartition, str],
) -> dict[str, list[TopicPartition]]:
    """Drop every partition that would go to a member while another still claims it.

    Under the cooperative protocol the other claimant must revoke it first; it is
    handed over in the follow-up rebalance that the revocation triggers. A member
    whose claim won (``rightful``: the higher generation) keeps its partition
    even if a stale member also claims it; a partition claimed twice in the same
    generation has no rightful owner and waits until both let go.
    """
    claimants: dict[TopicPartition, set[str]] = {}
    for m, sub in subs.items():
        for tp in sub.owned_partitions:
            claimants.setdefault(tp, set()).add(m)

    def keep(m: str, tp: TopicPartition) -> bool:
        others = claimants.get(tp)
        if others is None or (len(others) == 1 and m in others):
            return True  # nobody else claims it
        return rightful.get(tp) == m

    return {m: [tp for tp in parts if keep(m, tp)] for m, parts in result.items()}


class StickyAssignor:
    """``sticky``: balanced and sticky, under the eager protocol.

    The member remembers its last assignment and generation (``on_assignment``)
    and sends them as user data in the Java client's format, so a group can mix
    kgroup and Java members. See the module docstring for the algorithm.
    """

    name = "sticky"
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def __init__(self) -> None:
        self._partitions: tuple[TopicPartition, ...] | None = None
        self._generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        """The previous assignment and generation, or None before the first assignment."""
        if self._partitions is None:
            return None
        return encode_sticky_user_data(self._partitions, self._generation)

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:
        """Remember the assignment and generation for the next subscription."""
        self._partitions = assignment.partitions
        self._generation = metadata.generation_id

    def member_data(self, subscription: Subscription) -> MemberData:
        """What the member claims: its user data if present, else the subscription's fields."""
        if subscription.user_data:
            return decode_sticky_user_data(subscription.user_data)
        return MemberData(subscription.owned_partitions, subscription.generation_id)

    def assign(self, cluster: Cluster, subscriptions: GroupSubscription) -> GroupAssignment:
        """Compute the sticky assignment."""
        data = {m: self.member_data(s) for m, s in subscriptions.subscriptions.items()}
        return GroupAssignment.of(sticky_assign(cluster, subscriptions, data))


class CooperativeStickyAssignor:
    """``cooperative-sticky``: the sticky assignment under the cooperative protocol.

    It supports COOPERATIVE (preferred) and EAGER, as the Java client's does (the
    latter for the first bounce of an eager-to-cooperative upgrade). Its
    assignment never hands a partition owned by one member to another member in
    the same round: such a partition is left out of the new owner's assignment,
    the old owner revokes it, rejoins, and the next round places it.
    """

    name = "cooperative-sticky"
    supported_protocols: tuple[RebalanceProtocol, ...] = (
        RebalanceProtocol.COOPERATIVE,
        RebalanceProtocol.EAGER,
    )

    def __init__(self) -> None:
        self._generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        """The last generation as an int32 (for members and brokers before consumer protocol v2)."""
        return encode_cooperative_user_data(self._generation)

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:
        """Remember the generation."""
        self._generation = metadata.generation_id

    def member_data(self, subscription: Subscription) -> MemberData:
        """Owned partitions, with the generation of the subscription (v2+) or of the user data."""
        if subscription.generation_id is not None:
            return MemberData(subscription.owned_partitions, subscription.generation_id)
        return MemberData(
            subscription.owned_partitions, decode_cooperative_user_data(subscription.user_data)
        )

    def assign(self, cluster: Cluster, subscriptions: GroupSubscription) -> GroupAssignment:
        """Compute the sticky assignment, minus partitions that still have another owner."""
        subs = subscriptions.subscriptions
        data = {m: self.member_data(s) for m, s in subs.items()}
        result, rightful = _sticky(cluster, subscriptions, data)
        return GroupAssignment.of(_without_transfers(result, subs, rightful))
