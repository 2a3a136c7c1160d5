"""Transport layer against scripted in-process brokers, on asyncio and trio."""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v6.response import Coordinator, FindCoordinatorResponse
from kio.schema.metadata.v13 import response as metadata_v13
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta
from kio.static.protocol import ResponsePayload

from kgroup.errors import (
    ConfigError,
    KafkaConnectionError,
    MalformedResponseConnectionError,
    MalformedResponseError,
    NoBrokersAvailableError,
    NotCoordinatorError,
    RequestTimeoutError,
    UnsupportedVersionError,
)
from kgroup.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    RequestFrame,
    decode_request,
    encode_response,
    response_module,
)
from kgroup.protocol.apis import VersionRange
from kgroup.protocol.framing import frame_size
from kgroup.transport import (
    Backoff,
    BrokerConnection,
    ConnectionState,
    KafkaClient,
    SecurityConfig,
    SecurityProtocol,
    connect,
    open_stream,
    parse_bootstrap_servers,
)
from kgroup.transport import client as client_module
from kgroup.types import TopicPartition

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


FAST = Backoff(initial=0.001, maximum=0.01)


# --- a scripted broker ----------------------------------------------------------------


class FakeConnection:
    """The server side of one client connection."""

    def __init__(self, stream: anyio.abc.ByteStream, index: int = 0) -> None:
        self.stream = stream
        self.index = index
        self._lock = anyio.Lock()

    async def reply(self, frame: RequestFrame, response: ResponsePayload) -> None:
        await self.send_raw(encode_response(response, frame.header.correlation_id))

    async def send_raw(self, data: bytes) -> None:
        async with self._lock:
            await self.stream.send(data)

    async def close(self) -> None:
        await self.stream.aclose()


Handler = Callable[[FakeConnection, RequestFrame], Coroutine[Any, Any, None]]


class FakeBroker:
    """An in-process TCP server speaking just enough Kafka for one test.

    It answers ApiVersions itself (refusing versions above ``api_versions_max`` the
    way brokers do) and passes every other request to ``handler`` in a task of its
    own, so the handler decides when, whether and in what order to answer.
    """

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        node_id: int = 0,
        api_versions_max: int = 4,
        ranges: dict[int, VersionRange] | None = None,
    ) -> None:
        self.handler = handler
        self.node_id = node_id
        self.api_versions_max = api_versions_max
        self.ranges = ranges or {int(k): v for k, v in SUPPORTED_VERSIONS.items()}
        self.port = 0
        self.api_versions_seen: list[int] = []
        self.requests: list[RequestFrame] = []
        self.cluster: list[FakeBroker] = [self]
        self.accepted = 0
        # Connections (by index, from 1) whose requests are read and never answered,
        # ApiVersions included: a path that went half-open.
        self.muted: set[int] = set()
        # (connection index, API) of every request read, answered or not.
        self.arrivals: list[tuple[int, int]] = []
        # Connections the client closed (or that broke).
        self.ended = 0

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(SocketAttribute.local_port)
        task_group.start_soon(listener.serve, self._serve)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _serve(self, stream: anyio.abc.ByteStream) -> None:
        self.accepted += 1
        conn = FakeConnection(stream, self.accepted)
        reader = BufferedByteReceiveStream(stream)
        async with anyio.create_task_group() as tasks:
            try:
                while True:
                    prefix = await reader.receive_exactly(4)
                    body = await reader.receive_exactly(frame_size(prefix))
                    frame = decode_request(prefix + body)
                    self.arrivals.append((conn.index, int(frame.header.request_api_key)))
                    if conn.index in self.muted:
                        continue
                    if int(frame.header.request_api_key) == ApiKey.API_VERSIONS:
                        await self._api_versions(conn, frame)
                        continue
                    self.requests.append(frame)
                    assert self.handler is not None, f"unexpected {frame.request}"
                    tasks.start_soon(self.handler, conn, frame)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
                self.ended += 1
            except anyio.BrokenResourceError:
                self.ended += 1

    async def _api_versions(self, conn: FakeConnection, frame: RequestFrame) -> None:
        version = int(frame.header.request_api_version)
        self.api_versions_seen.append(version)
        if version > self.api_versions_max:
            module = response_module(ApiKey.API_VERSIONS, 0)
            entry = module.ApiVersion(
                api_key=i16(18), min_version=i16(0), max_version=i16(self.api_versions_max)
            )
            response: Any = module.ApiVersionsResponse(
                error_code=ErrorCode.unsupported_version, api_keys=(entry,)
            )
        else:
            module = response_module(ApiKey.API_VERSIONS, version)
            entries = tuple(
                module.ApiVersion(api_key=i16(k), min_version=i16(r.min), max_version=i16(r.max))
                for k, r in self.ranges.items()
            )
            fields: dict[str, Any] = {"error_code": ErrorCode.none, "api_keys": entries}
            if version >= 1:
                fields["throttle_time"] = _ms(0)
            response = module.ApiVersionsResponse(**fields)
        await conn.reply(frame, response)


def metadata_response(
    brokers: list[FakeBroker], topics: dict[str, tuple[uuid.UUID, int]] | None = None
) -> metadata_v13.MetadataResponse:
    """A Metadata v13 answer listing ``brokers`` and ``topics`` (name -> (id, partitions))."""
    return metadata_v13.MetadataResponse(
        throttle_time=_ms(0),
        brokers=tuple(
            metadata_v13.MetadataResponseBroker(
                node_id=BrokerId(b.node_id), host="127.0.0.1", port=i32(b.port)
            )
            for b in brokers
        ),
        cluster_id="fake",
        controller_id=BrokerId(brokers[0].node_id),
        error_code=ErrorCode.none,
        topics=tuple(
            metadata_v13.MetadataResponseTopic(
                error_code=ErrorCode.none,
                name=TopicName(name),
                topic_id=topic_id,
                partitions=tuple(
                    metadata_v13.MetadataResponsePartition(
                        error_code=ErrorCode.none,
                        partition_index=i32(p),
                        leader_id=BrokerId(brokers[p % len(brokers)].node_id),
                        replica_nodes=(BrokerId(brokers[0].node_id),),
                    )
                    for p in range(count)
                ),
            )
            for name, (topic_id, count) in (topics or {}).items()
        ),
    )


def find_coordinator_response(
    key: str, broker: FakeBroker | None, error: ErrorCode = ErrorCode.none
) -> FindCoordinatorResponse:
    return FindCoordinatorResponse(
        throttle_time=_ms(0),
        coordinators=(
            Coordinator(
                key=key,
                node_id=BrokerId(broker.node_id if broker else -1),
                host="127.0.0.1" if broker else "",
                port=i32(broker.port if broker else -1),
                error_code=error,
                error_message=None,
            ),
        ),
    )


def find_coordinator(key: str) -> FindCoordinatorRequest:
    return FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(key,))


def heartbeat(member_epoch: int = 0) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id=GroupId("g"),
        member_id="m",
        member_epoch=i32(member_epoch),
        rebalance_timeout=_ms(1000),
        subscribed_topic_names=(TopicName("t"),),
        topic_partitions=(),
    )


def heartbeat_response(error: ErrorCode, epoch: int) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time=_ms(0),
        error_code=error,
        member_id="m",
        member_epoch=i32(epoch),
        heartbeat_interval=_ms(100),
    )


@asynccontextmanager
async def brokers(*fakes: FakeBroker) -> AsyncIterator[anyio.abc.TaskGroup]:
    async with anyio.create_task_group() as task_group:
        for fake in fakes:
            await fake.start(task_group)
            fake.cluster = list(fakes)
        yield task_group
        task_group.cancel_scope.cancel()


async def answer_metadata(conn: FakeConnection, frame: RequestFrame, fake: FakeBroker) -> None:
    await conn.reply(frame, metadata_response(fake.cluster))


def metadata_broker(node_id: int = 0) -> FakeBroker:
    """A scripted broker answering Metadata (listing its cluster), and no other request."""

    async def handler(conn: FakeConnection, frame: RequestFrame) -> None:
        await answer_metadata(conn, frame, fake)

    fake = FakeBroker(handler, node_id=node_id)
    return fake


def silent_broker(node_id: int = 0) -> FakeBroker:
    """A scripted broker that accepts connections and answers nothing, ApiVersions included."""
    fake = FakeBroker(node_id=node_id)
    fake.muted.update(range(1, 100))
    return fake


# --- connections ----------------------------------------------------------------------


async def test_responses_out_of_order_reach_their_requests() -> None:
    arrived: list[tuple[FakeConnection, RequestFrame]] = []
    all_arrived = anyio.Event()

    async def reverse_order(conn: FakeConnection, frame: RequestFrame) -> None:
        arrived.append((conn, frame))
        if len(arrived) == 3:
            all_arrived.set()
            for c, f in reversed(arrived):
                key = f.request.coordinator_keys[0]  # type: ignore[union-attr]
                await c.reply(f, find_coordinator_response(key, fake))

    fake = FakeBroker(reverse_order)
    results: dict[str, str] = {}
    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:

        async def ask(key: str) -> None:
            response: Any = await conn.request(find_coordinator(key))
            results[key] = response.coordinators[0].key

        async with anyio.create_task_group() as tg:
            for key in ("a", "b", "c"):
                tg.start_soon(ask, key)
        assert all_arrived.is_set()
    assert results == {"a": "a", "b": "b", "c": "c"}
    sent_order = [f.request.coordinator_keys[0] for f in fake.requests]  # type: ignore[union-attr]
    assert sorted(sent_order) == ["a", "b", "c"]


async def test_many_concurrent_requests_share_one_connection() -> None:
    async def echo(conn: FakeConnection, frame: RequestFrame) -> None:
        key = frame.request.coordinator_keys[0]  # type: ignore[union-attr]
        await conn.reply(frame, find_coordinator_response(key, fake))

    fake = FakeBroker(echo)
    keys = [f"group-{i}" for i in range(100)]
    seen: list[str] = []
    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:

        async def ask(key: str) -> None:
            response: Any = await conn.request(find_coordinator(key))
            assert response.coordinators[0].key == key
            seen.append(key)

        async with anyio.create_task_group() as tg:
            for key in keys:
                tg.start_soon(ask, key)
        assert conn.in_flight == 0
    assert sorted(seen) == sorted(keys)


async def test_request_timeout_closes_the_connection_and_fails_its_other_requests() -> None:
    async def never_answer(conn: FakeConnection, frame: RequestFrame) -> None:
        pass

    fake = FakeBroker(never_answer)
    failures: dict[str, BaseException] = {}
    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:

        async def ask(key: str, timeout: float) -> None:
            try:
                await conn.request(find_coordinator(key), timeout=timeout)
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                failures[key] = exc

        with anyio.fail_after(5):  # "patient" fails with "hasty", long before its own timeout
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, "patient", 60)
                tg.start_soon(ask, "hasty", 0.2)
        assert isinstance(failures["hasty"], RequestTimeoutError)
        assert type(failures["patient"]) is KafkaConnectionError
        assert "timed out" in str(failures["patient"])
        assert conn.closed
        with pytest.raises(KafkaConnectionError):
            await conn.request(find_coordinator("later"))


async def test_cancelled_request_then_late_response_is_discarded() -> None:
    release = anyio.Event()
    late_sent = anyio.Event()
    slow_arrived = anyio.Event()

    async def slow_then_fast(conn: FakeConnection, frame: RequestFrame) -> None:
        key = frame.request.coordinator_keys[0]  # type: ignore[union-attr]
        if key == "slow":
            slow_arrived.set()
            await release.wait()
            await conn.reply(frame, find_coordinator_response(key, fake))
            late_sent.set()
        else:
            await conn.reply(frame, find_coordinator_response(key, fake))

    fake = FakeBroker(slow_then_fast)
    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:
        async with anyio.create_task_group() as tg:
            tg.start_soon(conn.request, find_coordinator("slow"))
            await slow_arrived.wait()
            tg.cancel_scope.cancel()
        release.set()
        await late_sent.wait()
        # The late answer is on the wire ahead of this one; it must be skipped.
        response: Any = await conn.request(find_coordinator("fast"))
        assert response.coordinators[0].key == "fast"
        assert conn.state is ConnectionState.READY


async def test_connection_drop_fails_every_in_flight_request() -> None:
    arrived: list[RequestFrame] = []

    async def drop_after_two(conn: FakeConnection, frame: RequestFrame) -> None:
        arrived.append(frame)
        if len(arrived) == 2:
            await conn.close()

    fake = FakeBroker(drop_after_two)
    failures: list[BaseException] = []
    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:

        async def ask(key: str) -> None:
            try:
                await conn.request(find_coordinator(key), timeout=10)
            except KafkaConnectionError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "a")
            tg.start_soon(ask, "b")
        assert len(failures) == 2
        assert conn.closed
        with pytest.raises(KafkaConnectionError):
            await conn.request(find_coordinator("c"))


async def test_malformed_response_fails_retriably_and_closes_the_connection() -> None:
    unanswered = anyio.Event()

    async def garbage_then_good(conn: FakeConnection, frame: RequestFrame) -> None:
        key = frame.request.coordinator_keys[0]  # type: ignore[union-attr]
        if key == "bad":
            body = frame.header.correlation_id.to_bytes(4, "big", signed=True) + b"\0\xff\xff"
            await conn.send_raw(len(body).to_bytes(4, "big") + body)
        elif key == "good":
            await conn.reply(frame, find_coordinator_response(key, fake))
        else:
            unanswered.set()

    fake = FakeBroker(garbage_then_good)
    failures: dict[str, BaseException] = {}
    async with brokers(fake):
        async with connect("127.0.0.1", fake.port) as conn:

            async def ask(key: str) -> None:
                try:
                    await conn.request(find_coordinator(key), timeout=30)
                except KafkaConnectionError as exc:
                    failures[key] = exc

            with anyio.fail_after(5):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ask, "unanswered")
                    await unanswered.wait()
                    tg.start_soon(ask, "bad")
            with pytest.raises(MalformedResponseError, match="FindCoordinator v6"):
                raise failures["bad"]
            assert isinstance(failures["bad"], MalformedResponseConnectionError)
            assert type(failures["unanswered"]) is KafkaConnectionError
            assert conn.closed
        async with connect("127.0.0.1", fake.port) as conn:
            response: Any = await conn.request(find_coordinator("good"))
            assert response.coordinators[0].key == "good"


async def test_api_versions_handshake_falls_back_for_older_broker() -> None:
    fake = FakeBroker(api_versions_max=2)
    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:
        assert fake.api_versions_seen == [4, 2]
        assert conn.versions.version(ApiKey.METADATA) == 13


async def test_negotiated_versions_follow_the_broker() -> None:
    ranges = {int(k): v for k, v in SUPPORTED_VERSIONS.items()}
    ranges[ApiKey.METADATA] = VersionRange(0, 11)
    del ranges[ApiKey.CONSUMER_GROUP_HEARTBEAT]
    fake = FakeBroker(ranges=ranges)
    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:
        assert conn.versions.version(ApiKey.METADATA) == 11
        assert not conn.versions.supports(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        with pytest.raises(UnsupportedVersionError, match="ConsumerGroupHeartbeat v1"):
            await conn.request(heartbeat())
    assert fake.requests == []  # refused before sending


async def test_incomplete_or_unknown_security_is_a_config_error() -> None:
    # SASL without a mechanism kgroup implements (librdkafka's default is GSSAPI).
    with pytest.raises(ConfigError, match="SASL_SSL"):
        await open_stream("127.0.0.1", 1, SecurityConfig(SecurityProtocol.SASL_SSL), timeout=1)
    with pytest.raises(ConfigError, match="sasl.mechanism"):
        KafkaClient(
            "127.0.0.1:1", security=SecurityConfig.from_config({"security.protocol": "sasl_ssl"})
        )
    with pytest.raises(ConfigError, match=r"security\.protocol"):
        SecurityConfig.from_config({"security.protocol": "tls"})


async def test_authenticator_runs_after_handshake() -> None:
    fake = FakeBroker()
    calls: list[int] = []

    async def authenticator(conn: BrokerConnection) -> None:
        calls.append(conn.versions.version(ApiKey.API_VERSIONS))

    async with brokers(fake), connect("127.0.0.1", fake.port, authenticator=authenticator):
        assert calls == [4]


# --- the cluster client ---------------------------------------------------------------


async def _dead_address() -> str:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(SocketAttribute.local_port)
    await listener.aclose()
    return f"127.0.0.1:{port}"


async def test_bootstrap_skips_a_dead_server(caplog: pytest.LogCaptureFixture) -> None:
    fake = metadata_broker(node_id=7)
    dead = await _dead_address()
    caplog.set_level(logging.WARNING, logger="kgroup.transport")
    async with brokers(fake), KafkaClient(f"{dead},{fake.address}") as client:
        assert set(client.cluster.brokers) == {7}
    assert any(dead in r.getMessage() for r in caplog.records)


async def _until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(10):  # bounded: a bug fails the test, never hangs it
        while not condition():
            await anyio.sleep(0.005)


async def test_bootstrap_does_not_wait_for_a_server_that_never_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A listener that accepts and then says nothing (a hung broker, a load balancer
    # without a backend) held every start for the whole connect timeout, per such
    # server, before the next one was tried.
    monkeypatch.setattr(client_module, "BOOTSTRAP_STAGGER", 0.05)
    silent, live = silent_broker(node_id=1), metadata_broker(node_id=7)
    async with brokers(silent, live):
        # Far below the connect (and request) timeout: waiting for it fails the test.
        with anyio.fail_after(20):
            async with KafkaClient(
                f"{silent.address},{live.address}", connect_timeout=600, request_timeout=600
            ) as c:
                assert set(c.cluster.brokers) == {1, 7}
                assert live.requests  # the Metadata request went to the live server
                # The silent server's attempt was dropped: its connection closed.
                await _until(lambda: silent.ended == 1)
        assert silent.arrivals == [(1, ApiKey.API_VERSIONS)]


async def test_bootstrap_tries_the_next_server_only_once_the_first_is_slow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Long enough that the first server's answer always comes first.
    monkeypatch.setattr(client_module, "BOOTSTRAP_STAGGER", 60.0)
    first, second = metadata_broker(node_id=1), metadata_broker(node_id=2)
    async with brokers(first, second):
        async with KafkaClient(f"{first.address},{second.address}") as c:
            assert set(c.cluster.brokers) == {1, 2}
        assert first.accepted == 1
        assert second.accepted == 0


async def test_bootstrap_with_a_silent_and_a_dead_server_fails_at_the_connect_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client_module, "BOOTSTRAP_STAGGER", 0.05)
    silent = silent_broker(node_id=1)
    dead = await _dead_address()
    async with brokers(silent):
        with pytest.raises(NoBrokersAvailableError) as info:
            async with KafkaClient([silent.address, dead], connect_timeout=0.5):
                pass
    assert silent.address in str(info.value)
    assert "handshake" in str(info.value)
    assert dead in str(info.value)


async def test_bootstrap_with_every_server_dead_lists_each_failure() -> None:
    first, second = await _dead_address(), await _dead_address()
    with pytest.raises(NoBrokersAvailableError) as info:
        async with KafkaClient([first, second], connect_timeout=2):
            pass
    assert first in str(info.value)
    assert second in str(info.value)


async def test_metadata_cache_maps_names_ids_partitions_and_leaders() -> None:
    topic_id = uuid.uuid4()

    async def handler(conn: FakeConnection, frame: RequestFrame) -> None:
        topics = frame.request.topics  # type: ignore[union-attr]
        described = {"orders": (topic_id, 3)} if topics else {}
        await conn.reply(frame, metadata_response(fake.cluster, described))

    fake = FakeBroker(handler, node_id=1)
    other = FakeBroker(handler, node_id=2)
    async with brokers(fake, other), KafkaClient(fake.address) as client:
        meta = await client.metadata(["orders"])
        assert meta.topic_id("orders") == topic_id
        assert meta.topic_name(topic_id) == "orders"
        assert meta.partition_count("orders") == 3
        leader = meta.leader(TopicPartition("orders", 1))
        assert leader is not None
        assert leader.node_id == 2
        assert leader.port == other.port
        assert client.cluster is meta
        # Refreshing brokers only keeps what is known about topics.
        assert (await client.metadata(())).partition_count("orders") == 3


async def test_coordinator_rediscovered_on_not_coordinator() -> None:
    lookups: list[int] = []

    async def handler(conn: FakeConnection, frame: RequestFrame, me: FakeBroker) -> None:
        request: Any = frame.request
        if int(frame.header.request_api_key) == ApiKey.METADATA:
            await answer_metadata(conn, frame, me)
        elif int(frame.header.request_api_key) == ApiKey.FIND_COORDINATOR:
            lookups.append(1)
            # First the group lives on node 1, then it has moved to node 2.
            target = first if len(lookups) == 1 else second
            await conn.reply(frame, find_coordinator_response(request.coordinator_keys[0], target))
        elif me is first:
            await conn.reply(frame, heartbeat_response(ErrorCode.not_coordinator, -1))
        else:
            await conn.reply(frame, heartbeat_response(ErrorCode.none, 5))

    first = FakeBroker(lambda c, f: handler(c, f, first), node_id=1)
    second = FakeBroker(lambda c, f: handler(c, f, second), node_id=2)
    async with brokers(first, second), KafkaClient(first.address, backoff=FAST) as client:
        assert (await client.coordinator("g")).node_id == 1
        response: Any = await client.coordinator_request("g", heartbeat())
        assert response.member_epoch == 5
        assert (await client.coordinator("g")).node_id == 2
    assert len(lookups) == 2
    heartbeats = [
        f
        for f in first.requests
        if int(f.header.request_api_key) == ApiKey.CONSUMER_GROUP_HEARTBEAT
    ]
    assert len(heartbeats) == 1


async def test_coordinator_lookup_retries_coordinator_not_available() -> None:
    answers = [ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress]

    async def handler(conn: FakeConnection, frame: RequestFrame) -> None:
        request: Any = frame.request
        if int(frame.header.request_api_key) == ApiKey.METADATA:
            await answer_metadata(conn, frame, fake)
            return
        key = request.coordinator_keys[0]
        if answers:
            await conn.reply(frame, find_coordinator_response(key, None, answers.pop(0)))
        else:
            await conn.reply(frame, find_coordinator_response(key, fake))

    fake = FakeBroker(handler, node_id=3)
    async with brokers(fake), KafkaClient(fake.address, backoff=FAST) as client:
        assert (await client.coordinator("g")).node_id == 3
    assert answers == []


async def test_coordinator_lookup_gives_up_on_fatal_error_and_after_deadline() -> None:
    async def handler(conn: FakeConnection, frame: RequestFrame) -> None:
        request: Any = frame.request
        if int(frame.header.request_api_key) == ApiKey.METADATA:
            await answer_metadata(conn, frame, fake)
            return
        key = request.coordinator_keys[0]
        error = ErrorCode.not_coordinator if key == "moving" else ErrorCode.invalid_group_id
        await conn.reply(frame, find_coordinator_response(key, None, error))

    fake = FakeBroker(handler)
    async with brokers(fake), KafkaClient(fake.address, backoff=FAST) as client:
        with pytest.raises(NotCoordinatorError):
            await client.coordinator("moving", timeout=0.1)
        with pytest.raises(Exception, match="INVALID_GROUP_ID"):
            await client.coordinator("bad")


async def test_mark_coordinator_stale_forces_a_new_lookup() -> None:
    lookups: list[str] = []

    async def handler(conn: FakeConnection, frame: RequestFrame) -> None:
        request: Any = frame.request
        if int(frame.header.request_api_key) == ApiKey.METADATA:
            await answer_metadata(conn, frame, fake)
            return
        lookups.append(request.coordinator_keys[0])
        await conn.reply(frame, find_coordinator_response(request.coordinator_keys[0], fake))

    fake = FakeBroker(handler)
    async with brokers(fake), KafkaClient(fake.address) as client:
        await client.coordinator("g")
        await client.coordinator("g")
        assert lookups == ["g"]
        client.mark_coordinator_stale("g")
        await client.coordinator("g")
        assert lookups == ["g", "g"]


async def coordinator_handler(conn: FakeConnection, frame: RequestFrame, me: FakeBroker) -> None:
    """Metadata, FindCoordinator (``me`` is the coordinator) and heartbeats (epoch 5)."""
    request: Any = frame.request
    api = int(frame.header.request_api_key)
    if api == ApiKey.METADATA:
        await answer_metadata(conn, frame, me)
    elif api == ApiKey.FIND_COORDINATOR:
        await conn.reply(frame, find_coordinator_response(request.coordinator_keys[0], me))
    else:
        await conn.reply(frame, heartbeat_response(ErrorCode.none, 5))


async def test_client_never_reuses_a_connection_whose_request_timed_out() -> None:
    fake = FakeBroker(lambda c, f: coordinator_handler(c, f, fake), node_id=1)
    async with brokers(fake), KafkaClient(fake.address) as client:
        first = await client.connection(1)
        fake.muted.add(fake.accepted)
        with pytest.raises(RequestTimeoutError):
            await client.request(heartbeat(), node=1, timeout=0.2)
        assert first.closed
        response: Any = await client.request(heartbeat(), node=1)
        assert response.member_epoch == 5
        second = await client.connection(1)
        assert second is not first
        assert not second.closed


async def test_request_to_any_broker_moves_on_from_a_silent_connection() -> None:
    fake = FakeBroker(lambda c, f: coordinator_handler(c, f, fake), node_id=1)
    async with brokers(fake), KafkaClient(fake.address, request_timeout=0.3) as client:
        bootstrap = fake.accepted  # the connection the client bootstrapped over
        fake.muted.add(bootstrap)
        assert set((await client.metadata(())).brokers) == {1}
        # Asked once over the silent connection, then over a new one; and the
        # silent one is never chosen again.
        await client.metadata(())
        on_silent = [api for index, api in fake.arrivals if index == bootstrap]
        # ApiVersions and Metadata of the bootstrap, then the Metadata that timed out.
        assert on_silent == [ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.METADATA]
        assert fake.arrivals[-1] == (fake.accepted, ApiKey.METADATA)
        assert fake.accepted > bootstrap


async def test_rediscovery_after_a_partition_heals_uses_fresh_connections() -> None:
    fake = FakeBroker(lambda c, f: coordinator_handler(c, f, fake), node_id=1)
    async with brokers(fake), KafkaClient(fake.address, request_timeout=1, backoff=FAST) as client:
        assert (await client.coordinator("g")).node_id == 1
        response: Any = await client.coordinator_request("g", heartbeat())
        assert response.member_epoch == 5
        # A partition: every connection the client has goes silent and stays open.
        partitioned = set(range(1, fake.accepted + 1))
        fake.muted.update(partitioned)
        with pytest.raises(RequestTimeoutError):
            await client.coordinator_request("g", heartbeat())
        # Healed: new connections work. What the runtime does after a failed
        # heartbeat: look the coordinator up again, heartbeat again.
        assert (await client.coordinator("g", refresh=True)).node_id == 1
        response = await client.coordinator_request("g", heartbeat())
        assert response.member_epoch == 5
    silent = [api for index, api in fake.arrivals if index in partitioned]
    after = fake.arrivals[len(fake.arrivals) - 2 :]
    assert silent[-1] == ApiKey.CONSUMER_GROUP_HEARTBEAT  # only the one that timed out
    assert silent.count(ApiKey.CONSUMER_GROUP_HEARTBEAT) == 2
    assert [api for _, api in after] == [ApiKey.FIND_COORDINATOR, ApiKey.CONSUMER_GROUP_HEARTBEAT]
    assert all(index not in partitioned for index, _ in after)


async def test_mark_coordinator_stale_closes_the_connection_to_it() -> None:
    fake = FakeBroker(lambda c, f: coordinator_handler(c, f, fake), node_id=1)
    async with brokers(fake), KafkaClient(fake.address) as client:
        await client.coordinator("g")
        await client.coordinator_request("g", heartbeat())
        old = await client.connection(1)
        client.mark_coordinator_stale("g")
        assert old.closed
        await client.coordinator("g")
        assert fake.arrivals[-1] == (fake.accepted, ApiKey.FIND_COORDINATOR)
        assert (await client.connection(1)) is not old


def test_parse_bootstrap_servers() -> None:
    assert parse_bootstrap_servers("a:1, b:2,[::1]:3") == [("a", 1), ("b", 2), ("::1", 3)]
    for bad in ("", "a", "a:x", "a:0", ":9"):
        with pytest.raises(ConfigError):
            parse_bootstrap_servers(bad)


async def test_errors_in_the_body_propagate_unwrapped() -> None:
    fake = metadata_broker()
    async with brokers(fake):
        with pytest.raises(KeyError):
            async with connect("127.0.0.1", fake.port):
                raise KeyError("mine")
        with pytest.raises(KeyError):
            async with KafkaClient(fake.address):
                raise KeyError("mine")


async def test_cancelled_request_leaves_no_trace() -> None:
    never_arrived = anyio.Event()

    async def answer_only_fast(conn: FakeConnection, frame: RequestFrame) -> None:
        key = frame.request.coordinator_keys[0]  # type: ignore[union-attr]
        if key == "fast":
            await conn.reply(frame, find_coordinator_response(key, fake))
        else:
            never_arrived.set()

    fake = FakeBroker(answer_only_fast)
    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(conn.request, find_coordinator("never"))
                await never_arrived.wait()
                assert conn.in_flight == 1
                scope.cancel()
        assert conn.in_flight == 0
        response: Any = await conn.request(find_coordinator("fast"))
        assert response.coordinators[0].key == "fast"


# --- requests without a task (send_now, asyncio's own transport) ---------------------


def _on_asyncio(anyio_backend: str) -> bool:
    return anyio_backend == "asyncio"


async def test_send_now_answers_through_its_callback_on_asyncio(anyio_backend: str) -> None:
    async def echo(conn: FakeConnection, frame: RequestFrame) -> None:
        key = frame.request.coordinator_keys[0]  # type: ignore[union-attr]
        await conn.reply(frame, find_coordinator_response(key, fake))

    fake = FakeBroker(echo)
    outcomes: list[tuple[Any, BaseException | None]] = []
    done = anyio.Event()

    def on_done(response: Any, error: BaseException | None) -> None:
        outcomes.append((response, error))
        done.set()

    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:
        sent = conn.send_now(find_coordinator("a"), on_done)
        # Only a plaintext connection on asyncio reads in the transport's callback;
        # on trio the caller sends through request() instead.
        assert sent is _on_asyncio(anyio_backend)
        if not sent:
            assert fake.requests == []
            return
        with anyio.fail_after(5):
            await done.wait()
        ((response, error),) = outcomes
        assert error is None
        assert response.coordinators[0].key == "a"
        assert conn.in_flight == 0
        # The connection goes on serving awaited requests.
        again: Any = await conn.request(find_coordinator("b"))
        assert again.coordinators[0].key == "b"


async def _send_now_error(conn: BrokerConnection, timeout: float) -> BaseException | None:
    """Send with send_now and wait for its callback; the error it was called with.

    None at once when send_now cannot send (not on asyncio's own transport).
    """
    errors: list[BaseException | None] = []
    done = anyio.Event()

    def on_done(response: Any, error: BaseException | None) -> None:
        assert response is None
        errors.append(error)
        done.set()

    if not conn.send_now(find_coordinator("a"), on_done, timeout=timeout):
        return None
    with anyio.fail_after(5):
        await done.wait()
    (error,) = errors
    return error


async def test_send_now_without_an_answer_times_out_and_closes_the_connection(
    anyio_backend: str,
) -> None:
    async def never_answer(conn: FakeConnection, frame: RequestFrame) -> None:
        pass

    fake = FakeBroker(never_answer)
    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:
        error = await _send_now_error(conn, 0.1)
        if not _on_asyncio(anyio_backend):
            assert error is None  # trio: nothing was sent
            return
        assert isinstance(error, RequestTimeoutError)
        assert "no response within 0.1s" in str(error)
        assert conn.closed
        assert not conn.send_now(find_coordinator("b"), lambda response, error: None)


async def test_send_now_reports_a_dropped_connection(anyio_backend: str) -> None:
    async def drop(conn: FakeConnection, frame: RequestFrame) -> None:
        await conn.close()

    fake = FakeBroker(drop)
    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:
        error = await _send_now_error(conn, 10)
        if not _on_asyncio(anyio_backend):
            assert error is None
            return
        assert type(error) is KafkaConnectionError
        assert "closed by the broker" in str(error)
        assert conn.closed


async def test_send_now_checks_the_version_before_sending(anyio_backend: str) -> None:
    # A broker whose ConsumerGroupHeartbeat stops at v0: the v1 request is refused
    # before anything goes out, as request() refuses it.
    ranges = {int(k): v for k, v in SUPPORTED_VERSIONS.items()}
    ranges[int(ApiKey.CONSUMER_GROUP_HEARTBEAT)] = VersionRange(0, 0)
    fake = FakeBroker(ranges=ranges)
    async with brokers(fake), connect("127.0.0.1", fake.port) as conn:
        if not _on_asyncio(anyio_backend):
            return
        with pytest.raises(UnsupportedVersionError):
            conn.send_now(heartbeat(), lambda response, error: None)
        assert fake.requests == []
        assert conn.in_flight == 0
