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
from collections.abc import Container, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, filterfalse
from operator import itemgetter

from kgroup.assignors._common import (
    make_assignment,
    make_partitions,
    member_rack,
    rack_aware_of,
    sorted_members,
    topic_partitions,
)
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

_Pairs = Sequence[tuple[str, Sequence[int]]]
"""Partitions as (topic, partition numbers) pairs: how user data carries them."""

_Span = tuple[int, int]
"""Where a topic's partitions are in the numbering: (first number, partition count)."""

_Claim = tuple[int | None, Sequence[TopicPartition], bytes | None]
"""What a member claims: the generation of the claim (None if unknown) and its
partitions; or, if the third item is set, the sticky user data that holds both."""


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


# Compiled layouts for the parser: a topic name of n bytes followed by its int32
# partition count, and n int32 partition numbers. Each user-data topic entry
# then costs two unpack calls; a leader parses one entry per member and topic.
_NAME_AND_COUNT: dict[int, struct.Struct] = {}
_NUMBERS = [struct.Struct(f">{n}i") for n in range(65)]


def _name_and_count(length: int) -> struct.Struct:
    layout = _NAME_AND_COUNT.get(length)
    if layout is None:
        layout = struct.Struct(f">{length}si")
        if length <= 255:  # topic names are at most 249 bytes; keep the cache small anyway
            _NAME_AND_COUNT[length] = layout
    return layout


_Parsed = tuple[list[tuple[str, tuple[int, ...]]], int | None]
"""Parsed sticky user data: (topic, partition numbers) pairs, and the generation (v1)."""


def _parse_sticky(data: bytes, start: int) -> _Parsed | None:
    """Parse the sticky user-data body at ``start``: (topic, partitions) pairs and generation.

    None unless the body uses up exactly all bytes. The pairs stay numbers: the
    assignor maps them to its own partition numbering without building
    TopicPartitions it would only hash and drop.
    """
    shape = _SHAPES.compiled(len(data) - start)
    if shape is not None:
        parsed = shape.parse(data, start)
        if parsed is not None:
            return parsed
    parsed = _parse_walking(data, start)
    if parsed is not None:
        _SHAPES.learn(len(data) - start, parsed)
    return parsed


def _parse_walking(data: bytes, start: int) -> _Parsed | None:
    """:func:`_parse_sticky` entry by entry."""
    end = len(data)
    pos = start
    pairs: list[tuple[str, tuple[int, ...]]] = []
    if pos + 4 > end:
        return None
    (topics,) = _I32.unpack_from(data, pos)
    pos += 4
    unpack_length = _I16.unpack_from
    layouts = _NAME_AND_COUNT
    for _ in range(max(topics, 0)):
        if pos + 2 > end:
            return None
        (length,) = unpack_length(data, pos)
        pos += 2
        if length < 0 or pos + length + 4 > end:
            return None  # a null topic name, or truncated
        name, count = (layouts.get(length) or _name_and_count(length)).unpack_from(data, pos)
        pos += length + 4
        try:
            topic = name.decode()
        except UnicodeDecodeError:
            return None
        numbers: tuple[int, ...] = ()
        if count > 0:
            if pos + 4 * count > end:
                return None
            layout = _NUMBERS[count] if count < len(_NUMBERS) else struct.Struct(f">{count}i")
            numbers = layout.unpack_from(data, pos)
            pos += 4 * count
        pairs.append((topic, numbers))
    remaining = end - pos
    if remaining == 0:
        return pairs, None  # v0: no generation
    if remaining == 4:
        return pairs, int(_I32.unpack_from(data, pos)[0])
    return None


_Signature = tuple[tuple[tuple[int, int], ...], bool]
"""The shape of a user-data body: (name length in bytes, partition count) per entry,
and whether a generation follows."""


class _Shape:
    """One shape of user-data body, compiled: the whole body in one unpack call.

    The members of a group mostly send bodies of the same shape (the same
    number of topics, name lengths and partition counts; only the numbers
    differ). Unpacking such a body in one call and checking that its topic
    count, name lengths and partition counts are the shape's reads the same
    fields from the same offsets as :func:`_parse_walking` would, so the result
    is the same; any other body fails the check and is walked.
    """

    def __init__(self, signature: _Signature) -> None:
        entries, self.generation = signature
        fmt = [">i"]
        checked = [0]  # positions in the unpacked tuple: topic count, lengths and counts
        want = [len(entries)]
        names: list[int] = []
        self.spans: list[tuple[int, int]] = []
        at = 1
        for length, count in entries:
            fmt.append(f"h{length}si{count}i")
            checked += [at, at + 2]
            want += [length, count]
            names.append(at + 1)
            self.spans.append((at + 3, at + 3 + count))
            at += 3 + count
        if self.generation:
            fmt.append("i")
        self.layout = struct.Struct("".join(fmt))
        # itemgetter returns a bare value for one position and a tuple for more
        self.fields = itemgetter(*checked)
        self.want: object = tuple(want) if len(want) > 1 else want[0]
        self.names = names

    def parse(self, data: bytes, start: int) -> _Parsed | None:
        """The parsed body, or None if it is not of this shape (or a name is not UTF-8)."""
        if len(data) - start != self.layout.size:
            return None
        flat = self.layout.unpack_from(data, start)
        if self.fields(flat) != self.want:
            return None
        try:
            pairs = [
                (flat[n].decode(), flat[a:b])
                for n, (a, b) in zip(self.names, self.spans, strict=True)
            ]
        except UnicodeDecodeError:
            return None
        return pairs, (flat[-1] if self.generation else None)

    def claimed(
        self,
        data: bytes,
        start: int,
        topics: Container[str],
        by_name: Mapping[bytes, tuple[str, int, int]],
    ) -> tuple[int | None, list[int]] | None:
        """:meth:`parse`, mapped to numbers as :func:`_numbers_of_pairs` does."""
        if len(data) - start != self.layout.size:
            return None
        flat = self.layout.unpack_from(data, start)
        if self.fields(flat) != self.want:
            return None
        numbers: list[int] = []
        for n, (a, b) in zip(self.names, self.spans, strict=True):
            known = by_name.get(flat[n])
            if known is None:
                try:
                    flat[n].decode()
                except UnicodeDecodeError:
                    return None  # not a valid body: let the walking parser say so
                continue
            topic, first, count = known
            if topic in topics:
                for p in flat[a:b]:
                    if 0 <= p < count:
                        numbers.append(first + p)
        return (flat[-1] if self.generation else None), numbers


class _Shapes:
    """Per body size, the last shape seen, compiled once two bodies in a row share it.

    Compiling only recurring shapes keeps a group whose bodies all differ from
    paying for layouts it never reuses. Bounded: it starts over past 1,024 sizes.
    """

    def __init__(self) -> None:
        self.by_size: dict[int, tuple[_Signature, _Shape | None]] = {}

    def compiled(self, size: int) -> _Shape | None:
        known = self.by_size.get(size)
        return None if known is None else known[1]

    def learn(self, size: int, parsed: _Parsed) -> None:
        pairs, generation = parsed
        signature = (
            tuple((len(topic.encode()), len(numbers)) for topic, numbers in pairs),
            generation is not None,
        )
        known = self.by_size.get(size)
        if known is not None and known[0] == signature:
            if known[1] is None:
                self.by_size[size] = (signature, _Shape(signature))
            return
        if len(self.by_size) >= 1024:
            self.by_size.clear()
        self.by_size[size] = (signature, None)


_SHAPES = _Shapes()


def _forget_shapes() -> None:
    """Drop the compiled user-data shapes (see :mod:`kgroup.assignors._caches`)."""
    _SHAPES.by_size.clear()


def _body_starts(data: bytes) -> Iterator[int]:
    """Where a user-data body may start: at 0 (Java), else at 2 (kafka-python 3's version)."""
    yield 0
    if len(data) >= 2 and _I16.unpack_from(data)[0] in (0, 1):
        yield 2


def _decode_sticky(data: bytes) -> _Parsed:
    for start in _body_starts(data):
        parsed = _parse_sticky(data, start)
        if parsed is not None:
            return parsed
    return [], DEFAULT_GENERATION


def _claimed_in_user_data(
    data: bytes, topics: Container[str], layout: _Layout
) -> tuple[int | None, list[int]]:
    """The generation and claimed numbers (of ``topics``) in sticky user data.

    :func:`_decode_sticky` then :func:`_numbers_of_pairs`, in one pass where the
    body has a compiled shape: names are looked up as bytes, and only names of
    no known topic are decoded (to reject the body if one is not UTF-8).
    """
    for start in _body_starts(data):
        shape = _SHAPES.compiled(len(data) - start)
        if shape is not None:
            found = shape.claimed(data, start, topics, layout.by_name())
            if found is not None:
                return found
        parsed = _parse_sticky(data, start)
        if parsed is not None:
            pairs, generation = parsed
            return generation, _numbers_of_pairs(pairs, topics, layout.offsets)
    return DEFAULT_GENERATION, []


def decode_sticky_user_data(data: bytes) -> MemberData:
    """Read sticky user data: the Java client's v1 or v0 layout, or kafka-python 3's.

    kafka-python 3 writes the same body behind a 2-byte version; both are read so
    that kgroup, Java and kafka-python members can share a group (kgroup writes
    the Java layout). Bytes that parse as neither mean "no previous assignment"
    with the default generation, as in the Java client.
    """
    pairs, generation = _decode_sticky(data)
    partitions: list[TopicPartition] = []
    for topic, numbers in pairs:
        partitions += make_partitions(topic, numbers)
    return MemberData(tuple(partitions), generation)


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


def _numbers_of_partitions(
    partitions: Iterable[TopicPartition], topics: Container[str], offsets: Mapping[str, _Span]
) -> list[int]:
    """The numbers of ``partitions`` of ``topics`` that exist (others are skipped)."""
    out: list[int] = []
    for tp in partitions:
        topic = tp.topic
        if topic in topics:
            first, count = offsets[topic]
            p = tp.partition
            if 0 <= p < count:
                out.append(first + p)
    return out


def _numbers_of_pairs(
    pairs: _Pairs, topics: Container[str], offsets: Mapping[str, _Span]
) -> list[int]:
    """:func:`_numbers_of_partitions` for (topic, numbers) pairs."""
    out: list[int] = []
    for topic, numbers in pairs:
        if topic in topics:
            first, count = offsets[topic]
            for p in numbers:  # a loop, not a comprehension: most runs are short
                if 0 <= p < count:
                    out.append(first + p)
    return out


class _Layout:
    """The partitions of the subscribed topics, numbered in (topic, partition) order.

    The algorithms below work on these numbers, not on TopicPartitions: hashing
    and comparing a TopicPartition runs Python-level dataclass methods, which
    made up most of the assignors' time on large groups. Number order is
    TopicPartition order, so a sorted list of numbers maps to a sorted list of
    partitions.
    """

    def __init__(self, topics: Sequence[str], counts: Mapping[str, int]) -> None:
        self.topics = topics  # sorted
        self.offsets: dict[str, _Span] = {}  # topic -> (first number, count)
        self.partitions: list[TopicPartition] = []  # number -> partition (interned)
        for t in topics:
            self.offsets[t] = (len(self.partitions), counts[t])
            self.partitions += topic_partitions(t, counts[t])
        self.total = len(self.partitions)
        self._by_name: dict[bytes, tuple[str, int, int]] | None = None

    def by_name(self) -> dict[bytes, tuple[str, int, int]]:
        """UTF-8 topic name -> (topic, first number, count): for names read from user data."""
        if self._by_name is None:
            self._by_name = {t.encode(): (t, *self.offsets[t]) for t in self.topics}
        return self._by_name

    def partition_first_keys(self) -> list[int]:
        """Number -> a sort key that orders partitions by partition, then by topic."""
        width = len(self.topics)
        return [p * width + i for i, t in enumerate(self.topics) for p in range(self.offsets[t][1])]

    def to_partitions(self, numbers: Iterable[int]) -> tuple[TopicPartition, ...]:
        return tuple(map(self.partitions.__getitem__, numbers))


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
    claims: Mapping[str, _Claim],
    topics_of: Mapping[str, frozenset[str]],
    layout: _Layout,
) -> tuple[list[str | None], list[int]]:
    """Number -> the member whose claim is valid and not beaten by another claim, if any;
    and the numbers validly claimed at all.

    Valid: subscribed and existing. A claim from a higher generation beats one
    from a lower; two members claiming a partition in the same generation
    cancel out (neither claim can be trusted), and the partition is reassigned.
    """
    generation_of: list[int | None] = [None] * layout.total
    owner_of: list[str | None] = [None] * layout.total
    claimed: list[int] = []  # each claimed number once
    offsets = layout.offsets
    for member in members:
        claim = claims.get(member)
        if claim is None:
            continue
        topics = topics_of[member]
        generation: int | None
        if claim[2] is not None:
            generation, numbers = _claimed_in_user_data(claim[2], topics, layout)
        else:
            generation, numbers = claim[0], _numbers_of_partitions(claim[1], topics, offsets)
        if generation is None:
            generation = DEFAULT_GENERATION
        for g in numbers:
            current = generation_of[g]
            if current is None:
                claimed.append(g)
            if current is None or generation > current:
                generation_of[g] = generation
                owner_of[g] = member
            elif generation == current and owner_of[g] != member:
                owner_of[g] = None
    return owner_of, claimed


@dataclass(frozen=True, slots=True)
class _Outcome:
    layout: _Layout
    result: dict[str, list[int]]  # member -> sorted partition numbers, one entry per member
    rightful: list[str | None]  # number -> the owner whose claim won, if any


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
    claims = {m: (d.generation, d.partitions, None) for m, d in member_data.items()}
    outcome = _sticky(cluster, subscriptions, claims)
    return {m: list(outcome.layout.to_partitions(ns)) for m, ns in outcome.result.items()}


def _sticky(
    cluster: Cluster,
    subscriptions: GroupSubscription,
    claims: Mapping[str, _Claim],
) -> _Outcome:
    """:func:`sticky_assign` on partition numbers, plus who rightfully owns each claimed one."""
    subs = subscriptions.subscriptions
    members = sorted_members(subscriptions)
    counts = cluster.partition_counts
    if not members:
        return _Outcome(_Layout((), counts), {}, [])
    # Members mostly share subscriptions: compute each distinct one once. Comparing
    # with the previous member's first is cheaper than hashing a long tuple of names.
    known_topics: dict[tuple[str, ...], frozenset[str]] = {}
    topics_of: dict[str, frozenset[str]] = {}
    previous: tuple[str, ...] | None = None
    known = frozenset[str]()
    for m in members:
        topics = subs[m].topics
        if topics != previous:
            if topics not in known_topics:
                known_topics[topics] = frozenset(t for t in topics if counts.get(t))
            known = known_topics[topics]
            previous = topics
        topics_of[m] = known
    distinct = set(known_topics.values())
    layout = _Layout(sorted(set().union(*distinct)), counts)
    rightful, claimed = _resolve_owners(members, claims, topics_of, layout)
    owned: dict[str, list[int]] = {m: [] for m in members}
    for g in sorted(claimed):
        owner = rightful[g]
        if owner is not None:
            owned[owner].append(g)
    racks = {m: member_rack(subs[m]) for m in members}
    # Only with racks on both sides can placement be rack-aware (see use_rack_aware);
    # otherwise skip looking up the racks of every partition.
    part_racks: list[frozenset[str]] | None = None
    if cluster.replica_racks and any(racks.values()):
        candidate = [cluster.racks_of(tp) for tp in layout.partitions]
        if rack_aware_of(racks.values(), candidate):
            part_racks = candidate

    if part_racks is not None:
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
        nowhere: set[str] = set()
        for m in members:
            rack = racks[m]
            if rack is not None:
                owned[m] = [
                    g
                    for g in owned[m]
                    if rack in part_racks[g]
                    or local_racks_of_topic.get(layout.partitions[g].topic, nowhere).isdisjoint(
                        part_racks[g]
                    )
                ]

    if len(distinct) == 1:
        # The Java leader visits members in the order of its HashMap of member ids.
        java_order = hash_order(list(subs), java_string_hash, grown_capacity(len(subs)))
        result = _assign_homogeneous(
            java_order, layout=layout, owned=owned, racks=racks, part_racks=part_racks
        )
    else:
        result = _assign_heterogeneous(
            members,
            topics_of=topics_of,
            layout=layout,
            owned=owned,
            racks=racks,
            part_racks=part_racks,
        )
    return _Outcome(layout, {m: sorted(result[m]) for m in subs}, rightful)


def _assign_homogeneous(
    members: Sequence[str],
    *,
    layout: _Layout,
    owned: Mapping[str, list[int]],
    racks: Mapping[str, str | None],
    part_racks: Sequence[frozenset[str]] | None,
) -> dict[str, list[int]]:
    """The Java client's constrained assignment (all members subscribe to the same topics).

    ``members`` must be in the order the Java leader iterates them (its hash map's).
    ``part_racks`` (number -> replica racks) is given only for rack-aware placement.
    """
    total = layout.total
    min_quota, expected_over = divmod(total, len(members))
    max_quota = min_quota + (1 if expected_over else 0)
    over = 0  # members holding max_quota > min_quota; at most expected_over
    under: list[str] = []  # members below min_quota
    at_min: list[str] = []  # members at min_quota that may still take one more
    result: dict[str, list[int]] = {m: [] for m in members}

    # 1. Keep owned partitions up to the member's share, in partition-then-topic order.
    keys = layout.partition_first_keys() if any(len(owned[m]) > 1 for m in members) else []
    for m in members:
        claims = owned[m]
        if len(claims) > 1:
            claims = sorted(claims, key=keys.__getitem__)
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

    taken = set(chain.from_iterable(result.values()))
    unassigned = list(filterfalse(taken.__contains__, range(total)))
    under.sort()
    at_min.sort()

    # 2. Rack-aware: fill members from partitions with a replica in their rack,
    #    rarest racks first, up to the quotas.
    if part_racks is not None:
        replica_racks_of = part_racks
        members_in_rack: dict[str, int] = {}
        for m in members:
            rack = racks[m]
            if rack is not None:
                members_in_rack[rack] = members_in_rack.get(rack, 0) + 1
        unassigned.sort(key=lambda g: sum(members_in_rack.get(r, 0) for r in replica_racks_of[g]))

        # How many members of each rack each list holds: a partition whose racks
        # have none is skipped at once instead of by scanning the whole list.
        under_racks = Counter(racks[m] for m in under)
        at_min_racks = Counter(racks[m] for m in at_min)

        def next_in_rack(
            g: int, candidates: list[str], present: Counter[str | None], first: int
        ) -> int:
            replica_racks = replica_racks_of[g]
            if not any(present[r] for r in replica_racks):
                return -1
            n = len(candidates)
            for i in range(n):
                index = (first + i) % n
                if racks[candidates[index]] in replica_racks:
                    return index
            return -1

        left: list[int] = []
        next_under = 0
        for g in unassigned:
            chosen: str | None = None
            index = next_in_rack(g, under, under_racks, next_under)
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
                index = next_in_rack(g, at_min, at_min_racks, 0)
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
                left.append(g)
            else:
                result[chosen].append(g)
        unassigned = left

    # 3. Deal the rest in turn: first to members below min_quota, then one more
    #    each to members at min_quota until expected_over members hold max_quota.
    #    The Java client walks the members below min_quota round after round, one
    #    partition per member and round, dropping a member (to the back of the
    #    at-min_quota queue) in the round it reaches min_quota. Between two rounds
    #    where members drop, the list is fixed, so member j of it gets every
    #    len(under)-th partition from j on: dealt here as slices, a phase at a time.
    pending_at_min = deque(at_min)
    dealt = 0
    to_deal = len(unassigned)
    while under and dealt < to_deal:
        width = len(under)
        rounds = min(min_quota - len(result[m]) for m in under)  # until the next drop
        stop = min(to_deal, dealt + rounds * width)
        for j, m in enumerate(under):
            result[m] += unassigned[dealt + j : stop : width]
        if stop < dealt + rounds * width:
            dealt = stop
            break  # no partition left
        dealt = stop
        still_under = []
        for m in under:
            if len(result[m]) == min_quota:
                pending_at_min.append(m)
            else:
                still_under.append(m)
        under = still_under
    for g in unassigned[dealt:]:
        if not pending_at_min:
            raise AssertionError("no member has room left; the quotas are inconsistent")
        result[pending_at_min.popleft()].append(g)
    return result


def _assign_heterogeneous(
    members: Sequence[str],
    *,
    topics_of: Mapping[str, frozenset[str]],
    layout: _Layout,
    owned: Mapping[str, list[int]],
    racks: Mapping[str, str | None],
    part_racks: Sequence[frozenset[str]] | None,
) -> dict[str, list[int]]:
    rank = {m: i for i, m in enumerate(members)}
    # The subscribers of each topic, as an index into `groups` (a key that is cheap
    # to hash, unlike a tuple of a thousand member ids): topics are grouped by the
    # distinct subscriptions that contain them.
    by_subscription: dict[frozenset[str], list[str]] = {}
    for m in members:
        by_subscription.setdefault(topics_of[m], []).append(m)
    subscriptions = list(by_subscription)
    group_ids: dict[tuple[int, ...], int] = {}
    groups: list[tuple[str, ...]] = []
    group_of: dict[str, int] = {}
    for t in layout.topics:
        which = tuple(i for i, s in enumerate(subscriptions) if t in s)
        gid = group_ids.get(which)
        if gid is None:
            gid = group_ids[which] = len(groups)
            lists = [by_subscription[subscriptions[i]] for i in which]
            groups.append(
                tuple(lists[0])
                if len(lists) == 1
                else tuple(sorted(chain.from_iterable(lists), key=rank.__getitem__))
            )
        group_of[t] = gid
    owner: list[str | None] = [None] * layout.total
    for m in members:
        for g in owned[m]:
            owner[g] = m
    load = {m: len(owned[m]) for m in members}
    index = _LoadIndex(load, rank)
    for gid, group in enumerate(groups):
        index.add(gid, group)
        if part_racks is not None:
            for rack in {racks[m] for m in group if racks[m] is not None}:
                index.add((gid, rack), [m for m in group if racks[m] == rack])

    # Place unowned partitions, those with the fewest candidates first, each on a
    # least-loaded candidate (a rack-local one if it is no more loaded).
    total = layout.total
    keyed: list[int] = []  # candidates * total + number: sorts by candidates, then partition
    for t in layout.topics:
        first, count = layout.offsets[t]
        weight = len(groups[group_of[t]]) * total
        keyed.extend(weight + g for g in range(first, first + count) if owner[g] is None)
    keyed.sort()
    for key in keyed:
        g = key % total
        gid = group_of[layout.partitions[g].topic]
        choice = index.least(gid)
        assert choice is not None  # every topic here has a subscriber
        if part_racks is not None:
            for rack in sorted(part_racks[g]):
                local = index.least((gid, rack))
                if local is not None and load[local] <= load[choice]:
                    choice = local
                    break
        owner[g] = choice
        index.change(choice, +1)

    # Balance: move a partition to a less loaded candidate while the gap is two
    # or more. Every move lowers the sum of squared loads, so this ends; the
    # pass limit only bounds the time on pathological subscriptions.
    for _ in range(64):
        moved = False
        for t in layout.topics:
            gid = group_of[t]
            if len(groups[gid]) < 2:
                continue
            first, count = layout.offsets[t]
            for g in range(first, first + count):
                current = owner[g]
                assert current is not None  # every partition is placed by now
                target = index.least(gid)
                assert target is not None
                if load[current] - load[target] > 1:
                    owner[g] = target
                    index.change(current, -1)
                    index.change(target, +1)
                    moved = True
        if not moved:
            break

    result: dict[str, list[int]] = {m: [] for m in members}
    for g, placed in enumerate(owner):
        assert placed is not None
        result[placed].append(g)
    return result


def _without_transfers(
    outcome: _Outcome, subs: Mapping[str, Subscription]
) -> dict[str, tuple[TopicPartition, ...]]:
    """Drop every partition that would go to a member while another still claims it.

    Under the cooperative protocol the other claimant must revoke it first; it is
    handed over in the follow-up rebalance that the revocation triggers. A member
    whose claim won (``rightful``: the higher generation) keeps its partition
    even if a stale member also claims it; a partition claimed twice in the same
    generation has no rightful owner and waits until both let go.
    """
    offsets = outcome.layout.offsets
    first_claimant: dict[int, str] = {}
    contested: set[int] = set()  # claimed by more than one member
    for m, sub in subs.items():
        # Partitions of topics outside the layout cannot be in the result: skipped.
        for g in _numbers_of_partitions(sub.owned_partitions, offsets, offsets):
            if first_claimant.setdefault(g, m) != m:
                contested.add(g)
    rightful = outcome.rightful
    claimant_of = first_claimant.get
    to_partitions = outcome.layout.to_partitions
    # Keep a partition nobody else claims (no claimant, or this member alone), or
    # one whose claim this member won.
    return {
        m: to_partitions(
            [
                g
                for g in numbers
                if (claimant := claimant_of(g)) is None
                or (claimant == m and g not in contested)
                or rightful[g] == m
            ]
        )
        for m, numbers in outcome.result.items()
    }


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

    def _claim(self, subscription: Subscription) -> _Claim:
        # member_data without building TopicPartitions (unless a subclass overrides it)
        if type(self).member_data is not StickyAssignor.member_data:
            data = self.member_data(subscription)
            return data.generation, data.partitions, None
        if subscription.user_data:
            return None, (), subscription.user_data  # parsed where the layout is known
        return subscription.generation_id, subscription.owned_partitions, None

    def assign(self, cluster: Cluster, subscriptions: GroupSubscription) -> GroupAssignment:
        """Compute the sticky assignment."""
        claims = {m: self._claim(s) for m, s in subscriptions.subscriptions.items()}
        outcome = _sticky(cluster, subscriptions, claims)
        to_partitions = outcome.layout.to_partitions
        return GroupAssignment(
            {m: make_assignment(to_partitions(ns)) for m, ns in outcome.result.items()}
        )


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
        claims: dict[str, _Claim] = {}
        for m, s in subs.items():
            data = self.member_data(s)  # cheap: no partition is built or hashed
            claims[m] = data.generation, data.partitions, None
        outcome = _sticky(cluster, subscriptions, claims)
        kept = _without_transfers(outcome, subs)
        return GroupAssignment({m: make_assignment(ps) for m, ps in kept.items()})
