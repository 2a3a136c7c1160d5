"""OffsetCommit (v7+): commit a member's offsets, with its member id and epoch from v9.

v10 names topics by id; before, by name. The caller passes both maps, the
negotiated version picks.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload

from kgroup.errors import BrokerError, broker_error
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow, by_topic, topic_name
from kgroup.types import TopicPartition

__all__ = ["build", "narrow", "parse"]

API = ApiKey.OFFSET_COMMIT

if TYPE_CHECKING:
    import kio.schema.offset_commit.v7.response as v7
    import kio.schema.offset_commit.v8.response as v8
    import kio.schema.offset_commit.v9.response as v9
    import kio.schema.offset_commit.v10.response as v10

    Response: TypeAlias = (
        v7.OffsetCommitResponse
        | v8.OffsetCommitResponse
        | v9.OffsetCommitResponse
        | v10.OffsetCommitResponse
    )
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(
    versions: NegotiatedVersions,
    *,
    group_id: str,
    member_id: str,
    member_epoch: int,
    instance_id: str | None,
    offsets: Mapping[TopicPartition, int],
    topic_ids: Mapping[str, uuid.UUID],
    leader_epochs: Mapping[TopicPartition, int] | None = None,
    metadata: Mapping[TopicPartition, str] | None = None,
) -> RequestPayload:
    """The commit of ``offsets`` (next offset to read per partition) by ``member_id``.

    ``member_epoch`` is the member epoch (consumer protocol) or the generation
    (classic); ``topic_ids`` names every topic of ``offsets`` for v10.
    ``leader_epochs``: the leader epoch of the record before each offset, where
    known (KIP-320: whoever starts from the offset can then detect a log
    truncation); -1 for the others. ``metadata``: the application's string for
    some offsets; the others go with null metadata (the broker stores "").
    """
    epochs = leader_epochs or {}
    texts = metadata or {}
    module: Any = versions.request_module(API)
    by_id = versions.version(API) >= 10
    topics = []
    for topic, parts in by_topic(offsets).items():
        partitions = tuple(
            module.OffsetCommitRequestPartition(
                partition_index=p,
                committed_offset=offsets[TopicPartition(topic, p)],
                committed_leader_epoch=epochs.get(TopicPartition(topic, p), -1),
                committed_metadata=texts.get(TopicPartition(topic, p)),
            )
            for p in parts
        )
        key = {"topic_id": topic_ids[topic]} if by_id else {"name": topic}
        topics.append(module.OffsetCommitRequestTopic(**key, partitions=partitions))
    return versions.new_request(
        API,
        group_id=group_id,
        generation_id_or_member_epoch=member_epoch,
        member_id=member_id,
        group_instance_id=instance_id,
        topics=tuple(topics),
    )


def parse(
    response: Response, topic_names: Mapping[uuid.UUID, str]
) -> dict[TopicPartition, BrokerError]:
    """The partitions that failed, with their typed errors (empty: all committed).

    ``topic_names`` names the topic ids a v10 response uses; a topic it cannot
    name is skipped.
    """
    errors: dict[TopicPartition, BrokerError] = {}
    for topic in response.topics:
        name = topic_name(topic, topic_names)
        if name is None:
            continue
        for part in topic.partitions:
            if part.error_code != ErrorCode.none:
                errors[TopicPartition(name, int(part.partition_index))] = broker_error(
                    part.error_code
                )
    return errors
