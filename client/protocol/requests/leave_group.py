"""LeaveGroup (classic, v3+): a member leaves, naming itself in the batched member list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.membership import SendLeaveGroup
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow

__all__ = ["build", "narrow", "parse"]

API = ApiKey.LEAVE_GROUP

if TYPE_CHECKING:
    import kio.schema.leave_group.v3.response as v3
    import kio.schema.leave_group.v4.response as v4
    import kio.schema.leave_group.v5.response as v5

    Response: TypeAlias = v3.LeaveGroupResponse | v4.LeaveGroupResponse | v5.LeaveGroupResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(versions: NegotiatedVersions, action: SendLeaveGroup) -> RequestPayload:
    """The leave ``action`` asks for, of its member (the reason only from v5, KIP-800)."""
    module: Any = versions.request_module(API)
    member: dict[str, Any] = {
        "member_id": action.member_id,
        "group_instance_id": action.instance_id,
    }
    if versions.version(API) >= 5:
        member["reason"] = action.reason
    return versions.new_request(
        API, group_id=action.group_id, members=(module.MemberIdentity(**member),)
    )


def parse(response: Response) -> int:
    """The response's error code, else the first member's error code (0: left)."""
    code = int(response.error_code)
    if code == 0:
        code = next((int(m.error_code) for m in response.members if m.error_code), 0)
    return code
