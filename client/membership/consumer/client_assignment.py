"""The KIP-848 draft's client-side assignor mode: its values, its duty table, its output check.

The draft (``../shared/seeds``, "Client Side Mode") let members advertise
client assignors with metadata version ranges; the coordinator picks one that
every member supports and asks one member, through ``ShouldComputeAssignment``
in a heartbeat response, to compute the group's target assignment: that member
calls ConsumerGroupPrepareAssignment for the group state, runs the assignor,
and installs the result with ConsumerGroupInstallAssignment. Apache Kafka
removed the mode before release, so only the simulator
(:mod:`kgroup.testing.sim`) speaks it; configuring client assignors against a
real broker is a :class:`~kgroup.errors.ConfigError` (see ``docs/simulation.md``).

The duty is a small machine of its own beside the membership states
(:data:`DUTY`): whether a member computes an assignment is independent of
where it stands in its own reconciliation. :func:`check_client_assignment`
is the check the member runs on its assignor's output before installing it.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kgroup.membership.common.transitions import TransitionTable
from kgroup.types import TopicIdPartition

__all__ = [
    "DUTY",
    "ClientAssignor",
    "DutyState",
    "DutyTrigger",
    "InstallAssignmentRequest",
    "PrepareAssignmentRequest",
    "PrepareAssignmentResponse",
    "PreparedMember",
    "PreparedTopic",
    "check_client_assignment",
]

ASSIGNMENT_ERROR = 1
"""The InstallAssignment ``Error`` the member sends when its assignor could not assign."""


@dataclass(frozen=True, slots=True)
class ClientAssignor:
    """One client-side assignor a member advertises (the heartbeat's ClientAssignors entry).

    ``metadata_version`` is the version ``metadata`` is encoded with; the
    assignor understands versions ``min_version`` to ``max_version``.
    """

    name: str
    min_version: int
    max_version: int
    metadata_version: int
    metadata: bytes = b""
    reason: int = 0

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a client assignor needs a non-empty name")
        if not self.min_version <= self.metadata_version <= self.max_version:
            raise ValueError(
                f"client assignor {self.name!r}: need min_version <= metadata_version <= "
                f"max_version, got {self.min_version} <= {self.metadata_version} <= "
                f"{self.max_version}"
            )


@dataclass(frozen=True, slots=True)
class PrepareAssignmentRequest:
    """A ConsumerGroupPrepareAssignment request."""

    group_id: str
    member_id: str
    member_epoch: int


@dataclass(frozen=True, slots=True)
class PreparedMember:
    """One member of the group state a PrepareAssignment response carries."""

    member_id: str
    member_epoch: int
    subscribed_topic_ids: frozenset[uuid.UUID]
    assignment: frozenset[TopicIdPartition] = frozenset()
    instance_id: str | None = None
    rack_id: str | None = None
    metadata_version: int = 0
    metadata: bytes = b""


@dataclass(frozen=True, slots=True)
class PreparedTopic:
    """One subscribed topic of the group state a PrepareAssignment response carries."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class PrepareAssignmentResponse:
    """A ConsumerGroupPrepareAssignment response: the group state to assign from."""

    error_code: int = 0
    error_message: str | None = None
    group_epoch: int = 0
    assignor_name: str = ""
    members: tuple[PreparedMember, ...] = ()
    topics: tuple[PreparedTopic, ...] = ()


@dataclass(frozen=True, slots=True)
class InstallAssignmentRequest:
    """A ConsumerGroupInstallAssignment request.

    ``group_epoch`` is the epoch the assignment was computed for (the prepared
    one, perhaps older than the group's by now); ``error`` is non-zero when
    the assignor could not assign, and ``members`` is then empty.
    """

    group_id: str
    member_id: str
    member_epoch: int
    group_epoch: int
    error: int
    members: tuple[tuple[str, frozenset[TopicIdPartition]], ...] = ()


class DutyState(enum.Enum):
    """Where the member stands in computing the group's assignment."""

    IDLE = "not asked, or done"
    PREPARING = "PrepareAssignment in flight"
    COMPUTING = "the runtime runs the assignor"
    INSTALLING = "InstallAssignment in flight"
    INSTALL_STALE = "install refused for a stale epoch: resent after the next heartbeat"


class DutyTrigger(enum.Enum):
    """Why the duty moves; the edge labels of its diagram."""

    ASKED = "ShouldComputeAssignment"
    PREPARED = "group state received"
    COMPUTED = "assignor finished (or failed)"
    INSTALLED = "install answered"
    STALE = "STALE_MEMBER_EPOCH"
    RETRY = "heartbeat answered"
    ABANDON = "error, fence, leave"


_D = DutyState
_DT = DutyTrigger


def _duty_table() -> dict[tuple[DutyState, DutyTrigger], DutyState]:
    t = {
        (_D.IDLE, _DT.ASKED): _D.PREPARING,
        (_D.PREPARING, _DT.PREPARED): _D.COMPUTING,
        (_D.COMPUTING, _DT.COMPUTED): _D.INSTALLING,
        (_D.INSTALLING, _DT.INSTALLED): _D.IDLE,
        (_D.INSTALLING, _DT.STALE): _D.INSTALL_STALE,
        (_D.INSTALL_STALE, _DT.RETRY): _D.INSTALLING,
    }
    for state in DutyState:
        if state is not _D.IDLE:
            t[(state, _DT.ABANDON)] = _D.IDLE
    return t


DUTY: TransitionTable[DutyState, DutyTrigger] = TransitionTable(
    _duty_table(),
    initial=DutyState.IDLE,
    finals=(),
    diagram="client assignment duty diagram",
    module=__name__,
)
"""The client-side assignment duty's one table of legal transitions."""


def check_client_assignment(
    prepared: PrepareAssignmentResponse, assignment: Mapping[str, frozenset[TopicIdPartition]]
) -> tuple[str, str] | None:
    """Why ``assignment`` may not be installed for ``prepared``, or None when it may.

    The draft's rules (all partitions assigned, none twice, only members of
    the group), plus: only partitions that exist, only to members subscribed
    to their topic. The answer is ``(violation, detail)``, ``violation`` being
    the name of a :class:`kgroup.errors.AssignmentViolation` member, so the
    runtime can raise :class:`~kgroup.errors.InvalidAssignmentError`.
    """
    members = {m.member_id: m for m in prepared.members}
    topics = {t.topic_id: t for t in prepared.topics}

    def show(tip: TopicIdPartition) -> str:
        topic = topics.get(tip.topic_id)
        return f"{topic.name if topic else tip.topic_id}-{tip.partition}"

    unknown = sorted(set(assignment) - set(members))
    if unknown:
        return "UNKNOWN_MEMBER", f"members {', '.join(map(repr, unknown))} are not in the group"
    owner: dict[TopicIdPartition, str] = {}
    for mid in sorted(assignment):
        subscribed = members[mid].subscribed_topic_ids
        for tip in sorted(assignment[mid]):
            topic = topics.get(tip.topic_id)
            if topic is None or not 0 <= tip.partition < topic.num_partitions:
                return "UNKNOWN_PARTITION", f"member {mid!r} is assigned {show(tip)}, unknown"
            if tip.topic_id not in subscribed:
                return (
                    "UNSUBSCRIBED_TOPIC",
                    f"member {mid!r} is assigned {show(tip)} but does not subscribe to "
                    f"{topic.name}",
                )
            other = owner.get(tip)
            if other is not None:
                return "DUPLICATE_PARTITION", f"{show(tip)} is assigned to {other!r} and {mid!r}"
            owner[tip] = mid
    wanted = {tid for m in prepared.members for tid in m.subscribed_topic_ids}
    for tid in sorted(wanted & set(topics)):
        for p in range(topics[tid].num_partitions):
            tip = TopicIdPartition(tid, p)
            if tip not in owner:
                return "MISSING_PARTITION", f"{show(tip)} is assigned to nobody"
    return None
