"""A simulated classic-protocol group coordinator (JoinGroup / SyncGroup / Heartbeat / LeaveGroup).

It follows the classic group of Apache Kafka's group coordinator
(``GroupMetadataManager``'s classic-group handling, KIP-345 static members,
KIP-394 member id required):

- states EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE;
- a new dynamic member first gets MEMBER_ID_REQUIRED with its member id, and
  joins with it; a static member joins at once, and a new process with the
  same instance id replaces the old one (its held JoinGroup is answered
  FENCED_INSTANCE_ID), without a rebalance when the group is stable and the
  protocols match;
- a rebalance holds every JoinGroup until all members have rejoined or the
  rebalance timeout (the largest among members) passed, then drops the
  members that did not rejoin, bumps the generation, picks the protocol every
  member supports by vote, keeps the leader if it rejoined, and answers: the
  leader gets every member's subscription;
- SyncGroup waits for the leader's assignment; members that do not sync
  within the rebalance timeout are removed and the group rebalances again;
- Heartbeat answers REBALANCE_IN_PROGRESS while preparing, ILLEGAL_GENERATION
  or UNKNOWN_MEMBER_ID when the member is behind or gone; session timeouts
  remove silent members;
- OffsetCommit needs the member at the current generation, and is refused
  with REBALANCE_IN_PROGRESS while the group completes a rebalance;
- persistence as the broker writes its GroupMetadata record: when the
  leader's assignment is stored (the group turns STABLE), when a join
  completes with no members left (EMPTY, the generation bumped), when a
  static member is replaced in a stable group, and when the group is
  converted either way. Nothing else is written: a generation handed out by
  a JoinGroup whose SyncGroup never stored an assignment, members that joined
  or left since, all live only in memory. :meth:`ClassicGroupCoordinator.reload`
  builds the group a new coordinator loads from that record (STABLE with the
  stored members and assignments, or EMPTY), so after a failover the same
  generation number can be handed out a second time.

Replies to JoinGroup and SyncGroup may be held: each takes a ``reply``
callable that the coordinator calls, at once or later, with the response.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from kgroup.error_codes import ErrorCode
from kgroup.membership import (
    PROTOCOL_TYPE,
    ClassicAssignment,
    GroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinProtocol,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kgroup.testing.groups.errors import ScenarioError
from kgroup.types import TopicPartition

if TYPE_CHECKING:
    from kgroup.admin.model import GroupDescription
    from kgroup.protocol.cluster import BrokerAddress

__all__ = [
    "ClassicCoordinatorConfig",
    "ClassicGroupCoordinator",
    "ClassicGroupState",
    "ExportedMember",
    "PersistedClassicGroup",
    "PersistedClassicMember",
]

# The classic group's own answers, named from kgroup's one table of
# codes; plain ints in the responses, as a broker's are.
ILLEGAL_GENERATION = int(ErrorCode.ILLEGAL_GENERATION)
INCONSISTENT_GROUP_PROTOCOL = int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
REBALANCE_IN_PROGRESS = int(ErrorCode.REBALANCE_IN_PROGRESS)
MEMBER_ID_REQUIRED = int(ErrorCode.MEMBER_ID_REQUIRED)

Reply = Callable[[Any], None]
Schedule = Callable[[float, Callable[[Any], None], Any], None]


class ClassicGroupState(enum.Enum):
    """The classic group's state."""

    EMPTY = "no members"
    PREPARING_REBALANCE = "holding JoinGroups until every member rejoined"
    COMPLETING_REBALANCE = "waiting for the leader's SyncGroup"
    STABLE = "assignment handed out"


@dataclass(frozen=True, slots=True)
class ClassicCoordinatorConfig:
    """Broker settings of the simulated classic group.

    ``initial_rebalance_delay_ms`` is ``group.initial.rebalance.delay.ms``: an
    empty group waits that long (growing with each join, up to the rebalance
    timeout) for more members before the first generation.
    """

    initial_rebalance_delay_ms: int = 300

    def __post_init__(self) -> None:
        if self.initial_rebalance_delay_ms < 0:
            raise ScenarioError("initial_rebalance_delay_ms must not be negative")


@dataclass(frozen=True, slots=True)
class ExportedMember:
    """A classic member as a group conversion (upgrade) hands it to the consumer coordinator.

    ``assignment`` is what it last received in a SyncGroup (what it may still own).
    """

    member_id: str
    instance_id: str | None
    protocols: tuple[JoinProtocol, ...]
    protocol_name: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    assignment: frozenset[TopicPartition]
    generation: int


@dataclass(frozen=True, slots=True)
class PersistedClassicMember:
    """A member as the classic group's GroupMetadata record stores it."""

    member_id: str
    instance_id: str | None
    protocols: tuple[JoinProtocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    assignment: ClassicAssignment


@dataclass(frozen=True, slots=True)
class PersistedClassicGroup:
    """The classic group's last GroupMetadata record (see the module docstring).

    Committed offsets are written by every accepted commit, so they are not
    part of it: the coordinator keeps them across a reload.
    """

    generation: int
    protocol_name: str | None
    leader: str | None
    members: tuple[PersistedClassicMember, ...]


class _JoinSettings(Protocol):
    """What a member's JoinGroup set: a request, or a member reseated without one."""

    @property
    def instance_id(self) -> str | None: ...
    @property
    def protocols(self) -> tuple[JoinProtocol, ...]: ...
    @property
    def session_timeout_ms(self) -> int: ...
    @property
    def rebalance_timeout_ms(self) -> int: ...


class _Member:
    __slots__ = (
        "assignment",
        "instance_id",
        "join_reply",
        "member_id",
        "protocols",
        "rebalance_timeout",
        "session_deadline",
        "session_timeout",
        "sync_reply",
    )

    def __init__(self, member_id: str, req: _JoinSettings) -> None:
        self.member_id = member_id
        self.instance_id = req.instance_id
        self.protocols: tuple[JoinProtocol, ...] = req.protocols
        self.session_timeout = req.session_timeout_ms / 1000.0
        self.rebalance_timeout = req.rebalance_timeout_ms / 1000.0
        self.join_reply: Reply | None = None
        self.sync_reply: Reply | None = None
        self.assignment = ClassicAssignment()
        self.session_deadline = 0.0

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.protocols)


class ClassicGroupCoordinator:
    """The simulated coordinator of one classic consumer group (see the module docstring).

    ``new_member_id`` makes member ids (the simulator passes a seeded source).
    """

    def __init__(
        self,
        group_id: str,
        config: ClassicCoordinatorConfig,
        *,
        schedule: Schedule,
        clock: Callable[[], float],
        new_member_id: Callable[[], str],
        on_removed: Callable[[str, str], None] | None = None,
    ) -> None:
        self.group_id = group_id
        self.config = config
        self._schedule = schedule
        self._clock = clock
        self._new_id = new_member_id
        self._on_removed = on_removed
        self.retired = False
        self.state = ClassicGroupState.EMPTY
        self.generation = 0
        self.protocol_name: str | None = None
        self.leader: str | None = None
        self._members: dict[str, _Member] = {}
        self._pending: dict[str, float] = {}  # MEMBER_ID_REQUIRED issued: id -> expiry
        self._static: dict[str, str] = {}
        self._offsets: dict[TopicPartition, int] = {}
        # Every generation's assignment, for the simulator's ownership checks.
        self._history: dict[int, dict[str, frozenset[TopicPartition]]] = {}
        self._round = 0  # bumped on every rebalance: stale timers do nothing
        self._initial_until: float | None = None
        self.persisted = PersistedClassicGroup(0, None, None, ())
        self._stored_history: dict[int, dict[str, frozenset[TopicPartition]]] = {}

    # ------------------------------------------------------------ persistence

    def _store(self) -> None:
        """Write the GroupMetadata record (the moments the broker writes one)."""
        members = tuple(
            PersistedClassicMember(
                member_id=rec.member_id,
                instance_id=rec.instance_id,
                protocols=rec.protocols,
                session_timeout_ms=round(rec.session_timeout * 1000),
                rebalance_timeout_ms=round(rec.rebalance_timeout * 1000),
                assignment=rec.assignment,
            )
            for rec in self._members.values()
        )
        self.persisted = PersistedClassicGroup(
            self.generation, self.protocol_name, self.leader, members
        )
        # The ownership history as of this record: a static member replaced after it
        # (in memory only) must come back under its stored member id after a reload.
        self._stored_history = {g: dict(a) for g, a in self._history.items()}

    def reload(
        self,
        *,
        schedule: Schedule,
        clock: Callable[[], float],
        new_member_id: Callable[[], str],
        on_removed: Callable[[str, str], None] | None = None,
    ) -> ClassicGroupCoordinator:
        """The group a new coordinator loads from this one's last record, at ``clock()``.

        As the broker replays GroupMetadata: STABLE with the stored members and
        assignments (EMPTY without members); session timers restart from the
        load. Offsets carry over (each commit is its own record). The
        simulator's per-generation history carries over too, without the
        generations the record does not know (it is bookkeeping for the
        ownership checks, not broker state).
        """
        p = self.persisted
        new = ClassicGroupCoordinator(
            self.group_id,
            self.config,
            schedule=schedule,
            clock=clock,
            new_member_id=new_member_id,
            on_removed=on_removed,
        )
        new.generation = p.generation
        new.persisted = p
        new._offsets = dict(self._offsets)
        new._history = {g: dict(a) for g, a in self._stored_history.items()}
        new._stored_history = {g: dict(a) for g, a in self._stored_history.items()}
        if not p.members:
            return new
        now = clock()
        for m in p.members:
            new._readmit(m, m.assignment, now)
        new.protocol_name = p.protocol_name
        new.leader = p.leader
        new.state = ClassicGroupState.STABLE
        return new

    # ------------------------------------------------------------------ views

    @property
    def members(self) -> Mapping[str, ClassicAssignment]:
        """Each member's assignment in the current generation (empty before its sync)."""
        return MappingProxyType({m: rec.assignment for m, rec in self._members.items()})

    def assignment_in(self, generation: int, member_id: str) -> frozenset[TopicPartition] | None:
        """What ``member_id`` was assigned in ``generation`` (None if unknown)."""
        gen = self._history.get(generation)
        return None if gen is None else gen.get(member_id)

    def last_owner(self, generation: int, partition: TopicPartition) -> str | None:
        """Who was last assigned ``partition`` in a generation up to ``generation``.

        Cooperative leaders withhold a moving partition for a generation (or
        more): its previous owner keeps it until it revokes, so the owner is
        the last one the coordinator handed it to.
        """
        for gen in sorted((g for g in self._history if g <= generation), reverse=True):
            owner = self.owner_in(gen, partition)
            if owner is not None:
                return owner
        return None

    def owner_in(self, generation: int, partition: TopicPartition) -> str | None:
        """The member assigned ``partition`` in ``generation``, or None."""
        for member_id, partitions in self._history.get(generation, {}).items():
            if partition in partitions:
                return member_id
        return None

    def subscribed_topics(self) -> frozenset[str]:
        """Topics the members subscribe to under the chosen protocol."""
        out: set[str] = set()
        for rec in self._members.values():
            for p in rec.protocols:
                if p.name == self.protocol_name:
                    out |= p.subscription.topics
        return frozenset(out)

    def describe(self, coordinator: BrokerAddress) -> GroupDescription:
        """The group as DescribeGroups shows it (what a member's look reads).

        Each member's subscription is its metadata under the chosen protocol,
        its assignment what the leader's last SyncGroup gave it.
        """
        from kgroup.admin.model import (  # noqa: PLC0415 (only looks need it)
            GroupDescription,
            GroupType,
            MemberDescription,
            MemberProtocol,
        )

        members = []
        for rec in self._members.values():
            sub = next(
                (p.subscription for p in rec.protocols if p.name == self.protocol_name), None
            )
            members.append(
                MemberDescription(
                    member_id=rec.member_id,
                    instance_id=rec.instance_id,
                    client_id="sim",
                    client_host="sim",
                    protocol=MemberProtocol.CLASSIC,
                    subscribed_topics=sub.topics if sub is not None else frozenset(),
                    assignment=rec.assignment.partitions,
                    owned_partitions=sub.owned_partitions if sub is not None else frozenset(),
                )
            )
        state = {
            ClassicGroupState.EMPTY: "Empty",
            ClassicGroupState.PREPARING_REBALANCE: "PreparingRebalance",
            ClassicGroupState.COMPLETING_REBALANCE: "CompletingRebalance",
            ClassicGroupState.STABLE: "Stable",
        }[self.state]
        return GroupDescription(
            group_id=self.group_id,
            group_type=GroupType.CLASSIC,
            protocol_type=PROTOCOL_TYPE,
            state=state,
            assignor=self.protocol_name or "",
            coordinator=coordinator,
            members=tuple(sorted(members, key=lambda m: m.member_id)),
        )

    # -------------------------------------------------------------- conversion

    def export_for_upgrade(self) -> tuple[int, list[ExportedMember], dict[TopicPartition, int]]:
        """Hand the group over to the consumer coordinator (an upgrade), leaving this one empty.

        As the broker converts: held JoinGroups and SyncGroups are answered
        REBALANCE_IN_PROGRESS (the members rejoin, now translated); every member
        keeps the assignment it last received.
        """
        exported = []
        for rec in self._members.values():
            last: frozenset[TopicPartition] = frozenset()
            gen = 0
            for g in sorted(self._history, reverse=True):
                if rec.member_id in self._history[g]:
                    last, gen = self._history[g][rec.member_id], g
                    break
            chosen = self.protocol_name if self.protocol_name in rec.names() else rec.names()[0]
            exported.append(
                ExportedMember(
                    member_id=rec.member_id,
                    instance_id=rec.instance_id,
                    protocols=rec.protocols,
                    protocol_name=chosen,
                    session_timeout_ms=round(rec.session_timeout * 1000),
                    rebalance_timeout_ms=round(rec.rebalance_timeout * 1000),
                    assignment=last,
                    generation=gen,
                )
            )
            if rec.join_reply is not None:
                rec.join_reply(JoinGroupResponse(error_code=REBALANCE_IN_PROGRESS))
            if rec.sync_reply is not None:
                rec.sync_reply(SyncGroupResponse(error_code=REBALANCE_IN_PROGRESS))
        generation = self.generation
        offsets = dict(self._offsets)
        self._members.clear()
        self._static.clear()
        self._pending.clear()
        self._round += 1  # its timers do nothing from now on
        self._initial_until = None
        self.state = ClassicGroupState.EMPTY
        self.protocol_name = None
        self.leader = None
        self._store()  # the conversion replaces the classic record
        return generation, exported, offsets

    def adopt_downgrade(
        self, generation: int, members: list[ExportedMember], offsets: Mapping[TopicPartition, int]
    ) -> None:
        """Take over a consumer group whose last consumer-protocol member left (a downgrade).

        As the broker (KAFKA-19546): the classic group starts at generation =
        the group epoch with the members' current assignments, and prepares a
        rebalance at once.
        """
        now = self._clock()
        self.generation = max(self.generation, generation)
        self._history[self.generation] = {}
        for m in members:
            self._readmit(m, ClassicAssignment(m.assignment), now)
            self._history[self.generation][m.member_id] = m.assignment
        for tp, count in offsets.items():
            self._offsets[tp] = self._offsets.get(tp, 0) + count
        self.protocol_name = self._vote()
        self.leader = next(iter(self._members))
        self.state = ClassicGroupState.STABLE
        self._store()  # the conversion writes the classic group's record
        self._prepare_rebalance(now)

    def continue_from(self, epoch: int) -> None:
        """An empty group about to form as classic: generations continue after ``epoch``."""
        if not self._members:
            self.generation = max(self.generation, epoch)

    # ------------------------------------------------------------------- join

    def join(self, req: JoinGroupRequest, reply: Reply) -> None:
        """Handle a JoinGroup; ``reply`` gets the response, now or when the join completes."""
        now = self._clock()
        names = tuple(p.name for p in req.protocols)
        if req.protocol_type != PROTOCOL_TYPE or not names or not self._supports(names):
            reply(
                JoinGroupResponse(error_code=INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
            )
            return
        if not req.member_id:
            if req.instance_id is not None:
                self._join_new_static(req, reply, now)
                return
            member_id = self._new_id()
            self._pending[member_id] = now + req.session_timeout_ms / 1000.0
            self._schedule(self._pending[member_id], self._on_pending_expiry, member_id)
            reply(JoinGroupResponse(error_code=MEMBER_ID_REQUIRED, member_id=member_id))
            return
        if req.member_id in self._pending:
            del self._pending[req.member_id]
            self._add(req.member_id, req, reply, now)
            return
        error = self._check_member(req.member_id, req.instance_id)
        if error:
            reply(JoinGroupResponse(error_code=error))
            return
        rec = self._members[req.member_id]
        changed = rec.protocols != req.protocols
        rec.protocols = req.protocols
        rec.rebalance_timeout = req.rebalance_timeout_ms / 1000.0
        rec.session_timeout = req.session_timeout_ms / 1000.0
        state = self.state
        if state is ClassicGroupState.PREPARING_REBALANCE:
            self._await_join(rec, reply, now)
        elif not changed and (
            state is ClassicGroupState.COMPLETING_REBALANCE
            or (state is ClassicGroupState.STABLE and rec.member_id != self.leader)
        ):
            reply(self._join_response(rec))
        else:
            # Leader rejoining a stable group, or new metadata: rebalance.
            self._await_join(rec, reply, now)
            self._prepare_rebalance(now)

    def _join_new_static(self, req: JoinGroupRequest, reply: Reply, now: float) -> None:
        assert req.instance_id is not None
        old_id = self._static.get(req.instance_id)
        member_id = self._new_id()
        if old_id is None:
            self._add(member_id, req, reply, now)
            return
        old = self._members.pop(old_id)
        rec = _Member(member_id, req)
        rec.assignment = old.assignment
        self._members[member_id] = rec
        self._static[req.instance_id] = member_id
        for gen in self._history.values():
            if old_id in gen:
                gen[member_id] = gen.pop(old_id)
        if self.leader == old_id:
            self.leader = member_id
        if old.join_reply is not None:
            old.join_reply(JoinGroupResponse(error_code=int(ErrorCode.FENCED_INSTANCE_ID)))
        if old.sync_reply is not None:
            old.sync_reply(SyncGroupResponse(error_code=int(ErrorCode.FENCED_INSTANCE_ID)))
        if self._on_removed is not None:
            self._on_removed(old_id, "replaced by a new static member")
        self._touch(rec, now)
        state = self.state
        # As GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin: in
        # Stable, only a change of the protocol the group would vote for rebalances
        # (the embedded subscription, owned partitions included, may differ freely);
        # the replacement gets the old member's stored assignment, even when that
        # member still owed a cooperative second round.
        if state is ClassicGroupState.STABLE and self._vote() == self.protocol_name:
            self._store()  # the broker stores the new member id before it answers
            # KIP-345: no rebalance; KIP-814: a returning leader is told to skip assigning.
            reply(self._join_response(rec, skip_assignment=self.leader == member_id))
        else:
            # Completing a rebalance (the leader assigns to the old member id), or a
            # new protocol: rebalance again, as the broker does. Preparing a
            # rebalance: it just takes the old member's place in the join.
            self._await_join(rec, reply, now)
            if state is not ClassicGroupState.PREPARING_REBALANCE:
                self._prepare_rebalance(now)

    def _add(self, member_id: str, req: JoinGroupRequest, reply: Reply, now: float) -> None:
        rec = _Member(member_id, req)
        self._members[member_id] = rec
        if req.instance_id is not None:
            self._static[req.instance_id] = member_id
        self._touch(rec, now)
        self._await_join(rec, reply, now)
        self._prepare_rebalance(now)

    def _await_join(self, rec: _Member, reply: Reply, now: float) -> None:
        if rec.join_reply is not None and rec.join_reply is not reply:
            # A newer JoinGroup replaces the held one (the client gave up on it).
            rec.join_reply(JoinGroupResponse(error_code=int(ErrorCode.UNKNOWN_MEMBER_ID)))
        rec.join_reply = reply
        self._touch(rec, now)
        self._try_complete_join(now)

    def _supports(self, names: tuple[str, ...]) -> bool:
        if not self._members:
            return True
        common = set(names)
        for rec in self._members.values():
            common &= set(rec.names())
        return bool(common)

    def _join_response(self, rec: _Member, *, skip_assignment: bool = False) -> JoinGroupResponse:
        members: tuple[GroupMember, ...] = ()
        if rec.member_id == self.leader:
            members = tuple(
                GroupMember(m.member_id, p.subscription, m.instance_id)
                for m in self._members.values()
                for p in m.protocols
                if p.name == self.protocol_name
            )
        return JoinGroupResponse(
            generation_id=self.generation,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=self.protocol_name,
            leader=self.leader or "",
            member_id=rec.member_id,
            members=members,
            skip_assignment=skip_assignment,
        )

    # -------------------------------------------------------------- rebalance

    def _prepare_rebalance(self, now: float) -> None:
        state = self.state
        if state is ClassicGroupState.PREPARING_REBALANCE:
            self._try_complete_join(now)
            return
        if state is ClassicGroupState.COMPLETING_REBALANCE:
            for rec in self._members.values():
                if rec.sync_reply is not None:
                    rec.sync_reply(SyncGroupResponse(error_code=REBALANCE_IN_PROGRESS))
                    rec.sync_reply = None
        self._round += 1
        self.state = ClassicGroupState.PREPARING_REBALANCE
        timeout = max((m.rebalance_timeout for m in self._members.values()), default=0.0)
        delay = min(self.config.initial_rebalance_delay_ms / 1000.0, timeout)
        # An initial delay of an earlier round (its timer is void with the round) must
        # not hold this one: a group converted to consumer during the delay and back
        # never completed a join again, so its last member's leave wrote no record.
        self._initial_until = None
        if state is ClassicGroupState.EMPTY and delay > 0:
            self._initial_until = now + delay
            self._schedule(now + delay, self._on_initial_delay, self._round)
        self._schedule(now + timeout, self._on_join_deadline, self._round)
        self._try_complete_join(now)

    def _on_initial_delay(self, round_: int) -> None:
        if self.retired or round_ != self._round:
            return
        self._initial_until = None
        self._try_complete_join(self._clock())

    def _try_complete_join(self, now: float) -> None:
        if self.state is not ClassicGroupState.PREPARING_REBALANCE:
            return
        if self._initial_until is not None:
            return  # the initial delay lets more members join first
        if self._pending or any(m.join_reply is None for m in self._members.values()):
            return
        self._complete_join(now)

    def _on_join_deadline(self, round_: int) -> None:
        if self.retired or round_ != self._round:
            return
        if self.state is not ClassicGroupState.PREPARING_REBALANCE:
            return
        self._initial_until = None
        for rec in [m for m in self._members.values() if m.join_reply is None]:
            self._remove(rec, "did not rejoin within the rebalance timeout", rebalance=False)
        self._pending.clear()
        self._complete_join(self._clock())

    def _complete_join(self, now: float) -> None:
        self.generation += 1
        self._round += 1
        if not self._members:
            self.state = ClassicGroupState.EMPTY
            self.protocol_name = None
            self.leader = None
            self._store()  # an empty group's new generation is written
            return
        self.protocol_name = self._vote()
        if self.leader not in self._members:
            self.leader = next(iter(self._members))
        self.state = ClassicGroupState.COMPLETING_REBALANCE
        timeout = max(m.rebalance_timeout for m in self._members.values())
        self._schedule(now + timeout, self._on_sync_deadline, self._round)
        for rec in self._members.values():
            rec.assignment = ClassicAssignment()
            reply = rec.join_reply
            rec.join_reply = None
            self._touch(rec, now)
            if reply is not None:
                reply(self._join_response(rec))

    def _vote(self) -> str:
        common = set(next(iter(self._members.values())).names())
        for rec in self._members.values():
            common &= set(rec.names())
        votes: dict[str, int] = {}
        for rec in self._members.values():
            choice = next(n for n in rec.names() if n in common)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        return min(n for n, v in votes.items() if v == best)

    def _on_sync_deadline(self, round_: int) -> None:
        if self.retired or round_ != self._round:
            return
        if self.state is not ClassicGroupState.COMPLETING_REBALANCE:
            return
        now = self._clock()
        for rec in [m for m in self._members.values() if m.sync_reply is None]:
            self._remove(rec, "did not sync within the rebalance timeout", rebalance=False)
        self._prepare_rebalance(now)

    # ------------------------------------------------------------------- sync

    def sync(self, req: SyncGroupRequest, reply: Reply) -> None:
        """Handle a SyncGroup; ``reply`` gets the response, now or once the leader syncs."""
        error = self._check_member(req.member_id, req.instance_id)
        if error:
            reply(SyncGroupResponse(error_code=error))
            return
        rec = self._members[req.member_id]
        if req.generation_id != self.generation:
            reply(SyncGroupResponse(error_code=ILLEGAL_GENERATION))
            return
        # Absent before SyncGroup v5 (""): as the broker, only a name sent is checked.
        if (
            self.protocol_name is not None
            and req.protocol_name
            and req.protocol_name != self.protocol_name
        ):
            reply(SyncGroupResponse(error_code=INCONSISTENT_GROUP_PROTOCOL))
            return
        self._touch(rec, self._clock())
        if self.state is ClassicGroupState.PREPARING_REBALANCE:
            reply(SyncGroupResponse(error_code=REBALANCE_IN_PROGRESS))
            return
        if self.state is ClassicGroupState.STABLE:
            reply(self._sync_response(rec))
            return
        rec.sync_reply = reply
        if req.member_id != self.leader:
            return
        given = dict(req.assignments)
        for mid, member in self._members.items():
            member.assignment = given.get(mid, ClassicAssignment())
        self._history[self.generation] = {
            mid: m.assignment.partitions for mid, m in self._members.items()
        }
        self.state = ClassicGroupState.STABLE
        self._store()  # the leader's assignment is stored before anyone is answered
        self._round += 1
        for member in self._members.values():
            held = member.sync_reply
            member.sync_reply = None
            if held is not None:
                held(self._sync_response(member))

    def _sync_response(self, rec: _Member) -> SyncGroupResponse:
        return SyncGroupResponse(
            assignment=rec.assignment,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=self.protocol_name,
        )

    # --------------------------------------------------------------- heartbeat

    def _check_member(self, member_id: str, instance_id: str | None) -> int:
        # As the broker's validateMember: a static member is checked by instance id first.
        if instance_id is not None:
            known = self._static.get(instance_id)
            if known is None:
                return int(ErrorCode.UNKNOWN_MEMBER_ID)
            if known != member_id:
                return int(ErrorCode.FENCED_INSTANCE_ID)
        if member_id not in self._members:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        return 0

    def heartbeat(self, generation: int, member_id: str, instance_id: str | None) -> int:
        """Handle a Heartbeat; the error code."""
        error = self._check_member(member_id, instance_id)
        if error:
            return error
        rec = self._members[member_id]
        if generation != self.generation:
            return ILLEGAL_GENERATION
        self._touch(rec, self._clock())
        if self.state is ClassicGroupState.PREPARING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return 0

    def leave(self, member_id: str, instance_id: str | None) -> int:
        """Handle a LeaveGroup; the error code.

        A static member may be named by its instance id alone (LeaveGroup v3+,
        member id ""), as the broker's classicGroupLeave allows.
        """
        if not member_id and instance_id is not None:
            member_id = self._static.get(instance_id, "")
        error = self._check_member(member_id, instance_id)
        if error:
            return error
        self._remove(self._members[member_id], "left the group")
        return 0

    def commit_error(self, member_id: str, generation: int, instance_id: str | None) -> int:
        """The error of an OffsetCommit with this identity (0: accepted).

        As ``ClassicGroup.validateOffsetCommit``: an empty group takes commits
        from outside the group (generation -1); otherwise the member must be
        known at the current generation, and not while the group waits for
        the leader's assignment.
        """
        if generation < 0 and self.state is ClassicGroupState.EMPTY:
            return 0
        if generation >= 0 or member_id or instance_id is not None:
            error = self._check_member(member_id, instance_id)
            if error:
                return error
            if generation != self.generation:
                return ILLEGAL_GENERATION
        elif self.state is not ClassicGroupState.EMPTY:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        if self.state is ClassicGroupState.COMPLETING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return 0

    def commit(
        self,
        member_id: str,
        generation: int,
        instance_id: str | None,
        partitions: frozenset[TopicPartition],
    ) -> int:
        """Judge an OffsetCommit; the error code (0: accepted)."""
        error = self._check_member(member_id, instance_id)
        if error:
            return error
        if generation != self.generation:
            return ILLEGAL_GENERATION
        if self.state is ClassicGroupState.COMPLETING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        for tp in partitions:
            self._offsets[tp] = self._offsets.get(tp, 0) + 1
        return 0

    def offsets(self, partitions: frozenset[TopicPartition]) -> dict[TopicPartition, int | None]:
        """Committed "offsets" (commit counts) of ``partitions``."""
        return {tp: self._offsets.get(tp) for tp in partitions}

    def remove(self, member_id: str, why: str) -> bool:
        """Remove ``member_id`` as its session expiring would (a test's, for example),
        and rebalance the rest; False if it is not a member."""
        rec = self._members.get(member_id)
        if rec is None:
            return False
        self._remove(rec, why)
        return True

    # ------------------------------------------------------------ bookkeeping

    def _readmit(
        self, m: PersistedClassicMember | ExportedMember, assignment: ClassicAssignment, now: float
    ) -> None:
        """Seat a member without a JoinGroup of its own (a reload, a downgrade).

        It keeps the settings of the join it made before, holds ``assignment``
        and starts a fresh session.
        """
        rec = _Member(m.member_id, m)
        rec.assignment = assignment
        self._members[m.member_id] = rec
        if m.instance_id is not None:
            self._static[m.instance_id] = m.member_id
        self._touch(rec, now)

    def _touch(self, rec: _Member, now: float) -> None:
        first = rec.session_deadline == 0.0
        rec.session_deadline = now + rec.session_timeout
        if first:
            self._schedule(rec.session_deadline, self._on_session, rec.member_id)

    def _on_session(self, member_id: str) -> None:
        if self.retired:
            return
        rec = self._members.get(member_id)
        if rec is None:
            return
        now = self._clock()
        if rec.join_reply is not None or rec.sync_reply is not None:
            # A held request keeps the session alive (the broker does the same).
            rec.session_deadline = now + rec.session_timeout
        if rec.session_deadline > now:
            self._schedule(rec.session_deadline, self._on_session, member_id)
            return
        self._remove(rec, "session timeout")

    def _on_pending_expiry(self, member_id: str) -> None:
        expiry = self._pending.get(member_id)
        if self.retired or expiry is None or expiry > self._clock():
            return
        del self._pending[member_id]
        self._try_complete_join(self._clock())

    def _remove(self, rec: _Member, why: str, *, rebalance: bool = True) -> None:
        del self._members[rec.member_id]
        if rec.instance_id is not None and self._static.get(rec.instance_id) == rec.member_id:
            del self._static[rec.instance_id]
        if rec.join_reply is not None:
            rec.join_reply(JoinGroupResponse(error_code=int(ErrorCode.UNKNOWN_MEMBER_ID)))
        if rec.sync_reply is not None:
            rec.sync_reply(SyncGroupResponse(error_code=int(ErrorCode.UNKNOWN_MEMBER_ID)))
        if self._on_removed is not None:
            self._on_removed(rec.member_id, why)
        if not rebalance:
            return
        now = self._clock()
        if self.state in (ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now)
        else:
            self._try_complete_join(now)
