"""OffsetForLeaderEpoch (v3+): where a leader epoch ends in a partition leader's log.

KIP-320: a consumer that resumes from an offset committed at leader epoch E asks
the partition's leader for the end offset of E; an end below the offset means
the log was truncated after the commit (an unclean leader election), and the
records from the end on are other records than the ones that offset counted.
The request must go to each partition's leader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.static.primitive import i32
from kio.static.protocol import RequestPayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow, by_topic
from kgroup.types import TopicPartition

__all__ = ["API", "EpochEnd", "EpochQuery", "Response", "build", "narrow", "parse"]

API = ApiKey.OFFSET_FOR_LEADER_EPOCH

# A consumer's requests carry replica id -1 (only followers send their own id).
_CONSUMER_REPLICA: Final = -1

if TYPE_CHECKING:
    import kio.schema.offset_for_leader_epoch.v3.response as v3
    import kio.schema.offset_for_leader_epoch.v4.response as v4

    Response: TypeAlias = v3.OffsetForLeaderEpochResponse | v4.OffsetForLeaderEpochResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


@dataclass(frozen=True, slots=True)
class EpochQuery:
    """What to ask about one partition.

    Attributes:
        leader_epoch: the epoch whose end offset is wanted (the committed one).
        current_leader_epoch: the leader epoch the client's metadata knows, so that
            a stale leader answers FENCED_LEADER_EPOCH instead of its own view.
    """

    leader_epoch: int
    current_leader_epoch: int


@dataclass(frozen=True, slots=True)
class EpochEnd:
    """One partition's answer.

    Attributes:
        leader_epoch: the largest epoch in the log not above the one asked about
            (-1: the leader knows none, e.g. the log starts after it).
        end_offset: where that epoch ends: the first offset of the next epoch, or
            the log end for the current one (-1: unknown).
        error_code: 0, or the partition's error (NOT_LEADER_OR_FOLLOWER,
            FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH ...).
    """

    leader_epoch: int
    end_offset: int
    error_code: int


def build(
    versions: NegotiatedVersions, queries: Mapping[TopicPartition, EpochQuery]
) -> RequestPayload:
    """The end offsets of the asked epochs of ``queries``' partitions (one leader's)."""
    module: Any = versions.request_module(API)
    topics = tuple(
        module.OffsetForLeaderTopic(
            topic=topic,
            partitions=tuple(
                module.OffsetForLeaderPartition(
                    partition=i32(p),
                    current_leader_epoch=i32(
                        queries[TopicPartition(topic, p)].current_leader_epoch
                    ),
                    leader_epoch=i32(queries[TopicPartition(topic, p)].leader_epoch),
                )
                for p in parts
            ),
        )
        for topic, parts in by_topic(queries).items()
    )
    return versions.new_request(API, replica_id=i32(_CONSUMER_REPLICA), topics=topics)


def parse(response: Response) -> dict[TopicPartition, EpochEnd]:
    """Every partition's answer; per-partition errors are returned, not raised."""
    return {
        TopicPartition(str(topic.topic), int(p.partition)): EpochEnd(
            leader_epoch=int(p.leader_epoch),
            end_offset=int(p.end_offset),
            error_code=int(p.error_code),
        )
        for topic in response.topics
        for p in topic.partitions
    }
