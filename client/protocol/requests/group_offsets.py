"""OffsetFetch of everything a group committed, as an outsider (the group tooling).

:mod:`~kgroup.protocol.requests.offset_fetch` asks for named partitions as a
member; a tool wants every partition the group has an offset for, which
OffsetFetch returns when the topic list is null. The answer is read by
:func:`kgroup.protocol.requests.offset_fetch.parse`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final

from kio.static.protocol import RequestPayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests import offset_fetch
from kgroup.protocol.requests.offset_fetch import Response
from kgroup.types import TopicPartition

__all__ = ["Response", "build", "narrow", "parse"]

API = ApiKey.OFFSET_FETCH

narrow: Final = offset_fetch.narrow
"""``payload`` as an OffsetFetch response."""


def build(versions: NegotiatedVersions, group_id: str) -> RequestPayload:
    """Every committed offset of ``group_id``, read stably, as a non-member."""
    module: Any = versions.request_module(API)
    group: dict[str, Any] = {"group_id": group_id, "topics": None}
    if versions.version(API) >= 9:
        # No member id and epoch -1: the broker skips the member checks.
        group.update(member_id=None, member_epoch=-1)
    return versions.new_request(
        API, groups=(module.OffsetFetchRequestGroup(**group),), require_stable=True
    )


def parse(
    response: Response, topic_names: Mapping[uuid.UUID, str]
) -> dict[TopicPartition, int | None]:
    """The committed offset of each partition (None: none committed).

    ``topic_names`` names the topic ids of a v10 response; offsets of a topic
    it cannot name (deleted since) are left out.

    Raises:
        BrokerError: the first group or partition error in the response.
    """
    return offset_fetch.parse(response, topic_names)
