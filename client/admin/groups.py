"""Reading groups, offsets, broker features and configs from a cluster.

Every function takes an entered :class:`~kgroup.transport.KafkaClient` and
returns the frozen values of :mod:`kgroup.admin.model`. They only read: nothing
here joins, commits to or changes a group.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Final, TypeVar

import anyio
from kio.schema.errors import ErrorCode

from kgroup.admin._consumer_group import (
    consumer_description,
    describe_consumer,
    describe_typed,
    no_such_group,
)
from kgroup.admin.model import (
    BrokerInfo,
    GroupDescription,
    GroupLag,
    GroupListing,
    GroupType,
    MemberDescription,
    MemberProtocol,
    PartitionLag,
)
from kgroup.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    NotCoordinatorError,
    broker_error,
    raise_for_error,
)
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.cluster import BrokerAddress
from kgroup.protocol.requests import (
    broker_features,
    describe_groups,
    group_offsets,
    list_offsets,
    share_group_describe,
)
from kgroup.protocol.requests import describe_configs as describe_configs_request
from kgroup.protocol.requests import list_groups as list_groups_request
from kgroup.protocol.requests.describe_configs import (
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    DescribedConfigs,
)
from kgroup.protocol.requests.describe_groups import DescribedClassicGroup
from kgroup.protocol.requests.list_offsets import IsolationLevel, ListedOffset
from kgroup.protocol.requests.share_group_describe import DescribedShareGroup
from kgroup.transport.client import KafkaClient
from kgroup.types import TopicPartition

__all__ = [
    "broker_configs",
    "broker_info",
    "committed_offsets",
    "describe_configs",
    "describe_group",
    "end_offsets",
    "group_configs",
    "group_lag",
    "list_groups",
]

log = logging.getLogger("kgroup.admin")

_T = TypeVar("_T")

# The per-group errors that mean "ask the coordinator again": the coordinator
# moved or is loading the group. Responses carrying them per group (not at the
# top level) are not retried by KafkaClient.coordinator_request.
_COORDINATOR_ERRORS: Final = (
    NotCoordinatorError,
    CoordinatorNotAvailableError,
    CoordinatorLoadInProgressError,
)
_ATTEMPTS: Final = 10
_RETRY_DELAY: Final = 0.2
# Rounds of ListOffsets: a leader that moved since the metadata answers
# NOT_LEADER_OR_FOLLOWER; refreshed metadata names the new one.
_OFFSET_ROUNDS: Final = 3


async def _with_coordinator(
    client: KafkaClient, group_id: str, attempt: Callable[[], Awaitable[_T]]
) -> _T:
    """Run ``attempt`` until it does not fail because the group's coordinator moved."""
    for tries in range(_ATTEMPTS):
        try:
            return await attempt()
        except _COORDINATOR_ERRORS as exc:
            if tries == _ATTEMPTS - 1:
                raise
            log.debug("group %r: %s; looking up its coordinator again", group_id, exc)
            client.mark_coordinator_stale(group_id)
            await anyio.sleep(_RETRY_DELAY)
    raise AssertionError("unreachable: the last attempt returns or raises")


# ----------------------------------------------------------------- listing


async def list_groups(
    client: KafkaClient,
    *,
    types: Iterable[GroupType] = (),
    states: Iterable[str] = (),
) -> tuple[GroupListing, ...]:
    """Every group of the cluster, sorted by group id.

    Each broker lists the groups it coordinates, so every broker is asked.
    ``types`` / ``states`` filter (empty: all); a broker before Kafka 4.0 cannot
    say a group's type, so filtering by type drops its groups.

    Raises:
        BrokerError: a broker refused (GROUP_AUTHORIZATION_FAILED ...).
        TransportError: a broker could not be reached.
    """
    wanted_types = frozenset(types)
    type_names = tuple(sorted(t.value for t in wanted_types))
    state_names = tuple(states)
    cluster = await client.metadata(())
    found: dict[str, GroupListing] = {}
    for node_id in sorted(cluster.brokers):
        for attempt in range(_ATTEMPTS):
            response = await client.request(
                lambda v: list_groups_request.build(v, states=state_names, types=type_names),
                node=node_id,
            )
            try:
                listed = list_groups_request.parse(list_groups_request.narrow(response))
            except CoordinatorLoadInProgressError:
                if attempt == _ATTEMPTS - 1:
                    raise
                await anyio.sleep(_RETRY_DELAY)
                continue
            break
        for group in listed:
            listing = GroupListing(
                group_id=group.group_id,
                group_type=GroupType.parse(group.group_type),
                protocol_type=group.protocol_type,
                state=group.state,
                coordinator=node_id,
            )
            if wanted_types and listing.group_type not in wanted_types:
                continue
            found[listing.group_id] = listing
    return tuple(found[g] for g in sorted(found))


# -------------------------------------------------------------- describing


def _classic_description(
    group: DescribedClassicGroup, coordinator: BrokerAddress
) -> GroupDescription:
    members: list[MemberDescription] = []
    for m in group.members:
        sub, assignment = m.subscription, m.decoded_assignment
        members.append(
            MemberDescription(
                member_id=m.member_id,
                instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                protocol=MemberProtocol.CLASSIC,
                rack_id=None if sub is None else sub.rack_id,
                subscribed_topics=frozenset() if sub is None else sub.topics,
                assignment=frozenset() if assignment is None else assignment.partitions,
                owned_partitions=frozenset() if sub is None else sub.owned_partitions,
                subscription_version=m.subscription_version,
                subscription_user_data=None if sub is None else sub.user_data,
                assignment_user_data=None if assignment is None else assignment.user_data,
                payload_error=m.payload_error,
            )
        )
    return GroupDescription(
        group_id=group.group_id,
        group_type=GroupType.CLASSIC,
        protocol_type=group.protocol_type,
        state=group.state,
        assignor=group.protocol,
        coordinator=coordinator,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
    )


def _share_description(group: DescribedShareGroup, coordinator: BrokerAddress) -> GroupDescription:
    members = tuple(
        MemberDescription(
            member_id=m.member_id,
            instance_id=None,
            client_id=m.client_id,
            client_host=m.client_host,
            protocol=MemberProtocol.SHARE,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            subscribed_topics=m.subscribed_topics,
            assignment=m.assignment,
        )
        for m in group.members
    )
    return GroupDescription(
        group_id=group.group_id,
        group_type=GroupType.SHARE,
        protocol_type=GroupType.SHARE.value,
        state=group.state,
        assignor=group.assignor,
        coordinator=coordinator,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
    )


async def _describe_share(client: KafkaClient, group_id: str) -> GroupDescription | None:
    """The group as ShareGroupDescribe sees it; None when it is not a share group
    (or the coordinator lacks the API)."""
    share = await describe_typed(
        client,
        group_id,
        ApiKey.SHARE_GROUP_DESCRIBE,
        share_group_describe.build,
        lambda response: share_group_describe.parse(share_group_describe.narrow(response)),
    )
    return None if share is None else _share_description(*share)


async def _describe_classic(
    client: KafkaClient, group_id: str
) -> tuple[DescribedClassicGroup, BrokerAddress]:
    coordinator = await client.coordinator(group_id)
    response = await client.request(
        lambda v: describe_groups.build(v, [group_id]), node=coordinator.node_id
    )
    (group,) = describe_groups.parse(describe_groups.narrow(response))
    raise_for_error(group.error_code, group.error_message)
    return group, coordinator


async def describe_group_once(client: KafkaClient, group_id: str) -> GroupDescription:
    """:func:`describe_group` without its retries when the coordinator moved.

    For a consumer looking at its own group: a retry would mark the group's
    coordinator stale, closing the connection the member's heartbeats use.

    Raises:
        GroupIdNotFoundError: the coordinator knows no such group.
        BrokerError: another refusal (NOT_COORDINATOR, GROUP_AUTHORIZATION_FAILED ...).
        TransportError: the coordinator could not be reached.
    """
    consumer = await describe_consumer(client, group_id)
    if consumer is not None:
        return consumer_description(*consumer)
    return await describe_other_group_once(client, group_id)


async def describe_other_group_once(client: KafkaClient, group_id: str) -> GroupDescription:
    """:func:`describe_group_once` for a group ConsumerGroupDescribe did not find:
    a classic group, or a share group."""
    try:
        classic, coordinator = await _describe_classic(client, group_id)
    except GroupIdNotFoundError:
        share = await _describe_share(client, group_id)
        if share is not None:
            return share
        raise
    if classic.state == "Dead":
        share = await _describe_share(client, group_id)
        if share is not None:
            return share
    return _classic_description(classic, coordinator)


async def describe_group(client: KafkaClient, group_id: str) -> GroupDescription:
    """The group ``group_id``: type, state, epochs, members with their protocol and assignment.

    A consumer group (KIP-848, possibly with classic members) is read with
    ConsumerGroupDescribe; a classic group with DescribeGroups, its members'
    embedded subscriptions and assignments decoded; a share group (KIP-932) with
    ShareGroupDescribe (its start offsets and lag: :func:`kgroup.admin.share.share_group_offsets`).

    Raises:
        GroupIdNotFoundError: the coordinator knows no such group.
        BrokerError: another refusal (GROUP_AUTHORIZATION_FAILED ...).
        TransportError: the coordinator could not be reached.
    """

    async def attempt() -> GroupDescription:
        consumer = await describe_consumer(client, group_id)
        if consumer is not None:
            return consumer_description(*consumer)
        try:
            classic, coordinator = await _describe_classic(client, group_id)
        except GroupIdNotFoundError:
            # The group may have been converted between the two requests (a
            # consumer-protocol member joined): DescribeGroups then answers "not a
            # classic group". Ask ConsumerGroupDescribe once more before giving up.
            consumer = await describe_consumer(client, group_id)
            if consumer is not None:
                return consumer_description(*consumer)
            # DescribeGroups knows only classic groups: a share group is "not found" there.
            share = await _describe_share(client, group_id)
            if share is not None:
                return share
            raise
        if classic.state == "Dead":
            share = await _describe_share(client, group_id)
            if share is not None:
                return share
            raise no_such_group(group_id)
        return _classic_description(classic, coordinator)

    return await _with_coordinator(client, group_id, attempt)


# ------------------------------------------------------------------ offsets


async def committed_offsets(client: KafkaClient, group_id: str) -> dict[TopicPartition, int]:
    """Every offset ``group_id`` has committed, by partition (read stably, as a non-member).

    Raises:
        BrokerError: the coordinator refused (GROUP_AUTHORIZATION_FAILED ...).
        TransportError: it could not be reached.
    """
    # A v10 answer names topics by id; the names come from the cluster's metadata.
    cluster = await client.metadata(None)
    names = {info.topic_id: name for name, info in cluster.topics.items()}

    async def attempt() -> dict[TopicPartition, int]:
        coordinator = await client.coordinator(group_id)
        response = await client.request(
            lambda v: group_offsets.build(v, group_id), node=coordinator.node_id
        )
        parsed = group_offsets.parse(group_offsets.narrow(response), names)
        return {tp: offset for tp, offset in parsed.items() if offset is not None}

    return await _with_coordinator(client, group_id, attempt)


async def end_offsets(
    client: KafkaClient,
    partitions: Collection[TopicPartition],
    *,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> dict[TopicPartition, int]:
    """The log end offset of each of ``partitions``, asked of its leader.

    A partition whose topic no longer exists, or whose leader keeps failing, is
    left out (logged). Leaders are asked concurrently.

    Raises:
        TransportError: a leader could not be reached.
    """
    result: dict[TopicPartition, int] = {}
    pending = set(partitions)
    for _round in range(_OFFSET_ROUNDS):
        if not pending:
            break
        cluster = await client.metadata(sorted({tp.topic for tp in pending}))
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(pending):
            info = cluster.topics.get(tp.topic)
            part = None if info is None else info.partitions.get(tp.partition)
            if part is None:
                log.info("%s is not in the cluster metadata; no end offset", tp)
                pending.discard(tp)
            elif part.leader >= 0:
                by_leader.setdefault(part.leader, []).append(tp)
        answers: dict[TopicPartition, ListedOffset] = {}
        async with anyio.create_task_group() as tasks:
            for leader, tps in by_leader.items():
                tasks.start_soon(_ask_leader, client, leader, tps, isolation, answers)
        for tp, listed in answers.items():
            if listed.error_code == ErrorCode.none:
                result[tp] = listed.offset
                pending.discard(tp)
            else:
                log.info("end offset of %s: %s", tp, broker_error(listed.error_code))
    for tp in sorted(pending):
        log.warning("no end offset for %s after %d attempts", tp, _OFFSET_ROUNDS)
    return result


async def _ask_leader(
    client: KafkaClient,
    leader: int,
    partitions: list[TopicPartition],
    isolation: IsolationLevel,
    answers: dict[TopicPartition, ListedOffset],
) -> None:
    response = await client.request(
        lambda v: list_offsets.build(v, partitions, isolation=isolation), node=leader
    )
    answers.update(list_offsets.parse(list_offsets.narrow(response)))


async def group_lag(
    client: KafkaClient,
    group_id: str,
    *,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
) -> GroupLag:
    """The group's description and, for every partition it owns or committed, the
    committed offset, the log end offset and the lag, with the owning member.

    Raises:
        GroupIdNotFoundError: the group does not exist (no members, no offsets).
        BrokerError, TransportError: as :func:`describe_group`.
    """
    group = await describe_group(client, group_id)
    committed = await committed_offsets(client, group_id)
    owners: dict[TopicPartition, MemberDescription] = {}
    for member in group.members:
        for tp in member.assignment:
            owners[tp] = member
    partitions = set(committed) | set(owners)
    ends = await end_offsets(client, partitions, isolation=isolation)
    lags: list[PartitionLag] = []
    for tp in sorted(partitions):
        owner = owners.get(tp)
        lags.append(
            PartitionLag(
                partition=tp,
                committed=committed.get(tp),
                log_end=ends.get(tp),
                member_id=None if owner is None else owner.member_id,
                instance_id=None if owner is None else owner.instance_id,
                client_id=None if owner is None else owner.client_id,
                client_host=None if owner is None else owner.client_host,
            )
        )
    return GroupLag(group=group, partitions=tuple(lags))


# --------------------------------------------------------- broker and configs


async def broker_info(client: KafkaClient, node_id: int | None = None) -> BrokerInfo:
    """API versions and feature levels of broker ``node_id`` (None: any broker).

    Raises:
        TransportError: the broker could not be reached.
    """
    if node_id is None:
        cluster = client.cluster if client.cluster.brokers else await client.metadata(())
        node_id = min(cluster.brokers)
    response = await client.request(broker_features.build, node=node_id)
    features = broker_features.parse(broker_features.narrow(response))
    node = client.cluster.brokers.get(node_id) or BrokerAddress(node_id, "", 0)
    return BrokerInfo(node=node, features=features)


async def describe_configs(
    client: KafkaClient, resources: Iterable[ConfigResource], *, node: int | None = None
) -> tuple[DescribedConfigs, ...]:
    """The configs of ``resources``, asked of broker ``node`` (None: any broker).

    A broker's non-default settings are known only to that broker: describe a
    ``BROKER`` resource at the node it names. Per-resource errors are returned.

    Raises:
        TransportError: the broker could not be reached.
    """
    wanted = tuple(resources)
    response = await client.request(lambda v: describe_configs_request.build(v, wanted), node=node)
    return describe_configs_request.parse(describe_configs_request.narrow(response))


def _entries(described: tuple[DescribedConfigs, ...]) -> Mapping[str, ConfigEntry]:
    (result,) = described
    raise_for_error(result.error_code, result.error_message)
    return result.entries


async def broker_configs(
    client: KafkaClient, node_id: int, keys: Iterable[str] | None = None
) -> Mapping[str, ConfigEntry]:
    """The settings of broker ``node_id`` (only ``keys`` if given), by key.

    Raises:
        BrokerError: the broker refused (CLUSTER_AUTHORIZATION_FAILED ...).
        TransportError: it could not be reached.
    """
    resource = ConfigResource(
        ConfigResourceType.BROKER, str(node_id), None if keys is None else tuple(keys)
    )
    return _entries(await describe_configs(client, [resource], node=node_id))


async def group_configs(client: KafkaClient, group_id: str) -> Mapping[str, ConfigEntry]:
    """The group-level configs of ``group_id`` (KIP-848 ``GROUP`` resource), by key.

    Raises:
        BrokerError: the broker refused, or is too old to have group configs.
        TransportError: it could not be reached.
    """
    resource = ConfigResource(ConfigResourceType.GROUP, group_id)
    return _entries(await describe_configs(client, [resource]))
