"""A small share consumer for the real-broker tests of the share data path.

No share consumer runs the pieces together yet. :class:`ShareDriver` does,
the way one will: a :class:`~kgroup.membership.share.ShareMember` heartbeats
in its own task (:meth:`ShareDriver.run`), and the fetch path
(:meth:`ShareDriver.fetch`, :meth:`ShareDriver.commit`, :meth:`ShareDriver.close`)
keeps one :class:`~kgroup.dataplane.share.session.ShareSession` per leader,
one :class:`~kgroup.dataplane.share.inflight.InFlight`, and speaks ShareFetch
and ShareAcknowledge through :mod:`kgroup.protocol.requests.share_fetch` and
:mod:`~kgroup.protocol.requests.share_acknowledge` over kgroup's transport.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
from confluent_kafka import Producer

from kgroup.dataplane.share.acknowledgements import (
    AcknowledgementBatch,
    AcknowledgementOutcome,
    AcknowledgeType,
    outcomes,
)
from kgroup.dataplane.share.inflight import (
    AcknowledgementMode,
    AcquiredRange,
    InFlight,
    match_acquired,
)
from kgroup.dataplane.share.records import ShareRecord, decode_records
from kgroup.dataplane.share.session import FetchLimits, ShareSession
from kgroup.errors import KafkaProtocolError, TransportError
from kgroup.membership import (
    CloseRequested,
    MetadataUpdated,
    ReportFatalError,
    RequestMetadata,
    StartFetching,
    StopFetching,
    SubscriptionChanged,
    TimerTick,
)
from kgroup.membership.share import (
    AcknowledgementsFlushed,
    FlushAcknowledgements,
    SendShareHeartbeat,
    ShareHeartbeatResponseReceived,
    ShareMember,
    ShareMemberConfig,
    new_member_id,
)
from kgroup.protocol.requests import share_acknowledge, share_fetch, share_group_heartbeat
from kgroup.protocol.requests.share_fetch import ShareFetchPartition
from kgroup.transport.client import KafkaClient
from kgroup.types import TopicIdPartition, TopicPartition

Acks = Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]]


def produce_records(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes]] | None]],
    **config: Any,
) -> None:
    """Produce ``(key, value, headers)`` records to partition 0, waiting for every ack
    (``config``: the producer's settings, dotted keys with ``_`` for ``.``)."""
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 20}
    settings.update({k.replace("_", "."): v for k, v in config.items()})
    producer = Producer(settings)
    for key, value, headers in records:
        listed: list[tuple[str, str | bytes | None]] | None = (
            None if headers is None else list(headers)
        )
        producer.produce(topic, value, key, partition=0, headers=listed)
    assert producer.flush(30) == 0


class ShareDriver:
    """One share member and its fetch path over one :class:`KafkaClient`."""

    def __init__(
        self,
        client: KafkaClient,
        group_id: str,
        *,
        mode: AcknowledgementMode = AcknowledgementMode.EXPLICIT,
        limits: FetchLimits | None = None,
        max_bytes: int = 64 << 20,
    ) -> None:
        self.client = client
        self.group_id = group_id
        self.member = ShareMember(ShareMemberConfig(group_id=group_id), member_id=new_member_id())
        self.limits = limits or FetchLimits(max_wait_ms=300)
        self.inflight = InFlight(mode, max_bytes)
        self.sessions: dict[int, ShareSession] = {}
        self.fetching: set[TopicPartition] = set()
        self.fatal: list[ReportFatalError] = []
        self.results: list[AcknowledgementOutcome] = []
        """Every acknowledgement's outcome, in the order answered."""
        self.partition_errors: list[ShareFetchPartition] = []
        self.lock_timeouts_ms: list[int] = []
        """The acquisition lock timeout of every ShareFetch response."""
        self._lock = anyio.Lock()
        self._changed = anyio.Event()
        send, receive = anyio.create_memory_object_stream[object](16)
        self._events, self._inbox = send, receive

    # ----------------------------------------------------------------- membership

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Return once ``condition()`` holds, checked after each membership change."""
        while not condition():
            await self._changed.wait()

    async def run(self, topics: Iterable[str]) -> None:
        """Join subscribed to ``topics`` and heartbeat until closed (a task)."""
        coordinator = await self.client.coordinator(self.group_id)
        member = self.member
        pending = member.handle(SubscriptionChanged(frozenset(topics)), time.monotonic())
        while True:
            later: list[object] = []
            for act in pending:
                match act:
                    case StartFetching():
                        self.fetching |= act.partitions
                    case StopFetching():
                        self.fetching -= act.partitions
                    case ReportFatalError():
                        self.fatal.append(act)
                    case SendShareHeartbeat():
                        build = functools.partial(share_group_heartbeat.build, request=act.request)
                        response = await self.client.request(build, node=coordinator.node_id)
                        parsed = share_group_heartbeat.parse(share_group_heartbeat.narrow(response))
                        later.append(ShareHeartbeatResponseReceived(act.seq, parsed))
                    case RequestMetadata():
                        known = await self.client.metadata()
                        later.append(
                            MetadataUpdated({i: known.topic_name(i) for i in act.topic_ids})
                        )
                    case FlushAcknowledgements():
                        await self.commit()
                        later.append(AcknowledgementsFlushed(act.token))
            if pending:
                self._notify()
            if member.closed:
                return
            pending = []
            for answer in later:
                pending += member.handle(answer, time.monotonic())  # type: ignore[arg-type]
            if later:
                continue
            deadline = member.next_deadline()
            wait = max(0.0, (deadline or time.monotonic() + 1.0) - time.monotonic())
            with anyio.move_on_after(wait):
                event = await self._inbox.receive()
                pending = member.handle(event, time.monotonic())  # type: ignore[arg-type]
                continue
            pending = member.handle(TimerTick(), time.monotonic())

    # ----------------------------------------------------------------- data path

    async def _leaders(self) -> tuple[dict[int, set[TopicIdPartition]], dict[uuid.UUID, str]]:
        """The partitions to fetch by leader, and topic names by id."""
        known = await self.client.metadata(sorted({tp.topic for tp in self.fetching}))
        names = {t.topic_id: t.name for t in known.topics.values()}
        by_node: dict[int, set[TopicIdPartition]] = {}
        for tp in self.fetching:
            topic = known.topics[tp.topic]
            leader = topic.partitions[tp.partition].leader
            by_node.setdefault(leader, set()).add(TopicIdPartition(topic.topic_id, tp.partition))
        return by_node, names

    async def fetch(self, max_records: int = 10_000) -> tuple[ShareRecord, ...]:
        """One ShareFetch to each leader (owed acknowledgements riding along), then
        hand out what was acquired (the mode's rule settles the last records first)."""
        async with self._lock:
            wanted, names = await self._leaders()
            for node in sorted(set(wanted) | set(self.sessions)):
                session = self.sessions.setdefault(node, ShareSession(node, self.member.member_id))
                session.set_partitions(wanted.get(node, ()))
                if not session.fetch_partitions():
                    continue
                acks = self.inflight.pending.take_for_fetch(node, session.fetch_partitions())
                plan = session.fetch(self.limits, acks)
                try:
                    response = await self.client.request(
                        functools.partial(share_fetch.build, plan=plan, group_id=self.group_id),
                        node=node,
                    )
                except (TransportError, KafkaProtocolError):
                    # Whether the broker saw it is unknown: the next fetch opens a new session.
                    session.on_transport_error()
                    raise
                arrived = time.monotonic()
                result = share_fetch.parse(share_fetch.narrow(response))
                session.on_response(result.error_code, fetch=True)
                self.results += outcomes(
                    acks, result.acknowledge_error_codes(), request_error=result.error_code
                )
                self.lock_timeouts_ms.append(result.acquisition_lock_timeout_ms)
                for part in result.partitions:
                    if part.error_code:
                        self.partition_errors.append(part)
                        continue
                    tp = part.partition
                    decoded = decode_records(names[tp.topic_id], tp.partition, part.records)
                    acquired = [
                        AcquiredRange(a.first_offset, a.last_offset, a.delivery_count)
                        for a in part.acquired
                    ]
                    deadline = arrived + result.acquisition_lock_timeout_ms / 1000
                    self.inflight.add(
                        match_acquired(tp, node, decoded, acquired, lock_deadline=deadline)
                    )
        return self.inflight.poll(max_records)

    def acknowledge(self, records: Iterable[ShareRecord], kind: AcknowledgeType) -> None:
        """Acknowledge ``records`` (explicit mode); sent by the next fetch or commit."""
        for record in records:
            self.inflight.acknowledge(record, kind)

    async def commit(self) -> tuple[AcknowledgementOutcome, ...]:
        """Send every owed acknowledgement now, in a ShareAcknowledge per leader."""
        async with self._lock:
            self.inflight.prepare_commit()
            answered: list[AcknowledgementOutcome] = []
            for node in sorted(self.inflight.pending.nodes()):
                session = self.sessions.get(node)
                if session is None:
                    continue
                acks = self.inflight.pending.take_all(node)
                plan = session.acknowledge(acks)
                if plan is None:
                    continue
                answered += await self._acknowledge(session, plan, acks)
            return tuple(answered)

    async def _acknowledge(self, session: ShareSession, plan: Any, acks: Acks) -> list[Any]:
        try:
            response = await self.client.request(
                functools.partial(share_acknowledge.build, plan=plan, group_id=self.group_id),
                node=session.node,
            )
        except (TransportError, KafkaProtocolError):
            session.on_transport_error()
            raise
        result = share_acknowledge.parse(share_acknowledge.narrow(response))
        session.on_response(result.error_code, fetch=False)
        answered = list(
            outcomes(acks, result.acknowledge_error_codes(), request_error=result.error_code)
        )
        self.results += answered
        return answered

    async def close(self) -> None:
        """Close every share session (carrying what was acknowledged), then leave."""
        async with self._lock:
            self.inflight.close()
            for node, session in sorted(self.sessions.items()):
                acks = self.inflight.pending.take_all(node)
                plan = session.close(acks)
                if plan is not None:
                    await self._acknowledge(session, plan, acks)
        await self._events.send(CloseRequested(deadline=time.monotonic() + 10))
        await self.wait_until(lambda: self.member.closed)
