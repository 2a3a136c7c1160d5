"""A fault-injecting TCP proxy in front of a Kafka cluster, on loopback: ``kgroup.testing.proxy``.

Give a client ``proxy.bootstrap_servers`` instead of the broker's, and every
connection it makes goes through the proxy: Kafka clients learn broker
addresses from Metadata and FindCoordinator responses, so the proxy rewrites
the addresses in those (decoded and re-encoded with kio) to listeners of its
own, one per broker. Then, at any moment::

    proxy.cut()          # close every connection, both sides; refuse new ones
    proxy.blackhole()    # accept and read everything, forward nothing, close nothing
    proxy.half_open()    # the network heals, but the connections of the blackhole
                         # stay open to the client and keep swallowing its bytes
    proxy.delay(0.2)     # forward every frame 200 ms late
    proxy.throttle(10_000)             # at most 10 kB/s each way, per connection
    proxy.corrupt(ApiKey.METADATA)     # the next Metadata response is malformed
    proxy.heal()         # all of it ends; connections that lost bytes are closed

A proxy serves one client or many: for faults that hit one member only,
give each member a proxy of its own. Faults may be limited to some brokers
(``nodes=``), e.g. the group coordinator.

Use it as ``async with FaultProxy(bootstrap) as proxy:`` in async tests (asyncio
or trio) or ``with FaultProxy(bootstrap).running_in_thread() as proxy:`` next
to a blocking consumer; the fault methods may be called from any thread.

The proxy works on whole Kafka frames (a size prefix and that many bytes), so
it serves PLAINTEXT listeners only. What it does not rewrite: the leader
endpoints of KIP-951 in Fetch and Produce responses (a client that follows one
connects to the broker directly).
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import logging
import math
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Final

import anyio
import anyio.abc
import anyio.from_thread
from anyio.abc import SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from kio.static.primitive import i32

from kgroup.errors import HarnessError, KgroupError
from kgroup.protocol.apis import ApiKey, response_class
from kgroup.protocol.framing import SIZE_PREFIX, decode_response_payload, encode_response
from kgroup.testing._served import LoopServed
from kgroup.transport.client import parse_bootstrap_servers

__all__ = ["FaultProxy", "ProxyConnection", "ProxyStats"]

log = logging.getLogger("kgroup.testing.proxy")

_HOST: Final = "127.0.0.1"
_REQUEST_HEAD: Final = struct.Struct(">hhi")  # api key, api version, correlation id
_SIZE: Final = struct.Struct(">i")

_REWRITTEN: Final = frozenset({ApiKey.METADATA, ApiKey.FIND_COORDINATOR, 60})
"""APIs whose responses carry broker addresses (60: DescribeCluster)."""


def truncate_last_byte(payload: bytes) -> bytes:
    """The default corruption: the response without its last byte.

    Always malformed: an encoding is read the same way every time, so reading a
    shortened one needs the missing byte.
    """
    return payload[:-1]


class _Mode(enum.Enum):
    NORMAL = "normal"
    CUT = "cut"
    BLACKHOLE = "blackhole"


@dataclasses.dataclass(frozen=True, slots=True)
class ProxyConnection:
    """One client connection through the proxy (see :meth:`FaultProxy.connections`).

    Attributes:
        connection_id: numbered from 1 in the order they were accepted.
        node_id: the broker it leads to (None: a bootstrap address not yet
            seen in any Metadata response).
        upstream: ``host:port`` of that broker.
        client_id: the client id of its first request (None before one arrived).
        zombie: it lost bytes to a blackhole: nothing it carries is forwarded.
        upstream_port: the local port of the proxy's connection to the broker
            (None: no upstream connection, as for connections accepted during a
            blackhole).
    """

    connection_id: int
    node_id: int | None
    upstream: str
    client_id: str | None
    zombie: bool
    upstream_port: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class ProxyStats:
    """Counters of what went through a proxy, by API key.

    Attributes:
        accepted: client connections accepted.
        forwarded: requests forwarded to a broker.
        dropped: requests read and dropped (blackhole, zombie connections).
        answered: responses forwarded to a client.
        lost: responses read from a broker and dropped.
        corrupted: responses replaced by malformed ones.
    """

    accepted: int
    forwarded: dict[int, int]
    dropped: dict[int, int]
    answered: dict[int, int]
    lost: dict[int, int]
    corrupted: dict[int, int]


@dataclasses.dataclass(eq=False)
class _Corruption:
    api_key: int
    remaining: int | None
    make: Callable[[bytes], bytes]
    nodes: frozenset[int] | None


@dataclasses.dataclass(eq=False)
class _Listener:
    upstream: tuple[str, int]
    listener: anyio.abc.Listener[anyio.abc.SocketStream]
    port: int
    node_id: int | None = None

    @property
    def upstream_address(self) -> str:
        return f"{self.upstream[0]}:{self.upstream[1]}"


@dataclasses.dataclass(eq=False)
class _Link:
    connection_id: int
    listener: _Listener
    client: anyio.abc.SocketStream
    scope: anyio.CancelScope = dataclasses.field(default_factory=anyio.CancelScope)
    upstream: anyio.abc.SocketStream | None = None
    upstream_scope: anyio.CancelScope = dataclasses.field(default_factory=anyio.CancelScope)
    upstream_port: int | None = None
    zombie: bool = False
    client_id: str | None = None
    # Correlation id -> (api key, version) of each forwarded request awaiting its response.
    pending: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict)


class FaultProxy(LoopServed):
    """A proxy in front of the cluster at ``bootstrap_servers``; see the module docstring.

    Raises ConfigError (from :func:`kgroup.transport.parse_bootstrap_servers`) on
    a malformed ``bootstrap_servers``.
    """

    def __init__(self, bootstrap_servers: str) -> None:
        super().__init__()
        self._bootstrap = parse_bootstrap_servers(bootstrap_servers)
        self._listeners: dict[tuple[str, int], _Listener] = {}
        self._links: dict[int, _Link] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # guards the counters read from other threads
        self._mode = _Mode.NORMAL
        self._mode_nodes: frozenset[int] | None = None
        self._delay = 0.0
        self._delay_nodes: frozenset[int] | None = None
        self._rate: float | None = None
        self._rate_nodes: frozenset[int] | None = None
        self._corruptions: list[_Corruption] = []
        self._accepted = 0
        self._forwarded: Counter[int] = Counter()
        self._dropped: Counter[int] = Counter()
        self._answered: Counter[int] = Counter()
        self._lost: Counter[int] = Counter()
        self._corrupted: Counter[int] = Counter()
        self.errors: list[str] = []
        """Responses the proxy could not rewrite (forwarded unchanged)."""

    # ------------------------------------------------------------- lifecycle

    async def _start(self, tg: anyio.abc.TaskGroup) -> None:
        for address in self._bootstrap:
            await self._listener_for(address)

    def _control(self, change: Callable[[], None]) -> None:
        # Fault methods change state the proxy's loop reads and cancel its scopes:
        # run them on that loop, whichever thread calls.
        if self._tg is None:
            raise RuntimeError("the FaultProxy is not running")
        if threading.get_ident() == self._loop_thread:
            change()
        elif self._portal is not None:
            self._portal.call(change)
        else:
            raise RuntimeError(
                "call a FaultProxy's fault methods from the thread of the event loop it "
                "runs on, or run it with running_in_thread()"
            )

    # ------------------------------------------------------------- addresses

    @property
    def bootstrap_servers(self) -> str:
        """The proxy's addresses of the bootstrap servers, for the client's config."""
        with self._lock:
            return ",".join(f"{_HOST}:{self._listeners[a].port}" for a in self._bootstrap)

    def address(self, node_id: int) -> str:
        """The proxy's ``host:port`` for broker ``node_id`` (once a response named it).

        Raises:
            HarnessError: no Metadata or FindCoordinator response named that node yet.
        """
        with self._lock:
            entries = list(self._listeners.values())
        for entry in entries:
            if entry.node_id == node_id:
                return f"{_HOST}:{entry.port}"
        raise HarnessError(f"the proxy has not seen broker {node_id} in any response yet")

    @property
    def ports(self) -> frozenset[int]:
        """Every port the proxy listens on."""
        with self._lock:
            return frozenset(entry.port for entry in self._listeners.values())

    async def _listener_for(self, upstream: tuple[str, int]) -> _Listener:
        entry = self._listeners.get(upstream)
        if entry is not None:
            return entry
        assert self._tg is not None
        listener = await anyio.create_tcp_listener(local_host=_HOST, local_port=0)
        entry = self._listeners.get(upstream)
        if entry is not None:  # another task made one while this one awaited
            await listener.aclose()
            return entry
        entry = _Listener(upstream, listener, listener.extra(SocketAttribute.local_port))
        with self._lock:
            self._listeners[upstream] = entry
        self._tg.start_soon(self._listen, entry)
        log.debug("proxy :%d -> %s", entry.port, entry.upstream_address)
        return entry

    async def _listen(self, entry: _Listener) -> None:
        async with entry.listener:
            await entry.listener.serve(lambda stream: self._serve(entry, stream))

    # ------------------------------------------------------------- faults

    def cut(self, *, nodes: Iterable[int] | None = None) -> None:
        """Close every connection (to ``nodes``, default all), both sides, and close
        new ones as soon as they are accepted, until :meth:`heal`."""
        chosen = _nodes(nodes)

        def change() -> None:
            self._mode, self._mode_nodes = _Mode.CUT, chosen
            for link in list(self._links.values()):
                if _hits(chosen, link):
                    link.scope.cancel()

        self._control(change)

    def blackhole(self, *, nodes: Iterable[int] | None = None) -> None:
        """From now on read everything and forward nothing, either way, and close
        nothing: connections (to ``nodes``, default all) go silent, new ones are
        accepted and go silent too. The clients see requests time out."""
        chosen = _nodes(nodes)

        def change() -> None:
            self._mode, self._mode_nodes = _Mode.BLACKHOLE, chosen
            for link in self._links.values():
                if _hits(chosen, link):
                    link.zombie = True

        self._control(change)

    def half_open(self) -> None:
        """Heal the network but leave the blackhole's connections half-open.

        New connections are forwarded again. The connections that went silent stay
        open to their clients and keep swallowing what they send, while the
        proxy's side towards the broker is closed — what a client sees when a
        partition heals after the broker has given up on its connections.
        """

        def change() -> None:
            self._mode, self._mode_nodes = _Mode.NORMAL, None
            for link in self._links.values():
                if link.zombie:
                    link.upstream_scope.cancel()

        self._control(change)

    def delay(self, seconds: float, *, nodes: Iterable[int] | None = None) -> None:
        """Forward every frame, either way, ``seconds`` after it arrived (0 to stop)."""
        if seconds < 0 or not math.isfinite(seconds):
            raise ValueError(f"delay must be a non-negative number of seconds, got {seconds}")
        chosen = _nodes(nodes)

        def change() -> None:
            self._delay, self._delay_nodes = seconds, chosen

        self._control(change)

    def throttle(
        self, bytes_per_second: float | None, *, nodes: Iterable[int] | None = None
    ) -> None:
        """Forward at most ``bytes_per_second`` each way per connection (None to stop)."""
        if bytes_per_second is not None and not bytes_per_second > 0:
            raise ValueError(f"throttle needs a positive rate, got {bytes_per_second}")
        chosen = _nodes(nodes)

        def change() -> None:
            self._rate, self._rate_nodes = bytes_per_second, chosen

        self._control(change)

    def corrupt(
        self,
        api: ApiKey | int,
        *,
        count: int | None = 1,
        make: Callable[[bytes], bytes] = truncate_last_byte,
        nodes: Iterable[int] | None = None,
    ) -> None:
        """Replace the next ``count`` responses (None: all) to ``api`` requests by
        ``make(payload)``: ``payload`` is the real response after its size prefix
        (correlation id first); the proxy writes the size prefix of the result.
        The default cuts off the last byte, which is always malformed."""
        if count is not None and count < 1:
            raise ValueError(f"count must be positive or None, got {count}")
        rule = _Corruption(int(api), count, make, _nodes(nodes))
        self._control(lambda: self._corruptions.append(rule))

    def heal(self) -> None:
        """End every fault: forward again, no delay, no throttle, no corruption.

        Connections that lost bytes to a blackhole are closed (both sides): a
        stream with a hole cannot be resumed.
        """

        def change() -> None:
            self._mode, self._mode_nodes = _Mode.NORMAL, None
            self._delay, self._delay_nodes, self._rate, self._rate_nodes = 0.0, None, None, None
            self._corruptions.clear()
            for link in self._links.values():
                if link.zombie:
                    link.scope.cancel()

        self._control(change)

    # ------------------------------------------------------------- views

    def connections(self) -> list[ProxyConnection]:
        """The client connections open now."""
        with self._lock:
            links = list(self._links.values())
        return [
            ProxyConnection(
                connection_id=link.connection_id,
                node_id=link.listener.node_id,
                upstream=link.listener.upstream_address,
                client_id=link.client_id,
                zombie=link.zombie,
                upstream_port=link.upstream_port,
            )
            for link in links
        ]

    def stats(self) -> ProxyStats:
        """What went through so far."""
        with self._lock:
            return ProxyStats(
                accepted=self._accepted,
                forwarded=dict(self._forwarded),
                dropped=dict(self._dropped),
                answered=dict(self._answered),
                lost=dict(self._lost),
                corrupted=dict(self._corrupted),
            )

    # ------------------------------------------------------------- forwarding

    def _mode_for(self, link: _Link) -> _Mode:
        return self._mode if _hits(self._mode_nodes, link) else _Mode.NORMAL

    async def _serve(self, entry: _Listener, client: anyio.abc.SocketStream) -> None:
        link = _Link(next(self._ids), entry, client)
        with self._lock:
            self._accepted += 1
            self._links[link.connection_id] = link
        try:
            with link.scope:
                mode = self._mode_for(link)
                if mode is _Mode.CUT:
                    return
                if mode is _Mode.BLACKHOLE:
                    link.zombie = True
                else:
                    try:
                        link.upstream = await anyio.connect_tcp(*entry.upstream)
                        link.upstream_port = link.upstream.extra(SocketAttribute.local_port)
                    except OSError as exc:
                        log.info("proxy: %s unreachable: %s", entry.upstream_address, exc)
                        return
                await self._pump(link)
        finally:
            with self._lock:
                self._links.pop(link.connection_id, None)
            with anyio.CancelScope(shield=True):
                await client.aclose()
                if link.upstream is not None:
                    await link.upstream.aclose()

    async def _pump(self, link: _Link) -> None:
        to_broker_send, to_broker_receive = anyio.create_memory_object_stream[tuple[float, bytes]](
            math.inf
        )
        to_client_send, to_client_receive = anyio.create_memory_object_stream[tuple[float, bytes]](
            math.inf
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._from_client, link, to_broker_send)
            tg.start_soon(self._to_client, link, to_client_receive)
            if link.upstream is not None:
                tg.start_soon(self._upstream, link, to_broker_receive, to_client_send)

    async def _upstream(
        self,
        link: _Link,
        to_broker: MemoryObjectReceiveStream[tuple[float, bytes]],
        to_client: MemoryObjectSendStream[tuple[float, bytes]],
    ) -> None:
        # The proxy's side towards the broker, in a scope of its own so that
        # half_open() can close it while the client's side stays open.
        assert link.upstream is not None
        upstream = link.upstream
        with link.upstream_scope:
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._to_broker, link, to_broker)
                    tg.start_soon(self._from_broker, link, to_client)
            finally:
                with anyio.CancelScope(shield=True):
                    await upstream.aclose()

    def _due(self, link: _Link) -> float:
        delay = self._delay if _hits(self._delay_nodes, link) else 0.0
        return anyio.current_time() + delay

    async def _from_client(
        self, link: _Link, out: MemoryObjectSendStream[tuple[float, bytes]]
    ) -> None:
        reader = _FrameReader(link.client)
        async with out:
            while (frame := await reader.read()) is not None:
                if len(frame) < SIZE_PREFIX + _REQUEST_HEAD.size:
                    continue
                api, version, correlation_id = _REQUEST_HEAD.unpack_from(frame, SIZE_PREFIX)
                if link.client_id is None:
                    link.client_id = _client_id(frame)
                if link.zombie or link.upstream is None:
                    self._count(self._dropped, api)
                    continue
                link.pending[correlation_id] = (api, version)
                self._count(self._forwarded, api)
                await out.send((self._due(link), frame))
        # The client closed its side.
        link.scope.cancel()

    async def _to_broker(
        self, link: _Link, frames: MemoryObjectReceiveStream[tuple[float, bytes]]
    ) -> None:
        assert link.upstream is not None
        await self._deliver(link, frames, link.upstream)

    async def _from_broker(
        self, link: _Link, out: MemoryObjectSendStream[tuple[float, bytes]]
    ) -> None:
        assert link.upstream is not None
        reader = _FrameReader(link.upstream)
        async with out:
            while (frame := await reader.read()) is not None:
                correlation_id = _SIZE.unpack_from(frame, SIZE_PREFIX)[0] if len(frame) >= 8 else -1
                api, version = link.pending.pop(correlation_id, (-1, -1))
                if link.zombie:
                    self._count(self._lost, api)
                    continue
                frame = await self._answer(link, api, version, correlation_id, frame)
                self._count(self._answered, api)
                await out.send((self._due(link), frame))
        if not link.zombie:
            # The broker closed its side: so does the proxy, as a network would.
            link.scope.cancel()

    async def _to_client(
        self, link: _Link, frames: MemoryObjectReceiveStream[tuple[float, bytes]]
    ) -> None:
        await self._deliver(link, frames, link.client)

    async def _deliver(
        self,
        link: _Link,
        frames: MemoryObjectReceiveStream[tuple[float, bytes]],
        stream: anyio.abc.ByteSendStream,
    ) -> None:
        async with frames:
            async for due, frame in frames:
                wait = due - anyio.current_time()
                if wait > 0:
                    await anyio.sleep(wait)
                rate = self._rate if _hits(self._rate_nodes, link) else None
                if rate:
                    # A slow link: a frame takes its size / rate to get through, and
                    # the frames behind it wait their turn.
                    await anyio.sleep(len(frame) / rate)
                if link.zombie:
                    continue
                try:
                    await stream.send(frame)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    link.scope.cancel()
                    return

    async def _answer(
        self, link: _Link, api: int, version: int, correlation_id: int, frame: bytes
    ) -> bytes:
        for rule in self._corruptions:
            if rule.api_key == api and _hits(rule.nodes, link):
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining == 0:
                        self._corruptions.remove(rule)
                self._count(self._corrupted, api)
                payload = rule.make(frame[SIZE_PREFIX:])
                return _SIZE.pack(len(payload)) + payload
        if api in _REWRITTEN:
            return await self._rewrite(api, version, correlation_id, frame)
        return frame

    async def _rewrite(self, api: int, version: int, correlation_id: int, frame: bytes) -> bytes:
        try:
            cls = response_class(api, version)
            response = decode_response_payload(frame[SIZE_PREFIX:], cls, correlation_id).response
        except (KeyError, KgroupError) as exc:
            self.errors.append(f"api {api} v{version}: {exc}")
            log.warning("proxy: cannot rewrite a response of api %d v%d: %s", api, version, exc)
            return frame
        found: dict[tuple[str, int], int | None] = {}
        _collect_addresses(response, found)
        ports: dict[tuple[str, int], int] = {}
        for upstream, node_id in found.items():
            entry = await self._listener_for(upstream)
            if node_id is not None and node_id >= 0:
                entry.node_id = node_id
            ports[upstream] = entry.port
        return encode_response(_replace_addresses(response, ports), correlation_id)

    def _count(self, counter: Counter[int], api: int) -> None:
        with self._lock:
            counter[api] += 1


# ----------------------------------------------------------------- helpers


class _FrameReader:
    """Whole Kafka frames (size prefix included) from a stream; None at its end."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self._reader = BufferedByteReceiveStream(stream)

    async def read(self) -> bytes | None:
        try:
            prefix = await self._reader.receive_exactly(SIZE_PREFIX)
            (size,) = _SIZE.unpack(prefix)
            if size < 0:
                return None  # not Kafka: stop forwarding this connection
            return prefix + await self._reader.receive_exactly(size)
        except (
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
        ):
            return None


def _nodes(nodes: Iterable[int] | None) -> frozenset[int] | None:
    return None if nodes is None else frozenset(nodes)


def _hits(nodes: frozenset[int] | None, link: _Link) -> bool:
    return nodes is None or link.listener.node_id in nodes


def _client_id(frame: bytes) -> str | None:
    # Request headers v1 and v2 both carry the client id as a legacy nullable string
    # right after the api key, version and correlation id.
    at = SIZE_PREFIX + _REQUEST_HEAD.size
    if len(frame) < at + 2:
        return None
    (length,) = struct.unpack_from(">h", frame, at)
    if length < 0:
        return None
    return frame[at + 2 : at + 2 + length].decode("utf-8", "replace")


def _address_of(entity: Any) -> tuple[str, int, int | None] | None:
    host = getattr(entity, "host", None)
    port = getattr(entity, "port", None)
    if not isinstance(host, str) or not isinstance(port, int) or not host or port < 0:
        return None
    node = getattr(entity, "node_id", getattr(entity, "broker_id", None))
    return host, port, node if isinstance(node, int) else None


def _collect_addresses(value: Any, found: dict[tuple[str, int], int | None]) -> None:
    if isinstance(value, tuple):
        for item in value:
            _collect_addresses(item, found)
        return
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return
    address = _address_of(value)
    if address is not None:
        host, port, node = address
        found[(host, port)] = node
    for field in dataclasses.fields(value):
        _collect_addresses(getattr(value, field.name), found)


def _replace_addresses(value: Any, ports: dict[tuple[str, int], int]) -> Any:
    if isinstance(value, tuple):
        return tuple(_replace_addresses(item, ports) for item in value)
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(value):
        old = getattr(value, field.name)
        new = _replace_addresses(old, ports)
        if new is not old:
            changes[field.name] = new
    address = _address_of(value)
    if address is not None and (address[0], address[1]) in ports:
        changes["host"] = _HOST
        changes["port"] = i32(ports[(address[0], address[1])])
    return dataclasses.replace(value, **changes) if changes else value
