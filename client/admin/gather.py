"""Reading the facts the migration checker needs from a cluster."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kgroup.admin.groups import broker_configs, broker_info, describe_group, group_configs
from kgroup.admin.migration import BROKER_KEYS, MigrationFacts
from kgroup.admin.model import GroupDescription
from kgroup.errors import BrokerError, GroupIdNotFoundError
from kgroup.protocol.cluster import frozen_map
from kgroup.transport.client import KafkaClient

__all__ = ["gather_migration_facts"]

log = logging.getLogger("kgroup.admin")


async def gather_migration_facts(
    client: KafkaClient,
    group_id: str,
    *,
    regexes: Iterable[str] = (),
    remote_assignor: str | None = None,
) -> MigrationFacts:
    """What :func:`~kgroup.admin.check_migration` needs to judge rolling ``group_id``
    to the consumer protocol: the group, its coordinator's versions, features and
    settings, the group's configs and the cluster's topics.

    ``regexes`` are the patterns the members subscribe with and ``remote_assignor``
    the ``group.remote.assignor`` they will set (None: the broker's default); a
    classic group's description cannot tell either. A setting the broker refuses
    to show (authorization) is recorded in ``unavailable`` rather than raised.

    Raises:
        BrokerError: describing the group was refused (GROUP_AUTHORIZATION_FAILED ...).
        TransportError: the cluster could not be reached.
    """
    unavailable: list[str] = []
    coordinator = await client.coordinator(group_id)
    broker = await broker_info(client, coordinator.node_id)
    settings: dict[str, str | None] = {}
    try:
        entries = await broker_configs(client, coordinator.node_id, BROKER_KEYS)
        settings = {key: entry.value for key, entry in entries.items()}
    except BrokerError as exc:
        unavailable.append(f"the settings of broker {coordinator.node_id} ({exc})")
    group: GroupDescription | None
    try:
        group = await describe_group(client, group_id)
    except GroupIdNotFoundError:
        group = None
    overrides: dict[str, str | None] = {}
    if group is not None:
        try:
            entries = await group_configs(client, group_id)
            overrides = {key: entry.value for key, entry in entries.items()}
        except BrokerError as exc:
            # Group configs are optional overrides; the broker settings apply without them.
            log.info("group %r: its configs could not be read: %s", group_id, exc)
    cluster = await client.metadata(None)
    topics = frozenset(name for name, info in cluster.topics.items() if not info.is_internal)
    return MigrationFacts(
        group_id=group_id,
        group=group,
        broker=broker,
        broker_configs=frozen_map(settings),
        group_configs=frozen_map(overrides),
        topics=topics,
        regexes=tuple(regexes),
        remote_assignor=remote_assignor,
        unavailable=tuple(unavailable),
    )
