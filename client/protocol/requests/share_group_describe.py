"""ShareGroupDescribe (KIP-932): a share group's state, epochs, members and their assignments.

For the group tooling (:mod:`kgroup.admin`). A group id that is not a share
group's is answered with GROUP_ID_NOT_FOUND for that group.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow, partitions_by_name
from kgroup.types import TopicPartition

__all__ = ["DescribedShareGroup", "DescribedShareMember", "build", "narrow", "parse"]

API = ApiKey.SHARE_GROUP_DESCRIBE

if TYPE_CHECKING:
    import kio.schema.share_group_describe.v1.response as v1

    Response: TypeAlias = v1.ShareGroupDescribeResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


@dataclass(frozen=True, slots=True)
class DescribedShareMember:
    """One member of a share group.

    Attributes:
        member_id: its member id (the client's own).
        rack_id: its ``client.rack``, or None.
        member_epoch: its current epoch.
        client_id: its ``client.id``.
        client_host: the address it connected from.
        subscribed_topics: the topic names it subscribed to.
        assignment: the partitions it fetches from (other members may share them).
    """

    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topics: frozenset[str]
    assignment: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    """One described share group.

    Attributes:
        group_id: the group's id.
        error_code: the broker's error for this group (0: described);
            GROUP_ID_NOT_FOUND for an unknown group and for one of another type.
        error_message: the broker's message with it, or None.
        state: ``Empty``, ``Stable`` or ``Dead``.
        group_epoch: the epoch of the group's membership and subscriptions.
        assignment_epoch: the epoch of its assignment.
        assignor: the assignor that computed it.
        members: the members, in the broker's order.
    """

    group_id: str
    error_code: int
    error_message: str | None
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[DescribedShareMember, ...]


def build(versions: NegotiatedVersions, group_ids: Iterable[str]) -> RequestPayload:
    """A description of ``group_ids``, without their authorized operations."""
    return versions.new_request(
        API, group_ids=tuple(group_ids), include_authorized_operations=False
    )


def parse(response: Response) -> tuple[DescribedShareGroup, ...]:
    """Every described group, in the broker's order."""
    return tuple(
        DescribedShareGroup(
            group_id=str(g.group_id),
            error_code=int(g.error_code),
            error_message=g.error_message,
            state=g.group_state,
            group_epoch=int(g.group_epoch),
            assignment_epoch=int(g.assignment_epoch),
            assignor=g.assignor_name,
            members=tuple(
                DescribedShareMember(
                    member_id=m.member_id,
                    rack_id=m.rack_id,
                    member_epoch=int(m.member_epoch),
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topics=frozenset(str(t) for t in m.subscribed_topic_names),
                    assignment=partitions_by_name(m.assignment.topic_partitions),
                )
                for m in g.members
            ),
        )
        for g in response.groups
    )
