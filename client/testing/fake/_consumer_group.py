"""A tiny KIP-848 group coordinator: epochs, target assignment, revocation before reassignment.

What it models, following Apache Kafka's coordinator in spirit (not line by line):

- the group epoch bumps when a member joins, leaves, is removed, or changes
  its subscription, and when a subscribed topic appears or grows;
- the target assignment is recomputed with kgroup's :class:`UniformAssignor`
  (the broker's default) whenever the group epoch is ahead of it;
- each member moves to the target on its own heartbeats: it first has to give
  up what it no longer gets (its epoch stays until its heartbeat stops listing
  those partitions), then gets the new epoch and every target partition that no
  other member still holds; partitions still held elsewhere follow later;
- epochs are checked like the broker does: a newer epoch than the member's,
  or an older one that is not the previous epoch with owned partitions within
  the assignment, is FENCED_MEMBER_EPOCH; an unknown member is
  UNKNOWN_MEMBER_ID; epoch -1 leaves, -2 leaves temporarily (static members);
- a member that misses its session timeout, or does not revoke within its
  rebalance timeout, is removed.

No I/O and no kio: the broker translates requests into these calls.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kgroup.assignors import AssignmentSpec, MemberSpec, TopicMetadata, UniformAssignor
from kgroup.testing._heartbeat_rules import member_epoch_fenced, sent_or_kept
from kgroup.testing._topics import by_topic_id
from kgroup.testing.fake._topics import Topics
from kgroup.types import TopicIdPartition

__all__ = [
    "ConsumerGroup",
    "ConsumerMember",
    "HeartbeatInput",
    "HeartbeatOutcome",
    "MemberState",
]

_ASSIGNORS = frozenset({"uniform", "range"})


class MemberState(enum.Enum):
    """Where a member stands between its current and its target assignment."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    LEFT_STATIC = "left_static"


@dataclass(slots=True)
class ConsumerMember:
    """One member as the coordinator keeps it (read it, do not change it)."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    subscribed_names: tuple[str, ...] = ()
    regex: str | None = None
    assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: frozenset[TopicIdPartition] = frozenset()
    revoking: frozenset[TopicIdPartition] = frozenset()
    session_deadline: float = 0.0
    revocation_deadline: float | None = None
    last_sent: frozenset[TopicIdPartition] | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatInput:
    """The fields of a ConsumerGroupHeartbeat request the model reads (None: not sent)."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    rebalance_timeout_ms: int | None = None
    subscribed_names: tuple[str, ...] | None = None
    regex: str | None = None
    assignor: str | None = None
    owned: frozenset[TopicIdPartition] | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatOutcome:
    """What to answer: an error, or the member's epoch and (if to be sent) its assignment."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_epoch: int = -1
    assignment: frozenset[TopicIdPartition] | None = None


@dataclass(slots=True)
class ConsumerGroup:
    """One consumer-protocol group."""

    group_id: str
    session_timeout_ms: int
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, frozenset[TopicIdPartition]] = field(default_factory=dict)

    # ----------------------------------------------------------------- views

    @property
    def state(self) -> str:
        """``empty``, ``assigning``, ``reconciling`` or ``stable``, as ConsumerGroupDescribe."""
        if not self.members:
            return "empty"
        if self.assignment_epoch < self.epoch:
            return "assigning"
        if any(
            m.epoch != self.assignment_epoch or m.state is not MemberState.STABLE
            for m in self.members.values()
            if m.state is not MemberState.LEFT_STATIC
        ):
            return "reconciling"
        return "stable"

    def member_epoch(self, member_id: str) -> int | None:
        """The epoch of ``member_id``, None if it is not a member."""
        member = self.members.get(member_id)
        return None if member is None else member.epoch

    # ------------------------------------------------------------- heartbeat

    def heartbeat(self, request: HeartbeatInput, topics: Topics, now: float) -> HeartbeatOutcome:
        """Handle one heartbeat at time ``now`` (seconds)."""
        if not request.member_id:
            return HeartbeatOutcome(ErrorCode.invalid_request, "MemberId can't be empty.")
        if request.assignor is not None and request.assignor not in _ASSIGNORS:
            return HeartbeatOutcome(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {request.assignor} is not supported",
            )
        epoch = request.member_epoch
        if epoch == -1:
            return self._leave(request.member_id)
        if epoch == -2:
            return self._leave_static(request, now)
        if epoch == 0:
            joined = self._join(request, now)
            if isinstance(joined, HeartbeatOutcome):
                return joined
            member = joined
        else:
            found = self.members.get(request.member_id)
            if found is None or found.state is MemberState.LEFT_STATIC:
                return HeartbeatOutcome(
                    ErrorCode.unknown_member_id,
                    f"Member {request.member_id} is not a member of group {self.group_id}.",
                )
            member = found
            refusal = _check_epoch(member, epoch, request.owned)
            if refusal is not None:
                return refusal
        member.session_deadline = now + self.session_timeout_ms / 1000
        self._update_subscription(member, request, topics)
        self._refresh_target(topics)
        self._reconcile(member, request.owned, now)
        # Sent on a join, when it changed since last sent, or when the member's
        # view of what it owns differs (a lost acknowledgement, for example).
        send = (
            epoch == 0
            or member.assigned != member.last_sent
            or (request.owned is not None and request.owned != member.assigned)
        )
        if send:
            member.last_sent = member.assigned
        return HeartbeatOutcome(
            member_epoch=member.epoch, assignment=member.assigned if send else None
        )

    def _join(self, request: HeartbeatInput, now: float) -> ConsumerMember | HeartbeatOutcome:
        if request.rebalance_timeout_ms is None or request.owned is None or request.owned:
            return HeartbeatOutcome(
                ErrorCode.invalid_request,
                "a joining heartbeat needs RebalanceTimeoutMs and an empty TopicPartitions",
            )
        if request.subscribed_names is None and request.regex is None:
            return HeartbeatOutcome(
                ErrorCode.invalid_request,
                "a joining heartbeat needs SubscribedTopicNames or SubscribedTopicRegex",
            )
        inherited: ConsumerMember | None = None
        if request.instance_id is not None:
            holder = next(
                (m for m in self.members.values() if m.instance_id == request.instance_id), None
            )
            if holder is not None and holder.member_id != request.member_id:
                if holder.state is not MemberState.LEFT_STATIC:
                    return HeartbeatOutcome(
                        ErrorCode.unreleased_instance_id,
                        f"Static member {holder.member_id} with instance id "
                        f"{request.instance_id} is not released yet.",
                    )
                # A static member coming back takes over its predecessor's place.
                inherited = self.members.pop(holder.member_id)
                self.target[request.member_id] = self.target.pop(holder.member_id, frozenset())
        # A known member joining again (after being fenced) starts over: it has
        # already given up its partitions (lost callback) before sending epoch 0.
        self.members.pop(request.member_id, None)
        member = ConsumerMember(
            member_id=request.member_id,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            client_id=request.client_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_deadline=now + self.session_timeout_ms / 1000,
        )
        if inherited is not None:
            member.epoch, member.previous_epoch = inherited.epoch, inherited.previous_epoch
            member.assigned = inherited.assigned
        self.members[member.member_id] = member
        self.epoch += 1
        return member

    def _leave(self, member_id: str) -> HeartbeatOutcome:
        if member_id not in self.members:
            return HeartbeatOutcome(
                ErrorCode.unknown_member_id,
                f"Member {member_id} is not a member of group {self.group_id}.",
            )
        self.remove(member_id)
        return HeartbeatOutcome(member_epoch=-1)

    def _leave_static(self, request: HeartbeatInput, now: float) -> HeartbeatOutcome:
        member = self.members.get(request.member_id)
        if member is None:
            return HeartbeatOutcome(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {self.group_id}.",
            )
        if member.instance_id is None:
            return HeartbeatOutcome(
                ErrorCode.invalid_request, "epoch -2 is for static members (InstanceId)"
            )
        # Keeps its assignment until the session timeout, for its successor.
        member.state = MemberState.LEFT_STATIC
        member.session_deadline = now + self.session_timeout_ms / 1000
        return HeartbeatOutcome(member_epoch=-2)

    def _update_subscription(
        self, member: ConsumerMember, request: HeartbeatInput, topics: Topics
    ) -> None:
        before = (member.subscribed_names, member.regex)
        if request.subscribed_names is not None:
            member.subscribed_names = tuple(sorted(request.subscribed_names))
        if request.regex is not None:
            member.regex = request.regex or None  # "" clears it
        member.assignor = sent_or_kept(request.assignor, member.assignor)
        member.rack_id = sent_or_kept(request.rack_id, member.rack_id)
        member.rebalance_timeout_ms = sent_or_kept(
            request.rebalance_timeout_ms, member.rebalance_timeout_ms
        )
        if (member.subscribed_names, member.regex) != before and member.epoch != 0:
            self.epoch += 1

    # ------------------------------------------------------------ assignment

    def subscribes_to(self, name: str) -> bool:
        """Whether some member's subscription covers topic ``name``."""
        return any(
            name in m.subscribed_names or (m.regex is not None and re.fullmatch(m.regex, name))
            for m in self.members.values()
        )

    def _refresh_target(self, topics: Topics) -> None:
        if self.assignment_epoch >= self.epoch:
            return
        subscribed = {
            m.member_id: topics.matching(m.subscribed_names, m.regex) for m in self.members.values()
        }
        spec = AssignmentSpec(
            members={
                m.member_id: MemberSpec(
                    subscribed_topic_ids=frozenset(subscribed[m.member_id]),
                    assignment=by_topic_id(
                        tp
                        for tp in self.target.get(m.member_id, frozenset())
                        if tp.topic_id in subscribed[m.member_id]
                        and tp.partition < subscribed[m.member_id][tp.topic_id].partitions
                    ),
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                )
                for m in self.members.values()
            },
            topics={
                t.topic_id: TopicMetadata(t.name, t.partitions)
                for found in subscribed.values()
                for t in found.values()
            },
        )
        result = UniformAssignor().assign(spec)
        self.target = {m: result.partitions(m) for m in self.members}
        self.assignment_epoch = self.epoch

    def _held_elsewhere(self, member: ConsumerMember) -> frozenset[TopicIdPartition]:
        held: set[TopicIdPartition] = set()
        for other in self.members.values():
            if other is not member:
                held |= other.assigned | other.revoking
        return frozenset(held)

    def _reconcile(
        self, member: ConsumerMember, owned: frozenset[TopicIdPartition] | None, now: float
    ) -> None:
        if owned is not None:
            member.revoking = member.revoking & owned
        if member.revoking:
            return  # the member has not released everything it must give up yet
        target = self.target.get(member.member_id, frozenset())
        if member.epoch == self.assignment_epoch and member.state is MemberState.STABLE:
            return
        to_revoke = member.assigned - target
        if to_revoke:
            # Revocation before reassignment: the epoch moves only once they are released.
            member.assigned = member.assigned & target
            member.revoking = to_revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            member.revocation_deadline = now + member.rebalance_timeout_ms / 1000
            return
        free = (target - member.assigned) - self._held_elsewhere(member)
        if member.epoch != self.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, self.assignment_epoch
        member.assigned = member.assigned | free
        member.revocation_deadline = None
        member.state = (
            MemberState.UNRELEASED_PARTITIONS if target - member.assigned else MemberState.STABLE
        )

    # -------------------------------------------------------------- removal

    def remove(self, member_id: str) -> None:
        """Remove a member (leave, expiry, fencing by the test); bumps the group epoch."""
        if self.members.pop(member_id, None) is not None:
            self.target.pop(member_id, None)
            self.epoch += 1

    def expire(self, now: float) -> list[str]:
        """Remove members past their session or revocation deadline; their ids."""
        gone = [
            m.member_id
            for m in self.members.values()
            if now >= m.session_deadline
            or (m.revocation_deadline is not None and now >= m.revocation_deadline)
        ]
        for member_id in gone:
            self.remove(member_id)
        return gone

    def topics_changed(self, name: str) -> None:
        """A topic appeared or grew: recompute the assignment if it is subscribed."""
        if self.subscribes_to(name):
            self.epoch += 1


def _check_epoch(
    member: ConsumerMember, epoch: int, owned: frozenset[TopicIdPartition] | None
) -> HeartbeatOutcome | None:
    if not member_epoch_fenced(
        epoch,
        current=member.epoch,
        previous=member.previous_epoch,
        owned=owned,
        assigned=member.assigned,
    ):
        return None
    return HeartbeatOutcome(
        ErrorCode.fenced_member_epoch,
        f"The consumer group member has a invalid member epoch {epoch}; "
        f"the current one is {member.epoch}.",
    )
