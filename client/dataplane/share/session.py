"""One share session per leader: which partitions the next ShareFetch names, at which epoch.

KIP-932's share session lets a member fetch a set of share partitions from a
broker over and over without listing them each time. The client keeps the
session's epoch: 0 opens a session (the request names every partition it
wants), each answered request moves it on by one (wrapping past 2**31-1 to 1,
never back to 0), and -1 closes the session. An incremental request names only
the partitions added since the last one (plus those carrying acknowledgements)
and lists the partitions dropped since as ``forgotten``. A topic deleted and
created again under the same name has a new topic id, so it is a different
:class:`~kgroup.types.TopicIdPartition`: the old one is forgotten and the new
one added, as the Java client's "replaced" partitions are.

The epoch moves on when a response arrives, not when a request leaves, so a
session has at most one request in flight (ShareFetch or ShareAcknowledge: they
share the epoch). ``SHARE_SESSION_NOT_FOUND`` and
``INVALID_SHARE_SESSION_EPOCH`` (and, for ShareFetch,
``SHARE_SESSION_LIMIT_REACHED``), or a request lost in transport, make the next
request open a new session at epoch 0; any other top-level error still moves
the epoch on (the broker did count the request), as Java's
``ShareSessionHandler`` does. A ShareAcknowledge cannot open a session: with
none open there is nothing to acknowledge to (the records' locks belonged to
the old session's member on that broker and will expire).

The output is a frozen description (:class:`ShareFetchPlan`,
:class:`ShareAcknowledgePlan`) that a protocol module turns into kio's request.
Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kgroup.dataplane.share.acknowledgements import AcknowledgementBatch, AcknowledgeType
from kgroup.error_codes import ErrorCode
from kgroup.types import TopicIdPartition

__all__ = [
    "CLOSE_EPOCH",
    "OPEN_EPOCH",
    "AcquireMode",
    "FetchLimits",
    "SessionState",
    "ShareAcknowledgePlan",
    "ShareFetchPlan",
    "ShareSession",
    "next_epoch",
]

OPEN_EPOCH = 0
"""The epoch of a request that opens a share session."""
CLOSE_EPOCH = -1
"""The epoch of a request that closes a share session."""
_MAX_EPOCH = 2**31 - 1

_SESSION_RESETS = frozenset(
    {ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH}
)
_FETCH_SESSION_RESETS = _SESSION_RESETS | {ErrorCode.SHARE_SESSION_LIMIT_REACHED}


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: +1, wrapping to 1 (0 would open a new session)."""
    if epoch < 0:
        return CLOSE_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


class AcquireMode(enum.IntEnum):
    """ShareFetch v2's ``share_acquire_mode`` (KIP-1206)."""

    BATCH_OPTIMIZED = 0
    """``max_records`` is a soft limit: whole batches may exceed it."""
    RECORD_LIMIT = 1
    """``max_records`` is strict: never more records acquired than asked for."""


@dataclass(frozen=True, slots=True)
class FetchLimits:
    """What a ShareFetch asks the broker to bound (the consumer's fetch settings)."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    max_records: int = 500
    batch_size: int = 500
    acquire_mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED

    def __post_init__(self) -> None:
        for name in ("max_wait_ms", "min_bytes", "max_bytes", "max_records", "batch_size"):
            value = getattr(self, name)
            if not 0 <= value <= _MAX_EPOCH:
                raise ValueError(f"{name} must be a non-negative int32, got {value}")
        if self.max_records < 1 or self.batch_size < 1:
            raise ValueError("max_records and batch_size must be at least 1")


def _uses_renew(acks: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]]) -> bool:
    return any(AcknowledgeType.RENEW in b.types for batches in acks.values() for b in batches)


@dataclass(frozen=True, slots=True)
class ShareFetchPlan:
    """A ShareFetch to send to ``node``, described, not encoded.

    Attributes:
        node: the leader's node id.
        member_id: the share member's id.
        epoch: the share session epoch.
        partitions: the partitions the request names (its ``topics``), sorted:
            on open every partition wanted; afterwards those added since the
            last request and those carrying acknowledgements.
        forgotten: partitions to remove from the session, sorted.
        acknowledgements: per partition named, the batches riding along.
        limits: the fetch's bounds.
    """

    node: int
    member_id: str
    epoch: int
    partitions: tuple[TopicIdPartition, ...]
    forgotten: tuple[TopicIdPartition, ...]
    acknowledgements: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]]
    limits: FetchLimits

    @property
    def renews(self) -> bool:
        """Whether a RENEW acknowledgement rides along (v2's ``is_renew_ack``)."""
        return _uses_renew(self.acknowledgements)


@dataclass(frozen=True, slots=True)
class ShareAcknowledgePlan:
    """A ShareAcknowledge to send to ``node``: acknowledgements alone, no fetch."""

    node: int
    member_id: str
    epoch: int
    acknowledgements: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]]

    @property
    def renews(self) -> bool:
        """Whether a RENEW acknowledgement is carried (v2's ``is_renew_ack``)."""
        return _uses_renew(self.acknowledgements)


class SessionState(enum.Enum):
    """Where a share session stands."""

    NEW = "new"
    """No session on the broker: the next ShareFetch opens one at epoch 0."""
    OPEN = "open"
    """A session is open: requests are incremental."""
    CLOSING = "closing"
    """The closing request (epoch -1) is built; nothing follows it."""
    CLOSED = "closed"


@dataclass
class ShareSession:
    """The client side of one share session with one leader.

    Tell it the partitions this member wants from the node
    (:meth:`set_partitions`), build a request when none is in flight
    (:meth:`fetch`, :meth:`acknowledge`, :meth:`close`), and report what
    became of that request (:meth:`on_response`, :meth:`on_transport_error`).
    """

    node: int
    member_id: str
    _state: SessionState = field(default=SessionState.NEW, init=False)
    _epoch: int = field(default=OPEN_EPOCH, init=False)
    _in_session: set[TopicIdPartition] = field(default_factory=set, init=False)
    _wanted: set[TopicIdPartition] = field(default_factory=set, init=False)
    _in_flight: bool = field(default=False, init=False)

    @property
    def state(self) -> SessionState:
        """Where the session stands."""
        return self._state

    @property
    def epoch(self) -> int:
        """The epoch the next request carries."""
        return self._epoch

    @property
    def in_flight(self) -> bool:
        """Whether a request was built and not yet answered."""
        return self._in_flight

    @property
    def session_partitions(self) -> frozenset[TopicIdPartition]:
        """The partitions the broker's session holds, as far as the client knows."""
        return frozenset(self._in_session)

    def set_partitions(self, partitions: Iterable[TopicIdPartition]) -> None:
        """The partitions this member wants fetched from this node from now on."""
        self._wanted = set(partitions)

    def fetch(
        self,
        limits: FetchLimits,
        acknowledgements: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]] = (
            MappingProxyType({})
        ),
    ) -> ShareFetchPlan:
        """The next ShareFetch, with ``acknowledgements`` riding along.

        Acknowledgements may be carried only for partitions the session holds
        after this request (take them with
        :meth:`PendingAcknowledgements.take_for_fetch` and
        :meth:`fetch_partitions`).

        Raises:
            RuntimeError: a request is in flight, or the session is closing or closed.
        """
        self._check_can_send()
        after = set(self._wanted)
        stray = set(acknowledgements) - after
        if stray:
            raise ValueError(
                f"acknowledgements for partitions the session will not hold: {sorted(stray)}"
            )
        if self._state is SessionState.NEW:
            named = after
            forgotten: set[TopicIdPartition] = set()
        else:
            named = (after - self._in_session) | set(acknowledgements)
            forgotten = self._in_session - after
        self._in_session = after
        self._in_flight = True
        return ShareFetchPlan(
            node=self.node,
            member_id=self.member_id,
            epoch=self._epoch,
            partitions=tuple(sorted(named)),
            forgotten=tuple(sorted(forgotten)),
            acknowledgements=MappingProxyType(dict(acknowledgements)),
            limits=limits,
        )

    def fetch_partitions(self) -> frozenset[TopicIdPartition]:
        """The partitions the next ShareFetch leaves in the session (those whose
        acknowledgements may ride on it)."""
        return frozenset(self._wanted)

    def acknowledge(
        self, acknowledgements: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]]
    ) -> ShareAcknowledgePlan | None:
        """A ShareAcknowledge carrying ``acknowledgements``, or ``None`` when no session
        is open (a ShareAcknowledge cannot open one).

        Raises:
            RuntimeError: a request is in flight, or the session is closing or closed.
        """
        self._check_can_send()
        if self._state is SessionState.NEW:
            return None
        self._in_flight = True
        return ShareAcknowledgePlan(
            self.node, self.member_id, self._epoch, MappingProxyType(dict(acknowledgements))
        )

    def close(
        self,
        acknowledgements: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]] = (
            MappingProxyType({})
        ),
    ) -> ShareAcknowledgePlan | None:
        """The ShareAcknowledge at epoch -1 that closes the session, carrying the last
        ``acknowledgements``; ``None`` (and closed at once) when no session is open.

        Raises:
            RuntimeError: a request is in flight, or the session is closing or closed.
        """
        self._check_can_send()
        if self._state is SessionState.NEW:
            self._state = SessionState.CLOSED
            return None
        self._state = SessionState.CLOSING
        self._in_flight = True
        return ShareAcknowledgePlan(
            self.node, self.member_id, CLOSE_EPOCH, MappingProxyType(dict(acknowledgements))
        )

    def on_response(self, error_code: int, *, fetch: bool) -> bool:
        """The in-flight request's top-level ``error_code`` arrived (``fetch``: it was a
        ShareFetch). Returns whether the session carries on as the request left it
        (``False``: it was reset and the next ShareFetch opens a new one)."""
        self._answered()
        if self._state is SessionState.CLOSING:
            self._state = SessionState.CLOSED
            return False
        resets = _FETCH_SESSION_RESETS if fetch else _SESSION_RESETS
        if error_code in resets:
            self._reset()
            return False
        self._epoch = next_epoch(self._epoch)
        self._state = SessionState.OPEN
        return error_code == ErrorCode.NONE

    def on_transport_error(self) -> None:
        """The in-flight request got no answer: whether the broker saw it is unknown,
        so the next ShareFetch opens a new session."""
        self._answered()
        if self._state is SessionState.CLOSING:
            self._state = SessionState.CLOSED
            return
        self._reset()

    def _reset(self) -> None:
        self._state = SessionState.NEW
        self._epoch = OPEN_EPOCH
        self._in_session = set()

    def _answered(self) -> None:
        if not self._in_flight:
            raise RuntimeError(f"share session with node {self.node} has no request in flight")
        self._in_flight = False

    def _check_can_send(self) -> None:
        if self._in_flight:
            raise RuntimeError(f"share session with node {self.node} has a request in flight")
        if self._state in {SessionState.CLOSING, SessionState.CLOSED}:
            raise RuntimeError(f"share session with node {self.node} is {self._state.value}")
