"""ConsumerGroupHeartbeat (KIP-848): the consumer protocol's one group request.

:func:`build` turns the member's :class:`~kgroup.membership.HeartbeatRequest`
into the request; :func:`parse` turns the response into the member's
:class:`~kgroup.membership.HeartbeatResponse`.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.membership import HeartbeatRequest, HeartbeatResponse
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow, partitions_by_id

__all__ = ["build", "narrow", "parse"]

API = ApiKey.CONSUMER_GROUP_HEARTBEAT

if TYPE_CHECKING:
    import kio.schema.consumer_group_heartbeat.v0.response as v0
    import kio.schema.consumer_group_heartbeat.v1.response as v1

    Response: TypeAlias = v0.ConsumerGroupHeartbeatResponse | v1.ConsumerGroupHeartbeatResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(versions: NegotiatedVersions, request: HeartbeatRequest) -> RequestPayload:
    """``request`` at the negotiated version (the regex only from v1).

    Raises:
        UnsupportedVersionError: the broker has no ConsumerGroupHeartbeat kgroup supports.
    """
    module: Any = versions.request_module(API)
    by_id = request.topic_partitions_by_id()
    fields: dict[str, Any] = {
        "group_id": request.group_id,
        "member_id": request.member_id,
        "member_epoch": request.member_epoch,
        "instance_id": request.instance_id,
        "rack_id": request.rack_id,
        "subscribed_topic_names": request.subscribed_topic_names,
        "server_assignor": request.server_assignor,
        "topic_partitions": None
        if by_id is None
        else tuple(
            module.TopicPartitions(topic_id=topic_id, partitions=tuple(parts))
            for topic_id, parts in by_id.items()
        ),
    }
    if request.rebalance_timeout_ms is not None:
        fields["rebalance_timeout"] = datetime.timedelta(milliseconds=request.rebalance_timeout_ms)
    # v0 has no regex field (a v0-only broker cannot take a regex subscription).
    if versions.version(API) >= 1:
        fields["subscribed_topic_regex"] = request.subscribed_topic_regex
    return versions.new_request(API, **fields)


def parse(response: Response) -> HeartbeatResponse:
    """The fields of ``response`` the member needs; the assignment by topic id."""
    assignment = None
    if response.assignment is not None:
        assignment = partitions_by_id(response.assignment.topic_partitions)
    interval: datetime.timedelta = response.heartbeat_interval
    return HeartbeatResponse(
        error_code=int(response.error_code),
        error_message=response.error_message,
        member_id=response.member_id,
        member_epoch=int(response.member_epoch),
        heartbeat_interval_ms=int(interval.total_seconds() * 1000),
        assignment=assignment,
    )
