"""ShareGroupHeartbeat (KIP-932): the share-group member's one group request.

:func:`build` turns the share member's
:class:`~kgroup.membership.share.ShareHeartbeatRequest` into the request;
:func:`parse` turns the response into its
:class:`~kgroup.membership.share.ShareHeartbeatResponse`.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.membership.share import ShareHeartbeatRequest, ShareHeartbeatResponse
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow, partitions_by_id

__all__ = ["build", "narrow", "parse"]

API = ApiKey.SHARE_GROUP_HEARTBEAT

if TYPE_CHECKING:
    import kio.schema.share_group_heartbeat.v1.response as v1

    Response: TypeAlias = v1.ShareGroupHeartbeatResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(versions: NegotiatedVersions, request: ShareHeartbeatRequest) -> RequestPayload:
    """``request`` at the negotiated version.

    Raises:
        UnsupportedVersionError: the broker has no ShareGroupHeartbeat kgroup supports
            (share groups need Apache Kafka 4.1 or later with ``share.version`` enabled).
    """
    fields: dict[str, Any] = {
        "group_id": request.group_id,
        "member_id": request.member_id,
        "member_epoch": request.member_epoch,
        "rack_id": request.rack_id,
        "subscribed_topic_names": request.subscribed_topic_names,
    }
    return versions.new_request(API, **fields)


def parse(response: Response) -> ShareHeartbeatResponse:
    """The fields of ``response`` the member needs; the assignment by topic id."""
    assignment = None
    if response.assignment is not None:
        assignment = partitions_by_id(response.assignment.topic_partitions)
    interval: datetime.timedelta = response.heartbeat_interval
    return ShareHeartbeatResponse(
        error_code=int(response.error_code),
        error_message=response.error_message,
        member_id=response.member_id,
        member_epoch=int(response.member_epoch),
        heartbeat_interval_ms=int(interval.total_seconds() * 1000),
        assignment=assignment,
    )
