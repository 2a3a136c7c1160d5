"""A consumer group (KIP-848) as ConsumerGroupDescribe sees it, and nothing more.

Split from :mod:`kgroup.admin.groups` for the group look of an idle consumer
(:mod:`kgroup.runtime.group_look`): importing every describe and offset tool
to read its own group cost each member about 2 MiB of resident memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from kgroup.admin.model import GroupDescription, GroupType, MemberDescription, MemberProtocol
from kgroup.errors import GroupIdNotFoundError, raise_for_error
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.requests import consumer_group_members
from kgroup.protocol.requests.consumer_group_members import DescribedConsumerGroup, MemberType

if TYPE_CHECKING:
    from kio.static.protocol import RequestPayload, ResponsePayload

    from kgroup.protocol.cluster import BrokerAddress
    from kgroup.protocol.negotiation import NegotiatedVersions
    from kgroup.transport.client import KafkaClient

__all__ = ["consumer_description", "describe_consumer", "describe_typed", "no_such_group"]

CONSUMER_PROTOCOL_TYPE: Final = "consumer"
"""A consumer group's protocol type (as DescribeGroups reports it)."""

_MEMBER_TYPES: Final = {
    MemberType.CLASSIC: MemberProtocol.CLASSIC,
    MemberType.CONSUMER: MemberProtocol.CONSUMER,
    MemberType.UNKNOWN: MemberProtocol.UNKNOWN,
}


def no_such_group(group_id: str) -> GroupIdNotFoundError:
    """GROUP_ID_NOT_FOUND for ``group_id``, saying how to check the name."""
    return GroupIdNotFoundError(
        int(ErrorCode.group_id_not_found),
        "GROUP_ID_NOT_FOUND",
        False,
        f"group {group_id!r} does not exist (check the name with `kgroup groups list`)",
    )


class _Described(Protocol):
    @property
    def error_code(self) -> int: ...

    @property
    def error_message(self) -> str | None: ...


_G = TypeVar("_G", bound=_Described)


async def describe_typed(
    client: KafkaClient,
    group_id: str,
    api: ApiKey,
    build: Callable[[NegotiatedVersions, list[str]], RequestPayload],
    read: Callable[[ResponsePayload], tuple[_G, ...]],
) -> tuple[_G, BrokerAddress] | None:
    """The group as one group type's describe API (``api``) sees it; None when it is
    not a group of that type (or the coordinator lacks the API or has it disabled)."""
    coordinator = await client.coordinator(group_id)
    versions = await client.versions(coordinator.node_id)
    if not versions.supports(api):
        return None
    response = await client.request(lambda v: build(v, [group_id]), node=coordinator.node_id)
    (group,) = read(response)
    if group.error_code in (ErrorCode.group_id_not_found, ErrorCode.unsupported_version):
        return None
    raise_for_error(group.error_code, group.error_message)
    return group, coordinator


async def describe_consumer(
    client: KafkaClient, group_id: str
) -> tuple[DescribedConsumerGroup, BrokerAddress] | None:
    """The group as ConsumerGroupDescribe sees it; None when it is not a consumer group
    (or the coordinator lacks the API or has the consumer protocol disabled)."""
    return await describe_typed(
        client,
        group_id,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        consumer_group_members.build,
        lambda response: consumer_group_members.parse(consumer_group_members.narrow(response)),
    )


def consumer_description(
    group: DescribedConsumerGroup, coordinator: BrokerAddress
) -> GroupDescription:
    """What :func:`kgroup.admin.describe_group` returns for a consumer group."""
    members = tuple(
        MemberDescription(
            member_id=m.member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            protocol=_MEMBER_TYPES[m.member_type],
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            subscribed_topics=m.subscribed_topics,
            subscribed_regex=m.subscribed_regex,
            assignment=m.assignment,
            target_assignment=m.target_assignment,
        )
        for m in group.members
    )
    return GroupDescription(
        group_id=group.group_id,
        group_type=GroupType.CONSUMER,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        state=group.state,
        assignor=group.assignor,
        coordinator=coordinator,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
    )
