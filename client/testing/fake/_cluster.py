"""The fake cluster's state and how it answers each API, in the request's version.

:class:`Cluster` holds the topics, the groups of both protocols (models in
:mod:`._consumer_group` and :mod:`._classic_group`), committed offsets and the
coordinator of each group, and translates kio requests into model calls and
model outcomes into kio responses. :class:`~kgroup.testing.fake.FakeBroker`
owns one, serves it over TCP and puts the test's interceptions in front of it.

Every model change happens under :attr:`Cluster.lock` (held briefly, never
across an await), so a test thread may read and change it too.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.abc
from kio.schema.errors import ErrorCode
from kio.static.constants import uuid_zero

from kgroup.errors import KafkaProtocolError, KgroupError
from kgroup.membership import (
    ClassicAssignment,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinProtocol,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kgroup.protocol import ApiKey, VersionRange, response_module
from kgroup.protocol.classic_payload import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kgroup.testing.fake._classic_group import ClassicGroup
from kgroup.testing.fake._consumer_group import ConsumerGroup
from kgroup.testing.fake._errors import described_error, error_response
from kgroup.testing.fake._kio import SeenRequest, make, millis, respond, timedelta_ms
from kgroup.testing.fake._share_data import ShareData
from kgroup.testing.fake._share_wire import ShareApis
from kgroup.testing.fake._topics import FakeTopic, Topics
from kgroup.testing.fake.dataplane import RecordLog
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = ["HOST", "Cluster", "Node", "now"]

_A = TypeVar("_A")

HOST = "127.0.0.1"
"""Where every node listens, and what the metadata advertises (the two must agree)."""
_CONSUMER_PROTOCOL_APIS = (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)
# OffsetCommit and OffsetFetch name their topics by id from this version on
# (KIP-848), by name before it.
_OFFSETS_BY_TOPIC_ID = 10


def now() -> float:
    """The model's clock: monotonic, so that a test thread and the broker's loop agree."""
    return time.monotonic()


@dataclass(slots=True)
class Node:
    """One node of the fake cluster: its id and, once listening, its port."""

    node_id: int
    port: int = 0
    listener: anyio.abc.Listener[Any] | None = None


class Cluster:
    """The state of a fake cluster and its answers to requests."""

    def __init__(
        self,
        *,
        nodes: int,
        versions: Mapping[ApiKey, VersionRange],
        heartbeat_interval_ms: int,
        session_timeout_ms: int,
        on_change: Callable[[], None],
        log_end: Callable[[TopicPartition], int] = lambda _tp: 0,
        records: RecordLog | None = None,
        share_record_lock_duration_ms: int = 30_000,
        share_delivery_count_limit: int = 5,
        poll_interval: float = 0.01,
    ) -> None:
        self.nodes = [Node(n) for n in range(nodes)]
        self.versions = dict(versions)
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.on_change = on_change
        self.log_end = log_end
        """The offset the next record of a partition gets (the record log's)."""
        self.lock = threading.RLock()
        self.topics = Topics()
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.classic_groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[TopicPartition, int]] = {}
        # The leader epoch committed with each offset (KIP-320; -1 if none), beside it.
        self.offset_epochs: dict[str, dict[TopicPartition, int]] = {}
        # The application's metadata committed with each offset ("" if none).
        self.offset_metadata: dict[str, dict[TopicPartition, str]] = {}
        self.coordinators: dict[str, int] = {}
        # Each partition's leader epochs and the offset each began at, oldest
        # first (the leader's epoch cache); a partition not here is at epoch 0 from 0.
        self.epoch_history: dict[TopicPartition, list[tuple[int, int]]] = {}
        self.consumer_protocol = True
        self.hide_consumer_protocol = False
        self.share = ShareApis(
            self,
            ShareData(
                topics=self.topics,
                records=records if records is not None else RecordLog(),
                record_lock_duration_ms=share_record_lock_duration_ms,
                delivery_count_limit=share_delivery_count_limit,
                now=now(),
            ),
            poll_interval=poll_interval,
            now=now,
        )
        """Share groups (KIP-932): their groups, share partitions, sessions and configs."""
        # Which method answers each API: any node answers the first table; the
        # group APIs only the group's coordinator, and JoinGroup / SyncGroup are
        # held until the group completes the round.
        self._anywhere: Mapping[int, Callable[[SeenRequest], Any]] = {
            ApiKey.API_VERSIONS: self._api_versions,
            ApiKey.METADATA: self._metadata,
            ApiKey.FIND_COORDINATOR: self._find_coordinator,
            ApiKey.CONSUMER_GROUP_DESCRIBE: self._consumer_group_describe,
            ApiKey.OFFSET_FETCH: self._offset_fetch,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self._offset_for_leader_epoch,
            ApiKey.SHARE_GROUP_DESCRIBE: self.share.describe,
            ApiKey.SHARE_ACKNOWLEDGE: self.share.acknowledge,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.share.alter_configs,
        }
        # Answered by any node, after a wait (a ShareFetch waits for records).
        self._anywhere_held: Mapping[int, Callable[[SeenRequest], Awaitable[Any]]] = {
            ApiKey.SHARE_FETCH: self.share.fetch,
        }
        self._at_coordinator: Mapping[int, Callable[[SeenRequest], Any]] = {
            ApiKey.CONSUMER_GROUP_HEARTBEAT: self._consumer_group_heartbeat,
            ApiKey.SHARE_GROUP_HEARTBEAT: self.share.heartbeat,
            ApiKey.HEARTBEAT: self._heartbeat,
            ApiKey.LEAVE_GROUP: self._leave_group,
            ApiKey.OFFSET_COMMIT: self._offset_commit,
        }
        self._held: Mapping[int, Callable[[SeenRequest], Awaitable[Any]]] = {
            ApiKey.JOIN_GROUP: self._join_group,
            ApiKey.SYNC_GROUP: self._sync_group,
        }

    def node(self, node: int) -> Node:
        """Node ``node``. Raises KgroupError if there is no such node."""
        if not 0 <= node < len(self.nodes):
            raise KgroupError(f"the fake cluster has nodes 0..{len(self.nodes) - 1}, not {node}")
        return self.nodes[node]

    def leader_epoch(self, partition: TopicPartition) -> int:
        """``partition``'s current leader epoch. Caller holds the lock."""
        history = self.epoch_history.get(partition)
        return history[-1][0] if history else 0

    def leader(self, partition: int) -> int:
        """The node leading partition number ``partition`` of every topic."""
        return partition % len(self.nodes)

    def coordinator(self, group_id: str) -> int:
        """The node coordinating ``group_id`` (node 0 unless moved)."""
        with self.lock:
            return self.coordinators.get(group_id, 0)

    def expire(self) -> list[tuple[str, str]]:
        """Run the coordinator's timers; the (group, member) pairs removed."""
        at = now()
        gone: list[tuple[str, str]] = []
        with self.lock:
            for consumer_group in self.consumer_groups.values():
                gone += [(consumer_group.group_id, m) for m in consumer_group.expire(at)]
            for classic_group in self.classic_groups.values():
                gone += [(classic_group.group_id, m) for m in classic_group.expire(at)]
            for share_group in self.share.groups.values():
                gone += [(share_group.group_id, m) for m in share_group.expire(at)]
        return gone

    def run_share_timers(self) -> bool:
        """Time out the acquisition locks due; whether any record was released."""
        with self.lock:
            return self.share.data.run_timers(now())

    def connection_closed(self, connection_id: int) -> None:
        """A client connection closed: the share sessions last used on it close."""
        with self.lock:
            self.share.data.connection_closed(connection_id)

    async def answer(self, seen: SeenRequest) -> Any:
        """The model's response to ``seen`` (held JoinGroup / SyncGroup wait here)."""
        api = seen.api_key
        anywhere = self._anywhere.get(api)
        if anywhere is not None:
            return anywhere(seen)
        anywhere_held = self._anywhere_held.get(api)
        if anywhere_held is not None:
            return await anywhere_held(seen)
        group_id: str = seen.request.group_id
        if self.coordinator(group_id) != seen.node_id:
            return error_response(seen, ErrorCode.not_coordinator)
        held = self._held.get(api)
        if held is not None:
            return await held(seen)
        handler = self._at_coordinator.get(api)
        if handler is None:
            raise KafkaProtocolError(f"the fake broker does not implement API key {api}")
        return handler(seen)

    def _module(self, seen: SeenRequest) -> Any:
        return response_module(seen.api_key, seen.version)

    def _api_versions(self, seen: SeenRequest) -> Any:
        ours = self.versions[ApiKey.API_VERSIONS]
        if seen.version not in ours:
            # KIP-511: answer in v0 with our range so the client can retry.
            m = response_module(ApiKey.API_VERSIONS, 0)
            entry = m.ApiVersion(
                api_key=ApiKey.API_VERSIONS, min_version=ours.min, max_version=ours.max
            )
            return m.ApiVersionsResponse(
                error_code=ErrorCode.unsupported_version, api_keys=(entry,)
            )
        m = self._module(seen)
        with self.lock:
            hidden = _CONSUMER_PROTOCOL_APIS if self.hide_consumer_protocol else ()
        entries = tuple(
            m.ApiVersion(api_key=int(api), min_version=r.min, max_version=r.max)
            for api, r in self.versions.items()
            if api not in hidden
        )
        return respond(
            m,
            "ApiVersionsResponse",
            error_code=ErrorCode.none,
            api_keys=entries,
        )

    def _metadata(self, seen: SeenRequest) -> Any:
        m = self._module(seen)
        count = len(self.nodes)
        with self.lock:
            wanted = seen.request.topics
            if wanted is None:
                found: list[FakeTopic | str] = list(self.topics.by_name.values())
            else:
                found = []
                for asked in wanted:
                    known = self.topics.by_id.get(asked.topic_id) if asked.topic_id else None
                    known = known or self.topics.by_name.get(asked.name or "")
                    found.append(known if known is not None else (asked.name or ""))
        topics = []
        for topic in found:
            if isinstance(topic, str):
                topics.append(
                    make(
                        m,
                        "MetadataResponseTopic",
                        error_code=ErrorCode.unknown_topic_or_partition,
                        name=topic,
                        topic_id=uuid_zero,
                        is_internal=False,
                        partitions=(),
                    )
                )
                continue
            with self.lock:
                epochs = [
                    self.leader_epoch(TopicPartition(topic.name, p))
                    for p in range(topic.partitions)
                ]
            partitions = tuple(
                make(
                    m,
                    "MetadataResponsePartition",
                    error_code=ErrorCode.none,
                    partition_index=p,
                    leader_id=self.leader(p),
                    leader_epoch=epochs[p],
                    replica_nodes=(p % count,),
                    isr_nodes=(p % count,),
                    offline_replicas=(),
                )
                for p in range(topic.partitions)
            )
            topics.append(
                make(
                    m,
                    "MetadataResponseTopic",
                    error_code=ErrorCode.none,
                    name=topic.name,
                    topic_id=topic.topic_id,
                    is_internal=False,
                    partitions=partitions,
                )
            )
        brokers = tuple(
            make(m, "MetadataResponseBroker", node_id=n.node_id, host=HOST, port=n.port, rack=None)
            for n in self.nodes
        )
        return respond(
            m,
            "MetadataResponse",
            brokers=brokers,
            cluster_id="kgroup-fake",
            controller_id=0,
            topics=tuple(topics),
            error_code=ErrorCode.none,
        )

    def _find_coordinator(self, seen: SeenRequest) -> Any:
        m = self._module(seen)
        coordinators = []
        for key in seen.request.coordinator_keys:
            node = self.node(self.coordinator(key))
            coordinators.append(
                make(
                    m,
                    "Coordinator",
                    key=key,
                    node_id=node.node_id,
                    host=HOST,
                    port=node.port,
                    error_code=ErrorCode.none,
                    error_message=None,
                )
            )
        return respond(
            m,
            "FindCoordinatorResponse",
            coordinators=tuple(coordinators),
        )

    # ------------------------------------------------------ consumer protocol

    def _consumer_group_heartbeat(self, seen: SeenRequest) -> Any:
        request = seen.request
        with self.lock:
            if not self.consumer_protocol:
                return error_response(
                    seen,
                    ErrorCode.unsupported_version,
                    "The new consumer group protocol is not enabled.",
                )
            if (
                request.group_id in self.classic_groups
                and self.classic_groups[request.group_id].members
            ):
                return error_response(
                    seen,
                    ErrorCode.group_id_not_found,
                    "the fake broker does not convert classic groups",
                )
            if request.group_id in self.share.groups:
                return error_response(
                    seen,
                    ErrorCode.group_id_not_found,
                    f"Group {request.group_id} is not a consumer group.",
                )
            group = self.consumer_groups.get(request.group_id)
            if group is None:
                if request.member_epoch != 0:
                    return error_response(seen, ErrorCode.unknown_member_id)
                group = ConsumerGroup(
                    request.group_id,
                    heartbeat_interval_ms=self.heartbeat_interval_ms,
                    session_timeout_ms=self.session_timeout_ms,
                    topics=self.topics,
                    lock=self.lock,
                    now=now(),
                )
                self.consumer_groups[request.group_id] = group
            rebalance = millis(request.rebalance_timeout)
            outcome = group.heartbeat(
                HeartbeatRequest(
                    group_id=request.group_id,
                    member_id=request.member_id,
                    member_epoch=int(request.member_epoch),
                    instance_id=request.instance_id,
                    rack_id=request.rack_id,
                    rebalance_timeout_ms=rebalance if rebalance >= 0 else None,
                    subscribed_topic_names=None
                    if request.subscribed_topic_names is None
                    else tuple(sorted(request.subscribed_topic_names)),
                    subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
                    server_assignor=request.server_assignor,
                    topic_partitions=None
                    if request.topic_partitions is None
                    else frozenset(
                        TopicIdPartition(t.topic_id, int(p))
                        for t in request.topic_partitions
                        for p in t.partitions
                    ),
                ),
                seen.client_id or "",
                now(),
            )
        if outcome.error_code != ErrorCode.none:
            return error_response(seen, ErrorCode(outcome.error_code), outcome.error_message)
        m = self._module(seen)
        assignment = None
        if outcome.assignment is not None:
            assignment = _assignment(
                m,
                frozenset(
                    TopicIdPartition(topic_id, p)
                    for topic_id, partitions in outcome.assignment.items()
                    for p in partitions
                ),
            )
        return respond(
            m,
            "ConsumerGroupHeartbeatResponse",
            error_code=ErrorCode.none,
            error_message=None,
            member_id=request.member_id,
            member_epoch=outcome.member_epoch,
            heartbeat_interval=timedelta_ms(self.heartbeat_interval_ms),
            assignment=assignment,
        )

    def _consumer_group_describe(self, seen: SeenRequest) -> Any:
        m = self._module(seen)
        groups = []
        with self.lock:
            for group_id in seen.request.group_ids:
                error: ErrorCode | None = None
                if not self.consumer_protocol:
                    error = ErrorCode.unsupported_version
                elif self.coordinator(group_id) != seen.node_id:
                    error = ErrorCode.not_coordinator
                elif group_id not in self.consumer_groups:
                    error = ErrorCode.group_id_not_found
                if error is not None:
                    groups.append(described_error(m, group_id, error))
                    continue
                groups.append(self._described(m, self.consumer_groups[group_id]))
        return respond(m, "ConsumerGroupDescribeResponse", groups=tuple(groups))

    def _described(self, m: Any, group: ConsumerGroup) -> Any:
        names = self.topics.by_id
        members = tuple(
            make(
                m,
                "Member",
                member_id=member.member_id,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                member_epoch=member.epoch,
                client_id=member.client_id,
                client_host="/" + HOST,
                subscribed_topic_names=member.subscribed_names,
                subscribed_topic_regex=member.regex,
                assignment=_assignment(m, member.assigned, names),
                target_assignment=_assignment(
                    m, group.target.get(member.member_id, frozenset()), names
                ),
            )
            for member in group.members.values()
        )
        return make(
            m,
            "DescribedGroup",
            error_code=ErrorCode.none,
            error_message=None,
            group_id=group.group_id,
            group_state=group.state,
            group_epoch=group.epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name="uniform",
            members=members,
            authorized_operations=-(2**31),
        )

    # -------------------------------------------------------- classic protocol

    def _classic(self, group_id: str) -> ClassicGroup | None:
        # Caller holds the lock. None: the id belongs to a consumer-protocol group.
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None and consumer_group.members:
            return None
        group = self.classic_groups.get(group_id)
        if group is None:
            group = self.classic_groups[group_id] = ClassicGroup(
                group_id, lock=self.lock, now=now()
            )
        return group

    async def _join_group(self, seen: SeenRequest) -> Any:
        request = seen.request
        event = anyio.Event()
        answers: list[JoinGroupResponse] = []
        with self.lock:
            group = self._classic(request.group_id)
            if group is None:
                return error_response(seen, ErrorCode.inconsistent_group_protocol)
            group.join(
                JoinGroupRequest(
                    group_id=request.group_id,
                    member_id=request.member_id,
                    instance_id=request.group_instance_id,
                    session_timeout_ms=millis(request.session_timeout),
                    rebalance_timeout_ms=millis(request.rebalance_timeout),
                    protocols=tuple(
                        JoinProtocol(p.name, decode_subscription(bytes(p.metadata)))
                        for p in request.protocols
                    ),
                    protocol_type=request.protocol_type,
                    reason=getattr(request, "reason", None),
                ),
                seen.client_id or "consumer",
                now(),
                _answer_once(answers, event),
            )
        self.on_change()
        await event.wait()
        (result,) = answers
        m = self._module(seen)
        return respond(
            m,
            "JoinGroupResponse",
            error_code=ErrorCode(result.error_code),
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            leader=result.leader,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=tuple(
                make(
                    m,
                    "JoinGroupResponseMember",
                    member_id=member.member_id,
                    group_instance_id=member.instance_id,
                    metadata=encode_subscription(member.subscription),
                )
                for member in result.members
            ),
        )

    async def _sync_group(self, seen: SeenRequest) -> Any:
        request = seen.request
        event = anyio.Event()
        answers: list[SyncGroupResponse] = []
        with self.lock:
            group = self.classic_groups.get(request.group_id)
            if group is None:
                return error_response(seen, ErrorCode.unknown_member_id)
            group.sync(
                SyncGroupRequest(
                    group_id=request.group_id,
                    generation_id=int(request.generation_id),
                    member_id=request.member_id,
                    instance_id=request.group_instance_id,
                    protocol_name=getattr(request, "protocol_name", None) or "",
                    assignments=tuple(
                        (a.member_id, _decoded_assignment(bytes(a.assignment)))
                        for a in request.assignments
                    ),
                ),
                now(),
                _answer_once(answers, event),
            )
        self.on_change()
        await event.wait()
        (result,) = answers
        return respond(
            self._module(seen),
            "SyncGroupResponse",
            error_code=ErrorCode(result.error_code),
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=b"" if result.assignment is None else encode_assignment(result.assignment),
        )

    def _heartbeat(self, seen: SeenRequest) -> Any:
        request = seen.request
        with self.lock:
            group = self.classic_groups.get(request.group_id)
            code = (
                ErrorCode.unknown_member_id
                if group is None
                else ErrorCode(
                    group.heartbeat(
                        request.member_id,
                        request.group_instance_id,
                        int(request.generation_id),
                        now(),
                    )
                )
            )
        return respond(self._module(seen), "HeartbeatResponse", error_code=code)

    def _leave_group(self, seen: SeenRequest) -> Any:
        m = self._module(seen)
        request = seen.request
        results = []
        with self.lock:
            group = self.classic_groups.get(request.group_id)
            for identity in request.members:
                code = (
                    ErrorCode.unknown_member_id
                    if group is None
                    else ErrorCode(
                        group.leave(identity.member_id, identity.group_instance_id, now())
                    )
                )
                results.append(
                    make(
                        m,
                        "MemberResponse",
                        member_id=identity.member_id,
                        group_instance_id=identity.group_instance_id,
                        error_code=code,
                    )
                )
        return respond(
            m,
            "LeaveGroupResponse",
            error_code=ErrorCode.none,
            members=tuple(results),
        )

    # ---------------------------------------------------------------- offsets

    def _commit_error(
        self, group_id: str, member_id: str, instance_id: str | None, epoch: int
    ) -> ErrorCode:
        # Caller holds the lock.
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None and consumer_group.members:
            return ErrorCode(int(consumer_group.commit_error(member_id, epoch)))
        classic_group = self.classic_groups.get(group_id)
        if classic_group is not None and classic_group.members:
            return ErrorCode(classic_group.commit_error(member_id, instance_id, epoch))
        # An empty or unknown group takes commits from outside (epoch -1) only.
        return ErrorCode.none if epoch < 0 else ErrorCode.illegal_generation

    def _offset_commit(self, seen: SeenRequest) -> Any:
        m = self._module(seen)
        request = seen.request
        by_id = seen.version >= _OFFSETS_BY_TOPIC_ID
        topics = []
        with self.lock:
            code = self._commit_error(
                request.group_id,
                request.member_id,
                request.group_instance_id,
                int(request.generation_id_or_member_epoch),
            )
            stored = self.offsets.setdefault(request.group_id, {})
            epochs = self.offset_epochs.setdefault(request.group_id, {})
            texts = self.offset_metadata.setdefault(request.group_id, {})
            for topic in request.topics:
                found = self._offsets_topic(topic, by_id)
                partitions = []
                for part in topic.partitions:
                    index = int(part.partition_index)
                    error = code
                    if error is ErrorCode.none and (found is None or index >= found.partitions):
                        error = (
                            ErrorCode.unknown_topic_id
                            if by_id
                            else ErrorCode.unknown_topic_or_partition
                        )
                    if error is ErrorCode.none and found is not None:
                        stored[TopicPartition(found.name, index)] = int(part.committed_offset)
                        epochs[TopicPartition(found.name, index)] = int(part.committed_leader_epoch)
                        texts[TopicPartition(found.name, index)] = part.committed_metadata or ""
                    partitions.append(
                        make(
                            m,
                            "OffsetCommitResponsePartition",
                            partition_index=index,
                            error_code=error,
                        )
                    )
                topics.append(
                    make(
                        m,
                        "OffsetCommitResponseTopic",
                        name=getattr(topic, "name", None),
                        topic_id=getattr(topic, "topic_id", None),
                        partitions=tuple(partitions),
                    )
                )
        self.on_change()
        return respond(m, "OffsetCommitResponse", topics=tuple(topics))

    def _offsets_topic(self, entry: Any, by_id: bool) -> FakeTopic | None:
        """The topic an OffsetCommit or OffsetFetch topic entry names (None: unknown)."""
        return (
            self.topics.by_id.get(entry.topic_id) if by_id else self.topics.by_name.get(entry.name)
        )

    def _offset_fetch(self, seen: SeenRequest) -> Any:
        m = self._module(seen)
        by_id = seen.version >= _OFFSETS_BY_TOPIC_ID
        groups = []
        with self.lock:
            for asked in seen.request.groups:
                group_id = asked.group_id
                error = ErrorCode.none
                if self.coordinator(group_id) != seen.node_id:
                    error = ErrorCode.not_coordinator
                elif asked.member_id is not None:
                    error = self._fetch_member_error(group_id, asked.member_id, asked.member_epoch)
                if error is not ErrorCode.none:
                    groups.append(
                        make(
                            m,
                            "OffsetFetchResponseGroup",
                            group_id=group_id,
                            topics=(),
                            error_code=error,
                        )
                    )
                    continue
                stored = self.offsets.get(group_id, {})
                epochs = self.offset_epochs.get(group_id, {})
                texts = self.offset_metadata.get(group_id, {})
                wanted: list[tuple[Any, FakeTopic | None, tuple[int, ...]]] = []
                if asked.topics is None:
                    for tp in sorted(stored):
                        wanted.append(
                            (tp.topic, self.topics.by_name.get(tp.topic), (tp.partition,))
                        )
                else:
                    for t in asked.topics:
                        found = self._offsets_topic(t, by_id)
                        wanted.append((t, found, tuple(int(p) for p in t.partition_indexes)))
                topics = []
                for asked_topic, found, indexes in wanted:
                    partitions = tuple(
                        make(
                            m,
                            "OffsetFetchResponsePartitions",
                            partition_index=p,
                            committed_offset=-1
                            if found is None
                            else stored.get(TopicPartition(found.name, p), -1),
                            committed_leader_epoch=-1
                            if found is None
                            else epochs.get(TopicPartition(found.name, p), -1),
                            metadata=""
                            if found is None
                            else texts.get(TopicPartition(found.name, p), ""),
                            error_code=ErrorCode.unknown_topic_id
                            if found is None and by_id
                            else ErrorCode.none,
                        )
                        for p in indexes
                    )
                    topics.append(
                        make(
                            m,
                            "OffsetFetchResponseTopics",
                            name=found.name if found else getattr(asked_topic, "name", ""),
                            topic_id=found.topic_id
                            if found
                            else getattr(asked_topic, "topic_id", None),
                            partitions=partitions,
                        )
                    )
                groups.append(
                    make(
                        m,
                        "OffsetFetchResponseGroup",
                        group_id=group_id,
                        topics=tuple(topics),
                        error_code=ErrorCode.none,
                    )
                )
        return respond(m, "OffsetFetchResponse", groups=tuple(groups))

    def _offset_for_leader_epoch(self, seen: SeenRequest) -> Any:
        m = self._module(seen)
        topics = []
        with self.lock:
            for asked in seen.request.topics:
                known = self.topics.by_name.get(str(asked.topic))
                partitions = []
                for part in asked.partitions:
                    index = int(part.partition)
                    tp = TopicPartition(str(asked.topic), index)
                    code, epoch, end = self._epoch_end(
                        known,
                        tp,
                        seen.node_id,
                        int(part.leader_epoch),
                        int(part.current_leader_epoch),
                    )
                    partitions.append(
                        m.EpochEndOffset(
                            error_code=code,
                            partition=part.partition,
                            leader_epoch=epoch,
                            end_offset=end,
                        )
                    )
                topics.append(
                    m.OffsetForLeaderTopicResult(topic=asked.topic, partitions=tuple(partitions))
                )
        return respond(m, "OffsetForLeaderEpochResponse", topics=tuple(topics))

    def _epoch_end(
        self, known: FakeTopic | None, tp: TopicPartition, node: int, asked: int, current: int
    ) -> tuple[ErrorCode, int, int]:
        """(error, epoch, end offset): the largest epoch not above ``asked`` and where it
        ends (the next epoch's start, or the log end for the current one), as a leader's
        epoch cache answers. Caller holds the lock."""
        if known is None or tp.partition >= known.partitions:
            return ErrorCode.unknown_topic_or_partition, -1, -1
        if self.leader(tp.partition) != node:
            return ErrorCode.not_leader_or_follower, -1, -1
        latest = self.leader_epoch(tp)
        if current >= 0 and current < latest:
            return ErrorCode.fenced_leader_epoch, -1, -1
        if current > latest:
            return ErrorCode.unknown_leader_epoch, -1, -1
        history = self.epoch_history.get(tp) or [(0, 0)]
        older = [i for i, (epoch, _start) in enumerate(history) if epoch <= asked]
        if not older:
            return ErrorCode.none, -1, -1  # the log begins after that epoch
        i = older[-1]
        end = history[i + 1][1] if i + 1 < len(history) else self.log_end(tp)
        return ErrorCode.none, history[i][0], end

    def _fetch_member_error(self, group_id: str, member_id: str, epoch: int) -> ErrorCode:
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is None or not consumer_group.members:
            return ErrorCode.none  # classic groups do not check OffsetFetch's member
        return ErrorCode(int(consumer_group.fetch_error(member_id, epoch)))


def _answer_once(answers: list[_A], event: anyio.Event) -> Callable[[_A], None]:
    """A model's ``reply``: keeps the first answer and wakes the held request."""

    def reply(answer: _A) -> None:
        if not answers:
            answers.append(answer)
            event.set()

    return reply


def _decoded_assignment(data: bytes) -> ClassicAssignment:
    # A leader may give a member nothing at all (empty bytes), as Kafka allows.
    return decode_assignment(data) if data else ClassicAssignment()


def _assignment(
    m: Any,
    partitions: frozenset[TopicIdPartition],
    named: Mapping[uuid.UUID, FakeTopic] | None = None,
) -> Any:
    """``partitions`` as the Assignment of a heartbeat (or, with ``named``, a describe) response."""
    by_topic: dict[uuid.UUID, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic_id, []).append(tp.partition)
    topics = []
    for topic_id, indexes in by_topic.items():
        # ConsumerGroupDescribe names each topic ("" once deleted); the heartbeat does not.
        name = (
            {}
            if named is None
            else {"topic_name": named[topic_id].name if topic_id in named else ""}
        )
        topics.append(m.TopicPartitions(topic_id=topic_id, partitions=tuple(indexes), **name))
    return m.Assignment(topic_partitions=tuple(topics))
