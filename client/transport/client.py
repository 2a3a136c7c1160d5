"""The cluster client: bootstrap, pooled broker connections, metadata, coordinators."""

from __future__ import annotations

import logging
import random as _random
from collections.abc import Callable, Iterable, Sequence

import anyio
import anyio.abc
from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup import config_keys as keys
from kgroup.config_security import SecurityConfig, explain_denial
from kgroup.error_codes import ErrorCode, Trait, codes_with, error_name
from kgroup.errors import (
    BrokerError,
    ConfigError,
    KafkaConnectionError,
    KgroupError,
    NoBrokersAvailableError,
    RequestTimeoutError,
    SecurityError,
)
from kgroup.protocol.cluster import BrokerAddress, ClusterMetadata
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests import find_coordinator, metadata
from kgroup.transport._tasks import OwnedTaskGroup, TaskGroupOwner
from kgroup.transport.connection import BrokerConnection, ConnectionSettings, open_connection
from kgroup.transport.sasl import SaslAuthenticator
from kgroup.transport.security import Authenticator
from kgroup.types import Backoff

__all__ = ["COORDINATOR_MOVED", "KafkaClient", "RequestBuilder", "parse_bootstrap_servers"]

log = logging.getLogger("kgroup.transport.client")

RequestBuilder = Callable[[NegotiatedVersions], RequestPayload]
"""Builds a request from the versions negotiated with the broker it will go to."""

COORDINATOR_MOVED = codes_with(Trait.COORDINATOR_MOVED)
"""Error codes saying a group's coordinator moved (:meth:`KafkaClient.coordinator_request`
follows them)."""

BOOTSTRAP_STAGGER = 0.5
"""Seconds a bootstrap server may take to connect before the next one is tried alongside.

A server that refuses fails at once and the next is tried at once; one that
never answers (a stopped host whose address drops packets, a listener that
accepts and hangs) held the whole bootstrap for the connection timeout (10 s
by default, per such server, on every start and every reconnection round).
Now the next server is tried after this long while the first attempt goes on;
the first connection made is used and the others are dropped (Happy
Eyeballs, RFC 8305, across the listed servers). A healthy handshake (TCP,
TLS, SASL, ApiVersions: up to six round trips) takes milliseconds in a
data centre; on a link slow enough to need more than this, the second
attempt costs the brokers one extra handshake at start."""


class _Bootstrapped:
    """The first of several bootstrap attempts that connected (see :meth:`KafkaClient._race`)."""

    def __init__(self) -> None:
        self.server: tuple[str, int] | None = None
        self.conn: BrokerConnection | None = None
        self.failed: list[tuple[str, int]] = []
        self.refused: SecurityError | None = None


def parse_bootstrap_servers(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"a:9092,b:9093"`` (or a list of ``host:port``) as ``(host, port)`` pairs.

    IPv6 hosts are written in brackets (``[::1]:9092``).

    Raises:
        ConfigError: empty, or an entry without a valid port.
    """
    entries = servers.split(",") if isinstance(servers, str) else list(servers)
    result: list[tuple[str, int]] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        host, sep, port_text = entry.rpartition(":")
        if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ConfigError(f"bootstrap.servers entry {entry!r} is not host:port")
        result.append((host.strip("[]"), int(port_text)))
    if not result:
        raise ConfigError("bootstrap.servers is empty")
    return result


class KafkaClient(TaskGroupOwner["KafkaClient"]):
    """Connections to a Kafka cluster, as an async context manager.

    Entering bootstraps: the listed servers are tried in order until one
    answers ApiVersions and Metadata (each failure is logged; if all fail,
    :class:`~kgroup.errors.NoBrokersAvailableError` lists them); a server that
    has not connected within :data:`BOOTSTRAP_STAGGER` gets the next one tried
    alongside it. The client
    owns a task group with one reader task per open connection; leaving closes
    every connection.

    Example::

        async with KafkaClient("localhost:9092") as client:
            meta = await client.metadata(["orders"])
            coordinator = await client.coordinator("my-group")
            response = await client.request(some_kio_request, node=coordinator.node_id)
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str | None = keys.CLIENT_ID.default,
        request_timeout: float = keys.REQUEST_TIMEOUT_MS.default / 1000,
        connect_timeout: float = keys.SOCKET_CONNECTION_SETUP_TIMEOUT_MS.default / 1000,
        backoff: Backoff | None = None,
        security: SecurityConfig | None = None,
        authenticator: Authenticator | None = None,
        random: Callable[[], float] = _random.random,
    ) -> None:
        """Raises ConfigError on bad servers or TLS files that do not load.

        ``security`` secures every connection (TLS, and SASL through a
        :class:`~kgroup.transport.sasl.SaslAuthenticator` unless ``authenticator``
        is given). Security failures are raised as
        :class:`~kgroup.errors.SecurityError`, never retried.
        """
        self.bootstrap_servers = parse_bootstrap_servers(bootstrap_servers)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.backoff = backoff or Backoff()
        self.security = security or SecurityConfig()
        if authenticator is None and self.security.protocol.uses_sasl:
            assert self.security.sasl is not None
            authenticator = SaslAuthenticator(self.security.sasl)
        # Built once for every connection of the pool: loading CAs and keys is
        # the slow part of a TLS connect.
        self._settings = ConnectionSettings(
            client_id=client_id,
            security=self.security,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            authenticator=authenticator,
            ssl_context=self.security.create_ssl_context(),
        )
        self._random = random
        self._tasks = OwnedTaskGroup()
        self._task_group: anyio.abc.TaskGroup | None = None
        # Connections by node id; the bootstrap connection (node unknown) under -1.
        self._connections: dict[int, BrokerConnection] = {}
        self._connect_locks: dict[int, anyio.Lock] = {}
        self._addresses: dict[int, BrokerAddress] = {}
        self._metadata = ClusterMetadata()
        # When each topic was last described (anyio clock): how old the
        # snapshot's view of it is (see described_at).
        self._described_at: dict[str, float] = {}
        self._coordinators: dict[str, BrokerAddress] = {}
        # The node a group's coordinator was on when marked stale, until found again.
        self._stale_coordinators: dict[str, int] = {}

    async def __aenter__(self) -> KafkaClient:
        # Once ever, not once at a time: the pool is not reopened after aclose().
        if self._task_group is not None:
            raise RuntimeError("a KafkaClient can be entered only once")
        return await super().__aenter__()

    async def _start(self, task_group: anyio.abc.TaskGroup) -> KafkaClient:
        self._task_group = task_group
        await self._bootstrap()
        return self

    async def _stop(self, exc: BaseException | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every connection and stop their reader tasks. Idempotent."""
        connections = list(self._connections.values())
        self._connections.clear()
        for conn in connections:
            await conn.aclose()
        # Not under a shield: the task group's cancel scope must be exited from
        # the same nesting level it was entered at.
        await self._tasks.leave()

    # --- connections --------------------------------------------------------------

    def _group(self) -> anyio.abc.TaskGroup:
        if self._task_group is None:
            raise RuntimeError("use KafkaClient as 'async with KafkaClient(...) as client'")
        return self._task_group

    async def _open(self, host: str, port: int, node_id: int | None) -> BrokerConnection:
        return await open_connection(
            host, port, self._settings, task_group=self._group(), node_id=node_id
        )

    @property
    def authenticator(self) -> Authenticator | None:
        """The hook authenticating each connection (SASL), if any."""
        return self._settings.authenticator

    async def _race(
        self, servers: Sequence[tuple[str, int]], failures: list[str], level: int
    ) -> _Bootstrapped:
        """Connect to the first of ``servers`` that answers, trying them in order.

        Each attempt gets :data:`BOOTSTRAP_STAGGER` seconds to itself; after that,
        or at once when it fails, the next one starts alongside. The first
        connection made wins and the attempts still under way are cancelled.
        Failures are logged at ``level`` (a
        :class:`~kgroup.errors.SecurityError` at WARNING) and added to
        ``failures``; the result lists the servers that failed.
        """
        result = _Bootstrapped()
        ended = anyio.Event()

        async def attempt(host: str, port: int, scope: anyio.CancelScope) -> None:
            try:
                conn = await self._open(host, port, None)
            except SecurityError as exc:
                # Another server may still be fine (one bad certificate); if none
                # is, the security failure is what the user must fix.
                log.warning("bootstrap server %s:%d refused: %s", host, port, exc)
                failures.append(f"{host}:{port}: {exc}")
                result.failed.append((host, port))
                result.refused = result.refused or exc
            except KgroupError as exc:
                log.log(level, "bootstrap server %s:%d failed: %s", host, port, exc)
                failures.append(f"{host}:{port}: {exc}")
                result.failed.append((host, port))
            else:
                if result.conn is not None:  # two connected in the same turn
                    with anyio.CancelScope(shield=True):  # the winner cancelled us
                        await conn.aclose()
                    return
                result.server, result.conn = (host, port), conn
                scope.cancel()
            finally:
                ended.set()

        async with anyio.create_task_group() as tg:
            for host, port in servers:
                ended = anyio.Event()
                tg.start_soon(attempt, host, port, tg.cancel_scope)
                with anyio.move_on_after(BOOTSTRAP_STAGGER):
                    await ended.wait()
        return result

    async def _use_bootstrap(
        self, servers: Sequence[tuple[str, int]], failures: list[str], level: int
    ) -> _Bootstrapped:
        """:meth:`_race` ``servers``, installing the winner as the pool's bootstrap
        connection (node -1) in place of the previous one."""
        result = await self._race(servers, failures, level)
        if result.conn is not None:
            old = self._connections.pop(-1, None)
            if old is not None:
                await old.aclose()
            self._connections[-1] = result.conn
        return result

    async def _bootstrap(self) -> None:
        failures: list[str] = []
        refused: SecurityError | None = None
        left = list(self.bootstrap_servers)
        while left:
            result = await self._use_bootstrap(left, failures, logging.WARNING)
            refused = refused or result.refused
            if result.server is None or result.conn is None:
                break
            host, port = result.server
            try:
                await self.metadata(())
            except KgroupError as exc:
                log.warning("bootstrap server %s:%d failed: %s", host, port, exc)
                failures.append(f"{host}:{port}: {exc}")
                await result.conn.aclose()
                self._connections.pop(-1, None)
                # The attempts the winner cut short are tried again.
                left = [s for s in left if s not in result.failed and s != result.server]
                continue
            log.info("bootstrapped from %s:%d; brokers %s", host, port, sorted(self._addresses))
            return
        if refused is not None:
            raise refused
        raise NoBrokersAvailableError("no bootstrap server could be used: " + "; ".join(failures))

    def _live(self, node_id: int) -> BrokerConnection | None:
        conn = self._connections.get(node_id)
        if conn is not None and conn.closed:
            del self._connections[node_id]
            return None
        return conn

    async def connection(self, node_id: int) -> BrokerConnection:
        """The pooled connection to broker ``node_id``, opened if needed.

        Raises:
            KafkaConnectionError: the node is unknown (even after refreshing
                metadata) or cannot be reached.
        """
        conn = self._live(node_id)
        if conn is not None:
            return conn
        if node_id < 0:
            raise KafkaConnectionError("the bootstrap connection is closed")
        lock = self._connect_locks.setdefault(node_id, anyio.Lock())
        async with lock:
            conn = self._live(node_id)
            if conn is not None:
                return conn
            address = self._addresses.get(node_id)
            if address is None:
                await self.metadata(())
                address = self._addresses.get(node_id)
            if address is None:
                raise KafkaConnectionError(f"node {node_id} is not in the cluster metadata")
            conn = await self._open(address.host, address.port, node_id)
            self._connections[node_id] = conn
            return conn

    def _candidates(self) -> list[int]:
        # Prefer brokers we are already connected to, then the others in random
        # order so that a dead broker is not everyone's first choice.
        live = [n for n in list(self._connections) if self._live(n) is not None]
        others = [n for n in self._addresses if n not in live]
        _random.Random(self._random()).shuffle(others)
        return live + others

    async def _request_any(self, build: RequestBuilder, timeout: float | None) -> ResponsePayload:
        failures: list[str] = []
        for node_id in self._candidates():
            try:
                conn = self._live(node_id) or await self.connection(node_id)
                return await conn.request(build(conn.versions), timeout=timeout)
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                log.info("request to node %d failed, trying another broker: %s", node_id, exc)
                failures.append(f"node {node_id}: {exc}")
        # Every known broker failed: start over from the bootstrap list, as the
        # cluster may have moved entirely.
        left = list(self.bootstrap_servers)
        while left:
            result = await self._use_bootstrap(left, failures, logging.INFO)
            if result.server is None or result.conn is None:
                if result.refused is not None:
                    raise result.refused
                break
            host, port = result.server
            try:
                return await result.conn.request(build(result.conn.versions), timeout=timeout)
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                failures.append(f"{host}:{port}: {exc}")
            left = [s for s in left if s not in result.failed and s != result.server]
        raise NoBrokersAvailableError("no broker could answer: " + "; ".join(failures))

    # --- requests -----------------------------------------------------------------

    async def request(
        self,
        request: RequestPayload | RequestBuilder,
        *,
        node: int | None = None,
        timeout: float | None = None,
    ) -> ResponsePayload:
        """Send a request to broker ``node`` (any broker if None) and return its response.

        ``request`` is a kio request, or a function building one from the
        versions negotiated with the broker it goes to. Broker error codes in
        the response are the caller's to inspect. With ``node`` None, a request
        whose broker fails (connection lost, timeout) is resent to another one,
        so use it for requests that are safe to repeat (Metadata, FindCoordinator ...).

        Raises:
            UnsupportedVersionError: the broker does not support the version.
            KafkaConnectionError, RequestTimeoutError, MalformedResponseError: as
                :meth:`BrokerConnection.request`.
            NoBrokersAvailableError: ``node`` is None and no broker answered.
        """
        build: RequestBuilder = request if callable(request) else (lambda _versions: request)
        if node is None:
            return await self._request_any(build, timeout)
        conn = await self.connection(node)
        return await conn.request(build(conn.versions), timeout=timeout)

    async def versions(self, node: int) -> NegotiatedVersions:
        """The API versions negotiated with broker ``node`` (connecting if needed)."""
        return (await self.connection(node)).versions

    # --- metadata -----------------------------------------------------------------

    @property
    def cluster(self) -> ClusterMetadata:
        """The latest metadata snapshot (updated by :meth:`metadata`)."""
        return self._metadata

    async def metadata(
        self, topics: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> ClusterMetadata:
        """Refresh metadata and return the updated snapshot.

        ``topics``: the topics to describe; None for every topic, ``()`` for
        brokers only. Topics are never auto-created.
        """
        names = None if topics is None else tuple(topics)
        response = await self._request_any(lambda v: metadata.build(v, names), timeout)
        fresh = metadata.parse(metadata.narrow(response))
        self._metadata = self._metadata.merge(fresh, all_topics=names is None)
        self._addresses.update(fresh.brokers)
        now = anyio.current_time()
        self._described_at.update((name, now) for name in fresh.topics)
        return self._metadata

    def described_at(self, topic: str) -> float | None:
        """When ``topic`` was last described by a broker (``anyio.current_time()``), or None."""
        return self._described_at.get(topic)

    # --- coordinators -------------------------------------------------------------

    def mark_coordinator_stale(self, group_id: str) -> None:
        """Forget the coordinator of ``group_id`` and close the connection to it.

        The next lookup asks the cluster, first over a fresh connection to the
        node the coordinator was on (see :meth:`coordinator`). Closing the
        connection fails whatever is still in flight on it, as the Java client's
        disconnect from a coordinator marked unknown does: on a connection gone
        half-open those requests would never be answered, and the next request
        to that node must not queue behind them.
        """
        address = self._coordinators.pop(group_id, None)
        if address is None:
            return
        log.info("coordinator %s of group %r marked stale", address, group_id)
        self._stale_coordinators[group_id] = address.node_id
        conn = self._connections.pop(address.node_id, None)
        if conn is not None:
            conn.abort(f"the coordinator of group {group_id!r} was marked stale")

    async def coordinator(
        self, group_id: str, *, refresh: bool = False, timeout: float | None = None
    ) -> BrokerAddress:
        """The coordinator of ``group_id``, cached until marked stale or ``refresh``.

        ``refresh`` first marks it stale (:meth:`mark_coordinator_stale`). A lookup
        after a stale mark goes over a fresh connection to the node the coordinator
        was on (the pooled one was closed), and only if that fails to the other
        brokers, connected ones first: a pooled connection may be a zombie that
        nobody has noticed yet. While the cluster answers COORDINATOR_NOT_AVAILABLE /
        NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, or brokers cannot be
        reached, it retries with backoff for up to ``timeout`` seconds (default:
        the request timeout).

        Raises:
            BrokerError: a non-retriable error (GROUP_AUTHORIZATION_FAILED ...), or
                the last retriable one when ``timeout`` ran out.
            NoBrokersAvailableError: no broker answered until ``timeout`` ran out.
        """
        if refresh:
            self.mark_coordinator_stale(group_id)
        cached = self._coordinators.get(group_id)
        if cached is not None:
            return cached

        deadline = anyio.current_time() + (self.request_timeout if timeout is None else timeout)
        attempt = 0
        while True:
            try:
                response = await self._find_coordinator(group_id)
                address = find_coordinator.parse(find_coordinator.narrow(response), group_id)
            except NoBrokersAvailableError:
                if anyio.current_time() >= deadline:
                    raise
            except BrokerError as error:
                if not error.retriable or anyio.current_time() >= deadline:
                    # FindCoordinator needs DESCRIBE on the group: say so, not just the code.
                    raise explain_denial(error, group=group_id, operation="DESCRIBE") from None
                log.debug("FindCoordinator for %r: %s; retrying", group_id, error)
            else:
                self._remember_address(address)
                self._coordinators[group_id] = address
                self._stale_coordinators.pop(group_id, None)
                log.info("coordinator of group %r is %s", group_id, address)
                return address
            await self._sleep(attempt, deadline)
            attempt += 1

    async def _find_coordinator(self, group_id: str) -> ResponsePayload:
        def build(versions: NegotiatedVersions) -> RequestPayload:
            return find_coordinator.build(versions, group_id)

        stale = self._stale_coordinators.get(group_id)
        if stale is not None and stale in self._addresses:
            try:
                # The pooled connection to this node was closed when the coordinator
                # was marked stale, so this one is new (or newer than the mark).
                conn = await self.connection(stale)
                return await conn.request(build(conn.versions))
            except (KafkaConnectionError, RequestTimeoutError) as exc:
                log.info(
                    "FindCoordinator for %r on node %d failed, asking the others: %s",
                    group_id,
                    stale,
                    exc,
                )
        return await self._request_any(build, None)

    def _remember_address(self, address: BrokerAddress) -> None:
        known = self._addresses.get(address.node_id)
        if known is not None and (known.host, known.port) != (address.host, address.port):
            # The node moved; a pooled connection goes to the old address.
            conn = self._connections.pop(address.node_id, None)
            if conn is not None:
                self._group().start_soon(conn.aclose)
        self._addresses[address.node_id] = address

    async def _sleep(self, attempt: int, deadline: float) -> None:
        delay = self.backoff.delay(attempt, self._random)
        await anyio.sleep(max(0.0, min(delay, deadline - anyio.current_time())))

    def coordinator_connection_now(self, group_id: str) -> BrokerConnection | None:
        """The open connection to ``group_id``'s known coordinator, without waiting:
        None when the coordinator is not known or not connected (then
        :meth:`coordinator_request` looks it up and connects)."""
        address = self._coordinators.get(group_id)
        return None if address is None else self._live(address.node_id)

    async def coordinator_request(
        self,
        group_id: str,
        request: RequestPayload | RequestBuilder,
        *,
        timeout: float | None = None,
    ) -> ResponsePayload:
        """Send a request to the coordinator of ``group_id``, following it when it moves.

        If the response's top-level error code is NOT_COORDINATOR or
        COORDINATOR_NOT_AVAILABLE, or the coordinator cannot be connected to, the
        coordinator is marked stale, looked up again and the request resent — at
        once the first time, then with backoff — for up to ``timeout`` seconds
        (default: the request timeout). After that the last response is returned.
        A connection lost while the request was in flight is raised, not retried:
        the broker may have acted on it.

        Raises:
            As :meth:`coordinator` and :meth:`BrokerConnection.request`.
        """
        build: RequestBuilder = request if callable(request) else (lambda _versions: request)
        budget = self.request_timeout if timeout is None else timeout
        deadline = anyio.current_time() + budget
        attempt = 0
        while True:
            remaining = max(0.0, deadline - anyio.current_time())
            address = await self.coordinator(group_id, timeout=remaining)
            try:
                conn = await self.connection(address.node_id)
            except KafkaConnectionError as exc:
                if anyio.current_time() >= deadline:
                    raise
                log.info("coordinator %s of group %r unreachable: %s", address, group_id, exc)
                self.mark_coordinator_stale(group_id)
                await self._sleep(attempt, deadline)
                attempt += 1
                continue
            response = await conn.request(build(conn.versions))
            code = getattr(response, "error_code", ErrorCode.NONE)
            if code not in COORDINATOR_MOVED or anyio.current_time() >= deadline:
                return response
            log.info("coordinator %s of group %r answered %s", address, group_id, error_name(code))
            self.mark_coordinator_stale(group_id)
            if attempt:
                await self._sleep(attempt - 1, deadline)
            attempt += 1
