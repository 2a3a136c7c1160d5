"""A tiny classic group coordinator: JoinGroup / SyncGroup / Heartbeat / LeaveGroup.

What it models:

- a new member without an id gets MEMBER_ID_REQUIRED and an id, and joins again;
- any JoinGroup starts a rebalance (PREPARING_REBALANCE); the joins are held
  until every member has rejoined or the rebalance timeout passed (members
  that did not rejoin are removed); then the generation bumps, the protocol is
  chosen by vote among those every member supports, the leader (the previous
  one if still there, else the first to join) gets every member's metadata;
- SyncGroup waits for the leader's, which carries every member's assignment;
- Heartbeat: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS
  while preparing a rebalance; LeaveGroup removes members and rebalances;
- members past their session timeout are removed (not while their JoinGroup
  or SyncGroup is held; as Kafka, the session restarts when it is answered).

No initial rebalance delay (``group.initial.rebalance.delay.ms`` is 0), and a
static member that comes back with its instance id takes over its old member
id but goes through a full rebalance. No I/O and no kio.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kio.schema.errors import ErrorCode

__all__ = [
    "ClassicGroup",
    "ClassicMember",
    "ClassicState",
    "JoinInput",
    "JoinResult",
    "Pending",
    "SyncResult",
]

_T = TypeVar("_T")


class ClassicState(enum.Enum):
    """The classic group states, as DescribeGroups names them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


class Pending(Generic[_T]):
    """A held answer: ``resolve`` fills it and calls ``wake`` (the broker's event)."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self.result: _T | None = None
        self._wake = wake

    def resolve(self, result: _T) -> None:
        """Set the answer (once) and wake whoever waits for it."""
        if self.result is None:
            self.result = result
            self._wake()


@dataclass(frozen=True, slots=True)
class JoinInput:
    """The fields of a JoinGroup request the model reads."""

    member_id: str
    instance_id: str | None
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class JoinResult:
    """A JoinGroup answer; ``members`` (id, instance id, metadata) is the leader's only."""

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    """A SyncGroup answer."""

    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class ClassicMember:
    """One member as the coordinator keeps it (read it, do not change it)."""

    member_id: str
    instance_id: str | None
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    session_deadline: float = 0.0
    joining: Pending[JoinResult] | None = None
    syncing: Pending[SyncResult] | None = None


@dataclass(slots=True)
class ClassicGroup:
    """One classic group."""

    group_id: str
    state: ClassicState = ClassicState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    pending_ids: set[str] = field(default_factory=set)
    rebalance_deadline: float = 0.0

    # ------------------------------------------------------------------ join

    def join(self, request: JoinInput, now: float, waiter: Pending[JoinResult]) -> None:
        """Handle a JoinGroup; ``waiter`` is resolved now or when the rebalance completes."""
        member_id = request.member_id
        if not request.protocols or (self.members and request.protocol_type != self.protocol_type):
            waiter.resolve(JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if self.members and not self._candidates() & {n for n, _ in request.protocols}:
            waiter.resolve(JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if not member_id:
            static = self._by_instance(request.instance_id)
            if static is not None:
                # The static member is back: its old id is replaced by a new one.
                old_id = static.member_id
                del self.members[old_id]
                static.member_id = f"{request.client_id}-{uuid.uuid4()}"
                self.members[static.member_id] = static
                if self.leader == old_id:
                    self.leader = static.member_id
                member_id = static.member_id
            else:
                fresh = f"{request.client_id}-{uuid.uuid4()}"
                self.pending_ids.add(fresh)
                waiter.resolve(JoinResult(ErrorCode.member_id_required, fresh))
                return
        elif member_id not in self.members and member_id not in self.pending_ids:
            waiter.resolve(JoinResult(ErrorCode.unknown_member_id, member_id))
            return
        self.pending_ids.discard(member_id)
        known = self.members.get(member_id)
        if known is None:
            member = ClassicMember(
                member_id=member_id,
                instance_id=request.instance_id,
                client_id=request.client_id,
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                protocols=request.protocols,
            )
            self.members[member_id] = member
        else:
            member = known
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_deadline = now + request.session_timeout_ms / 1000
        if member.joining is not None:
            member.joining.resolve(JoinResult(ErrorCode.rebalance_in_progress, member_id))
        member.joining = waiter
        self.protocol_type = request.protocol_type
        self._prepare_rebalance(now)
        self._maybe_complete_join(now)

    def _candidates(self) -> set[str]:
        names: set[str] | None = None
        for member in self.members.values():
            mine = {n for n, _ in member.protocols}
            names = mine if names is None else names & mine
        return names or set()

    def _by_instance(self, instance_id: str | None) -> ClassicMember | None:
        if instance_id is None:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def _prepare_rebalance(self, now: float) -> None:
        if self.state is ClassicState.PREPARING_REBALANCE:
            return
        for member in self.members.values():
            if member.syncing is not None:
                member.syncing.resolve(SyncResult(ErrorCode.rebalance_in_progress))
                member.syncing = None
        self.state = ClassicState.PREPARING_REBALANCE
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        self.rebalance_deadline = now + timeout / 1000

    def _maybe_complete_join(self, now: float, *, deadline_passed: bool = False) -> None:
        if self.state is not ClassicState.PREPARING_REBALANCE:
            return
        if not deadline_passed and any(m.joining is None for m in self.members.values()):
            return
        for gone in [m.member_id for m in self.members.values() if m.joining is None]:
            del self.members[gone]
        self.generation_id += 1
        if not self.members:
            self.state = ClassicState.EMPTY
            self.protocol_name = self.leader = None
            return
        self.protocol_name = self._vote()
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.state = ClassicState.COMPLETING_REBALANCE
        everyone = tuple(
            (m.member_id, m.instance_id, dict(m.protocols)[self.protocol_name])
            for m in self.members.values()
        )
        for member in self.members.values():
            assert member.joining is not None
            # As Kafka: the session restarts when the join completes (a member
            # held for the whole round would otherwise expire the moment its
            # JoinGroup is answered).
            member.session_deadline = now + member.session_timeout_ms / 1000
            member.joining.resolve(
                JoinResult(
                    ErrorCode.none,
                    member.member_id,
                    generation_id=self.generation_id,
                    protocol_type=self.protocol_type,
                    protocol_name=self.protocol_name,
                    leader=self.leader,
                    members=everyone if member.member_id == self.leader else (),
                )
            )
            member.joining = None

    def _vote(self) -> str:
        # Every member votes for its most preferred protocol that all support.
        candidates = self._candidates()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(n for n, _ in member.protocols if n in candidates)] += 1
        return max(sorted(votes), key=lambda name: votes[name])

    # ------------------------------------------------------------------ sync

    def sync(
        self,
        *,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        assignments: dict[str, bytes],
        now: float,
        waiter: Pending[SyncResult],
    ) -> None:
        """Handle a SyncGroup; ``waiter`` is resolved now or when the leader's arrives."""
        error = self._check_member(member_id, instance_id, generation_id)
        if error is not ErrorCode.none:
            waiter.resolve(SyncResult(error))
            return
        if self.state is ClassicState.PREPARING_REBALANCE:
            waiter.resolve(SyncResult(ErrorCode.rebalance_in_progress))
            return
        member = self.members[member_id]
        member.session_deadline = now + member.session_timeout_ms / 1000
        if self.state is ClassicState.STABLE:
            waiter.resolve(self._sync_result(member))
            return
        member.syncing = waiter
        if member_id == self.leader:
            for each in self.members.values():
                each.assignment = assignments.get(each.member_id, b"")
            self.state = ClassicState.STABLE
            for each in self.members.values():
                if each.syncing is not None:
                    # Held since its SyncGroup: its session restarts now (as Kafka).
                    each.session_deadline = now + each.session_timeout_ms / 1000
                    each.syncing.resolve(self._sync_result(each))
                    each.syncing = None

    def _sync_result(self, member: ClassicMember) -> SyncResult:
        return SyncResult(
            ErrorCode.none,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            assignment=member.assignment,
        )

    # ------------------------------------------------------- heartbeat, leave

    def heartbeat(
        self, member_id: str, instance_id: str | None, generation_id: int, now: float
    ) -> ErrorCode:
        """Handle a Heartbeat; the error code to answer."""
        error = self._check_member(member_id, instance_id, generation_id)
        if error is not ErrorCode.none:
            return error
        member = self.members[member_id]
        member.session_deadline = now + member.session_timeout_ms / 1000
        if self.state is ClassicState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, member_id: str, instance_id: str | None, now: float) -> ErrorCode:
        """Remove one member (by id, or by instance id when the id is empty)."""
        member = self.members.get(member_id) if member_id else self._by_instance(instance_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if instance_id is not None and member.instance_id != instance_id:
            return ErrorCode.fenced_instance_id
        self.remove(member.member_id, now)
        return ErrorCode.none

    def remove(self, member_id: str, now: float) -> None:
        """Remove a member (leave, expiry) and rebalance the rest."""
        member = self.members.pop(member_id, None)
        if member is None:
            return
        if member.joining is not None:
            member.joining.resolve(JoinResult(ErrorCode.unknown_member_id, member_id))
        if member.syncing is not None:
            member.syncing.resolve(SyncResult(ErrorCode.unknown_member_id))
        if not self.members:
            self.state = ClassicState.EMPTY
            self.protocol_name = self.leader = None
            self.generation_id += 1
            return
        self._prepare_rebalance(now)
        self._maybe_complete_join(now)

    def expire(self, now: float) -> list[str]:
        """Remove members past their session timeout; complete an overdue rebalance."""
        gone = [
            m.member_id
            for m in self.members.values()
            if m.joining is None and m.syncing is None and now >= m.session_deadline
        ]
        for member_id in gone:
            self.remove(member_id, now)
        if self.state is ClassicState.PREPARING_REBALANCE and now >= self.rebalance_deadline:
            self._maybe_complete_join(now, deadline_passed=True)
        return gone

    # ------------------------------------------------------------ validation

    def _check_member(self, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        member = self.members.get(member_id)
        if member is None:
            if instance_id is not None and self._by_instance(instance_id) is not None:
                return ErrorCode.fenced_instance_id
            return ErrorCode.unknown_member_id
        if generation != self.generation_id:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    def check_commit(self, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        """The error for an OffsetCommit with this identity (NONE: accepted)."""
        if generation < 0 and not member_id and self.state is ClassicState.EMPTY:
            return ErrorCode.none  # a commit from outside the group, to an empty group
        error = self._check_member(member_id, instance_id, generation)
        if error is not ErrorCode.none:
            return error
        if self.state is ClassicState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none
