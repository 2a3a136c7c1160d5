"""DeleteGroups (v0+): delete empty groups and their committed offsets (group tooling).

Sent to each group's coordinator. Every version has the same fields; v2 is the
flexible form. The broker refuses a group with members (NON_EMPTY_GROUP).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow

__all__ = ["build", "narrow", "parse"]

API = ApiKey.DELETE_GROUPS

if TYPE_CHECKING:
    import kio.schema.delete_groups.v0.response as v0
    import kio.schema.delete_groups.v1.response as v1
    import kio.schema.delete_groups.v2.response as v2

    Response: TypeAlias = (
        v0.DeleteGroupsResponse | v1.DeleteGroupsResponse | v2.DeleteGroupsResponse
    )
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(versions: NegotiatedVersions, group_ids: Iterable[str]) -> RequestPayload:
    """Delete ``group_ids`` (all coordinated by the broker the request goes to)."""
    return versions.new_request(API, groups_names=tuple(group_ids))


def parse(response: Response) -> dict[str, int]:
    """The error code per group id (0: deleted)."""
    return {str(result.group_id): int(result.error_code) for result in response.results}
