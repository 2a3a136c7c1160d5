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

import contextlib
import enum
import inspect
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self, TypeAlias

import anyio
import anyio.abc
import anyio.from_thread
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream
from kio.schema.errors import ErrorCode
from kio.static.constants import uuid_zero

from kgroup.config import AutoOffsetReset
from kgroup.errors import KafkaProtocolError, KgroupError
from kgroup.protocol import SUPPORTED_VERSIONS, ApiKey, VersionRange, response_module
from kgroup.protocol.framing import RequestFrame, decode_request, encode_response, frame_size
from kgroup.testing.fake._classic_group import (
    ClassicGroup,
    JoinInput,
    JoinResult,
    Pending,
    SyncResult,
)
from kgroup.testing.fake._consumer_group import ConsumerGroup, HeartbeatInput
from kgroup.testing.fake._kio import make, millis, timedelta_ms
from kgroup.testing.fake._topics import FakeTopic, Topics
from kgroup.testing.fake.dataplane import FakeDataPlane, RecordLog
from kgroup.types import TopicIdPartition, TopicPartition

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
)
_CONSUMER_PROTOCOL_APIS = (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)
_HOST = "127.0.0.1"


class Verdict(enum.Enum):
    """What an interception handler may return besides a response or an error code."""

    PASS = "pass"
    """Not handled here: the next interception, or the model, answers."""
    DROP = "drop"
    """Close the connection without answering (the client sees a disconnect)."""
    NO_ANSWER = "no-answer"
    """Never answer; the connection stays open (the client times out)."""


@dataclass(frozen=True, slots=True)
class SeenRequest:
    """One request the broker received, as interception handlers and assertions see it.

    ``request`` is the decoded kio request of version ``version``; it is typed
    ``Any`` because its fields depend on that version.
    """

    node_id: int
    connection_id: int
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    request: Any = field(compare=False)
    at: float
    """When it arrived, on :func:`time.monotonic`'s clock."""


HandlerResult: TypeAlias = Verdict | ErrorCode | int | Any | None
"""``None`` / PASS, DROP, NO_ANSWER, an error code (the broker builds an error
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


@dataclass(slots=True)
class _Node:
    node_id: int
    port: int = 0
    listener: anyio.abc.Listener[Any] | None = None


class FakeBroker:
    """An in-process fake Kafka cluster for runtime tests (never for integration claims).

    Use it as ``async with FakeBroker() as broker:`` (asyncio or trio); it
    listens while the block runs. For the blocking consumer, whose event loop
    runs in its own thread, use ``with FakeBroker().running_in_thread():``.

    Consumer-protocol groups get ``heartbeat_interval_ms`` and
    ``session_timeout_ms`` (the broker-side settings of the new protocol).
    ``versions`` overrides the advertised version ranges per API (default:
    kgroup's own ranges); the fake answers every version kio has.

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
    ) -> None:
        if nodes < 1:
            raise KgroupError(f"a fake cluster needs at least one node, got {nodes}")
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self.records = RecordLog()
        """The records of every partition; data planes from :meth:`dataplane` read them."""
        self._nodes = [_Node(n) for n in range(nodes)]
        self._versions = {api: SUPPORTED_VERSIONS[api] for api in _IMPLEMENTED}
        self._versions.update(versions or {})
        self._sweep_interval = sweep_interval
        self._lock = threading.RLock()
        self._changed_cond = threading.Condition(self._lock)
        self._changed_event: anyio.Event | None = None
        self._loop_thread: int | None = None
        self._topics = Topics()
        self._consumer_groups: dict[str, ConsumerGroup] = {}
        self._classic_groups: dict[str, ClassicGroup] = {}
        self._offsets: dict[str, dict[TopicPartition, int]] = {}
        self._coordinators: dict[str, int] = {}
        self._consumer_protocol = True
        self._hide_consumer_protocol = False
        self._interceptions: list[Interception] = []
        self._seen: list[SeenRequest] = []
        self._connections: dict[int, _Connection] = {}
        self._connection_ids = itertools.count(1)
        self._tg: anyio.abc.TaskGroup | None = None
        self.failures: list[Exception] = []
        """Exceptions the model raised while answering (raised again on exit)."""

    # ------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        if self._tg is not None:
            raise RuntimeError("a FakeBroker can be entered only once")
        self._loop_thread = threading.get_ident()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        try:
            for node in self._nodes:
                listener = await anyio.create_tcp_listener(local_host=_HOST, local_port=0)
                node.listener = listener
                node.port = listener.extra(SocketAttribute.local_port)
                tg.start_soon(self._listen, node)
            tg.start_soon(self._sweep)
        except BaseException:
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        tg, self._tg = self._tg, None
        if tg is None:
            return
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)
        if self.failures and exc is None:
            raise KgroupError(
                f"the fake broker failed {len(self.failures)} time(s); first: {self.failures[0]!r}"
            ) from self.failures[0]

    @contextlib.contextmanager
    def running_in_thread(self, backend: str = "asyncio") -> Iterator[Self]:
        """Serve from an event loop in a background thread while the block runs."""
        with (
            anyio.from_thread.start_blocking_portal(backend) as portal,
            portal.wrap_async_context_manager(self),
        ):
            yield self

    async def _listen(self, node: _Node) -> None:
        assert node.listener is not None
        async with node.listener:
            await node.listener.serve(lambda stream: self._serve(node.node_id, stream))

    async def _sweep(self) -> None:
        # The coordinator's timers (sessions, rebalance timeouts), checked on a
        # short period: the broker's internal clock, not test synchronisation.
        while True:
            await anyio.sleep(self._sweep_interval)
            now = self._now()
            with self._lock:
                changed = False
                for consumer_group in self._consumer_groups.values():
                    for member_id in consumer_group.expire(now):
                        log.info("group %s: member %s expired", consumer_group.group_id, member_id)
                        changed = True
                for classic_group in self._classic_groups.values():
                    for member_id in classic_group.expire(now):
                        log.info("group %s: member %s expired", classic_group.group_id, member_id)
                        changed = True
            if changed:
                self._changed()

    # --------------------------------------------------------------- cluster

    @property
    def node_ids(self) -> list[int]:
        """The node ids, 0 .. nodes - 1."""
        return [n.node_id for n in self._nodes]

    def address(self, node: int = 0) -> str:
        """``127.0.0.1:<port>`` of ``node`` (only once entered)."""
        return f"{_HOST}:{self._node(node).port}"

    @property
    def bootstrap_servers(self) -> str:
        """Every node's address, comma-separated."""
        return ",".join(self.address(n.node_id) for n in self._nodes)

    def _node(self, node: int) -> _Node:
        if not 0 <= node < len(self._nodes):
            raise KgroupError(f"the fake cluster has nodes 0..{len(self._nodes) - 1}, not {node}")
        return self._nodes[node]

    def create_topic(self, name: str, partitions: int = 1) -> uuid.UUID:
        """Create topic ``name`` (or grow it to ``partitions``); returns its id."""
        with self._lock:
            topic = self._topics.create(name, partitions)
            self.records.create(name, partitions)
            for group in self._consumer_groups.values():
                group.topics_changed(name)
        self._changed()
        return topic.topic_id

    def topic(self, name: str) -> FakeTopic:
        """Topic ``name``. Raises KgroupError if it does not exist."""
        with self._lock:
            found = self._topics.by_name.get(name)
        if found is None:
            raise KgroupError(f"the fake cluster has no topic {name!r}; create it first")
        return found

    def produce(
        self, topic: str, partition: int, value: bytes | None, *, key: bytes | None = None
    ) -> int:
        """Append a record to ``topic``-``partition``; returns its offset."""
        return self.records.append(topic, partition, value, key=key)

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
        :attr:`Verdict.DROP` or :attr:`Verdict.NO_ANSWER`.
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
        self._node(node)
        with self._lock:
            self._coordinators[group_id] = node
        self._changed()

    def coordinator(self, group_id: str) -> int:
        """The node coordinating ``group_id`` (node 0 unless moved)."""
        with self._lock:
            return self._coordinators.get(group_id, 0)

    def disable_consumer_protocol(self, *, hide_api: bool = False) -> None:
        """Answer ConsumerGroupHeartbeat / ConsumerGroupDescribe with UNSUPPORTED_VERSION.

        That is what a broker with ``group.coordinator.rebalance.protocols``
        lacking ``consumer`` does. With ``hide_api`` the two APIs are also left
        out of ApiVersions (an older broker).
        """
        with self._lock:
            self._consumer_protocol = False
            self._hide_consumer_protocol = hide_api

    def enable_consumer_protocol(self) -> None:
        """Undo :meth:`disable_consumer_protocol`."""
        with self._lock:
            self._consumer_protocol = True
            self._hide_consumer_protocol = False

    def remove_member(self, group_id: str, member_id: str) -> None:
        """Remove a member from a group of either protocol, as if its session expired.

        A consumer-protocol member then gets UNKNOWN_MEMBER_ID on its next
        heartbeat; a classic member on its next Heartbeat / SyncGroup.
        """
        with self._lock:
            consumer_group = self._consumer_groups.get(group_id)
            if consumer_group is not None and member_id in consumer_group.members:
                consumer_group.remove(member_id)
            classic_group = self._classic_groups.get(group_id)
            if classic_group is not None and member_id in classic_group.members:
                classic_group.remove(member_id, self._now())
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
            return self._consumer_groups.get(group_id)

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        """The classic group ``group_id`` (the live model object), if any."""
        with self._lock:
            return self._classic_groups.get(group_id)

    def committed(self, group_id: str) -> dict[TopicPartition, int]:
        """The offsets committed for ``group_id``."""
        with self._lock:
            return dict(self._offsets.get(group_id, {}))

    def assignment(self, group_id: str, member_id: str) -> frozenset[TopicPartition]:
        """What the coordinator currently gives ``member_id`` (either protocol's group).

        For a classic member that is not known from the bytes the leader sent,
        so only consumer-protocol groups are covered; classic ones return empty.
        """
        with self._lock:
            group = self._consumer_groups.get(group_id)
            member = None if group is None else group.members.get(member_id)
            if member is None:
                return frozenset()
            return frozenset(
                named for tp in member.assigned if (named := self._topics.name_of(tp)) is not None
            )

    # ---------------------------------------------------------------- waiting

    def _now(self) -> float:
        # The model's clock: monotonic, so that a test thread (running_in_thread)
        # and the broker's loop agree without asking the loop.
        return time.monotonic()

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
            at=self._now(),
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
        if outcome is None or outcome is Verdict.PASS:
            return await self._answer(seen)
        if isinstance(outcome, int):
            return self._error_response(seen, ErrorCode(outcome))
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

    # ------------------------------------------------------------------ model

    async def _answer(self, seen: SeenRequest) -> Any:
        api = seen.api_key
        if api == ApiKey.API_VERSIONS:
            return self._api_versions(seen)
        if api == ApiKey.METADATA:
            return self._metadata(seen)
        if api == ApiKey.FIND_COORDINATOR:
            return self._find_coordinator(seen)
        if api == ApiKey.CONSUMER_GROUP_DESCRIBE:
            return self._consumer_group_describe(seen)
        if api == ApiKey.OFFSET_FETCH:
            return self._offset_fetch(seen)
        group_id: str = seen.request.group_id
        if self.coordinator(group_id) != seen.node_id:
            return self._error_response(seen, ErrorCode.not_coordinator)
        if api == ApiKey.CONSUMER_GROUP_HEARTBEAT:
            return self._consumer_group_heartbeat(seen)
        if api == ApiKey.JOIN_GROUP:
            return await self._join_group(seen)
        if api == ApiKey.SYNC_GROUP:
            return await self._sync_group(seen)
        if api == ApiKey.HEARTBEAT:
            return self._heartbeat(seen)
        if api == ApiKey.LEAVE_GROUP:
            return self._leave_group(seen)
        if api == ApiKey.OFFSET_COMMIT:
            return self._offset_commit(seen)
        raise KafkaProtocolError(f"the fake broker does not implement API key {api}")

    def _module(self, seen: SeenRequest) -> Any:
        return response_module(seen.api_key, seen.version)

    def _api_versions(self, seen: SeenRequest) -> Any:
        ours = self._versions[ApiKey.API_VERSIONS]
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
        with self._lock:
            hidden = _CONSUMER_PROTOCOL_APIS if self._hide_consumer_protocol else ()
        entries = tuple(
            m.ApiVersion(api_key=int(api), min_version=r.min, max_version=r.max)
            for api, r in self._versions.items()
            if api not in hidden
        )
        return make(
            m,
            "ApiVersionsResponse",
            error_code=ErrorCode.none,
            api_keys=entries,
            throttle_time=timedelta_ms(0),
        )

    def _metadata(self, seen: SeenRequest) -> Any:
        m = self._module(seen)
        count = len(self._nodes)
        with self._lock:
            wanted = seen.request.topics
            if wanted is None:
                found: list[FakeTopic | str] = list(self._topics.by_name.values())
            else:
                found = []
                for asked in wanted:
                    known = self._topics.by_id.get(asked.topic_id) if asked.topic_id else None
                    known = known or self._topics.by_name.get(asked.name or "")
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
            partitions = tuple(
                make(
                    m,
                    "MetadataResponsePartition",
                    error_code=ErrorCode.none,
                    partition_index=p,
                    leader_id=p % count,
                    leader_epoch=0,
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
            make(m, "MetadataResponseBroker", node_id=n.node_id, host=_HOST, port=n.port, rack=None)
            for n in self._nodes
        )
        return make(
            m,
            "MetadataResponse",
            throttle_time=timedelta_ms(0),
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
            node = self._node(self.coordinator(key))
            coordinators.append(
                make(
                    m,
                    "Coordinator",
                    key=key,
                    node_id=node.node_id,
                    host=_HOST,
                    port=node.port,
                    error_code=ErrorCode.none,
                    error_message=None,
                )
            )
        return make(
            m,
            "FindCoordinatorResponse",
            throttle_time=timedelta_ms(0),
            coordinators=tuple(coordinators),
        )

    # ------------------------------------------------------ consumer protocol

    def _consumer_group_heartbeat(self, seen: SeenRequest) -> Any:
        request = seen.request
        with self._lock:
            if not self._consumer_protocol:
                return self._error_response(
                    seen,
                    ErrorCode.unsupported_version,
                    "The new consumer group protocol is not enabled.",
                )
            if (
                request.group_id in self._classic_groups
                and self._classic_groups[request.group_id].members
            ):
                return self._error_response(
                    seen,
                    ErrorCode.group_id_not_found,
                    "the fake broker does not convert classic groups",
                )
            group = self._consumer_groups.get(request.group_id)
            if group is None:
                if request.member_epoch != 0:
                    return self._error_response(seen, ErrorCode.unknown_member_id)
                group = ConsumerGroup(request.group_id, self.session_timeout_ms)
                self._consumer_groups[request.group_id] = group
            rebalance = millis(request.rebalance_timeout)
            outcome = group.heartbeat(
                HeartbeatInput(
                    member_id=request.member_id,
                    member_epoch=int(request.member_epoch),
                    instance_id=request.instance_id,
                    rack_id=request.rack_id,
                    client_id=seen.client_id or "",
                    rebalance_timeout_ms=rebalance if rebalance >= 0 else None,
                    subscribed_names=None
                    if request.subscribed_topic_names is None
                    else tuple(request.subscribed_topic_names),
                    regex=getattr(request, "subscribed_topic_regex", None),
                    assignor=request.server_assignor,
                    owned=None
                    if request.topic_partitions is None
                    else frozenset(
                        TopicIdPartition(t.topic_id, int(p))
                        for t in request.topic_partitions
                        for p in t.partitions
                    ),
                ),
                self._topics,
                self._now(),
            )
        if outcome.error is not ErrorCode.none:
            return self._error_response(seen, outcome.error, outcome.message)
        m = self._module(seen)
        assignment = None
        if outcome.assignment is not None:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for tp in sorted(outcome.assignment):
                by_topic.setdefault(tp.topic_id, []).append(tp.partition)
            assignment = m.Assignment(
                topic_partitions=tuple(
                    m.TopicPartitions(topic_id=t, partitions=tuple(ps))
                    for t, ps in by_topic.items()
                )
            )
        return m.ConsumerGroupHeartbeatResponse(
            throttle_time=timedelta_ms(0),
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
        with self._lock:
            for group_id in seen.request.group_ids:
                error: ErrorCode | None = None
                if not self._consumer_protocol:
                    error = ErrorCode.unsupported_version
                elif self.coordinator(group_id) != seen.node_id:
                    error = ErrorCode.not_coordinator
                elif group_id not in self._consumer_groups:
                    error = ErrorCode.group_id_not_found
                if error is not None:
                    groups.append(_described_error(m, group_id, error))
                    continue
                groups.append(self._described(m, self._consumer_groups[group_id]))
        return make(
            m, "ConsumerGroupDescribeResponse", throttle_time=timedelta_ms(0), groups=tuple(groups)
        )

    def _described(self, m: Any, group: ConsumerGroup) -> Any:
        def assignment(partitions: frozenset[TopicIdPartition]) -> Any:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for tp in sorted(partitions):
                by_topic.setdefault(tp.topic_id, []).append(tp.partition)
            return m.Assignment(
                topic_partitions=tuple(
                    m.TopicPartitions(
                        topic_id=t,
                        topic_name=self._topics.by_id[t].name if t in self._topics.by_id else "",
                        partitions=tuple(ps),
                    )
                    for t, ps in by_topic.items()
                )
            )

        members = tuple(
            make(
                m,
                "Member",
                member_id=member.member_id,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                member_epoch=member.epoch,
                client_id=member.client_id,
                client_host="/" + _HOST,
                subscribed_topic_names=member.subscribed_names,
                subscribed_topic_regex=member.regex,
                assignment=assignment(member.assigned),
                target_assignment=assignment(group.target.get(member.member_id, frozenset())),
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
        consumer_group = self._consumer_groups.get(group_id)
        if consumer_group is not None and consumer_group.members:
            return None
        group = self._classic_groups.get(group_id)
        if group is None:
            group = self._classic_groups[group_id] = ClassicGroup(group_id)
        return group

    async def _join_group(self, seen: SeenRequest) -> Any:
        request = seen.request
        event = anyio.Event()
        waiter: Pending[JoinResult] = Pending(event.set)
        with self._lock:
            group = self._classic(request.group_id)
            if group is None:
                return self._error_response(seen, ErrorCode.inconsistent_group_protocol)
            group.join(
                JoinInput(
                    member_id=request.member_id,
                    instance_id=request.group_instance_id,
                    client_id=seen.client_id or "consumer",
                    session_timeout_ms=millis(request.session_timeout),
                    rebalance_timeout_ms=millis(request.rebalance_timeout),
                    protocol_type=request.protocol_type,
                    protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
                ),
                self._now(),
                waiter,
            )
        self._changed()
        await event.wait()
        result = waiter.result
        assert result is not None
        m = self._module(seen)
        return make(
            m,
            "JoinGroupResponse",
            throttle_time=timedelta_ms(0),
            error_code=result.error,
            generation_id=result.generation_id,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            leader=result.leader,
            skip_assignment=False,
            member_id=result.member_id,
            members=tuple(
                make(
                    m,
                    "JoinGroupResponseMember",
                    member_id=member_id,
                    group_instance_id=instance_id,
                    metadata=metadata,
                )
                for member_id, instance_id, metadata in result.members
            ),
        )

    async def _sync_group(self, seen: SeenRequest) -> Any:
        request = seen.request
        event = anyio.Event()
        waiter: Pending[SyncResult] = Pending(event.set)
        with self._lock:
            group = self._classic_groups.get(request.group_id)
            if group is None:
                return self._error_response(seen, ErrorCode.unknown_member_id)
            group.sync(
                member_id=request.member_id,
                instance_id=request.group_instance_id,
                generation_id=int(request.generation_id),
                assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
                now=self._now(),
                waiter=waiter,
            )
        self._changed()
        await event.wait()
        result = waiter.result
        assert result is not None
        return make(
            self._module(seen),
            "SyncGroupResponse",
            throttle_time=timedelta_ms(0),
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    def _heartbeat(self, seen: SeenRequest) -> Any:
        request = seen.request
        with self._lock:
            group = self._classic_groups.get(request.group_id)
            code = (
                ErrorCode.unknown_member_id
                if group is None
                else group.heartbeat(
                    request.member_id,
                    request.group_instance_id,
                    int(request.generation_id),
                    self._now(),
                )
            )
        return make(
            self._module(seen), "HeartbeatResponse", throttle_time=timedelta_ms(0), error_code=code
        )

    def _leave_group(self, seen: SeenRequest) -> Any:
        m = self._module(seen)
        request = seen.request
        results = []
        with self._lock:
            group = self._classic_groups.get(request.group_id)
            for identity in request.members:
                code = (
                    ErrorCode.unknown_member_id
                    if group is None
                    else group.leave(identity.member_id, identity.group_instance_id, self._now())
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
        return make(
            m,
            "LeaveGroupResponse",
            throttle_time=timedelta_ms(0),
            error_code=ErrorCode.none,
            members=tuple(results),
        )

    # ---------------------------------------------------------------- offsets

    def _commit_error(
        self, group_id: str, member_id: str, instance_id: str | None, epoch: int
    ) -> ErrorCode:
        # Caller holds the lock.
        consumer_group = self._consumer_groups.get(group_id)
        if consumer_group is not None and consumer_group.members:
            if epoch < 0 and not member_id:
                return ErrorCode.unknown_member_id
            current = consumer_group.member_epoch(member_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if epoch > current:
                return ErrorCode.fenced_member_epoch
            if epoch < current:
                return ErrorCode.stale_member_epoch
            return ErrorCode.none
        classic_group = self._classic_groups.get(group_id)
        if classic_group is not None and classic_group.members:
            return classic_group.check_commit(member_id, instance_id, epoch)
        # An empty or unknown group takes commits from outside (epoch -1) only.
        return ErrorCode.none if epoch < 0 else ErrorCode.illegal_generation

    def _offset_commit(self, seen: SeenRequest) -> Any:
        m = self._module(seen)
        request = seen.request
        by_id = seen.version >= 10
        topics = []
        with self._lock:
            code = self._commit_error(
                request.group_id,
                request.member_id,
                request.group_instance_id,
                int(request.generation_id_or_member_epoch),
            )
            stored = self._offsets.setdefault(request.group_id, {})
            for topic in request.topics:
                found = (
                    self._topics.by_id.get(topic.topic_id)
                    if by_id
                    else self._topics.by_name.get(topic.name)
                )
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
        self._changed()
        return make(m, "OffsetCommitResponse", throttle_time=timedelta_ms(0), topics=tuple(topics))

    def _offset_fetch(self, seen: SeenRequest) -> Any:
        m = self._module(seen)
        by_id = seen.version >= 10
        groups = []
        with self._lock:
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
                stored = self._offsets.get(group_id, {})
                wanted: list[tuple[Any, FakeTopic | None, tuple[int, ...]]] = []
                if asked.topics is None:
                    for tp in sorted(stored):
                        wanted.append(
                            (tp.topic, self._topics.by_name.get(tp.topic), (tp.partition,))
                        )
                else:
                    for t in asked.topics:
                        found = (
                            self._topics.by_id.get(t.topic_id)
                            if by_id
                            else self._topics.by_name.get(t.name)
                        )
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
                            committed_leader_epoch=-1,
                            metadata="",
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
        return make(m, "OffsetFetchResponse", throttle_time=timedelta_ms(0), groups=tuple(groups))

    def _fetch_member_error(self, group_id: str, member_id: str, epoch: int) -> ErrorCode:
        consumer_group = self._consumer_groups.get(group_id)
        if consumer_group is None or not consumer_group.members:
            return ErrorCode.none  # classic groups do not check OffsetFetch's member
        current = consumer_group.member_epoch(member_id)
        if current is None:
            return ErrorCode.unknown_member_id
        if epoch != current:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    # ----------------------------------------------------------------- errors

    def _error_response(
        self, seen: SeenRequest, code: ErrorCode, message: str | None = None
    ) -> Any:
        """A response of ``seen``'s API and version carrying ``code`` wherever it has room."""
        m = self._module(seen)
        request = seen.request
        api = seen.api_key
        zero = timedelta_ms(0)
        if api == ApiKey.API_VERSIONS:
            return make(m, "ApiVersionsResponse", error_code=code, api_keys=(), throttle_time=zero)
        if api == ApiKey.METADATA:
            return make(
                m,
                "MetadataResponse",
                throttle_time=zero,
                brokers=(),
                cluster_id=None,
                controller_id=-1,
                topics=(),
                error_code=code,
            )
        if api == ApiKey.FIND_COORDINATOR:
            return make(
                m,
                "FindCoordinatorResponse",
                throttle_time=zero,
                coordinators=tuple(
                    make(
                        m,
                        "Coordinator",
                        key=key,
                        node_id=-1,
                        host="",
                        port=-1,
                        error_code=code,
                        error_message=message,
                    )
                    for key in request.coordinator_keys
                ),
            )
        if api == ApiKey.CONSUMER_GROUP_HEARTBEAT:
            return m.ConsumerGroupHeartbeatResponse(
                throttle_time=zero,
                error_code=code,
                error_message=message,
                member_id=request.member_id,
                member_epoch=-1,
                heartbeat_interval=timedelta_ms(0),
                assignment=None,
            )
        if api == ApiKey.CONSUMER_GROUP_DESCRIBE:
            return make(
                m,
                "ConsumerGroupDescribeResponse",
                throttle_time=zero,
                groups=tuple(_described_error(m, g, code) for g in request.group_ids),
            )
        if api == ApiKey.JOIN_GROUP:
            return make(
                m,
                "JoinGroupResponse",
                throttle_time=zero,
                error_code=code,
                generation_id=-1,
                protocol_type=None,
                protocol_name=None,
                leader="",
                skip_assignment=False,
                member_id=request.member_id,
                members=(),
            )
        if api == ApiKey.SYNC_GROUP:
            return make(
                m,
                "SyncGroupResponse",
                throttle_time=zero,
                error_code=code,
                protocol_type=None,
                protocol_name=None,
                assignment=b"",
            )
        if api == ApiKey.HEARTBEAT:
            return make(m, "HeartbeatResponse", throttle_time=zero, error_code=code)
        if api == ApiKey.LEAVE_GROUP:
            return make(m, "LeaveGroupResponse", throttle_time=zero, error_code=code, members=())
        if api == ApiKey.OFFSET_COMMIT:
            return make(
                m,
                "OffsetCommitResponse",
                throttle_time=zero,
                topics=tuple(
                    make(
                        m,
                        "OffsetCommitResponseTopic",
                        name=getattr(t, "name", None),
                        topic_id=getattr(t, "topic_id", None),
                        partitions=tuple(
                            make(
                                m,
                                "OffsetCommitResponsePartition",
                                partition_index=p.partition_index,
                                error_code=code,
                            )
                            for p in t.partitions
                        ),
                    )
                    for t in request.topics
                ),
            )
        if api == ApiKey.OFFSET_FETCH:
            return make(
                m,
                "OffsetFetchResponse",
                throttle_time=zero,
                groups=tuple(
                    make(
                        m,
                        "OffsetFetchResponseGroup",
                        group_id=g.group_id,
                        topics=(),
                        error_code=code,
                    )
                    for g in request.groups
                ),
            )
        raise KafkaProtocolError(f"the fake broker cannot answer API key {api}")


def _described_error(m: Any, group_id: str, code: ErrorCode) -> Any:
    return make(
        m,
        "DescribedGroup",
        error_code=code,
        error_message=None,
        group_id=group_id,
        group_state="",
        group_epoch=-1,
        assignment_epoch=-1,
        assignor_name="",
        members=(),
        authorized_operations=-(2**31),
    )
