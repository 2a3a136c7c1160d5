"""ConsumerGroupDescribe read in full: epochs, members, assignments, targets, member types.

:mod:`~kgroup.protocol.requests.consumer_group_describe` builds the request and
reads only the per-group error codes (what ``group.protocol=auto`` needs); this
module reads everything else, for the group tooling (:mod:`kgroup.admin`). From
v1 (Kafka 4.x) each member says whether it speaks the consumer protocol or is a
classic member of a converted group.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from kio.static.protocol import RequestPayload

from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests import consumer_group_describe
from kgroup.protocol.requests._common import partitions_by_name
from kgroup.types import TopicPartition

if TYPE_CHECKING:
    # Types only: the decoder imports the one version the broker answers with.
    import kio.schema.consumer_group_describe.v0.response as v0
    import kio.schema.consumer_group_describe.v1.response as v1

    from kgroup.protocol.requests.consumer_group_describe import Response

__all__ = [
    "DescribedConsumerGroup",
    "DescribedConsumerMember",
    "MemberType",
    "build",
    "narrow",
    "parse",
]

narrow: Final = consumer_group_describe.narrow
"""``payload`` as a ConsumerGroupDescribe response."""


class MemberType(enum.IntEnum):
    """Which protocol a member of a consumer group speaks (v1's MemberType)."""

    UNKNOWN = -1
    """A v0 response, which does not say."""
    CLASSIC = 0
    """A classic member (JoinGroup / SyncGroup) of a converted group."""
    CONSUMER = 1
    """A consumer-protocol member (ConsumerGroupHeartbeat)."""


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    """One member of a consumer group.

    Attributes:
        member_id: its member id.
        instance_id: its ``group.instance.id``, or None.
        rack_id: its ``client.rack``, or None.
        member_epoch: its current epoch.
        client_id: its ``client.id``.
        client_host: the address it connected from.
        subscribed_topics: the topic names it subscribed to.
        subscribed_regex: the regex it subscribed with, or None.
        assignment: the partitions it owns now.
        target_assignment: the partitions the coordinator wants it to own.
        member_type: which protocol it speaks.
    """

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topics: frozenset[str]
    subscribed_regex: str | None
    assignment: frozenset[TopicPartition]
    target_assignment: frozenset[TopicPartition]
    member_type: MemberType


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    """One described consumer group.

    Attributes:
        group_id: the group's id.
        error_code: the broker's error for this group (0: described);
            GROUP_ID_NOT_FOUND for an unknown group and for a classic one.
        error_message: the broker's message with it, or None.
        state: ``Empty``, ``Assigning``, ``Reconciling``, ``Stable`` or ``Dead``.
        group_epoch: the epoch of the group's membership and subscriptions.
        assignment_epoch: the epoch of its target assignment.
        assignor: the server-side assignor that computed the target.
        members: the members, in the broker's order.
    """

    group_id: str
    error_code: int
    error_message: str | None
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[DescribedConsumerMember, ...]


def build(versions: NegotiatedVersions, group_ids: Iterable[str]) -> RequestPayload:
    """A description of ``group_ids``
    (:func:`kgroup.protocol.requests.consumer_group_describe.build`)."""
    return consumer_group_describe.build(versions, group_ids)


def _partitions(a: v0.Assignment | v1.Assignment) -> frozenset[TopicPartition]:
    return partitions_by_name(a.topic_partitions)


def _member(m: v0.Member | v1.Member) -> DescribedConsumerMember:
    # v0 members have no member type.
    raw_type = int(getattr(m, "member_type", MemberType.UNKNOWN))
    return DescribedConsumerMember(
        member_id=m.member_id,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        member_epoch=int(m.member_epoch),
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topics=frozenset(str(t) for t in m.subscribed_topic_names),
        subscribed_regex=m.subscribed_topic_regex or None,
        assignment=_partitions(m.assignment),
        target_assignment=_partitions(m.target_assignment),
        # A type a newer broker invents reads as unknown rather than failing.
        member_type=MemberType(raw_type) if raw_type in (0, 1) else MemberType.UNKNOWN,
    )


def parse(response: Response) -> tuple[DescribedConsumerGroup, ...]:
    """Every described group; per-group errors are returned, not raised."""
    return tuple(
        DescribedConsumerGroup(
            group_id=str(g.group_id),
            error_code=int(g.error_code),
            error_message=g.error_message,
            state=g.group_state,
            group_epoch=int(g.group_epoch),
            assignment_epoch=int(g.assignment_epoch),
            assignor=g.assignor_name,
            members=tuple(_member(m) for m in g.members),
        )
        for g in response.groups
    )
