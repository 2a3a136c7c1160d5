"""Heartbeat (classic, v3+): a member of a classic group is still alive."""

from __future__ import annotations

from typing import TypeAlias

import kio.schema.heartbeat.v3.response as v3
import kio.schema.heartbeat.v4.response as v4
from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import unexpected

__all__ = ["Response", "build", "narrow", "parse"]

API = ApiKey.HEARTBEAT

Response: TypeAlias = v3.HeartbeatResponse | v4.HeartbeatResponse
_RESPONSES = (v3.HeartbeatResponse, v4.HeartbeatResponse)


def build(
    versions: NegotiatedVersions,
    *,
    group_id: str,
    generation_id: int,
    member_id: str,
    instance_id: str | None,
) -> RequestPayload:
    """The heartbeat of ``member_id`` in ``generation_id``."""
    return versions.new_request(
        API,
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=instance_id,
    )


def narrow(payload: ResponsePayload) -> Response:
    """``payload`` as a Heartbeat response.

    Raises:
        KafkaProtocolError: it is not one.
    """
    if isinstance(payload, _RESPONSES):
        return payload
    raise unexpected(payload, API)


def parse(response: Response) -> int:
    """The response's error code (0: still a member of the generation)."""
    return int(response.error_code)
