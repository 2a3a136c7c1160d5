"""The fields of a ConsumerGroupHeartbeat: which ones to send, and which to leave null.

The new protocol lets a heartbeat leave a field null when it has not changed
since the last heartbeat that carried it; a full heartbeat (joining, or after
any error) carries them all. :func:`build_request` decides, from what the last
heartbeat carried (:class:`SentFields`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kgroup.membership.consumer.actions import HeartbeatRequest
from kgroup.membership.consumer.client_assignment import ClientAssignor
from kgroup.types import TopicIdPartition

__all__ = ["HeartbeatConfig", "SentFields", "SubscribedTopics", "build_request"]


@dataclass(frozen=True, slots=True)
class SubscribedTopics:
    """The member's subscription as the heartbeat carries it."""

    names: tuple[str, ...]  # sorted
    regex: str | None


NO_TOPICS = SubscribedTopics((), None)


@dataclass(frozen=True, slots=True)
class SentFields:
    """What the last heartbeat carried, to elide unchanged fields."""

    rebalance_timeout_ms: int
    names: tuple[str, ...]
    regex: str  # "" = no regex
    server_assignor: str | None
    rack_id: str | None
    ack_version: int


class HeartbeatConfig(Protocol):
    """The configured fields of every heartbeat (:class:`~kgroup.membership.MemberConfig`)."""

    @property
    def group_id(self) -> str: ...
    @property
    def instance_id(self) -> str | None: ...
    @property
    def rack_id(self) -> str | None: ...
    @property
    def server_assignor(self) -> str | None: ...
    @property
    def max_poll_interval_ms(self) -> int: ...
    @property
    def client_assignors(self) -> tuple[ClientAssignor, ...]: ...


def build_request(
    cfg: HeartbeatConfig,
    *,
    member_id: str,
    member_epoch: int,
    joining: bool,
    subscription: SubscribedTopics | None,
    owned: frozenset[TopicIdPartition],
    ack_version: int,
    prev: SentFields | None,
) -> tuple[HeartbeatRequest, SentFields]:
    """The next heartbeat and what it carries.

    ``cfg.max_poll_interval_ms`` is the rebalance timeout. ``owned`` is what
    the member reports it owns (empty when ``joining``); ``ack_version``
    counts reconciliations, so the partitions go out again after each one.
    ``prev`` None (joining, or after an error) means a full heartbeat.
    """
    full = joining or prev is None
    sub = subscription or NO_TOPICS
    regex = sub.regex or ""
    names: tuple[str, ...] | None = sub.names
    regex_field: str | None = regex
    assignor = cfg.server_assignor
    rack = cfg.rack_id
    timeout: int | None = cfg.max_poll_interval_ms
    partitions: frozenset[TopicIdPartition] | None = owned
    if not full and prev is not None:
        names = names if names != prev.names else None
        regex_field = regex_field if regex_field != prev.regex else None
        assignor = assignor if assignor != prev.server_assignor else None
        rack = rack if rack != prev.rack_id else None
        timeout = timeout if timeout != prev.rebalance_timeout_ms else None
        partitions = partitions if ack_version != prev.ack_version else None
    elif joining and regex_field == "":
        # A joining member has no regex to clear; leave the field null.
        regex_field = None
    sent = SentFields(
        rebalance_timeout_ms=cfg.max_poll_interval_ms,
        names=sub.names,
        regex=regex,
        server_assignor=cfg.server_assignor,
        rack_id=cfg.rack_id,
        ack_version=ack_version,
    )
    request = HeartbeatRequest(
        group_id=cfg.group_id,
        member_id=member_id,
        member_epoch=member_epoch,
        instance_id=cfg.instance_id,
        rack_id=rack,
        rebalance_timeout_ms=timeout,
        subscribed_topic_names=names,
        subscribed_topic_regex=regex_field,
        server_assignor=assignor,
        topic_partitions=partitions,
        # Configured once and never changed: a full heartbeat carries them, the rest null.
        client_assignors=cfg.client_assignors if full and cfg.client_assignors else None,
    )
    return request, sent
