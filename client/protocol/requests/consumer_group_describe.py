"""ConsumerGroupDescribe: what ``group.protocol=auto`` asks to learn whether the
coordinator accepts the consumer protocol (a broker with it disabled answers
UNSUPPORTED_VERSION per group; the request has no side effect)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow

__all__ = ["build", "narrow", "parse"]

API = ApiKey.CONSUMER_GROUP_DESCRIBE

if TYPE_CHECKING:
    import kio.schema.consumer_group_describe.v0.response as v0
    import kio.schema.consumer_group_describe.v1.response as v1

    Response: TypeAlias = v0.ConsumerGroupDescribeResponse | v1.ConsumerGroupDescribeResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(versions: NegotiatedVersions, group_ids: Iterable[str]) -> RequestPayload:
    """A description of ``group_ids``, without their authorized operations."""
    return versions.new_request(
        API, group_ids=tuple(group_ids), include_authorized_operations=False
    )


def parse(response: Response) -> dict[str, int]:
    """The error code of each described group, by group id (0: described)."""
    return {g.group_id: int(g.error_code) for g in response.groups}
