"""ShareAcknowledge (KIP-932): acknowledgements sent alone, with no fetch.

Sent when a leader has acknowledgements owed and nothing to fetch, on
``commit()``, and at epoch -1 to close a share session. :func:`build` encodes
a :class:`kgroup.dataplane.share.session.ShareAcknowledgePlan` (read through
:class:`AcknowledgePlanLike`: the protocol layer does not import the data
plane); :func:`parse` gives the top-level error for the session and the
acknowledge error per partition for
:func:`kgroup.dataplane.share.acknowledgements.outcomes`.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias

from kio.static.primitive import i32
from kio.static.protocol import RequestPayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.cluster import BrokerAddress
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow
from kgroup.protocol.requests.share_fetch import (
    AcknowledgementsLike,
    CurrentLeader,
    by_topic_id,
    check_renew,
    encode_acknowledgements,
    endpoints,
)
from kgroup.types import TopicIdPartition

__all__ = [
    "AcknowledgePlanLike",
    "ShareAcknowledgePartition",
    "ShareAcknowledgeResult",
    "build",
    "narrow",
    "parse",
]

API = ApiKey.SHARE_ACKNOWLEDGE

if TYPE_CHECKING:
    import kio.schema.share_acknowledge.v1.response as v1
    import kio.schema.share_acknowledge.v2.response as v2

    Response: TypeAlias = v1.ShareAcknowledgeResponse | v2.ShareAcknowledgeResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


class AcknowledgePlanLike(Protocol):
    """What :func:`build` reads of a share session's acknowledge plan."""

    @property
    def member_id(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def acknowledgements(self) -> Mapping[TopicIdPartition, Sequence[AcknowledgementsLike]]: ...
    @property
    def renews(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class ShareAcknowledgePartition:
    """One partition of a ShareAcknowledge response.

    Attributes:
        partition: the partition.
        error_code: what became of its acknowledgements (0: applied).
        error_message: the broker's message with it, or None.
        current_leader: the leader the broker knows of (-1: unknown).
    """

    partition: TopicIdPartition
    error_code: int
    error_message: str | None
    current_leader: CurrentLeader


@dataclass(frozen=True, slots=True)
class ShareAcknowledgeResult:
    """A parsed ShareAcknowledge response.

    Attributes:
        error_code: the top-level error (the share session's).
        error_message: the broker's message with it, or None.
        partitions: every partition answered, in the broker's order.
        node_endpoints: the leaders named by partitions answered
            ``NOT_LEADER_OR_FOLLOWER``, by node id.
        acquisition_lock_timeout_ms: the lock a RENEW extended to (v2); None on v1.
        throttle_time_ms: how long a quota asks the client to wait.
    """

    error_code: int
    error_message: str | None
    partitions: tuple[ShareAcknowledgePartition, ...]
    node_endpoints: Mapping[int, BrokerAddress]
    acquisition_lock_timeout_ms: int | None = None
    throttle_time_ms: int = 0

    def acknowledge_error_codes(self) -> Mapping[TopicIdPartition, int]:
        """The error per partition, for
        :func:`kgroup.dataplane.share.acknowledgements.outcomes`."""
        return MappingProxyType({p.partition: p.error_code for p in self.partitions})


def build(versions: NegotiatedVersions, plan: AcknowledgePlanLike, group_id: str) -> RequestPayload:
    """``plan`` as a ShareAcknowledge of a member of ``group_id``, at the negotiated version.

    The broker keys share sessions by group and member, and checks READ on the group.

    Raises:
        UnsupportedVersionError: the broker has no ShareAcknowledge kgroup
            supports, or the plan renews a lock (v2) and the broker serves v1.
    """
    version = check_renew(versions, API, plan.renews)
    module: Any = versions.request_module(API)
    fields: dict[str, Any] = {
        "group_id": group_id,
        "member_id": plan.member_id,
        "share_session_epoch": i32(plan.epoch),
        "topics": tuple(
            module.AcknowledgeTopic(
                topic_id=topic_id,
                partitions=tuple(
                    module.AcknowledgePartition(
                        partition_index=i32(p),
                        acknowledgement_batches=encode_acknowledgements(
                            module, plan.acknowledgements[TopicIdPartition(topic_id, p)]
                        ),
                    )
                    for p in parts
                ),
            )
            for topic_id, parts in by_topic_id(sorted(plan.acknowledgements)).items()
        ),
    }
    if version >= 2:
        fields["is_renew_ack"] = plan.renews
    return versions.new_request(API, **fields)


def _millis(value: datetime.timedelta) -> int:
    return int(value.total_seconds() * 1000)


def parse(response: Response) -> ShareAcknowledgeResult:
    """Every partition answered with its error."""
    lock: datetime.timedelta | None = getattr(response, "acquisition_lock_timeout", None)
    return ShareAcknowledgeResult(
        error_code=int(response.error_code),
        error_message=response.error_message,
        partitions=tuple(
            ShareAcknowledgePartition(
                partition=TopicIdPartition(topic.topic_id, int(p.partition_index)),
                error_code=int(p.error_code),
                error_message=p.error_message,
                current_leader=CurrentLeader(
                    int(p.current_leader.leader_id), int(p.current_leader.leader_epoch)
                ),
            )
            for topic in response.responses
            if topic.topic_id is not None
            for p in topic.partitions
        ),
        node_endpoints=endpoints(response),
        acquisition_lock_timeout_ms=None if lock is None else _millis(lock),
        throttle_time_ms=_millis(response.throttle_time),
    )
