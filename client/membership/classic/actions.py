"""Actions of the classic member, beyond the shared ones.

The classic member also returns the shared actions of
:mod:`kgroup.membership.common.actions` (its ``CommitOffsets`` carry generation
id, member id and instance id; it never reports ``protocol_unsupported``).

Requests carry a ``seq``; the runtime reports their outcome with the same
``seq`` (a ``*ResponseReceived`` event or
:class:`~kgroup.membership.common.RequestFailed`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kgroup.membership.classic.types import ClassicAssignment, GroupMember, MemberSubscription
from kgroup.membership.common.actions import CommonAction, SendRequest

__all__ = [
    "PROTOCOL_TYPE",
    "ClassicAction",
    "ClassicAssignorOnAssignment",
    "ClassicMemberAction",
    "JoinGroupRequest",
    "JoinProtocol",
    "ReportAssignorError",
    "RunAssignor",
    "SendClassicHeartbeat",
    "SendJoinGroup",
    "SendLeaveGroup",
    "SendSyncGroup",
    "SyncGroupRequest",
]

PROTOCOL_TYPE = "consumer"
"""The JoinGroup / SyncGroup protocol type of consumer groups."""


@dataclass(frozen=True, slots=True)
class JoinProtocol:
    """One JoinGroup protocol entry: an assignor name and this member's subscription.

    ``subscription.user_data`` is None: the runtime asks the named assignor
    for its subscription user data when it encodes the entry.
    """

    name: str
    subscription: MemberSubscription


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    """The fields of one JoinGroup request (protocol type ``consumer``).

    ``member_id`` is "" for a new member; ``protocols`` are in preference order.
    """

    group_id: str
    member_id: str
    instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[JoinProtocol, ...]
    protocol_type: str = PROTOCOL_TYPE
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    """The fields of one SyncGroup request; ``assignments`` empty for followers.

    ``assignments`` are (member id, assignment) pairs, sorted by member id.
    """

    group_id: str
    generation_id: int
    member_id: str
    instance_id: str | None
    protocol_name: str
    assignments: tuple[tuple[str, ClassicAssignment], ...] = ()
    protocol_type: str = PROTOCOL_TYPE


@dataclass(frozen=True, slots=True)
class SendJoinGroup(SendRequest[JoinGroupRequest]):
    """Send ``request``; answer with JoinGroupResponseReceived / RequestFailed and ``seq``.

    The broker holds a JoinGroup until the group's rebalance completes, so the
    runtime's request timeout must exceed the rebalance timeout.
    """


@dataclass(frozen=True, slots=True)
class SendSyncGroup(SendRequest[SyncGroupRequest]):
    """Send ``request``; answer with SyncGroupResponseReceived / RequestFailed and ``seq``."""


@dataclass(frozen=True, slots=True)
class SendClassicHeartbeat:
    """Send a Heartbeat; answer with ClassicHeartbeatResponseReceived / RequestFailed."""

    seq: int
    group_id: str
    generation_id: int
    member_id: str
    instance_id: str | None


@dataclass(frozen=True, slots=True)
class SendLeaveGroup:
    """Send a LeaveGroup for this member (best effort; never retried).

    Answer with LeaveGroupResponseReceived / RequestFailed and ``seq``.
    """

    seq: int
    group_id: str
    member_id: str
    instance_id: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class RunAssignor:
    """The member leads ``generation_id``: run the assignor named ``protocol_name``.

    The runtime gives the assignor every member's subscription and the
    cluster metadata, validates the result (every partition of every
    subscribed topic once, only to members subscribed to its topic and of
    this generation; under cooperative, no partition moved while another
    member still owns it) and answers with AssignmentComputed or
    AssignorFailed, echoing ``generation_id``.
    """

    generation_id: int
    protocol_name: str
    leader_id: str
    members: tuple[GroupMember, ...]
    skip_assignment: bool = False
    """KIP-814: the coordinator keeps the group's assignment and ignores the
    leader's, so the runtime must not run the assignor: it answers
    AssignmentComputed with no assignments and only starts watching the
    subscribed topics (the leader's duty to notice new partitions stays)."""

    def covered_counts(self) -> dict[str, int]:
        """Per subscribed topic, the partition count the group's assignment is known to cover.

        With ``skip_assignment`` the leader never saw the counts the current
        assignment was computed with; the members' owned partitions (v1+
        subscriptions) bound them from below, and a topic nobody reports
        counts 0, so the first metadata look differs and the leader rejoins
        once to re-assign: an extra rebalance rather than unassigned partitions.
        """
        counts = {t: 0 for m in self.members for t in m.subscription.topics}
        for m in self.members:
            for tp in m.subscription.owned_partitions:
                if tp.topic in counts:
                    counts[tp.topic] = max(counts[tp.topic], tp.partition + 1)
        return counts


@dataclass(frozen=True, slots=True)
class ClassicAssignorOnAssignment:
    """Forward the received assignment to the chosen assignor's ``on_assignment``."""

    protocol_name: str
    generation_id: int
    assignment: ClassicAssignment


@dataclass(frozen=True, slots=True)
class ReportAssignorError:
    """The leader's assignor failed; raise a typed assignor error from poll from now on.

    The member is then FATAL, as with :class:`~kgroup.membership.common.ReportFatalError`.
    """

    protocol_name: str
    message: str


ClassicMemberAction = (
    CommonAction
    | SendJoinGroup
    | SendSyncGroup
    | SendClassicHeartbeat
    | SendLeaveGroup
    | RunAssignor
    | ClassicAssignorOnAssignment
    | ReportAssignorError
)
"""Every action :meth:`~kgroup.membership.classic.ClassicMember.handle` returns."""

ClassicAction = ClassicMemberAction
"""The earlier name of :data:`ClassicMemberAction`."""
