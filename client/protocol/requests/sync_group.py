"""SyncGroup (classic, v3+): the leader hands out assignments, every member gets its own.

Assignments travel encoded with :mod:`kgroup.protocol.classic_payload`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.membership import ClassicAssignment, SyncGroupRequest, SyncGroupResponse
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.classic_payload import decode_assignment, encode_assignment
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow

__all__ = ["build", "narrow", "parse"]

API = ApiKey.SYNC_GROUP

if TYPE_CHECKING:
    import kio.schema.sync_group.v3.response as v3
    import kio.schema.sync_group.v4.response as v4
    import kio.schema.sync_group.v5.response as v5

    Response: TypeAlias = v3.SyncGroupResponse | v4.SyncGroupResponse | v5.SyncGroupResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(versions: NegotiatedVersions, request: SyncGroupRequest) -> RequestPayload:
    """``request`` at the negotiated version; the leader's assignments encoded.

    Raises:
        ClassicPayloadError: an assignment cannot be encoded.
    """
    module: Any = versions.request_module(API)
    fields: dict[str, Any] = {
        "group_id": request.group_id,
        "generation_id": request.generation_id,
        "member_id": request.member_id,
        "group_instance_id": request.instance_id,
        "assignments": tuple(
            module.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(a))
            for m, a in request.assignments
        ),
    }
    # v5 added the protocol type and name (the broker checks them against the group's).
    if versions.version(API) >= 5:
        fields["protocol_type"] = request.protocol_type
        fields["protocol_name"] = request.protocol_name
    return versions.new_request(API, **fields)


def parse(response: Response) -> SyncGroupResponse:
    """The fields of ``response`` the member needs; its assignment decoded.

    An empty assignment (a member the leader gave nothing) is an empty
    :class:`~kgroup.membership.ClassicAssignment`; with an error code set there is none.

    Raises:
        ClassicPayloadError: the assignment does not decode.
    """
    code = int(response.error_code)
    assignment = None
    if code == 0:
        data = bytes(response.assignment)
        assignment = decode_assignment(data) if data else ClassicAssignment()
    return SyncGroupResponse(
        error_code=code,
        assignment=assignment,
        # Before v5 the response does not echo them.
        protocol_type=getattr(response, "protocol_type", None),
        protocol_name=getattr(response, "protocol_name", None),
    )
