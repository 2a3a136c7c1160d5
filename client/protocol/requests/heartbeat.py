"""Heartbeat (classic, v3+): a member of a classic group is still alive."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.membership import SendClassicHeartbeat
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow

__all__ = ["build", "narrow", "parse"]

API = ApiKey.HEARTBEAT

if TYPE_CHECKING:
    import kio.schema.heartbeat.v3.response as v3
    import kio.schema.heartbeat.v4.response as v4

    Response: TypeAlias = v3.HeartbeatResponse | v4.HeartbeatResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(versions: NegotiatedVersions, action: SendClassicHeartbeat) -> RequestPayload:
    """The heartbeat ``action`` asks for: its member in its generation."""
    return versions.new_request(
        API,
        group_id=action.group_id,
        generation_id=action.generation_id,
        member_id=action.member_id,
        group_instance_id=action.instance_id,
    )


def parse(response: Response) -> int:
    """The response's error code (0: still a member of the generation)."""
    return int(response.error_code)
