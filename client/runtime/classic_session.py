"""The classic protocol's session: a ClassicMember and its group requests.

Drives a :class:`~kgroup.membership.ClassicMember` (JoinGroup / SyncGroup /
Heartbeat / LeaveGroup, eager and cooperative, static membership) for the
protocol-neutral driver, which keeps the event loop, the application work
queue, the data plane and the offsets (OffsetCommit's
GenerationIdOrMemberEpoch field carries the generation id, with member id and
instance id). What the session adds:

- the group requests, sent to the coordinator; a JoinGroup may be held by
  the broker until the rebalance completes, so its timeout is the rebalance
  timeout (``max.poll.interval.ms``) plus ``request.timeout.ms``;
- the embedded classic payload: each JoinGroup protocol entry gets its
  assignor's subscription user data and is encoded with
  :mod:`kgroup.protocol.classic_payload` (by :mod:`kgroup.protocol.requests.join_group`);
  assignments are decoded there too;
- leader duties: on ``RunAssignor`` the assignor the coordinator chose runs
  (in a worker thread, so heartbeats go on) on every member's subscription and
  the metadata of the subscribed topics (partition counts and replica racks);
  its output is checked with :func:`kgroup.assignors.validate_assignment`
  before it is sent, and an invalid output is a fatal
  :class:`~kgroup.errors.InvalidAssignmentError` naming the assignor and the
  violation, never sent;
- a metadata watch: every ``metadata.max.age.ms`` (Java's key and default,
  5 minutes), and at once when one of its commits finds a subscribed topic
  deleted, the leader looks at the partition counts of the group's
  subscribed topics and reports ``SubscribedMetadataChanged`` when one
  changed or a subscribed topic appeared; a regex subscription is resolved
  against the topic list at the same cadence;
- refused commits of the member's own (before a revocation) are reported as
  ``CommitFailed`` so the member can retry them after the rebalance;
- repeated coordinator lookups back off (see :meth:`ClassicSession.rediscovery_delay`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import anyio
import anyio.to_thread
from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup.assignors import (
    Assignment,
    Cluster,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupMetadata,
    resolve_assignors,
    validate_assignment,
)
from kgroup.assignors import RebalanceProtocol as AssignorProtocol
from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.config_keys import DEFAULT_ASSIGNMENT_STRATEGY
from kgroup.errors import AssignorError, BrokerError, KgroupError
from kgroup.membership import (
    AssignmentComputed,
    AssignorFailed,
    ClassicAssignorOnAssignment,
    ClassicHeartbeatResponseReceived,
    ClassicMember,
    ClassicMemberAction,
    ClassicMemberConfig,
    ClassicMemberEvent,
    ClassicState,
    CommitCompleted,
    CommitFailed,
    FailureKind,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseReceived,
    JoinProtocol,
    LeaveGroupResponseReceived,
    MemberSubscription,
    RebalanceProtocol,
    ReportAssignorError,
    RequestFailed,
    RunAssignor,
    SendClassicHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
    SubscribedMetadataChanged,
    SubscriptionChanged,
    SyncGroupRequest,
    SyncGroupResponse,
    SyncGroupResponseReceived,
    Unsubscribe,
)
from kgroup.protocol import NegotiatedVersions
from kgroup.protocol.requests import heartbeat, join_group, leave_group, sync_group
from kgroup.protocol.requests._common import CodeAnswered, Narrow
from kgroup.runtime._log import log
from kgroup.runtime.coordinator import Answered, CallFailed, LookupRefused, coordinator_call
from kgroup.runtime.interfaces import Host, SubscriptionChange
from kgroup.runtime.leader import group_subscription, member_assignments, validation_protocol
from kgroup.runtime.session import SESSION_MARGIN_MS, FinishedCommit, SessionBase
from kgroup.telemetry.recorder import ConsumerTelemetry
from kgroup.transport import ClusterMetadata
from kgroup.types import TopicPartition

__all__ = [
    "DEFAULT_ASSIGNMENT_STRATEGY",
    "ClassicSession",
    "classic_assignors",
    "classic_member_config",
    "classic_member_protocols",
    "commit_done_event",
]

R = TypeVar("R")
A = TypeVar("A", SendClassicHeartbeat, SendLeaveGroup)
_Q = TypeVar("_Q", JoinGroupRequest, SyncGroupRequest)
_P = TypeVar("_P", JoinGroupResponse, SyncGroupResponse)
_Q_contra = TypeVar("_Q_contra", contravariant=True)
_P_co = TypeVar("_P_co", covariant=True)


class _Coded(Protocol):
    """A Kafka response with a top-level error code."""

    @property
    def error_code(self) -> int: ...


_CodedR = TypeVar("_CodedR", bound=_Coded)


class _RebalanceApi(Protocol[_Q_contra, R, _P_co]):
    """:mod:`~kgroup.protocol.requests.join_group` or :mod:`~kgroup.protocol.requests.sync_group`:
    built from the member's request, answered with a response the member reads parsed."""

    def build(self, versions: NegotiatedVersions, request: _Q_contra, /) -> RequestPayload: ...

    @property
    def narrow(self) -> Narrow[R]: ...

    def parse(self, response: R, /) -> _P_co: ...


# Which kgroup.membership protocol each assignor protocol is.
_PROTOCOLS = {
    AssignorProtocol.EAGER: RebalanceProtocol.EAGER,
    AssignorProtocol.COOPERATIVE: RebalanceProtocol.COOPERATIVE,
}


def classic_assignors(config: ConsumerConfig) -> dict[str, ConsumerPartitionAssignor]:
    """The configured ``partition.assignment.strategy`` assignors by name, in preference order.

    Raises:
        ConfigError: an unknown assignor, naming it.
    """
    strategy: Any = config.partition_assignment_strategy or DEFAULT_ASSIGNMENT_STRATEGY
    return {a.name: a for a in resolve_assignors(strategy)}


def classic_member_config(config: ConsumerConfig) -> ClassicMemberConfig:
    """The member's configuration the session builds its member with (pure: the
    simulator builds its members with it too, so they run the runtime's values)."""
    return ClassicMemberConfig(
        group_id=config.group_id,
        instance_id=config.group_instance_id,
        rack_id=config.client_rack,
        session_timeout_ms=config.session_timeout_ms,
        session_margin_ms=SESSION_MARGIN_MS,
        heartbeat_interval_ms=config.heartbeat_interval_ms,
        max_poll_interval_ms=config.max_poll_interval_ms,
        auto_commit=config.enable_auto_commit,
        retry_backoff_ms=config.retry_backoff_ms,
        retry_backoff_max_ms=config.retry_backoff_max_ms,
    )


def classic_member_protocols(
    assignors: Mapping[str, ConsumerPartitionAssignor],
) -> dict[str, set[RebalanceProtocol]]:
    """The rebalance protocols each assignor supports, as the member takes them."""
    return {
        name: {_PROTOCOLS[p] for p in assignor.supported_protocols}
        for name, assignor in assignors.items()
    }


def commit_done_event(commit: FinishedCommit) -> CommitFailed | CommitCompleted:
    """What the classic member hears of a commit it asked for.

    A refusal by the broker is ``CommitFailed``: the member may retry it after
    the rebalance (with the offsets it carried).
    """
    error, offsets = commit.error, commit.offsets
    if isinstance(error, BrokerError):
        return CommitFailed(
            commit.token, frozenset(offsets), error.code, commit.generation, dict(offsets)
        )
    return CommitCompleted(commit.token, error)


class ClassicSession(SessionBase[ClassicMemberEvent, ClassicMemberAction]):
    """Drives one :class:`~kgroup.membership.ClassicMember` for a driver (see the module)."""

    group_protocol = GroupProtocol.CLASSIC
    stable_state = ClassicState.STABLE

    def __init__(self, host: Host) -> None:
        config = host.config
        # The driver's telemetry learns the member's states from the member.
        telemetry: ConsumerTelemetry | None = getattr(host, "telemetry", None)
        self._group_id = config.group_id
        self.assignors = classic_assignors(config)
        """The configured assignors by name, in preference order."""
        self.member = ClassicMember(
            classic_member_config(config),
            classic_member_protocols(self.assignors),
            listener=telemetry,
        )
        """The member, with its classic views (generation id, leader, chosen assignor)."""
        super().__init__(host, self.member)
        self._assignor_error: AssignorError | None = None
        self._rediscoveries = 0
        # The leader's view of the group subscription at its last assignment.
        self._watched_counts: dict[str, int] | None = None
        self._pattern: re.Pattern[str] | None = None
        self._pattern_topics: frozenset[str] = frozenset()
        self._metadata_interval = config.metadata_max_age
        self._check_now: anyio.Event | None = None  # wakes the metadata watch early

    @property
    def generation_or_epoch(self) -> int:
        """The generation of the assignment held (-1 before the first one).

        Commits carry it: between a JoinGroup answer and its SyncGroup answer
        the member still holds the previous generation's partitions, and the
        new generation may already stand for an assignment without them.
        """
        return self.member.synced_generation

    @property
    def may_fall_back(self) -> bool:
        """The classic protocol is the fallback: there is none below it."""
        return False

    def start(self) -> None:
        """Start the metadata watch (regex subscriptions, the leader's partition counts)."""
        self._host.spawn(self._watch_metadata)

    def _perform(self, action: ClassicMemberAction) -> None:
        host = self._host
        if isinstance(action, SendJoinGroup):
            host.spawn(self._join_group, action)
        elif isinstance(action, SendSyncGroup):
            # The broker holds a follower's SyncGroup until the leader's arrives.
            host.spawn_answer(self._sync_group_request, action)
        elif isinstance(action, SendClassicHeartbeat):
            # REBALANCE_IN_PROGRESS queues an eager member's revocation callback.
            host.spawn_answer(
                self._code_request, heartbeat, action, ClassicHeartbeatResponseReceived
            )
        elif isinstance(action, SendLeaveGroup):
            host.spawn(self._code_request, leave_group, action, LeaveGroupResponseReceived)
        elif isinstance(action, RunAssignor):
            host.spawn(self._run_assignor, action)
        elif isinstance(action, ClassicAssignorOnAssignment):
            self._assignor_on_assignment(action)
        elif isinstance(action, ReportAssignorError):
            # The typed error the session built (InvalidAssignmentError ...),
            # or one from the member's message.
            error = self._assignor_error or AssignorError(action.protocol_name, action.message)
            log.error("group %s: %s", self._group_id, error)
            host.set_fatal(error)

    def rediscovery_delay(self) -> float:
        """No pause the first time; repeated lookups (no group answer in between) back off."""
        # A coordinator still loading the group's offsets partition answers
        # NOT_COORDINATOR while FindCoordinator keeps naming it; without a
        # pause that is a hot JoinGroup loop.
        attempt = self._rediscoveries
        self._rediscoveries += 1
        return self._host.backoff.delay(attempt - 1) if attempt else 0.0

    def commit_done(self, commit: FinishedCommit) -> None:
        """Report a commit the member asked for (see :func:`commit_done_event`)."""
        self._events.post(commit_done_event(commit))

    def _assignor_on_assignment(self, action: ClassicAssignorOnAssignment) -> None:
        assignor = self.assignors.get(action.protocol_name)
        if assignor is None:
            return
        try:
            assignor.on_assignment(
                Assignment(
                    tuple(sorted(action.assignment.partitions)), action.assignment.user_data
                ),
                GroupMetadata(
                    self._group_id,
                    action.generation_id,
                    self.member.member_id,
                    self._host.config.group_instance_id,
                ),
            )
        except Exception as exc:
            log.exception("group %s: %s.on_assignment failed", self._group_id, action.protocol_name)
            self._host.set_fatal(
                AssignorError(action.protocol_name, f"on_assignment raised {exc!r}")
            )

    # ------------------------------------------------------------ subscription

    async def subscribe(self, change: SubscriptionChange) -> None:
        """Resolve a regex against the topic list (classic subscriptions are names)."""
        if isinstance(change, Unsubscribe):
            self._pattern, self._pattern_topics = None, frozenset()
            self._events.post(change)
        elif change.pattern is not None:
            # Python's re (checked at subscribe()): a classic member resolves its
            # regex itself, as Java's (java.util.regex) and librdkafka's do.
            self._pattern = re.compile(change.pattern)
            self._pattern_topics = frozenset()
            # Matching nothing (yet) means subscribed to nothing: the member
            # is not in the group until a matching topic appears; the watch
            # re-resolves the regex periodically.
            self._pattern_topics = await self._resolve_pattern()
            self._events.post(SubscriptionChanged(self._pattern_topics, None))
        else:
            self._pattern, self._pattern_topics = None, frozenset()
            self._events.post(change)

    async def _resolve_pattern(self) -> frozenset[str]:
        assert self._pattern is not None
        try:
            cluster = await self._host.client.metadata(None, timeout=self._host.request_timeout)
        except KgroupError as exc:
            log.info("group %s: topic list for the regex failed: %s", self._group_id, exc)
            return self._pattern_topics
        pattern = self._pattern
        return frozenset(
            t for t, info in cluster.topics.items() if not info.is_internal and pattern.fullmatch(t)
        )

    def topics_deleted(self, topics: frozenset[str]) -> None:
        """The leader looks at the subscribed topics now, not at the next interval.

        As the Java client's leader, which refreshes its metadata after fetch
        errors: the group rebalances without the deleted topic within a
        heartbeat or two instead of up to ``metadata.max.age.ms`` (5 minutes)
        later. Other members cannot start that (the member machine leaves the
        metadata check to the leader), so it is the leader's own commits of a
        deleted topic's partitions that tell.
        """
        watched = self._watched_counts
        check = self._check_now
        if check is not None and watched and self.member.is_leader and topics & watched.keys():
            check.set()

    def topics_appeared(self, topics: frozenset[str]) -> None:
        """The leader looks at the subscribed topics now: a topic created after
        the subscription is assigned within a round trip of the missing-topic
        watch seeing it, not at the next interval (``metadata.max.age.ms``) or
        through the stuck-group repair's leave and rejoin."""
        watched = self._watched_counts
        check = self._check_now
        if check is not None and watched and self.member.is_leader and topics & watched.keys():
            check.set()

    async def _watch_metadata(self) -> None:
        while True:
            self._check_now = anyio.Event()
            with anyio.move_on_after(self._metadata_interval):
                await self._check_now.wait()
            if self._pattern is not None:
                topics = await self._resolve_pattern()
                if topics and topics != self._pattern_topics:
                    log.info(
                        "group %s: regex %s now matches %s",
                        self._group_id,
                        self._pattern.pattern,
                        sorted(topics),
                    )
                    self._pattern_topics = topics
                    self._events.post(SubscriptionChanged(topics, None))
            watched = self._watched_counts
            if watched is None or not self.member.is_leader:
                continue
            try:
                counts = await self._partition_counts(watched)
            except KgroupError as exc:
                log.info("group %s: metadata refresh failed: %s", self._group_id, exc)
                continue
            if counts != watched and self._watched_counts is watched:
                log.info(
                    "group %s: partition counts of subscribed topics changed %s -> %s; rejoining",
                    self._group_id,
                    watched,
                    counts,
                )
                self._watched_counts = counts
                self._events.post(SubscribedMetadataChanged())

    async def _partition_counts(self, topics: Mapping[str, int]) -> dict[str, int]:
        cluster = await self._host.client.metadata(
            sorted(topics), timeout=self._host.request_timeout
        )
        return {
            t: (cluster.topics[t].partition_count if t in cluster.topics else 0) for t in topics
        }

    # ------------------------------------------------------------ group requests

    async def _call(
        self,
        build: Callable[[NegotiatedVersions], RequestPayload],
        narrow: Callable[[ResponsePayload], R],
        timeout: float | None = None,
    ) -> Answered[R] | LookupRefused | CallFailed:
        host = self._host
        return await coordinator_call(
            host.client,
            self._group_id,
            build,
            narrow,
            timeout=host.request_timeout if timeout is None else timeout,
            follow_moves=False,
        )

    def _answered(self, code: int) -> None:
        # A group response from the coordinator: the next lookup is immediate again.
        if code == 0:
            self._rediscoveries = 0

    async def _join_group(self, action: SendJoinGroup) -> None:
        request = action.request
        protocols = []
        for proto in request.protocols:
            sub = proto.subscription
            assignor = self.assignors[proto.name]
            try:
                user_data = assignor.subscription_user_data(frozenset(sub.topics))
            except Exception as exc:
                log.exception(
                    "group %s: %s.subscription_user_data failed", self._group_id, proto.name
                )
                self._host.set_fatal(
                    AssignorError(proto.name, f"subscription_user_data raised {exc!r}")
                )
                return
            protocols.append(JoinProtocol(proto.name, _with_user_data(sub, user_data)))
        request = dataclasses.replace(request, protocols=tuple(protocols))
        # The broker holds a JoinGroup until every member rejoined (at most the
        # rebalance timeout), so the wait is longer than a plain request's.
        await self._rebalance_request(
            join_group,
            request,
            action.seq,
            JoinGroupResponse,
            JoinGroupResponseReceived,
            undecodable_is_fatal=False,
            timeout=request.rebalance_timeout_ms / 1000 + self._host.request_timeout,
        )

    async def _sync_group_request(self, action: SendSyncGroup) -> None:
        await self._rebalance_request(
            sync_group,
            action.request,
            action.seq,
            SyncGroupResponse,
            SyncGroupResponseReceived,
            # The assignment the leader sent does not decode: asking again
            # would bring the same bytes.
            undecodable_is_fatal=True,
            timeout=self._host.config.max_poll_interval_ms / 1000 + self._host.request_timeout,
        )

    async def _rebalance_request(
        self,
        api: _RebalanceApi[_Q, _CodedR, _P],
        request: _Q,
        seq: int,
        response_type: type[_P],
        received: Callable[[int, _P], ClassicMemberEvent],
        *,
        undecodable_is_fatal: bool,
        timeout: float,
    ) -> None:
        """JoinGroup or SyncGroup: the member gets ``received(seq, <the parsed response>)``.

        A refused coordinator lookup reaches the member as a ``response_type``
        carrying the lookup's error; a response that does not parse is a failed
        request, or with ``undecodable_is_fatal`` the session's fatal error.
        """

        def answered(response: _CodedR) -> ClassicMemberEvent | None:
            self._answered(int(response.error_code))
            try:
                return received(seq, api.parse(response))
            except KgroupError as exc:
                log.error(
                    "group %s: undecodable %s: %s",
                    self._group_id,
                    type(response).__name__,
                    exc,
                )
                if undecodable_is_fatal:
                    self._host.set_fatal(exc)
                    return None
                return RequestFailed(seq, FailureKind.DISCONNECTED, str(exc))

        def refused(lookup: LookupRefused) -> ClassicMemberEvent:
            error = response_type(error_code=lookup.code, error_message=lookup.message)
            return received(seq, error)

        await self._group_request(
            seq,
            lambda versions: api.build(versions, request),
            api.narrow,
            refused=refused,
            answered=answered,
            timeout=timeout,
        )

    async def _code_request(
        self,
        api: CodeAnswered[A, R],
        action: A,
        received: Callable[[int, int], ClassicMemberEvent],
    ) -> None:
        """Heartbeat or LeaveGroup, answered with an error code: ``received(action.seq, code)``."""
        seq = action.seq

        def answered(response: R) -> ClassicMemberEvent:
            code = api.parse(response)
            self._answered(code)
            return received(seq, code)

        await self._group_request(
            seq,
            lambda versions: api.build(versions, action),
            api.narrow,
            refused=lambda refused: received(seq, refused.code),
            answered=answered,
        )

    async def _group_request(
        self,
        seq: int,
        build: Callable[[NegotiatedVersions], RequestPayload],
        narrow: Callable[[ResponsePayload], R],
        *,
        refused: Callable[[LookupRefused], ClassicMemberEvent],
        answered: Callable[[R], ClassicMemberEvent | None],
        timeout: float | None = None,
    ) -> None:
        """Send a group request and post the member's answer to request ``seq``.

        No answer is ``RequestFailed``; a refused coordinator lookup is the API's
        own error answer (``refused``); a response is what ``answered`` makes of
        it (None: nothing to post, the session has failed).
        """
        outcome = await self._call(build, narrow, timeout)
        event: ClassicMemberEvent | None
        if isinstance(outcome, CallFailed):
            event = RequestFailed(seq, outcome.kind, outcome.detail)
        elif isinstance(outcome, LookupRefused):
            event = refused(outcome)
        else:
            event = answered(outcome.response)
        if event is not None:
            self._events.post(event)

    # ----------------------------------------------------------------- leading

    async def _run_assignor(self, action: RunAssignor) -> None:
        if action.skip_assignment:
            # KIP-814: the coordinator ignores this generation's assignment, so
            # no assignor run; watch from what the group's assignment covers.
            self._watched_counts = action.covered_counts()
            self._events.post(AssignmentComputed(action.generation_id, {}))
            return
        name = action.protocol_name
        assignor = self.assignors[name]
        subscriptions = group_subscription(action.members)
        topics = sorted({t for m in action.members for t in m.subscription.topics})
        protocol = validation_protocol(assignor)
        try:
            cluster = _cluster(await self._leader_metadata(topics), topics)
            result = await anyio.to_thread.run_sync(assignor.assign, cluster, subscriptions)
            if not isinstance(result, GroupAssignment):
                raise AssignorError(
                    name, f"assign returned {type(result).__name__}, not a GroupAssignment"
                )
            validate_assignment(name, cluster, subscriptions, result, protocol)
        except AssignorError as exc:
            self._assignor_failed(action, exc)
            return
        except KgroupError as exc:
            # No metadata within the rebalance timeout (by then the coordinator
            # has given up on this generation): the leader cannot assign.
            self._assignor_failed(
                action, AssignorError(name, f"cluster metadata unavailable: {exc}")
            )
            return
        except Exception as exc:
            error = AssignorError(name, f"assign raised {exc!r}")
            error.__cause__ = exc
            self._assignor_failed(action, error)
            return
        self._watched_counts = {t: cluster.partitions_for(t) or 0 for t in topics}
        assignments = member_assignments(result, action.members)
        log.info(
            "group %s generation %d: assignor %s assigned %s",
            self._group_id,
            action.generation_id,
            name,
            "; ".join(
                f"{m}: {len(a.partitions)} partitions" for m, a in sorted(assignments.items())
            ),
        )
        self._events.post(AssignmentComputed(action.generation_id, assignments))

    def _assignor_failed(self, action: RunAssignor, error: AssignorError) -> None:
        self._assignor_error = error
        self._events.post(AssignorFailed(action.generation_id, str(error)))

    async def _leader_metadata(self, topics: list[str]) -> ClusterMetadata:
        """Metadata of ``topics``, retried with backoff within the rebalance timeout."""
        host = self._host
        deadline = anyio.current_time() + host.config.max_poll_interval_ms / 1000
        attempt = 0
        while True:
            try:
                return await host.client.metadata(topics, timeout=host.request_timeout)
            except KgroupError as exc:
                if anyio.current_time() >= deadline:
                    raise
                log.info("group %s: leader's metadata request failed: %s", self._group_id, exc)
            await anyio.sleep(host.backoff.delay(attempt))
            attempt += 1


# ------------------------------------------------------------------- conversions


def _with_user_data(sub: MemberSubscription, user_data: bytes | None) -> MemberSubscription:
    return dataclasses.replace(sub, user_data=user_data)


def _cluster(metadata: ClusterMetadata, topics: list[str]) -> Cluster:
    counts: dict[str, int] = {}
    racks: dict[TopicPartition, frozenset[str]] = {}
    for name in topics:
        info = metadata.topics.get(name)
        if info is None:
            continue
        counts[name] = info.partition_count
        for index, part in info.partitions.items():
            known = {
                rack
                for node in part.replicas
                if (broker := metadata.brokers.get(node)) is not None
                and (rack := broker.rack) is not None
            }
            if known:
                racks[TopicPartition(name, index)] = frozenset(known)
    return Cluster(counts, racks)
