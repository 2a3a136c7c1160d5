"""ListGroups (v4+): the groups one broker coordinates, with their state and (v5) type.

Every broker answers only for the groups it coordinates, so listing a cluster's
groups means asking each broker. v5 (KIP-848) adds the group type (``classic``,
``consumer``, ``share``, ``streams``) and a filter on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import kio.schema.list_groups.v5.response as v5
from kio.static.protocol import RequestPayload

from kgroup.errors import raise_for_error
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow

__all__ = ["ListedGroup", "Response", "build", "narrow", "parse"]

API = ApiKey.LIST_GROUPS

if TYPE_CHECKING:
    import kio.schema.list_groups.v4.response as v4

    Response: TypeAlias = v4.ListGroupsResponse | v5.ListGroupsResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


@dataclass(frozen=True, slots=True)
class ListedGroup:
    """One group a broker listed.

    Attributes:
        group_id: the group's id.
        protocol_type: ``consumer`` for consumer groups of either protocol;
            another value (``connect`` ...) for other users of the classic
            protocol; empty for a group that only ever committed offsets.
        state: the group's state as the broker spells it (``Stable``, ``Empty`` ...).
        group_type: ``classic``, ``consumer``, ``share`` or ``streams``; None when
            the broker answered in v4, which does not say.
    """

    group_id: str
    protocol_type: str
    state: str
    group_type: str | None


def build(
    versions: NegotiatedVersions,
    *,
    states: Iterable[str] = (),
    types: Iterable[str] = (),
) -> RequestPayload:
    """The groups of the broker the request goes to, optionally filtered.

    ``states`` / ``types`` filter on the broker (empty: no filter); a v4 broker
    has no type filter, so ``types`` is dropped there and the caller filters
    what :func:`parse` returns (whose ``group_type`` is then None).
    """
    fields: dict[str, Any] = {"states_filter": tuple(states)}
    if versions.version(API) >= 5:
        fields["types_filter"] = tuple(types)
    return versions.new_request(API, **fields)


def parse(response: Response) -> tuple[ListedGroup, ...]:
    """The listed groups, in the broker's order.

    Raises:
        BrokerError: the response's error code (COORDINATOR_LOAD_IN_PROGRESS ...).
    """
    raise_for_error(response.error_code)
    return tuple(
        ListedGroup(
            group_id=str(g.group_id),
            protocol_type=g.protocol_type,
            state=g.group_state,
            group_type=g.group_type if isinstance(g, v5.ListedGroup) else None,
        )
        for g in response.groups
    )
