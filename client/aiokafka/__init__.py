"""A drop-in for ``aiokafka.AIOKafkaConsumer``: change the import, keep the application.

``from kgroup.aiokafka import AIOKafkaConsumer`` takes aiokafka's constructor
keywords and methods and returns aiokafka's shapes (:class:`ConsumerRecord`,
``{TopicPartition: [ConsumerRecord]}``, aiokafka's error classes), on asyncio
or trio. Underneath is :class:`kgroup.AsyncConsumer`: this module only
translates arguments, results, errors and the listener contract.
``group_protocol="consumer"`` joins with KIP-848; the default is the classic
protocol, as aiokafka. What differs is in ``docs/porting-aiokafka.md``.
"""

from __future__ import annotations

import abc
import collections
import contextlib
import importlib
import inspect
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, Final, Self

import anyio
import anyio.lowlevel
import anyio.to_thread
import confluent_kafka

from kgroup import errors as kerrors
from kgroup._frontend import build_config as validate_config
from kgroup.aio import AsyncConsumer
from kgroup.aiokafka.errors import (
    CommitFailedError,
    ConsumerStoppedError,
    IllegalOperation,
    IllegalStateError,
    KafkaConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedByKgroupError,
    broker_error_class,
)
from kgroup.aiokafka.structs import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
    from_kgroup,
    to_kgroup,
)
from kgroup.dataplane import Record
from kgroup.types import OffsetAndMetadata as KOffsetAndMetadata
from kgroup.types import TopicPartition as KTopicPartition

__all__ = [
    "AIOKafkaConsumer",
    "CommitFailedError",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "IllegalOperation",
    "IllegalStateError",
    "KafkaConfigurationError",
    "KafkaError",
    "KafkaTimeoutError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "TopicPartition",
    "UnsupportedByKgroupError",
]

Deserializer = Callable[[bytes | None], Any]

_NO_ANSWER = frozenset(
    {confluent_kafka.KafkaError._TIMED_OUT, confluent_kafka.KafkaError._ALL_BROKERS_DOWN}
)
"""librdkafka's codes for a lookup nobody answered in time."""

UNBOUNDED_BATCH: Final = 10_000
"""Records one ``getmany()`` takes when neither ``max_records`` nor ``max_poll_records`` caps it."""

_WAIT_SLICE: Final = 0.1
"""Seconds one wait of ``getone()`` lasts before looking again (stop(), cancellation)."""

# librdkafka's timestamp types (Message.timestamp()[0]) as aiokafka's record numbers them.
_TIMESTAMP_TYPES: Final = {
    confluent_kafka.TIMESTAMP_CREATE_TIME: 0,
    confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: 1,
}

_AIOKAFKA_DEFAULT_CLIENT_ID: Final = "aiokafka"


def _peer_listener_base() -> tuple[type, ...]:
    """aiokafka's ``ConsumerRebalanceListener`` when installed: listeners of either are taken."""
    try:
        peer: Any = importlib.import_module("aiokafka.abc")
    except ImportError:
        return ()
    return (peer.ConsumerRebalanceListener,)


_PEER_LISTENERS: Final = _peer_listener_base()


class ConsumerRebalanceListener(abc.ABC):
    """aiokafka's listener base: override ``on_partitions_revoked`` / ``on_partitions_assigned``.

    Methods may be plain or coroutine functions. By default each is given the
    whole set (revoked: every partition owned before the rebalance step;
    assigned: every partition owned after), as aiokafka does; with
    ``AIOKafkaConsumer(..., rebalance_deltas=True)`` only what changed.
    """

    @abc.abstractmethod
    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:
        """Partitions are about to be taken away (full set by default)."""

    @abc.abstractmethod
    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:
        """The partitions owned now (full set by default)."""


async def _call(
    method: Callable[[set[TopicPartition]], Any], partitions: set[TopicPartition]
) -> None:
    result = method(partitions)
    if inspect.isawaitable(result):
        await result


class _ListenerAdapter:
    """kgroup's delta callbacks as aiokafka's listener contract.

    kgroup tells what changed (:class:`kgroup.RebalanceListener`); aiokafka
    applications rebuild their state from whole sets. Each kgroup step becomes
    ``revoked(owned before)`` then ``assigned(owned after)`` unless deltas were
    asked for. aiokafka's listener has no "lost": lost partitions are revoked.
    """

    def __init__(self, facade: AIOKafkaConsumer, listener: Any, deltas: bool) -> None:
        self._facade = facade
        self._listener = listener
        self._deltas = deltas
        self._owned: set[TopicPartition] = set()

    async def on_partitions_assigned(self, partitions: frozenset[KTopicPartition]) -> None:
        added = {from_kgroup(tp) for tp in partitions}
        before = set(self._owned)
        self._owned |= added
        await self._tell(before, added, added)

    async def on_partitions_revoked(self, partitions: frozenset[KTopicPartition]) -> None:
        self._facade._forget(partitions)
        taken = {from_kgroup(tp) for tp in partitions}
        before = set(self._owned)
        self._owned -= taken
        if self._facade._stopped:
            # aiokafka's stop() commits and leaves without calling the listener.
            return
        await self._tell(before, taken, set())

    on_partitions_lost = on_partitions_revoked

    async def _tell(
        self, before: set[TopicPartition], changed: set[TopicPartition], added: set[TopicPartition]
    ) -> None:
        listener = self._listener
        if listener is None:
            return
        if self._deltas:
            if added:
                await _call(listener.on_partitions_assigned, set(added))
            else:
                await _call(listener.on_partitions_revoked, set(changed))
            return
        await _call(listener.on_partitions_revoked, before)
        await _call(listener.on_partitions_assigned, set(self._owned))


def _refused(keyword: str, why: str) -> UnsupportedByKgroupError:
    return UnsupportedByKgroupError(f"kgroup.aiokafka cannot honour {keyword}: {why}")


def _servers(value: object) -> str:
    """aiokafka's ``bootstrap_servers`` (a str or a list; the port defaults to 9092, as there)."""
    if isinstance(value, str):
        entries = value.split(",")
    elif isinstance(value, Iterable):
        entries = [str(item) for item in value]
    else:
        raise KafkaConfigurationError(f"bootstrap_servers: expected a str or a list, got {value!r}")
    hosts = [entry.strip() for entry in entries if entry.strip()]
    return ",".join(host if ":" in host.lstrip("[") else f"{host}:9092" for host in hosts)


def _assignor_names(strategies: object) -> str:
    """aiokafka assignor classes (or instances, or names) as librdkafka strategy names."""
    items = strategies if isinstance(strategies, list | tuple) else [strategies]
    names: list[str] = []
    for item in items:
        name = item if isinstance(item, str) else getattr(item, "name", None)
        if name == "sticky":
            # aiokafka's sticky assignor is eager; librdkafka's "cooperative-sticky" is not.
            raise _refused(
                "partition_assignment_strategy=StickyPartitionAssignor",
                "librdkafka has no eager sticky assignor; use 'cooperative-sticky', "
                "'roundrobin' or 'range'",
            )
        if not isinstance(name, str):
            raise KafkaConfigurationError(
                f"partition_assignment_strategy: cannot name the assignor {item!r}"
            )
        names.append(name)
    return ",".join(names)


def build_config(
    *,
    bootstrap_servers: object = "localhost",
    client_id: str = _AIOKAFKA_DEFAULT_CLIENT_ID,
    group_id: str | None = None,
    group_instance_id: str | None = None,
    fetch_max_wait_ms: int = 500,
    fetch_max_bytes: int = 52428800,
    fetch_min_bytes: int = 1,
    max_partition_fetch_bytes: int = 1024 * 1024,
    request_timeout_ms: int = 40 * 1000,
    retry_backoff_ms: int = 100,
    auto_offset_reset: str = "latest",
    enable_auto_commit: bool = True,
    auto_commit_interval_ms: int = 5000,
    check_crcs: bool = True,
    metadata_max_age_ms: int = 5 * 60 * 1000,
    partition_assignment_strategy: object = ("roundrobin",),
    max_poll_interval_ms: int = 300000,
    rebalance_timeout_ms: int | None = None,
    session_timeout_ms: int = 10000,
    heartbeat_interval_ms: int = 3000,
    consumer_timeout_ms: int = 200,
    ssl_context: object = None,
    security_protocol: str = "PLAINTEXT",
    api_version: object = None,
    exclude_internal_topics: bool = True,
    connections_max_idle_ms: int = 540000,
    isolation_level: str = "read_uncommitted",
    sasl_mechanism: str = "PLAIN",
    sasl_plain_password: str | None = None,
    sasl_plain_username: str | None = None,
    sasl_kerberos_service_name: str = "kafka",
    sasl_kerberos_domain_name: str | None = None,
    sasl_oauth_token_provider: object = None,
    client_rack: str | None = None,
    group_protocol: str = "classic",
) -> dict[str, Any]:
    """kgroup's configuration for aiokafka's constructor keywords.

    Raises:
        UnsupportedByKgroupError: a keyword kgroup cannot honour, named.
        KafkaConfigurationError: a value no client accepts.
    """
    if group_id is None:
        raise _refused(
            "group_id=None",
            "kgroup consumers belong to a group (commits, committed()); pass a group_id",
        )
    if rebalance_timeout_ms is not None:
        raise _refused(
            "rebalance_timeout_ms",
            "librdkafka uses max_poll_interval_ms as the classic rebalance timeout; set that",
        )
    if consumer_timeout_ms != 200:
        raise _refused("consumer_timeout_ms", "librdkafka's fetcher has no such wait")
    if ssl_context is not None:
        raise _refused(
            "ssl_context",
            "librdkafka cannot take a Python SSLContext; pass its files with "
            "kafka_config={'ssl.ca.location': ..., 'ssl.certificate.location': ..., ...}",
        )
    if api_version not in (None, "auto"):
        raise _refused("api_version", "librdkafka negotiates API versions with the broker")
    if not exclude_internal_topics:
        raise _refused("exclude_internal_topics=False", "librdkafka always excludes them")
    if sasl_kerberos_domain_name is not None:
        raise _refused("sasl_kerberos_domain_name", "librdkafka takes sasl.kerberos.* settings")
    if sasl_oauth_token_provider is not None:
        raise _refused(
            "sasl_oauth_token_provider",
            "use kafka_config={'sasl.oauthbearer.method': 'oidc', ...} (librdkafka's OIDC)",
        )
    if group_protocol not in ("classic", "consumer"):
        raise KafkaConfigurationError(
            f"group_protocol must be 'classic' or 'consumer', got {group_protocol!r}"
        )
    if auto_offset_reset not in ("earliest", "latest", "none"):
        raise KafkaConfigurationError(
            f"auto_offset_reset must be 'earliest', 'latest' or 'none', got {auto_offset_reset!r}"
        )
    config: dict[str, Any] = {
        "bootstrap.servers": _servers(bootstrap_servers),
        "client.id": client_id,
        "group.id": group_id,
        "group.protocol": group_protocol,
        "fetch.wait.max.ms": fetch_max_wait_ms,
        "fetch.max.bytes": fetch_max_bytes,
        "fetch.min.bytes": fetch_min_bytes,
        "max.partition.fetch.bytes": max_partition_fetch_bytes,
        "request.timeout.ms": request_timeout_ms,
        "retry.backoff.ms": retry_backoff_ms,
        "auto.offset.reset": "error" if auto_offset_reset == "none" else auto_offset_reset,
        "enable.auto.commit": enable_auto_commit,
        "auto.commit.interval.ms": auto_commit_interval_ms,
        "check.crcs": check_crcs,
        "metadata.max.age.ms": metadata_max_age_ms,
        "max.poll.interval.ms": max_poll_interval_ms,
        "security.protocol": security_protocol,
        "connections.max.idle.ms": connections_max_idle_ms,
        "isolation.level": isolation_level,
    }
    if group_instance_id is not None:
        config["group.instance.id"] = group_instance_id
    if client_rack is not None:
        config["client.rack"] = client_rack
    if security_protocol.startswith("SASL"):
        config["sasl.mechanism"] = sasl_mechanism
        config["sasl.kerberos.service.name"] = sasl_kerberos_service_name
        if sasl_plain_username is not None:
            config["sasl.username"] = sasl_plain_username
        if sasl_plain_password is not None:
            config["sasl.password"] = sasl_plain_password
    classic = {
        "session.timeout.ms": session_timeout_ms,
        "heartbeat.interval.ms": heartbeat_interval_ms,
    }
    if group_protocol == "classic":
        config.update(classic)
        config["partition.assignment.strategy"] = _assignor_names(partition_assignment_strategy)
    else:
        # The broker decides these under KIP-848: only values the application
        # chose reach the config, where kgroup refuses them by name.
        config.update(
            {
                key: value
                for key, value, default in (
                    ("session.timeout.ms", session_timeout_ms, 10000),
                    ("heartbeat.interval.ms", heartbeat_interval_ms, 3000),
                )
                if value != default
            }
        )
        if _assignor_names(partition_assignment_strategy) != "roundrobin":
            config["partition.assignment.strategy"] = _assignor_names(partition_assignment_strategy)
    return config


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """kgroup's exceptions as the aiokafka classes an application catches.

    Every kgroup error comes out as one of aiokafka's ``KafkaError`` classes
    (aiokafka raises nothing else from these calls), except argument errors
    (``ValueError`` / ``TypeError``), which pass through as there.
    """
    try:
        yield
    except kerrors.CommitFailedError as exc:
        raise CommitFailedError(str(exc)) from exc
    except (
        kerrors.NotAssignedError,
        kerrors.MixedAssignmentError,
        kerrors.NothingToCommitError,
    ) as exc:
        # aiokafka: committing or seeking partitions that are not assigned.
        raise IllegalStateError(str(exc)) from exc
    except kerrors.ConsumerClosedError as exc:
        raise ConsumerStoppedError() from exc
    except kerrors.ConfigError as exc:
        raise KafkaConfigurationError(str(exc)) from exc
    except (TimeoutError, kerrors.RequestTimeoutError) as exc:
        raise KafkaTimeoutError(str(exc)) from exc
    except kerrors.DataPlaneError as exc:
        if exc.code in _NO_ANSWER:
            # aiokafka waits out request_timeout_ms and raises KafkaTimeoutError.
            raise KafkaTimeoutError(str(exc)) from exc
        raise KafkaError(str(exc)) from exc
    except kerrors.BrokerError as exc:
        raise broker_error_class(int(exc.code))(str(exc)) from exc
    except (ValueError, TypeError):
        raise
    except kerrors.KgroupError as exc:
        raise KafkaError(str(exc)) from exc


def _header_value(data: object) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    return str(data).encode()


class AIOKafkaConsumer:
    """aiokafka's consumer on kgroup: ``AIOKafkaConsumer(*topics, bootstrap_servers=..., ...)``.

    The constructor takes aiokafka's keywords (those kgroup cannot honour raise
    :class:`UnsupportedByKgroupError` naming them), plus:

    - ``group_protocol``: ``"classic"`` (default, as aiokafka) or ``"consumer"`` (KIP-848);
    - ``rebalance_deltas``: give the listener only what changed instead of whole sets;
    - ``kafka_config``: further librdkafka / kgroup keys, applied last.

    ``start()`` and ``stop()`` must run in the same task (or use ``async with``):
    the consumer's background work lives in a task group opened by ``start()``.
    """

    def __init__(
        self,
        *topics: str,
        loop: object = None,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        max_poll_records: int | None = None,
        rebalance_deltas: bool = False,
        kafka_config: Mapping[str, Any] | None = None,
        **keywords: Any,
    ) -> None:
        if loop is not None:
            raise _refused("loop", "the consumer runs on the running event loop (anyio)")
        if max_poll_records is not None and max_poll_records < 1:
            raise ValueError(f"max_poll_records must be >= 1, got {max_poll_records}")
        try:
            config = build_config(**keywords)
        except TypeError as exc:
            raise TypeError(f"AIOKafkaConsumer: {exc}") from None
        config.update(kafka_config or {})
        # Checked now, as aiokafka checks its keywords: not first at start().
        with _translated():
            validate_config(config)
        self._config = config
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._max_poll_records = max_poll_records
        self._deltas = rebalance_deltas
        self._consumer: AsyncConsumer | None = None
        self._stopped = False
        self._topics: frozenset[str] = frozenset(topics)
        self._pattern: str | None = None
        self._listener: _ListenerAdapter | None = None
        self._assigned: list[KTopicPartition] | None = None
        self._held: dict[KTopicPartition, collections.deque[Record]] = {}
        self._holding = False  # whether the data plane counts held records (see _sync_held)
        self._metadata: dict[str, set[int]] = {}

    # ------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Connect, and join the group if topics were given; as aiokafka's ``start()``."""
        if self._consumer is not None or self._stopped:
            raise IllegalStateError("start() may be called once")
        consumer = AsyncConsumer(self._config)
        with _translated():
            await consumer.__aenter__()
        self._consumer = consumer
        try:
            await self.topics()
            if self._topics or self._pattern is not None:
                self._apply_subscription()
            elif self._assigned is not None:
                self.assign(self._assigned)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Leave the group (committing first with auto-commit) and close."""
        if self._consumer is not None:
            self._return_held(self._consumer)  # before close's auto-commit
        consumer, self._consumer = self._consumer, None
        self._stopped = True
        self._held.clear()
        if consumer is not None:
            await consumer.__aexit__(None, None, None)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _running(self) -> AsyncConsumer:
        if self._consumer is None:
            if self._stopped:
                raise ConsumerStoppedError()
            raise IllegalStateError("call start() first (or use 'async with')")
        return self._consumer

    # ---------------------------------------------------------- subscription

    def subscribe(
        self,
        topics: Iterable[str] = (),
        pattern: str | None = None,
        listener: Any = None,
    ) -> None:
        """Subscribe to topic names or a regex (the broker matches it: full match, RE2J)."""
        if bool(topics) == (pattern is not None):
            raise IllegalStateError("subscribe() takes topics or a pattern, exactly one")
        if listener is not None and not isinstance(
            listener, (ConsumerRebalanceListener, *_PEER_LISTENERS)
        ):
            raise TypeError("listener should be an instance of ConsumerRebalanceListener")
        if self._assigned is not None:
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        if isinstance(topics, str):
            raise TypeError("topics must be a list of names, not a str")
        self._topics, self._pattern = frozenset(topics), pattern
        self._listener = _ListenerAdapter(self, listener, self._deltas)
        if self._consumer is not None:
            self._apply_subscription()

    def _apply_subscription(self) -> None:
        consumer = self._running()
        if self._listener is None:
            self._listener = _ListenerAdapter(self, None, self._deltas)
        with _translated():
            if self._pattern is not None:
                consumer.subscribe(None, self._listener, pattern=self._pattern)
            else:
                consumer.subscribe(sorted(self._topics), self._listener)

    def subscription(self) -> frozenset[str]:
        """The subscribed topic names (for a pattern: the known topics it matches)."""
        if self._pattern is not None:
            regex = re.compile(self._pattern)
            return frozenset(name for name in self._metadata if regex.fullmatch(name))
        return self._topics

    def unsubscribe(self) -> None:
        """Leave the group, or drop the manual assignment."""
        consumer = self._consumer
        self._topics, self._pattern, self._listener = frozenset(), None, None
        if consumer is not None:
            # Back before the revocation's commit, which would count them.
            self._return_held(consumer)
        self._held.clear()
        if consumer is not None:
            with _translated():
                if self._assigned is not None:
                    consumer.unassign()
                else:
                    consumer.unsubscribe()
        self._assigned = None

    def assign(self, partitions: Iterable[Any]) -> None:
        """Fetch exactly these partitions, without group membership."""
        if self._topics or self._pattern is not None:
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        chosen = [to_kgroup(tp, "assign()") for tp in partitions]
        self._assigned = chosen
        if self._consumer is not None:
            self._return_held(self._consumer)
        self._held.clear()
        if self._consumer is not None:
            with _translated():
                self._consumer.assign(dict.fromkeys(chosen))

    def assignment(self) -> set[TopicPartition]:
        """The partitions owned now."""
        if self._consumer is None:
            return set()
        if self._assigned is not None:
            return {from_kgroup(tp) for tp in self._assigned}
        return {from_kgroup(tp) for tp in self._consumer.assignment()}

    # --------------------------------------------------------------- records

    def _forget(self, partitions: Iterable[KTopicPartition]) -> None:
        """Drop held records of partitions revoked or sought (they will be fetched again)."""
        for tp in partitions:
            self._held.pop(tp, None)
        self._sync_held()

    def _sync_held(self) -> None:
        """Have the data plane count the held records as not handed out.

        librdkafka handed them out, so its positions are past them; a commit
        the group's driver makes while the application awaits something (the
        commit before a revocation) would go past records the application
        never got, and the partition's next owner would start after them. The
        data plane keeps positions before them until they are returned, given
        back or forgotten. No await between a change and this call: the
        driver, on this same event loop, reads no position in between.
        """
        consumer = self._consumer
        if consumer is None or not (self._held or self._holding):
            return  # the usual case: nothing held, before or now
        held = [record for queue in self._held.values() for record in queue]
        consumer._core.hold(self, held)
        self._holding = bool(held)

    def _record(self, message: Record) -> ConsumerRecord[Any, Any]:
        key, value = message.key(), message.value()
        kind, stamp = message.timestamp()
        headers = message.headers() or []
        pairs = list(headers.items()) if isinstance(headers, dict) else list(headers)
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        assert topic is not None
        assert partition is not None
        assert offset is not None
        return ConsumerRecord(
            topic=topic,
            partition=partition,
            offset=offset,
            timestamp=stamp if kind in _TIMESTAMP_TYPES else -1,
            timestamp_type=_TIMESTAMP_TYPES.get(kind, -1),
            key=self._key_deserializer(key) if self._key_deserializer else key,
            value=self._value_deserializer(value) if self._value_deserializer else value,
            checksum=None,
            serialized_key_size=-1 if key is None else len(key),
            serialized_value_size=-1 if value is None else len(value),
            headers=tuple((name, _header_value(data)) for name, data in pairs),
        )

    def _return_held(self, consumer: AsyncConsumer) -> None:
        """Put the held records back into the data plane (before the partitions go).

        librdkafka handed them out, so its own positions are past them: given
        back, each partition's position is its first held record again, for
        the commit of a close or revocation that follows, and they are fetched
        again when asked for.
        """
        held = [record for queue in self._held.values() for record in queue]
        self._held.clear()
        if held:
            consumer._core.give_back(held)
        self._sync_held()

    def _records(
        self, consumer: AsyncConsumer, batch: list[Record]
    ) -> list[ConsumerRecord[Any, Any]]:
        """``batch`` as aiokafka's records, deserialized; at a record a deserializer
        fails on, that one and the rest go back to the data plane (the position
        stays at it, and the next call raises again, as aiokafka keeps raising at
        it) and the records before it are returned, or the error raised if none."""
        records: list[ConsumerRecord[Any, Any]] = []
        for index, message in enumerate(batch):
            try:
                records.append(self._record(message))
            except BaseException:
                consumer._core.give_back(batch[index:])
                if records:
                    return records
                raise
        return records

    def _take_held(self, wanted: set[KTopicPartition] | None, limit: int) -> list[Record]:
        paused = self._running().paused()
        taken: list[Record] = []
        for tp, queue in list(self._held.items()):
            if (wanted is not None and tp not in wanted) or tp in paused:
                continue
            while queue and len(taken) < limit:
                taken.append(queue.popleft())
            if not queue:
                del self._held[tp]
        if taken:
            self._sync_held()
        return taken

    async def _fetch(
        self, wanted: set[KTopicPartition] | None, limit: int, timeout: float
    ) -> list[Record]:
        """Up to ``limit`` records of ``wanted`` (None: any), waiting at most ``timeout`` s."""
        consumer = self._running()
        taken = self._take_held(wanted, limit)
        if taken:
            return taken
        # The deadline is consume()'s own timeout, never a cancel scope: a scope
        # expiring after consume() took a batch from librdkafka would lose it.
        deadline = anyio.current_time() + max(0.0, timeout)
        with _translated():
            while True:
                remaining = max(0.0, deadline - anyio.current_time())
                batch = await consumer.consume(limit, min(remaining, _WAIT_SLICE))
                if wanted is None:
                    taken = batch
                else:
                    for message in batch:
                        tp = KTopicPartition(message.topic() or "", message.partition() or 0)
                        if tp in wanted:
                            taken.append(message)
                        else:
                            # Handed out by librdkafka already: held until asked for.
                            self._held.setdefault(tp, collections.deque()).append(message)
                    self._sync_held()
                if taken:
                    return taken
                if anyio.current_time() >= deadline:
                    # An application polling with timeout_ms=0 in a loop must still
                    # let the group's driver (on this same loop) run.
                    await anyio.lowlevel.checkpoint()
                    return taken

    async def getone(self, *partitions: Any) -> ConsumerRecord[Any, Any]:
        """The next record (of ``partitions`` if given), waiting as long as it takes."""
        wanted = {to_kgroup(tp, "getone()") for tp in partitions} or None
        while True:
            batch = await self._fetch(wanted, 1, _WAIT_SLICE * 10)
            if batch:
                return self._records(self._running(), batch)[0]

    async def getmany(
        self, *partitions: Any, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Records by partition, waiting at most ``timeout_ms`` for the first."""
        wanted = {to_kgroup(tp, "getmany()") for tp in partitions} or None
        limit = max_records or self._max_poll_records or UNBOUNDED_BATCH
        result: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
        batch = await self._fetch(wanted, limit, timeout_ms / 1000)
        for record in self._records(self._running(), batch):
            result.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
        return result

    def __aiter__(self) -> AsyncIterator[ConsumerRecord[Any, Any]]:
        return self

    async def __anext__(self) -> ConsumerRecord[Any, Any]:
        try:
            return await self.getone()
        except ConsumerStoppedError:
            raise StopAsyncIteration from None

    # --------------------------------------------------------------- offsets

    async def commit(self, offsets: Mapping[Any, Any] | None = None) -> None:
        """Commit ``offsets`` (``{tp: offset}``, ``(offset, metadata)`` or
        ``OffsetAndMetadata``), or the consumed positions of every partition owned."""
        consumer = self._running()
        if offsets is not None and (not isinstance(offsets, Mapping) or not offsets):
            # As aiokafka: a list (or an empty dict) is a mistake, not a no-op.
            raise ValueError(f"Offsets should be a non-empty dict, got {offsets!r}")
        # Without offsets the positions are committed; they stop before the records
        # held for a later call (_sync_held), which stay held, as aiokafka's
        # fetched records stay buffered.
        chosen: dict[KTopicPartition, KOffsetAndMetadata] | None = None
        if offsets is not None:
            chosen = {}
            for tp, given in offsets.items():
                if isinstance(given, tuple):
                    offset, metadata = given
                else:
                    offset, metadata = given, ""
                chosen[to_kgroup(tp, "commit()")] = KOffsetAndMetadata(offset, metadata or "")
        with _translated():
            await consumer.commit(chosen)

    async def committed(self, partition: Any) -> int | None:
        """The group's committed offset of ``partition`` (None: none)."""
        tp = to_kgroup(partition, "committed()")
        with _translated():
            return (await self._running().committed([tp])).get(tp)

    async def position(self, partition: Any) -> int:
        """The offset of the next record of an owned ``partition``."""
        consumer = self._running()
        tp = to_kgroup(partition, "position()")
        if from_kgroup(tp) not in self.assignment():
            raise IllegalStateError(f"Partition {from_kgroup(tp)} is not assigned")
        held = self._held.get(tp)
        if held:
            offset = held[0].offset()
            assert offset is not None
            return offset
        known = consumer.position([tp]).get(tp)
        if known is not None and known >= 0:
            return known
        # Not fetched yet: where fetching will start (committed, else the reset policy).
        committed = await self.committed(tp)
        if committed is not None:
            return committed
        low, high = await self._watermarks(tp)
        return low if self._config["auto.offset.reset"] == "earliest" else high

    def seek(self, partition: Any, offset: int) -> None:
        """Make ``offset`` the next record of an owned ``partition``."""
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"Offset must be a positive integer, got {offset!r}")
        self._seek(partition, offset, "seek()")

    def _seek(self, partition: Any, offset: int, what: str) -> None:
        consumer = self._running()
        tp = to_kgroup(partition, what)
        self._forget([tp])
        with _translated():
            consumer.seek(tp, offset)

    async def seek_to_beginning(self, *partitions: Any) -> bool:
        """Start these owned partitions (default: all) at their first record."""
        await self._seek_to_edge(partitions, "seek_to_beginning()", end=False)
        return True

    async def seek_to_end(self, *partitions: Any) -> bool:
        """Start these owned partitions (default: all) after their last record."""
        await self._seek_to_edge(partitions, "seek_to_end()", end=True)
        return True

    async def _seek_to_edge(self, partitions: tuple[Any, ...], what: str, *, end: bool) -> None:
        # As aiokafka, the offset is looked up here: position() then gives it
        # and commit() commits it (a logical seek leaves both unknown until the
        # next record). Reading committed, the end is the last stable offset,
        # which librdkafka resolves itself: a logical seek there.
        logical = confluent_kafka.OFFSET_END if end else confluent_kafka.OFFSET_BEGINNING
        for tp in partitions or self.assignment():
            offset = logical
            if not end or self._config["isolation.level"] != "read_committed":
                low, high = await self._watermarks(to_kgroup(tp, what))
                offset = high if end else low
            self._seek(tp, offset, what)

    async def seek_to_committed(self, *partitions: Any) -> dict[TopicPartition, int | None]:
        """Start these owned partitions (default: all) at the group's committed offsets."""
        found: dict[TopicPartition, int | None] = {}
        for tp in partitions or self.assignment():
            offset = await self.committed(tp)
            if offset is not None:
                self._seek(tp, offset, "seek_to_committed()")
            found[from_kgroup(to_kgroup(tp, "seek_to_committed()"))] = offset
        return found

    # ---------------------------------------------------------- lookups

    async def _watermarks(self, tp: KTopicPartition) -> tuple[int, int]:
        with _translated():
            return await self._running().get_watermark_offsets(tp)

    def _cached_high(self, partition: Any) -> int | None:
        consumer = self._running()
        tp = to_kgroup(partition, "highwater()")
        if from_kgroup(tp) not in self.assignment():
            raise IllegalStateError(f"Partition {from_kgroup(tp)} is not assigned")
        lookup = consumer._watermarks_lookup(tp, None, True)
        _, high = lookup()
        return high if high >= 0 else None

    def highwater(self, partition: Any) -> int | None:
        """The high watermark last heard while fetching (None: not yet)."""
        return self._cached_high(partition)

    def last_stable_offset(self, partition: Any) -> int | None:
        """The last stable offset last heard while fetching (``read_committed`` only)."""
        if self._config["isolation.level"] != "read_committed":
            raise IllegalOperation(
                "kgroup.aiokafka knows the last stable offset only with "
                "isolation_level='read_committed' (librdkafka keeps no LSO otherwise)"
            )
        return self._cached_high(partition)

    async def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        """The first offset of each partition."""
        return {
            from_kgroup(tp): (await self._watermarks(tp))[0]
            for tp in (to_kgroup(p, "beginning_offsets()") for p in partitions)
        }

    async def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        """The offset after the last record of each partition."""
        return {
            from_kgroup(tp): (await self._watermarks(tp))[1]
            for tp in (to_kgroup(p, "end_offsets()") for p in partitions)
        }

    async def offsets_for_times(
        self, timestamps: Mapping[Any, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset at or after each timestamp (ms); None past the end."""
        query = {to_kgroup(tp, "offsets_for_times()"): stamp for tp, stamp in timestamps.items()}
        for tp, stamp in query.items():
            if not isinstance(stamp, int) or stamp < 0:
                raise ValueError(f"The target time for partition {tp} is {stamp}.")
        with _translated():
            found = await self._running().offsets_for_times(query)
        return {
            from_kgroup(tp): None
            if offset is None or offset < 0
            else OffsetAndTimestamp(offset, None)
            for tp, offset in found.items()
        }

    async def topics(self) -> set[str]:
        """The cluster's topics (internal ones excluded)."""
        consumer = self._running()
        with _translated():
            metadata = await consumer.list_topics()
        self._metadata = {
            name: set(topic.partitions)
            for name, topic in metadata.topics.items()
            if not name.startswith("__")
        }
        return set(self._metadata)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The partition numbers of ``topic`` as last looked up (None: unknown)."""
        found = self._metadata.get(topic)
        return None if found is None else set(found)

    # ---------------------------------------------------------------- pause

    def pause(self, *partitions: Any) -> None:
        """Stop returning records of these owned partitions until resumed."""
        with _translated():
            self._running().pause([to_kgroup(tp, "pause()") for tp in partitions])

    def resume(self, *partitions: Any) -> None:
        """Resume partitions paused with :meth:`pause`."""
        with _translated():
            self._running().resume([to_kgroup(tp, "resume()") for tp in partitions])

    def paused(self) -> set[TopicPartition]:
        """The partitions paused and not resumed."""
        return {from_kgroup(tp) for tp in self._running().paused()}
