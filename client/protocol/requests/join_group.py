"""JoinGroup (classic, v5+): join or rejoin a group with this member's subscriptions.

Each protocol entry's metadata is the member's subscription encoded with
:mod:`kgroup.protocol.classic_payload`; the leader's response lists every
member's subscription, decoded here.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.membership import GroupMember, JoinGroupRequest, JoinGroupResponse
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.classic_payload import (
    HIGHEST_VERSION,
    decode_subscription,
    encode_subscription,
    read_version,
)
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow

__all__ = ["build", "narrow", "parse"]

API = ApiKey.JOIN_GROUP

if TYPE_CHECKING:
    import kio.schema.join_group.v5.response as v5
    import kio.schema.join_group.v6.response as v6
    import kio.schema.join_group.v7.response as v7
    import kio.schema.join_group.v8.response as v8
    import kio.schema.join_group.v9.response as v9

    Response: TypeAlias = (
        v5.JoinGroupResponse
        | v6.JoinGroupResponse
        | v7.JoinGroupResponse
        | v8.JoinGroupResponse
        | v9.JoinGroupResponse
    )
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(versions: NegotiatedVersions, request: JoinGroupRequest) -> RequestPayload:
    """``request`` at the negotiated version (the reason only from v8).

    Each protocol's subscription is sent as it is: the runtime fills in the
    assignor's ``user_data`` before building.

    Raises:
        ClassicPayloadError: a subscription cannot be encoded.
    """
    module: Any = versions.request_module(API)
    fields: dict[str, Any] = {
        "group_id": request.group_id,
        "session_timeout": datetime.timedelta(milliseconds=request.session_timeout_ms),
        "rebalance_timeout": datetime.timedelta(milliseconds=request.rebalance_timeout_ms),
        "member_id": request.member_id,
        "group_instance_id": request.instance_id,
        "protocol_type": request.protocol_type,
        "protocols": tuple(
            module.JoinGroupRequestProtocol(
                name=proto.name, metadata=encode_subscription(proto.subscription)
            )
            for proto in request.protocols
        ),
    }
    if versions.version(API) >= 8:
        fields["reason"] = request.reason
    return versions.new_request(API, **fields)


def parse(response: Response) -> JoinGroupResponse:
    """The fields of ``response`` the member needs; the leader's member list decoded.

    Raises:
        ClassicPayloadError: a member's subscription does not decode.
    """
    members = []
    for m in response.members:
        data = bytes(m.metadata)
        members.append(
            GroupMember(
                member_id=m.member_id,
                subscription=decode_subscription(data),
                instance_id=m.group_instance_id,
                # A newer subscription is read with the newest schema kgroup knows.
                protocol_version=min(read_version(data), HIGHEST_VERSION),
            )
        )
    return JoinGroupResponse(
        error_code=int(response.error_code),
        generation_id=int(response.generation_id),
        # Before v7 the response does not echo the protocol type.
        protocol_type=getattr(response, "protocol_type", None),
        protocol_name=response.protocol_name,
        leader=response.leader,
        member_id=response.member_id,
        members=tuple(members),
        error_message=None,
        # Only v9 carries it (KIP-814); older coordinators never skip.
        skip_assignment=bool(getattr(response, "skip_assignment", False)),
    )
