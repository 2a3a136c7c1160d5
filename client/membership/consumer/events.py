"""Events only the new-protocol member takes, and the union of all it takes.

:class:`~kgroup.membership.consumer.ConsumerMember` also takes the shared
events of :mod:`kgroup.membership.common.events`. Heartbeat outcomes echo the
``seq`` of the :class:`~kgroup.membership.consumer.SendHeartbeat` they answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from kgroup.membership.common.events import CommonEvent, RequestFailed

__all__ = [
    "ConsumerMemberEvent",
    "Event",
    "HeartbeatFailed",
    "HeartbeatResponse",
    "HeartbeatResponseReceived",
    "MetadataUpdated",
]


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    """The fields of a ConsumerGroupHeartbeat response the member needs.

    ``assignment`` is None when the response carries no Assignment (no
    change); otherwise it is the complete target, topic id -> partitions.
    """

    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 5000
    assignment: Mapping[uuid.UUID, Collection[int]] | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponseReceived:
    """A response arrived for the heartbeat sent with ``seq``."""

    seq: int
    response: HeartbeatResponse


HeartbeatFailed = RequestFailed
"""The heartbeat sent with ``seq`` got no response: the shared RequestFailed event."""


@dataclass(frozen=True, slots=True)
class MetadataUpdated:
    """Topic ids and names learned from metadata (merged into what the member knows)."""

    topic_names: Mapping[uuid.UUID, str]


ConsumerMemberEvent = CommonEvent | HeartbeatResponseReceived | MetadataUpdated
"""Every event :meth:`~kgroup.membership.consumer.ConsumerMember.handle` takes."""

Event = ConsumerMemberEvent
"""The name :data:`ConsumerMemberEvent` had before the classic member existed."""
