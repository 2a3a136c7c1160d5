"""ListOffsets (v6+): a partition's offset at a point in time, from its leader.

The request must go to each partition's leader (others answer
NOT_LEADER_OR_FOLLOWER). kgroup asks for the log end (:data:`LATEST`: the high
watermark, or under ``read_committed`` the last stable offset) to compute lag,
and for the log start (:data:`EARLIEST`).
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.static.primitive import i8, i32, i64
from kio.static.protocol import RequestPayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow, by_topic
from kgroup.types import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "IsolationLevel",
    "ListedOffset",
    "Response",
    "build",
    "narrow",
    "parse",
]

API = ApiKey.LIST_OFFSETS

LATEST: Final = -1
"""The timestamp that asks for the log end offset."""
EARLIEST: Final = -2
"""The timestamp that asks for the log start offset."""

# A consumer's requests carry replica id -1 (only followers send their own id).
_CONSUMER_REPLICA: Final = -1

if TYPE_CHECKING:
    import kio.schema.list_offsets.v6.response as v6
    import kio.schema.list_offsets.v7.response as v7
    import kio.schema.list_offsets.v8.response as v8
    import kio.schema.list_offsets.v9.response as v9
    import kio.schema.list_offsets.v10.response as v10
    import kio.schema.list_offsets.v11.response as v11

    Response: TypeAlias = (
        v6.ListOffsetsResponse
        | v7.ListOffsetsResponse
        | v8.ListOffsetsResponse
        | v9.ListOffsetsResponse
        | v10.ListOffsetsResponse
        | v11.ListOffsetsResponse
    )
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


class IsolationLevel(enum.IntEnum):
    """Which end of the log :data:`LATEST` means."""

    READ_UNCOMMITTED = 0
    """The high watermark."""
    READ_COMMITTED = 1
    """The last stable offset (before any open transaction)."""


@dataclass(frozen=True, slots=True)
class ListedOffset:
    """A partition's answer: its offset, or the error its leader gave instead.

    Attributes:
        offset: the offset, -1 when the error code is set.
        timestamp: the record timestamp for a timestamp query, else -1.
        leader_epoch: the leader epoch of that offset, or -1.
        error_code: 0, or the partition's error (NOT_LEADER_OR_FOLLOWER ...).
    """

    offset: int
    timestamp: int
    leader_epoch: int
    error_code: int


def build(
    versions: NegotiatedVersions,
    partitions: Collection[TopicPartition],
    *,
    timestamp: int = LATEST,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    timeout: float = 30.0,
) -> RequestPayload:
    """The offsets of ``partitions`` at ``timestamp`` (:data:`LATEST`, :data:`EARLIEST`
    or milliseconds since the epoch). ``timeout`` (seconds) is sent from v10, where
    it bounds the broker's wait for remote-storage lookups."""
    module: Any = versions.request_module(API)
    topics = tuple(
        module.ListOffsetsTopic(
            name=topic,
            partitions=tuple(
                module.ListOffsetsPartition(partition_index=i32(p), timestamp=i64(timestamp))
                for p in parts
            ),
        )
        for topic, parts in by_topic(partitions).items()
    )
    fields: dict[str, Any] = {
        "replica_id": i32(_CONSUMER_REPLICA),
        "isolation_level": i8(int(isolation)),
        "topics": topics,
    }
    if versions.version(API) >= 10:
        fields["timeout"] = datetime.timedelta(seconds=timeout)
    return versions.new_request(API, **fields)


def parse(response: Response) -> dict[TopicPartition, ListedOffset]:
    """Every partition's answer; per-partition errors are returned, not raised."""
    return {
        TopicPartition(str(topic.name), int(p.partition_index)): ListedOffset(
            offset=int(p.offset),
            timestamp=int(p.timestamp),
            leader_epoch=int(p.leader_epoch),
            error_code=int(p.error_code),
        )
        for topic in response.topics
        for p in topic.partitions
    }
