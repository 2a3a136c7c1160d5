"""Plain values of the classic protocol's embedded consumer protocol.

These are what a classic member puts in JoinGroup (one subscription per
assignor) and gets back from SyncGroup (its assignment). They are decoded
from and encoded to bytes by :mod:`kgroup.protocol.classic_payload`, so the
membership package stays free of kio.
"""

from __future__ import annotations

from dataclasses import dataclass

from kgroup.types import TopicPartition

__all__ = ["ClassicAssignment", "GroupMember", "MemberSubscription"]


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member's ConsumerProtocolSubscription (v0-v3).

    Attributes:
        topics: the subscribed topic names (encoded sorted).
        user_data: the assignor's opaque data, or None.
        owned_partitions: the partitions the member owns (v1+; empty when eager).
        generation_id: the generation those partitions were owned in (v2+; -1 none).
        rack_id: ``client.rack`` (v3+), or None.
    """

    topics: frozenset[str] = frozenset()
    user_data: bytes | None = None
    owned_partitions: frozenset[TopicPartition] = frozenset()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class ClassicAssignment:
    """One classic member's assignment as SyncGroup carries it: partitions and user data.

    The ConsumerProtocolAssignment embedded in SyncGroup (not the new
    protocol's :class:`kgroup.assignors.modern.MemberAssignment`).
    """

    partitions: frozenset[TopicPartition] = frozenset()
    user_data: bytes | None = None


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A member listed in the leader's JoinGroup response, its subscription decoded.

    ``protocol_version`` is the version prefix of the embedded subscription
    (newer than 3 is read as 3, as the Java client does).
    """

    member_id: str
    subscription: MemberSubscription
    instance_id: str | None = None
    protocol_version: int = 3
