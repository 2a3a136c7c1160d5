"""How the fake cluster answers the share-group APIs, in the request's version.

ShareGroupHeartbeat and ShareGroupDescribe go to the group's coordinator and
are answered from :mod:`._share_group`; ShareFetch and ShareAcknowledge go to
partition leaders and are answered from :mod:`._share_data`;
IncrementalAlterConfigs sets a share group's configs on the ``GROUP``
resource, with the bounds a real broker puts on them.

A ShareFetch applies the acknowledgements it carries first, then answers at
once when records are there to acquire (at least ``min_bytes`` of them) and
otherwise waits up to ``max_wait`` for some (produced, released, or freed by
a lock timeout), checking on the broker's sweep period. A renewing fetch
(``is_renew_ack``, v2) acquires nothing and answers at once, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from kio.schema.errors import ErrorCode

from kgroup.protocol import response_module
from kgroup.testing.fake._kio import SeenRequest, make, millis, respond, timedelta_ms
from kgroup.testing.fake._share_data import (
    AUTO_OFFSET_RESET,
    DELIVERY_COUNT_LIMIT,
    GROUP_CONFIG_KEYS,
    LOCK_DURATION,
    AckBatch,
    ShareData,
    encode_batch,
    runs,
    valid_reset,
)
from kgroup.testing.fake._share_group import (
    ShareGroup,
    ShareHeartbeatOutcome,
    validate_heartbeat,
)
from kgroup.types import TopicIdPartition, TopicPartition

if TYPE_CHECKING:
    from kgroup.testing.fake._cluster import Cluster

__all__ = ["ShareApis"]

_GROUP_RESOURCE = 32  # ConfigResource.Type.GROUP
_SET, _DELETE = 0, 1
_INT_BOUNDS = {
    DELIVERY_COUNT_LIMIT: (2, 10),
    "share.session.timeout.ms": (1, 2**31 - 1),
    "share.heartbeat.interval.ms": (1, 2**31 - 1),
    "consumer.session.timeout.ms": (1, 2**31 - 1),
    "consumer.heartbeat.interval.ms": (1, 2**31 - 1),
}


@dataclass(eq=False)
class _Answer:
    """What one partition of a ShareFetch / ShareAcknowledge response carries."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    ack_error: ErrorCode = ErrorCode.none
    ack_message: str | None = None
    acquired: list[tuple[int, int]] = field(default_factory=list)


class ShareApis:
    """The share-group APIs of one fake :class:`~kgroup.testing.fake._cluster.Cluster`."""

    def __init__(
        self,
        cluster: Cluster,
        data: ShareData,
        *,
        poll_interval: float,
        now: Callable[[], float],
        min_lock_ms: int = 15_000,
        max_lock_ms: int = 60_000,
    ) -> None:
        self._cluster = cluster
        self.data = data
        self.groups: dict[str, ShareGroup] = {}
        self.poll_interval = poll_interval
        self._now = now
        self.min_lock_ms = min_lock_ms
        self.max_lock_ms = max_lock_ms

    # ------------------------------------------------------------- membership

    def group(self, group_id: str) -> ShareGroup:
        """``group_id``'s share group, made if new. Caller holds the lock."""
        found = self.groups.get(group_id)
        if found is None:
            cluster = self._cluster
            found = self.groups[group_id] = ShareGroup(
                group_id,
                heartbeat_interval_ms=cluster.heartbeat_interval_ms,
                session_timeout_ms=cluster.session_timeout_ms,
                topics=cluster.topics,
                lock=cluster.lock,
                on_member_gone=self.data.member_gone,
            )
        return found

    def heartbeat(self, seen: SeenRequest) -> Any:
        request = seen.request
        m = response_module(seen.api_key, seen.version)
        cluster = self._cluster
        with cluster.lock:
            other = request.group_id in cluster.consumer_groups or (
                request.group_id in cluster.classic_groups
                and cluster.classic_groups[request.group_id].members
            )
            if other and request.group_id not in self.groups:
                return self._heartbeat_error(
                    m,
                    request,
                    ErrorCode.group_id_not_found,
                    f"Group {request.group_id} is not a share group.",
                )
            refused = validate_heartbeat(
                request.member_id, int(request.member_epoch), request.subscribed_topic_names
            )
            if (
                refused is None
                and int(request.member_epoch) != 0
                and request.group_id not in self.groups
            ):
                refused = ShareHeartbeatOutcome(
                    ErrorCode.unknown_member_id, f"no share group {request.group_id}"
                )
            if refused is not None:
                return self._heartbeat_error(m, request, refused.error_code, refused.error_message)
            outcome = self.group(request.group_id).heartbeat(
                member_id=request.member_id,
                member_epoch=int(request.member_epoch),
                rack_id=request.rack_id,
                subscribed=request.subscribed_topic_names,
                client_id=seen.client_id or "",
                now=self._now(),
            )
        cluster.on_change()
        if outcome.error_code != ErrorCode.none:
            return self._heartbeat_error(m, request, outcome.error_code, outcome.error_message)
        assignment = None
        if outcome.assignment is not None:
            assignment = m.Assignment(topic_partitions=_by_topic(m, outcome.assignment, None))
        return respond(
            m,
            "ShareGroupHeartbeatResponse",
            error_code=ErrorCode.none,
            error_message=None,
            member_id=request.member_id,
            member_epoch=outcome.member_epoch,
            heartbeat_interval=timedelta_ms(cluster.heartbeat_interval_ms),
            assignment=assignment,
        )

    def _heartbeat_error(self, m: Any, request: Any, code: ErrorCode, message: str | None) -> Any:
        return respond(
            m,
            "ShareGroupHeartbeatResponse",
            error_code=code,
            error_message=message,
            member_id=request.member_id or None,
            member_epoch=-1,
            heartbeat_interval=timedelta_ms(0),
            assignment=None,
        )

    def describe(self, seen: SeenRequest) -> Any:
        m = response_module(seen.api_key, seen.version)
        cluster = self._cluster
        groups = []
        with cluster.lock:
            for group_id in seen.request.group_ids:
                error: ErrorCode | None = None
                message = None
                if cluster.coordinator(group_id) != seen.node_id:
                    error = ErrorCode.not_coordinator
                elif group_id not in self.groups:
                    error = ErrorCode.group_id_not_found
                    if group_id in cluster.consumer_groups or group_id in cluster.classic_groups:
                        message = f"Group {group_id} is not a share group."
                if error is not None:
                    groups.append(described_share_error(m, group_id, error, message))
                    continue
                group = self.groups[group_id]
                names = cluster.topics.by_id
                members = tuple(
                    make(
                        m,
                        "Member",
                        member_id=member.member_id,
                        rack_id=member.rack_id,
                        member_epoch=member.epoch,
                        client_id=member.client_id,
                        client_host="/127.0.0.1",
                        subscribed_topic_names=member.subscribed_names,
                        assignment=m.Assignment(
                            topic_partitions=_by_topic(
                                m,
                                member.assigned,
                                {i: t.name for i, t in names.items()},
                            )
                        ),
                    )
                    for member in group.members.values()
                )
                groups.append(
                    make(
                        m,
                        "DescribedGroup",
                        error_code=ErrorCode.none,
                        error_message=None,
                        group_id=group_id,
                        group_state=group.state,
                        group_epoch=group.epoch,
                        assignment_epoch=group.epoch,
                        assignor_name="simple",
                        members=members,
                        authorized_operations=-(2**31),
                    )
                )
        return respond(m, "ShareGroupDescribeResponse", groups=tuple(groups))

    # ------------------------------------------------------------------ data

    def _partition_error(
        self, tip: TopicIdPartition, node: int
    ) -> tuple[ErrorCode, str | None, TopicPartition | None]:
        """Why ``tip`` cannot be served by ``node`` (or none), and its name."""
        named = self._cluster.topics.name_of(tip)
        if named is None:
            return ErrorCode.unknown_topic_id, f"unknown topic id {tip.topic_id}", None
        topic = self._cluster.topics.by_name[named.topic]
        if not 0 <= tip.partition < topic.partitions:
            return ErrorCode.unknown_topic_or_partition, f"no partition {named}", None
        if self._cluster.leader(tip.partition) != node:
            return ErrorCode.not_leader_or_follower, f"node {node} does not lead {named}", named
        return ErrorCode.none, None, named

    def _acknowledge(
        self,
        *,
        group_id: str,
        member_id: str,
        node: int,
        acks: dict[TopicIdPartition, list[AckBatch]],
        renew: bool,
        answers: dict[TopicIdPartition, _Answer],
    ) -> None:
        # Caller holds the lock.
        for tip, batches in acks.items():
            answer = answers.setdefault(tip, _Answer())
            code, message, named = self._partition_error(tip, node)
            if code == ErrorCode.none and named is not None:
                code, message = self.data.acknowledge(
                    group_id, member_id, named, batches, renew_allowed=renew, now=self._now()
                )
            answer.ack_error, answer.ack_message = code, message

    async def fetch(self, seen: SeenRequest) -> Any:
        request = seen.request
        m = response_module(seen.api_key, seen.version)
        node = seen.node_id
        group_id, member_id = request.group_id or "", request.member_id or ""
        epoch = int(request.share_session_epoch)
        named: list[TopicIdPartition] = []
        acks: dict[TopicIdPartition, list[AckBatch]] = {}
        for topic in request.topics:
            for part in topic.partitions:
                tip = TopicIdPartition(topic.topic_id, int(part.partition_index))
                named.append(tip)
                if part.acknowledgement_batches:
                    acks[tip] = _batches(part.acknowledgement_batches)
        forgotten = [
            TopicIdPartition(t.topic_id, int(p))
            for t in request.forgotten_topics_data
            for p in t.partitions
        ]
        renew = bool(getattr(request, "is_renew_ack", False))
        key = (node, group_id, member_id)
        answers: dict[TopicIdPartition, _Answer] = {}
        cluster = self._cluster
        with cluster.lock:
            lock_ms = self.data.config(group_id).record_lock_duration_ms
            if not group_id or not member_id:
                return self._fetch_response(m, ErrorCode.invalid_request, "no group or member")
            code, message, session = self.data.fetch_session(
                key,
                epoch,
                named=named,
                forgotten=forgotten,
                has_acks=bool(acks),
                fetches=any(t not in acks for t in named),
                connection_id=seen.connection_id,
            )
            if code != ErrorCode.none or session is None:
                return self._fetch_response(m, code, message, lock_ms=lock_ms)
            self._acknowledge(
                group_id=group_id,
                member_id=member_id,
                node=node,
                acks=acks,
                renew=renew,
                answers=answers,
            )
            if epoch == -1:
                self.data.close_session(key)
            opening = epoch == 0
            if opening:
                for tip in session.partitions:
                    answers.setdefault(tip, _Answer())
        cluster.on_change()
        if epoch != -1 and not renew:
            await self._acquire(seen, session, key, answers)
        return self._fetch_response(m, ErrorCode.none, None, lock_ms=lock_ms, answers=answers)

    async def _acquire(
        self, seen: SeenRequest, session: Any, key: tuple[int, str, str], answers: Any
    ) -> None:
        request = seen.request
        max_wait = millis(request.max_wait) / 1000
        min_bytes = max(1, int(request.min_bytes))
        max_bytes = int(getattr(request, "max_bytes", 2**31 - 1))
        max_records = int(request.max_records)
        deadline = self._now() + max_wait
        cluster = self._cluster
        while True:
            with cluster.lock:
                current = self.data.sessions.get(key)
                if current is None or current is not session:
                    return  # closed while waiting: nothing is acquired for it
                fetchable: list[tuple[TopicIdPartition, TopicPartition]] = []
                for tip in sorted(current.partitions):
                    code, message, named = self._partition_error(tip, seen.node_id)
                    if code != ErrorCode.none or named is None:
                        answer = answers.setdefault(tip, _Answer())
                        answer.error, answer.message = code, message
                    else:
                        fetchable.append((tip, named))
                if fetchable:
                    # Partitions take turns at the front, as the broker rotates them.
                    turn = current.epoch % len(fetchable)
                    fetchable = fetchable[turn:] + fetchable[:turn]
                now = self._now()
                ready = (
                    self.data.available_bytes(key[1], [n for _, n in fetchable], now, min_bytes)
                    >= min_bytes
                )
                if ready or now >= deadline:
                    got = self.data.acquire(
                        key[1],
                        key[2],
                        fetchable,
                        max_records=max_records,
                        max_bytes=max_bytes,
                        now=now,
                    )
                    for tip, acquired in got.items():
                        answers.setdefault(tip, _Answer()).acquired = acquired
                    break
            # The broker's own wait for data, on its sweep period (not test synchronisation).
            await anyio.sleep(min(self.poll_interval, max(0.0, deadline - now)))
        if got:
            cluster.on_change()

    def _fetch_response(
        self,
        m: Any,
        code: ErrorCode,
        message: str | None,
        *,
        lock_ms: int = 0,
        answers: dict[TopicIdPartition, _Answer] | None = None,
    ) -> Any:
        cluster = self._cluster
        by_topic: dict[Any, list[Any]] = {}
        endpoints: dict[int, Any] = {}
        with cluster.lock:
            for tip, answer in sorted((answers or {}).items()):
                named = cluster.topics.name_of(tip)
                leader = _leader(m, -1, -1)
                if answer.error == ErrorCode.not_leader_or_follower and named is not None:
                    leader_id = cluster.leader(tip.partition)
                    leader = _leader(m, leader_id, cluster.leader_epoch(named))
                    endpoints[leader_id] = self._endpoint(m, leader_id)
                records = b""
                ranges = runs(answer.acquired)
                if ranges and named is not None:
                    epoch = cluster.leader_epoch(named)
                    records = b"".join(
                        encode_batch(self.data.records.read(named, first, last + 1), epoch)
                        for first, last, _count in ranges
                    )
                by_topic.setdefault(tip.topic_id, []).append(
                    make(
                        m,
                        "PartitionData",
                        partition_index=tip.partition,
                        error_code=answer.error,
                        error_message=answer.message,
                        acknowledge_error_code=int(answer.ack_error),
                        acknowledge_error_message=answer.ack_message,
                        current_leader=leader,
                        records=records,
                        acquired_records=tuple(
                            m.AcquiredRecords(
                                first_offset=first, last_offset=last, delivery_count=count
                            )
                            for first, last, count in ranges
                        ),
                    )
                )
        return respond(
            m,
            "ShareFetchResponse",
            error_code=code,
            error_message=message,
            acquisition_lock_timeout=timedelta_ms(lock_ms),
            responses=tuple(
                m.ShareFetchableTopicResponse(topic_id=topic_id, partitions=tuple(parts))
                for topic_id, parts in by_topic.items()
            ),
            node_endpoints=tuple(endpoints.values()),
        )

    def _endpoint(self, m: Any, node_id: int) -> Any:
        port = self._cluster.node(node_id).port
        return m.NodeEndpoint(node_id=node_id, host="127.0.0.1", port=port, rack=None)

    def acknowledge(self, seen: SeenRequest) -> Any:
        request = seen.request
        m = response_module(seen.api_key, seen.version)
        node = seen.node_id
        group_id, member_id = request.group_id or "", request.member_id or ""
        epoch = int(request.share_session_epoch)
        acks: dict[TopicIdPartition, list[AckBatch]] = {}
        for topic in request.topics:
            for part in topic.partitions:
                tip = TopicIdPartition(topic.topic_id, int(part.partition_index))
                acks[tip] = _batches(part.acknowledgement_batches)
        renew = bool(getattr(request, "is_renew_ack", False))
        key = (node, group_id, member_id)
        answers: dict[TopicIdPartition, _Answer] = {}
        cluster = self._cluster
        with cluster.lock:
            lock_ms = self.data.config(group_id).record_lock_duration_ms
            code, message, _session = self.data.acknowledge_session(key, epoch)
            if code == ErrorCode.none:
                self._acknowledge(
                    group_id=group_id,
                    member_id=member_id,
                    node=node,
                    acks=acks,
                    renew=renew,
                    answers=answers,
                )
                if epoch == -1:
                    self.data.close_session(key)
            by_topic: dict[Any, list[Any]] = {}
            endpoints: dict[int, Any] = {}
            for tip, answer in sorted(answers.items()):
                leader = _leader(m, -1, -1)
                named = cluster.topics.name_of(tip)
                if answer.ack_error == ErrorCode.not_leader_or_follower and named is not None:
                    leader_id = cluster.leader(tip.partition)
                    leader = _leader(m, leader_id, cluster.leader_epoch(named))
                    endpoints[leader_id] = self._endpoint(m, leader_id)
                by_topic.setdefault(tip.topic_id, []).append(
                    make(
                        m,
                        "PartitionData",
                        partition_index=tip.partition,
                        error_code=answer.ack_error,
                        error_message=answer.ack_message,
                        current_leader=leader,
                    )
                )
        cluster.on_change()
        return respond(
            m,
            "ShareAcknowledgeResponse",
            error_code=code,
            error_message=message,
            acquisition_lock_timeout=timedelta_ms(lock_ms),
            responses=tuple(
                m.ShareAcknowledgeTopicResponse(topic_id=topic_id, partitions=tuple(parts))
                for topic_id, parts in by_topic.items()
            ),
            node_endpoints=tuple(endpoints.values()),
        )

    # ---------------------------------------------------------------- configs

    def alter_configs(self, seen: SeenRequest) -> Any:
        request = seen.request
        m = response_module(seen.api_key, seen.version)
        results = []
        with self._cluster.lock:
            for resource in request.resources:
                code, message = self._alter(resource, bool(request.validate_only))
                results.append(
                    m.AlterConfigsResourceResponse(
                        error_code=code,
                        error_message=message,
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                    )
                )
        return respond(m, "IncrementalAlterConfigsResponse", responses=tuple(results))

    def _alter(self, resource: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
        # Caller holds the lock.
        if int(resource.resource_type) != _GROUP_RESOURCE:
            return (
                ErrorCode.invalid_request,
                "the fake broker alters GROUP configs only (share groups)",
            )
        changes: dict[str, str | None] = {}
        for config in resource.configs:
            name, op, value = config.name, int(config.config_operation), config.value
            if name not in GROUP_CONFIG_KEYS:
                return ErrorCode.invalid_config, f"Unknown group config name: {name}"
            if op == _DELETE:
                changes[name] = None
                continue
            if op != _SET or value is None:
                return ErrorCode.invalid_request, f"{name}: only SET and DELETE apply"
            problem = self._refused(name, value)
            if problem is not None:
                return ErrorCode.invalid_config, problem
            changes[name] = value
        if not validate_only:
            stored = self.data.configs.setdefault(resource.resource_name, {})
            for name, change in changes.items():
                if change is None:
                    stored.pop(name, None)
                else:
                    stored[name] = change
        return ErrorCode.none, None

    def _refused(self, name: str, value: str) -> str | None:
        if name == AUTO_OFFSET_RESET:
            return None if valid_reset(value) else f"Invalid value {value} for {name}"
        if name == "share.isolation.level":
            ok = value in ("read_committed", "read_uncommitted")
            return None if ok else f"Invalid value {value} for {name}"
        bounds = (
            (self.min_lock_ms, self.max_lock_ms) if name == LOCK_DURATION else _INT_BOUNDS[name]
        )
        try:
            number = int(value)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type INT"
        if not bounds[0] <= number <= bounds[1]:
            return (
                f"Invalid value {number} for configuration {name}: "
                f"must be between {bounds[0]} and {bounds[1]}"
            )
        return None


def _batches(batches: Sequence[Any]) -> list[AckBatch]:
    return [
        AckBatch(
            int(b.first_offset), int(b.last_offset), tuple(int(t) for t in b.acknowledge_types)
        )
        for b in batches
    ]


def _leader(m: Any, leader_id: int, epoch: int) -> Any:
    return m.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch)


def _by_topic(
    m: Any, partitions: frozenset[TopicIdPartition], names: dict[Any, str] | None
) -> tuple[Any, ...]:
    grouped: dict[Any, list[int]] = {}
    for tip in sorted(partitions):
        grouped.setdefault(tip.topic_id, []).append(tip.partition)
    out = []
    for topic_id, parts in grouped.items():
        # ShareGroupDescribe names each topic ("" once deleted); the heartbeat does not.
        extra = {} if names is None else {"topic_name": names.get(topic_id, "")}
        out.append(m.TopicPartitions(topic_id=topic_id, partitions=tuple(parts), **extra))
    return tuple(out)


def described_share_error(m: Any, group_id: str, code: ErrorCode, message: str | None) -> Any:
    """A ShareGroupDescribe group entry carrying only an error."""
    return make(
        m,
        "DescribedGroup",
        error_code=code,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=-1,
        assignment_epoch=-1,
        assignor_name="",
        members=(),
        authorized_operations=-(2**31),
    )
