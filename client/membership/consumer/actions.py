"""Actions only the new-protocol member returns, and the union of all it returns.

:class:`~kgroup.membership.consumer.ConsumerMember` also returns the shared
actions of :mod:`kgroup.membership.common.actions`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kgroup.membership.common.actions import CommonAction, SendRequest
from kgroup.membership.consumer.client_assignment import (
    ClientAssignor,
    InstallAssignmentRequest,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
)
from kgroup.types import TopicIdPartition

__all__ = [
    "Action",
    "AssignorOnAssignment",
    "ComputeAssignment",
    "ConsumerMemberAction",
    "HeartbeatRequest",
    "ReportClientAssignorError",
    "ReportError",
    "RequestMetadata",
    "SendHeartbeat",
    "SendInstallAssignment",
    "SendPrepareAssignment",
]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """The fields of one ConsumerGroupHeartbeat request.

    None means null on the wire ("unchanged"). ``topic_partitions`` are the
    owned partitions by topic id: empty when joining, None when unchanged,
    the full owned set in a full heartbeat or an acknowledgement.
    ``subscribed_topic_names`` is sorted.
    """

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: frozenset[TopicIdPartition] | None = None
    # The KIP-848 draft's ClientAssignors (simulator only): None when unchanged or unused.
    client_assignors: tuple[ClientAssignor, ...] | None = None

    def topic_partitions_by_id(self) -> dict[uuid.UUID, list[int]] | None:
        """``topic_partitions`` in the wire's shape: topic id -> sorted partitions."""
        if self.topic_partitions is None:
            return None
        out: dict[uuid.UUID, list[int]] = {}
        for tip in sorted(self.topic_partitions):
            out.setdefault(tip.topic_id, []).append(tip.partition)
        return out


@dataclass(frozen=True, slots=True)
class SendHeartbeat(SendRequest[HeartbeatRequest]):
    """Send ``request``; report the outcome with ``seq``.

    ``leave`` marks the leave heartbeat (epoch -1 / -2): it is sent even if
    another heartbeat is in flight and is never retried.
    """

    leave: bool = False


@dataclass(frozen=True, slots=True)
class RequestMetadata:
    """Refresh metadata: these topic ids of the target assignment have no known name."""

    topic_ids: frozenset[uuid.UUID]


@dataclass(frozen=True, slots=True)
class ReportError:
    """A non-fatal broker error to raise from poll; the member keeps going."""

    code: int
    name: str
    message: str | None


@dataclass(frozen=True, slots=True)
class AssignorOnAssignment:
    """Forward to a new-protocol PartitionAssignor's on_assignment: once per epoch."""

    member_epoch: int
    assignment: frozenset[TopicIdPartition]


@dataclass(frozen=True, slots=True)
class SendPrepareAssignment(SendRequest[PrepareAssignmentRequest]):
    """Send a ConsumerGroupPrepareAssignment (client-side mode); report the outcome with ``seq``."""


@dataclass(frozen=True, slots=True)
class ComputeAssignment:
    """Run the client assignor ``state.assignor_name`` on ``state``; answer with
    ClientAssignmentComputed.

    Each member's metadata carries its version (``PreparedMember.metadata_version``).
    """

    token: int
    state: PrepareAssignmentResponse


@dataclass(frozen=True, slots=True)
class SendInstallAssignment(SendRequest[InstallAssignmentRequest]):
    """Send a ConsumerGroupInstallAssignment (client-side mode); report the outcome with ``seq``."""


@dataclass(frozen=True, slots=True)
class ReportClientAssignorError:
    """The client assignor's output broke a rule: raise InvalidAssignmentError from poll.

    ``violation`` names a :class:`kgroup.errors.AssignmentViolation` member.
    The member is not fatal: it installed nothing (the coordinator keeps the
    previous target) and computes again when asked.
    """

    assignor_name: str
    violation: str
    message: str


ConsumerMemberAction = (
    CommonAction
    | SendHeartbeat
    | RequestMetadata
    | ReportError
    | AssignorOnAssignment
    | SendPrepareAssignment
    | ComputeAssignment
    | SendInstallAssignment
    | ReportClientAssignorError
)
"""Every action :meth:`~kgroup.membership.consumer.ConsumerMember.handle` returns."""

Action = ConsumerMemberAction
"""The name :data:`ConsumerMemberAction` had before the classic member existed."""
