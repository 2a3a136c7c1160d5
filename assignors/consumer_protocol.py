"""The consumer protocol's (KIP-848) assignor interface, and the broker's two assignors in Python.

With the consumer group protocol of KIP-848 the group coordinator computes the
assignment; Apache Kafka brokers ship two assignors, ``uniform`` (the default)
and ``range``, and load no client-side ones. :class:`PartitionAssignor` is the
interface KIP-848 describes (name, version range, metadata, ``assign(spec)``,
``on_assignment``). :class:`UniformAssignor` and :class:`RangeServerAssignor`
reproduce the broker's decisions, so that a user can compute offline what the
coordinator would assign: they follow the group coordinator's
``UniformHomogeneousAssignmentBuilder``, ``UniformHeterogeneousAssignmentBuilder``
and ``RangeAssignor`` step by step (Apache Kafka trunk at commit ``1eb76443``,
October 2024, the line released as 4.0), including the order in which the
broker's Java hash maps hand out members and topics.

What "reproduce" needs from the caller: the members' current target
assignments (``MemberSpec.assignment``), with each member's topics in the order
the broker holds them, and member ids as the broker knows them. Where two member
ids fall in the same bucket of the broker's hash map, their relative order
follows the order of ``AssignmentSpec.members``.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from kgroup.assignors.classic import GroupMetadata
from kgroup.assignors.java_order import (
    grown_capacity,
    hash_order,
    java_string_hash,
    java_uuid_hash,
    presized_capacity,
    uuid_order_key,
)
from kgroup.errors import AssignorError
from kgroup.types import TopicIdPartition

__all__ = [
    "AssignmentSpec",
    "AssignorMetadata",
    "MemberAssignment",
    "MemberSpec",
    "PartitionAssignor",
    "RangeServerAssignor",
    "SubscriptionType",
    "TargetAssignment",
    "TopicMetadata",
    "UniformAssignor",
]


class SubscriptionType(enum.Enum):
    """Whether all members subscribe to the same topics."""

    HOMOGENEOUS = "homogeneous"
    HETEROGENEOUS = "heterogeneous"


def _frozen_assignment(
    value: Mapping[uuid.UUID, Iterable[int]],
) -> Mapping[uuid.UUID, frozenset[int]]:
    return MappingProxyType({t: frozenset(ps) for t, ps in value.items()})


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A subscribed topic: its name and partition count."""

    name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class AssignorMetadata:
    """What a member reports about its client-side assignor: a version and opaque bytes.

    The KIP-848 draft's client-side mode: each member advertises its
    assignor's metadata (``PartitionAssignor.metadata()`` encoded at
    ``version``), and the member computing the group's assignment hands every
    member's to its assignor through :attr:`MemberSpec.assignor_metadata`.
    Broker-side assignors never see any (it stays ``None``).
    """

    version: int
    data: bytes = b""

    def __post_init__(self) -> None:
        # A clear error at construction beats a confusing one inside an assignor.
        if isinstance(self.version, bool) or not isinstance(self.version, int):
            raise TypeError(f"AssignorMetadata.version must be an int, got {self.version!r}")
        if self.version < 0:
            raise ValueError(f"AssignorMetadata.version must be >= 0, got {self.version}")
        if not isinstance(self.data, bytes):
            raise TypeError(
                f"AssignorMetadata.data must be bytes, got {type(self.data).__name__}; "
                "encode it first"
            )


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as the assignor sees it.

    Attributes:
        subscribed_topic_ids: the topics the member subscribes to (resolved to ids).
        assignment: the member's current target assignment, topic id -> partitions.
            The order of the topics matters to ``uniform`` when a member must give
            partitions up: it keeps them in this order.
        instance_id: the static member's ``group.instance.id``, if any.
        rack_id: the member's rack, if any.
        assignor_metadata: in the client-side mode, the metadata the member
            reports for the assignor that runs (version and bytes); ``None``
            otherwise. Added last, with a default, so existing code that
            builds a ``MemberSpec`` keeps working.
    """

    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: Mapping[uuid.UUID, frozenset[int]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    instance_id: str | None = None
    rack_id: str | None = None
    assignor_metadata: AssignorMetadata | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "subscribed_topic_ids", frozenset(self.subscribed_topic_ids))
        object.__setattr__(self, "assignment", _frozen_assignment(self.assignment))

    def __hash__(self) -> int:
        return hash(
            (self.subscribed_topic_ids, frozenset(self.assignment.items()), self.instance_id)
        )


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """The input of a consumer-protocol assignor: the members and the subscribed topics.

    ``members`` is keyed by member id, ``topics`` by topic id. A subscribed topic
    missing from ``topics`` does not exist (the assignors raise AssignorError).
    """

    members: Mapping[str, MemberSpec]
    topics: Mapping[uuid.UUID, TopicMetadata]
    declared_subscription_type: SubscriptionType | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", MappingProxyType(dict(self.members)))
        object.__setattr__(self, "topics", MappingProxyType(dict(self.topics)))

    @property
    def subscription_type(self) -> SubscriptionType:
        """HOMOGENEOUS if every member subscribes to the same topics.

        ``declared_subscription_type``, if set, wins (the broker passes the type it
        tracks; declaring HETEROGENEOUS for identical subscriptions runs the
        heterogeneous algorithm, as the broker's builder tests do).
        """
        if self.declared_subscription_type is not None:
            return self.declared_subscription_type
        distinct = {m.subscribed_topic_ids for m in self.members.values()}
        return (
            SubscriptionType.HOMOGENEOUS if len(distinct) <= 1 else SubscriptionType.HETEROGENEOUS
        )

    def __hash__(self) -> int:
        return hash((frozenset(self.members.items()), frozenset(self.topics.items())))


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """One member's target partitions, topic id -> partition numbers."""

    partitions: Mapping[uuid.UUID, frozenset[int]]

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "partitions", _frozen_assignment({t: p for t, p in self.partitions.items() if p})
        )

    @classmethod
    def of(cls, partitions: Mapping[uuid.UUID, Iterable[int]]) -> MemberAssignment:
        """Build from topic id -> any iterable of partition numbers."""
        return cls({t: frozenset(ps) for t, ps in partitions.items()})

    def topic_id_partitions(self) -> frozenset[TopicIdPartition]:
        """The partitions as :class:`~kgroup.types.TopicIdPartition` values."""
        return frozenset(TopicIdPartition(t, p) for t, ps in self.partitions.items() for p in ps)

    def __len__(self) -> int:
        return sum(len(ps) for ps in self.partitions.values())

    def __hash__(self) -> int:
        return hash(frozenset(self.partitions.items()))


@dataclass(frozen=True, slots=True)
class TargetAssignment:
    """The output of a consumer-protocol assignor (KIP-848's ``GroupAssignment``).

    A member missing from ``members`` gets nothing.
    """

    members: Mapping[str, MemberAssignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", MappingProxyType(dict(self.members)))

    def partitions(self, member_id: str) -> frozenset[TopicIdPartition]:
        """The partitions of ``member_id`` (empty if absent)."""
        member = self.members.get(member_id)
        return frozenset() if member is None else member.topic_id_partitions()

    def __hash__(self) -> int:
        return hash(frozenset(self.members.items()))


@runtime_checkable
class PartitionAssignor(Protocol):
    """A consumer-protocol assignor, as KIP-848 describes the interface.

    ``assign`` is pure and must give every partition of every subscribed topic to
    exactly one member subscribed to its topic. ``min_version``/``max_version``
    bound the assignor metadata versions it understands; ``metadata()`` is what
    the member would report about its assignor. ``on_assignment`` is called with
    the member's target assignment once per member epoch.

    Apache Kafka brokers (4.x) do not call client-side assignors (see
    ``docs/assignors.md``): implementations here serve to compute assignments
    offline and to test broker-side assignors' logic.
    """

    @property
    def name(self) -> str:
        """The assignor's name (``uniform``, ``range``)."""
        ...

    @property
    def min_version(self) -> int:
        """The lowest metadata version the assignor understands."""
        ...

    @property
    def max_version(self) -> int:
        """The highest metadata version the assignor understands."""
        ...

    def metadata(self) -> bytes | None:
        """The assignor metadata this member reports, if any."""
        ...

    def assign(self, spec: AssignmentSpec) -> TargetAssignment:
        """Compute the target assignment of the group."""
        ...

    def on_assignment(self, assignment: MemberAssignment, metadata: GroupMetadata) -> None:
        """Learn this member's new target assignment."""
        ...


class _ServerAssignorBase:
    """Version range, metadata and on_assignment shared by the broker's assignors."""

    name = ""
    min_version = 0
    max_version = 0

    def metadata(self) -> bytes | None:
        """The broker's assignors have no metadata."""
        return None

    def on_assignment(self, assignment: MemberAssignment, metadata: GroupMetadata) -> None:
        """The broker's assignors keep no state."""

    def _fail(self, message: str) -> AssignorError:
        return AssignorError(self.name, message)


def _broker_member_order(spec: AssignmentSpec) -> list[str]:
    # The coordinator passes members in a default-sized HashMap keyed by member id.
    ids = list(spec.members)
    return hash_order(ids, java_string_hash, grown_capacity(len(ids)))


class UniformAssignor(_ServerAssignorBase):
    """``uniform``: the broker's default assignor, reproduced.

    Balanced (member counts differ by at most one when all members subscribe to
    the same topics; as close as its iterative balancing gets otherwise) and
    sticky (members keep their current partitions up to their share).

    - Homogeneous subscriptions: members are visited in the broker's hash-map
      order; the first ``P % N`` get a quota of ``P // N + 1``, the rest
      ``P // N``. Each keeps its current partitions up to its quota (in the order
      of its assignment, partitions ascending) and gives up the rest; then the
      unassigned partitions (new ones by topic in the broker's hash-set order,
      then the given-up ones) fill the members below quota in turn.
    - Heterogeneous subscriptions: members keep their current partitions of
      topics they still subscribe to; unassigned partitions go, topic by topic
      (most partitions per subscriber first), to the least loaded subscribers;
      then partitions move from the most to the least loaded subscribers of
      each topic until balanced or after 16 rounds.

    Raises AssignorError when a member subscribes to a topic missing from
    ``spec.topics``. With no members, or all members subscribed to nothing, the
    result has no members at all (as the broker's).
    """

    name = "uniform"

    def assign(self, spec: AssignmentSpec) -> TargetAssignment:
        """Compute the target assignment; see the class docstring."""
        if not spec.members:
            return TargetAssignment({})
        if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            result = self._homogeneous(spec)
        else:
            result = _Heterogeneous(spec, self._fail).build()
        # Computed in the broker's member order; reported in the caller's.
        return TargetAssignment({m: result.members[m] for m in spec.members if m in result.members})

    def _homogeneous(self, spec: AssignmentSpec) -> TargetAssignment:
        members = _broker_member_order(spec)
        topic_ids = spec.members[members[0]].subscribed_topic_ids
        if not topic_ids:
            return TargetAssignment({})
        topic_order = hash_order(
            sorted(topic_ids, key=uuid_order_key), java_uuid_hash, presized_capacity(len(topic_ids))
        )
        currently_assigned = {
            (t, p) for m in spec.members.values() for t, ps in m.assignment.items() for p in ps
        }
        unassigned: list[tuple[uuid.UUID, int]] = []
        total = 0
        for t in topic_order:
            topic = spec.topics.get(t)
            if topic is None:
                raise self._fail(
                    f"members are subscribed to topic {t} which doesn't exist in the topic metadata"
                )
            unassigned.extend(
                (t, p) for p in range(topic.num_partitions) if (t, p) not in currently_assigned
            )
            total += topic.num_partitions
        min_quota, extras = divmod(total, len(members))

        target: dict[str, dict[uuid.UUID, list[int]]] = {}
        unfilled: list[tuple[str, int]] = []
        for m in members:
            quota = min_quota
            if extras > 0:
                quota += 1
                extras -= 1
            kept: dict[uuid.UUID, list[int]] = {}
            for t, partitions in spec.members[m].assignment.items():
                if t not in topic_ids:
                    continue  # no longer subscribed: dropped, not re-offered
                ordered = sorted(partitions)
                if len(ordered) <= quota:
                    quota -= len(ordered)
                    kept[t] = ordered
                    continue
                kept[t] = ordered[:quota]
                unassigned.extend((t, p) for p in ordered[quota:])
                quota = 0
            if quota > 0:
                unfilled.append((m, quota))
            target[m] = kept

        position = 0
        for m, quota in unfilled:
            for t, p in unassigned[position : position + quota]:
                target[m].setdefault(t, []).append(p)
            position = min(position + quota, len(unassigned))
        if position < len(unassigned):
            raise self._fail("partitions were left unassigned")
        return TargetAssignment({m: MemberAssignment.of(a) for m, a in target.items()})


class _Balancer:
    """The broker's MemberAssignmentBalancer: least/most loaded member ranges.

    Members (indices) are sorted by load; a least-loaded range grows rightwards
    and a most-loaded range leftwards, each handing out members in turn; the
    loads are the live ``sizes`` list of the builder.
    """

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.order: list[int] = []
        self.least_end = 0
        self.least_count = -1
        self.next_least = 0
        self.most_start = 0
        self.most_end = 0
        self.most_count = 1
        self.next_most = -1

    def initialize(self, members: list[int]) -> int:
        sizes = self.sizes
        self.order = sorted(members, key=lambda i: (sizes[i], i))
        n = len(self.order)
        self.least_end = 0
        self.least_count = sizes[self.order[0]] - 1
        self.next_least = 0
        self.most_start = n
        self.most_end = n
        self.most_count = sizes[self.order[-1]] + 1
        self.next_most = n - 1
        return sizes[self.order[-1]] - sizes[self.order[0]]

    def next_least_loaded(self) -> int:
        if self.next_least >= self.least_end:
            # Everyone in the range got one more: raise its level and take in the
            # members that are now level with it.
            self.least_count += 1
            while (
                self.least_end < len(self.order)
                and self.sizes[self.order[self.least_end]] == self.least_count
            ):
                self.least_end += 1
            self.next_least = 0
        member = self.order[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # Exclusions emptied the range: restart from the next member down.
                self.most_count = self.sizes[self.order[self.most_start - 1]]
            else:
                self.most_count -= 1
            while (
                self.most_start > 0
                and self.sizes[self.order[self.most_start - 1]] == self.most_count
            ):
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = self.order[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        # Swap the member just returned to the end of the range and shrink it.
        i, j = self.next_most + 1, self.most_end - 1
        self.order[i], self.order[j] = self.order[j], self.order[i]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


class _Heterogeneous:
    """The broker's UniformHeterogeneousAssignmentBuilder."""

    _MAX_ROUNDS = 16

    def __init__(self, spec: AssignmentSpec, fail: _FailFn) -> None:
        self.spec = spec
        self.member_ids = _broker_member_order(spec)
        self.index = {m: i for i, m in enumerate(self.member_ids)}
        self.subscribers: dict[uuid.UUID, list[int]] = {}
        for i, m in enumerate(self.member_ids):
            for t in spec.members[m].subscribed_topic_ids:
                if t not in spec.topics:
                    raise fail(
                        f"members are subscribed to topic {t} which doesn't exist in the topic "
                        "metadata"
                    )
                self.subscribers.setdefault(t, []).append(i)
        self.sizes = [0] * len(self.member_ids)
        self.owners = {t: [-1] * spec.topics[t].num_partitions for t in self.subscribers}
        self.target: list[dict[uuid.UUID, set[int]]] = [{} for _ in self.member_ids]

    def _topic_key(self, t: uuid.UUID) -> tuple[float, int, tuple[int, int]]:
        # Most partitions per subscriber first, then fewest subscribers, then id.
        count = self.spec.topics[t].num_partitions
        subscribers = len(self.subscribers[t])
        return (-(count / subscribers), subscribers, uuid_order_key(t))

    def build(self) -> TargetAssignment:
        if not self.subscribers:
            return TargetAssignment({})
        # Keep current partitions of still-subscribed topics.
        for i, m in enumerate(self.member_ids):
            member = self.spec.members[m]
            for t, partitions in member.assignment.items():
                if t not in member.subscribed_topic_ids:
                    continue
                owners = self.owners[t]
                kept = {p for p in partitions if 0 <= p < len(owners)}
                self.target[i][t] = kept
                self.sizes[i] += len(kept)
                for p in kept:
                    owners[p] = i
        unassigned = {
            t: [p for p, o in enumerate(owners) if o == -1] for t, owners in self.owners.items()
        }
        balancer = _Balancer(self.sizes)
        for t in sorted((t for t, ps in unassigned.items() if ps), key=self._topic_key):
            balancer.initialize(self.subscribers[t])
            for p in unassigned[t]:
                self._move(t, p, balancer.next_least_loaded())
        self._balance()
        return TargetAssignment(
            {m: MemberAssignment.of(self.target[i]) for i, m in enumerate(self.member_ids)}
        )

    def _move(self, t: uuid.UUID, p: int, to: int) -> None:
        owners = self.owners[t]
        old = owners[p]
        if old != -1:
            partitions = self.target[old].get(t)
            if partitions is not None:
                partitions.discard(p)
                if not partitions:
                    del self.target[old][t]
            self.sizes[old] -= 1
        self.target[to].setdefault(t, set()).add(p)
        owners[p] = to
        self.sizes[to] += 1

    def _balance(self) -> None:
        topics = sorted(
            (t for t, s in self.subscribers.items() if len(s) >= 2), key=self._topic_key
        )
        if not topics:
            return
        balancer = _Balancer(self.sizes)
        last_changed = -1
        for _ in range(self._MAX_ROUNDS):
            for position, t in enumerate(topics):
                if position == last_changed:
                    return  # a whole round without a move
                moved = self._balance_topic(t, balancer)
                if moved > 0 or last_changed == -1:
                    last_changed = position

    def _balance_topic(self, t: uuid.UUID, balancer: _Balancer) -> int:
        if balancer.initialize(self.subscribers[t]) <= 1:
            return 0
        owners = self.owners[t]
        # Partitions grouped by owner, so each owner's are a slice [start, end).
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(partitions):
            start.setdefault(owners[p], i)
            end[owners[p]] = i + 1
        moved = 0
        while not balancer.is_balanced():
            giver = balancer.next_most_loaded()
            while giver != -1 and end.get(giver, 0) - start.get(giver, 0) <= 0:
                balancer.exclude_most_loaded()
                giver = balancer.next_most_loaded()
            if giver == -1:
                break
            end[giver] -= 1
            p = partitions[end[giver]]
            taker = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self._move(t, p, taker)
            moved += 1
        return moved


class RangeServerAssignor(_ServerAssignorBase):
    """``range`` as the broker computes it (not the classic client-side range).

    Members are ordered static first by instance id, then by member id. For each
    topic, its subscribers in that order take contiguous ranges: the first
    ``P % N`` get ``P // N + 1`` partitions, the others ``P // N``. With the same
    subscriptions and partition counts, each member gets the same partition
    numbers of every topic (co-partitioning). Not sticky beyond that order.

    Every member appears in the result (possibly with nothing). Raises
    AssignorError when a member subscribes to a topic missing from ``spec.topics``.
    """

    name = "range"

    def assign(self, spec: AssignmentSpec) -> TargetAssignment:
        """Compute the target assignment; see the class docstring."""
        if not spec.members:
            return TargetAssignment({})

        def order(m: str) -> tuple[int, str]:
            instance = spec.members[m].instance_id
            return (0, instance) if instance is not None else (1, m)

        members = sorted(spec.members, key=order)
        subscriber_count: dict[uuid.UUID, int] = {}
        for m in members:
            for t in spec.members[m].subscribed_topic_ids:
                if t not in spec.topics:
                    raise self._fail("member is subscribed to a non-existent topic")
                subscriber_count[t] = subscriber_count.get(t, 0) + 1
        next_start = dict.fromkeys(subscriber_count, 0)
        extras_left = {t: spec.topics[t].num_partitions % n for t, n in subscriber_count.items()}
        result: dict[str, MemberAssignment] = {}
        for m in members:
            partitions: dict[uuid.UUID, range] = {}
            for t in spec.members[m].subscribed_topic_ids:
                count = spec.topics[t].num_partitions
                quota = count // subscriber_count[t]
                if extras_left[t] > 0:
                    quota += 1
                    extras_left[t] -= 1
                first = next_start[t]
                last = min(first + quota, count)
                next_start[t] = last
                if first < last:
                    partitions[t] = range(first, last)
            result[m] = MemberAssignment.of(partitions)
        return TargetAssignment(result)


class _FailFn(Protocol):
    def __call__(self, message: str) -> AssignorError: ...
