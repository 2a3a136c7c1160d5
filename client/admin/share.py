"""Share-group configs: where a new share group starts, how long records stay locked.

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
"""

from __future__ import annotations

import datetime
from typing import Final, Literal

from kgroup.errors import GroupConfigRefusedError, broker_error
from kgroup.protocol.requests import incremental_alter_configs
from kgroup.protocol.requests.describe_configs import ConfigResourceType
from kgroup.protocol.requests.incremental_alter_configs import AlterConfigOp, ConfigAlteration
from kgroup.transport.client import KafkaClient

__all__ = [
    "AUTO_OFFSET_RESET",
    "LOCK_DURATION",
    "auto_offset_reset_value",
    "set_share_auto_offset_reset",
    "set_share_group_config",
]

AUTO_OFFSET_RESET: Final = "share.auto.offset.reset"
"""Where a share group with no start offset begins: ``earliest``, ``latest`` (the
default) or ``by_duration:<ISO-8601 duration>`` (records from that long ago)."""
LOCK_DURATION: Final = "share.record.lock.duration.ms"
"""How long a record acquired by a member stays locked to it (the group's override of
the broker's ``group.share.record.lock.duration.ms``)."""


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
