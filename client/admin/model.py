"""The values :mod:`kgroup.admin` returns: plain frozen dataclasses, no kio."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kgroup.protocol.apis import ApiKey, VersionRange
from kgroup.protocol.cluster import BrokerAddress
from kgroup.types import TopicPartition

if TYPE_CHECKING:
    from kgroup.protocol.requests.broker_features import BrokerFeatures

__all__ = [
    "BrokerInfo",
    "GroupDescription",
    "GroupLag",
    "GroupListing",
    "GroupType",
    "MemberDescription",
    "MemberProtocol",
    "PartitionLag",
    "ShareGroupOffsets",
    "SharePartitionOffset",
]


class GroupType(enum.Enum):
    """The kind of group a coordinator keeps (ListGroups v5's group type)."""

    CLASSIC = "classic"
    """JoinGroup / SyncGroup (also Kafka Connect and other classic users)."""
    CONSUMER = "consumer"
    """The consumer protocol (KIP-848), possibly with classic members in it."""
    SHARE = "share"
    STREAMS = "streams"
    UNKNOWN = "unknown"
    """A broker too old to say (ListGroups before v5), or a type kgroup does not know."""

    @classmethod
    def parse(cls, value: str | None) -> GroupType:
        """The type a broker spelled (case-insensitive); UNKNOWN for None or a new name."""
        try:
            return cls((value or "").lower())
        except ValueError:
            return cls.UNKNOWN


class MemberProtocol(enum.Enum):
    """Which group protocol a member speaks."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"
    """A member of a share group (KIP-932): it fetches from partitions other members may share."""
    UNKNOWN = "unknown"
    """A consumer group described by a broker that does not say (ConsumerGroupDescribe v0)."""


@dataclass(frozen=True, slots=True)
class GroupListing:
    """One group of the cluster, as ListGroups lists it.

    Attributes:
        group_id: the group's id.
        group_type: its type (UNKNOWN from a broker before Kafka 4.0).
        protocol_type: ``consumer`` for consumer groups of either protocol.
        state: the state as the broker spells it.
        coordinator: the node id of the broker that listed it (its coordinator).
    """

    group_id: str
    group_type: GroupType
    protocol_type: str
    state: str
    coordinator: int


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """One member of a group, whichever protocol describes it.

    Attributes:
        member_id: its member id.
        instance_id: its ``group.instance.id`` (a static member), or None.
        client_id: its ``client.id``.
        client_host: the address it connected from.
        rack_id: its ``client.rack`` when the broker reports it, else None.
        protocol: the protocol it speaks: every member of a classic group is
            CLASSIC; in a consumer group, ConsumerGroupDescribe v1 says.
        member_epoch: its epoch in a consumer group; None in a classic group.
        subscribed_topics: the topics it subscribed to.
        subscribed_regex: the regex it subscribed with (consumer protocol), or None.
        assignment: the partitions it owns.
        target_assignment: the partitions the coordinator wants it to own (consumer
            groups only; None in a classic group).
        owned_partitions: the partitions its embedded subscription says it owns
            (classic cooperative members), else empty.
        subscription_version: the version of its embedded subscription (classic groups).
        subscription_user_data: the user data in its embedded subscription, or None.
        assignment_user_data: the user data the leader's assignor put in its
            assignment, or None. Non-empty user data here stops an online upgrade.
        payload_error: why its embedded subscription or assignment did not decode.
    """

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    protocol: MemberProtocol
    rack_id: str | None = None
    member_epoch: int | None = None
    subscribed_topics: frozenset[str] = frozenset()
    subscribed_regex: str | None = None
    assignment: frozenset[TopicPartition] = frozenset()
    target_assignment: frozenset[TopicPartition] | None = None
    owned_partitions: frozenset[TopicPartition] = frozenset()
    subscription_version: int | None = None
    subscription_user_data: bytes | None = None
    assignment_user_data: bytes | None = None
    payload_error: str | None = None

    @property
    def is_static(self) -> bool:
        """Whether it is a static member (has a ``group.instance.id``)."""
        return self.instance_id is not None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """One group: its type, state, epochs and members.

    Attributes:
        group_id: the group's id.
        group_type: CLASSIC (described by DescribeGroups), CONSUMER
            (ConsumerGroupDescribe) or SHARE (ShareGroupDescribe).
        protocol_type: ``consumer`` for consumer groups (a classic group of
            another kind, such as Kafka Connect, has its own), ``share`` for a share group.
        state: the state as the broker spells it (``Stable``, ``Empty`` ...).
        assignor: the classic group's chosen protocol (its assignor, such as
            ``cooperative-sticky``), or the consumer group's server-side assignor.
        group_epoch: a consumer or share group's epoch; None for a classic group.
        assignment_epoch: a consumer or share group's assignment epoch; None for classic.
        coordinator: the broker coordinating the group.
        members: the members, sorted by member id.
    """

    group_id: str
    group_type: GroupType
    protocol_type: str
    state: str
    assignor: str
    coordinator: BrokerAddress
    members: tuple[MemberDescription, ...] = ()
    group_epoch: int | None = None
    assignment_epoch: int | None = None

    @property
    def classic_members(self) -> tuple[MemberDescription, ...]:
        """The members speaking the classic protocol."""
        return tuple(m for m in self.members if m.protocol is MemberProtocol.CLASSIC)

    @property
    def consumer_members(self) -> tuple[MemberDescription, ...]:
        """The members speaking the consumer protocol."""
        return tuple(m for m in self.members if m.protocol is MemberProtocol.CONSUMER)

    @property
    def is_empty(self) -> bool:
        """Whether the group has no members (it may still have committed offsets)."""
        return not self.members

    def unowned_partitions(
        self, partition_counts: Mapping[str, int]
    ) -> frozenset[TopicPartition] | None:
        """Partitions of the topics the members subscribe to that no member holds.

        None when the group is not settled (``Stable``): during a rebalance
        partitions are legitimately unowned for a moment. A settled group with
        unowned partitions is stuck: nothing will assign them until a member
        joins or leaves (``docs/reliability.md``). A partition counts as held
        when it is in a member's assignment or, in a consumer group, in its
        target (it is on its way there), or, in a classic group, in the owned
        partitions of a cooperative member's last JoinGroup: between the two
        rounds of a cooperative rebalance the first round gives the partitions
        it moves to nobody, and the member giving them up owes the second round
        (a slow revoke callback keeps the group so for as long as it runs).
        ``partition_counts`` gives each topic's
        partition count; topics missing from it (unknown, or subscribed by
        regex) are left out.
        """
        if self.state.lower() != "stable":
            return None
        topics = {topic for m in self.members for topic in m.subscribed_topics}
        held: set[TopicPartition] = set()
        for m in self.members:
            held |= m.assignment
            held |= m.target_assignment or frozenset()
            held |= m.owned_partitions
        wanted = {
            TopicPartition(topic, p)
            for topic in topics
            if topic in partition_counts
            for p in range(partition_counts[topic])
        }
        return frozenset(wanted - held)


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """A partition a group consumes or has committed offsets for.

    Attributes:
        partition: the partition.
        committed: the group's committed offset, or None when it has none.
        log_end: the partition's log end offset (high watermark), or None when
            the leader could not say (topic deleted ...).
        member_id: the member that owns it now, or None.
        instance_id: that member's ``group.instance.id``, or None.
        client_id: that member's ``client.id``, or None.
        client_host: that member's host, or None.
    """

    partition: TopicPartition
    committed: int | None
    log_end: int | None
    member_id: str | None = None
    instance_id: str | None = None
    client_id: str | None = None
    client_host: str | None = None

    @property
    def lag(self) -> int | None:
        """Records between the committed offset and the log end; None when either is unknown."""
        if self.committed is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.committed)


@dataclass(frozen=True, slots=True)
class GroupLag:
    """A group's description and the lag of each of its partitions (sorted)."""

    group: GroupDescription
    partitions: tuple[PartitionLag, ...]

    @property
    def total(self) -> int:
        """The sum of the known lags."""
        return sum(p.lag for p in self.partitions if p.lag is not None)


@dataclass(frozen=True, slots=True)
class SharePartitionOffset:
    """A partition of a share group: where the group stands on it and what is left.

    Attributes:
        partition: the partition.
        start_offset: the share-partition start offset: every record below it is
            acknowledged (or archived); None when the group has no state for the
            partition yet (no member fetched from it).
        log_end: the partition's log end offset (high watermark), or None when
            the leader could not say.
        broker_lag: the lag the broker reports (Kafka 4.2+, KIP-1226): records at or
            after the start offset not yet acknowledged; None from an older broker.
    """

    partition: TopicPartition
    start_offset: int | None
    log_end: int | None
    broker_lag: int | None = None

    @property
    def lag(self) -> int | None:
        """Records still to be delivered and acknowledged: the broker's count when it
        gives one, else the log end minus the start offset (an upper bound: records
        acknowledged above the start offset still count); None when unknown."""
        if self.broker_lag is not None:
            return self.broker_lag
        if self.start_offset is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.start_offset)


@dataclass(frozen=True, slots=True)
class ShareGroupOffsets:
    """A share group's description and the start offset and lag of each partition
    it has state for or is assigned (sorted)."""

    group: GroupDescription
    partitions: tuple[SharePartitionOffset, ...]

    @property
    def total(self) -> int:
        """The sum of the known lags."""
        return sum(p.lag for p in self.partitions if p.lag is not None)


def _no_features() -> BrokerFeatures:
    # Imported here: a consumer's look at its own group reads this module, and
    # the ApiVersions schemas behind BrokerFeatures cost it 8 ms of start.
    from kgroup.protocol.requests.broker_features import BrokerFeatures  # noqa: PLC0415

    return BrokerFeatures()


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One broker and what it answered to ApiVersions: its API versions and feature levels.

    Attributes:
        node: the broker.
        features: its API ranges, supported and finalized feature levels and
            their epoch (``group.version`` 1 or more: the consumer protocol is
            enabled).
    """

    node: BrokerAddress
    features: BrokerFeatures = field(default_factory=_no_features)

    # The migration checks and their callers read a broker's features by these
    # names; they are views of ``features``, which holds the one copy.
    @property
    def supported_features(self) -> Mapping[str, VersionRange]:
        """The level range of each feature the broker supports, by name."""
        return self.features.supported

    @property
    def finalized_features(self) -> Mapping[str, int]:
        """The cluster-wide finalized level of each feature, by name."""
        return self.features.finalized

    def feature_level(self, feature: str) -> int:
        """The finalized level of ``feature`` (0 when the cluster has not finalized it)."""
        return self.features.level(feature)

    def api_range(self, api: ApiKey) -> VersionRange | None:
        """The broker's version range of ``api``, or None when it lacks the API."""
        return self.features.api_range(api)
