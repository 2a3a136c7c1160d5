"""Which group protocol a consumer speaks: ``group.protocol`` and its ``auto``.

``consumer`` and ``classic`` are taken as configured. ``auto`` is decided by
the driver, with its own cluster client, in two places:

1. **Before joining** (:func:`resolve_auto`): the consumer protocol when the
   group's coordinator advertises ConsumerGroupHeartbeat and does not refuse
   a ConsumerGroupDescribe of the group (no side effect) with
   UNSUPPORTED_VERSION, which is what a broker answers when the protocol is
   disabled (``group.coordinator.rebalance.protocols`` without ``consumer``,
   or ``group.version`` 0). Otherwise classic, with a warning. If the cluster
   cannot be asked within ``request.timeout.ms``, the consumer protocol is
   assumed.
2. **On the first heartbeat** (:func:`falls_back`): when the consumer
   protocol was chosen (or assumed) but the first heartbeat is refused with
   UNSUPPORTED_VERSION (the member reports ``ReportFatalError`` with
   ``protocol_unsupported``), the driver switches to the classic protocol with
   a warning instead of failing. Once a heartbeat was accepted, a refusal is
   the fatal error it says it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeAlias

import anyio
from kio.schema.errors import ErrorCode

from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.errors import BrokerError, KgroupError, UpgradeRefusedError
from kgroup.membership import ReportFatalError
from kgroup.protocol import ApiKey
from kgroup.protocol.requests import consumer_group_describe
from kgroup.runtime._log import log
from kgroup.runtime.consumer_session import ConsumerSession
from kgroup.runtime.interfaces import Host, TransportInterface

__all__ = [
    "check_protocol_config",
    "explain_refused_upgrade",
    "falls_back",
    "new_session",
    "probe",
    "resolve_auto",
    "session_class",
]

if TYPE_CHECKING:
    # The classic session (with its member, the classic APIs, the assignors and the
    # leader's duties: about a megabyte of modules) is imported when a consumer
    # needs it, not by every consumer-protocol member.
    from kgroup.runtime.classic_session import ClassicSession

    Session: TypeAlias = ConsumerSession | ClassicSession
    """The session of either protocol, as the driver holds it."""


def check_protocol_config(config: ConsumerConfig) -> None:
    """Checks of ``config`` that depend on the protocol, made before anything starts.

    With ``group.protocol`` classic or auto, ``partition.assignment.strategy``
    is resolved, so an unknown assignor fails at construction.

    Raises:
        ConfigError: naming the key.
    """
    if config.group_protocol is not GroupProtocol.CONSUMER:
        from kgroup.runtime.classic_session import classic_assignors  # noqa: PLC0415

        classic_assignors(config)


def session_class(protocol: GroupProtocol) -> type[ConsumerSession] | type[ClassicSession]:
    """The session class of a resolved protocol (CONSUMER or CLASSIC)."""
    if protocol is GroupProtocol.CLASSIC:
        from kgroup.runtime.classic_session import ClassicSession  # noqa: PLC0415

        return ClassicSession
    if protocol is GroupProtocol.CONSUMER:
        return ConsumerSession
    raise ValueError(f"resolve group.protocol={protocol.value} first")


def new_session(protocol: GroupProtocol, host: Host) -> Session:
    """A session of ``protocol`` (AUTO starts as CONSUMER until resolved) for ``host``."""
    return session_class(GroupProtocol.CONSUMER if protocol is GroupProtocol.AUTO else protocol)(
        host
    )


async def probe(client: TransportInterface, group_id: str) -> str | None:
    """Why the coordinator of ``group_id`` cannot take the consumer protocol (None: it can).

    Raises:
        KgroupError: the cluster could not be asked.
    """
    address = await client.coordinator(group_id)
    conn = await client.connection(address.node_id)
    versions = conn.versions
    if not versions.supports(ApiKey.CONSUMER_GROUP_HEARTBEAT):
        return "the group coordinator does not support ConsumerGroupHeartbeat"
    if versions.supports(ApiKey.CONSUMER_GROUP_DESCRIBE):
        response = await conn.request(consumer_group_describe.build(versions, (group_id,)))
        codes = consumer_group_describe.parse(consumer_group_describe.narrow(response))
        if ErrorCode.unsupported_version in codes.values():
            return "the group coordinator has the new consumer protocol disabled"
    return None


async def resolve_auto(
    client: TransportInterface, config: ConsumerConfig, deadline: float
) -> GroupProtocol:
    """``group.protocol=auto`` before joining: ask the cluster until ``deadline``.

    Never raises: an unanswered question assumes the consumer protocol (the
    first heartbeat can still fall back, see :func:`falls_back`).
    """
    reason: str | None = None
    budget = config.request_timeout_ms / 1000
    with anyio.move_on_after(max(0.0, deadline - anyio.current_time())) as scope:
        try:
            reason = await probe(client, config.group_id)
        except KgroupError as exc:
            return assume_consumer(config, f"could not ask the cluster ({exc})")
    if scope.cancelled_caught:
        return assume_consumer(config, f"got no answer within {budget:.1f} s")
    if reason is not None:
        log.warning(
            "group %s: group.protocol=auto falls back to the classic protocol: %s",
            config.group_id,
            reason,
        )
        return GroupProtocol.CLASSIC
    log.info("group %s: group.protocol=auto uses the new consumer protocol", config.group_id)
    return GroupProtocol.CONSUMER


def assume_consumer(config: ConsumerConfig, why: str) -> GroupProtocol:
    """Log why ``auto`` could not decide; the consumer protocol is assumed."""
    log.warning(
        "group %s: group.protocol=auto %s; using the new consumer protocol", config.group_id, why
    )
    return GroupProtocol.CONSUMER


class MayFallBack(Protocol):
    """What :func:`falls_back` reads of a session."""

    @property
    def may_fall_back(self) -> bool: ...


def falls_back(config: ConsumerConfig, session: MayFallBack, action: ReportFatalError) -> bool:
    """Whether ``action`` switches the consumer to the classic protocol instead of failing.

    Only with ``group.protocol=auto``, only for a refusal of the protocol
    (UNSUPPORTED_VERSION), and only before the coordinator ever accepted a
    heartbeat of this member. Logs the switch.
    """
    if not (
        action.protocol_unsupported
        and config.group_protocol is GroupProtocol.AUTO
        and session.may_fall_back
    ):
        return False
    log.warning(
        "group %s: group.protocol=auto falls back to the classic protocol: "
        "the first heartbeat was refused (%s: %s)",
        config.group_id,
        action.name,
        action.message,
    )
    return True


_GROUP_ID_NOT_FOUND = 69

_UPGRADE_FIXES: tuple[tuple[str, str], ...] = (
    (
        "upgrade is disabled",
        "the brokers' group.consumer.migration.policy forbids converting a non-empty classic "
        "group (it is a static broker setting): set it to bidirectional or upgrade and restart "
        "the brokers, or stop every member of the group first (an empty group converts under "
        "any policy), or keep group.protocol=classic",
    ),
    (
        "custom assignor",
        "a member's classic assignment carries user data, which the consumer protocol cannot "
        "keep (a custom assignor, or a librdkafka leader running sticky / cooperative-sticky, "
        "which copies subscription user data into assignments): move the classic group to "
        "range, roundrobin or a non-librdkafka cooperative-sticky leader first, or migrate "
        "offline (stop every member, then start them with group.protocol=consumer)",
    ),
    (
        "consumer embedded protocol",
        "the group's protocol type is not 'consumer' (Kafka Connect, or another classic user "
        "of the group id): use another group.id",
    ),
    (
        "maximum size",
        "the group has more members than the brokers' group.consumer.max.size: raise it, or "
        "shrink the group before rolling",
    ),
)


def explain_refused_upgrade(config: ConsumerConfig, error: BrokerError) -> BrokerError:
    """A consumer-protocol member's fatal GROUP_ID_NOT_FOUND, explained if it is a refused upgrade.

    The coordinator answers GROUP_ID_NOT_FOUND to a ConsumerGroupHeartbeat for
    a group id held by a classic group it will not convert ("Cannot upgrade
    classic group ..."), and for a heartbeat at a non-zero epoch to a classic
    group ("Group ... is not a consumer group"). Both read as "no such group"
    to a user who is looking at a live group; the error says what the broker
    meant and what to do. Other errors are returned unchanged.
    """
    if error.code != _GROUP_ID_NOT_FOUND:
        return error
    said = error.message or ""
    lowered = said.lower()
    if "cannot upgrade classic group" not in lowered and "not a consumer group" not in lowered:
        return error
    fix = next((text for key, text in _UPGRADE_FIXES if key in lowered), None)
    if fix is None:
        fix = (
            "the group is a live classic group the coordinator would not convert; run "
            f"'kgroup migrate check {config.group_id}' for the reason"
        )
    message = (
        f"group {config.group_id}: the broker refused to move this classic group to the "
        f"consumer protocol ({said.rstrip('.')}). What to do: {fix}. See docs/migration.md."
    )
    return UpgradeRefusedError(error.code, error.name, error.retriable, message)
