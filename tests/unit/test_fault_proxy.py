"""kgroup.testing.proxy against the in-process fake broker, on asyncio and trio.

The fake broker speaks the real wire protocol, which is all the proxy needs;
tests/integration/test_proxy.py repeats the essentials with a real broker.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.static.primitive import i8

from kgroup.errors import (
    KafkaConnectionError,
    MalformedResponseConnectionError,
    MalformedResponseError,
    RequestTimeoutError,
)
from kgroup.protocol import ApiKey, encode_request
from kgroup.protocol.framing import frame_size
from kgroup.testing.fake import FakeBroker
from kgroup.testing.proxy import FaultProxy
from kgroup.transport import KafkaClient, connect

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


@asynccontextmanager
async def cluster(nodes: int = 2) -> AsyncIterator[tuple[FakeBroker, FaultProxy]]:
    async with FakeBroker(nodes=nodes) as broker, FaultProxy(broker.bootstrap_servers) as proxy:
        yield broker, proxy


def find_coordinator(key: str = "g") -> FindCoordinatorRequest:
    return FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(key,))


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


async def test_broker_addresses_in_responses_point_at_the_proxy() -> None:
    async with cluster() as (broker, proxy), KafkaClient(proxy.bootstrap_servers) as client:
        real_ports = {port_of(broker.address(n)) for n in broker.node_ids}
        listed = client.cluster.brokers
        assert set(listed) == set(broker.node_ids)
        assert {a.port for a in listed.values()} <= proxy.ports
        assert not {a.port for a in listed.values()} & real_ports
        coordinator = await client.coordinator("g")
        assert coordinator.port in proxy.ports
        assert proxy.address(coordinator.node_id) == f"127.0.0.1:{coordinator.port}"
        forwarded = proxy.stats().forwarded
        assert forwarded[ApiKey.METADATA] >= 1
        assert forwarded[ApiKey.FIND_COORDINATOR] == 1
        assert proxy.errors == []


async def test_every_connection_of_a_client_goes_through_the_proxy() -> None:
    async with cluster() as (broker, proxy), KafkaClient(proxy.bootstrap_servers) as client:
        for node in broker.node_ids:
            conn = await client.connection(node)
            assert conn.port in proxy.ports
            await conn.request(find_coordinator())
        upstreams = {c.upstream for c in proxy.connections()}
        assert upstreams == {broker.address(n) for n in broker.node_ids}
        assert {c.client_id for c in proxy.connections()} == {"kgroup"}


async def test_blackhole_times_requests_out_and_heal_restores_service() -> None:
    async with cluster() as (_, proxy), KafkaClient(proxy.bootstrap_servers) as client:
        conn = await client.connection(0)
        proxy.blackhole()
        with pytest.raises(RequestTimeoutError):
            await conn.request(find_coordinator(), timeout=0.3)
        assert proxy.stats().dropped[ApiKey.FIND_COORDINATOR] == 1
        # New connections are accepted and swallowed too: the handshake times out.
        with pytest.raises(RequestTimeoutError):
            async with connect("127.0.0.1", port_of(proxy.address(1)), request_timeout=0.3):
                pass
        assert proxy.stats().dropped[ApiKey.API_VERSIONS] == 1
        proxy.heal()
        response: Any = await client.request(find_coordinator(), node=0, timeout=5)
        assert response.coordinators[0].key == "g"


async def test_heal_closes_the_connections_the_blackhole_silenced() -> None:
    async with cluster() as (_, proxy):
        raw = await anyio.connect_tcp("127.0.0.1", port_of(proxy.bootstrap_servers))
        async with raw:
            # One round trip, so the proxy has surely accepted this connection.
            await raw.send(encode_request(find_coordinator(), 1, "raw"))
            reader = BufferedByteReceiveStream(raw)
            await reader.receive_exactly(frame_size(await reader.receive_exactly(4)))
            proxy.blackhole()
            (silenced,) = proxy.connections()
            assert silenced.zombie
            assert silenced.client_id == "raw"
            proxy.heal()
            with anyio.fail_after(5), pytest.raises(anyio.EndOfStream):
                await reader.receive()


async def test_half_open_keeps_the_old_connections_silent_and_open() -> None:
    async with cluster() as (_, proxy):
        port = port_of(proxy.bootstrap_servers)
        async with connect("127.0.0.1", port, request_timeout=5) as old:
            proxy.blackhole()
            proxy.half_open()
            assert [c.zombie for c in proxy.connections()] == [True]
            async with connect("127.0.0.1", port, request_timeout=5) as new:
                response: Any = await new.request(find_coordinator())
                assert response.coordinators[0].key == "g"
            # Not closed (that would be a KafkaConnectionError): silent.
            with pytest.raises(RequestTimeoutError):
                await old.request(find_coordinator(), timeout=0.3)


async def test_cut_closes_connections_and_refuses_new_ones_until_heal() -> None:
    async with cluster() as (_, proxy):
        port = port_of(proxy.bootstrap_servers)
        async with connect("127.0.0.1", port) as conn:
            proxy.cut()
            with pytest.raises(KafkaConnectionError):
                await conn.request(find_coordinator(), timeout=5)
            with pytest.raises(KafkaConnectionError):
                async with connect("127.0.0.1", port, request_timeout=5):
                    pass
        proxy.heal()
        async with connect("127.0.0.1", port) as conn:
            response: Any = await conn.request(find_coordinator())
            assert response.coordinators[0].key == "g"


async def test_delay_holds_every_frame_back() -> None:
    async with (
        cluster() as (_, proxy),
        connect("127.0.0.1", port_of(proxy.bootstrap_servers)) as conn,
    ):
        proxy.delay(0.2)
        started = anyio.current_time()
        await conn.request(find_coordinator())
        assert anyio.current_time() - started >= 0.4  # request and response, 0.2 s each
        proxy.delay(0)
        with anyio.fail_after(0.39):
            await conn.request(find_coordinator())


async def test_throttle_limits_the_bytes_per_second() -> None:
    async with (
        cluster() as (_, proxy),
        connect("127.0.0.1", port_of(proxy.bootstrap_servers)) as conn,
    ):
        proxy.throttle(1000)
        started = anyio.current_time()
        for key in ("a" * 100, "b" * 100, "c" * 100):
            await conn.request(find_coordinator(key))
        # Every frame either way is over 100 bytes: 0.1 s each at 1000 bytes/s.
        assert anyio.current_time() - started >= 0.6
        assert proxy.stats().answered[ApiKey.FIND_COORDINATOR] == 3


async def test_corrupt_sends_one_malformed_response_to_the_chosen_api() -> None:
    async with cluster() as (_, proxy), KafkaClient(proxy.bootstrap_servers) as client:
        proxy.corrupt(ApiKey.FIND_COORDINATOR)
        conn = await client.connection(0)
        with pytest.raises(MalformedResponseConnectionError, match="FindCoordinator v6"):
            await conn.request(find_coordinator())
        assert conn.closed
        response: Any = await client.request(find_coordinator(), node=0)
        assert response.coordinators[0].key == "g"
        assert proxy.stats().corrupted == {ApiKey.FIND_COORDINATOR: 1}


async def test_corrupt_with_the_frame_of_issue_10() -> None:
    def huge_array(payload: bytes) -> bytes:
        # The real correlation id, then issue 10's bytes: no header tags, a
        # throttle time, and an array count of ~3.1e10 (the varint ffffffff74).
        return payload[:4] + bytes.fromhex("000000059affffffff74")

    async with cluster() as (_, proxy), KafkaClient(proxy.bootstrap_servers) as client:
        proxy.corrupt(ApiKey.FIND_COORDINATOR, make=huge_array)
        conn = await client.connection(0)
        with pytest.raises(MalformedResponseError, match="field coordinators: array length"):
            await conn.request(find_coordinator())


async def test_faults_can_target_one_broker() -> None:
    async with cluster() as (_, proxy), KafkaClient(proxy.bootstrap_servers) as client:
        await client.connection(1)
        proxy.blackhole(nodes=[1])
        with pytest.raises(RequestTimeoutError):
            await client.request(find_coordinator(), node=1, timeout=0.3)
        response: Any = await client.request(find_coordinator(), node=0, timeout=5)
        assert response.coordinators[0].key == "g"


def test_a_proxy_in_a_thread_is_driven_from_another_thread() -> None:
    broker = FakeBroker(nodes=1)
    with (
        broker.running_in_thread(),
        FaultProxy(broker.bootstrap_servers).running_in_thread() as proxy,
    ):

        async def main() -> None:
            async with KafkaClient(proxy.bootstrap_servers) as client:
                await client.request(find_coordinator(), node=0)
                proxy.blackhole()
                with pytest.raises(RequestTimeoutError):
                    await client.request(find_coordinator(), node=0, timeout=0.3)
                proxy.heal()
                response: Any = await client.request(find_coordinator(), node=0, timeout=5)
                assert response.coordinators[0].key == "g"

        anyio.run(main)


async def test_fault_methods_from_a_foreign_thread_are_refused_without_a_portal() -> None:
    async with cluster(nodes=1) as (_, proxy):
        with pytest.raises(RuntimeError, match="running_in_thread"):
            await anyio.to_thread.run_sync(proxy.blackhole)
        assert not proxy.connections()
