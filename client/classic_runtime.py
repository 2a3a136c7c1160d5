"""The anyio driver of a classic-protocol consumer, and the choice of protocol for ``auto``.

:class:`ClassicRuntime` drives a :class:`~kgroup.membership.ClassicMember`
(JoinGroup / SyncGroup / Heartbeat / LeaveGroup, eager and cooperative,
static membership) with the machinery of :class:`~kgroup.runtime.Runtime`:
the same event loop, application work queue, data-plane handling, offset
fetches and commits (OffsetCommit's GenerationIdOrMemberEpoch field carries
the generation id, with member id and instance id). What it adds:

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
  5 minutes) the leader looks at the partition counts of the group's
  subscribed topics and reports ``SubscribedMetadataChanged`` when one
  changed or a subscribed topic appeared; a regex subscription is resolved
  against the topic list at the same cadence;
- refused commits of the member's own (before a revocation) are reported as
  ``CommitFailed`` so the member can retry them after the rebalance.

:func:`choose_group_protocol` decides ``group.protocol=auto``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import anyio
import anyio.to_thread
from kio.schema.errors import ErrorCode
from kio.static.protocol import ResponsePayload

from kgroup.assignors import (
    Assignment,
    Cluster,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupMetadata,
    GroupSubscription,
    Subscription,
    resolve_assignors,
    validate_assignment,
)
from kgroup.assignors import RebalanceProtocol as AssignorProtocol
from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.errors import (
    AssignorError,
    BrokerError,
    KafkaConnectionError,
    KafkaProtocolError,
    KgroupError,
    RequestTimeoutError,
    TransportError,
    UnsupportedVersionError,
)
from kgroup.membership import (
    AssignmentComputed,
    AssignorFailed,
    ClassicAssignorOnAssignment,
    ClassicEvent,
    ClassicHeartbeatResponseReceived,
    ClassicMember,
    ClassicMemberConfig,
    CommitCompleted,
    CommitFailed,
    CommitOffsets,
    FailureKind,
    JoinGroupResponse,
    JoinGroupResponseReceived,
    JoinProtocol,
    LeaveGroupResponseReceived,
    MemberAssignment,
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
    SyncGroupResponse,
    SyncGroupResponseReceived,
    Unsubscribe,
)
from kgroup.protocol import ApiKey
from kgroup.protocol.requests import (
    consumer_group_describe,
    heartbeat,
    join_group,
    leave_group,
    sync_group,
)
from kgroup.runtime import DrivenMember, Runtime, _connect_timeout, _PendingCommit
from kgroup.transport import Backoff, ClusterMetadata, KafkaClient, RequestBuilder
from kgroup.types import TopicPartition

__all__ = [
    "DEFAULT_ASSIGNMENT_STRATEGY",
    "ClassicRuntime",
    "choose_group_protocol",
]

log = logging.getLogger("kgroup.runtime")

_Response = TypeVar("_Response")

DEFAULT_ASSIGNMENT_STRATEGY = "range,cooperative-sticky"
"""``partition.assignment.strategy`` when not set: the Java client's default since 3.0."""

_DEFAULT_METADATA_MAX_AGE_MS = 300_000  # the Java client's metadata.max.age.ms

# Which kgroup.membership protocol each assignor protocol is.
_PROTOCOLS = {
    AssignorProtocol.EAGER: RebalanceProtocol.EAGER,
    AssignorProtocol.COOPERATIVE: RebalanceProtocol.COOPERATIVE,
}


class _GenerationMember(ClassicMember):
    """The classic member as the runtime machinery sees it: the generation is the epoch."""

    @property
    def member_epoch(self) -> int:
        """The generation id (-1 outside a generation)."""
        return self.generation_id


class ClassicRuntime(Runtime):
    """Drives one :class:`~kgroup.membership.ClassicMember` for one consumer.

    Same interface and threading rules as :class:`~kgroup.runtime.Runtime`;
    ``member.member_epoch`` is the generation id.
    """

    group_protocol: ClassVar[GroupProtocol] = GroupProtocol.CLASSIC

    def _create_member(self) -> DrivenMember:
        config = self.config
        strategy: Any = config.partition_assignment_strategy or DEFAULT_ASSIGNMENT_STRATEGY
        self.assignors: dict[str, ConsumerPartitionAssignor] = {
            a.name: a for a in resolve_assignors(strategy)
        }
        """The configured assignors by name, in preference order."""
        self.classic = _GenerationMember(
            ClassicMemberConfig(
                group_id=config.group_id,
                instance_id=config.group_instance_id,
                rack_id=config.client_rack,
                session_timeout_ms=config.session_timeout_ms,
                heartbeat_interval_ms=config.heartbeat_interval_ms,
                max_poll_interval_ms=config.max_poll_interval_ms,
                auto_commit=config.enable_auto_commit,
                retry_backoff_ms=config.retry_backoff_ms,
                retry_backoff_max_ms=config.retry_backoff_max_ms,
            ),
            {
                name: {_PROTOCOLS[p] for p in assignor.supported_protocols}
                for name, assignor in self.assignors.items()
            },
        )
        """The member, with its classic views (generation id, leader, chosen assignor)."""
        self._assignor_error: AssignorError | None = None
        self._rediscoveries = 0
        # The leader's view of the group subscription at its last assignment.
        self._watched_counts: dict[str, int] | None = None
        self._pattern: re.Pattern[str] | None = None
        self._pattern_topics: frozenset[str] = frozenset()
        age = config.passthrough.get("metadata.max.age.ms")
        self._metadata_interval = (
            int(age) if age is not None and age.isdigit() else _DEFAULT_METADATA_MAX_AGE_MS
        ) / 1000
        return self.classic

    # ------------------------------------------------------------ subscription

    async def _subscriptions(self) -> None:
        # A regex is resolved here against the topic list (classic
        # subscriptions are names); the watch re-resolves it periodically.
        assert self._tg is not None
        self._tg.start_soon(self._guarded, self._watch_metadata)
        async for change in self._sub_recv:
            if isinstance(change, Unsubscribe):
                self._pattern, self._pattern_topics = None, frozenset()
                self.submit(change)
                continue
            if change.pattern is not None:
                self._pattern = re.compile(change.pattern)
                self._pattern_topics = frozenset()
                # Matching nothing (yet) means subscribed to nothing: the member
                # is not in the group until a matching topic appears.
                self._pattern_topics = await self._resolve_pattern()
                self.submit(SubscriptionChanged(self._pattern_topics, None))
                continue
            self._pattern, self._pattern_topics = None, frozenset()
            self.submit(change)

    async def _resolve_pattern(self) -> frozenset[str]:
        assert self._client is not None
        assert self._pattern is not None
        try:
            cluster = await self._client.metadata(None, timeout=self._request_timeout)
        except KgroupError as exc:
            log.info("group %s: topic list for the regex failed: %s", self.group_id, exc)
            return self._pattern_topics
        pattern = self._pattern
        return frozenset(
            t for t, info in cluster.topics.items() if not info.is_internal and pattern.fullmatch(t)
        )

    async def _watch_metadata(self) -> None:
        while True:
            await anyio.sleep(self._metadata_interval)
            if self._pattern is not None:
                topics = await self._resolve_pattern()
                if topics and topics != self._pattern_topics:
                    log.info(
                        "group %s: regex %s now matches %s",
                        self.group_id,
                        self._pattern.pattern,
                        sorted(topics),
                    )
                    self._pattern_topics = topics
                    self.submit(SubscriptionChanged(topics, None))
            watched = self._watched_counts
            if watched is None or not self.classic.is_leader:
                continue
            try:
                counts = await self._partition_counts(watched)
            except KgroupError as exc:
                log.info("group %s: metadata refresh failed: %s", self.group_id, exc)
                continue
            if counts != watched and self._watched_counts is watched:
                log.info(
                    "group %s: partition counts of subscribed topics changed %s -> %s; rejoining",
                    self.group_id,
                    watched,
                    counts,
                )
                self._watched_counts = counts
                self.submit(SubscribedMetadataChanged())

    async def _partition_counts(self, topics: Mapping[str, int]) -> dict[str, int]:
        assert self._client is not None
        cluster = await self._client.metadata(sorted(topics), timeout=self._request_timeout)
        return {
            t: (cluster.topics[t].partition_count if t in cluster.topics else 0) for t in topics
        }

    # ------------------------------------------------------------------ actions

    def _perform(self, action: Any) -> None:
        match action:
            case SendJoinGroup():
                self._spawn(self._join_group, action)
            case SendSyncGroup():
                self._spawn(self._sync_group, action)
            case SendClassicHeartbeat():
                self._spawn(self._classic_heartbeat, action)
            case SendLeaveGroup():
                self._spawn(self._leave_group, action)
            case RunAssignor():
                self._spawn(self._run_assignor, action)
            case ClassicAssignorOnAssignment():
                self._assignor_on_assignment(action)
            case ReportAssignorError():
                # The typed error the runtime built (InvalidAssignmentError ...),
                # or one from the member's message.
                error = self._assignor_error or AssignorError(action.protocol_name, action.message)
                log.error("group %s: %s", self.group_id, error)
                self._set_fatal(error)
            case CommitOffsets() if action.offsets:
                self._commit_explicit(action)
            case _:
                super()._perform(action)

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
                    self.group_id,
                    action.generation_id,
                    self.classic.member_id,
                    self.config.group_instance_id,
                ),
            )
        except Exception as exc:
            log.exception("group %s: %s.on_assignment failed", self.group_id, action.protocol_name)
            self._set_fatal(AssignorError(action.protocol_name, f"on_assignment raised {exc!r}"))

    # ------------------------------------------------------------ group requests

    async def _coordinator_call(
        self,
        build: RequestBuilder,
        narrow: Callable[[ResponsePayload], _Response],
        timeout: float,
    ) -> tuple[_Response | None, BrokerError | None, FailureKind | None, str]:
        """Send a group request to the coordinator: (response, lookup error, failure, detail).

        ``narrow`` checks the response's type (a mismatch is a DISCONNECTED failure).
        """
        assert self._client is not None
        client = self._client
        try:
            address = await client.coordinator(self.group_id)
            conn = await client.connection(address.node_id)
            response = narrow(await conn.request(build(conn.versions), timeout=timeout))
        except BrokerError as exc:
            return None, exc, None, str(exc)
        except UnsupportedVersionError as exc:
            return None, None, FailureKind.UNSUPPORTED_VERSION, str(exc)
        except RequestTimeoutError as exc:
            return None, None, FailureKind.TIMEOUT, str(exc)
        except KafkaConnectionError as exc:
            client.mark_coordinator_stale(self.group_id)
            return None, None, FailureKind.DISCONNECTED, str(exc)
        except (TransportError, KafkaProtocolError) as exc:
            return None, None, FailureKind.DISCONNECTED, str(exc)
        return response, None, None, ""

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
                    "group %s: %s.subscription_user_data failed", self.group_id, proto.name
                )
                self._set_fatal(AssignorError(proto.name, f"subscription_user_data raised {exc!r}"))
                return
            protocols.append(JoinProtocol(proto.name, _with_user_data(sub, user_data)))
        request = dataclasses.replace(request, protocols=tuple(protocols))

        # The broker holds a JoinGroup until every member rejoined (at most the
        # rebalance timeout), so the wait is longer than a plain request's.
        timeout = request.rebalance_timeout_ms / 1000 + self._request_timeout
        response, error, failure, detail = await self._coordinator_call(
            lambda versions: join_group.build(versions, request), join_group.narrow, timeout
        )
        event: ClassicEvent
        if error is not None:
            event = JoinGroupResponseReceived(
                action.seq, JoinGroupResponse(error_code=error.code, error_message=error.message)
            )
        elif failure is not None:
            event = RequestFailed(action.seq, failure, detail)
        else:
            assert response is not None  # neither a lookup error nor a failure
            self._group_response_ok(int(response.error_code))
            try:
                event = JoinGroupResponseReceived(action.seq, join_group.parse(response))
            except KgroupError as exc:
                event = RequestFailed(action.seq, FailureKind.DISCONNECTED, str(exc))
                log.error("group %s: undecodable JoinGroup response: %s", self.group_id, exc)
        self.submit(event)

    async def _sync_group(self, action: SendSyncGroup) -> None:
        request = action.request
        # The broker holds a follower's SyncGroup until the leader's arrives.
        timeout = self.config.max_poll_interval_ms / 1000 + self._request_timeout
        response, error, failure, detail = await self._coordinator_call(
            lambda versions: sync_group.build(versions, request), sync_group.narrow, timeout
        )
        event: ClassicEvent
        if error is not None:
            event = SyncGroupResponseReceived(
                action.seq, SyncGroupResponse(error_code=error.code, error_message=error.message)
            )
        elif failure is not None:
            event = RequestFailed(action.seq, failure, detail)
        else:
            assert response is not None  # neither a lookup error nor a failure
            self._group_response_ok(int(response.error_code))
            try:
                parsed = sync_group.parse(response)
            except KgroupError as exc:
                log.error("group %s: undecodable assignment: %s", self.group_id, exc)
                self._set_fatal(exc)
                return
            event = SyncGroupResponseReceived(action.seq, parsed)
        self.submit(event)

    async def _classic_heartbeat(self, action: SendClassicHeartbeat) -> None:
        response, error, failure, detail = await self._coordinator_call(
            lambda versions: heartbeat.build(
                versions,
                group_id=action.group_id,
                generation_id=action.generation_id,
                member_id=action.member_id,
                instance_id=action.instance_id,
            ),
            heartbeat.narrow,
            self._request_timeout,
        )
        event: ClassicEvent
        if error is not None:
            event = ClassicHeartbeatResponseReceived(action.seq, error.code)
        elif failure is not None:
            event = RequestFailed(action.seq, failure, detail)
        else:
            assert response is not None  # neither a lookup error nor a failure
            code = heartbeat.parse(response)
            self._group_response_ok(code)
            event = ClassicHeartbeatResponseReceived(action.seq, code)
        self.submit(event)

    async def _leave_group(self, action: SendLeaveGroup) -> None:
        response, error, failure, detail = await self._coordinator_call(
            lambda versions: leave_group.build(
                versions,
                group_id=action.group_id,
                member_id=action.member_id,
                instance_id=action.instance_id,
                reason=action.reason,
            ),
            leave_group.narrow,
            self._request_timeout,
        )
        event: ClassicEvent
        if error is not None:
            event = LeaveGroupResponseReceived(action.seq, error.code)
        elif failure is not None:
            event = RequestFailed(action.seq, failure, detail)
        else:
            assert response is not None  # neither a lookup error nor a failure
            event = LeaveGroupResponseReceived(action.seq, leave_group.parse(response))
        self.submit(event)

    async def _rediscover(self) -> None:
        # A coordinator still loading the group's offsets partition answers
        # NOT_COORDINATOR while FindCoordinator keeps naming it; without a
        # pause that is a hot JoinGroup loop. The first lookup is immediate,
        # repeated ones (no successful group response in between) back off.
        attempt = self._rediscoveries
        self._rediscoveries += 1
        if attempt:
            await anyio.sleep(self._backoff.delay(attempt - 1))
        await super()._rediscover()

    def _group_response_ok(self, code: int) -> None:
        if code == 0:
            self._rediscoveries = 0

    # ----------------------------------------------------------------- leading

    async def _run_assignor(self, action: RunAssignor) -> None:
        assert self._client is not None
        name = action.protocol_name
        assignor = self.assignors[name]
        subscriptions = GroupSubscription(
            {
                m.member_id: Subscription(
                    topics=tuple(sorted(m.subscription.topics)),
                    user_data=m.subscription.user_data,
                    owned_partitions=tuple(sorted(m.subscription.owned_partitions)),
                    generation_id=(
                        m.subscription.generation_id if m.subscription.generation_id >= 0 else None
                    ),
                    rack_id=m.subscription.rack_id,
                    group_instance_id=m.instance_id,
                )
                for m in action.members
            }
        )
        topics = sorted({t for m in action.members for t in m.subscription.topics})
        cooperative = AssignorProtocol.COOPERATIVE in assignor.supported_protocols
        protocol = AssignorProtocol.COOPERATIVE if cooperative else AssignorProtocol.EAGER
        try:
            cluster = _cluster(await self._leader_metadata(topics), topics)
            result = await anyio.to_thread.run_sync(assignor.assign, cluster, subscriptions)
            if not isinstance(result, GroupAssignment):
                raise AssignorError(
                    name, f"assign returned {type(result).__name__}, not a GroupAssignment"
                )
            validate_assignment(name, cluster, subscriptions, result, protocol)
        except AssignorError as exc:
            self._assignor_error = exc
            self.submit(AssignorFailed(action.generation_id, str(exc)))
            return
        except KgroupError as exc:
            # No metadata within the rebalance timeout (by then the coordinator
            # has given up on this generation): the leader cannot assign.
            error = AssignorError(name, f"cluster metadata unavailable: {exc}")
            self._assignor_error = error
            self.submit(AssignorFailed(action.generation_id, str(error)))
            return
        except Exception as exc:
            error = AssignorError(name, f"assign raised {exc!r}")
            error.__cause__ = exc
            self._assignor_error = error
            self.submit(AssignorFailed(action.generation_id, str(error)))
            return
        self._watched_counts = {t: cluster.partitions_for(t) or 0 for t in topics}
        assignments = {
            m.member_id: MemberAssignment(
                frozenset(result.partitions(m.member_id)),
                result.assignments[m.member_id].user_data
                if m.member_id in result.assignments
                else None,
            )
            for m in action.members
        }
        log.info(
            "group %s generation %d: assignor %s assigned %s",
            self.group_id,
            action.generation_id,
            name,
            "; ".join(
                f"{m}: {len(a.partitions)} partitions" for m, a in sorted(assignments.items())
            ),
        )
        self.submit(AssignmentComputed(action.generation_id, assignments))

    async def _leader_metadata(self, topics: list[str]) -> ClusterMetadata:
        """Metadata of ``topics``, retried with backoff within the rebalance timeout."""
        assert self._client is not None
        deadline = anyio.current_time() + self.config.max_poll_interval_ms / 1000
        attempt = 0
        while True:
            try:
                return await self._client.metadata(topics, timeout=self._request_timeout)
            except KgroupError as exc:
                if anyio.current_time() >= deadline:
                    raise
                log.info("group %s: leader's metadata request failed: %s", self.group_id, exc)
            await anyio.sleep(self._backoff.delay(attempt))
            attempt += 1

    # ----------------------------------------------------------------- commits

    def _commit_explicit(self, action: CommitOffsets) -> None:
        # A commit the member retries after a rebalance: its own offsets first.
        assert action.offsets is not None
        offsets = {tp: o for tp, o in action.offsets.items() if tp in action.partitions}
        rest = action.partitions - offsets.keys()
        offsets.update(
            {tp: self._stopped_positions[tp] for tp in rest if tp in self._stopped_positions}
        )
        offsets.update(
            {tp: o for tp, o in self.dataplane.positions(rest).items() if tp not in offsets}
        )
        if not offsets:
            self.submit(CommitCompleted(action.token))
            return
        self._spawn(self._revocation_commit, action.token, _PendingCommit(offsets, action.deadline))

    async def _revocation_commit(self, token: int, pending: _PendingCommit) -> None:
        assert self._offsets is not None
        generation = self.classic.generation_id
        try:
            await self._offsets.commit(pending.offsets, deadline=pending.deadline)
        except BrokerError as exc:
            self.submit(
                CommitFailed(
                    token, frozenset(pending.offsets), exc.code, generation, dict(pending.offsets)
                )
            )
            return
        except KgroupError as exc:
            self.submit(CommitCompleted(token, exc))
            return
        self.submit(CommitCompleted(token))


# ---------------------------------------------------------------------- helpers


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


async def choose_group_protocol(
    config: ConsumerConfig, *, timeout: float | None = None
) -> GroupProtocol:
    """The protocol ``group.protocol=auto`` uses with this cluster: CONSUMER or CLASSIC.

    CONSUMER when the group's coordinator advertises ConsumerGroupHeartbeat and
    accepts the new protocol: a ConsumerGroupDescribe of the group (which has
    no side effect) is not refused with UNSUPPORTED_VERSION, which is what a
    broker answers when the new protocol is disabled
    (``group.coordinator.rebalance.protocols`` without ``consumer``, or
    ``group.version`` 0). Otherwise CLASSIC, with a warning. If the cluster
    cannot be reached within ``timeout`` (default ``request.timeout.ms``), the
    new protocol is assumed; the runtime then reports the connection problem.
    """
    budget = config.request_timeout_ms / 1000 if timeout is None else timeout
    reason: str | None = None
    with anyio.move_on_after(budget) as scope:
        try:
            async with KafkaClient(
                config.bootstrap_servers,
                client_id=config.client_id,
                request_timeout=budget,
                connect_timeout=_connect_timeout(config),
                backoff=Backoff.from_ms(config.retry_backoff_ms, config.retry_backoff_max_ms),
            ) as client:
                address = await client.coordinator(config.group_id)
                conn = await client.connection(address.node_id)
                versions = conn.versions
                if not versions.supports(ApiKey.CONSUMER_GROUP_HEARTBEAT):
                    reason = "the group coordinator does not support ConsumerGroupHeartbeat"
                elif versions.supports(ApiKey.CONSUMER_GROUP_DESCRIBE):
                    response = await conn.request(
                        consumer_group_describe.build(versions, (config.group_id,))
                    )
                    described = consumer_group_describe.narrow(response)
                    codes = set(consumer_group_describe.parse(described).values())
                    if ErrorCode.unsupported_version in codes:
                        reason = "the group coordinator has the new consumer protocol disabled"
        except KgroupError as exc:
            log.warning(
                "group %s: group.protocol=auto could not ask the cluster (%s); "
                "using the new consumer protocol",
                config.group_id,
                exc,
            )
            return GroupProtocol.CONSUMER
    if scope.cancelled_caught:
        log.warning(
            "group %s: group.protocol=auto got no answer within %.1f s; "
            "using the new consumer protocol",
            config.group_id,
            budget,
        )
        return GroupProtocol.CONSUMER
    if reason is not None:
        log.warning(
            "group %s: group.protocol=auto falls back to the classic protocol: %s",
            config.group_id,
            reason,
        )
        return GroupProtocol.CLASSIC
    log.info("group %s: group.protocol=auto uses the new consumer protocol", config.group_id)
    return GroupProtocol.CONSUMER


def runtime_class(protocol: GroupProtocol) -> type[Runtime]:
    """The runtime class of a resolved protocol (CONSUMER or CLASSIC)."""
    if protocol is GroupProtocol.CLASSIC:
        return ClassicRuntime
    if protocol is GroupProtocol.CONSUMER:
        return Runtime
    raise ValueError(f"resolve group.protocol={protocol.value} first")
