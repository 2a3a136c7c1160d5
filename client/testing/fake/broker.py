"""The fake broker: an in-process Kafka cluster on 127.0.0.1 speaking the real wire protocol.

One :class:`FakeBroker` is a cluster of one or more nodes, each an anyio TCP
listener on an ephemeral port, all sharing one state: topics, groups of both
protocols, committed offsets. Requests are decoded with kio
(:func:`kgroup.protocol.decode_request`) and answered with kio responses of
the version they came in (:func:`kgroup.protocol.encode_response`).

Every request first goes past the test's interceptions (:meth:`FakeBroker.intercept`),
then, unless one answered, to the model. See ``docs/testing.md``.
"""

from __future__ import annotations

import enum
import inspect
import itertools
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import anyio
import anyio.abc
import anyio.from_thread
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream
from kio.schema.errors import ErrorCode

from kgroup.config import AutoOffsetReset
from kgroup.errors import KafkaProtocolError, KgroupError
from kgroup.protocol import SUPPORTED_VERSIONS, ApiKey, VersionRange
from kgroup.protocol.framing import RequestFrame, decode_request, encode_response, frame_size
from kgroup.testing._served import LoopServed
from kgroup.testing.fake._classic_group import ClassicGroup
from kgroup.testing.fake._cluster import HOST, Cluster, Node, now
from kgroup.testing.fake._consumer_group import ConsumerGroup
from kgroup.testing.fake._errors import error_response
from kgroup.testing.fake._kio import SeenRequest
from kgroup.testing.fake._share_data import (
    ShareGroupConfig,
    SharePartitionView,
    ShareSessionView,
    valid_reset,
)
from kgroup.testing.fake._share_group import ShareGroup
from kgroup.testing.fake._topics import FakeTopic
from kgroup.testing.fake.dataplane import FakeDataPlane, RecordLog
from kgroup.types import TopicPartition

__all__ = [
    "FakeBroker",
    "Handler",
    "HandlerResult",
    "Interception",
    "SeenRequest",
    "Verdict",
]

log = logging.getLogger("kgroup.testing.fake")

_IMPLEMENTED = (
    ApiKey.API_VERSIONS,
    ApiKey.METADATA,
    ApiKey.FIND_COORDINATOR,
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_GROUP_DESCRIBE,
    ApiKey.SHARE_FETCH,
    ApiKey.SHARE_ACKNOWLEDGE,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
)


class Verdict(enum.Enum):
    """What an interception handler may return besides a response or an error code."""

    PASS = "pass"
    """Not handled here: the next interception, or the model, answers."""
    DROP = "drop"
    """Close the connection without answering (the client sees a disconnect)."""
    NO_ANSWER = "no-answer"
    """Never answer; the connection stays open (the client times out)."""
    LOSE_ANSWER = "lose-answer"
    """The model handles the request (a commit is applied), then the connection
    is closed before the answer: the client cannot tell it from DROP."""


HandlerResult: TypeAlias = Verdict | ErrorCode | int | Any | None
"""``None`` / PASS, DROP, NO_ANSWER, LOSE_ANSWER, an error code (the broker builds an error
response of the right shape), or a kio response to send as is."""

Handler: TypeAlias = Callable[[SeenRequest], HandlerResult | Awaitable[HandlerResult]]
"""An interception handler: plain or async (an async one may sleep to delay)."""


@dataclass(eq=False)
class Interception:
    """A handler installed by :meth:`FakeBroker.intercept`."""

    api_key: int
    handler: Handler
    remaining: int | None
    node: int | None = None
    when: Callable[[SeenRequest], bool] | None = None
    calls: list[SeenRequest] = field(default_factory=list)
    """The requests this interception was called with."""
    removed: bool = False

    def remove(self) -> None:
        """Stop intercepting."""
        self.removed = True

    @property
    def active(self) -> bool:
        """Whether it will still be called."""
        return not self.removed and (self.remaining is None or self.remaining > 0)

    def _takes(self, seen: SeenRequest) -> bool:
        if not self.active or seen.api_key != self.api_key:
            return False
        if self.node is not None and seen.node_id != self.node:
            return False
        return self.when is None or self.when(seen)


@dataclass(eq=False)
class _Connection:
    connection_id: int
    node_id: int
    stream: anyio.abc.ByteStream
    write_lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def send(self, data: bytes) -> None:
        async with self.write_lock:
            await self.stream.send(data)


class FakeBroker(LoopServed):
    """An in-process fake Kafka cluster for runtime tests (never for integration claims).

    Use it as ``async with FakeBroker() as broker:`` (asyncio or trio); it
    listens while the block runs. For the blocking consumer, whose event loop
    runs in its own thread, use ``with FakeBroker().running_in_thread():``.

    Consumer-protocol and share groups get ``heartbeat_interval_ms`` and
    ``session_timeout_ms`` (the broker-side settings of the new protocol).
    Share groups lock an acquired record for ``share_record_lock_duration_ms``
    and archive it after ``share_delivery_count_limit`` deliveries, unless the
    group's configs say otherwise (:meth:`set_share_group_config`, or
    IncrementalAlterConfigs on the GROUP resource, bounded to 15-60 s as a
    real broker bounds it).
    ``versions`` overrides the advertised version ranges per API (default:
    kgroup's own ranges); the fake answers every version kio has.
    ``sweep_interval`` is how often (seconds) the coordinator's timers
    (session and rebalance timeouts, acquisition locks) are checked, and how
    often a waiting ShareFetch looks for records.

    Thread-safety: the model is guarded by a lock, so the test's thread may
    read views and create topics while the broker's loop thread serves.
    """

    def __init__(
        self,
        *,
        nodes: int = 1,
        heartbeat_interval_ms: int = 100,
        session_timeout_ms: int = 2_000,
        versions: Mapping[ApiKey, VersionRange] | None = None,
        sweep_interval: float = 0.01,
        share_record_lock_duration_ms: int = 30_000,
        share_delivery_count_limit: int = 5,
    ) -> None:
        if nodes < 1:
            raise KgroupError(f"a fake cluster needs at least one node, got {nodes}")
        super().__init__()
        self.records = RecordLog()
        """The records of every partition; data planes from :meth:`dataplane` read them."""
        advertised = {api: SUPPORTED_VERSIONS[api] for api in _IMPLEMENTED}
        advertised.update(versions or {})
        self._cluster = Cluster(
            nodes=nodes,
            versions=advertised,
            heartbeat_interval_ms=heartbeat_interval_ms,
            session_timeout_ms=session_timeout_ms,
            on_change=self._changed,
            log_end=self.records.end_offset,
            records=self.records,
            share_record_lock_duration_ms=share_record_lock_duration_ms,
            share_delivery_count_limit=share_delivery_count_limit,
            poll_interval=sweep_interval,
        )
        self._sweep_interval = sweep_interval
        self._lock = self._cluster.lock
        self._changed_cond = threading.Condition(self._lock)
        self._changed_event: anyio.Event | None = None
        self._interceptions: list[Interception] = []
        self._seen: list[SeenRequest] = []
        self._connections: dict[int, _Connection] = {}
        self._connection_ids = itertools.count(1)
        self.failures: list[Exception] = []
        """Exceptions the model raised while answering (raised again on exit)."""

    # ------------------------------------------------------------- lifecycle

    async def _start(self, tg: anyio.abc.TaskGroup) -> None:
        for node in self._cluster.nodes:
            listener = await anyio.create_tcp_listener(local_host=HOST, local_port=0)
            node.listener = listener
            node.port = listener.extra(SocketAttribute.local_port)
            tg.start_soon(self._listen, node)
        tg.start_soon(self._sweep)

    def _stopped(self, exc: BaseException | None) -> None:
        if self.failures and exc is None:
            raise KgroupError(
                f"the fake broker failed {len(self.failures)} time(s); first: {self.failures[0]!r}"
            ) from self.failures[0]

    async def _listen(self, node: Node) -> None:
        assert node.listener is not None
        async with node.listener:
            await node.listener.serve(lambda stream: self._serve(node.node_id, stream))

    async def _sweep(self) -> None:
        # The coordinator's timers (sessions, rebalance timeouts), checked on a
        # short period: the broker's internal clock, not test synchronisation.
        while True:
            await anyio.sleep(self._sweep_interval)
            gone = self._cluster.expire()
            for group_id, member_id in gone:
                log.info("group %s: member %s expired", group_id, member_id)
            if self._cluster.run_share_timers() or gone:
                self._changed()

    # --------------------------------------------------------------- cluster

    @property
    def node_ids(self) -> list[int]:
        """The node ids, 0 .. nodes - 1."""
        return [n.node_id for n in self._cluster.nodes]

    def address(self, node: int = 0) -> str:
        """``127.0.0.1:<port>`` of ``node`` (only once entered)."""
        return f"{HOST}:{self._cluster.node(node).port}"

    @property
    def bootstrap_servers(self) -> str:
        """Every node's address, comma-separated."""
        return ",".join(self.address(n.node_id) for n in self._cluster.nodes)

    def create_topic(self, name: str, partitions: int = 1) -> uuid.UUID:
        """Create topic ``name`` (or grow it to ``partitions``); returns its id."""
        with self._lock:
            topic = self._cluster.topics.create(name, partitions)
            self.records.create(name, partitions)
        self._changed()
        return topic.topic_id

    def delete_topic(self, name: str) -> None:
        """Delete topic ``name``: its id becomes unknown, its logs empty, and every group's
        committed offsets of it are deleted (as Kafka does).

        Raises:
            KgroupError: there is no topic ``name``.
        """
        with self._lock:
            self._delete(name)
        self._changed()

    def _delete(self, name: str) -> FakeTopic:
        # Caller holds the lock.
        old = self._cluster.topics.delete(name)
        if old is None:
            raise KgroupError(f"the fake cluster has no topic {name!r}")
        stores: list[dict[TopicPartition, Any]] = [
            *self._cluster.offsets.values(),
            *self._cluster.offset_epochs.values(),
            *self._cluster.offset_metadata.values(),
        ]
        for stored in stores:
            for tp in [tp for tp in stored if tp.topic == name]:
                del stored[tp]
        for p in range(old.partitions):
            self.records.truncate(TopicPartition(name, p), 0)
        self._cluster.share.data.forget_topic(name)
        return old

    def recreate_topic(self, name: str) -> uuid.UUID:
        """Delete topic ``name`` and create it again with as many partitions; its new id.

        As Kafka does: the new topic has a new id (the old one becomes unknown),
        empty logs, and no committed offsets in any group (deleting a topic
        deletes its groups' offsets).

        Raises:
            KgroupError: there is no topic ``name``.
        """
        with self._lock:
            old = self._delete(name)
            topic = self._cluster.topics.create(name, old.partitions)
        self._changed()
        return topic.topic_id

    def topic(self, name: str) -> FakeTopic:
        """Topic ``name``. Raises KgroupError if it does not exist."""
        with self._lock:
            found = self._cluster.topics.by_name.get(name)
        if found is None:
            raise KgroupError(f"the fake cluster has no topic {name!r}; create it first")
        return found

    def produce(
        self, topic: str, partition: int, value: bytes | None, *, key: bytes | None = None
    ) -> int:
        """Append a record to ``topic``-``partition``; returns its offset."""
        return self.records.append(topic, partition, value, key=key)

    def elect_leader(self, topic: str, partition: int, *, truncate_to: int | None = None) -> int:
        """A leader change of ``topic``-``partition``: a new leader epoch begins; returns it.

        The new epoch starts at the log end. With ``truncate_to`` the election
        is unclean (KIP-320's case): the new leader's log ends at that offset,
        so the records from it on are gone from the record log, as are the
        epochs that began there or later from its epoch history, and the next
        record produced gets that offset again, in the new epoch. Metadata
        reports the new epoch; OffsetForLeaderEpoch answers from the history.

        Raises:
            KgroupError: no such partition, or ``truncate_to`` beyond the log end.
        """
        tp = TopicPartition(topic, partition)
        if not self.records.exists(tp):
            raise KgroupError(f"the fake cluster has no partition {tp}; create its topic first")
        with self._lock:
            history = self._cluster.epoch_history.setdefault(tp, [(0, 0)])
            epoch = history[-1][0] + 1  # the controller's epochs only grow
            if truncate_to is not None:
                self.records.truncate(tp, truncate_to)
                # The new leader never saw the epochs that began past its log end.
                history[:] = [(e, start) for e, start in history if start < truncate_to]
            history.append((epoch, self.records.end_offset(tp)))
        self._changed()
        return epoch

    def dataplane(
        self, auto_offset_reset: AutoOffsetReset | str = AutoOffsetReset.EARLIEST
    ) -> FakeDataPlane:
        """A data plane reading this cluster's records, for ``dataplane=`` of a consumer."""
        return FakeDataPlane(self.records, auto_offset_reset=auto_offset_reset)

    # -------------------------------------------------------------- scripting

    def intercept(
        self,
        api_key: ApiKey | int,
        handler: Handler,
        *,
        times: int | None = 1,
        node: int | None = None,
        when: Callable[[SeenRequest], bool] | None = None,
    ) -> Interception:
        """Route the next ``times`` matching requests (None: all) through ``handler``.

        A request matches on its API key, ``node`` (if given) and ``when`` (if
        given). Interceptions are tried in the order they were installed;
        each call uses up one of ``times``, whatever the handler returns. The
        handler returns None / :attr:`Verdict.PASS` to let the next
        interception or the model answer, an error code, a kio response,
        :attr:`Verdict.DROP`, :attr:`Verdict.NO_ANSWER` or :attr:`Verdict.LOSE_ANSWER`.
        """
        if times is not None and times < 1:
            raise KgroupError(f"times must be at least 1 (or None for always), got {times}")
        interception = Interception(int(api_key), handler, times, node, when)
        with self._lock:
            self._interceptions.append(interception)
        return interception

    @property
    def requests(self) -> list[SeenRequest]:
        """Every request received (ApiVersions included), oldest first."""
        with self._lock:
            return list(self._seen)

    def requests_of(self, api_key: ApiKey | int, *, node: int | None = None) -> list[SeenRequest]:
        """The requests of one API (on ``node``, if given), oldest first."""
        return [
            r
            for r in self.requests
            if r.api_key == int(api_key) and (node is None or r.node_id == node)
        ]

    def set_coordinator(self, group_id: str, node: int) -> None:
        """Make ``node`` the coordinator of ``group_id``; the others answer NOT_COORDINATOR."""
        self._cluster.node(node)
        with self._lock:
            self._cluster.coordinators[group_id] = node
        self._changed()

    def coordinator(self, group_id: str) -> int:
        """The node coordinating ``group_id`` (node 0 unless moved)."""
        return self._cluster.coordinator(group_id)

    def disable_consumer_protocol(self, *, hide_api: bool = False) -> None:
        """Answer ConsumerGroupHeartbeat / ConsumerGroupDescribe with UNSUPPORTED_VERSION.

        That is what a broker with ``group.coordinator.rebalance.protocols``
        lacking ``consumer`` does. With ``hide_api`` the two APIs are also left
        out of ApiVersions (an older broker).
        """
        with self._lock:
            self._cluster.consumer_protocol = False
            self._cluster.hide_consumer_protocol = hide_api

    def enable_consumer_protocol(self) -> None:
        """Undo :meth:`disable_consumer_protocol`."""
        with self._lock:
            self._cluster.consumer_protocol = True
            self._cluster.hide_consumer_protocol = False

    def remove_member(self, group_id: str, member_id: str) -> None:
        """Remove a member from a group of any type, as if its session expired.

        A consumer-protocol or share member then gets UNKNOWN_MEMBER_ID on its
        next heartbeat; a classic member on its next Heartbeat / SyncGroup. A
        share member's share sessions close and the records it holds are
        released (their delivery not counted), as Kafka does.
        """
        with self._lock:
            consumer_group = self._cluster.consumer_groups.get(group_id)
            if consumer_group is not None and member_id in consumer_group.members:
                consumer_group.remove(member_id)
            classic_group = self._cluster.classic_groups.get(group_id)
            if classic_group is not None and member_id in classic_group.members:
                classic_group.remove(member_id, now())
            share_group = self._cluster.share.groups.get(group_id)
            if share_group is not None:
                share_group.remove(member_id)
        self._changed()

    async def disconnect(self, node: int | None = None) -> None:
        """Close every client connection (to ``node`` only, if given)."""
        for conn in list(self._connections.values()):
            if node is None or conn.node_id == node:
                await conn.stream.aclose()

    # ------------------------------------------------------------------ views

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer-protocol group ``group_id`` (the live model object), if any."""
        with self._lock:
            return self._cluster.consumer_groups.get(group_id)

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        """The classic group ``group_id`` (the live model object), if any."""
        with self._lock:
            return self._cluster.classic_groups.get(group_id)

    def committed(self, group_id: str) -> dict[TopicPartition, int]:
        """The offsets committed for ``group_id``."""
        with self._lock:
            return dict(self._cluster.offsets.get(group_id, {}))

    def committed_metadata(self, group_id: str) -> dict[TopicPartition, str]:
        """The metadata committed with each offset of ``group_id`` ("" if none)."""
        with self._lock:
            return dict(self._cluster.offset_metadata.get(group_id, {}))

    def committed_leader_epochs(self, group_id: str) -> dict[TopicPartition, int]:
        """The leader epoch committed with each offset of ``group_id`` (-1: none, KIP-320)."""
        with self._lock:
            return dict(self._cluster.offset_epochs.get(group_id, {}))

    def assignment(self, group_id: str, member_id: str) -> frozenset[TopicPartition]:
        """What the coordinator currently gives ``member_id`` (a group of any type).

        For a classic member that is not known from the bytes the leader sent,
        so only consumer-protocol and share groups are covered; classic ones
        return empty. A share member's is what it was last told.
        """
        with self._lock:
            group = self._cluster.consumer_groups.get(group_id)
            member = None if group is None else group.members.get(member_id)
            share_group = self._cluster.share.groups.get(group_id)
            share_member = None if share_group is None else share_group.members.get(member_id)
            if member is not None:
                assigned = member.assigned
            elif share_member is not None:
                assigned = share_member.assigned
            else:
                return frozenset()
            return frozenset(
                named for tp in assigned if (named := self._cluster.topics.name_of(tp)) is not None
            )

    # ------------------------------------------------------------ share groups

    def share_group(self, group_id: str) -> ShareGroup | None:
        """The share group ``group_id`` (the live model object), if any."""
        with self._lock:
            return self._cluster.share.groups.get(group_id)

    def share_partition(
        self, group_id: str, topic: str, partition: int
    ) -> SharePartitionView | None:
        """``topic``-``partition`` as share group ``group_id`` sees it now: its start
        offset and every record's state and delivery count (None: never touched)."""
        with self._lock:
            return self._cluster.share.data.view(group_id, TopicPartition(topic, partition))

    def share_sessions(self, group_id: str) -> list[ShareSessionView]:
        """The share sessions open for members of ``group_id``, on every node."""
        with self._lock:
            return [
                s.view()
                for s in self._cluster.share.data.sessions.values()
                if s.group_id == group_id
            ]

    def share_group_config(self, group_id: str) -> ShareGroupConfig:
        """What share group ``group_id``'s configs come to now."""
        with self._lock:
            return self._cluster.share.data.config(group_id)

    def set_share_group_config(
        self,
        group_id: str,
        *,
        auto_offset_reset: str | None = None,
        record_lock_duration_ms: int | None = None,
        delivery_count_limit: int | None = None,
    ) -> None:
        """Set share group ``group_id``'s configs directly (what is not given keeps its value).

        Unlike IncrementalAlterConfigs this takes any positive lock duration,
        so a test can see locks time out in milliseconds. The start offset is
        fixed the first time the group touches a partition, so set
        ``auto_offset_reset`` before the members fetch.

        Raises:
            KgroupError: a reset other than earliest / latest / by_duration:<ISO-8601>,
                or a duration or limit below 1.
        """
        with self._lock:
            data = self._cluster.share.data
            current = data.config(group_id)
            chosen = ShareGroupConfig(
                auto_offset_reset=current.auto_offset_reset
                if auto_offset_reset is None
                else auto_offset_reset,
                record_lock_duration_ms=current.record_lock_duration_ms
                if record_lock_duration_ms is None
                else record_lock_duration_ms,
                delivery_count_limit=current.delivery_count_limit
                if delivery_count_limit is None
                else delivery_count_limit,
            )
            if not valid_reset(chosen.auto_offset_reset):
                raise KgroupError(
                    f"share.auto.offset.reset {chosen.auto_offset_reset!r} is not earliest, "
                    "latest or by_duration:<ISO-8601 duration>"
                )
            if chosen.record_lock_duration_ms < 1 or chosen.delivery_count_limit < 1:
                raise KgroupError(
                    "the record lock duration and the delivery count limit must be at least 1, "
                    f"got {chosen.record_lock_duration_ms} ms and {chosen.delivery_count_limit}"
                )
            data.override(group_id, chosen)
        self._changed()

    def evict_share_sessions(
        self, group_id: str, member_id: str | None = None, *, release: bool = False
    ) -> int:
        """Forget the share sessions of ``group_id`` (of ``member_id`` only, if given) on
        every node, as a broker whose session cache evicted them: the member's next
        ShareFetch or ShareAcknowledge on one is answered SHARE_SESSION_NOT_FOUND and it
        must open a new one. The records it holds stay locked to it (``release``: they
        are released as a closing session releases them). Returns how many sessions."""
        with self._lock:
            evicted = self._cluster.share.data.evict(group_id, member_id, release=release)
        self._changed()
        return evicted

    def expire_acquisition_locks(self, group_id: str | None = None) -> int:
        """Time out every acquisition lock now (of ``group_id`` only, if given), as if
        the lock duration had passed: the records become available again (archived
        at the delivery limit). Returns how many records were released."""
        with self._lock:
            released = self._cluster.share.data.expire_locks(group_id, now())
        self._changed()
        return released

    # ---------------------------------------------------------------- waiting

    def _changed(self) -> None:
        with self._lock:
            self._changed_cond.notify_all()
        # Every waiter shares the current event; the next waiter makes a new one.
        if self._loop_thread == threading.get_ident() and self._changed_event is not None:
            self._changed_event.set()
            self._changed_event = None

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait (on the broker's loop) until ``condition()`` holds; re-checked on every change.

        Raises:
            TimeoutError: it did not hold within ``timeout`` seconds.
        """
        with anyio.fail_after(timeout):
            while True:
                if self._changed_event is None:
                    self._changed_event = anyio.Event()
                event = self._changed_event
                with self._lock:
                    if condition():
                        return
                await event.wait()

    def wait_for(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        """Like :meth:`wait_until`, from a thread other than the broker's (blocking).

        Raises:
            TimeoutError: it did not hold within ``timeout`` seconds.
        """
        with self._changed_cond:
            if not self._changed_cond.wait_for(condition, timeout):
                raise TimeoutError(f"condition not met within {timeout} s")

    # ------------------------------------------------------------ connections

    async def _serve(self, node_id: int, stream: anyio.abc.ByteStream) -> None:
        conn = _Connection(next(self._connection_ids), node_id, stream)
        self._connections[conn.connection_id] = conn
        reader = BufferedByteReceiveStream(stream)
        try:
            async with anyio.create_task_group() as tg:
                try:
                    while True:
                        prefix = await reader.receive_exactly(4)
                        body = await reader.receive_exactly(frame_size(prefix))
                        frame = decode_request(prefix + body)
                        tg.start_soon(self._dispatch, conn, frame)
                except (
                    anyio.EndOfStream,
                    anyio.IncompleteRead,
                    anyio.ClosedResourceError,
                    anyio.BrokenResourceError,
                    KafkaProtocolError,
                ):
                    pass
                # Answers still pending (held joins, NO_ANSWER) die with the connection.
                tg.cancel_scope.cancel()
        finally:
            self._connections.pop(conn.connection_id, None)
            self._cluster.connection_closed(conn.connection_id)
            self._changed()
            await stream.aclose()

    async def _dispatch(self, conn: _Connection, frame: RequestFrame) -> None:
        header = frame.header
        seen = SeenRequest(
            node_id=conn.node_id,
            connection_id=conn.connection_id,
            api_key=int(header.request_api_key),
            version=int(header.request_api_version),
            correlation_id=int(header.correlation_id),
            client_id=header.client_id,
            request=frame.request,
            at=now(),
        )
        with self._lock:
            self._seen.append(seen)
        self._changed()
        try:
            response = await self._respond(seen)
        except Exception as exc:
            # A bug in the model or in a test's handler: remembered and raised
            # when the broker stops, so that it fails the test instead of
            # hiding behind the client's retries.
            log.exception("fake broker failed answering %s", seen)
            self.failures.append(exc)
            response = Verdict.DROP
        if response is Verdict.DROP:
            await conn.stream.aclose()
            return
        if response is Verdict.NO_ANSWER:
            return
        try:
            await conn.send(encode_response(response, seen.correlation_id))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        self._changed()

    async def _respond(self, seen: SeenRequest) -> Any:
        """The response to send, or DROP / NO_ANSWER."""
        outcome = await self._intercepted(seen)
        if outcome is Verdict.DROP or outcome is Verdict.NO_ANSWER:
            return outcome
        if outcome is Verdict.LOSE_ANSWER:
            await self._cluster.answer(seen)
            return Verdict.DROP
        if outcome is None or outcome is Verdict.PASS:
            return await self._cluster.answer(seen)
        if isinstance(outcome, int):
            return error_response(seen, ErrorCode(outcome))
        return outcome

    async def _intercepted(self, seen: SeenRequest) -> HandlerResult:
        index = 0
        while True:
            with self._lock:
                chosen = None
                while index < len(self._interceptions):
                    candidate = self._interceptions[index]
                    index += 1
                    if candidate._takes(seen):
                        chosen = candidate
                        if chosen.remaining is not None:
                            chosen.remaining -= 1
                        chosen.calls.append(seen)
                        break
            if chosen is None:
                return None
            result = chosen.handler(seen)
            if inspect.isawaitable(result):
                result = await result
            if result is not None and result is not Verdict.PASS:
                return result
