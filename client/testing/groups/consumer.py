"""A simulated KIP-848 group coordinator for one consumer group, as Apache Kafka 4.x ships it.

It answers the members' :class:`~kgroup.membership.HeartbeatRequest` values with
:class:`~kgroup.membership.HeartbeatResponse` values and judges their offset
commits, following the broker's group coordinator (``GroupMetadataManager``
and ``CurrentAssignmentBuilder``; see ``docs/simulation.md``):

- a **group epoch** bumped when a member joins, leaves, is fenced or changes
  its subscription, or when the subscribed topics' metadata changes;
- a **target assignment** recomputed by a server assignor (``uniform``,
  ``range`` or any :class:`~kgroup.assignors.PartitionAssignor`) whenever the
  group epoch is ahead of the assignment epoch;
- per-member **reconciliation**: a member first gives up what the target no
  longer gives it (UNREVOKED_PARTITIONS, same epoch, until a heartbeat no
  longer reports those partitions), then moves to the target epoch and gets
  the partitions nobody else still owns (UNRELEASED_PARTITIONS until the rest
  are released);
- member epoch validation (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID; the
  previous epoch is accepted with owned partitions that are a subset of the
  assignment; epoch 0 rejoins an existing member, KAFKA-19233);
- session timeouts, rebalance timeouts, leaving (-1), static members leaving
  temporarily (-2) and being replaced by a new process with the same
  instance id (UNRELEASED_INSTANCE_ID while the old one has not left);
- OffsetCommit accepted only when the member exists and its epoch matches
  (STALE_MEMBER_EPOCH otherwise).

Everything the broker persists (group epoch, target assignment and its epoch,
members with their epochs and current assignments, committed offsets) is
captured by :meth:`persist` and restored by passing the snapshot back in,
which is how the simulator models a coordinator failover; timers are not
persisted and restart from the load time, as on the broker.

Timers go through the ``schedule`` callable; what the simulator's invariant
checker needs to see goes through a :class:`CoordinatorObserver`.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from kgroup import error_codes
from kgroup.assignors import (
    AssignmentSpec,
    MemberAssignment,
    MemberSpec,
    PartitionAssignor,
    RangeServerAssignor,
    TargetAssignment,
    TopicMetadata,
    UniformAssignor,
)
from kgroup.errors import KgroupError
from kgroup.membership import (
    PROTOCOL_TYPE,
    ClassicAssignment,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinProtocol,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kgroup.membership.consumer import (
    ClientAssignor,
    InstallAssignmentRequest,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
    PreparedMember,
    PreparedTopic,
)
from kgroup.testing._topics import by_topic_id
from kgroup.testing.groups.catalog import TopicCatalog
from kgroup.testing.groups.errors import ScenarioError, SimulationError
from kgroup.testing.groups.rules import member_epoch_fenced, sent_or_kept
from kgroup.types import TopicIdPartition, TopicPartition

if TYPE_CHECKING:  # classic.py imports this module
    from kgroup.admin.model import GroupDescription
    from kgroup.protocol.cluster import BrokerAddress
    from kgroup.testing.groups.classic import ExportedMember

__all__ = [
    "INVALID_ASSIGNMENT",
    "AssignmentState",
    "ConsumerGroupCoordinator",
    "CoordinatorConfig",
    "CoordinatorObserver",
    "ErrorCode",
    "MemberRecord",
    "PersistedGroup",
    "PersistedMember",
]

_EMPTY: frozenset[TopicIdPartition] = frozenset()
_NO_PARTITIONS: Mapping[uuid.UUID, frozenset[int]] = MappingProxyType({})


# The coordinator answers with the codes of kgroup's one table (re-exported here,
# where the simulator and the fake broker take them from).
ErrorCode = error_codes.ErrorCode

# The KIP-848 draft's InstallAssignment error: the draft gave it no number and no
# Kafka release has it, so the simulated coordinator answers one no release uses.
# Not a row of kgroup.error_codes: no member may learn to react to it.
INVALID_ASSIGNMENT = 900


class AssignmentState(enum.Enum):
    """Where a member stands in its reconciliation, as the coordinator sees it."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "waiting for the member to revoke partitions"
    UNRELEASED_PARTITIONS = "waiting for other members to release partitions"


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """The broker-side settings of the simulated group.

    Attributes:
        heartbeat_interval_ms: ``group.consumer.heartbeat.interval.ms``.
        session_timeout_ms: ``group.consumer.session.timeout.ms``.
        assignors: the server assignors by name; the first is the default
            (``group.consumer.assignors``). A member naming another one in
            ServerAssignor gets UNSUPPORTED_ASSIGNOR.
        max_group_size: ``group.consumer.max.size`` (None: unbounded).
        pre_kafka_19233: behave as Apache Kafka 4.0 / 4.1 (before KAFKA-19233,
            fixed in 4.2.0): an epoch-0 rejoin of a member id the group still
            holds is checked like any other epoch, so it is refused
            FENCED_MEMBER_EPOCH unless 0 is the held member's previous epoch.
        rejoin_starts_over: an epoch-0 rejoin of a dynamic member id the group
            still holds removes the held member and joins it as a new one (a
            new epoch, the group epoch bumped). No Kafka release does this (4.2
            keeps the held member, earlier ones check the epoch); it is the fake
            broker's rule, so that a fencing a test stages by interception,
            which leaves the coordinator's epoch where it was, still ends in a
            new epoch as a real fencing (the coordinator's epoch ahead) does.
    """

    heartbeat_interval_ms: int = 1000
    session_timeout_ms: int = 6000
    assignors: tuple[PartitionAssignor, ...] = field(
        default_factory=lambda: (UniformAssignor(), RangeServerAssignor())
    )
    max_group_size: int | None = None
    pre_kafka_19233: bool = False
    rejoin_starts_over: bool = False

    def __post_init__(self) -> None:
        if self.pre_kafka_19233 and self.rejoin_starts_over:
            raise ScenarioError("pre_kafka_19233 and rejoin_starts_over are two rules for one case")
        if self.heartbeat_interval_ms <= 0 or self.session_timeout_ms <= 0:
            raise ScenarioError("heartbeat_interval_ms and session_timeout_ms must be positive")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ScenarioError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be below "
                f"session_timeout_ms ({self.session_timeout_ms}), as the broker requires"
            )
        if not self.assignors:
            raise ScenarioError("the coordinator needs at least one server assignor")
        names = [a.name for a in self.assignors]
        if len(set(names)) != len(names):
            raise ScenarioError(f"server assignor names must be unique, got {names}")
        if self.max_group_size is not None and self.max_group_size < 1:
            raise ScenarioError("max_group_size must be None or positive")


@dataclass(frozen=True, slots=True)
class PersistedMember:
    """A member as the coordinator persists it (metadata and current assignment records)."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    epoch: int
    previous_epoch: int
    state: AssignmentState
    assigned: frozenset[TopicIdPartition]
    pending_revocation: frozenset[TopicIdPartition]
    client_assignors: tuple[ClientAssignor, ...] = ()
    classic_protocols: tuple[JoinProtocol, ...] | None = None
    session_timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class _Prepared:
    """The group state a PrepareAssignment handed out: what its install is checked against."""

    group_epoch: int
    assignor: str
    members: Mapping[str, MemberSpec]
    topics: Mapping[uuid.UUID, TopicMetadata]


@dataclass(frozen=True, slots=True)
class PersistedGroup:
    """Everything the coordinator persists about the group: what a failover reloads."""

    group_epoch: int
    assignment_epoch: int
    subscription_metadata: tuple[tuple[uuid.UUID, int], ...]
    members: tuple[PersistedMember, ...]
    targets: tuple[tuple[str, frozenset[TopicIdPartition]], ...]
    offsets: tuple[tuple[TopicPartition, int], ...]


class MemberRecord:
    """The coordinator's live record of one member (mutable; read-only to observers)."""

    __slots__ = (
        "assigned",
        "classic_protocols",
        "client_assignors",
        "epoch",
        "instance_id",
        "member_id",
        "pending_revocation",
        "previous_epoch",
        "rack_id",
        "rebalance_timeout_ms",
        "server_assignor",
        "session_timeout_ms",
        "state",
        "subscribed_topic_names",
        "subscribed_topic_regex",
    )

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.instance_id: str | None = None
        self.rack_id: str | None = None
        self.rebalance_timeout_ms = -1
        self.subscribed_topic_names: tuple[str, ...] = ()
        self.subscribed_topic_regex: str | None = None
        self.server_assignor: str | None = None
        self.client_assignors: tuple[ClientAssignor, ...] = ()
        # A classic member in a converted group: its JoinGroup protocols and
        # its own session timeout (None: a consumer-protocol member).
        self.classic_protocols: tuple[JoinProtocol, ...] | None = None
        self.session_timeout_ms: int | None = None
        self.epoch = 0
        self.previous_epoch = 0
        self.state = AssignmentState.STABLE
        self.assigned: frozenset[TopicIdPartition] = _EMPTY
        self.pending_revocation: frozenset[TopicIdPartition] = _EMPTY

    def owned(self) -> frozenset[TopicIdPartition]:
        """What the member owns for the coordinator: assigned plus pending revocation."""
        return self.assigned | self.pending_revocation

    def persist(self) -> PersistedMember:
        """This record as persisted."""
        return PersistedMember(
            member_id=self.member_id,
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            server_assignor=self.server_assignor,
            epoch=self.epoch,
            previous_epoch=self.previous_epoch,
            state=self.state,
            assigned=self.assigned,
            pending_revocation=self.pending_revocation,
            client_assignors=self.client_assignors,
            classic_protocols=self.classic_protocols,
            session_timeout_ms=self.session_timeout_ms,
        )

    @classmethod
    def restore(cls, p: PersistedMember, member_id: str | None = None) -> MemberRecord:
        """A record from its persisted form (optionally under another member id)."""
        rec = cls(member_id or p.member_id)
        rec.instance_id = p.instance_id
        rec.rack_id = p.rack_id
        rec.rebalance_timeout_ms = p.rebalance_timeout_ms
        rec.subscribed_topic_names = p.subscribed_topic_names
        rec.subscribed_topic_regex = p.subscribed_topic_regex
        rec.server_assignor = p.server_assignor
        rec.epoch = p.epoch
        rec.previous_epoch = p.previous_epoch
        rec.state = p.state
        rec.assigned = p.assigned
        rec.pending_revocation = p.pending_revocation
        rec.client_assignors = p.client_assignors
        rec.classic_protocols = p.classic_protocols
        rec.session_timeout_ms = p.session_timeout_ms
        return rec


class CoordinatorObserver(Protocol):
    """What the simulator watches in the coordinator (for its invariants and trace)."""

    def released(self, member_id: str, partitions: frozenset[TopicIdPartition], why: str) -> None:
        """``member_id`` stays in the group but no longer owns ``partitions``."""

    def removed(self, member_id: str, why: str) -> None:
        """``member_id`` left the group or was fenced out of it."""

    def commit_accepted(
        self, record: MemberRecord, epoch: int, partitions: frozenset[TopicPartition]
    ) -> None:
        """An OffsetCommit from ``record``'s member at ``epoch`` was accepted."""

    def illegal_assignment(self, message: str) -> None:
        """The server assignor failed or returned an assignment that breaks the rules."""

    def note(self, text: str) -> None:
        """Something worth a line in the trace."""


class _RejectError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


Schedule = Callable[[float, Callable[[Any], None], Any], None]


class ConsumerGroupCoordinator:
    """The simulated coordinator of one consumer group (see the module docstring).

    ``bug_skip_release`` is a test-only switch: the coordinator then hands a
    partition to its new owner without waiting for the previous owner to
    release it (the simulator must catch this).
    """

    def __init__(
        self,
        group_id: str,
        config: CoordinatorConfig,
        cluster: TopicCatalog,
        *,
        schedule: Schedule,
        clock: Callable[[], float],
        observer: CoordinatorObserver,
        persisted: PersistedGroup | None = None,
        bug_skip_release: bool = False,
        new_member_id: Callable[[], str] | None = None,
    ) -> None:
        self.group_id = group_id
        self.config = config
        self._cluster = cluster
        self._schedule = schedule
        self._clock = clock
        self._obs = observer
        self._bug_skip_release = bug_skip_release
        # Member ids for classic members (MEMBER_ID_REQUIRED); the simulator passes a seeded source.
        self._new_member_id = new_member_id or (lambda: str(uuid.uuid4()))
        self._assignors = {a.name: a for a in config.assignors}
        self._default_assignor = config.assignors[0].name
        self._session_ms = config.session_timeout_ms
        # Set when a failover replaces this instance: its timers then do nothing.
        self.retired = False
        # Persisted state.
        self.group_epoch = 0
        self.assignment_epoch = 0
        self._members: dict[str, MemberRecord] = {}
        self._targets: dict[str, frozenset[TopicIdPartition]] = {}
        # The same targets as the assignors speak them: topic id -> partition numbers.
        self._target_maps: dict[str, Mapping[uuid.UUID, frozenset[int]]] = {}
        self._subscription_metadata: dict[uuid.UUID, int] = {}
        self._offsets: dict[TopicPartition, int] = {}
        # Derived and volatile state.
        self._static: dict[str, str] = {}  # instance id -> member id
        self._owner: dict[TopicIdPartition, str] = {}  # the broker's partition epochs
        self._metadata_version = -1
        self._session_deadline: dict[str, float] = {}
        self._session_armed: set[str] = set()
        self._rebalance_deadline: dict[str, tuple[int, float]] = {}
        self._regex_cache: dict[str, re.Pattern[str] | None] = {}
        self._topics_cache: dict[tuple[tuple[str, ...], str | None], frozenset[uuid.UUID]] = {}
        self._topics_cache_version = -1
        # Client-side mode (nothing of it is persisted: a reloaded coordinator
        # picks a member again). The member asked to compute, until when, the
        # members that timed out this round, and the state last handed out.
        self._computer: str | None = None
        self._computer_deadline: float | None = None
        self._computer_skip: set[str] = set()
        self._prepared: _Prepared | None = None
        # Member ids handed out with MEMBER_ID_REQUIRED to classic members (volatile).
        self._classic_pending: set[str] = set()
        if persisted is not None:
            self._load(persisted, clock())

    # ------------------------------------------------------------------ views

    @property
    def members(self) -> Mapping[str, MemberRecord]:
        """The member records by member id (read-only view)."""
        return MappingProxyType(self._members)

    def target(self, member_id: str) -> frozenset[TopicIdPartition]:
        """The member's target assignment (empty if none)."""
        return self._targets.get(member_id, _EMPTY)

    def instance_holder(self, instance_id: str) -> str | None:
        """The member id holding static ``instance_id`` (None if no member holds it)."""
        return self._static.get(instance_id)

    def owner_of(self, tip: TopicIdPartition) -> str | None:
        """The member id owning ``tip`` (assigned or pending revocation), or None."""
        return self._owner.get(tip)

    @property
    def committed(self) -> Mapping[TopicPartition, int]:
        """How many commits each partition has received (a stand-in for offsets)."""
        return MappingProxyType(self._offsets)

    def subscribed_partitions(self) -> frozenset[TopicIdPartition]:
        """Every partition of every existing topic some member subscribes to."""
        ids: set[uuid.UUID] = set()
        for rec in self._members.values():
            ids |= self._member_topic_ids(rec)
        out: set[TopicIdPartition] = set()
        for tid in ids:
            topic = self._cluster.by_id(tid)
            if topic is not None:
                out |= topic.id_partitions()
        return frozenset(out)

    @property
    def state(self) -> str:
        """The group's state as ConsumerGroupDescribe names it (``ConsumerGroup``'s).

        Empty without members, Assigning while the group epoch is ahead of the
        target's, Reconciling while a member has not reached its target at that
        epoch, else Stable.
        """
        if not self._members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for rec in self._members.values():
            if (
                rec.epoch != self.assignment_epoch
                or rec.assigned != self._targets.get(rec.member_id, _EMPTY)
                or rec.pending_revocation
            ):
                return "Reconciling"
        return "Stable"

    def describe(self, coordinator: BrokerAddress) -> GroupDescription:
        """The group as ConsumerGroupDescribe shows it (what a member's look reads)."""
        from kgroup.admin.model import (  # noqa: PLC0415 (only looks need it)
            GroupDescription,
            GroupType,
            MemberDescription,
            MemberProtocol,
        )

        def names(tips: frozenset[TopicIdPartition]) -> frozenset[TopicPartition]:
            return frozenset(self._cluster.to_name(t) for t in tips)

        members = []
        for rec in self._members.values():
            target = self._targets.get(rec.member_id, _EMPTY)
            members.append(
                MemberDescription(
                    member_id=rec.member_id,
                    instance_id=rec.instance_id,
                    client_id="sim",
                    client_host="sim",
                    protocol=(
                        MemberProtocol.CONSUMER
                        if rec.classic_protocols is None
                        else MemberProtocol.CLASSIC
                    ),
                    member_epoch=rec.epoch,
                    subscribed_topics=frozenset(rec.subscribed_topic_names),
                    subscribed_regex=rec.subscribed_topic_regex,
                    assignment=names(rec.assigned),
                    target_assignment=names(target),
                )
            )
        state = self.state
        return GroupDescription(
            group_id=self.group_id,
            group_type=GroupType.CONSUMER,
            protocol_type=PROTOCOL_TYPE,
            state=state,
            assignor="",
            coordinator=coordinator,
            members=tuple(sorted(members, key=lambda m: m.member_id)),
            group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
        )

    # ------------------------------------------------------------ persistence

    def persist(self) -> PersistedGroup:
        """The group as the broker has it on disk."""
        return PersistedGroup(
            group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            subscription_metadata=tuple(sorted(self._subscription_metadata.items())),
            members=tuple(rec.persist() for rec in self._members.values()),
            targets=tuple(self._targets.items()),
            offsets=tuple(self._offsets.items()),
        )

    def _load(self, p: PersistedGroup, now: float) -> None:
        self.group_epoch = p.group_epoch
        self.assignment_epoch = p.assignment_epoch
        self._subscription_metadata = dict(p.subscription_metadata)
        self._offsets = dict(p.offsets)
        self._targets = dict(p.targets)
        for mid, target in p.targets:
            self._target_maps[mid] = MappingProxyType(by_topic_id(sorted(target)))
        for pm in p.members:
            rec = MemberRecord.restore(pm)
            self._members[rec.member_id] = rec
            if rec.instance_id is not None:
                self._static[rec.instance_id] = rec.member_id
            for tip in rec.owned():
                self._own(tip, rec.member_id)
            # As the broker does on load: fresh session timers for everyone, and
            # rebalance timers for members still revoking.
            self._touch_session(rec.member_id, now)
            if rec.state is AssignmentState.UNREVOKED_PARTITIONS:
                self._arm_rebalance(rec, now)
        # Metadata may have changed while the group was unloaded: check on the next heartbeat.
        self._metadata_version = -1

    # ------------------------------------------------------------- heartbeat

    def heartbeat(self, req: HeartbeatRequest, now: float) -> HeartbeatResponse:
        """Handle one ConsumerGroupHeartbeat request at virtual time ``now``."""
        try:
            self._validate(req)
            if req.member_epoch < 0:
                return self._leave(req, now)
            return self._heartbeat(req, now)
        except _RejectError as r:
            return HeartbeatResponse(error_code=int(r.code), error_message=r.message)

    def _validate(self, req: HeartbeatRequest) -> None:
        bad = ErrorCode.INVALID_REQUEST
        if not req.group_id or req.group_id != self.group_id:
            raise _RejectError(bad, f"GroupId must be {self.group_id!r}, got {req.group_id!r}")
        if not req.member_id:
            raise _RejectError(bad, "MemberId can't be empty.")
        if req.instance_id == "":
            raise _RejectError(bad, "InstanceId can't be empty.")
        if req.rack_id == "":
            raise _RejectError(bad, "RackId can't be empty.")
        if req.member_epoch < -2:
            raise _RejectError(bad, f"MemberEpoch {req.member_epoch} is invalid.")
        if req.member_epoch == -2 and req.instance_id is None:
            raise _RejectError(bad, "InstanceId can't be null when leaving with epoch -2.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms is None or req.rebalance_timeout_ms <= 0:
                raise _RejectError(bad, "RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise _RejectError(bad, "TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise _RejectError(
                    bad,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        if req.subscribed_topic_regex and self._regex(req.subscribed_topic_regex) is None:
            raise _RejectError(
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex {req.subscribed_topic_regex!r} is not a valid regex.",
            )
        if req.client_assignors:
            self._check_versions(req.member_id, req.client_assignors)
        if req.server_assignor is not None and req.server_assignor not in self._assignors:
            raise _RejectError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor!r} is not supported; supported: "
                f"{sorted(self._assignors)}.",
            )

    def _heartbeat(self, req: HeartbeatRequest, now: float) -> HeartbeatResponse:
        epoch = req.member_epoch
        owned = req.topic_partitions
        rec, new = self._member_for(req, now)
        old_names = rec.subscribed_topic_names
        old_regex = rec.subscribed_topic_regex
        old_assignor = rec.server_assignor
        old_clients = rec.client_assignors
        rec.client_assignors = sent_or_kept(req.client_assignors, rec.client_assignors)
        rec.rack_id = sent_or_kept(req.rack_id, rec.rack_id)
        rec.rebalance_timeout_ms = sent_or_kept(req.rebalance_timeout_ms, rec.rebalance_timeout_ms)
        rec.server_assignor = sent_or_kept(req.server_assignor, rec.server_assignor)
        rec.subscribed_topic_names = sent_or_kept(
            req.subscribed_topic_names, rec.subscribed_topic_names
        )
        if req.subscribed_topic_regex is not None:
            rec.subscribed_topic_regex = req.subscribed_topic_regex or None
        bump = (
            new
            or rec.subscribed_topic_names != old_names
            or rec.subscribed_topic_regex != old_regex
            or rec.server_assignor != old_assignor
            or rec.client_assignors != old_clients
        )
        # Member or cluster metadata changed: the subscribed topics' metadata may differ.
        stale = bump or self._metadata_version != self._cluster.version
        if stale and self._refresh_subscription_metadata():
            bump = True
        if bump:
            self.group_epoch += 1
            self._note(f"group epoch {self.group_epoch}")
        client = None
        if self.group_epoch > self.assignment_epoch:
            client = self._client_assignor()
            if client is None:
                self._compute_target()
            else:
                self._delegate(client)
        before = rec.assigned
        self._reconcile(rec, owned, now)
        self._touch_session(rec.member_id, now)
        full = epoch == 0 or (
            req.rebalance_timeout_ms is not None
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and owned is not None
        )
        assignment: dict[uuid.UUID, list[int]] | None = None
        # Epoch 0: no assignment computed for the member yet (client-side mode
        # before the first install); it stays joining until one is.
        if rec.epoch > 0 and (full or rec.assigned != before):
            assignment = {}
            for tip in rec.assigned:
                assignment.setdefault(tip.topic_id, []).append(tip.partition)
        return HeartbeatResponse(
            member_id=rec.member_id,
            member_epoch=rec.epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=assignment,
            should_compute_assignment=client is not None and self._notify(rec, now),
        )

    def _member_for(self, req: HeartbeatRequest, now: float) -> tuple[MemberRecord, bool]:
        """The member's record (created or replaced when joining), epoch checked."""
        mid = req.member_id
        epoch = req.member_epoch
        if req.instance_id is None:
            rec = self._members.get(mid)
            if rec is None:
                if epoch != 0:
                    raise _RejectError(
                        ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not in the group."
                    )
                return self._create(mid, None), True
            if epoch == 0 and self.config.rejoin_starts_over:
                self._fence(rec, "rejoined with epoch 0")
                return self._create(mid, None), True
            self._check_epoch(rec, epoch, req.topic_partitions)
            return rec, False
        iid = req.instance_id
        existing_id = self._static.get(iid)
        existing = self._members.get(existing_id) if existing_id is not None else None
        if epoch == 0:
            if existing is None:
                if mid in self._members:
                    raise _RejectError(
                        ErrorCode.FENCED_INSTANCE_ID,
                        f"Member {mid} joined without its instance id.",
                    )
                return self._create(mid, iid), True
            if existing.member_id == mid and existing.epoch == 0:
                # Still joining: in client-side mode a member has no epoch until an
                # assignment is installed, and heartbeats at epoch 0 until then.
                return existing, False
            # As the broker: the instance id must have been released with a -2 leave,
            # even by the same member id (the epoch 0 leniency of KAFKA-19233 applies
            # to dynamic members only). A classic member holding the instance id (a
            # converted group's, or a classic replacement's) is replaced at once:
            # GroupMetadataManager checks the release only when both speak the
            # consumer protocol. Either way the replacement keeps the old member's
            # assignment and bumps no epoch when its subscription is unchanged.
            if existing.epoch != -2 and existing.classic_protocols is None:
                raise _RejectError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {mid} with instance id {iid} cannot join the group because "
                    f"the instance id is owned by {existing.member_id} member.",
                )
            rec = self._replace(existing, mid, now)
            # It speaks the consumer protocol now (the broker drops the classic metadata).
            rec.classic_protocols = None
            rec.session_timeout_ms = None
            return rec, False
        if existing is None:
            raise _RejectError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {iid} is unknown.")
        if existing.member_id != mid:
            raise _RejectError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {mid} with instance id {iid} was fenced by member "
                f"{existing.member_id}.",
            )
        self._check_epoch(existing, epoch, req.topic_partitions)
        return existing, False

    def _create(self, member_id: str, instance_id: str | None) -> MemberRecord:
        limit = self.config.max_group_size
        if limit is not None and len(self._members) >= limit:
            raise _RejectError(
                ErrorCode.GROUP_MAX_SIZE_REACHED, f"The group has reached its size limit {limit}."
            )
        rec = MemberRecord(member_id)
        rec.instance_id = instance_id
        self._members[member_id] = rec
        if instance_id is not None:
            self._static[instance_id] = member_id
        self._note(f"member {member_id[:8]} joins" + (f" as {instance_id}" if instance_id else ""))
        return rec

    def _replace(self, old: MemberRecord, member_id: str, now: float) -> MemberRecord:
        """A new process takes over a static member that left temporarily (epoch -2)."""
        rec = MemberRecord.restore(old.persist(), member_id)
        rec.epoch = 0
        rec.previous_epoch = 0
        same = old.member_id == member_id
        del self._members[old.member_id]
        self._members[member_id] = rec
        assert rec.instance_id is not None
        self._static[rec.instance_id] = member_id
        target = self._targets.pop(old.member_id, None)
        if target is not None:
            self._targets[member_id] = target
            self._target_maps[member_id] = self._target_maps.pop(old.member_id)
        for tip in old.owned():
            self._owner[tip] = member_id
        self._forget_timers(old.member_id)
        self._note(f"static member {rec.instance_id}: {member_id[:8]} replaces {old.member_id[:8]}")
        if not same:
            self._obs.removed(old.member_id, "replaced by a new static member")
        return rec

    def _check_epoch(
        self, rec: MemberRecord, epoch: int, owned: frozenset[TopicIdPartition] | None
    ) -> None:
        if epoch == 0 and not self.config.pre_kafka_19233:
            return  # rejoining with the same member id (KAFKA-19233)
        if member_epoch_fenced(
            epoch,
            current=rec.epoch,
            previous=rec.previous_epoch,
            owned=owned,
            assigned=rec.assigned,
        ):
            than = "greater" if epoch > rec.epoch else "smaller"
            raise _RejectError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a {than} member epoch ({epoch}) than the one "
                f"known by the group coordinator ({rec.epoch}). The member must abandon all "
                "its partitions and rejoin.",
            )

    # ------------------------------------------------------------------ leave

    def _leave(self, req: HeartbeatRequest, now: float) -> HeartbeatResponse:
        mid = req.member_id
        if req.instance_id is None:
            rec = self._members.get(mid)
            if rec is None:
                raise _RejectError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not in the group."
                )
            self._fence(rec, "left the group")
            return HeartbeatResponse(member_id=mid, member_epoch=req.member_epoch)
        existing_id = self._static.get(req.instance_id)
        rec = self._members.get(existing_id) if existing_id is not None else None
        if rec is None:
            raise _RejectError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
            )
        if rec.member_id != mid:
            raise _RejectError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {mid} with instance id {req.instance_id} was fenced by member "
                f"{rec.member_id}.",
            )
        if req.member_epoch == -1:
            self._fence(rec, "left the group for good")
            return HeartbeatResponse(member_id=mid, member_epoch=-1)
        # -2: left temporarily; it keeps its assignment until its session expires.
        released = rec.pending_revocation
        for tip in released:
            self._disown(tip, rec.member_id)
        rec.pending_revocation = _EMPTY
        rec.epoch = -2
        self._rebalance_deadline.pop(rec.member_id, None)
        self._note(f"static member {rec.instance_id} ({mid[:8]}) left temporarily")
        if released:
            self._obs.released(rec.member_id, released, "static member left temporarily")
        return HeartbeatResponse(member_id=mid, member_epoch=-2)

    def remove(self, member_id: str, why: str) -> bool:
        """Remove ``member_id`` as the coordinator fences a member (a test's session
        expiry, for example); False if it is not a member."""
        rec = self._members.get(member_id)
        if rec is None:
            return False
        self._fence(rec, why)
        return True

    def replace_targets(self, targets: Mapping[str, frozenset[TopicIdPartition]]) -> None:
        """Make ``targets`` the target assignment, with no assignor run and no epoch
        change (a test staging what a conversion leaves, for example)."""
        self._targets = dict(targets)
        self._target_maps = {
            mid: MappingProxyType(by_topic_id(sorted(tips))) for mid, tips in targets.items()
        }

    def _fence(self, rec: MemberRecord, why: str) -> None:
        """Remove the member from the group (leave, session or rebalance timeout)."""
        mid = rec.member_id
        del self._members[mid]
        if mid == self._computer:
            # A later record with the same id (a rejoin) is another incarnation.
            self._computer = None
            self._computer_deadline = None
            self._prepared = None
        self._targets.pop(mid, None)
        self._target_maps.pop(mid, None)
        if rec.instance_id is not None and self._static.get(rec.instance_id) == mid:
            del self._static[rec.instance_id]
        for tip in rec.owned():
            self._disown(tip, mid)
        self._forget_timers(mid)
        self._refresh_subscription_metadata()
        self.group_epoch += 1
        self._note(f"member {mid[:8]} removed ({why}); group epoch {self.group_epoch}")
        self._obs.removed(mid, why)

    # ---------------------------------------------------------------- targets

    def _regex(self, pattern: str) -> re.Pattern[str] | None:
        if pattern not in self._regex_cache:
            try:
                self._regex_cache[pattern] = re.compile(pattern)
            except re.error:
                self._regex_cache[pattern] = None
        return self._regex_cache[pattern]

    def _member_topic_ids(self, rec: MemberRecord) -> frozenset[uuid.UUID]:
        """Ids of the existing topics the member subscribes to (names plus regex matches)."""
        cluster = self._cluster
        if self._topics_cache_version != cluster.version:
            self._topics_cache.clear()
            self._topics_cache_version = cluster.version
        key = (rec.subscribed_topic_names, rec.subscribed_topic_regex)
        ids = self._topics_cache.get(key)
        if ids is None:
            found: set[uuid.UUID] = set()
            for name in rec.subscribed_topic_names:
                topic = cluster.get(name)
                if topic is not None:
                    found.add(topic.topic_id)
            if rec.subscribed_topic_regex is not None:
                rx = self._regex(rec.subscribed_topic_regex)
                if rx is not None:
                    for name in cluster.names():
                        if rx.fullmatch(name):
                            topic = cluster.get(name)
                            assert topic is not None
                            found.add(topic.topic_id)
            ids = frozenset(found)
            self._topics_cache[key] = ids
        return ids

    def _refresh_subscription_metadata(self) -> bool:
        """Recompute the subscribed topics' partition counts; True if they changed."""
        self._metadata_version = self._cluster.version
        meta: dict[uuid.UUID, int] = {}
        for rec in self._members.values():
            for tid in self._member_topic_ids(rec):
                if tid not in meta:
                    topic = self._cluster.by_id(tid)
                    assert topic is not None
                    meta[tid] = topic.partitions
        if meta == self._subscription_metadata:
            return False
        self._subscription_metadata = meta
        return True

    def _select_assignor(self) -> PartitionAssignor:
        counts: dict[str, int] = {}
        for rec in self._members.values():
            if rec.server_assignor is not None:
                counts[rec.server_assignor] = counts.get(rec.server_assignor, 0) + 1
        if not counts:
            return self._assignors[self._default_assignor]
        best = max(counts.values())
        # Ties go to the name that sorts first, so the choice is deterministic.
        return self._assignors[min(n for n, c in counts.items() if c == best)]

    def _group_spec(self) -> tuple[dict[str, MemberSpec], dict[uuid.UUID, TopicMetadata]]:
        """What an assignor gets: each member's subscription and target, the topics."""
        topics: dict[uuid.UUID, TopicMetadata] = {}
        members: dict[str, MemberSpec] = {}
        maps = self._target_maps
        for mid, rec in self._members.items():
            ids = self._member_topic_ids(rec)
            for tid in ids:
                if tid not in topics:
                    topic = self._cluster.by_id(tid)
                    assert topic is not None
                    topics[tid] = TopicMetadata(topic.name, topic.partitions)
            members[mid] = MemberSpec(
                subscribed_topic_ids=ids,
                assignment=maps.get(mid, _NO_PARTITIONS),
                instance_id=rec.instance_id,
                rack_id=rec.rack_id,
            )
        return members, topics

    def _compute_target(self) -> None:
        maps = self._target_maps
        members, topics = self._group_spec()
        assignor = self._select_assignor()
        epoch = self.group_epoch
        try:
            # Typed as object: a user assignor may return anything.
            result: object = assignor.assign(AssignmentSpec(members=members, topics=topics))
        except KgroupError as exc:
            self._obs.illegal_assignment(f"assignor {assignor.name!r} failed: {exc}")
            return
        new_maps = self._validate_target(assignor.name, result, members, topics)
        if new_maps is None:
            return
        targets: dict[str, frozenset[TopicIdPartition]] = {}
        for mid, pmap in new_maps.items():
            # Most members keep their target: reuse the set rather than rebuild it.
            if maps.get(mid) == pmap:
                targets[mid] = self._targets[mid]
            else:
                targets[mid] = frozenset(
                    TopicIdPartition(t, p) for t, ps in pmap.items() for p in ps
                )
        self._targets = targets
        self._target_maps = new_maps
        self.assignment_epoch = epoch
        self._note(f"target assignment epoch {epoch} by {assignor.name}")

    def _validate_target(
        self,
        name: str,
        result: object,
        members: Mapping[str, MemberSpec],
        topics: Mapping[uuid.UUID, TopicMetadata],
    ) -> dict[str, Mapping[uuid.UUID, frozenset[int]]] | None:
        """The assignor's output if it gives each subscribed partition to exactly one subscriber."""
        if not isinstance(result, TargetAssignment):
            self._obs.illegal_assignment(
                f"assignor {name!r} returned {type(result).__name__}, not a TargetAssignment"
            )
            return None
        seen: dict[uuid.UUID, dict[int, str]] = {}
        out: dict[str, Mapping[uuid.UUID, frozenset[int]]] = {}
        for mid, assignment in result.members.items():
            spec = members.get(mid)
            if spec is None:
                self._obs.illegal_assignment(f"assignor {name!r} assigned to unknown member {mid}")
                return None
            pmap = assignment.partitions
            for tid, partitions in pmap.items():
                meta = topics.get(tid)
                if meta is None:
                    self._obs.illegal_assignment(
                        f"assignor {name!r} assigned partitions of topic {tid}, which no "
                        "member subscribes to"
                    )
                    return None
                if tid not in spec.subscribed_topic_ids:
                    self._obs.illegal_assignment(
                        f"assignor {name!r} assigned {meta.name}-{min(partitions)} to "
                        f"{mid[:8]}, which does not subscribe to {meta.name}"
                    )
                    return None
                owners = seen.setdefault(tid, {})
                for p in partitions:
                    if not 0 <= p < meta.num_partitions:
                        self._obs.illegal_assignment(
                            f"assignor {name!r} assigned {meta.name}-{p}, which does not exist"
                        )
                        return None
                    other = owners.get(p)
                    if other is not None:
                        self._obs.illegal_assignment(
                            f"assignor {name!r} assigned {meta.name}-{p} to both "
                            f"{other[:8]} and {mid[:8]}"
                        )
                        return None
                    owners[p] = mid
            if pmap:
                out[mid] = pmap
        for tid, meta in topics.items():
            owners = seen.get(tid, {})
            if len(owners) != meta.num_partitions:
                missing = min(set(range(meta.num_partitions)) - set(owners))
                self._obs.illegal_assignment(
                    f"assignor {name!r} left {meta.name}-{missing} unassigned"
                )
                return None
        return out

    # ------------------------------------------------------ client-side mode

    def _client_assignor(self) -> str | None:
        """The client assignor every member supports, or None (then a server assignor).

        The draft: "a client side assignor must be supported by all the members.
        If multiple are, it will respect the precedence defined by the members":
        the lowest total position over the members' lists wins, ties by name.
        """
        lists = [rec.client_assignors for rec in self._members.values()]
        if not lists or not all(lists):
            return None
        common = {a.name for a in lists[0]}
        for entries in lists[1:]:
            common &= {a.name for a in entries}
        if not common:
            return None

        def rank(name: str) -> tuple[int, str]:
            total = sum(next(i for i, a in enumerate(e) if a.name == name) for e in lists)
            return total, name

        return min(common, key=rank)

    def _check_versions(self, member_id: str, assignors: tuple[ClientAssignor, ...]) -> None:
        """The draft: refuse a member whose version range of an assignor misses another's."""
        for mine in assignors:
            for rec in self._members.values():
                if rec.member_id == member_id:
                    continue
                for theirs in rec.client_assignors:
                    if theirs.name == mine.name and (
                        mine.max_version < theirs.min_version
                        or theirs.max_version < mine.min_version
                    ):
                        raise _RejectError(
                            ErrorCode.UNSUPPORTED_ASSIGNOR,
                            f"Client assignor {mine.name!r} versions {mine.min_version}-"
                            f"{mine.max_version} do not overlap member {rec.member_id}'s "
                            f"{theirs.min_version}-{theirs.max_version}.",
                        )

    def _delegate(self, assignor: str) -> None:
        """Make sure one member is asked to compute the assignment with ``assignor``."""
        current = self._computer
        if current is not None and current in self._members:
            return
        self._computer = None
        self._computer_deadline = None
        candidates = [m for m, r in self._members.items() if r.epoch >= 0]
        fresh = [m for m in candidates if m not in self._computer_skip]
        if not fresh:
            self._computer_skip.clear()
            fresh = candidates
        if not fresh:
            return
        entries = {
            m: next(a for a in self._members[m].client_assignors if a.name == assignor)
            for m in self._members
        }
        versions = [e.metadata_version for e in entries.values()]
        lo, hi = min(versions), max(versions)
        # The draft's member selection: one that can read every member's
        # metadata version (A [1-5], B [3-4], C [2-4]: A); else any, oldest first.
        able = [m for m in fresh if entries[m].min_version <= lo and entries[m].max_version >= hi]
        self._computer = (able or fresh)[0]
        self._note(f"member {self._computer[:8]} chosen to compute with {assignor}")

    def _notify(self, rec: MemberRecord, now: float) -> bool:
        """Whether this response carries ShouldComputeAssignment (and arm its timeout)."""
        if rec.member_id != self._computer:
            return False
        if self._computer_deadline is None:
            # "The time on the coordinator side starts ticking when the member is notified."
            deadline = now + max(rec.rebalance_timeout_ms, 0) / 1000.0
            self._computer_deadline = deadline
            self._schedule(deadline, self._on_compute_timer, (rec.member_id, deadline))
        return True

    def _on_compute_timer(self, arg: tuple[str, float]) -> None:
        member_id, deadline = arg
        if self.retired or self._computer != member_id or self._computer_deadline != deadline:
            return
        # Not fenced (only the session fences), but someone else computes now.
        self._note(f"member {member_id[:8]} did not install within the rebalance timeout")
        self._computer_skip.add(member_id)
        self._computer = None
        self._computer_deadline = None
        self._prepared = None

    def _check_computer(self, member_id: str, member_epoch: int) -> MemberRecord:
        rec = self._members.get(member_id)
        if rec is None:
            raise _RejectError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not in the group."
            )
        if member_epoch != rec.epoch:
            raise _RejectError(
                ErrorCode.STALE_MEMBER_EPOCH,
                f"Member epoch {member_epoch} is not the current one ({rec.epoch}).",
            )
        if member_id != self._computer:
            raise _RejectError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not the member chosen to compute the assignment.",
            )
        return rec

    def prepare_assignment(
        self, req: PrepareAssignmentRequest, now: float
    ) -> PrepareAssignmentResponse:
        """Handle a ConsumerGroupPrepareAssignment (the draft's client-side mode)."""
        try:
            if req.group_id != self.group_id or not req.member_id or req.member_epoch < 0:
                raise _RejectError(ErrorCode.INVALID_REQUEST, "malformed PrepareAssignment")
            self._check_computer(req.member_id, req.member_epoch)
            assignor = self._client_assignor()
            if assignor is None or self.group_epoch <= self.assignment_epoch:
                raise _RejectError(ErrorCode.UNKNOWN_MEMBER_ID, "No assignment to compute.")
        except _RejectError as r:
            return PrepareAssignmentResponse(error_code=int(r.code), error_message=r.message)
        specs, topics = self._group_spec()
        members: list[PreparedMember] = []
        for mid, rec in self._members.items():
            ids = specs[mid].subscribed_topic_ids
            entry = next(a for a in rec.client_assignors if a.name == assignor)
            members.append(
                PreparedMember(
                    member_id=mid,
                    member_epoch=rec.epoch,
                    subscribed_topic_ids=ids,
                    assignment=self._targets.get(mid, _EMPTY),
                    instance_id=rec.instance_id,
                    rack_id=rec.rack_id,
                    metadata_version=entry.metadata_version,
                    metadata=entry.metadata,
                )
            )
        self._prepared = _Prepared(self.group_epoch, assignor, specs, topics)
        self._note(f"prepared group epoch {self.group_epoch} for {req.member_id[:8]}")
        return PrepareAssignmentResponse(
            group_epoch=self.group_epoch,
            assignor_name=assignor,
            members=tuple(members),
            topics=tuple(PreparedTopic(t, m.name, m.num_partitions) for t, m in topics.items()),
        )

    def install_assignment(self, req: InstallAssignmentRequest, now: float) -> int:
        """Handle a ConsumerGroupInstallAssignment; the error code of the answer."""
        try:
            if req.group_id != self.group_id or not req.member_id or req.member_epoch < 0:
                raise _RejectError(ErrorCode.INVALID_REQUEST, "malformed InstallAssignment")
            self._check_computer(req.member_id, req.member_epoch)
            prepared = self._prepared
            if prepared is None or prepared.group_epoch != req.group_epoch:
                raise _RejectError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"No prepared state at epoch {req.group_epoch}."
                )
        except _RejectError as r:
            return int(r.code)
        if req.error:
            # The draft: the coordinator keeps the current target. It asks again on
            # the member's next heartbeat (a transient error does not wedge the group).
            self._note(f"client assignor error {req.error}: target kept")
            self._prepared = None
            return int(ErrorCode.NONE)
        result = TargetAssignment(
            {mid: MemberAssignment(by_topic_id(partitions)) for mid, partitions in req.members}
        )
        maps = self._validate_target(prepared.assignor, result, prepared.members, prepared.topics)
        if maps is None:  # reported as ILLEGAL_ASSIGNMENT: kgroup's member checks first
            return INVALID_ASSIGNMENT
        self._prepared = None
        # Installed even if the group moved on meanwhile (the AssignmentEpoch rule);
        # members that left are dropped, members that joined get nothing yet.
        # A static member replaced meanwhile keeps its target under its new id (the
        # replacement bumps no epoch, so nothing else would hand its partitions out).
        current: dict[str, Mapping[uuid.UUID, frozenset[int]]] = {}
        for m, pmap in maps.items():
            iid = prepared.members[m].instance_id
            now_id = m if m in self._members else self._static.get(iid) if iid else None
            if now_id is not None:
                current[now_id] = pmap
        self._target_maps = current
        self._targets = {
            m: frozenset(TopicIdPartition(t, p) for t, ps in pmap.items() for p in ps)
            for m, pmap in self._target_maps.items()
        }
        self.assignment_epoch = prepared.group_epoch
        self._computer_skip.clear()
        self._computer_deadline = None
        behind = self.group_epoch > self.assignment_epoch
        self._note(
            f"target assignment epoch {prepared.group_epoch} installed by {req.member_id[:8]}"
            + (f"; group epoch {self.group_epoch} is ahead: computing again" if behind else "")
        )
        return int(ErrorCode.NONE)

    # ------------------------------------ classic members in a consumer group

    def adopt_classic(
        self,
        generation: int,
        members: list[ExportedMember],
        offsets: Mapping[TopicPartition, int],
        now: float,
    ) -> None:
        """Convert a classic group into this consumer group (an upgrade).

        As the broker: every member becomes STABLE at epoch = the generation,
        with its last classic assignment as current assignment and target;
        session timers restart from now with each member's own timeout.
        """
        epoch = max(generation, self.group_epoch)
        self.group_epoch = self.assignment_epoch = epoch
        claimed: dict[TopicIdPartition, tuple[int, str]] = {}
        for m in members:
            for tp in m.assignment:
                tip = self._cluster.to_id(tp)
                # Two members may name a partition from different generations: the
                # later one owns it (the earlier one revoked it since).
                if tip is not None and (tip not in claimed or claimed[tip][0] < m.generation):
                    claimed[tip] = (m.generation, m.member_id)
        for m in members:
            rec = MemberRecord(m.member_id)
            rec.instance_id = m.instance_id
            self._classic_update(rec, m.protocols, m.protocol_name, m.session_timeout_ms)
            rec.rebalance_timeout_ms = m.rebalance_timeout_ms
            rec.epoch = rec.previous_epoch = epoch
            rec.assigned = frozenset(t for t, (_, mid) in claimed.items() if mid == m.member_id)
            self._members[m.member_id] = rec
            if m.instance_id is not None:
                self._static[m.instance_id] = m.member_id
            for tip in rec.assigned:
                self._own(tip, m.member_id)
            self._targets[m.member_id] = rec.assigned
            self._target_maps[m.member_id] = MappingProxyType(by_topic_id(rec.assigned))
            self._touch_session(m.member_id, now)
        for tp, count in offsets.items():
            self._offsets[tp] = self._offsets.get(tp, 0) + count
        self._refresh_subscription_metadata()
        self._note(f"converted from a classic group at generation {generation}: epoch {epoch}")

    def only_classic_members(self) -> bool:
        """True when the group has members and every one of them speaks classic."""
        return bool(self._members) and all(
            r.classic_protocols is not None for r in self._members.values()
        )

    def export_for_downgrade(
        self,
    ) -> tuple[int, list[ExportedMember], dict[TopicPartition, int]]:
        """Hand the group to a classic coordinator (a downgrade), leaving this one empty.

        Each member goes with what it owns now (assigned and still revoking);
        the classic group starts at generation = the group epoch.
        """
        from kgroup.testing.groups.classic import ExportedMember  # noqa: PLC0415 (import cycle)

        exported = []
        for rec in self._members.values():
            assert rec.classic_protocols is not None
            chosen = rec.classic_protocols[0].name  # the classic vote decides
            exported.append(
                ExportedMember(
                    member_id=rec.member_id,
                    instance_id=rec.instance_id,
                    protocols=rec.classic_protocols,
                    protocol_name=chosen,
                    session_timeout_ms=rec.session_timeout_ms or self._session_ms,
                    rebalance_timeout_ms=rec.rebalance_timeout_ms,
                    assignment=frozenset(self._cluster.to_name(t) for t in rec.owned()),
                    generation=rec.epoch,
                )
            )
            self._forget_timers(rec.member_id)
        epoch = self.group_epoch
        offsets = dict(self._offsets)
        self._members.clear()
        self._static.clear()
        self._owner.clear()
        self._targets.clear()
        self._target_maps.clear()
        self._computer = None
        self._prepared = None
        self._classic_pending.clear()
        self._note(f"converted to a classic group at generation {epoch}")
        return epoch, exported, offsets

    def continue_from(self, generation: int) -> None:
        """An empty group about to form as consumer: epochs go on after ``generation``."""
        if not self._members and generation > self.group_epoch:
            self.group_epoch = generation
            self._note(f"group epoch {generation} (after the classic generations)")

    def _classic_update(
        self, rec: MemberRecord, protocols: tuple[JoinProtocol, ...], chosen: str, session_ms: int
    ) -> None:
        rec.classic_protocols = protocols
        rec.session_timeout_ms = session_ms
        sub = next(p.subscription for p in protocols if p.name == chosen)
        rec.subscribed_topic_names = tuple(sorted(sub.topics))
        rec.rack_id = sub.rack_id

    def _classic_protocol(self, member_id: str, protocols: tuple[JoinProtocol, ...]) -> str | None:
        """The member's first protocol every other classic member supports (None: none)."""
        names = [p.name for p in protocols]
        for rec in self._members.values():
            if rec.classic_protocols is not None and rec.member_id != member_id:
                theirs = {p.name for p in rec.classic_protocols}
                names = [n for n in names if n in theirs]
        return names[0] if names else None

    def _classic_member(self, member_id: str, instance_id: str | None) -> MemberRecord:
        if instance_id is not None:
            known = self._static.get(instance_id)
            if known is None:
                raise _RejectError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} unknown."
                )
            if known != member_id:
                raise _RejectError(
                    ErrorCode.FENCED_INSTANCE_ID, f"Instance id {instance_id} owned by {known}."
                )
        rec = self._members.get(member_id)
        if rec is None:
            raise _RejectError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is unknown.")
        return rec

    def _classic_catch_up(self) -> None:
        # Classic members heartbeat too: metadata changes and pending targets are
        # noticed on their requests as well (a converted group may have no other).
        if (
            self._metadata_version != self._cluster.version
            and self._refresh_subscription_metadata()
        ):
            self.group_epoch += 1
            self._note(f"group epoch {self.group_epoch} (metadata)")
        if self.group_epoch > self.assignment_epoch and self._client_assignor() is None:
            self._compute_target()

    def classic_join(self, req: JoinGroupRequest, now: float) -> JoinGroupResponse:
        """A classic member's JoinGroup in this consumer group (answered at once).

        The response has no leader and no member list: the coordinator assigns.
        The generation is the member epoch.
        """
        try:
            chosen = self._classic_protocol(req.member_id, req.protocols)
            if req.protocol_type != PROTOCOL_TYPE or chosen is None:
                raise _RejectError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "no common protocol")
            if not req.member_id and req.instance_id is None:
                member_id = self._new_member_id()
                self._classic_pending.add(member_id)
                return JoinGroupResponse(
                    error_code=int(ErrorCode.MEMBER_ID_REQUIRED), member_id=member_id
                )
            new = False
            if not req.member_id:
                assert req.instance_id is not None
                member_id = self._new_member_id()
                old_id = self._static.get(req.instance_id)
                old = self._members.get(old_id) if old_id is not None else None
                if old is None:
                    rec, new = self._create(member_id, req.instance_id), True
                else:
                    # KIP-345 for classic members: a new process takes the instance over.
                    rec = self._replace(old, member_id, now)
            elif req.member_id in self._classic_pending and req.instance_id is None:
                self._classic_pending.discard(req.member_id)
                rec, new = self._create(req.member_id, None), True
            else:
                # An id the group does not know (removed meanwhile): UNKNOWN_MEMBER_ID,
                # and the member rejoins from scratch, its partitions lost.
                rec = self._classic_member(req.member_id, req.instance_id)
        except _RejectError as r:
            return JoinGroupResponse(error_code=int(r.code), error_message=r.message)
        old_names = rec.subscribed_topic_names
        rec.rebalance_timeout_ms = req.rebalance_timeout_ms
        self._classic_update(rec, req.protocols, chosen, req.session_timeout_ms)
        if new or rec.subscribed_topic_names != old_names:
            self._refresh_subscription_metadata()
            self.group_epoch += 1
            self._note(f"group epoch {self.group_epoch}")
        self._classic_catch_up()
        sub = next(p.subscription for p in req.protocols if p.name == chosen)
        owned = frozenset(
            tip for tip in (self._cluster.to_id(tp) for tp in sub.owned_partitions) if tip
        )
        # What it reports owning now: an eager member revoked everything first.
        self._reconcile(rec, owned & rec.owned(), now)
        self._touch_session(rec.member_id, now)
        return JoinGroupResponse(
            generation_id=rec.epoch,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=chosen,
            leader="",
            member_id=rec.member_id,
        )

    def classic_sync(self, req: SyncGroupRequest, now: float) -> SyncGroupResponse:
        """A classic member's SyncGroup: the coordinator's assignment for it."""
        try:
            rec = self._classic_member(req.member_id, req.instance_id)
            if req.generation_id != rec.epoch:
                raise _RejectError(ErrorCode.ILLEGAL_GENERATION, "generation is not the epoch")
            assert rec.classic_protocols is not None
            if req.protocol_name not in {p.name for p in rec.classic_protocols}:
                raise _RejectError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "unknown protocol")
            self._touch_session(rec.member_id, now)
            if rec.epoch < self.assignment_epoch and rec.state is AssignmentState.STABLE:
                raise _RejectError(ErrorCode.REBALANCE_IN_PROGRESS, "the group moved on")
        except _RejectError as r:
            return SyncGroupResponse(error_code=int(r.code), error_message=r.message)
        names = frozenset(self._cluster.to_name(t) for t in rec.assigned)
        return SyncGroupResponse(
            assignment=ClassicAssignment(names),
            protocol_type=PROTOCOL_TYPE,
            protocol_name=req.protocol_name,
        )

    def classic_heartbeat(
        self, generation: int, member_id: str, instance_id: str | None, now: float
    ) -> int:
        """A classic member's Heartbeat; REBALANCE_IN_PROGRESS when it must rejoin."""
        try:
            rec = self._classic_member(member_id, instance_id)
            if generation != rec.epoch:
                raise _RejectError(ErrorCode.ILLEGAL_GENERATION, "generation is not the epoch")
        except _RejectError as r:
            return int(r.code)
        self._touch_session(member_id, now)
        self._classic_catch_up()
        # Behind the target, partitions to revoke, or partitions it waited for
        # now free: only a JoinGroup (with its owned partitions) moves it on.
        if rec.state is not AssignmentState.STABLE or rec.epoch != self.assignment_epoch:
            return int(ErrorCode.REBALANCE_IN_PROGRESS)
        return int(ErrorCode.NONE)

    def classic_leave(self, member_id: str, instance_id: str | None) -> int:
        """A classic member's LeaveGroup."""
        try:
            rec = self._classic_member(member_id, instance_id)
        except _RejectError as r:
            return int(r.code)
        self._fence(rec, "left the group (classic)")
        return int(ErrorCode.NONE)

    def offsets(self, partitions: frozenset[TopicPartition]) -> dict[TopicPartition, int | None]:
        """Committed "offsets" (commit counts), read as the classic runtime reads them."""
        return {tp: self._offsets.get(tp) for tp in partitions}

    # --------------------------------------------------------- reconciliation

    def _reconcile(
        self, rec: MemberRecord, owned: frozenset[TopicIdPartition] | None, now: float
    ) -> None:
        """Move the member towards its target (the broker's CurrentAssignmentBuilder)."""
        te = self.assignment_epoch
        state = rec.state
        if state is AssignmentState.STABLE:
            if rec.epoch == te:
                return
            self._next_assignment(rec, rec.epoch, owned, now)
        elif state is AssignmentState.UNREVOKED_PARTITIONS:
            if owned is None or not owned.isdisjoint(rec.pending_revocation):
                return
            self._next_assignment(rec, rec.epoch + 1, owned, now)
        else:
            self._next_assignment(rec, rec.epoch, owned, now)

    def _next_assignment(
        self,
        rec: MemberRecord,
        epoch: int,
        owned: frozenset[TopicIdPartition] | None,
        now: float,
    ) -> None:
        te = self.assignment_epoch
        target = self._targets.get(rec.member_id, _EMPTY)
        assigned = rec.assigned
        keep = assigned & target
        revoke = assigned - keep
        add = target - keep
        owner = self._owner
        if self._bug_skip_release:
            unreleased: frozenset[TopicIdPartition] = _EMPTY
        else:
            unreleased = frozenset(tip for tip in add if tip in owner)
        add = add - unreleased
        if revoke and (owned is None or not owned.isdisjoint(revoke)):
            new = (AssignmentState.UNREVOKED_PARTITIONS, epoch, keep, revoke)
        elif add:
            state = AssignmentState.UNRELEASED_PARTITIONS if unreleased else AssignmentState.STABLE
            new = (state, te, keep | add, _EMPTY)
        elif unreleased:
            new = (AssignmentState.UNRELEASED_PARTITIONS, te, keep, _EMPTY)
        else:
            new = (AssignmentState.STABLE, te, keep, _EMPTY)
        self._apply(rec, *new, now=now)

    def _apply(
        self,
        rec: MemberRecord,
        state: AssignmentState,
        epoch: int,
        assigned: frozenset[TopicIdPartition],
        pending: frozenset[TopicIdPartition],
        *,
        now: float,
    ) -> None:
        if (
            state is rec.state
            and epoch == rec.epoch
            and assigned == rec.assigned
            and pending == rec.pending_revocation
        ):
            return
        if epoch < rec.epoch:
            raise SimulationError(
                f"simulated coordinator bug: member {rec.member_id} epoch {rec.epoch} -> {epoch}"
            )
        mid = rec.member_id
        old_owned = rec.owned()
        new_owned = assigned | pending
        released = old_owned - new_owned
        for tip in released:
            self._disown(tip, mid)
        for tip in new_owned - old_owned:
            self._own(tip, mid)
        rec.previous_epoch = rec.epoch
        rec.epoch = epoch
        rec.state = state
        rec.assigned = assigned
        rec.pending_revocation = pending
        if state is AssignmentState.UNREVOKED_PARTITIONS:
            self._arm_rebalance(rec, now)
        else:
            self._rebalance_deadline.pop(mid, None)
        if released:
            self._obs.released(mid, released, "revocation acknowledged")

    def _own(self, tip: TopicIdPartition, member_id: str) -> None:
        other = self._owner.get(tip)
        if other is not None and other != member_id:
            if self._bug_skip_release:
                # The injected bug hands the partition over; the old owner keeps its record.
                self._owner[tip] = member_id
                return
            raise SimulationError(
                f"simulated coordinator bug: {tip} given to {member_id} while {other} owns it"
            )
        self._owner[tip] = member_id

    def _disown(self, tip: TopicIdPartition, member_id: str) -> None:
        if self._owner.get(tip) == member_id:
            del self._owner[tip]

    # ----------------------------------------------------------------- timers

    def _touch_session(self, member_id: str, now: float) -> None:
        rec = self._members.get(member_id)
        # A classic member in a converted group keeps its own session timeout.
        ms = rec.session_timeout_ms if rec is not None and rec.session_timeout_ms else None
        deadline = now + (ms or self._session_ms) / 1000.0
        self._session_deadline[member_id] = deadline
        if member_id not in self._session_armed:
            self._session_armed.add(member_id)
            self._schedule(deadline, self._on_session_timer, member_id)

    def _on_session_timer(self, member_id: str) -> None:
        self._session_armed.discard(member_id)
        if self.retired:
            return
        deadline = self._session_deadline.get(member_id)
        rec = self._members.get(member_id)
        if deadline is None or rec is None:
            return
        now = self._clock()
        if deadline > now:
            self._session_armed.add(member_id)
            self._schedule(deadline, self._on_session_timer, member_id)
            return
        self._fence(rec, "session timeout")

    def _arm_rebalance(self, rec: MemberRecord, now: float) -> None:
        timeout = max(rec.rebalance_timeout_ms, 0) / 1000.0
        entry = (rec.epoch, now + timeout)
        self._rebalance_deadline[rec.member_id] = entry
        self._schedule(entry[1], self._on_rebalance_timer, (rec.member_id, entry))

    def _on_rebalance_timer(self, arg: tuple[str, tuple[int, float]]) -> None:
        member_id, entry = arg
        if self.retired or self._rebalance_deadline.get(member_id) != entry:
            return
        rec = self._members.get(member_id)
        if rec is None or rec.epoch != entry[0]:
            return
        self._fence(rec, f"did not revoke within the rebalance timeout (epoch {entry[0]})")

    def _forget_timers(self, member_id: str) -> None:
        self._session_deadline.pop(member_id, None)
        self._rebalance_deadline.pop(member_id, None)

    # ---------------------------------------------------------------- commits

    def commit_error(self, member_id: str, member_epoch: int) -> ErrorCode:
        """The error of an OffsetCommit from ``member_id`` at ``member_epoch`` (NONE: accepted).

        As ``ConsumerGroup.validateOffsetCommit``: with no members, a commit from
        outside the group (epoch -1) is accepted; otherwise the member must exist
        and its epoch match, else STALE_MEMBER_EPOCH (ILLEGAL_GENERATION for a
        classic member of a converted group, whose epoch is its generation).
        """
        if member_epoch < 0 and not self._members:
            return ErrorCode.NONE
        rec = self._members.get(member_id)
        if rec is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != rec.epoch:
            if rec.classic_protocols is not None:
                return ErrorCode.ILLEGAL_GENERATION
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def fetch_error(self, member_id: str, member_epoch: int) -> ErrorCode:
        """The error of an OffsetFetch (v9+, require_stable) naming ``member_id`` at
        ``member_epoch`` (NONE: accepted), as ``ConsumerGroup.validateOffsetFetch``."""
        rec = self._members.get(member_id)
        if rec is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != rec.epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def commit(
        self, member_id: str, member_epoch: int, partitions: frozenset[TopicPartition]
    ) -> ErrorCode:
        """Judge an OffsetCommit from ``member_id`` at ``member_epoch``.

        The simulator's "offsets" are how many commits each partition received.
        """
        rec = self._members.get(member_id)
        if rec is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = self.commit_error(member_id, member_epoch)
        if error is not ErrorCode.NONE:
            return error
        for tp in partitions:
            self._offsets[tp] = self._offsets.get(tp, 0) + 1
        self._obs.commit_accepted(rec, member_epoch, partitions)
        return ErrorCode.NONE

    def offset_fetch(
        self, member_id: str, member_epoch: int, partitions: frozenset[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, int | None]]:
        """An OffsetFetch (v9+, require_stable) from ``member_id`` at ``member_epoch``.

        The "offsets" are how many commits each partition received (None: none).
        """
        error = self.fetch_error(member_id, member_epoch)
        if error is not ErrorCode.NONE:
            return error, {}
        return ErrorCode.NONE, {tp: self._offsets.get(tp) for tp in partitions}

    def _note(self, text: str) -> None:
        self._obs.note(text)
