"""The share consumer's runtime core: sans-IO, time passed in.

:class:`ShareCore` owns one :class:`~kgroup.membership.share.ShareMember`, one
:class:`~kgroup.dataplane.share.session.ShareSession` per leader, the
:class:`~kgroup.dataplane.share.inflight.InFlight` and the acknowledgements
owed. The executor (:mod:`kgroup.share.driver`) feeds it what happened and
sends what :meth:`ShareCore.poll` returns, in the spirit of the Java client's
``ShareConsumeRequestManager.poll(now)``.

Decisions it encodes:

- Acknowledgements go ahead of the next fetch, in a ShareAcknowledge, as soon
  as the leader's session is idle: a ShareFetch carrying acknowledgements waits
  its full ``max_wait`` on the broker, measured at a third of the throughput.
- One request in flight per session; no fetch starts while the records held
  reach ``share.fetch.buffer.bytes``.
- Partitions leaving the assignment are forgotten by the next fetch; a session
  error resets the session and the next fetch opens a new one.
- Closing: implicit mode accepts the last batch, every session is closed (epoch
  -1, carrying what is owed), then the member leaves the group.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

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
    delivery_counts,
    match_acquired,
)
from kgroup.dataplane.share.records import ShareRecord, decode_records
from kgroup.dataplane.share.session import (
    FetchLimits,
    SessionState,
    ShareAcknowledgePlan,
    ShareFetchPlan,
    ShareSession,
)
from kgroup.error_codes import ErrorCode
from kgroup.errors import KgroupError, broker_error
from kgroup.membership import (
    Closed,
    CloseRequested,
    LeaveComplete,
    MetadataUpdated,
    PollCalled,
    RediscoverCoordinator,
    ReportFatalError,
    RequestMetadata,
    StartFetching,
    StopFetching,
    SubscriptionChanged,
    TimerTick,
    Unsubscribe,
)
from kgroup.membership.share import (
    AcknowledgementsFlushed,
    FlushAcknowledgements,
    SendShareHeartbeat,
    ShareMember,
    ShareMemberConfig,
    ShareMemberEvent,
)
from kgroup.protocol.cluster import ClusterMetadata
from kgroup.protocol.requests.share_acknowledge import ShareAcknowledgeResult
from kgroup.protocol.requests.share_fetch import ShareFetchResult
from kgroup.types import TopicIdPartition, TopicPartition

__all__ = [
    "CoreAction",
    "FetchMetadata",
    "SendShareAcknowledge",
    "SendShareFetch",
    "ShareCore",
    "ShareCoreConfig",
    "ShareCounters",
]

Acks = Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]]

# Partition errors that mean the metadata the fetch went by is stale: look the
# leader up again before fetching the partition once more.
_STALE_LEADER = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    }
)


_METADATA_RETRY = 0.25
"""Seconds before metadata is asked again after an answer that left a gap."""


@dataclass(frozen=True, slots=True)
class ShareCoreConfig:
    """What the core needs of the consumer's config."""

    group_id: str
    mode: AcknowledgementMode = AcknowledgementMode.IMPLICIT
    limits: FetchLimits = field(default_factory=FetchLimits)
    buffer_bytes: int = 64 << 20
    rack_id: str | None = None
    max_poll_interval_ms: int = 300_000


@dataclass(frozen=True, slots=True)
class FetchMetadata:
    """Describe ``topics`` (and, when ``topic_ids`` is not empty, every topic, to name
    those ids); answer with :meth:`ShareCore.on_metadata`."""

    topics: frozenset[str]
    topic_ids: frozenset[uuid.UUID] = frozenset()


@dataclass(frozen=True, slots=True)
class SendShareFetch:
    """Send ``plan`` to ``plan.node``; answer with :meth:`ShareCore.on_fetch_answered`
    or :meth:`ShareCore.on_request_failed`."""

    plan: ShareFetchPlan


@dataclass(frozen=True, slots=True)
class SendShareAcknowledge:
    """Send ``plan`` to ``plan.node``; answer with
    :meth:`ShareCore.on_acknowledge_answered` or :meth:`ShareCore.on_request_failed`."""

    plan: ShareAcknowledgePlan


CoreAction = (
    SendShareHeartbeat
    | RediscoverCoordinator
    | FetchMetadata
    | SendShareFetch
    | SendShareAcknowledge
)
"""Every request :meth:`ShareCore.poll` asks the executor to make."""


class _Closing(enum.Enum):
    OPEN = "open"
    FLUSHING = "flushing"  # closing the share sessions
    LEAVING = "leaving"  # the member sends its leave heartbeat
    CLOSED = "closed"


@dataclass
class ShareCounters:
    """Running totals for :meth:`ShareCore.metrics`."""

    records_delivered: int = 0
    fetch_requests: int = 0
    fetch_bytes: int = 0
    acknowledge_requests: int = 0
    request_failures: int = 0
    partition_errors: int = 0
    session_resets: int = 0
    acknowledged: dict[str, int] = field(default_factory=dict)
    acknowledgement_failures: int = 0


class ShareCore:
    """The sans-IO share runtime (see the module).

    Feed it events (:meth:`subscribe`, :meth:`member_event`, :meth:`on_metadata`,
    :meth:`on_fetch_answered`, :meth:`on_acknowledge_answered`,
    :meth:`on_request_failed`, :meth:`tick`) and the application's calls
    (:meth:`consume`, :meth:`acknowledge`, :meth:`commit`, :meth:`close`); after
    each, :meth:`poll` says what to send.
    """

    def __init__(self, config: ShareCoreConfig, member_id: str) -> None:
        self.config = config
        self.member = ShareMember(
            ShareMemberConfig(
                group_id=config.group_id,
                rack_id=config.rack_id,
                max_poll_interval_ms=config.max_poll_interval_ms,
            ),
            member_id=member_id,
        )
        self.inflight = InFlight(config.mode, config.buffer_bytes)
        self.sessions: dict[int, ShareSession] = {}
        self.counters = ShareCounters()
        self.fatal: KgroupError | None = None
        """The member's fatal error: raised from the next consume."""
        self.assignment_changes = 0
        """Bumped each time the assignment changed (the telemetry watches it)."""
        self._fetching: set[TopicPartition] = set()
        self._leaders: dict[TopicPartition, tuple[int, TopicIdPartition]] = {}
        self._names: dict[uuid.UUID, str] = {}
        self._outbox: list[CoreAction] = []
        self._metadata_asked = False
        self._metadata_retry_at = 0.0
        self._unnamed: set[uuid.UUID] = set()
        self._sent: dict[int, Acks] = {}
        self._answered: list[AcknowledgementOutcome] = []
        self._closing = _Closing.OPEN
        self._flush_token: int | None = None
        self.close_timed_out = False
        self._subscription: frozenset[str] = frozenset()
        # Fetching follows the application's demand (see _may_fetch): a consume()
        # waiting for records, or one batch fetched ahead of the next consume().
        # None before the first consume(), as the Java client: a member that
        # joined and is not consuming yet must not lock records away.
        self._waiting = False
        self._lookahead = False

    # ------------------------------------------------------------------ membership

    @property
    def member_id(self) -> str:
        """The member id, the same for the consumer's life."""
        return self.member.member_id

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions this member fetches."""
        return frozenset(self._fetching)

    @property
    def topic_names(self) -> Mapping[uuid.UUID, str]:
        """Topic names by id, as far as metadata told."""
        return self._names

    @property
    def closed(self) -> bool:
        """Whether the close finished (sessions closed, the group left)."""
        return self._closing is _Closing.CLOSED and self._flushed()

    def subscribe(self, topics: Iterable[str], now: float) -> None:
        """The application subscribed to ``topics`` (an empty list unsubscribes)."""
        names = frozenset(topics)
        self._subscription = names
        if names:
            self.member_event(SubscriptionChanged(names), now)
        else:
            self.member_event(Unsubscribe(), now)

    def subscription(self) -> frozenset[str]:
        """The topic names subscribed to."""
        return self._subscription

    def next_deadline(self) -> float | None:
        """When :meth:`tick` is due (the member's timers, a metadata retry)."""
        deadline: float | None = self.member.next_deadline()
        if self._metadata_retry_at and not self._metadata_asked:
            retry = self._metadata_retry_at
            deadline = retry if deadline is None else min(deadline, retry)
        return deadline

    def tick(self, now: float) -> None:
        """A deadline from :meth:`next_deadline` passed."""
        self.member_event(TimerTick(), now)

    def member_event(self, event: ShareMemberEvent, now: float) -> None:
        """Hand ``event`` (a heartbeat's answer or failure, a rediscovered
        coordinator, ...) to the member and act on what it says."""
        for act in self.member.handle(event, now):
            match act:
                case StartFetching():
                    self._fetching |= act.partitions
                    self.assignment_changes += 1
                case StopFetching():
                    self._fetching -= act.partitions
                    for tp in act.partitions:
                        self._leaders.pop(tp, None)
                    self.assignment_changes += 1
                case ReportFatalError():
                    self.fatal = broker_error(act.code, act.message)
                case FlushAcknowledgements():
                    self._flush_token = act.token
                    self._closing = _Closing.FLUSHING
                case RequestMetadata():
                    self._unnamed |= act.topic_ids
                case SendShareHeartbeat() | RediscoverCoordinator():
                    self._outbox.append(act)
                case Closed():
                    self.close_timed_out = act.timed_out
                    self._closing = _Closing.CLOSED
                case LeaveComplete():
                    pass
                case _:
                    # ReportError: a non-fatal heartbeat error the member retries.
                    pass

    # ------------------------------------------------------------------ metadata

    def on_metadata(self, cluster: ClusterMetadata, now: float) -> None:
        """A metadata answer: leaders of the partitions to fetch, names of topic ids."""
        self._metadata_asked = False
        for described in cluster.topics.values():
            self._names[described.topic_id] = described.name
        if self._unnamed:
            named = {i: self._names[i] for i in self._unnamed if i in self._names}
            # Ids still unnamed are asked for again when the member next needs them.
            self._unnamed = set()
            self.member_event(MetadataUpdated(named), now)
        for tp in self._fetching:
            topic = cluster.topics.get(tp.topic)
            info = topic.partitions.get(tp.partition) if topic is not None else None
            if topic is None or info is None or info.leader < 0:
                continue
            self._leaders[tp] = (info.leader, TopicIdPartition(topic.topic_id, tp.partition))
        if any(tp not in self._leaders for tp in self._fetching):
            # A partition without a leader (an election under way): ask again soon,
            # not at once.
            self._metadata_retry_at = now + _METADATA_RETRY

    def on_metadata_failed(self, now: float) -> None:
        """The metadata request got no answer: asked again a little later."""
        self._metadata_asked = False
        self._metadata_retry_at = now + _METADATA_RETRY

    # ------------------------------------------------------------------ requests

    def poll(self, now: float) -> list[CoreAction]:
        """The requests to send now."""
        actions = self._outbox
        self._outbox = []
        missing = {tp.topic for tp in self._fetching if tp not in self._leaders}
        if now >= self._metadata_retry_at:
            self._metadata_retry_at = 0.0
        if (missing or self._unnamed) and not self._metadata_asked and not self._metadata_retry_at:
            self._metadata_asked = True
            actions.append(FetchMetadata(frozenset(missing), frozenset(self._unnamed)))
        wanted: dict[int, set[TopicIdPartition]] = {}
        if self._closing is _Closing.OPEN:
            for tp in self._fetching:
                if tp in self._leaders:
                    node, tip = self._leaders[tp]
                    wanted.setdefault(node, set()).add(tip)
        pending_nodes = self.inflight.pending.nodes()
        fetches_before = self.counters.fetch_requests
        for node in sorted(set(wanted) | set(self.sessions) | pending_nodes):
            session = self.sessions.get(node)
            if session is None:
                if node not in wanted:
                    continue
                session = self.sessions[node] = ShareSession(node, self.member_id)
            if session.in_flight or session.state is SessionState.CLOSED:
                continue
            session.set_partitions(wanted.get(node, ()))
            action = self._next_for(session, node in pending_nodes)
            if action is not None:
                actions.append(action)
        if self.counters.fetch_requests > fetches_before:
            self._lookahead = False  # spent: the next comes with the next consume()
        if self._closing is _Closing.FLUSHING and self._flushed():
            token = self._flush_token
            assert token is not None
            self._closing = _Closing.LEAVING
            self.member_event(AcknowledgementsFlushed(token), now)
            actions += self._outbox
            self._outbox = []
        return actions

    def _next_for(self, session: ShareSession, owed: bool) -> CoreAction | None:
        node = session.node
        if self._closing is not _Closing.OPEN:
            acks = self.inflight.pending.take_all(node)
            close = session.close(acks)
            if close is None:
                # No session was open: nothing can carry them; their locks expire.
                self._lost(acks)
                return None
            self._sent[node] = acks
            self.counters.acknowledge_requests += 1
            return SendShareAcknowledge(close)
        if owed and session.state is SessionState.NEW and not self._still_assigned(node):
            # The session they belong to is gone and no fetch will open another: no
            # request can carry them. The broker releases those records when their
            # locks expire (at-least-once: they are delivered again).
            self._lost(self.inflight.pending.take_all(node))
            return None
        if owed and session.state is SessionState.OPEN:
            acks = self.inflight.pending.take_all(node)
            ack = session.acknowledge(acks)
            assert ack is not None  # the session is open
            self._sent[node] = acks
            self.counters.acknowledge_requests += 1
            return SendShareAcknowledge(ack)
        if session.fetch_partitions() and self._may_fetch():
            self._sent[node] = {}
            self.counters.fetch_requests += 1
            return SendShareFetch(session.fetch(self.config.limits))
        if (
            not session.fetch_partitions()
            and session.state is SessionState.OPEN
            and session.session_partitions
        ):
            # Every partition left: a fetch forgetting them all, so the broker
            # stops holding records for this member there.
            self._sent[node] = {}
            self.counters.fetch_requests += 1
            return SendShareFetch(session.fetch(self.config.limits))
        return None

    def _may_fetch(self) -> bool:
        # As the Java client: no fetch while fetched records wait to be handed out.
        # They are acquired, and the broker caps the records a share partition has
        # acquired at once (group.share.partition.max.record.locks): fetching more
        # before they are acknowledged would only wait out max_wait on the broker.
        # And only on the application's demand: while a consume() waits, or once
        # ahead of the next consume() after records were handed out. A consumer
        # whose application stopped asking (it sits on an explicit batch, or is
        # busy) must not keep acquiring: every record it fetched would stay locked
        # away from the other members, and come back to it again and again as
        # its lock runs out, each time one delivery nearer the limit.
        return (
            self.inflight.has_room()
            and self.inflight.buffered == 0
            and (self._waiting or self._lookahead)
        )

    def _still_assigned(self, node: int) -> bool:
        """Whether a partition with acknowledgements owed to ``node`` is still assigned."""
        for tip in self.inflight.pending.partitions(node):
            name = self._names.get(tip.topic_id)
            if name is not None and TopicPartition(name, tip.partition) in self._fetching:
                return True
        return False

    def _flushed(self) -> bool:
        return all(
            s.state is SessionState.CLOSED and not s.in_flight for s in self.sessions.values()
        )

    def _lost(self, acks: Acks) -> None:
        if acks:
            self._record(outcomes(acks, {}, request_error=ErrorCode.SHARE_SESSION_NOT_FOUND))

    def _record(self, results: Iterable[AcknowledgementOutcome]) -> None:
        for result in results:
            self._answered.append(result)
            if not result.succeeded:
                self.counters.acknowledgement_failures += len(result.offsets)

    # ------------------------------------------------------------------ answers

    def on_fetch_answered(self, node: int, result: ShareFetchResult, now: float) -> None:
        """A ShareFetch to ``node`` was answered at ``now``."""
        session = self.sessions[node]
        sent = self._sent.pop(node, {})
        if not session.on_response(result.error_code, fetch=True):
            self.counters.session_resets += result.error_code != ErrorCode.NONE
        self._record(
            outcomes(sent, result.acknowledge_error_codes(), request_error=result.error_code)
        )
        if result.error_code != ErrorCode.NONE:
            return
        deadline = now + result.acquisition_lock_timeout_ms / 1000
        held = {tip for tip in session.fetch_partitions()}
        for part in result.partitions:
            tip = part.partition
            if part.error_code:
                self.counters.partition_errors += 1
                if part.error_code in _STALE_LEADER:
                    self._forget_leader(tip)
                continue
            name = self._names.get(tip.topic_id)
            if name is None or tip not in held or not part.acquired:
                continue
            acquired = [
                AcquiredRange(a.first_offset, a.last_offset, a.delivery_count)
                for a in part.acquired
            ]
            decoded = decode_records(
                name, tip.partition, part.records, delivery_counts=delivery_counts(acquired)
            )
            self.counters.fetch_bytes += len(part.records)
            self.inflight.add(match_acquired(tip, node, decoded, acquired, lock_deadline=deadline))

    def on_acknowledge_answered(self, node: int, result: ShareAcknowledgeResult) -> None:
        """A ShareAcknowledge to ``node`` was answered."""
        session = self.sessions[node]
        sent = self._sent.pop(node, {})
        if not session.on_response(result.error_code, fetch=False):
            self.counters.session_resets += result.error_code != ErrorCode.NONE
        codes = {p.partition: p.error_code for p in result.partitions}
        self._record(outcomes(sent, codes, request_error=result.error_code))
        for part in result.partitions:
            if part.error_code in _STALE_LEADER:
                self._forget_leader(part.partition)

    def on_request_failed(self, node: int) -> None:
        """The request to ``node`` got no answer (connection lost, timed out).

        Whether the broker saw it is unknown: the session reopens with the next
        fetch, and the acknowledgements it carried are owed again (sending one
        twice is harmless: the second is refused as the records are no longer
        acquired; losing one would leave records locked until their timeout).
        """
        session = self.sessions[node]
        closing = session.state is SessionState.CLOSING
        session.on_transport_error()
        self.counters.request_failures += 1
        sent = self._sent.pop(node, {})
        if closing:
            self._lost(sent)
            return
        for tip, batches in sent.items():
            self.inflight.pending.restore(node, tip, batches)
        for tp, (leader, _) in list(self._leaders.items()):
            if leader == node:
                del self._leaders[tp]

    def _forget_leader(self, tip: TopicIdPartition) -> None:
        for tp, (_, known) in list(self._leaders.items()):
            if known == tip:
                del self._leaders[tp]

    # ------------------------------------------------------------------ application

    def consume(self, max_records: int, now: float) -> tuple[ShareRecord, ...]:
        """Settle the last batch (implicit mode accepts it) and hand out up to
        ``max_records`` records.

        Raises:
            KgroupError: the member's fatal error.
            UnacknowledgedRecordsError: explicit mode, a record of the last batch
                is unacknowledged.
        """
        if self.fatal is not None:
            raise self.fatal
        settled = self.inflight.delivered
        records = self.inflight.poll(max_records)
        # Records handed out: fetch the next batch while the application works
        # on these. None: the application waits, fetch until some come.
        self._waiting = not records
        self._lookahead = self._lookahead or bool(records)
        if self.config.mode is AcknowledgementMode.IMPLICIT and settled:
            self._count(AcknowledgeType.ACCEPT, settled)
        self.counters.records_delivered += len(records)
        self.member_event(PollCalled(), now)
        return records

    def consume_ended(self) -> None:
        """A consume() that found no records returned (its timeout, or close):
        the application no longer waits, so no fetch is made for it."""
        self._waiting = False

    def _count(self, kind: AcknowledgeType, n: int) -> None:
        self.counters.acknowledged[kind.name] = self.counters.acknowledged.get(kind.name, 0) + n

    def acknowledge(self, record: ShareRecord, kind: AcknowledgeType) -> None:
        """Explicit mode: acknowledge ``record`` of the last batch as ``kind``."""
        self.inflight.acknowledge(record, kind)
        self._count(kind, 1)

    def commit(self) -> None:
        """Owe the acknowledgements to send now (implicit mode: the last batch accepted);
        :meth:`poll` sends them. Wait with :meth:`committed`."""
        before = self.inflight.delivered
        self.inflight.prepare_commit()
        if self.config.mode is AcknowledgementMode.IMPLICIT and before:
            self._count(AcknowledgeType.ACCEPT, before - self.inflight.delivered)

    def committed(self) -> bool:
        """Whether every owed acknowledgement was sent and answered (or cannot be sent:
        the session it belongs to is gone, the consumer closed)."""
        if self._sent and any(bool(acks) for acks in self._sent.values()):
            return False
        if self._closing is _Closing.CLOSED:
            return True
        return not any(
            self.sessions.get(node) is not None
            and self.sessions[node].state is not SessionState.CLOSED
            for node in self.inflight.pending.nodes()
        )

    def take_outcomes(self) -> list[AcknowledgementOutcome]:
        """The acknowledgement outcomes answered since last asked, oldest first."""
        answered, self._answered = self._answered, []
        return answered

    def close(self, deadline: float, now: float) -> None:
        """Start closing: implicit mode accepts the last batch; records not handed out
        or not acknowledged are left to the broker, which releases them when the
        session closes; then the member leaves (by ``deadline``)."""
        if self._closing is not _Closing.OPEN:
            return
        self.commit()
        self.inflight.close()
        # Sessions close whether or not the member asks for a flush (it does not
        # when it holds no assignment): the broker then frees them at once.
        self._closing = _Closing.LEAVING
        self.member_event(CloseRequested(deadline=deadline), now)

    def metrics(self) -> dict[str, object]:
        """Counters: records delivered, acknowledged by type, requests, bytes held ..."""
        c = self.counters
        return {
            "records_delivered": c.records_delivered,
            "records_acknowledged": dict(c.acknowledged),
            "acknowledgement_failures": c.acknowledgement_failures,
            "fetch_requests": c.fetch_requests,
            "fetch_bytes": c.fetch_bytes,
            "acknowledge_requests": c.acknowledge_requests,
            "request_failures": c.request_failures,
            "partition_errors": c.partition_errors,
            "session_resets": c.session_resets,
            "bytes_held": self.inflight.held_bytes,
            "records_buffered": self.inflight.buffered,
            "records_unacknowledged": self.inflight.delivered,
            "acknowledgements_owed": len(self.inflight.pending),
            "assigned_partitions": len(self._fetching),
        }
