"""Events of the classic member (JoinGroup / SyncGroup / Heartbeat / LeaveGroup).

The classic member also takes the shared events of
:mod:`kgroup.membership.common.events` (among them ``RequestFailed``, for any
of its requests). Request outcomes echo the ``seq`` of the action that sent
the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kgroup.membership.classic.types import ClassicAssignment, GroupMember
from kgroup.membership.common.events import CommonEvent, ErrorCodeReceived, ResponseReceived
from kgroup.types import TopicPartition

__all__ = [
    "AssignmentComputed",
    "AssignorFailed",
    "ClassicEvent",
    "ClassicHeartbeatResponseReceived",
    "ClassicMemberEvent",
    "CommitFailed",
    "JoinGroupResponse",
    "JoinGroupResponseReceived",
    "LeaveGroupResponseReceived",
    "SubscribedMetadataChanged",
    "SyncGroupResponse",
    "SyncGroupResponseReceived",
]


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    """The fields of a JoinGroup response the member needs.

    ``members`` is filled for the leader only (each subscription decoded by
    the runtime with :mod:`kgroup.protocol.classic_payload`). ``member_id``
    is also set with MEMBER_ID_REQUIRED. ``protocol_type`` None means the
    response version does not carry it (before v7).
    """

    error_code: int = 0
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[GroupMember, ...] = ()
    error_message: str | None = None
    skip_assignment: bool = False
    """JoinGroup v9+ (KIP-814): a static leader rejoined a stable group; the
    coordinator keeps the current assignment and ignores the leader's."""


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    """The fields of a SyncGroup response the member needs.

    ``assignment`` is the decoded member state (None when the error code is
    set). ``protocol_type`` / ``protocol_name`` are None before v5.
    """

    error_code: int = 0
    assignment: ClassicAssignment | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class JoinGroupResponseReceived(ResponseReceived[JoinGroupResponse]):
    """A response arrived for the JoinGroup sent with ``seq``."""


@dataclass(frozen=True, slots=True)
class SyncGroupResponseReceived(ResponseReceived[SyncGroupResponse]):
    """A response arrived for the SyncGroup sent with ``seq``."""


@dataclass(frozen=True, slots=True)
class ClassicHeartbeatResponseReceived(ErrorCodeReceived):
    """A response arrived for the (classic) Heartbeat sent with ``seq``."""


@dataclass(frozen=True, slots=True)
class LeaveGroupResponseReceived(ErrorCodeReceived):
    """A response arrived for the LeaveGroup sent with ``seq`` (any error is only logged)."""


@dataclass(frozen=True, slots=True)
class AssignmentComputed:
    """The runtime ran the assignor a RunAssignor asked for and validated its output.

    ``assignments`` maps every member id of the generation to its assignment.
    """

    generation_id: int
    assignments: Mapping[str, ClassicAssignment]


@dataclass(frozen=True, slots=True)
class AssignorFailed:
    """The assignor raised, or its output failed validation (fatal for the member).

    ``message`` names the assignor and the violation; it is reported, never sent.
    """

    generation_id: int
    message: str


@dataclass(frozen=True, slots=True)
class SubscribedMetadataChanged:
    """The partition count of a subscribed topic changed, or a subscribed topic appeared."""


@dataclass(frozen=True, slots=True)
class CommitFailed:
    """An OffsetCommit was refused by the broker with ``error_code``.

    Sent for the member's own commits (``token`` of its CommitOffsets) and for
    the runtime's (application or auto commits: ``token`` None).
    ``generation_id`` is the generation the commit was sent with; ``offsets``
    the offsets it tried to commit, if known (kept for the retry).
    """

    token: int | None
    partitions: frozenset[TopicPartition]
    error_code: int
    generation_id: int
    offsets: Mapping[TopicPartition, int] | None = field(default=None, hash=False)


ClassicMemberEvent = (
    CommonEvent
    | JoinGroupResponseReceived
    | SyncGroupResponseReceived
    | ClassicHeartbeatResponseReceived
    | LeaveGroupResponseReceived
    | AssignmentComputed
    | AssignorFailed
    | SubscribedMetadataChanged
    | CommitFailed
)
"""Every event :meth:`~kgroup.membership.classic.ClassicMember.handle` takes."""

ClassicEvent = ClassicMemberEvent
"""The earlier name of :data:`ClassicMemberEvent`."""
