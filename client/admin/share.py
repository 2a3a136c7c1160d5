"""Share groups: their configs (where a new group starts, how long records stay
locked) and where they stand on each partition (start offset and lag).

A share group's ``share.auto.offset.reset`` and ``share.record.lock.duration.ms``
are *group* configs (KIP-932), not consumer settings: they are set on the
``GROUP`` resource with IncrementalAlterConfigs, by any broker, and hold for
every member. The broker bounds the lock duration by its
``group.share.min.record.lock.duration.ms`` and ``...max...`` (15 s and 60 s
by default) and refuses a value outside them, which
:class:`~kgroup.errors.GroupConfigRefusedError` reports with its reason::

    async with KafkaClient("localhost:9092") as client:
        await set_share_auto_offset_reset(client, "orders-queue", "earliest")
        await set_share_group_config(client, "orders-queue", LOCK_DURATION, "15000")
        offsets = await share_group_offsets(client, "orders-queue")
        print(offsets.total, [(p.partition, p.start_offset, p.lag) for p in offsets.partitions])
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Final, Literal

from kio.schema.errors import ErrorCode

from kgroup.admin.groups import _with_coordinator, describe_group, end_offsets
from kgroup.admin.model import GroupType, ShareGroupOffsets, SharePartitionOffset
from kgroup.errors import (
    GroupConfigRefusedError,
    GroupIdNotFoundError,
    broker_error,
    raise_for_error,
)
from kgroup.protocol.requests import describe_share_group_offsets, incremental_alter_configs
from kgroup.protocol.requests.describe_configs import ConfigResourceType
from kgroup.protocol.requests.incremental_alter_configs import AlterConfigOp, ConfigAlteration
from kgroup.transport.client import KafkaClient

log = logging.getLogger("kgroup.admin")

__all__ = [
    "AUTO_OFFSET_RESET",
    "LOCK_DURATION",
    "SHARE_GROUP_CONFIGS",
    "alter_share_group_configs",
    "auto_offset_reset_value",
    "set_share_auto_offset_reset",
    "set_share_group_config",
    "share_group_offsets",
    "share_start_offsets",
]

AUTO_OFFSET_RESET: Final = "share.auto.offset.reset"
"""Where a share group with no start offset begins: ``earliest``, ``latest`` (the
default) or ``by_duration:<ISO-8601 duration>`` (records from that long ago)."""
LOCK_DURATION: Final = "share.record.lock.duration.ms"
"""How long a record acquired by a member stays locked to it (the group's override of
the broker's ``group.share.record.lock.duration.ms``)."""


SHARE_GROUP_CONFIGS: Final = (
    AUTO_OFFSET_RESET,
    LOCK_DURATION,
    "share.session.timeout.ms",
    "share.heartbeat.interval.ms",
    "share.isolation.level",
    "share.delivery.count.limit",
    "share.partition.max.record.locks",
    "share.assignment.interval.ms",
    "share.renew.acknowledge.enable",
)
"""Group configs of share groups a Kafka 4.4 broker knows (older brokers know fewer;
the numbers are bounded by broker settings). The broker is the judge: it refuses an
unknown key or a value out of bounds with INVALID_CONFIG."""


async def alter_share_group_configs(
    client: KafkaClient, group_id: str, changes: Mapping[str, str | None]
) -> None:
    """Set several keys of share group ``group_id`` at once (a None value: back to the
    broker's default). The broker applies all of them or none.

    Raises:
        GroupConfigRefusedError: the broker refused (an unknown key, a value out of
            its bounds, no ALTER_CONFIGS on the group); names the first key and the
            broker's reason (which names the key at fault).
        TransportError: no broker could be reached.
    """
    alterations = [
        ConfigAlteration(
            ConfigResourceType.GROUP,
            group_id,
            key,
            value,
            AlterConfigOp.SET if value is not None else AlterConfigOp.DELETE,
        )
        for key, value in changes.items()
    ]
    if not alterations:
        return
    response = await client.request(
        lambda v: incremental_alter_configs.build(v, alterations), node=None
    )
    (result,) = incremental_alter_configs.parse(incremental_alter_configs.narrow(response))
    if result.error_code:
        error = broker_error(result.error_code, result.error_message)
        first = alterations[0]
        raise GroupConfigRefusedError(group_id, first.key, first.value, error)


async def set_share_group_config(
    client: KafkaClient, group_id: str, key: str, value: str | None
) -> None:
    """Set ``key`` of share group ``group_id`` to ``value`` (None: back to the broker's
    default). Other keys of the group keep their values.

    Raises:
        GroupConfigRefusedError: the broker refused (an unknown key, a value out of
            its bounds, no ALTER_CONFIGS on the group); names the key and the reason.
        TransportError: no broker could be reached.
    """
    alteration = ConfigAlteration(
        ConfigResourceType.GROUP,
        group_id,
        key,
        value,
        AlterConfigOp.SET if value is not None else AlterConfigOp.DELETE,
    )
    response = await client.request(
        lambda v: incremental_alter_configs.build(v, [alteration]), node=None
    )
    (result,) = incremental_alter_configs.parse(incremental_alter_configs.narrow(response))
    if result.error_code:
        error = broker_error(result.error_code, result.error_message)
        raise GroupConfigRefusedError(group_id, key, value, error)


def auto_offset_reset_value(reset: Literal["earliest", "latest"] | datetime.timedelta) -> str:
    """``share.auto.offset.reset``'s text for ``reset`` (a duration: ``by_duration``).

    Raises:
        ValueError: a negative duration.
    """
    if isinstance(reset, datetime.timedelta):
        if reset < datetime.timedelta(0):
            raise ValueError(f"by_duration needs a duration that is not negative, got {reset}")
        # ISO-8601 as Java's Duration.parse reads it; whole seconds and millis are enough.
        millis = reset // datetime.timedelta(milliseconds=1)
        seconds, rest = divmod(millis, 1000)
        return f"by_duration:PT{seconds}.{rest:03d}S" if rest else f"by_duration:PT{seconds}S"
    return reset


async def set_share_auto_offset_reset(
    client: KafkaClient,
    group_id: str,
    reset: Literal["earliest", "latest"] | datetime.timedelta,
) -> None:
    """Set where share group ``group_id`` starts when it has no start offset:
    ``earliest``, ``latest``, or a duration (the records of that last stretch of time).

    Raises:
        GroupConfigRefusedError: the broker refused.
        TransportError: no broker could be reached.
    """
    await set_share_group_config(
        client, group_id, AUTO_OFFSET_RESET, auto_offset_reset_value(reset)
    )


async def share_start_offsets(
    client: KafkaClient, group_id: str
) -> tuple[describe_share_group_offsets.ShareOffset, ...]:
    """Every partition share group ``group_id`` has state for, with its start offset
    (and the broker's lag from Kafka 4.2), asked of the group's coordinator.

    Raises:
        GroupIdNotFoundError: no such share group.
        BrokerError: another refusal (GROUP_AUTHORIZATION_FAILED ...).
        TransportError: the coordinator could not be reached.
    """

    async def attempt() -> tuple[describe_share_group_offsets.ShareOffset, ...]:
        coordinator = await client.coordinator(group_id)
        response = await client.request(
            lambda v: describe_share_group_offsets.build(v, group_id), node=coordinator.node_id
        )
        (group,) = describe_share_group_offsets.parse(describe_share_group_offsets.narrow(response))
        raise_for_error(group.error_code, group.error_message)
        return group.partitions

    return await _with_coordinator(client, group_id, attempt)


async def share_group_offsets(client: KafkaClient, group_id: str) -> ShareGroupOffsets:
    """Share group ``group_id``'s description and, for every partition it has state for
    or assigned, its start offset, the log end offset and the lag (as
    ``kafka-share-groups.sh --describe`` shows them).

    Raises:
        GroupIdNotFoundError: no such group, or the group is not a share group.
        BrokerError: another refusal (GROUP_AUTHORIZATION_FAILED ...).
        TransportError: a broker could not be reached.
    """
    group = await describe_group(client, group_id)
    if group.group_type is not GroupType.SHARE:
        raise GroupIdNotFoundError(
            int(ErrorCode.group_id_not_found),
            "GROUP_ID_NOT_FOUND",
            False,
            f"group {group_id!r} is a {group.group_type.value} group, not a share group "
            "(`kgroup groups lag` shows a consumer group's committed offsets)",
        )
    states = {o.partition: o for o in await share_start_offsets(client, group_id)}
    for o in states.values():
        if o.error_code:
            # One partition's state could not be read: shown as unknown, not fatal.
            log.info("start offset of %s: %s", o.partition, broker_error(o.error_code))
    assigned = {tp for m in group.members for tp in m.assignment}
    partitions = set(states) | assigned
    ends = await end_offsets(client, partitions)
    return ShareGroupOffsets(
        group=group,
        partitions=tuple(
            SharePartitionOffset(
                partition=tp,
                start_offset=None if o is None or o.error_code else o.start_offset,
                log_end=ends.get(tp),
                broker_lag=None if o is None or o.error_code else o.lag,
            )
            for tp in sorted(partitions)
            for o in (states.get(tp),)
        ),
    )
