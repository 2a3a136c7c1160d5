"""ShareFetch (KIP-932): fetch records acquired for a share member, acknowledgements riding along.

:func:`build` encodes a share session's fetch plan
(:class:`kgroup.dataplane.share.session.ShareFetchPlan`) at the negotiated
version; :func:`parse` turns the response into frozen values the share data
path takes: per partition the fetch and acknowledge errors, the record bytes
for :func:`kgroup.dataplane.share.records.decode_records` and the acquired
ranges for :func:`kgroup.dataplane.share.inflight.match_acquired`; the
top-level error for the session; the acquisition lock timeout; and, for
partitions answered ``NOT_LEADER_OR_FOLLOWER``, the current leader and its
endpoint.

The protocol layer may not import the data plane (an import contract), so the
plan is read through the structural types :class:`FetchPlanLike` and
:class:`AcknowledgementsLike`, which the data plane's frozen plans satisfy.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias

from kio.static.primitive import i8, i32, i64
from kio.static.protocol import RequestPayload

from kgroup.errors import UnsupportedVersionError
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.cluster import BrokerAddress
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow
from kgroup.types import TopicIdPartition

__all__ = [
    "AcknowledgementsLike",
    "AcquiredRecords",
    "CurrentLeader",
    "FetchLimitsLike",
    "FetchPlanLike",
    "ShareFetchPartition",
    "ShareFetchResult",
    "build",
    "by_topic_id",
    "encode_acknowledgements",
    "narrow",
    "parse",
]

API = ApiKey.SHARE_FETCH

RENEW = 4
"""The acknowledge type that renews an acquisition lock (KIP-1222, v2 and later)."""

if TYPE_CHECKING:
    import kio.schema.share_fetch.v1.response as v1
    import kio.schema.share_fetch.v2.response as v2

    Response: TypeAlias = v1.ShareFetchResponse | v2.ShareFetchResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


class AcknowledgementsLike(Protocol):
    """One acknowledgement batch: consecutive offsets and one type, or one type each."""

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def types(self) -> Sequence[int]: ...


class FetchLimitsLike(Protocol):
    """The bounds a ShareFetch asks for."""

    @property
    def max_wait_ms(self) -> int: ...
    @property
    def min_bytes(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def max_records(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def acquire_mode(self) -> int: ...


class FetchPlanLike(Protocol):
    """What :func:`build` reads of a share session's fetch plan."""

    @property
    def member_id(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def partitions(self) -> Sequence[TopicIdPartition]: ...
    @property
    def forgotten(self) -> Sequence[TopicIdPartition]: ...
    @property
    def acknowledgements(self) -> Mapping[TopicIdPartition, Sequence[AcknowledgementsLike]]: ...
    @property
    def limits(self) -> FetchLimitsLike: ...
    @property
    def renews(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """Offsets ``first_offset..last_offset`` (inclusive) acquired with ``delivery_count``
    (the fields of :class:`kgroup.dataplane.share.inflight.AcquiredRange`)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class CurrentLeader:
    """A partition's leader as the answering broker knows it (-1: unknown)."""

    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class ShareFetchPartition:
    """One partition of a ShareFetch response.

    Attributes:
        partition: the partition.
        error_code: the fetch error (0: fetched); ``NOT_LEADER_OR_FOLLOWER`` and
            ``FENCED_LEADER_EPOCH`` come with :attr:`current_leader`.
        error_message: the broker's message with it, or None.
        acknowledge_error_code: what became of the acknowledgements this request
            carried for the partition (0: applied; ``INVALID_RECORD_STATE``: a
            lock had expired).
        acknowledge_error_message: the broker's message with it, or None.
        current_leader: the leader the broker knows of.
        records: the raw record batches (may hold records others acquired).
        acquired: the ranges this member acquired, in the broker's order.
    """

    partition: TopicIdPartition
    error_code: int
    error_message: str | None
    acknowledge_error_code: int
    acknowledge_error_message: str | None
    current_leader: CurrentLeader
    records: bytes
    acquired: tuple[AcquiredRecords, ...]


@dataclass(frozen=True, slots=True)
class ShareFetchResult:
    """A parsed ShareFetch response.

    Attributes:
        error_code: the top-level error (the share session's: 0, or a reset).
        error_message: the broker's message with it, or None.
        acquisition_lock_timeout_ms: how long the records acquired are locked to
            this member, from when the response was sent.
        partitions: every partition answered, in the broker's order.
        node_endpoints: the leaders named by partitions answered
            ``NOT_LEADER_OR_FOLLOWER``, by node id.
        throttle_time_ms: how long a quota asks the client to wait.
    """

    error_code: int
    error_message: str | None
    acquisition_lock_timeout_ms: int
    partitions: tuple[ShareFetchPartition, ...]
    node_endpoints: Mapping[int, BrokerAddress]
    throttle_time_ms: int = 0

    def acknowledge_error_codes(self) -> Mapping[TopicIdPartition, int]:
        """The acknowledge error per partition, for
        :func:`kgroup.dataplane.share.acknowledgements.outcomes`."""
        return MappingProxyType({p.partition: p.acknowledge_error_code for p in self.partitions})


def by_topic_id(partitions: Iterable[TopicIdPartition]) -> dict[Any, list[int]]:
    """Partitions grouped by topic id, in the order given (plans are sorted)."""
    out: dict[Any, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic_id, []).append(tp.partition)
    return out


def encode_acknowledgements(
    module: Any, batches: Sequence[AcknowledgementsLike]
) -> tuple[Any, ...]:
    """``batches`` as ``module.AcknowledgementBatch`` values (ShareFetch's and
    ShareAcknowledge's have the same fields)."""
    return tuple(
        module.AcknowledgementBatch(
            first_offset=i64(b.first_offset),
            last_offset=i64(b.last_offset),
            acknowledge_types=tuple(i8(int(t)) for t in b.types),
        )
        for b in batches
    )


def check_renew(versions: NegotiatedVersions, api: ApiKey, renews: bool) -> int:
    """The version of ``api`` to send; RENEW needs v2 (KIP-1222).

    Raises:
        UnsupportedVersionError: the request renews a lock and the broker has no v2.
    """
    version = versions.version(api)
    if renews and version < 2:
        raise UnsupportedVersionError(
            f"renewing an acquisition lock needs {api.api_name} v2 (Apache Kafka 4.2, "
            f"KIP-1222); the broker negotiated v{version}"
        )
    return version


def build(versions: NegotiatedVersions, plan: FetchPlanLike, group_id: str) -> RequestPayload:
    """``plan`` as a ShareFetch of a member of ``group_id``, at the negotiated version.

    The broker keys share sessions by group and member, and checks READ on the group.

    Every partition the plan names is listed, with its acknowledgements if any;
    v2's ``share_acquire_mode`` and ``is_renew_ack`` are set from the plan.

    Raises:
        UnsupportedVersionError: the broker has no ShareFetch kgroup supports, or
            the plan needs v2 (a RENEW acknowledgement, or the strict record
            limit of KIP-1206) and the broker serves v1 only.
    """
    version = check_renew(versions, API, plan.renews)
    module: Any = versions.request_module(API)
    limits = plan.limits
    fields: dict[str, Any] = {
        "group_id": group_id,
        "member_id": plan.member_id,
        "share_session_epoch": i32(plan.epoch),
        "max_wait": datetime.timedelta(milliseconds=limits.max_wait_ms),
        "min_bytes": i32(limits.min_bytes),
        "max_bytes": i32(limits.max_bytes),
        "max_records": i32(limits.max_records),
        "batch_size": i32(limits.batch_size),
        "topics": tuple(
            module.FetchTopic(
                topic_id=topic_id,
                partitions=tuple(
                    module.FetchPartition(
                        partition_index=i32(p),
                        acknowledgement_batches=encode_acknowledgements(
                            module,
                            plan.acknowledgements.get(TopicIdPartition(topic_id, p), ()),
                        ),
                    )
                    for p in parts
                ),
            )
            for topic_id, parts in by_topic_id(plan.partitions).items()
        ),
        "forgotten_topics_data": tuple(
            module.ForgottenTopic(topic_id=topic_id, partitions=tuple(i32(p) for p in parts))
            for topic_id, parts in by_topic_id(plan.forgotten).items()
        ),
    }
    if version >= 2:
        fields["share_acquire_mode"] = i8(int(limits.acquire_mode))
        fields["is_renew_ack"] = plan.renews
    elif limits.acquire_mode != 0:
        raise UnsupportedVersionError(
            "the strict record limit (KIP-1206 record_limit acquire mode) needs ShareFetch "
            "v2 (Apache Kafka 4.2); the broker negotiated v1"
        )
    return versions.new_request(API, **fields)


def _millis(value: datetime.timedelta) -> int:
    return int(value.total_seconds() * 1000)


def endpoints(response: Any) -> Mapping[int, BrokerAddress]:
    """A response's ``node_endpoints`` by node id (ShareFetch's and ShareAcknowledge's)."""
    return MappingProxyType(
        {
            int(n.node_id): BrokerAddress(int(n.node_id), n.host, int(n.port), n.rack)
            for n in response.node_endpoints
        }
    )


def parse(response: Response) -> ShareFetchResult:
    """Every partition answered, with its errors, records and acquired ranges."""
    partitions = tuple(
        ShareFetchPartition(
            partition=TopicIdPartition(topic.topic_id, int(p.partition_index)),
            error_code=int(p.error_code),
            error_message=p.error_message,
            acknowledge_error_code=int(p.acknowledge_error_code),
            acknowledge_error_message=p.acknowledge_error_message,
            current_leader=CurrentLeader(
                int(p.current_leader.leader_id), int(p.current_leader.leader_epoch)
            ),
            records=bytes(p.records or b""),
            acquired=tuple(
                AcquiredRecords(int(a.first_offset), int(a.last_offset), int(a.delivery_count))
                for a in p.acquired_records
            ),
        )
        for topic in response.responses
        if topic.topic_id is not None
        for p in topic.partitions
    )
    return ShareFetchResult(
        error_code=int(response.error_code),
        error_message=response.error_message,
        acquisition_lock_timeout_ms=_millis(response.acquisition_lock_timeout),
        partitions=partitions,
        node_endpoints=endpoints(response),
        throttle_time_ms=_millis(response.throttle_time),
    )
