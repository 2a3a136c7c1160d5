"""Events only the new-protocol member takes, and the union of all it takes.

:class:`~kgroup.membership.consumer.ConsumerMember` also takes the shared
events of :mod:`kgroup.membership.common.events`. Heartbeat outcomes echo the
``seq`` of the :class:`~kgroup.membership.consumer.SendHeartbeat` they answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from kgroup.membership.common.events import (
    CommonEvent,
    ErrorCodeReceived,
    RequestFailed,
    ResponseReceived,
)
from kgroup.membership.consumer.client_assignment import PrepareAssignmentResponse
from kgroup.types import TopicIdPartition

__all__ = [
    "ClientAssignmentComputed",
    "ConsumerMemberEvent",
    "Event",
    "HeartbeatFailed",
    "HeartbeatResponse",
    "HeartbeatResponseReceived",
    "InstallAssignmentResponseReceived",
    "MetadataUpdated",
    "PrepareAssignmentResponseReceived",
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
    # The KIP-848 draft's client-side mode (simulator only): compute the group's assignment.
    should_compute_assignment: bool = False


@dataclass(frozen=True, slots=True)
class HeartbeatResponseReceived(ResponseReceived[HeartbeatResponse]):
    """A response arrived for the heartbeat sent with ``seq``."""


HeartbeatFailed = RequestFailed
"""The heartbeat sent with ``seq`` got no response: the shared RequestFailed event."""


@dataclass(frozen=True, slots=True)
class MetadataUpdated:
    """Topic ids and names learned from metadata (merged into what the member knows)."""

    topic_names: Mapping[uuid.UUID, str]


@dataclass(frozen=True, slots=True)
class PrepareAssignmentResponseReceived(ResponseReceived[PrepareAssignmentResponse]):
    """The answer to the SendPrepareAssignment sent with ``seq`` (failures: RequestFailed)."""


@dataclass(frozen=True, slots=True)
class ClientAssignmentComputed:
    """The runtime ran the client assignor a ComputeAssignment with ``token`` asked for.

    ``assignment`` is member id -> partitions, or None with ``error`` set when
    the assignor raised (or said it could not assign).
    """

    token: int
    assignment: Mapping[str, frozenset[TopicIdPartition]] | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class InstallAssignmentResponseReceived(ErrorCodeReceived):
    """The answer to the SendInstallAssignment sent with ``seq`` (failures: RequestFailed)."""

    error_message: str | None = None


ConsumerMemberEvent = (
    CommonEvent
    | HeartbeatResponseReceived
    | MetadataUpdated
    | PrepareAssignmentResponseReceived
    | ClientAssignmentComputed
    | InstallAssignmentResponseReceived
)
"""Every event :meth:`~kgroup.membership.consumer.ConsumerMember.handle` takes."""

Event = ConsumerMemberEvent
"""The name :data:`ConsumerMemberEvent` had before the classic member existed."""
