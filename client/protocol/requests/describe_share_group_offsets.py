"""DescribeShareGroupOffsets (KIP-932): a share group's start offset on each partition.

For the group tooling (:mod:`kgroup.admin`). A share group has no committed
offsets; the share coordinator keeps, per partition, the *start offset*: every
record below it is acknowledged (or archived), records at and above it may still
be in flight. v1 (Kafka 4.2, KIP-1226) adds the broker's own count of the
records not yet delivered and acknowledged (the lag). Sent to the group's
coordinator; a null topic list asks for every partition the group has state for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow
from kgroup.types import TopicPartition

__all__ = [
    "DescribedShareOffsets",
    "ShareOffset",
    "build",
    "narrow",
    "parse",
]

API = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS

if TYPE_CHECKING:
    import kio.schema.describe_share_group_offsets.v0.response as v0
    import kio.schema.describe_share_group_offsets.v1.response as v1

    Response: TypeAlias = (
        v0.DescribeShareGroupOffsetsResponse | v1.DescribeShareGroupOffsetsResponse
    )
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


@dataclass(frozen=True, slots=True)
class ShareOffset:
    """One partition of a share group, as its share coordinator knows it.

    Attributes:
        partition: the partition.
        start_offset: the share-partition start offset; None when the group has
            no state for the partition yet (the broker's -1).
        leader_epoch: the partition's leader epoch the state was written under
            (-1: unknown).
        lag: the broker's count of records at or after the start offset not yet
            acknowledged; None before v1 or when the broker does not know it (-1).
        error_code: the partition's error (0: none).
        error_message: the broker's message with it, or None.
    """

    partition: TopicPartition
    start_offset: int | None
    leader_epoch: int
    lag: int | None
    error_code: int
    error_message: str | None


@dataclass(frozen=True, slots=True)
class DescribedShareOffsets:
    """One group's answer.

    Attributes:
        group_id: the group's id.
        error_code: the group-level error (0: described; GROUP_ID_NOT_FOUND ...).
        error_message: the broker's message with it, or None.
        partitions: every partition the group has state for, sorted.
    """

    group_id: str
    error_code: int
    error_message: str | None
    partitions: tuple[ShareOffset, ...]


def build(versions: NegotiatedVersions, group_id: str) -> RequestPayload:
    """The start offsets of every partition ``group_id`` has state for."""
    module = versions.request_module(API)
    return versions.new_request(
        API,
        groups=(module.DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None),),
    )


def _known(value: int) -> int | None:
    # The broker says "unknown" with -1 in both fields.
    return None if value < 0 else value


def parse(response: Response) -> tuple[DescribedShareOffsets, ...]:
    """Every group's answer, in the broker's order; errors are returned, not raised."""
    return tuple(
        DescribedShareOffsets(
            group_id=str(g.group_id),
            error_code=int(g.error_code),
            error_message=g.error_message,
            partitions=tuple(
                sorted(
                    (
                        ShareOffset(
                            partition=TopicPartition(str(t.topic_name), int(p.partition_index)),
                            start_offset=_known(int(p.start_offset)),
                            leader_epoch=int(p.leader_epoch),
                            lag=_known(int(getattr(p, "lag", -1))),
                            error_code=int(p.error_code),
                            error_message=p.error_message,
                        )
                        for t in g.topics
                        for p in t.partitions
                    ),
                    key=lambda o: o.partition,
                )
            ),
        )
        for g in response.groups
    )
