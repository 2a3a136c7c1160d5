"""DescribeGroups (v4+): a group as the classic protocol sees it.

For a classic group of ``protocol_type`` ``consumer``, each member's metadata is
its embedded subscription for the group's chosen protocol (the assignor) and its
assignment the embedded assignment the leader sent; :func:`parse` decodes both
with :mod:`kgroup.protocol.classic_payload`. Other protocol types (Kafka Connect
...) carry formats of their own, kept as bytes. A group the broker does not know
is described in state ``Dead`` with no members, not as an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

import kio.schema.describe_groups.v4.response as v4
import kio.schema.describe_groups.v5.response as v5
import kio.schema.describe_groups.v6.response as v6
from kio.static.protocol import RequestPayload

from kgroup.errors import ClassicPayloadError
from kgroup.membership import ClassicAssignment, MemberSubscription
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.classic_payload import (
    decode_assignment,
    decode_subscription,
    read_version,
)
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "DescribedClassicGroup",
    "DescribedClassicMember",
    "Response",
    "build",
    "narrow",
    "parse",
]

API = ApiKey.DESCRIBE_GROUPS

CONSUMER_PROTOCOL_TYPE: Final = "consumer"
"""The protocol type of consumer groups; only their member payloads are decoded."""

if TYPE_CHECKING:
    Response: TypeAlias = (
        v4.DescribeGroupsResponse | v5.DescribeGroupsResponse | v6.DescribeGroupsResponse
    )
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


@dataclass(frozen=True, slots=True)
class DescribedClassicMember:
    """One member of a described group.

    Attributes:
        member_id: the member id the coordinator gave it.
        instance_id: its ``group.instance.id`` (static member), or None.
        client_id: its ``client.id``.
        client_host: the address it connected from.
        metadata: its raw protocol metadata (the embedded subscription for
            consumer groups).
        assignment: its raw assignment bytes (empty before the first SyncGroup).
        subscription: ``metadata`` decoded, for consumer groups; None when it is
            empty, undecodable (see ``payload_error``) or another protocol type.
        subscription_version: the embedded subscription's version prefix, or None.
        decoded_assignment: ``assignment`` decoded likewise; None when empty,
            undecodable or another protocol type.
        payload_error: why an embedded payload of a consumer group did not
            decode, or None.
    """

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes
    subscription: MemberSubscription | None = None
    subscription_version: int | None = None
    decoded_assignment: ClassicAssignment | None = None
    payload_error: str | None = None


@dataclass(frozen=True, slots=True)
class DescribedClassicGroup:
    """One described group.

    Attributes:
        group_id: the group's id.
        error_code: the broker's error for this group (0: described).
        error_message: the broker's message with it (v6+), or None.
        state: ``Stable``, ``PreparingRebalance``, ``CompletingRebalance``,
            ``Empty`` or ``Dead`` (unknown group).
        protocol_type: ``consumer`` for consumer groups, else the group's own.
        protocol: the chosen protocol: for a consumer group, the assignor every
            member supports (``range``, ``cooperative-sticky`` ...); empty
            while none is chosen.
        members: the members, in the broker's order.
    """

    group_id: str
    error_code: int
    error_message: str | None
    state: str
    protocol_type: str
    protocol: str
    members: tuple[DescribedClassicMember, ...]


def build(versions: NegotiatedVersions, group_ids: Iterable[str]) -> RequestPayload:
    """A description of ``group_ids``, without their authorized operations."""
    return versions.new_request(API, groups=tuple(group_ids), include_authorized_operations=False)


_Member: TypeAlias = v4.DescribedGroupMember | v5.DescribedGroupMember | v6.DescribedGroupMember


def _member(m: _Member, consumer: bool) -> DescribedClassicMember:
    metadata, assignment = bytes(m.member_metadata), bytes(m.member_assignment)
    subscription: MemberSubscription | None = None
    version: int | None = None
    decoded: ClassicAssignment | None = None
    error: str | None = None
    if consumer:
        try:
            if metadata:
                version = read_version(metadata)
                subscription = decode_subscription(metadata)
            if assignment:
                decoded = decode_assignment(assignment)
        except ClassicPayloadError as exc:
            error = str(exc)
    return DescribedClassicMember(
        member_id=m.member_id,
        instance_id=m.group_instance_id,
        client_id=m.client_id,
        client_host=m.client_host,
        metadata=metadata,
        assignment=assignment,
        subscription=subscription,
        subscription_version=version,
        decoded_assignment=decoded,
        payload_error=error,
    )


def parse(response: Response) -> tuple[DescribedClassicGroup, ...]:
    """Every described group, its members' embedded payloads decoded where they are
    a consumer group's. Per-group errors are returned, not raised."""
    groups: list[DescribedClassicGroup] = []
    for g in response.groups:
        consumer = g.protocol_type == CONSUMER_PROTOCOL_TYPE
        groups.append(
            DescribedClassicGroup(
                group_id=str(g.group_id),
                error_code=int(g.error_code),
                error_message=g.error_message if isinstance(g, v6.DescribedGroup) else None,
                state=g.group_state,
                protocol_type=g.protocol_type,
                protocol=g.protocol_data,
                members=tuple(_member(m, consumer) for m in g.members),
            )
        )
    return tuple(groups)
