"""The classic-protocol assignor interface and the values it works on.

In the classic protocol (JoinGroup/SyncGroup) the group leader runs the assignor
chosen by the coordinator: it gets every member's :class:`Subscription` and the
cluster metadata, and returns one :class:`Assignment` per member.

:class:`ConsumerPartitionAssignor` is a :class:`typing.Protocol` rather than an
abstract base class: an assignor is a small object with five members, and any
object that has them works (a kafka-python-style class can be adapted without
inheriting from kgroup). The protocol is ``runtime_checkable`` so that
:func:`kgroup.assignors.resolve_assignors` can reject objects that lack a member.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from kgroup.types import RebalanceProtocol, TopicPartition

__all__ = [
    "Assignment",
    "Cluster",
    "ConsumerPartitionAssignor",
    "GroupAssignment",
    "GroupMetadata",
    "GroupSubscription",
    "RebalanceProtocol",
    "Subscription",
]


@dataclass(frozen=True, slots=True)
class Subscription:
    """One member's subscription as the leader sees it in the JoinGroup response.

    Attributes:
        topics: the subscribed topic names.
        user_data: the assignor-specific bytes the member sent, if any.
        owned_partitions: the partitions the member owns (consumer protocol v1+;
            empty under eager, where members revoke before rejoining).
        generation_id: the generation the owned partitions belong to (v2+), if known.
        rack_id: the member's ``client.rack`` (v3+), if any.
        group_instance_id: the member's static instance id, if any. The JoinGroup
            response carries it next to the subscription; range and round-robin
            order static members by it so they keep their partitions across restarts.
    """

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int | None = None
    rack_id: str | None = None
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        # Accept any iterable (a list, a set) but store tuples so the value stays
        # immutable and hashable.
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "owned_partitions", tuple(self.owned_partitions))


@dataclass(frozen=True, slots=True)
class Cluster:
    """The cluster metadata an assignor may look at.

    Attributes:
        partition_counts: topic name -> number of partitions.
        replica_racks: partition -> racks of the brokers holding a replica of it.
            Only needed for rack-aware assignment (KIP-881); partitions left out
            have no known racks.
    """

    partition_counts: Mapping[str, int]
    replica_racks: Mapping[TopicPartition, frozenset[str]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def __post_init__(self) -> None:
        for topic, count in self.partition_counts.items():
            if count < 0:
                raise ValueError(f"topic {topic!r} has a negative partition count {count}")
        object.__setattr__(self, "partition_counts", MappingProxyType(dict(self.partition_counts)))
        object.__setattr__(
            self,
            "replica_racks",
            MappingProxyType({tp: frozenset(r) for tp, r in self.replica_racks.items()}),
        )

    def partitions_for(self, topic: str) -> int | None:
        """The partition count of ``topic``, or None if the metadata does not know it."""
        return self.partition_counts.get(topic)

    def racks_of(self, partition: TopicPartition) -> frozenset[str]:
        """The racks holding a replica of ``partition`` (empty if unknown)."""
        return self.replica_racks.get(partition, frozenset())

    def __hash__(self) -> int:
        return hash((frozenset(self.partition_counts.items()), frozenset(self.replica_racks)))


@dataclass(frozen=True, slots=True)
class Assignment:
    """What one member gets: its partitions, and assignor-specific bytes."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", tuple(self.partitions))


@dataclass(frozen=True, slots=True)
class GroupSubscription:
    """Every member's subscription, keyed by member id."""

    subscriptions: Mapping[str, Subscription]

    def __post_init__(self) -> None:
        object.__setattr__(self, "subscriptions", MappingProxyType(dict(self.subscriptions)))

    def __getitem__(self, member_id: str) -> Subscription:
        return self.subscriptions[member_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self.subscriptions)

    def __len__(self) -> int:
        return len(self.subscriptions)

    def __hash__(self) -> int:
        return hash(frozenset(self.subscriptions.items()))


@dataclass(frozen=True, slots=True)
class GroupAssignment:
    """Every member's assignment, keyed by member id.

    A member that the mapping leaves out gets an empty assignment.
    """

    assignments: Mapping[str, Assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "assignments", MappingProxyType(dict(self.assignments)))

    @classmethod
    def of(cls, partitions: Mapping[str, Iterable[TopicPartition]]) -> GroupAssignment:
        """Build from member id -> partitions, with no user data, partitions sorted."""
        return cls({m: Assignment(tuple(sorted(ps))) for m, ps in partitions.items()})

    def __getitem__(self, member_id: str) -> Assignment:
        return self.assignments[member_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self.assignments)

    def __len__(self) -> int:
        return len(self.assignments)

    def partitions(self, member_id: str) -> tuple[TopicPartition, ...]:
        """The partitions of ``member_id`` (empty if the member is not in the mapping)."""
        assignment = self.assignments.get(member_id)
        return () if assignment is None else assignment.partitions

    def __hash__(self) -> int:
        return hash(frozenset(self.assignments.items()))


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """What a member knows about its group when an assignment arrives."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@runtime_checkable
class ConsumerPartitionAssignor(Protocol):
    """A classic-protocol assignor: what the group leader runs between JoinGroup and SyncGroup.

    An implementation promises:

    - ``name`` is the protocol name sent in JoinGroup; every member of a group must
      give the same name to the same algorithm.
    - ``supported_protocols`` lists the rebalance protocols the assignor is safe
      under, preferred first. Only an assignor that never hands a partition owned
      by one member to another member in the same round may list COOPERATIVE.
    - ``subscription_user_data`` is called before every JoinGroup; what it returns
      reaches the leader's ``assign`` as :attr:`Subscription.user_data`.
    - ``assign`` is pure: it looks only at its arguments (and the assignor's
      configuration), returns an assignment covering the members it was given,
      and must pass :func:`kgroup.assignors.validate_assignment`.
    - ``on_assignment`` is called on every member with its own assignment after
      SyncGroup, before the rebalance listener.
    """

    @property
    def name(self) -> str:
        """The protocol name (``range``, ``cooperative-sticky`` ...)."""
        ...

    @property
    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        """The rebalance protocols this assignor supports, preferred first."""
        ...

    def subscription_user_data(self, topics: frozenset[str]) -> bytes | None:
        """Bytes to embed in this member's subscription, or None."""
        ...

    def assign(self, cluster: Cluster, subscriptions: GroupSubscription) -> GroupAssignment:
        """Compute every member's assignment (run by the leader only)."""
        ...

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:
        """Learn this member's assignment and the group generation it belongs to."""
        ...
