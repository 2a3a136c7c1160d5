"""OffsetFetch of everything a group committed, as an outsider (the group tooling).

:mod:`~kgroup.protocol.requests.offset_fetch` asks for named partitions as a
member; a tool wants every partition the group has an offset for, which
OffsetFetch returns when the topic list is null. The answer is read by
:func:`kgroup.protocol.requests.offset_fetch.parse`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from kio.static.protocol import RequestPayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests import offset_fetch

if TYPE_CHECKING:
    # The same responses as OffsetFetch's (this module is its admin reading).
    from kgroup.protocol.requests._common import Narrow
    from kgroup.protocol.requests.offset_fetch import Response

__all__ = ["build", "narrow", "parse"]

API = ApiKey.OFFSET_FETCH

narrow: Final[Narrow[Response]] = offset_fetch.narrow
"""``payload`` as an OffsetFetch response."""

parse: Final = offset_fetch.parse
"""The committed offset of each partition (None: none committed); unnamed topics left out."""


def build(versions: NegotiatedVersions, group_id: str) -> RequestPayload:
    """Every committed offset of ``group_id``, read stably, as a non-member.

    No member id and epoch -1 (v9+): the broker skips the member checks.
    """
    return offset_fetch.build(
        versions, group_id=group_id, member_id=None, member_epoch=-1, partitions=None, topic_ids={}
    )
