"""The simulation engine: real kgroup members, a simulated coordinator, virtual time, faults.

:class:`Simulation` drives kgroup's sans-IO :class:`~kgroup.membership.ConsumerMember`
machines the way the runtime does (heartbeats over a network, offset commits,
listener callbacks inside the application's poll, metadata and coordinator
lookups), against a :class:`~kgroup.testing.groups.consumer.ConsumerGroupCoordinator`,
on a virtual clock. Faults are scheduled with its methods (crash, close,
partition, stall, failover, lossy network, slow or failing callbacks,
subscription changes, new topics and partitions). Invariants are checked as
the run goes; the first one broken raises
:class:`~kgroup.testing.sim.errors.InvariantViolationError`.

Everything random comes from one :class:`random.Random` seeded by ``seed``:
the same inputs give the same run, event for event.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import random
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any, TypeVar

from kgroup.assignors import Assignment as ClassicAssignorAssignment
from kgroup.assignors import (
    AssignmentSpec,
    AssignorMetadata,
    Cluster,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupMetadata,
    MemberSpec,
    PartitionAssignor,
    TargetAssignment,
    TopicMetadata,
    validate_assignment,
)
from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.config_keys import RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS
from kgroup.dataplane.librdkafka import IDLE_CHUNK, QUIET_AFTER, WAIT_CHUNK
from kgroup.error_codes import Trait, codes_with
from kgroup.errors import (
    AssignmentViolation,
    BrokerError,
    InvalidAssignmentError,
    KgroupError,
    RequestTimeoutError,
    broker_error,
)
from kgroup.listener import listener_method
from kgroup.membership import (
    AssignmentComputed,
    AssignorFailed,
    AssignorOnAssignment,
    CallbackCompleted,
    CallbackKind,
    ClassicAssignorOnAssignment,
    ClassicHeartbeatResponseReceived,
    ClassicMember,
    ClassicMemberConfig,
    ClassicState,
    Closed,
    CloseRequested,
    CommitCompleted,
    CommitOffsets,
    ConsumerMember,
    CoordinatorRediscovered,
    FailureKind,
    HeartbeatFailed,
    HeartbeatResponse,
    HeartbeatResponseReceived,
    JoinGroupResponse,
    JoinGroupResponseReceived,
    LeaveGroupResponseReceived,
    MemberConfig,
    MemberState,
    MetadataUpdated,
    RaiseCallbackError,
    RejoinRequested,
    ReportAssignorError,
    ReportError,
    ReportFatalError,
    RequestFailed,
    RequestMetadata,
    RunAssignor,
    RunCallback,
    SendClassicHeartbeat,
    SendHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
    StartFetching,
    StopFetching,
    SubscribedMetadataChanged,
    SubscriptionChanged,
    SyncGroupResponse,
    SyncGroupResponseReceived,
    TimerTick,
    Unsubscribe,
)
from kgroup.membership.consumer import (
    ClientAssignmentComputed,
    ClientAssignor,
    ComputeAssignment,
    DutyState,
    InstallAssignmentResponseReceived,
    PrepareAssignmentResponse,
    PrepareAssignmentResponseReceived,
    ReportClientAssignorError,
    SendInstallAssignment,
    SendPrepareAssignment,
)
from kgroup.membership.consumer.reactions import REACTIONS, Reaction
from kgroup.offsets import fetch_error_retried, judge_commit_errors, unowned
from kgroup.protocol.cluster import BrokerAddress
from kgroup.runtime import work
from kgroup.runtime.classic_session import (
    classic_assignors,
    classic_member_config,
    classic_member_protocols,
)
from kgroup.runtime.classic_session import commit_done_event as classic_commit_done
from kgroup.runtime.consumer_session import commit_done_event as consumer_commit_done
from kgroup.runtime.consumer_session import consumer_member_config
from kgroup.runtime.core import (
    CheckTruncation,
    DataPlaneOps,
    Effect,
    Fatal,
    FetchCommitted,
    FinishCommit,
    HandOver,
    LookAtGroup,
    Post,
    QueueWork,
    Rediscover,
    RuntimeCore,
    SendMemberCommit,
    SettledChanged,
    Subscribe,
    SwitchSession,
    TruncationChanged,
)
from kgroup.runtime.fetch_state import Assign, FetchOp, FetchTicket, Pause, Resume, Seek, Unassign
from kgroup.runtime.interfaces import DRIVER_ACTIONS, SubscriptionChange
from kgroup.runtime.leader import group_subscription, member_assignments, validation_protocol
from kgroup.runtime.liveness import NOTHING_SEEN, LivenessTimes, Look, UnownedWatch
from kgroup.testing._topics import by_topic_id
from kgroup.testing.groups.classic import (
    ClassicCoordinatorConfig,
    ClassicGroupCoordinator,
    ClassicGroupState,
)
from kgroup.testing.groups.consumer import (
    ConsumerGroupCoordinator,
    CoordinatorConfig,
    ErrorCode,
    MemberRecord,
)
from kgroup.testing.sim._queue import EventQueue
from kgroup.testing.sim.cluster import SimCluster
from kgroup.testing.sim.errors import InvariantViolationError, ScenarioError, SimulationError
from kgroup.testing.sim.invariants import EpochLedger, Invariant, Span, Violation
from kgroup.types import Backoff, TopicIdPartition, TopicPartition

_M = TypeVar("_M", ClassicMemberConfig, MemberConfig)

__all__ = [
    "CoordinatorStatus",
    "InjectedBug",
    "MemberPlan",
    "NetworkConditions",
    "SimulatedCallbackError",
    "Simulation",
    "SimulationConfig",
]


class InjectedBug(enum.Enum):
    """Test-only switches that break the system on purpose, to show the invariants catch it."""

    ACK_BEFORE_REVOKE = (
        "the member's runtime stops fetching a revoked partition only a second after it is "
        "asked to, so the acknowledgement reaches the coordinator while it still fetches"
    )
    COORDINATOR_SKIPS_RELEASE = (
        "the coordinator hands a partition to its new owner without waiting for the previous "
        "owner to release it"
    )
    NO_LIVENESS_REPAIR = (
        "the members' runtime never looks at the group (runtime.liveness reverted): a group "
        "left settled with partitions owned by nobody stays so"
    )
    NO_SESSION_MARGIN = (
        "the members give their session up at the session timeout itself "
        "(session_margin_ms 0): a stop waiting for the record wait in progress "
        "ends after the coordinator may have handed the partitions on"
    )


class CoordinatorStatus(enum.Enum):
    """Whether the coordinator answers."""

    UP = "up"
    DOWN = "down: requests reach a broker that is not the coordinator"
    LOADING = "loading: the new coordinator reloads the group"


class SimulatedCallbackError(Exception):
    """Raised by a simulated listener callback when the scenario injects callback errors."""


@dataclass(frozen=True, slots=True)
class NetworkConditions:
    """How the network misbehaves while a lossy window is open (probabilities per message).

    ``duplicate`` delivers a response twice to the member machine, which must
    ignore the copy (requests are processed at most once, as on TCP: a request
    processed twice would make the coordinator count as delivered an
    assignment whose response the client never sees); ``spike`` adds a
    latency of up to ``spike_max`` seconds, beyond the request timeout at times.
    """

    drop_request: float = 0.0
    drop_response: float = 0.0
    duplicate: float = 0.0
    spike: float = 0.0
    spike_max: float = 4.0

    def __post_init__(self) -> None:
        for name in ("drop_request", "drop_response", "duplicate", "spike"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ScenarioError(f"NetworkConditions.{name} must be in [0, 1], got {value}")
        if self.spike_max < 0:
            raise ScenarioError("NetworkConditions.spike_max must not be negative")


@dataclass(frozen=True, slots=True)
class SimulationConfig:
    """Timing of the simulated world (virtual seconds unless named ``_ms``).

    The defaults scale Kafka's down about five times (heartbeat 1 s, session
    6 s), so that a run covers many rebalances in little virtual time. The
    client's values among them (request timeout, backoffs, auto-commit interval)
    go into each member's ``ConsumerConfig``, which has the real defaults for
    the rest (the session margin among them).
    """

    group_id: str = "sim-group"
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    request_timeout: float = 3.0
    latency: tuple[float, float] = (0.001, 0.02)
    lookup_delay: float = 0.05
    restart_delay: tuple[float, float] = (0.5, 2.0)
    close_timeout: float = 5.0
    retry_backoff_ms: int = RETRY_BACKOFF_MS.default
    retry_backoff_max_ms: int = RETRY_BACKOFF_MAX_MS.default
    auto_commit_interval: float = 2.0
    # How long a new topic stays invisible to the members' metadata after the
    # coordinator sees it (each creation draws up to this): assignments then
    # name topic ids the members cannot resolve yet.
    metadata_lag: float = 0.0
    # design.md's session-loss rule (SESSION_LOST_FETCH); both members keep it, so it is
    # on. Off only to look at what a zombie does under the other invariants.
    check_session_loss: bool = True
    # The runtime's liveness repair (runtime.liveness): a settled member looks at
    # its group and asks to rejoin when the group is stuck. False reverts it, as
    # InjectedBug.NO_LIVENESS_REPAIR does.
    liveness_repair: bool = True
    liveness_times: LivenessTimes = field(default_factory=LivenessTimes)

    def __post_init__(self) -> None:
        lo, hi = self.latency
        if not 0 <= lo <= hi:
            raise ScenarioError(
                f"latency must be (low, high) with 0 <= low <= high, got {self.latency}"
            )
        if self.request_timeout <= hi:
            raise ScenarioError("request_timeout must exceed the highest normal latency")
        lo, hi = self.restart_delay
        if not 0 <= lo <= hi:
            raise ScenarioError(f"restart_delay must be (low, high), got {self.restart_delay}")
        if self.close_timeout <= 0 or self.auto_commit_interval <= 0:
            raise ScenarioError("close_timeout and auto_commit_interval must be positive")
        if self.metadata_lag < 0:
            raise ScenarioError("metadata_lag must not be negative")


@dataclass(frozen=True, slots=True)
class MemberPlan:
    """One application process running a kgroup consumer in the simulation.

    Attributes:
        name: the process's name in traces and results.
        topics / pattern: the subscription (names and / or a regex).
        instance_id: ``group.instance.id`` (a static member) or None.
        server_assignor: ``group.remote.assignor`` or None.
        max_poll_interval_ms: ``max.poll.interval.ms`` (also the rebalance timeout).
        auto_commit: ``enable.auto.commit``.
        poll_interval: seconds between two polls of the application.
        callback_time: seconds each listener callback takes.
        listener: a rebalance listener object whose methods are called (sync
            only) with the partitions; None: a listener that does nothing.
        has_listener: False models a consumer without a listener (callbacks
            complete at once, outside poll).
        start_at: when the process starts and subscribes.
        client_assignors: the KIP-848 draft's client-side assignors, in order
            of preference (``PartitionAssignor`` objects; each advertises its
            ``min_version``..``max_version``, its metadata at ``max_version``).
            When every member has one in common, the coordinator asks one
            member to compute the group's assignment with it.
        assign_time: seconds the client assignor takes to compute.
    """

    name: str
    topics: frozenset[str] = frozenset()
    pattern: str | None = None
    instance_id: str | None = None
    rack_id: str | None = None
    server_assignor: str | None = None
    max_poll_interval_ms: int = 10_000
    auto_commit: bool = True
    poll_interval: float = 0.5
    callback_time: float = 0.0
    listener: object | None = field(default=None, compare=False, hash=False)
    has_listener: bool = True
    start_at: float = 0.0
    protocol: str = "consumer"
    assignors: tuple[str, ...] = ("cooperative-sticky",)
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 1000
    client_assignors: tuple[PartitionAssignor, ...] = field(default=(), compare=False, hash=False)
    assign_time: float = 0.0

    def __post_init__(self) -> None:
        # Accept any collection of names (a set literal reads best in tests).
        object.__setattr__(self, "topics", frozenset(self.topics))
        if not self.name:
            raise ScenarioError("a member needs a non-empty name")
        if not self.topics and self.pattern is None:
            raise ScenarioError(
                f"member {self.name!r} subscribes to nothing: give topics or a pattern"
            )
        if self.poll_interval <= 0:
            raise ScenarioError(f"member {self.name!r}: poll_interval must be positive")
        if self.callback_time < 0:
            raise ScenarioError(f"member {self.name!r}: callback_time must not be negative")
        if self.max_poll_interval_ms <= 0:
            raise ScenarioError(f"member {self.name!r}: max_poll_interval_ms must be positive")
        if self.assign_time < 0:
            raise ScenarioError(f"member {self.name!r}: assign_time must not be negative")
        if self.client_assignors and self.protocol != "consumer":
            raise ScenarioError(
                f"member {self.name!r}: client assignors are a consumer-protocol mode"
            )
        if self.protocol not in ("consumer", "classic"):
            raise ScenarioError(
                f"member {self.name!r}: protocol must be 'consumer' or 'classic', "
                f"got {self.protocol!r}"
            )
        if self.protocol == "classic":
            if self.pattern is not None:
                raise ScenarioError(
                    f"member {self.name!r}: the simulator has no regex subscriptions for "
                    "classic members; give topic names"
                )
            if not self.assignors:
                raise ScenarioError(f"member {self.name!r}: a classic member needs assignors")


# Why the coordinators remove a member whose session expired.
_SESSION_TIMEOUT = "session timeout"

# Request kinds on the simulated network.
_HB = 0
_LEAVE = 1
_COMMIT = 2
_OFFSETS = 3  # OffsetFetch of the partitions about to start fetching
# Classic requests.
_JOIN = 4
_SYNC = 5
_CHB = 6
_CLEAVE = 7
# The draft's client-side mode.
_PREP = 8
_INST = 9

# Fatal errors that faults explain: a static member restarted before its old
# process released the instance id, or a stale process of a static member.
_EXPECTED_FATAL = codes_with(Trait.INSTANCE_CONFLICT)
# The classic leader's metadata watch interval (metadata.max.age.ms, scaled down).
_METADATA_WATCH = 2.0
# The timeout of the simulated applications' polls (an application's usual poll(1.0)):
# how long a poll that released a commit before a revocation waits for its answer.
_POLL_TIMEOUT = 1.0
# How often a member may ask to be woken at the same instant before it counts as a busy loop.
_SAME_INSTANT_LIMIT = 200
# Fencing answers a member may get within one session timeout (FENCE_LOOP).
_FENCE_LIMIT = 8
_FENCING = frozenset(code for code, then in REACTIONS.items() if then is Reaction.FENCED)


class _CommitTask:
    """A commit in flight, retried as the runtime's offset manager retries it.

    ``token``: the member's ``CommitOffsets`` (None: an auto-commit). Each attempt
    covers the partitions still owned and not lost and owned again since
    (``kgroup.offsets.unowned``); the answer is judged by ``judge_commit_errors``.
    """

    __slots__ = (
        "attempt",
        "deadline",
        "done",
        "generation",
        "offsets",
        "remaining",
        "retry_rebalance",
        "tenure",
        "token",
    )

    def __init__(
        self,
        token: int | None,
        offsets: Mapping[TopicPartition, int],
        deadline: float,
        core: RuntimeCore[_SimSession],
        generation: int,
        *,
        retry_rebalance: bool,
    ) -> None:
        self.token = token
        self.offsets = dict(offsets)
        self.remaining = dict(offsets)
        self.deadline = deadline
        self.generation = generation
        self.retry_rebalance = retry_rebalance
        self.attempt = 0
        self.done = False
        self.tenure = {tp: core.fetch.tenure(tp) for tp in offsets}


class _OffsetFetch:
    __slots__ = ("attempt", "ticket")

    def __init__(self, ticket: FetchTicket) -> None:
        self.ticket = ticket
        self.attempt = 0


class _SimSession:
    """What the runtime core reads of a simulated member: the real sessions' view."""

    __slots__ = ("_proc",)

    def __init__(self, proc: _Proc) -> None:
        self._proc = proc

    @property
    def group_protocol(self) -> GroupProtocol:
        if isinstance(self._proc.member, ClassicMember):
            return GroupProtocol.CLASSIC
        return GroupProtocol.CONSUMER

    @property
    def member_id(self) -> str:
        return self._proc.member.member_id

    @property
    def generation_or_epoch(self) -> int:
        return _position(self._proc.member)

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        return self._proc.member.assignment

    @property
    def settled(self) -> bool:
        member = self._proc.member
        if isinstance(member, ClassicMember):
            return member.state is ClassicState.STABLE
        return member.state is MemberState.STABLE

    @property
    def state_name(self) -> str:
        return self._proc.member.state.name

    @property
    def may_fall_back(self) -> bool:
        return False  # the scenarios name their protocol (no group.protocol=auto)

    def poll_deadline(self) -> float | None:
        return self._proc.member.poll_deadline()

    def session_expiry(self) -> float | None:
        return self._proc.member.session_expiry


class _SimDataPlane:
    """The core's local reads of the simulated data plane: what it fetches, and
    positions that move on with time (records keep arriving)."""

    __slots__ = ("_clock", "_proc")

    def __init__(self, proc: _Proc, clock: Callable[[], float]) -> None:
        self._proc = proc
        self._clock = clock

    @property
    def assigned(self) -> frozenset[TopicPartition]:
        return frozenset(self._proc.fetching)

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        position = 1 + int(self._clock() * 1000)
        fetching = self._proc.fetching
        return {tp: position for tp in partitions if tp in fetching}

    def leader_epochs(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return {}


class _SimListener:
    """A listener whose methods do nothing: the callbacks still take the plan's time."""

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        pass

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        pass

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        pass


class _Slot:
    """One application process slot; each (re)start runs a new incarnation in it."""

    __slots__ = (
        "assignor_error_p",
        "assignor_invalid",
        "callback_error_p",
        "cut_until",
        "name",
        "pattern",
        "plan",
        "proc",
        "restarts",
        "stall_until",
        "subscribed",
        "topics",
        "wanted",
    )

    def __init__(self, plan: MemberPlan) -> None:
        self.plan = plan
        self.name = plan.name
        self.proc: _Proc | None = None
        self.restarts = 0
        self.wanted = False  # should be running and in the group (for convergence)
        self.subscribed = True
        self.topics = plan.topics
        self.pattern = plan.pattern
        self.cut_until = 0.0
        self.stall_until = 0.0
        self.callback_error_p = 0.0
        # Client-side mode faults: the assignor fails (or returns a broken assignment).
        self.assignor_error_p = 0.0
        self.assignor_invalid = False


class _Proc:
    """One incarnation of a slot: a kgroup member plus the simulated runtime around it."""

    __slots__ = (
        "alive",
        "app_work",
        "assigning",
        "assignors",
        "broken_outputs",
        "busy",
        "closing",
        "commits",
        "config",
        "conn",
        "core",
        "core_at",
        "core_gen",
        "epoch",
        "expired",
        "fences",
        "fetching",
        "hb_in_flight",
        "label",
        "last_control",
        "last_ok",
        "last_wake",
        "link_last",
        "max_epoch",
        "member",
        "member_id",
        "next_auto_commit",
        "owner",
        "pending",
        "poll_gen",
        "poll_waiting",
        "posted",
        "reissued",
        "restart_after",
        "same_instant",
        "settled",
        "slot",
        "stopping",
        "timer_at",
        "timer_gen",
        "todo",
        "vepoch",
        "watched",
    )

    def __init__(
        self,
        slot: _Slot,
        member: ConsumerMember | ClassicMember,
        label: str,
        config: ConsumerConfig,
        clock: Callable[[], float],
        *,
        assignors: Mapping[str, ConsumerPartitionAssignor] | None = None,
    ) -> None:
        self.slot = slot
        self.member = member
        self.config = config
        self.member_id = member.member_id
        self.assignors = assignors or {}
        # Partition counts the classic leader's last assignor run saw.
        self.watched: dict[str, int] | None = None
        self.label = label
        # Static members' incarnations share their partitions' epoch history.
        self.owner = f"instance:{slot.plan.instance_id}" if slot.plan.instance_id else label
        self.alive = True
        self.closing = False
        self.restart_after: float | None = None
        self.epoch = 0
        # The epoch on the invariants' scale (Simulation._virtual_epoch), and the
        # largest one so far (EPOCH_BACKWARDS).
        self.vepoch = 0
        self.max_epoch = 0
        self.reissued = False
        # What the data plane fetches (the runtime core's DataPlaneOps performed),
        # with each partition's epoch span.
        self.fetching: dict[TopicPartition, Span] = {}
        # The real runtime core (set as the process starts, Simulation._run_proc),
        # and the driver's loop: the work of a step still to do, in order (it
        # waits while an unassign waits for the record wait in progress).
        self.core: RuntimeCore[_SimSession] = RuntimeCore(
            config, _SimSession(self), _SimDataPlane(self, clock)
        )
        self.todo: deque[Callable[[], None]] = deque()
        self.core_at: float | None = None
        self.core_gen = 0
        # The data plane's record waits (see Simulation._record_wait_left): whether
        # the driver last told it the group is settled, when its last control call
        # (assign, unassign) was, and the unassign waiting for the record wait in
        # progress: when it is done, and the spans it ends.
        self.settled = False
        self.last_control = -QUIET_AFTER
        self.stopping: tuple[float, dict[TopicPartition, Span]] | None = None
        # Spans still fetched when the coordinator expired the session (only kept
        # with SimulationConfig.check_session_loss off).
        self.expired: set[Span] = set()
        self.timer_at: float | None = None
        self.timer_gen = 0
        self.hb_in_flight: set[int] = set()
        # rid -> (kind, ident, connection, timeout deadline)
        self.pending: dict[int, tuple[int, Any, int, float]] = {}
        self.conn = 0
        self.link_last = 0.0
        # The application's work the core queued (callbacks, commits to release).
        self.app_work: deque[work.AppWork] = deque()
        self.next_auto_commit = 0.0
        # Token -> partitions of each assigned callback asked for and not completed.
        self.assigning: dict[int, frozenset[TopicPartition]] = {}
        self.busy = False
        self.poll_gen = 0
        # The poll waits for a commit before a revocation it released (the front end's drain).
        self.poll_waiting = False
        # Events the core posted for the member, handled in a later turn of the
        # loop unless a HandOver takes them now (the session's queue).
        self.posted: deque[Any] = deque()
        self.commits: list[_CommitTask] = []
        self.same_instant = 0
        self.last_wake = -1.0
        self.last_ok = 0.0  # when the last successful heartbeat response arrived
        # When heartbeats were answered FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID (FENCE_LOOP).
        self.fences: list[float] = []
        # Broken client-assignor outputs the faults produced (the member must refuse them).
        self.broken_outputs = 0


class _Observer:
    """The coordinator's observer: forwards to the simulation (kept apart to stay private)."""

    __slots__ = ("_sim",)

    def __init__(self, sim: Simulation) -> None:
        self._sim = sim

    def released(self, member_id: str, partitions: frozenset[TopicIdPartition], why: str) -> None:
        self._sim._on_released(member_id, partitions, why)

    def removed(self, member_id: str, why: str) -> None:
        self._sim._on_removed(member_id, why)

    def commit_accepted(
        self, record: MemberRecord, epoch: int, partitions: frozenset[TopicPartition]
    ) -> None:
        self._sim._on_commit_accepted(record, epoch, partitions)

    def illegal_assignment(self, message: str) -> None:
        self._sim._violate(Invariant.ILLEGAL_ASSIGNMENT, message)

    def note(self, text: str) -> None:
        if self._sim._trace is not None:
            self._sim._log("coord", text)


@contextmanager
def quiet_member_logs() -> Iterator[None]:
    """Silence kgroup's member logs for the duration (thousands of runs would flood stderr)."""
    logger = logging.getLogger("kgroup.membership")
    old = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(old)


class Simulation:
    """A consumer group of kgroup members in a simulated world (see the module docstring).

    Build it, add members and faults, then :meth:`run` or
    :meth:`run_until_converged`. ``assignors`` replaces the coordinator's
    server assignors (the first is the default); ``bug`` injects a test-only
    bug; ``trace`` records a readable line per step (:attr:`trace`).
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        topics: Mapping[str, int] | None = None,
        config: SimulationConfig | None = None,
        assignors: tuple[PartitionAssignor, ...] | list[PartitionAssignor] | None = None,
        bug: InjectedBug | None = None,
        trace: bool = False,
    ) -> None:
        cfg = config or SimulationConfig()
        if assignors is not None:
            cfg = dataclasses.replace(
                cfg, coordinator=dataclasses.replace(cfg.coordinator, assignors=tuple(assignors))
            )
        self.config = cfg
        self.seed = seed
        self.bug = bug
        self.rng = random.Random(f"kgroup-sim:{seed}")
        self._q = EventQueue()
        self.cluster = SimCluster(self.rng)
        self._observer = _Observer(self)
        self.coordinator = self._new_coordinator(None)
        # The classic group's coordinator (members speak one protocol or the
        # other: converting a group between them is not simulated).
        self.classic = ClassicGroupCoordinator(
            cfg.group_id,
            ClassicCoordinatorConfig(),
            schedule=self._q.schedule,
            clock=lambda: self._q.now,
            new_member_id=lambda: f"classic-{_uuid4(self.rng)}",
            on_removed=self._on_removed,
        )
        # Generation numbers a classic reload handed out again: (persisted generation,
        # offset) per reload, newest last (see _virtual_epoch).
        self._reissues: list[tuple[int, int]] = []
        self.status = CoordinatorStatus.UP
        self._status_until = 0.0
        self._slots: dict[str, _Slot] = {}
        self._by_member_id: dict[str, _Proc] = {}
        # Per classic member at the last upgrade: its epoch then, and the partitions
        # it still held beyond the assignment the conversion took (see _upgrade).
        self._held_over: dict[str, tuple[int, frozenset[TopicPartition]]] = {}
        # The held-over partitions such a member was fetching at the upgrade, with the
        # generation the conversion took its assignment from; an entry ends when the
        # member stops fetching the partition (see _assign).
        self._held_fetch: dict[tuple[str, TopicPartition], int] = {}
        self._ledger = EpochLedger()
        # When each topic becomes visible in the members' metadata (see metadata_lag).
        self._visible_at: dict[uuid.UUID, float] = {}
        # Who fetches each partition right now (for the wall-clock half of DOUBLE_FETCH).
        self._fetchers: dict[TopicPartition, list[_Proc]] = {}
        self._lossy: NetworkConditions | None = None
        self._slow_callbacks = 0.0
        self._next_rid = 0
        self._backoff = Backoff.from_ms(cfg.retry_backoff_ms, cfg.retry_backoff_max_ms)
        self._trace: list[str] | None = [] if trace else None
        self.violation: Violation | None = None
        self.converged_at: float | None = None
        self._converged_since: float | None = None
        self._deadline: float | None = None
        self._last_reason = ""
        self._last_fault_at = 0.0
        self.stats: dict[str, int] = {}
        self._session_loss = (
            cfg.coordinator.session_timeout_ms / 1000.0 if cfg.check_session_loss else None
        )
        self._liveness = cfg.liveness_repair and bug is not InjectedBug.NO_LIVENESS_REPAIR
        self._coordinator_address: BrokerAddress | None = None
        lat_lo, lat_hi = cfg.latency
        self._lat_lo = lat_lo
        self._lat_span = lat_hi - lat_lo
        self._dispatch: dict[type, Callable[[_Proc, Any], None]] = {
            SendHeartbeat: self._do_heartbeat,
            RequestMetadata: self._do_metadata,
            AssignorOnAssignment: self._do_nothing,
            SendJoinGroup: self._do_join,
            SendSyncGroup: self._do_sync,
            SendClassicHeartbeat: self._do_classic_heartbeat,
            SendLeaveGroup: self._do_classic_leave,
            RunAssignor: self._do_run_assignor,
            ClassicAssignorOnAssignment: self._do_classic_on_assignment,
            ReportAssignorError: self._do_assignor_error,
            SendPrepareAssignment: self._do_prepare,
            ComputeAssignment: self._do_compute,
            SendInstallAssignment: self._do_install,
            ReportClientAssignorError: self._do_client_assignor_error,
        }
        for name, partitions in (topics or {}).items():
            self.cluster.create(name, partitions)

    # ------------------------------------------------------------- building

    @property
    def now(self) -> float:
        """The virtual time, in seconds."""
        return self._q.now

    def _clock(self) -> float:
        return self._q.now

    @property
    def steps(self) -> int:
        """How many events ran so far."""
        return self._q.steps

    @property
    def trace(self) -> list[str]:
        """The trace lines recorded so far (empty unless built with ``trace=True``)."""
        return list(self._trace or ())

    def add_member(self, name: str, **plan: Any) -> MemberPlan:
        """Add an application process running a kgroup consumer; see :class:`MemberPlan`."""
        if name in self._slots:
            raise ScenarioError(f"member {name!r} exists already; names must be unique")
        member_plan = MemberPlan(name=name, **plan)
        # Members may speak both protocols: the group converts (see _upgrade).
        slot = _Slot(member_plan)
        self._slots[name] = slot
        self._q.schedule(member_plan.start_at, self._ev_start, slot)
        return member_plan

    def create_topic(self, name: str, partitions: int, *, at: float | None = None) -> None:
        """Create a topic now, or at virtual time ``at``."""
        if at is None:
            self.cluster.create(name, partitions)
        else:
            self._q.schedule(at, self._ev_create_topic, (name, partitions))

    def add_partitions(self, topic: str, count: int, *, at: float) -> None:
        """Grow ``topic`` by ``count`` partitions at ``at``."""
        self._fault_at(at)
        self._q.schedule(at, self._ev_add_partitions, (topic, count))

    def _fault_at(self, at: float) -> None:
        if at < 0:
            raise ScenarioError(f"faults happen at a time >= 0, got {at}")
        self._last_fault_at = max(self._last_fault_at, at)

    def _slot(self, name: str) -> _Slot:
        slot = self._slots.get(name)
        if slot is None:
            raise ScenarioError(f"no member called {name!r}; add it with add_member first")
        return slot

    def crash(self, name: str, *, at: float, restart_after: float | None = None) -> None:
        """Kill the process at ``at`` (no leave); restart it ``restart_after`` later if given."""
        self._fault_at(at)
        self._q.schedule(at, self._ev_crash, (self._slot(name), restart_after))

    def crash_reconciling(self, *, at: float, restart_after: float | None = None) -> None:
        """At ``at``, kill a member that is in the middle of a reconciliation (if any)."""
        self._fault_at(at)
        self._q.schedule(at, self._ev_crash_reconciling, restart_after)

    def close(self, name: str, *, at: float, restart_after: float | None = None) -> None:
        """Close the consumer at ``at`` (leave); start a new process ``restart_after`` later."""
        self._fault_at(at)
        self._q.schedule(at, self._ev_close, (self._slot(name), restart_after))

    def roll(self, name: str, *, at: float, protocol: str, restart_after: float) -> None:
        """A deployment's roll: close the consumer at ``at`` and start a new process
        speaking ``protocol`` (``consumer`` or ``classic``) ``restart_after`` later."""
        if protocol not in ("consumer", "classic"):
            raise ScenarioError(f"roll: protocol must be 'consumer' or 'classic', got {protocol!r}")
        slot = self._slot(name)
        if protocol == "classic" and slot.plan.pattern is not None:
            raise ScenarioError(f"roll: member {name!r} subscribes by regex, classic cannot")
        self._fault_at(at)
        self._q.schedule(at, self._ev_roll, (slot, protocol, restart_after))

    def subscribe(
        self,
        name: str,
        *,
        at: float,
        topics: frozenset[str] | set[str] = frozenset(),
        pattern: str | None = None,
    ) -> None:
        """Change the member's subscription at ``at`` (nothing at all means unsubscribe)."""
        self._fault_at(at)
        self._q.schedule(at, self._ev_subscribe, (self._slot(name), frozenset(topics), pattern))

    def partition(self, name: str, *, at: float, duration: float) -> None:
        """Cut the member off the network from ``at`` for ``duration`` seconds."""
        self._fault_at(at)
        self._q.schedule(at, self._ev_cut, (self._slot(name), duration))

    def stall(self, name: str, *, at: float, duration: float) -> None:
        """The application stops calling poll from ``at`` for ``duration`` seconds."""
        self._fault_at(at)
        self._q.schedule(at, self._ev_stall, (self._slot(name), duration))

    def callback_errors(self, name: str, *, at: float, duration: float, probability: float) -> None:
        """From ``at``, the member's callbacks raise with ``probability`` for ``duration``."""
        self._fault_at(at)
        self._q.schedule(at, self._ev_callback_errors, (self._slot(name), probability))
        self._q.schedule(at + duration, self._ev_callback_errors, (self._slot(name), 0.0))

    def assignor_errors(
        self, name: str, *, at: float, duration: float, probability: float, invalid: bool = False
    ) -> None:
        """From ``at``, the member's client assignor fails with ``probability`` for ``duration``.

        ``invalid``: instead of raising, it returns an assignment that loses a
        partition (the member must refuse to install it).
        """
        self._fault_at(at)
        slot = self._slot(name)
        self._q.schedule(at, self._ev_assignor_errors, (slot, probability, invalid))
        self._q.schedule(at + duration, self._ev_assignor_errors, (slot, 0.0, False))

    def crash_computing(self, *, at: float, restart_after: float | None = None) -> None:
        """At ``at``, kill a member that is computing the group's assignment (if any)."""
        self._fault_at(at)
        self._q.schedule(at, self._ev_crash_computing, restart_after)

    def failover(self, *, at: float, down: float, loading: float, within: float = 0.0) -> None:
        """The coordinator fails at ``at``: ``down`` seconds elsewhere, ``loading`` reloading.

        With ``within``, it fails at the first moment from ``at`` on (checked
        every 50 ms) when the group is in the middle of a rebalance — a classic
        group waiting for its leader's assignment, a consumer group whose
        assignment epoch lags or whose members reconcile — and at
        ``at + within`` at the latest: the window where a reload loses most.
        """
        if within < 0:
            raise ScenarioError(f"within must not be negative, got {within}")
        self._fault_at(at + within)
        if within:
            self._q.schedule(at, self._ev_failover_mid_rebalance, (down, loading, at + within))
        else:
            self._q.schedule(at, self._ev_failover, (down, loading))

    def lossy(self, conditions: NetworkConditions, *, at: float, duration: float) -> None:
        """The network misbehaves as ``conditions`` says from ``at`` for ``duration``."""
        self._fault_at(at)
        self._q.schedule(at, self._ev_lossy, conditions)
        self._q.schedule(at + duration, self._ev_lossy, None)

    def slow_callbacks(self, *, at: float, duration: float, max_time: float) -> None:
        """From ``at``, every callback takes up to ``max_time`` seconds more, for ``duration``."""
        self._fault_at(at)
        self._q.schedule(at, self._ev_slow, max_time)
        self._q.schedule(at + duration, self._ev_slow, 0.0)

    # -------------------------------------------------------------- running

    def run(self, until: float) -> None:
        """Run up to virtual time ``until``; InvariantViolationError at the first violation."""
        if self.violation is not None:
            raise InvariantViolationError(self.violation)
        with quiet_member_logs():
            self._q.run_until(until)
        if self.violation is not None:
            raise InvariantViolationError(self.violation)

    def run_until_converged(self, *, faults_end: float = 0.0, bound: float | None = None) -> float:
        """Run until the group converges after ``faults_end``; the time it converged.

        Faults scheduled after ``faults_end`` are a scenario error. From
        ``faults_end`` the network is sound and every process that should run
        runs; the group must then converge (see ``docs/simulation.md``) within
        ``bound`` seconds (default :meth:`convergence_bound`), and stay so for
        a heartbeat interval.

        Raises:
            InvariantViolationError: an invariant broke, or the group did not converge in time.
        """
        if self._last_fault_at > faults_end:
            raise ScenarioError(
                f"a fault is scheduled at {self._last_fault_at}, after faults_end={faults_end}; "
                "pass a faults_end after the last fault"
            )
        if bound is None:
            bound = self.convergence_bound()
        self._deadline = faults_end + bound
        self._q.schedule(faults_end, self._ev_faults_end, None)
        self._q.schedule(faults_end, self._ev_check, None)
        self.run(self._deadline + 1.0)
        if self.converged_at is None:
            raise SimulationError("the run ended without a convergence verdict")
        return self.converged_at

    def convergence_bound(self) -> float:
        """How long after the faults stop the group may take to converge (virtual seconds).

        session timeout (members that crashed must expire) + twice the longest
        rebalance timeout (a member may be fenced for a late revocation, then
        revoke again) + the longest restart delay + the close timeout + four
        slowest callbacks + ten heartbeat intervals + two request timeouts +
        the longest retry backoff + the liveness repair's waits (the first look,
        two confirm waits: one look may fall in a rebalance) + one more
        rebalance timeout (the rebalance the repairing member's rejoin causes).
        """
        cfg = self.config
        plans = [s.plan for s in self._slots.values()] or [MemberPlan("x", topics=frozenset("t"))]
        rebalance = max(p.max_poll_interval_ms for p in plans) / 1000.0
        callback = max(p.callback_time for p in plans)
        times = cfg.liveness_times
        return (
            # The liveness repair: an idle settled member's first look, one look that
            # fell in a rebalance, the confirming look, then the rebalance its rejoin
            # as a new member causes (counted whether or not the repair is on: the
            # bound is the system's promise, InjectedBug.NO_LIVENESS_REPAIR breaks it).
            times.first
            + 2 * times.confirm
            + rebalance
            + cfg.coordinator.session_timeout_ms / 1000.0
            + 2 * rebalance
            + cfg.restart_delay[1]
            + cfg.close_timeout
            + 4 * callback
            + 10 * cfg.coordinator.heartbeat_interval_ms / 1000.0
            + 2 * cfg.request_timeout
            + cfg.retry_backoff_max_ms / 1000.0
        )

    # ---------------------------------------------------------------- views

    def assignment(self) -> dict[str, frozenset[TopicPartition]]:
        """What each running member fetches now, by member name."""
        out: dict[str, frozenset[TopicPartition]] = {}
        for name, slot in self._slots.items():
            proc = slot.proc
            if proc is not None and proc.alive:
                out[name] = frozenset(proc.fetching)
        return out

    def member(self, name: str) -> ConsumerMember | ClassicMember | None:
        """The running incarnation's member machine (None while the process is down)."""
        proc = self._slot(name).proc
        return proc.member if proc is not None and proc.alive else None

    # ------------------------------------------------------------ internals

    def _new_coordinator(self, persisted: Any) -> ConsumerGroupCoordinator:
        q = self._q
        rng = self.rng
        return ConsumerGroupCoordinator(
            self.config.group_id,
            self.config.coordinator,
            self.cluster,
            schedule=q.schedule,
            clock=lambda: q.now,
            observer=self._observer,
            persisted=persisted,
            bug_skip_release=self.bug is InjectedBug.COORDINATOR_SKIPS_RELEASE,
            new_member_id=lambda: f"classic-{_uuid4(rng)}",
        )

    def _count(self, key: str) -> None:
        self.stats[key] = self.stats.get(key, 0) + 1

    def _log(self, who: str, text: str) -> None:
        assert self._trace is not None
        self._trace.append(f"{self._q.now:9.3f} {who:<10} {text}")

    def _violate(self, invariant: Invariant, message: str, proc: _Proc | None = None) -> None:
        if self.violation is not None:
            return
        self.violation = Violation(invariant, self._q.now, message, proc.label if proc else None)
        if self._trace is not None:
            self._log("VIOLATION", str(self.violation))
        self._q.halted = True

    def _latency(self) -> float:
        lat = self._lat_lo + self._lat_span * self.rng.random()
        cond = self._lossy
        if cond is not None and cond.spike and self.rng.random() < cond.spike:
            lat += cond.spike_max * self.rng.random()
        return lat

    def _cut(self, proc: _Proc) -> bool:
        return proc.slot.cut_until > self._q.now

    # ------------------------------------------------------------ lifecycle

    def _ev_start(self, slot: _Slot) -> None:
        if slot.proc is not None and slot.proc.alive:
            return
        plan = slot.plan
        slot.restarts += 1
        slot.wanted = True
        label = f"{slot.name}#{slot.restarts}"
        if plan.protocol == "classic":
            self._start_classic(slot, label)
            return
        member_id = str(_uuid4(self.rng))
        config = self._consumer_config(plan)
        member_config = consumer_member_config(config, member_id)
        if plan.client_assignors:
            # The KIP-848 draft's client-side mode: a simulated coordinator offers
            # it, the runtime has no such assignors to configure.
            member_config = dataclasses.replace(
                member_config,
                client_assignors=tuple(
                    ClientAssignor(
                        a.name,
                        min_version=a.min_version,
                        max_version=a.max_version,
                        metadata_version=a.max_version,
                        metadata=a.metadata() or b"",
                    )
                    for a in plan.client_assignors
                ),
            )
        member = ConsumerMember(self._with_bug(member_config), random=self.rng.random)
        proc = _Proc(slot, member, label, config, self._clock)
        self._by_member_id[member_id] = proc
        self._run_proc(proc, f"starts, member id {member_id[:8]}", slot.pattern)

    def _start_classic(self, slot: _Slot, label: str) -> None:
        config = self._consumer_config(slot.plan)
        # As the classic session builds its member.
        assignors = classic_assignors(config)
        member = ClassicMember(
            self._with_bug(classic_member_config(config)),
            classic_member_protocols(assignors),
            random=self.rng.random,
        )
        proc = _Proc(slot, member, label, config, self._clock, assignors=assignors)
        self._run_proc(proc, "starts (classic)", None)
        self._q.after(proc.config.metadata_max_age, self._ev_metadata_watch, proc)

    def _consumer_config(self, plan: MemberPlan) -> ConsumerConfig:
        """The process's consumer configuration: the real defaults, with the values the
        scenario sets (the world's timing and the plan's), as an application would."""
        cfg = self.config
        return ConsumerConfig(
            bootstrap_servers=("sim:9092",),
            group_id=cfg.group_id,
            group_protocol=GroupProtocol(plan.protocol),
            group_instance_id=plan.instance_id,
            group_remote_assignor=plan.server_assignor,
            partition_assignment_strategy=plan.assignors,
            session_timeout_ms=plan.session_timeout_ms,
            # As a deployment sets group.consumer.session.timeout.ms on the client
            # to the broker's value (the broker never sends it).
            consumer_session_timeout_ms=cfg.coordinator.session_timeout_ms,
            heartbeat_interval_ms=plan.heartbeat_interval_ms,
            enable_auto_commit=plan.auto_commit,
            auto_commit_interval_ms=round(cfg.auto_commit_interval * 1000),
            max_poll_interval_ms=plan.max_poll_interval_ms,
            client_rack=plan.rack_id,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            request_timeout_ms=round(cfg.request_timeout * 1000),
            passthrough=MappingProxyType(
                {"metadata.max.age.ms": str(round(_METADATA_WATCH * 1000))}
            ),
        )

    def _with_bug(self, config: _M) -> _M:
        """``config`` as the injected bug leaves it."""
        if self.bug is InjectedBug.NO_SESSION_MARGIN:
            return dataclasses.replace(config, session_margin_ms=0)
        return config

    def _run_proc(self, proc: _Proc, started: str, pattern: str | None) -> None:
        """``proc`` takes its slot: it subscribes as the slot says, then polls."""
        slot = proc.slot
        proc.last_ok = self._q.now
        slot.proc = proc
        core = proc.core
        if self._liveness:
            core.liveness = UnownedWatch(self.config.liveness_times)
        else:
            core.liveness_on = False
        if self._trace is not None:
            self._log(proc.label, started)
        if slot.subscribed:
            self._subscribe(proc, slot.topics, pattern)
        plan = slot.plan
        proc.next_auto_commit = self._q.now + proc.config.auto_commit_interval_ms / 1000
        self._q.after(plan.poll_interval * self.rng.random(), self._ev_poll, (proc, proc.poll_gen))

    def _subscribe(self, proc: _Proc, topics: frozenset[str], pattern: str | None) -> None:
        """The application subscribes (through the core, as the front end does)."""
        plan = proc.slot.plan
        listener = plan.listener
        if listener is None and plan.has_listener:
            listener = _SimListener()
        change = SubscriptionChanged(topics, pattern)
        self._run(proc, lambda: self._push(proc, proc.core.subscribe(change, listener)))

    def _subscribed(self, proc: _Proc, change: SubscriptionChange) -> None:
        """A :class:`Subscribe` effect: the session takes the change."""
        if isinstance(change, SubscriptionChanged):
            # As the runtime: learn the named topics' ids first, so the first
            # assignment resolves at once.
            names = {}
            now = self._q.now
            for name in change.topics:
                topic = self.cluster.get(name)
                if topic is not None and self._visible_at.get(topic.topic_id, 0.0) <= now:
                    names[topic.topic_id] = name
            if names:
                self._feed(proc, MetadataUpdated(names))
        self._feed(proc, change)

    def _end(self, proc: _Proc, why: str) -> None:
        """The incarnation is gone (crashed or closed): it fetches nothing any more."""
        proc.alive = False
        proc.conn += 1  # its connections die with it
        for tp, span in proc.fetching.items():
            EpochLedger.stop(span)
            self._fetchers[tp].remove(proc)
        proc.fetching.clear()
        proc.pending.clear()
        proc.commits.clear()
        proc.todo.clear()
        proc.app_work.clear()
        proc.stopping = None
        if self._by_member_id.get(proc.member_id) is proc:
            del self._by_member_id[proc.member_id]
        if self._trace is not None:
            self._log(proc.label, f"ends ({why})")

    def _restart_later(self, slot: _Slot, delay: float | None) -> None:
        if delay is None:
            lo, hi = self.config.restart_delay
            delay = lo + (hi - lo) * self.rng.random()
        self._q.after(delay, self._ev_start, slot)

    def _ev_crash(self, arg: tuple[_Slot, float | None]) -> None:
        slot, restart_after = arg
        proc = slot.proc
        if proc is None or not proc.alive:
            return
        self._count("crash")
        self._end(proc, "crashed")
        slot.wanted = restart_after is not None
        if restart_after is not None:
            self._restart_later(slot, restart_after)

    def _ev_crash_reconciling(self, restart_after: float | None) -> None:
        self._crash_one(
            lambda m: m.state is MemberState.RECONCILING, restart_after, "while reconciling"
        )

    def _crash_one(
        self,
        busy: Callable[[ConsumerMember | ClassicMember], bool],
        restart_after: float | None,
        what: str,
    ) -> None:
        """Crash one running process whose member is ``busy`` (drawn at random), if any."""
        candidates = [
            s
            for s in self._slots.values()
            if s.proc is not None and s.proc.alive and busy(s.proc.member)
        ]
        if not candidates:
            return
        slot = candidates[self.rng.randrange(len(candidates))]
        if self._trace is not None:
            self._log(slot.name, f"crashes {what}")
        self._ev_crash((slot, restart_after))

    def _ev_assignor_errors(self, arg: tuple[_Slot, float, bool]) -> None:
        slot, probability, invalid = arg
        slot.assignor_error_p = probability
        slot.assignor_invalid = invalid

    def _ev_crash_computing(self, restart_after: float | None) -> None:
        self._crash_one(
            lambda m: isinstance(m, ConsumerMember) and m.duty is not DutyState.IDLE,
            restart_after,
            "while computing the assignment",
        )

    def _ev_close(self, arg: tuple[_Slot, float | None]) -> None:
        slot, restart_after = arg
        proc = slot.proc
        if proc is None or not proc.alive or proc.closing:
            return
        self._count("close")
        proc.closing = True
        proc.restart_after = restart_after
        slot.wanted = restart_after is not None
        self._feed(proc, CloseRequested(self._q.now + self.config.close_timeout))

    def _ev_roll(self, arg: tuple[_Slot, str, float]) -> None:
        slot, protocol, restart_after = arg
        # The next process of the slot speaks the new protocol; the one closing now
        # keeps its own member machine.
        slot.plan = dataclasses.replace(slot.plan, protocol=protocol)
        self._count("roll")
        proc = slot.proc
        if proc is None or not proc.alive or proc.closing:
            slot.wanted = True
            self._restart_later(slot, restart_after)
            return
        self._ev_close((slot, restart_after))

    def _ev_subscribe(self, arg: tuple[_Slot, frozenset[str], str | None]) -> None:
        slot, topics, pattern = arg
        slot.topics = topics
        slot.pattern = pattern
        slot.subscribed = bool(topics) or pattern is not None
        proc = slot.proc
        if proc is None or not proc.alive or proc.closing:
            return
        self._count("subscribe")
        if slot.subscribed:
            self._subscribe(proc, topics, pattern)
        else:
            self._run(proc, lambda: self._push(proc, proc.core.change_subscription(Unsubscribe())))

    def _ev_cut(self, arg: tuple[_Slot, float]) -> None:
        slot, duration = arg
        slot.cut_until = self._fault_until(
            slot, slot.cut_until, duration, "partition", "cut off the network"
        )

    def _ev_stall(self, arg: tuple[_Slot, float]) -> None:
        slot, duration = arg
        slot.stall_until = self._fault_until(
            slot, slot.stall_until, duration, "stall", "application stops polling"
        )

    def _fault_until(
        self, slot: _Slot, until: float, duration: float, fault: str, what: str
    ) -> float:
        """The end of a fault on ``slot`` (so far lasting until ``until``) that hits
        again now for ``duration``: overlapping windows merge, the later end wins."""
        self._count(fault)
        if self._trace is not None:
            self._log(slot.name, f"{what} for {duration:.3f}s")
        return max(until, self._q.now + duration)

    def _ev_callback_errors(self, arg: tuple[_Slot, float]) -> None:
        slot, p = arg
        slot.callback_error_p = p

    def _ev_slow(self, max_time: float) -> None:
        self._slow_callbacks = max_time

    def _ev_lossy(self, conditions: NetworkConditions | None) -> None:
        self._lossy = conditions
        if self._trace is not None:
            self._log("network", f"conditions {conditions}")

    def _ev_create_topic(self, arg: tuple[str, int]) -> None:
        name, partitions = arg
        self._count("create_topic")
        topic = self.cluster.create(name, partitions)
        lag = self.config.metadata_lag
        if lag:
            self._visible_at[topic.topic_id] = self._q.now + lag * self.rng.random()
        if self._trace is not None:
            self._log("cluster", f"topic {name} created with {partitions} partitions")

    def _ev_add_partitions(self, arg: tuple[str, int]) -> None:
        name, count = arg
        self._count("add_partitions")
        topic = self.cluster.add_partitions(name, count)
        if self._trace is not None:
            self._log("cluster", f"topic {name} grows to {topic.partitions} partitions")

    def _ev_metadata_watch(self, proc: _Proc) -> None:
        """The classic runtime's metadata watch (``metadata.max.age.ms``, scaled down).

        As the runtime: the leader compares the partition counts of the topics
        its last assignor run saw (the whole group's subscription) with the
        cluster's, and reports SubscribedMetadataChanged when one changed.
        """
        if not proc.alive:
            return
        self._q.after(proc.config.metadata_max_age, self._ev_metadata_watch, proc)
        member = proc.member
        if not isinstance(member, ClassicMember) or not member.is_leader or proc.watched is None:
            return
        # A topic not (yet) visible counts 0, as in the runtime's watch.
        visible = self._visible_counts(proc.watched)
        counts = {name: visible.get(name, 0) for name in proc.watched}
        if counts != proc.watched:
            proc.watched = counts
            self._feed(proc, SubscribedMetadataChanged())

    def _visible_counts(self, topics: Iterable[str]) -> dict[str, int]:
        now = self._q.now
        counts = {}
        for name in sorted(topics):
            topic = self.cluster.get(name)
            if topic is not None and self._visible_at.get(topic.topic_id, 0.0) <= now:
                counts[name] = topic.partitions
        return counts

    def _ev_faults_end(self, _: object) -> None:
        """From here on the world is sound: heal partitions, stalls, the network, callbacks."""
        now = self._q.now
        self._lossy = None
        self._slow_callbacks = 0.0
        for slot in self._slots.values():
            slot.cut_until = min(slot.cut_until, now)
            slot.stall_until = min(slot.stall_until, now)
            slot.callback_error_p = 0.0
            slot.assignor_error_p = 0.0
            slot.assignor_invalid = False
        if self._trace is not None:
            self._log("sim", "faults end")

    # ---------------------------------------------------------- coordinator

    def _converted(self) -> bool:
        """Whether the group is a consumer group (classic members then get translated)."""
        return bool(self.coordinator.members)

    def _upgrade(self) -> None:
        """A consumer-protocol join converts the non-empty classic group (an upgrade)."""
        self._count("upgrade")
        generation, members, offsets = self.classic.export_for_upgrade()
        if self._trace is not None:
            self._log("coord", f"converts the classic group ({len(members)} members) to consumer")
        self.coordinator.adopt_classic(generation, members, offsets, self._q.now)
        # Apache Kafka takes each member's last classic assignment as all it owns.
        # A cooperative member still revoking partitions of its previous one (or
        # whose SyncGroup answer is in flight) holds more, and its revocation
        # commit of them at its generation is accepted by the broker even once
        # they are another member's: a broker-side window of the conversion (offsets
        # may rewind: redelivery, no loss), not a member bug. Recorded to tell it
        # apart in _on_commit_accepted.
        self._held_over = {}
        self._held_fetch = {}
        for m in members:
            proc = self._by_member_id.get(m.member_id)
            record = self.coordinator.members.get(m.member_id)
            if proc is None or record is None or not isinstance(proc.member, ClassicMember):
                continue
            held = proc.member.assignment - m.assignment
            if held:
                self._held_over[m.member_id] = (record.epoch, held)
                for tp in held & proc.fetching.keys():
                    self._held_fetch[(m.member_id, tp)] = generation

    def _ev_maybe_downgrade(self, _: object) -> None:
        """The last consumer-protocol member left a group that keeps classic members."""
        coord = self.coordinator
        if self.status is not CoordinatorStatus.UP or not coord.only_classic_members():
            return
        self._count("downgrade")
        generation, members, offsets = coord.export_for_downgrade()
        if self._trace is not None:
            self._log("coord", f"converts the group to classic ({len(members)} members)")
        self.classic.adopt_downgrade(generation, members, offsets)

    def _ev_failover_mid_rebalance(self, arg: tuple[float, float, float]) -> None:
        down, loading, latest = arg
        coord = self.coordinator
        rebalancing = (
            self.classic.state is ClassicGroupState.COMPLETING_REBALANCE
            or coord.group_epoch != coord.assignment_epoch
            or any(
                s.proc is not None
                and s.proc.alive
                and s.proc.member.state is MemberState.RECONCILING
                for s in self._slots.values()
            )
        )
        if rebalancing or self._q.now + 0.05 > latest:
            self._ev_failover((down, loading))
        else:
            self._q.after(0.05, self._ev_failover_mid_rebalance, arg)

    def _ev_failover(self, arg: tuple[float, float]) -> None:
        down, loading = arg
        if self.status is not CoordinatorStatus.UP:
            return
        self._count("failover")
        persisted = self.coordinator.persist()
        self.coordinator.retired = True
        # The classic group's state dies with the coordinator too; the new one
        # loads the last GroupMetadata record (ClassicGroupCoordinator.reload).
        self.classic.retired = True
        self.status = CoordinatorStatus.DOWN
        self._status_until = self._q.now + down + loading
        if self._trace is not None:
            self._log("coord", f"fails over: down {down:.3f}s, loading {loading:.3f}s")
        # Connections to the old coordinator break: everything in flight fails.
        for slot in self._slots.values():
            proc = slot.proc
            if proc is not None and proc.alive:
                self._close_connection(proc, FailureKind.DISCONNECTED)
        self._q.after(down, self._ev_loading, None)
        self._q.after(down + loading, self._ev_loaded, persisted)

    def _ev_loading(self, _: object) -> None:
        self.status = CoordinatorStatus.LOADING

    def _ev_loaded(self, persisted: Any) -> None:
        self.coordinator = self._new_coordinator(persisted)
        self._reload_classic()
        self.status = CoordinatorStatus.UP
        if self._trace is not None:
            self._log("coord", f"loaded: group epoch {self.coordinator.group_epoch}")

    def _reload_classic(self) -> None:
        """The new coordinator loads the classic group from its last record.

        Kafka writes a classic group's generation only with the leader's
        assignment (or when the group empties), so generations handed out
        since are forgotten and their numbers are handed out again. For the
        invariants those are new generations: epochs above the reloaded
        generation map past every epoch handed out before (``_virtual_epoch``),
        and a member may go back to the reloaded generation without breaking
        EPOCH_BACKWARDS — the coordinator, not the member, went back.
        """
        old = self.classic
        self.classic = old.reload(
            schedule=self._q.schedule,
            clock=lambda: self._q.now,
            new_member_id=lambda: f"classic-{_uuid4(self.rng)}",
            on_removed=self._on_removed,
        )
        kept = self.classic.generation
        if self._trace is not None:
            self._log(
                "coord",
                f"loaded the classic group: generation {kept} "
                f"({len(self.classic.members)} members; generation {old.generation} before)",
            )
        if old.generation <= kept:
            return
        self._count("classic_generation_reissued")
        top = self._virtual_epoch(old.generation)
        self._reissues.append((kept, top - kept))
        floor = self._virtual_epoch(kept)
        for slot in self._slots.values():
            proc = slot.proc
            if proc is None:
                continue
            proc.max_epoch = min(proc.max_epoch, floor)
            if proc.epoch > kept:
                # It holds a number the new coordinator will hand out again: the next
                # JoinGroup answer teaches it the new generation, even with that number.
                proc.reissued = True

    def _virtual_epoch(self, epoch: int) -> int:
        """``epoch`` as issued now, on a scale where a reissued generation is a new one.

        After a classic reload kept generation P while the old coordinator had
        handed out up to H, generation P + k is mapped to H + k (plus earlier
        shifts); generations up to P keep their place (the record carried them
        over, so they are the same generations).
        """
        for kept, shift in reversed(self._reissues):
            if epoch > kept:
                return epoch + shift
        return epoch

    def _on_released(
        self, member_id: str, partitions: frozenset[TopicIdPartition], why: str
    ) -> None:
        proc = self._by_member_id.get(member_id)
        if proc is None or not proc.alive or not proc.fetching:
            return
        for tip in sorted(partitions):
            tp = self.cluster.to_name(tip)
            if tp in proc.fetching:
                self._violate(
                    Invariant.FETCH_NOT_OWNED,
                    f"the coordinator released {tp} from {proc.label} ({why}) while it still "
                    "fetches it",
                    proc,
                )
                return

    def _on_removed(self, member_id: str, why: str) -> None:
        self._count("removed")
        if self._converted():
            # Checked once the coordinator is done with the request or timer.
            self._q.after(0.0, self._ev_maybe_downgrade, None)
        proc = self._by_member_id.get(member_id)
        if proc is None:
            return
        if self._trace is not None:
            self._log(proc.label, f"removed by the coordinator: {why}")
        if why == _SESSION_TIMEOUT and proc.alive and proc.fetching:
            self._session_expired(proc)

    def _session_expired(self, proc: _Proc) -> None:
        """The coordinator expired ``proc``'s session while its data plane still fetches.

        The member's own session timer counts from when it sent its last successful
        heartbeat, the coordinator's from when it heard one: a member that gives its
        session up the margin sooner (session_margin_ms) has stopped by now, whatever
        record wait its stop waited for. From now the partitions may be handed on.
        """
        if self._session_loss is not None:
            self._violate(
                Invariant.SESSION_LOST_FETCH,
                f"still fetches {_parts(frozenset(proc.fetching))} when the coordinator "
                "expires its session",
                proc,
            )
            return
        # Off: the fetches go on as a zombie's that should have known (DOUBLE_FETCH).
        proc.expired.update(proc.fetching.values())

    def _on_commit_accepted(
        self, record: MemberRecord, epoch: int, partitions: frozenset[TopicPartition]
    ) -> None:
        self._count("commit_accepted")
        owned = record.owned()
        held_epoch, held = self._held_over.get(record.member_id, (None, frozenset()))
        for tp in sorted(partitions):
            tip = self.cluster.to_id(tp)
            if tip is not None and tip not in owned and tp in held and epoch == held_epoch:
                self._count("commit_held_over_conversion")
                if self._trace is not None:
                    self._log("coord", f"accepts a commit of {tp} held over the conversion")
                continue
            if tip is None or tip not in owned:
                proc = self._by_member_id.get(record.member_id)
                self._violate(
                    Invariant.COMMIT_NOT_OWNED,
                    f"commit of {tp} at epoch {epoch} accepted from member "
                    f"{record.member_id[:8]}, which does not own it",
                    proc,
                )
                return

    # ---------------------------------------------------------------- feeding

    def _feed(self, proc: _Proc, event: Any) -> None:
        """Post ``event`` to the member: handled now, or after the work the driver's
        loop is blocked in (an unassign waiting for the record wait in progress)."""
        self._run(proc, lambda: self._handle(proc, event))

    def _run(self, proc: _Proc, thunk: Callable[[], None]) -> None:
        """Do ``thunk`` in the driver's loop, after the work already queued there."""
        if not proc.alive or self.violation is not None:
            return
        proc.todo.append(thunk)
        self._drain(proc)

    def _drain(self, proc: _Proc) -> None:
        todo = proc.todo
        while todo and proc.stopping is None and proc.alive and self.violation is None:
            todo.popleft()()

    def _push(
        self, proc: _Proc, effects: Sequence[Effect], then: Callable[[], None] | None = None
    ) -> None:
        """Carry out the core's ``effects`` next, in order (``Driver.execute``), then ``then``."""
        steps: list[Callable[[], None]] = [partial(self._effect, proc, e) for e in effects]
        if then is not None:
            steps.append(then)
        proc.todo.extendleft(reversed(steps))

    def _handle(self, proc: _Proc, event: Any) -> None:
        if isinstance(event, CallbackCompleted):
            proc.assigning.pop(event.token, None)
        now = self._q.now
        member = proc.member
        try:
            actions = member.handle(event, now)
        except Exception as exc:
            self._violate(
                Invariant.MEMBER_RAISED,
                f"handle({_describe_event(event)}) raised {type(exc).__name__}: {exc}",
                proc,
            )
            return
        if self._trace is not None:
            self._log(proc.label, f"<- {_describe_event(event)}  [{member.state.name}]")
            for action in actions:
                self._log(proc.label, f"-> {_describe_action(action)}")
        if (
            proc.reissued
            and type(event) is JoinGroupResponseReceived
            and not event.response.error_code
        ):
            # The generation in this answer is a new one, whatever its number: make
            # the step below (and any fetch it starts) record it as learned now. (An
            # error answer teaches no generation: the member still holds the old one.)
            proc.reissued = False
            proc.epoch = -1
        steps: list[Callable[[], None]] = [partial(self._act, proc, a) for a in actions]
        steps.append(lambda: self._after_step(proc))
        proc.todo.extendleft(reversed(steps))

    def _act(self, proc: _Proc, action: Any) -> None:
        """One of the member's actions: the session's requests go on the simulated
        network; the runtime's go to the real core (the invariants look first)."""
        if not isinstance(action, DRIVER_ACTIONS):
            self._dispatch[type(action)](proc, action)
            return
        if not self._observe_action(proc, action):
            return
        then = (lambda: self._closed(proc, action)) if isinstance(action, Closed) else None
        self._push(proc, proc.core.perform(action, self._q.now), then)

    def _after_step(self, proc: _Proc) -> None:
        member = proc.member
        now = self._q.now
        epoch = _position(member)
        if epoch != proc.epoch:
            self._epoch_changed(proc, epoch)
            if self.violation is not None:
                return
        if member.member_id != proc.member_id:
            # A classic member learns its id from the coordinator.
            if self._by_member_id.get(proc.member_id) is proc:
                del self._by_member_id[proc.member_id]
            proc.member_id = member.member_id
            if proc.member_id:
                self._by_member_id[proc.member_id] = proc
        limit = self._session_loss
        if limit is not None and proc.fetching and now - proc.last_ok > limit:
            self._violate(
                Invariant.SESSION_LOST_FETCH,
                f"still fetches {_parts(frozenset(proc.fetching))} {now - proc.last_ok:.3f}s after "
                "its last successful heartbeat",
                proc,
            )
            return
        # As the driver after each step: the core keeps its books, its timers run
        # (the loop's next turn), it looks at the group if its liveness watch says
        # so; then the timers are armed.
        core = proc.core
        effects = [*core.stepped(now, now), *core.timers(now, now), *core.look_at_group(now)]
        self._push(proc, effects, then=lambda: self._arm(proc))

    # ------------------------------------------------------------- liveness

    def _ev_describe(self, proc: _Proc) -> None:
        """The coordinator answers the look's describe with the group as it is now."""
        look = NOTHING_SEEN  # what a failed look counts as, as in the driver
        if self.status is CoordinatorStatus.UP and not self._cut(proc):
            if self._coordinator_address is None:
                self._coordinator_address = BrokerAddress(0, "sim-coordinator", 9092)
            address = self._coordinator_address
            group = (
                self.coordinator.describe(address)
                if self._converted()
                else self.classic.describe(address)
            )
            topics = {t for m in group.members for t in m.subscribed_topics}
            look = Look.of(group, self._visible_counts(topics), proc.member.member_id)
        self._q.after(self._latency(), self._ev_looked, (proc, look))

    def _ev_looked(self, arg: tuple[_Proc, Look]) -> None:
        proc, look = arg

        def looked() -> None:
            now = self._q.now
            effects = proc.core.group_looked(now, look, current=True)
            for effect in effects:
                if isinstance(effect, Post) and isinstance(effect.event, RejoinRequested):
                    self._count("liveness repair")
                    if self._trace is not None:
                        self._log(proc.label, f"liveness: {effect.event.reason}")
            self._push(proc, effects, then=lambda: self._arm(proc))

        self._run(proc, looked)

    def _arm(self, proc: _Proc) -> None:
        self._arm_core(proc)
        deadline = proc.member.next_deadline()
        if deadline is None:
            proc.timer_at = None
            return
        now = self._q.now
        if deadline <= now:
            if proc.last_wake == now:
                proc.same_instant += 1
                if proc.same_instant > _SAME_INSTANT_LIMIT:
                    self._violate(
                        Invariant.BUSY_LOOP,
                        f"asked to be woken at {deadline:.6f} more than "
                        f"{_SAME_INSTANT_LIMIT} times at {now:.6f}",
                        proc,
                    )
                    return
            else:
                proc.last_wake = now
                proc.same_instant = 0
            deadline = now
        if deadline == proc.timer_at:
            return
        proc.timer_at = deadline
        proc.timer_gen += 1
        self._q.schedule(deadline, self._ev_timer, (proc, proc.timer_gen))

    def _ev_timer(self, arg: tuple[_Proc, int]) -> None:
        proc, gen = arg
        if gen != proc.timer_gen:
            return
        proc.timer_at = None
        self._feed(proc, TimerTick())

    def _arm_core(self, proc: _Proc) -> None:
        """The core's own timers (polls passed on, held completions, the liveness look)."""
        due = proc.core.next_deadline()
        if due is None or due == proc.core_at:
            return
        proc.core_at = due
        proc.core_gen += 1
        self._q.schedule(max(due, self._q.now), self._ev_core_timer, (proc, proc.core_gen))

    def _ev_core_timer(self, arg: tuple[_Proc, int]) -> None:
        proc, gen = arg
        if gen != proc.core_gen:
            return
        proc.core_at = None

        def due() -> None:
            now = self._q.now
            core = proc.core
            effects = [*core.timers(now, now), *core.look_at_group(now)]
            self._push(proc, effects, then=lambda: self._arm(proc))

        self._run(proc, due)

    def _ev_feed(self, arg: tuple[_Proc, Any]) -> None:
        self._feed(arg[0], arg[1])

    def _epoch_changed(self, proc: _Proc, epoch: int) -> None:
        proc.epoch = epoch
        # Fixed when learned: a number reissued later is another generation.
        vepoch = self._virtual_epoch(epoch) if self._reissues else epoch
        proc.vepoch = vepoch
        if epoch <= 0:
            return
        if vepoch < proc.max_epoch:
            self._violate(
                Invariant.EPOCH_BACKWARDS,
                f"epoch went from {proc.max_epoch} back to {epoch}",
                proc,
            )
            return
        proc.max_epoch = vepoch
        ledger = self._ledger
        for tp, span in proc.fetching.items():
            clash = ledger.advance(span, tp, vepoch)
            if clash is not None:
                self._double_fetch(proc, tp, epoch, clash)
                return

    def _double_fetch(
        self, proc: _Proc, tp: TopicPartition, epoch: int, clash: tuple[str, int, int]
    ) -> None:
        owner, lo, hi = clash
        self._violate(
            Invariant.DOUBLE_FETCH,
            f"{proc.label} fetches {tp} at epoch {epoch}, but {owner} fetched it over epochs "
            f"{lo}..{hi}",
            proc,
        )

    # --------------------------------------------------------------- actions

    def _do_nothing(self, proc: _Proc, action: Any) -> None:
        pass

    def _do_heartbeat(self, proc: _Proc, action: SendHeartbeat) -> None:
        if action.leave:
            self._send(proc, _LEAVE, action.seq, action.request)
            return
        if proc.hb_in_flight:
            self._violate(
                Invariant.HEARTBEAT_IN_FLIGHT,
                f"sent heartbeat {action.seq} while {sorted(proc.hb_in_flight)} in flight",
                proc,
            )
            return
        proc.hb_in_flight.add(action.seq)
        self._send(proc, _HB, action.seq, action.request)

    def _effect(self, proc: _Proc, effect: Effect) -> None:
        """Carry out one of the core's effects in virtual time (``Driver.execute``)."""
        core = proc.core
        match effect:
            case DataPlaneOps():
                announce = effect.announce
                steps: list[Callable[[], None]] = [
                    partial(self._data_plane, proc, op, announce) for op in effect.ops
                ]
                steps.append(lambda: self._push(proc, core.ops_done()))
                proc.todo.extendleft(reversed(steps))
            case FetchCommitted():
                if effect.manual:
                    raise SimulationError("the simulator runs no manual assignment")
                self._offset_fetch((proc, _OffsetFetch(effect.ticket)))
            case CheckTruncation():
                # The simulated logs are never truncated.
                self._push(proc, core.truncation_checked(effect.ticket, effect.committed, ()))
            case SendMemberCommit():
                self._start_commit(
                    proc, effect.token, effect.offsets, effect.deadline, retry_rebalance=True
                )
            case FinishCommit():
                finished = effect.finished
                event: Any = (
                    classic_commit_done(finished)
                    if isinstance(proc.member, ClassicMember)
                    else consumer_commit_done(finished)
                )
                self._post(proc, event)
            case Post():
                self._post(proc, effect.event)
            case HandOver():
                # Driver._hand_over: the member handles its queued events now, in
                # order, then the poll waiting on them looks at its work again.
                handled: list[Callable[[], None]] = [
                    partial(self._handle, proc, event) for event in proc.posted
                ]
                proc.posted.clear()
                handled.append(partial(self._handed_over, proc, effect.token))
                proc.todo.extendleft(reversed(handled))
            case QueueWork():
                proc.app_work.append(effect.item)
            case Fatal():
                # The application gives up on this consumer: closes it and starts a new one.
                proc.slot.wanted = True
                self._q.after(0.0, self._ev_close_failed, proc)
            case Rediscover():
                self._rediscover(proc)
            case LookAtGroup():
                self._count("look")
                # The describe (and the metadata request) go out: answered a latency later.
                self._q.after(self._latency(), self._ev_describe, proc)
            case Subscribe():
                self._subscribed(proc, effect.change)
            case SwitchSession():
                raise SimulationError("the simulator runs no protocol switch (group.protocol=auto)")
            case SettledChanged():
                # As the driver tells the data plane: long record waits only while settled.
                proc.settled = effect.settled
            case TruncationChanged():
                pass

    def _post(self, proc: _Proc, event: Any) -> None:
        """Queue ``event`` for the member (handled in a later turn of the loop)."""
        proc.posted.append(event)
        self._q.after(0.0, self._ev_posted, proc)

    def _ev_posted(self, proc: _Proc) -> None:
        self._run(proc, partial(self._next_posted, proc))

    def _next_posted(self, proc: _Proc) -> None:
        # None left: a HandOver took it already.
        if proc.posted:
            self._handle(proc, proc.posted.popleft())

    def _handed_over(self, proc: _Proc, token: int | None) -> None:
        proc.core.handed_over(token)
        if proc.poll_waiting:
            # The front end's thread wakes and looks at its work (a later turn).
            self._q.after(0.0, self._ev_poll_resume, (proc, proc.poll_gen))

    def _data_plane(self, proc: _Proc, op: FetchOp, announce: bool) -> None:
        match op:
            case Unassign():
                self._stop(proc, op.partitions)
            case Assign():
                if self._assign(proc, frozenset(op.offsets)):
                    proc.core.fetch_started(op.offsets, announce=announce)
            case Pause() | Resume() | Seek():
                pass  # who fetches what does not change

    def _stop(self, proc: _Proc, partitions: frozenset[TopicPartition]) -> None:
        spans = {tp: proc.fetching[tp] for tp in partitions if tp in proc.fetching}
        if not spans:
            return
        if self.bug is InjectedBug.ACK_BEFORE_REVOKE and not proc.closing:
            # The data plane lets go a second late and the loop does not wait.
            self._q.after(1.0, self._ev_stop_late, (proc, spans))
            return
        left = self._record_wait_left(proc)
        proc.last_control = self._q.now + left
        gone = frozenset(spans)
        if not left:
            if self._trace is not None:
                self._log(proc.label, f"   data plane stops {_parts(gone)}")
            self._unassigned(proc, spans)
            return
        # The unassign waits for the application's record wait in progress (the
        # data plane's gate): librdkafka hands out what it fetched until then,
        # and the driver's loop waits in it.
        if self._trace is not None:
            self._log(
                proc.label,
                f"   data plane stops {_parts(gone)} after the record wait in progress "
                f"({left * 1000:.0f} ms)",
            )
        proc.stopping = (self._q.now + left, spans)
        self._q.schedule(proc.stopping[0], self._ev_stopped, proc)

    def _ev_stop_late(self, arg: tuple[_Proc, dict[TopicPartition, Span]]) -> None:
        proc, spans = arg
        if proc.alive:
            self._unassigned(proc, spans)

    def _record_wait_left(self, proc: _Proc) -> float:
        """How long the record wait in progress still lasts: the application waits for
        records in chunks (an application waiting in poll is always in one), long
        ones once the driver told the data plane the group is settled and no control
        call came for a while (kgroup.dataplane.librdkafka)."""
        quiet = self._q.now - proc.last_control >= QUIET_AFTER
        chunk = IDLE_CHUNK if proc.settled and quiet else WAIT_CHUNK
        return chunk * self.rng.random()

    def _ev_stopped(self, proc: _Proc) -> None:
        stopping = proc.stopping
        if stopping is None or not proc.alive:
            return
        proc.stopping = None
        if self.violation is not None:
            return
        if self._trace is not None:
            self._log(proc.label, f"   data plane stopped {_parts(frozenset(stopping[1]))}")
        self._unassigned(proc, stopping[1])
        self._drain(proc)

    def _unassigned(self, proc: _Proc, spans: Mapping[TopicPartition, Span]) -> None:
        """The data plane no longer fetches these partitions for ``proc``."""
        fetching = proc.fetching
        for tp, span in spans.items():
            if fetching.get(tp) is not span:
                continue
            del fetching[tp]
            EpochLedger.stop(span)
            self._fetchers[tp].remove(proc)
            self._held_fetch.pop((proc.member_id, tp), None)

    def _observe_action(self, proc: _Proc, action: Any) -> bool:
        """The invariants' look at a runtime action before the core takes it (False:
        violated). What the application does on its own is modelled here too."""
        match action:
            case StartFetching():
                for partitions in proc.assigning.values():
                    early = action.partitions & partitions
                    if early:
                        self._violate(
                            Invariant.START_BEFORE_ASSIGNED,
                            f"starts fetching {_parts(frozenset(early))} before its assigned "
                            "callback completed",
                            proc,
                        )
                        return False
                return self._fetch_epoch(proc, action.partitions) is not None
            case RunCallback():
                if action.kind is CallbackKind.ASSIGNED:
                    proc.assigning[action.token] = action.partitions
                    return True
                still = action.partitions & proc.fetching.keys()
                if still:
                    self._violate(
                        Invariant.CALLBACK_WHILE_FETCHING,
                        f"{action.kind.name} callback for {_parts(frozenset(still))} "
                        "while it still fetches them",
                        proc,
                    )
                    return False
            case RaiseCallbackError():
                self._count("callback_error")
            case ReportError():
                self._count("reported_error")
            case ReportFatalError():
                return self._fatal_explained(proc, action)
            case Closed():
                if proc.fetching:
                    self._violate(
                        Invariant.FETCH_AFTER_CLOSE,
                        f"closed while still fetching {sorted(proc.fetching)}",
                        proc,
                    )
                    return False
        return True

    def _held_over_fetch(self, other: _Proc, tp: TopicPartition) -> bool:
        """Whether ``other`` fetching ``tp`` is the upgrade's broker-side window.

        Apache Kafka converts a classic group with each member's last assignment as
        all it owns (``ConsumerGroup.fromClassicGroup``) and hands what a cooperative
        member was still giving up to other members at once. A member whose SyncGroup
        of that generation it never heard (request or answer lost) cannot know it
        gave ``tp`` up, so it fetches ``tp`` until it hears its assignment: tolerated
        (and counted) until then, a violation from then on. The stricter
        ``SESSION_LOST_FETCH`` still bounds the window.
        """
        generation = self._held_fetch.get((other.member_id, tp))
        member = other.member
        if generation is None or not isinstance(member, ClassicMember):
            return False
        if member.synced_generation >= generation:
            return False
        self._count("double_fetch_held_over_conversion")
        if self._trace is not None:
            self._log("coord", f"{other.label} still fetches {tp}, held over the conversion")
        return True

    def _fetch_epoch(self, proc: _Proc, partitions: Iterable[TopicPartition]) -> int | None:
        """The epoch ``proc`` starts fetching ``partitions`` in; None, with a violation,
        when it has none (a member out of the group owns nothing)."""
        epoch = _position(proc.member)
        if epoch <= 0:
            self._violate(
                Invariant.FETCH_NOT_OWNED,
                f"starts fetching {sorted(partitions)} at epoch {epoch}",
                proc,
            )
            return None
        return epoch

    def _offset_fetch(self, arg: tuple[_Proc, _OffsetFetch]) -> None:
        proc, task = arg
        if not proc.alive:
            return
        wanted = proc.core.fetch.wanted(task.ticket)
        if not wanted:
            return
        epoch = _position(proc.member)
        if epoch > 0:
            self._send(proc, _OFFSETS, task, (proc.member_id, epoch, wanted))
        else:
            self._offset_fetch_retry(proc, task)

    def _offset_fetch_retry(self, proc: _Proc, task: _OffsetFetch) -> None:
        delay = self._backoff.delay(task.attempt, self.rng.random)
        task.attempt += 1
        self._q.after(delay, self._offset_fetch, (proc, task))

    def _offset_result(self, proc: _Proc, task: _OffsetFetch, result: Any) -> None:
        # Read in the driver's loop (after an unassign it waits in).
        self._run(proc, lambda: self._offsets_read(proc, task, result))

    def _offsets_read(self, proc: _Proc, task: _OffsetFetch, result: Any) -> None:
        core = proc.core
        if result is None:
            self._offset_fetch_retry(proc, task)  # timed out or disconnected
            return
        code, committed = result
        if code is not ErrorCode.NONE:
            error = broker_error(int(code), "")
            assert isinstance(error, BrokerError)
            if fetch_error_retried(error, as_member=True):
                self._offset_fetch_retry(proc, task)
            else:
                self._push(proc, core.offset_fetch_failed(False, error))
            return
        core.committed.note(
            {tp: o for tp, o in committed.items() if o is not None},
            {tp: core.fetch.tenure(tp) for tp in committed},
        )
        self._push(proc, core.offsets_fetched(task.ticket, committed))

    def _assign(self, proc: _Proc, partitions: frozenset[TopicPartition]) -> bool:
        """The data plane starts fetching ``partitions`` for ``proc``: check and record it
        (False: an invariant failed)."""
        if self._trace is not None:
            self._log(proc.label, f"   data plane starts {_parts(partitions)}")
        epoch = self._fetch_epoch(proc, partitions)
        if epoch is None:
            return False
        # The epoch learned in this very step is not recorded yet (_epoch_changed
        # runs after the actions): it is being issued now.
        vepoch = proc.vepoch if epoch == proc.epoch else self._virtual_epoch(epoch)
        members: Mapping[str, object]
        owned_names: frozenset[TopicPartition] | None = None
        if isinstance(proc.member, ClassicMember):
            members = self.classic.members
            in_group = proc.member_id in members
            # What the coordinator handed out in the member's generation.
            owned_names = self.classic.assignment_in(epoch, proc.member_id)
            owned = None
        else:
            members = self.coordinator.members
            record = self.coordinator.members.get(proc.member_id)
            in_group = record is not None
            owned = record.owned() if record is not None else None
        ledger = self._ledger
        fetchers = self._fetchers
        # Sorted: set order follows str hashing, which differs between processes.
        for tp in sorted(partitions):
            if tp in proc.fetching:
                continue
            others = fetchers.setdefault(tp, [])
            for other in others:
                if other.fetching[tp] in other.expired:
                    self._violate(
                        Invariant.DOUBLE_FETCH,
                        f"{proc.label} starts fetching {tp} while {other.label}, whose session "
                        "the coordinator expired, still fetches it",
                        proc,
                    )
                    return False
                # A process the coordinator fenced (no record) is a zombie that cannot
                # know yet: tolerated here. Two members of the group must never overlap,
                # but for the upgrade's broker-side window (_held_over_fetch).
                if in_group and other.member_id in members and not self._held_over_fetch(other, tp):
                    self._violate(
                        Invariant.DOUBLE_FETCH,
                        f"{proc.label} starts fetching {tp} while {other.label}, also a member "
                        "of the group, fetches it",
                        proc,
                    )
                    return False
            others.append(proc)
            if owned_names is not None and tp not in owned_names:
                self._violate(
                    Invariant.FETCH_NOT_OWNED,
                    f"starts fetching {tp}, not in its assignment of generation {epoch}",
                    proc,
                )
                return False
            if owned is not None:
                tip = self.cluster.to_id(tp)
                if tip not in owned:
                    self._violate(
                        Invariant.FETCH_NOT_OWNED,
                        f"starts fetching {tp}, which the coordinator does not count as its own",
                        proc,
                    )
                    return False
            span, clash = ledger.start(proc.owner, tp, vepoch)
            proc.fetching[tp] = span
            proc.last_control = self._q.now
            if clash is not None:
                self._double_fetch(proc, tp, epoch, clash)
                return False
        return True

    # ------------------------------------------------------- classic actions

    def _do_join(self, proc: _Proc, action: SendJoinGroup) -> None:
        # As the runtime: each protocol entry carries its assignor's user data.
        request = action.request
        protocols = tuple(
            dataclasses.replace(
                p,
                subscription=dataclasses.replace(
                    p.subscription,
                    user_data=proc.assignors[p.name].subscription_user_data(p.subscription.topics),
                ),
            )
            for p in request.protocols
        )
        request = dataclasses.replace(request, protocols=protocols)
        # The broker holds a JoinGroup until the rebalance completes.
        timeout = _request_timeout(proc) + request.rebalance_timeout_ms / 1000.0
        self._send(proc, _JOIN, action.seq, request, timeout=timeout)

    def _do_sync(self, proc: _Proc, action: SendSyncGroup) -> None:
        timeout = _request_timeout(proc) + proc.config.max_poll_interval_ms / 1000.0
        self._send(proc, _SYNC, action.seq, action.request, timeout=timeout)

    def _do_classic_heartbeat(self, proc: _Proc, action: SendClassicHeartbeat) -> None:
        self._send(
            proc, _CHB, action.seq, (action.generation_id, action.member_id, action.instance_id)
        )

    def _do_classic_leave(self, proc: _Proc, action: SendLeaveGroup) -> None:
        self._send(proc, _CLEAVE, action.seq, (action.member_id, action.instance_id))

    def _do_run_assignor(self, proc: _Proc, action: RunAssignor) -> None:
        """The leader's duty, as the classic runtime does it: assign, validate, answer."""
        if action.skip_assignment:
            # As the runtime (KIP-814): no assignor run, watch from the coverage.
            proc.watched = action.covered_counts()
            self._q.after(
                self.config.lookup_delay,
                self._ev_feed,
                (proc, AssignmentComputed(action.generation_id, {})),
            )
            return
        name = action.protocol_name
        assignor = proc.assignors[name]
        subscriptions = group_subscription(action.members)
        subscribed = {t for m in action.members for t in m.subscription.topics}
        counts = self._visible_counts(subscribed)
        # What the metadata watch compares with from now on: as the runtime, every
        # topic the group subscribes to, not only the leader's own (seed 56395: a
        # leader on t1 never noticed t0 grow, so t0's new partitions stayed out).
        proc.watched = {name: counts.get(name, 0) for name in subscribed}
        cluster = Cluster(counts)
        protocol = validation_protocol(assignor)
        event: AssignmentComputed | AssignorFailed
        try:
            result = assignor.assign(cluster, subscriptions)
            if not isinstance(result, GroupAssignment):
                raise SimulationError(f"{name} returned {type(result).__name__}")
            validate_assignment(name, cluster, subscriptions, result, protocol)
        except (KgroupError, ValueError) as exc:
            event = AssignorFailed(action.generation_id, f"assignor {name}: {exc}")
        else:
            event = AssignmentComputed(
                action.generation_id, member_assignments(result, action.members)
            )
        self._q.after(self.config.lookup_delay, self._ev_feed, (proc, event))

    def _do_classic_on_assignment(self, proc: _Proc, action: ClassicAssignorOnAssignment) -> None:
        assignor = proc.assignors.get(action.protocol_name)
        if assignor is not None:
            assignor.on_assignment(
                ClassicAssignorAssignment(
                    tuple(sorted(action.assignment.partitions)), action.assignment.user_data
                ),
                GroupMetadata(
                    self.config.group_id,
                    action.generation_id,
                    proc.member_id,
                    proc.slot.plan.instance_id,
                ),
            )

    def _do_assignor_error(self, proc: _Proc, action: ReportAssignorError) -> None:
        self._violate(
            Invariant.UNEXPECTED_FATAL,
            f"assignor {action.protocol_name} failed: {action.message}",
            proc,
        )

    # ------------------------------------------------ client-side assignment

    def _do_prepare(self, proc: _Proc, action: SendPrepareAssignment) -> None:
        self._send(proc, _PREP, action.seq, action.request)

    def _do_install(self, proc: _Proc, action: SendInstallAssignment) -> None:
        self._send(proc, _INST, action.seq, action.request)

    def _do_compute(self, proc: _Proc, action: ComputeAssignment) -> None:
        """Run the client assignor as the runtime would, on the prepared group state."""
        state = action.state
        slot = proc.slot
        assignor = next(
            (a for a in slot.plan.client_assignors if a.name == state.assignor_name), None
        )
        assignment: dict[str, frozenset[TopicIdPartition]] | None = None
        error: str | None = None
        if assignor is None:
            error = f"no client assignor {state.assignor_name!r} configured"
        elif slot.assignor_error_p and self.rng.random() < slot.assignor_error_p:
            self._count("assignor_error")
            if slot.assignor_invalid:
                # A broken assignor: everything to the first member but one partition.
                first = state.members[0].member_id if state.members else ""
                parts = [
                    TopicIdPartition(t.topic_id, p)
                    for t in state.topics
                    for p in range(t.num_partitions)
                ]
                assignment = {first: frozenset(parts[1:])}
                proc.broken_outputs += 1
            else:
                error = "simulated assignor error"
        else:
            spec = AssignmentSpec(
                members={
                    m.member_id: MemberSpec(
                        subscribed_topic_ids=m.subscribed_topic_ids,
                        assignment=by_topic_id(m.assignment),
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        # Each member's metadata for this assignor, as the draft's
                        # PrepareAssignment response carries it.
                        assignor_metadata=AssignorMetadata(m.metadata_version, m.metadata),
                    )
                    for m in state.members
                },
                topics={t.topic_id: TopicMetadata(t.name, t.num_partitions) for t in state.topics},
            )
            try:
                result: object = assignor.assign(spec)
            except KgroupError as exc:
                error = f"{type(exc).__name__}: {exc}"
            else:
                if not isinstance(result, TargetAssignment):
                    error = f"assignor returned {type(result).__name__}, not a TargetAssignment"
                else:
                    assignment = {mid: a.topic_id_partitions() for mid, a in result.members.items()}
        delay = slot.plan.assign_time * (0.5 + self.rng.random())
        event = ClientAssignmentComputed(action.token, assignment, error)
        self._q.after(delay, self._ev_feed, (proc, event))

    def _do_client_assignor_error(self, proc: _Proc, action: ReportClientAssignorError) -> None:
        if proc.broken_outputs:
            proc.broken_outputs -= 1
            self._count("assignor_invalid_refused")
            return
        # The user's assignor broke a rule without a fault explaining it: what the
        # application would get from poll.
        error = client_assignor_error(action)
        self._violate(Invariant.ILLEGAL_ASSIGNMENT, str(error), proc)

    def _do_metadata(self, proc: _Proc, action: RequestMetadata) -> None:
        self._q.after(self.config.lookup_delay, self._ev_metadata, proc)

    def _ev_metadata(self, proc: _Proc) -> None:
        now = self._q.now
        visible = self._visible_at
        names = {t: n for t, n in self.cluster.id_to_name().items() if visible.get(t, 0.0) <= now}
        self._feed(proc, MetadataUpdated(names))

    def _rediscover(self, proc: _Proc) -> None:
        self._count("rediscover")
        at = self._q.now + self.config.lookup_delay
        if self.status is CoordinatorStatus.DOWN:
            at = max(at, self._status_until)
        self._q.schedule(at, self._ev_feed, (proc, CoordinatorRediscovered()))

    def _fatal_explained(self, proc: _Proc, action: ReportFatalError) -> bool:
        """Whether the faults explain a fatal error (False: a violation)."""
        self._count("fatal")
        code = action.code
        if code == ErrorCode.INVALID_REQUEST:
            self._violate(
                Invariant.INVALID_REQUEST,
                f"the coordinator rejected a heartbeat as invalid: {action.message}",
                proc,
            )
            return False
        if code not in _EXPECTED_FATAL or proc.slot.plan.instance_id is None:
            self._violate(
                Invariant.UNEXPECTED_FATAL, f"fatal error {action.name}: {action.message}", proc
            )
            return False
        if (
            code == ErrorCode.UNRELEASED_INSTANCE_ID
            and isinstance(proc.member, ConsumerMember)
            and self.coordinator.instance_holder(proc.slot.plan.instance_id) == proc.member_id
        ):
            # Held for this very member (its earlier epoch, after a fence): it must
            # leave and rejoin, never give up (docs/new-protocol.md, "Rejoin refused").
            self._violate(
                Invariant.UNEXPECTED_FATAL,
                f"fatal error {action.name} for its own held instance id: {action.message}",
                proc,
            )
            return False
        return True

    def _ev_close_failed(self, proc: _Proc) -> None:
        if proc.alive and not proc.closing:
            proc.closing = True
            lo, hi = self.config.restart_delay
            proc.restart_after = lo + (hi - lo) * self.rng.random()
            self._feed(proc, CloseRequested(self._q.now + self.config.close_timeout))

    def _closed(self, proc: _Proc, action: Closed) -> None:
        restart_after = proc.restart_after
        self._end(proc, "closed" + (" (timed out)" if action.timed_out else ""))
        if restart_after is not None:
            self._restart_later(proc.slot, restart_after)

    # ------------------------------------------------------------- commits

    def _start_commit(
        self,
        proc: _Proc,
        token: int | None,
        offsets: Mapping[TopicPartition, int],
        deadline: float,
        *,
        retry_rebalance: bool,
    ) -> None:
        """A commit goes out (``token``: the member's ``SendMemberCommit``; None: an
        auto-commit), retried as ``OffsetManager.commit`` retries it."""
        core = proc.core
        task = _CommitTask(
            token, offsets, deadline, core, _position(proc.member), retry_rebalance=retry_rebalance
        )
        proc.commits.append(task)
        self._commit_attempt((proc, task))

    def _auto_commit(self, proc: _Proc) -> None:
        """The front end's interval auto-commit at a service point (``OffsetIO.auto_commit``)."""
        offsets = proc.core.auto_commit_offsets()
        if not offsets:
            return
        proc.last_control = self._q.now  # the positions to commit
        classic = isinstance(proc.member, ClassicMember)
        self._start_commit(
            proc,
            None,
            offsets,
            self._q.now + proc.config.auto_commit_interval_ms / 1000,
            retry_rebalance=not classic,
        )

    def _commit_attempt(self, arg: tuple[_Proc, _CommitTask]) -> None:
        proc, task = arg
        if not proc.alive or task.done:
            return
        # Each attempt covers only partitions still owned (and not lost and
        # owned again since), at the member's current epoch.
        core = proc.core
        for tp in unowned(task.remaining, core.owned(), core.fetch.tenure, task.tenure):
            del task.remaining[tp]
        if not task.remaining:
            self._commit_done(proc, task, None)
            return
        epoch = core.member_epoch()
        if epoch > 0:
            instance_id = proc.slot.plan.instance_id
            parts = frozenset(task.remaining)
            self._send(proc, _COMMIT, task, (core.member_id(), epoch, parts, instance_id))
        else:
            self._commit_retry(proc, task, "no member epoch")

    def _commit_result(self, proc: _Proc, task: _CommitTask, code: int | None) -> None:
        if task.done:
            return
        if code is None:
            self._commit_retry(proc, task, "no response")
            return
        if code == ErrorCode.NONE:
            proc.core.committed.note(task.remaining, task.tenure)
            self._commit_done(proc, task, None)
            return
        error = broker_error(int(code), "")
        assert isinstance(error, BrokerError)
        answer = judge_commit_errors(
            dict.fromkeys(task.remaining, error), retry_rebalance_in_progress=task.retry_rebalance
        )
        if answer.fatal is not None:
            self._commit_done(proc, task, answer.fatal)
        else:
            self._commit_retry(proc, task, _error_name(int(code)))

    def _commit_retry(self, proc: _Proc, task: _CommitTask, why: str) -> None:
        now = self._q.now
        if now >= task.deadline:
            error = RequestTimeoutError(f"commit did not complete in time ({why})")
            self._commit_done(proc, task, error)
            return
        delay = self._backoff.delay(task.attempt, self.rng.random)
        task.attempt += 1
        self._q.schedule(min(now + delay, task.deadline), self._commit_attempt, (proc, task))

    def _commit_done(self, proc: _Proc, task: _CommitTask, error: BaseException | None) -> None:
        task.done = True
        if task in proc.commits:
            proc.commits.remove(task)
        token = task.token
        if token is None:
            return  # an auto-commit: no on_commit to tell
        core = proc.core
        self._run(
            proc,
            lambda: self._push(
                proc, core.member_commit_done(token, task.offsets, error, task.generation)
            ),
        )

    # -------------------------------------------------------------- network

    def _send(
        self, proc: _Proc, kind: int, ident: Any, payload: Any, *, timeout: float | None = None
    ) -> None:
        self._next_rid += 1
        rid = self._next_rid
        q = self._q
        deadline = q.now + (_request_timeout(proc) if timeout is None else timeout)
        proc.pending[rid] = (kind, ident, proc.conn, deadline)
        if timeout is not None:
            # Held requests (JoinGroup, SyncGroup) are answered whenever the group
            # moves on: time them out from the start.
            q.schedule(deadline, self._ev_timeout, (proc, rid))
        # The timeout is scheduled only once the request or its response is known
        # to be lost or late: most requests are answered, and this saves an event each.
        if proc.slot.cut_until > q.now:
            q.schedule(deadline, self._ev_timeout, (proc, rid))
            return
        cond = self._lossy
        if cond is not None and cond.drop_request and self.rng.random() < cond.drop_request:
            self._count("dropped_request")
            q.schedule(deadline, self._ev_timeout, (proc, rid))
            return
        at = q.now + self._latency()
        if at <= proc.link_last:
            # Requests of one member reach the coordinator in order (one connection).
            at = proc.link_last + 1e-6
        proc.link_last = at
        q.schedule(at, self._ev_arrive, (proc, rid, kind, ident, payload, proc.conn))

    def _process(self, proc: _Proc, kind: int, payload: Any) -> Any:
        status = self.status
        if status is not CoordinatorStatus.UP:
            code = (
                ErrorCode.NOT_COORDINATOR
                if status is CoordinatorStatus.DOWN
                else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            )
            if kind == _COMMIT:
                return code
            if kind == _OFFSETS:
                return (code, {})
            if kind == _JOIN:
                return JoinGroupResponse(error_code=int(code), error_message=status.value)
            if kind == _SYNC:
                return SyncGroupResponse(error_code=int(code), error_message=status.value)
            if kind in (_CHB, _CLEAVE, _INST):
                return int(code)
            if kind == _PREP:
                return PrepareAssignmentResponse(error_code=int(code), error_message=status.value)
            return HeartbeatResponse(error_code=int(code), error_message=status.value)
        classic = isinstance(proc.member, ClassicMember)
        # A consumer group with classic members: the coordinator translates.
        translated = classic and self._converted()
        coord = self.coordinator
        now = self._q.now
        if kind == _COMMIT:
            member_id, epoch, parts, instance_id = payload
            if classic and not translated:
                return self._classic_commit(proc, member_id, epoch, instance_id, parts)
            # Classic members' commits are checked against the generation, which
            # is their member epoch: the same check.
            return coord.commit(member_id, epoch, parts)
        if kind == _OFFSETS:
            member_id, epoch, parts = payload
            if classic:
                # The classic runtime reads committed offsets without a member epoch.
                store = coord if translated else self.classic
                return (ErrorCode.NONE, store.offsets(parts))
            return coord.offset_fetch(member_id, epoch, parts)
        if kind == _CHB:
            generation, member_id, instance_id = payload
            if translated:
                return coord.classic_heartbeat(generation, member_id, instance_id, now)
            return self.classic.heartbeat(generation, member_id, instance_id)
        if kind == _CLEAVE:
            member_id, instance_id = payload
            if translated:
                return coord.classic_leave(member_id, instance_id)
            return self.classic.leave(member_id, instance_id)
        if kind == _JOIN:
            return coord.classic_join(payload, now)
        if kind == _SYNC:
            return coord.classic_sync(payload, now)
        if kind == _HB and payload.member_epoch == 0:
            if self.classic.members:
                self._upgrade()
            elif not coord.members:
                # An empty group forms as consumer: epochs go on from the generations
                # (the invariants compare epochs over the group's whole life).
                coord.continue_from(self.classic.generation)
        if kind == _PREP:
            return self.coordinator.prepare_assignment(payload, self._q.now)
        if kind == _INST:
            return self.coordinator.install_assignment(payload, self._q.now)
        return self.coordinator.heartbeat(payload, self._q.now)

    def _classic_commit(
        self,
        proc: _Proc,
        member_id: str,
        generation: int,
        instance_id: str | None,
        parts: frozenset[TopicPartition],
    ) -> int:
        code = self.classic.commit(member_id, generation, instance_id, parts)
        if code == 0:
            self._count("commit_accepted")
            group = self.classic
            for tp in sorted(parts):
                if group.last_owner(generation, tp) == member_id:
                    continue
                self._violate(
                    Invariant.COMMIT_NOT_OWNED,
                    f"commit of {tp} at generation {generation} accepted from {proc.label}, "
                    "which does not own it",
                    proc,
                )
                break
        return code

    def _ev_arrive(self, arg: tuple[_Proc, int, int, Any, Any, int]) -> None:
        proc, rid, kind, ident, payload, conn = arg
        if conn != proc.conn:
            # The client closed that connection (timeout, crash, failover) before the
            # request reached the broker: it went down with the socket. Without this a
            # stale request could overtake a newer one, which TCP does not allow.
            return
        if kind in (_JOIN, _SYNC) and self.status is CoordinatorStatus.UP and not self._converted():
            if kind == _JOIN:
                # An empty group forms as classic: its generations go on from the epochs.
                self.classic.continue_from(self.coordinator.group_epoch)

            # Held until the group moves on: the coordinator calls back.
            def reply(result: Any) -> None:
                if self._trace is not None:
                    self._log(
                        proc.label, f"   coordinator answers {_describe_result(kind, result)}"
                    )
                self._answer(proc, rid, kind, ident, result, duplicate=False)

            if kind == _JOIN:
                self.classic.join(payload, reply)
            else:
                self.classic.sync(payload, reply)
            return
        result = self._process(proc, kind, payload)
        if self.violation is not None:
            return
        if self._trace is not None:
            self._log(proc.label, f"   coordinator answers {_describe_result(kind, result)}")
        if kind <= _LEAVE and result.error_code == ErrorCode.INVALID_REQUEST:
            self._violate(Invariant.INVALID_REQUEST, f"{result.error_message}", proc)
            return
        cond = self._lossy
        duplicate = False
        if cond is not None and cond.duplicate and self.rng.random() < cond.duplicate:
            # The response arrives twice at the member machine. A request is never
            # processed twice: the coordinator would then count as delivered a
            # change whose response the client never sees (TCP rules that out).
            self._count("duplicated")
            duplicate = True
        self._answer(proc, rid, kind, ident, result, duplicate=duplicate)

    def _answer(
        self, proc: _Proc, rid: int, kind: int, ident: Any, result: Any, *, duplicate: bool
    ) -> None:
        """Send the coordinator's answer back over the network (or lose it)."""
        q = self._q
        pend = proc.pending.get(rid)
        if pend is None:
            return  # already failed
        deadline = pend[3]
        cond = self._lossy
        if proc.slot.cut_until > q.now:
            q.schedule(deadline, self._ev_timeout, (proc, rid))
            return
        if cond is not None and cond.drop_response and self.rng.random() < cond.drop_response:
            self._count("dropped_response")
            q.schedule(deadline, self._ev_timeout, (proc, rid))
            return
        at = q.now + self._latency()
        if at >= deadline:
            q.schedule(deadline, self._ev_timeout, (proc, rid))
        q.schedule(at, self._ev_response, (proc, rid, result))
        if duplicate and kind <= _LEAVE:
            q.after(self._latency(), self._ev_duplicate, (proc, ident, result))

    def _ev_response(self, arg: tuple[_Proc, int, Any]) -> None:
        proc, rid, result = arg
        if not proc.alive:
            return
        if proc.slot.cut_until > self._q.now:
            # Lost on the way: the request times out.
            lost = proc.pending.get(rid)
            if lost is not None:
                self._q.schedule(lost[3], self._ev_timeout, (proc, rid))
            return
        pend = proc.pending.pop(rid, None)
        if pend is None:
            return
        kind, ident, conn, _ = pend
        if conn != proc.conn or self._driver_result(proc, kind, ident, result):
            return
        if kind == _PREP:
            self._feed(proc, PrepareAssignmentResponseReceived(ident, result))
            return
        if kind == _INST:
            self._feed(proc, InstallAssignmentResponseReceived(ident, result))
            return
        if kind >= _JOIN:
            self._classic_response(proc, kind, ident, result)
            return
        proc.hb_in_flight.discard(ident)
        if not result.error_code:
            proc.last_ok = self._q.now
        elif result.error_code in _FENCING and self._fence_loop(proc):
            return
        self._feed(proc, HeartbeatResponseReceived(ident, result))

    def _fence_loop(self, proc: _Proc) -> bool:
        """One more fencing answer for ``proc``: True if that makes a loop (FENCE_LOOP)."""
        now = self._q.now
        window = self.config.coordinator.session_timeout_ms / 1000.0
        proc.fences = [t for t in proc.fences if t > now - window]
        proc.fences.append(now)
        if len(proc.fences) <= _FENCE_LIMIT:
            return False
        self._violate(
            Invariant.FENCE_LOOP,
            f"{len(proc.fences)} heartbeats answered with a fencing error within "
            f"{window:.1f}s (since {proc.fences[0]:.3f}s)",
            proc,
        )
        return True

    def _driver_result(self, proc: _Proc, kind: int, ident: Any, result: Any) -> bool:
        """Settle a request the driver makes itself (a commit, an offset fetch), with its
        result or None when it failed; False for the member's own requests."""
        if kind == _COMMIT:
            self._commit_result(proc, ident, result)
            return True
        if kind == _OFFSETS:
            self._offset_result(proc, ident, result)
            return True
        return False

    def _classic_response(self, proc: _Proc, kind: int, seq: int, result: Any) -> None:
        event: Any
        # What restarts a classic member's session on the broker: a JoinGroup or
        # SyncGroup answered without error, and a heartbeat answered NONE or
        # REBALANCE_IN_PROGRESS (Kafka's ClassicGroup reschedules the member's
        # expiration before it reports the rebalance).
        if kind == _JOIN:
            if not result.error_code:
                proc.last_ok = self._q.now
            event = JoinGroupResponseReceived(seq, result)
        elif kind == _SYNC:
            if not result.error_code:
                proc.last_ok = self._q.now
            event = SyncGroupResponseReceived(seq, result)
        elif kind == _CHB:
            if result in (0, ErrorCode.REBALANCE_IN_PROGRESS):
                proc.last_ok = self._q.now
            event = ClassicHeartbeatResponseReceived(seq, result)
        else:
            event = LeaveGroupResponseReceived(seq, result)
        self._feed(proc, event)

    def _ev_duplicate(self, arg: tuple[_Proc, int, HeartbeatResponse]) -> None:
        proc, seq, response = arg
        if not proc.alive or proc.slot.cut_until > self._q.now:
            return
        # A copy the runtime would drop; the member must ignore it if it arrives
        # after the original, and treat it as the answer if it comes first.
        proc.hb_in_flight.discard(seq)
        if not response.error_code:
            proc.last_ok = self._q.now
        self._feed(proc, HeartbeatResponseReceived(seq, response))

    def _ev_timeout(self, arg: tuple[_Proc, int]) -> None:
        proc, rid = arg
        pend = proc.pending.pop(rid, None)
        if pend is None or not proc.alive:
            return
        self._count("timeout")
        self._fail(proc, pend, FailureKind.TIMEOUT)
        # A request that timed out closes its connection; the others on it fail too.
        if pend[2] == proc.conn:
            self._close_connection(proc, FailureKind.DISCONNECTED)

    def _close_connection(self, proc: _Proc, kind: FailureKind) -> None:
        old = proc.conn
        proc.conn += 1
        failed = [(rid, p) for rid, p in proc.pending.items() if p[2] == old]
        for rid, _ in failed:
            del proc.pending[rid]
        for _, pend in failed:
            self._q.after(0.0, self._ev_fail, (proc, pend, kind))

    def _ev_fail(self, arg: tuple[_Proc, tuple[int, Any, int, float], FailureKind]) -> None:
        proc, pend, kind = arg
        if proc.alive:
            self._fail(proc, pend, kind)

    def _fail(self, proc: _Proc, pend: tuple[int, Any, int, float], kind: FailureKind) -> None:
        req_kind, ident, _, _ = pend
        if self._driver_result(proc, req_kind, ident, None):
            return
        if req_kind >= _JOIN:
            self._feed(proc, RequestFailed(ident, kind))
            return
        proc.hb_in_flight.discard(ident)
        self._feed(proc, HeartbeatFailed(ident, kind))

    # ------------------------------------------------------------ application

    def _ev_poll(self, arg: tuple[_Proc, int]) -> None:
        proc, gen = arg
        if not proc.alive or gen != proc.poll_gen or proc.busy:
            return
        slot = proc.slot
        now = self._q.now
        if slot.stall_until > now:
            self._q.schedule(slot.stall_until, self._ev_poll, (proc, gen))
            return
        # A service point of the front end (its ``service()``): the poll reaches
        # the member (or is noted, while settled), an auto-commit when due, then
        # the application's queued work.
        core = proc.core
        if core.poll_events_wanted:
            self._run(proc, lambda: self._push(proc, core.poll_called(now)))
        else:
            core.app_polled = now
        if proc.config.enable_auto_commit and now >= proc.next_auto_commit:
            proc.next_auto_commit = now + proc.config.auto_commit_interval_ms / 1000
            self._run(proc, lambda: self._auto_commit(proc))
        self._serve(proc, app_code_ran=False)

    def _serve(self, proc: _Proc, *, app_code_ran: bool) -> None:
        """The application's queued work, oldest first (the front end's ``drain()``);
        a callback takes time, the poll goes on when it returns."""
        while proc.app_work and proc.alive and self.violation is None:
            item = proc.app_work.popleft()
            if isinstance(item, work.CallbackWork):
                if app_code_ran:
                    # Still inside the same poll(): the poll timer restarts before
                    # the next callback (kgroup's front end, as Java's poll loop).
                    self._run(proc, partial(self._polled, proc, self._q.now))
                    if _gone(proc):
                        return
                self._run_callback(proc, item)
                return
            if isinstance(item, work.RevocationCommitWork):
                self._run(proc, partial(self._release, proc, item.token))
                if (
                    not proc.app_work
                    and proc.alive
                    and proc.core.revocation_commit_waits(item.token)
                ):
                    # The front end's drain: the poll waits for the commit's
                    # answer, up to its timeout, to run the revoke callback.
                    proc.poll_waiting = True
                    proc.poll_gen += 1
                    self._q.after(_POLL_TIMEOUT, self._ev_poll_resume, (proc, proc.poll_gen))
                    return
            elif isinstance(item, work.ErrorWork):
                break  # raised from the poll: the application polls again
        if proc.alive:
            proc.poll_gen += 1
            self._q.after(proc.slot.plan.poll_interval, self._ev_poll, (proc, proc.poll_gen))

    def _ev_poll_resume(self, arg: tuple[_Proc, int]) -> None:
        """The poll waiting for a revocation commit goes on (answered, or its timeout)."""
        proc, gen = arg
        if not proc.alive or gen != proc.poll_gen or not proc.poll_waiting:
            return
        proc.poll_waiting = False
        self._serve(proc, app_code_ran=False)

    def _polled(self, proc: _Proc, now: float) -> None:
        self._push(proc, proc.core.poll_called(now))

    def _release(self, proc: _Proc, token: int) -> None:
        self._push(proc, proc.core.release_revocation_commit(token))

    def _run_callback(self, proc: _Proc, item: work.CallbackWork) -> None:
        plan = proc.slot.plan
        rng = self.rng
        duration = plan.callback_time
        if self._slow_callbacks:
            duration += self._slow_callbacks * rng.random()
        error: BaseException | None = None
        method = listener_method(proc.core.listener, item.kind)
        if method is not None:
            try:
                result = method(item.partitions)
            except Exception as exc:
                error = exc
            else:
                if result is not None:
                    raise ScenarioError(
                        f"member {plan.name!r}: the simulator runs listener methods "
                        "synchronously; use plain functions, not coroutines"
                    )
        p = proc.slot.callback_error_p
        if error is None and p and rng.random() < p:
            error = SimulatedCallbackError(f"injected failure in {item.kind.value}")
        proc.busy = True
        self._q.after(duration, self._ev_callback_done, (proc, item, error))

    def _ev_callback_done(self, arg: tuple[_Proc, work.CallbackWork, BaseException | None]) -> None:
        proc, item, error = arg
        if not proc.alive:
            return
        proc.busy = False
        now = self._q.now
        core = proc.core
        # A listener's error is raised from the poll (the front end's drain).
        raised = error is not None
        self._run(proc, lambda: self._push(proc, core.callback_done(item, error, raised, now)))
        if _gone(proc):
            return
        if raised:
            proc.poll_gen += 1
            self._q.after(proc.slot.plan.poll_interval, self._ev_poll, (proc, proc.poll_gen))
            return
        self._serve(proc, app_code_ran=True)

    # ----------------------------------------------------------- convergence

    def _classic_unconverged(self, running: list[_Proc]) -> str | None:
        group = self.classic
        if group.state is not ClassicGroupState.STABLE and group.members:
            return f"classic group {group.state.name}"
        expected: set[str] = set()
        covered: list[TopicPartition] = []
        for proc in running:
            slot = proc.slot
            member = proc.member
            if not isinstance(member, ClassicMember):
                # A consumer-protocol member that should be in: its join converts the group.
                if slot.subscribed:
                    return f"{proc.label} (consumer protocol) has not converted the group"
                if proc.fetching:
                    return f"{proc.label} unsubscribed but fetches"
                continue
            if not slot.subscribed:
                if member.state is not ClassicState.UNJOINED or proc.fetching:
                    return f"{proc.label} unsubscribed but is {member.state.name}"
                continue
            if member.state is not ClassicState.STABLE:
                return f"{proc.label} is {member.state.name}"
            if member.generation_id != group.generation:
                return (
                    f"{proc.label} at generation {member.generation_id}, group {group.generation}"
                )
            assignment = group.members.get(proc.member_id)
            if assignment is None:
                return f"{proc.label} is not a member at the coordinator"
            expected.add(proc.member_id)
            if frozenset(proc.fetching) != assignment.partitions:
                return (
                    f"{proc.label} fetches {sorted(proc.fetching)}, its assignment is "
                    f"{sorted(assignment.partitions)}"
                )
            if member.assignment != assignment.partitions:
                return f"{proc.label}'s assignment differs from the coordinator's"
            covered.extend(assignment.partitions)
        if set(group.members) != expected:
            extra = sorted(m[:16] for m in set(group.members) - expected)
            return f"classic coordinator still has members {extra}"
        want = {
            TopicPartition(t.name, p)
            for t in self.cluster.topics()
            if t.name in _classic_topics(self._slots.values())
            for p in range(t.partitions)
        }
        if len(covered) != len(set(covered)) or set(covered) != want:
            return f"{len(want - set(covered))} partitions unassigned or assigned twice"
        return None

    def _ev_check(self, _: object) -> None:
        if self.violation is not None:
            return
        now = self._q.now
        reason = self._unconverged()
        interval = self.config.coordinator.heartbeat_interval_ms / 1000.0
        if reason is None:
            if self._converged_since is None:
                self._converged_since = now
            elif now - self._converged_since >= interval:
                self.converged_at = self._converged_since
                if self._trace is not None:
                    self._log("sim", f"converged at {self.converged_at:.3f}s")
                self._q.halted = True
                return
        else:
            self._converged_since = None
            self._last_reason = reason
        assert self._deadline is not None
        if now >= self._deadline:
            unowned = self._not_owned_once()
            if unowned is not None:
                self._violate(
                    Invariant.LIVENESS,
                    f"not every subscribed partition is owned by one live member by "
                    f"{self._deadline:.3f}s (faults end + bound): {unowned}",
                )
                return
            self._violate(
                Invariant.CONVERGENCE,
                f"not converged by {self._deadline:.3f}s (faults end + bound): {self._last_reason}",
            )
            return
        self._q.after(interval / 2, self._ev_check, None)

    def _not_owned_once(self) -> str | None:
        """Which subscribed partitions no live member, or more than one, fetches (None: none).

        Subscribed: the partitions of the topics the running, subscribed members
        name (a regex subscription counts the topics the coordinator matched).
        """
        topics: set[str] = set()
        for slot in self._slots.values():
            if slot.wanted and slot.subscribed:
                topics |= slot.topics
        wanted = {
            TopicPartition(t.name, p)
            for t in self.cluster.topics()
            if t.name in topics
            for p in range(t.partitions)
        }
        wanted |= {self.cluster.to_name(t) for t in self.coordinator.subscribed_partitions()}
        owners: dict[TopicPartition, int] = {}
        for slot in self._slots.values():
            proc = slot.proc
            if proc is not None and proc.alive:
                for tp in proc.fetching:
                    owners[tp] = owners.get(tp, 0) + 1
        nobody = sorted(tp for tp in wanted if tp not in owners)
        twice = sorted(tp for tp, n in owners.items() if n > 1)
        if not nobody and not twice:
            return None
        parts = []
        if nobody:
            parts.append(f"{len(nobody)} owned by nobody ({_parts(frozenset(nobody))})")
        if twice:
            parts.append(f"{len(twice)} owned twice ({_parts(frozenset(twice))})")
        return ", ".join(parts)

    def _running_as_wanted(self) -> list[_Proc] | str:
        """The processes of the slots that should run, or why that is not so yet:
        one that should run does not, or one that left still fetches."""
        running = []
        for slot in self._slots.values():
            proc = slot.proc
            if not slot.wanted:
                if proc is not None and proc.alive and proc.fetching:
                    return f"{proc.label} left but fetches {sorted(proc.fetching)}"
                continue
            if proc is None or not proc.alive or proc.closing:
                return f"{slot.name} is not running"
            running.append(proc)
        return running

    def _unconverged(self) -> str | None:
        """None if the group has converged, else what is still off."""
        if self.status is not CoordinatorStatus.UP:
            return f"coordinator {self.status.name}"
        running = self._running_as_wanted()
        if isinstance(running, str):
            return running
        if not self._converted() and any(
            slot.plan.protocol == "classic" for slot in self._slots.values()
        ):
            return self._classic_unconverged(running)
        coord = self.coordinator
        # An empty group keeps its bumped epoch: no heartbeat comes to compute a target.
        if coord.members and coord.group_epoch != coord.assignment_epoch:
            return f"group epoch {coord.group_epoch} != assignment epoch {coord.assignment_epoch}"
        expected_ids: set[str] = set()
        covered: set[TopicIdPartition] = set()
        for proc in running:
            slot = proc.slot
            member = proc.member
            idle = (
                ClassicState.UNJOINED
                if isinstance(member, ClassicMember)
                else (MemberState.UNSUBSCRIBED)
            )
            stable = (
                ClassicState.STABLE if isinstance(member, ClassicMember) else (MemberState.STABLE)
            )
            state = member.state
            if not slot.subscribed:
                if state is not idle or proc.fetching:
                    return f"{proc.label} unsubscribed but is {state.name}"
                continue
            if state is not stable:
                return f"{proc.label} is {state.name}"
            record = coord.members.get(proc.member_id)
            if record is None:
                return f"{proc.label} has no record at the coordinator"
            expected_ids.add(proc.member_id)
            if record.epoch != coord.assignment_epoch:
                return f"{proc.label} at epoch {record.epoch}, target {coord.assignment_epoch}"
            if _position(member) != record.epoch:
                return f"{proc.label} at epoch {_position(member)}, its record {record.epoch}"
            target = coord.target(proc.member_id)
            if record.assigned != target or record.pending_revocation:
                return f"{proc.label} has not reached its target at the coordinator"
            names = frozenset(self.cluster.to_name(t) for t in target)
            if frozenset(proc.fetching) != names:
                return (
                    f"{proc.label} fetches {sorted(proc.fetching)}, its target is {sorted(names)}"
                )
            if proc.member.assignment != names:
                return f"{proc.label}'s assignment differs from its target"
            covered |= target
        if set(coord.members) != expected_ids:
            extra = sorted(m[:8] for m in set(coord.members) - expected_ids)
            return f"coordinator still has records {extra}"
        missing = coord.subscribed_partitions() - covered
        if missing:
            return f"{len(missing)} subscribed partitions unassigned"
        return None


def _classic_topics(slots: Iterable[_Slot]) -> frozenset[str]:
    out: set[str] = set()
    for slot in slots:
        if slot.wanted and slot.subscribed:
            out |= slot.topics
    return frozenset(out)


def _position(member: ConsumerMember | ClassicMember) -> int:
    """The member epoch, or the generation of a classic member's assignment (as the runtime)."""
    if isinstance(member, ClassicMember):
        return member.synced_generation
    return member.member_epoch


def _request_timeout(proc: _Proc) -> float:
    return proc.config.request_timeout_ms / 1000


def _gone(proc: _Proc) -> bool:
    # A function, not an inline test, because handlers called in between may end
    # the incarnation (mypy would keep the earlier narrowing of ``proc.alive``).
    return not proc.alive


def _uuid4(rng: random.Random) -> uuid.UUID:
    return uuid.UUID(int=rng.getrandbits(128), version=4)


def client_assignor_error(action: ReportClientAssignorError) -> InvalidAssignmentError:
    """The typed error a runtime raises from poll for ``action``."""
    return InvalidAssignmentError(
        action.assignor_name, AssignmentViolation[action.violation], action.message
    )


def _parts(partitions: frozenset[TopicPartition]) -> str:
    if not partitions:
        return "{}"
    return "{" + ",".join(str(tp) for tp in sorted(partitions)) + "}"


def _assignment_note(response: HeartbeatResponse) -> str:
    """`` assignment <n>p`` when a heartbeat response carries an assignment, else ``""``."""
    if response.assignment is None:
        return ""
    return f" assignment {sum(len(p) for p in response.assignment.values())}p"


def _describe_event(event: object) -> str:
    match event:
        case HeartbeatResponseReceived(seq=seq, response=r):
            if r.error_code:
                return f"hb#{seq} error {_error_name(r.error_code)}"
            return f"hb#{seq} ok epoch {r.member_epoch}{_assignment_note(r)}"
        case HeartbeatFailed(seq=seq, kind=kind):
            return f"request#{seq} failed ({kind.value})"
        case CallbackCompleted(kind=kind, token=token, error=error):
            return f"callback {kind.name} #{token} done" + (f" raising {error}" if error else "")
        case JoinGroupResponseReceived(seq=seq, response=r):
            if r.error_code:
                return f"join#{seq} error {_error_name(r.error_code)}"
            return f"join#{seq} generation {r.generation_id}"
        case SyncGroupResponseReceived(seq=seq, response=r):
            if r.error_code or r.assignment is None:
                return f"sync#{seq} error {_error_name(r.error_code)}"
            return f"sync#{seq} assignment {_parts(r.assignment.partitions)}"
        case ClassicHeartbeatResponseReceived(seq=seq, error_code=code):
            return f"heartbeat#{seq} {_error_name(code)}"
        case CommitCompleted(token=token, error=error):
            return f"commit #{token} done" + (f" failing ({error})" if error else "")
        case MetadataUpdated(topic_names=names):
            return f"metadata {sorted(names.values())}"
        case SubscriptionChanged(topics=topics, pattern=pattern):
            return f"subscribe {sorted(topics)} {pattern or ''}".rstrip()
        case CloseRequested():
            return "close"
        case ClientAssignmentComputed(token=token, error=error):
            return f"computed #{token}" + (f" failing ({error})" if error else "")
        case _:
            return type(event).__name__


def _describe_action(action: object) -> str:
    match action:
        case SendHeartbeat(seq=seq, request=r, leave=leave):
            owned = "" if r.topic_partitions is None else f" owned {len(r.topic_partitions)}p"
            return f"{'leave' if leave else 'hb'}#{seq} epoch {r.member_epoch}{owned}"
        case StopFetching(partitions=ps):
            return f"stop fetching {_parts(ps)}"
        case StartFetching(partitions=ps):
            return f"start fetching {_parts(ps)}"
        case CommitOffsets(token=token, partitions=ps, member_epoch=epoch):
            return f"commit #{token} {_parts(ps)} epoch {epoch}"
        case RunCallback(kind=kind, token=token, partitions=ps):
            return f"callback {kind.name} #{token} {_parts(ps)}"
        case ReportFatalError(name=name):
            return f"fatal {name}"
        case SendJoinGroup(seq=seq, request=r):
            return f"join#{seq} member {r.member_id[:14] or '-'}"
        case SendSyncGroup(seq=seq, request=r):
            return f"sync#{seq} generation {r.generation_id} ({len(r.assignments)} assignments)"
        case SendClassicHeartbeat(seq=seq, generation_id=generation):
            return f"heartbeat#{seq} generation {generation}"
        case SendPrepareAssignment(seq=seq, request=r):
            return f"prepare#{seq} epoch {r.member_epoch}"
        case ComputeAssignment(token=token, state=st):
            return f"compute #{token} with {st.assignor_name} for group epoch {st.group_epoch}"
        case SendInstallAssignment(seq=seq, request=r):
            what = f"error {r.error}" if r.error else f"{len(r.members)} members"
            return f"install#{seq} epoch {r.member_epoch} group epoch {r.group_epoch} {what}"
        case _:
            return type(action).__name__


def _describe_result(kind: int, result: Any) -> str:
    if kind == _COMMIT:
        return f"commit {_error_name(result)}"
    if kind == _INST:
        return f"install {_error_name(result)}"
    if kind == _PREP:
        if result.error_code:
            return f"prepare {_error_name(result.error_code)}"
        return f"prepare group epoch {result.group_epoch} ({len(result.members)} members)"
    if kind == _OFFSETS:
        return f"offset fetch {result[0].name}"
    if kind == _JOIN:
        if result.error_code:
            return f"join {_error_name(result.error_code)}"
        return (
            f"join generation {result.generation_id} leader {result.leader[:14]} "
            f"({len(result.members)} members)"
        )
    if kind == _SYNC:
        if result.error_code:
            return f"sync {_error_name(result.error_code)}"
        assert result.assignment is not None
        return f"sync assignment {_parts(result.assignment.partitions)}"
    if kind in (_CHB, _CLEAVE):
        return f"{'heartbeat' if kind == _CHB else 'leave'} {_error_name(result)}"
    what = "leave" if kind == _LEAVE else "hb"
    if result.error_code:
        return f"{what} {_error_name(result.error_code)}"
    return f"{what} epoch {result.member_epoch}{_assignment_note(result)}"


def _error_name(code: int) -> str:
    # One table names both protocols' codes: the coordinator's ErrorCode has the
    # classic group's too.
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
