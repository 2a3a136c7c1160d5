"""OffsetDelete (v0): delete a group's committed offsets of some partitions (group tooling).

Sent to the group's coordinator. The broker refuses the partitions of a topic a
live member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC, per partition) and the
whole request for an unknown group (GROUP_ID_NOT_FOUND).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.errors import raise_for_error
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow, by_topic
from kgroup.types import TopicPartition

__all__ = ["build", "narrow", "parse"]

API = ApiKey.OFFSET_DELETE

if TYPE_CHECKING:
    import kio.schema.offset_delete.v0.response as v0

    Response: TypeAlias = v0.OffsetDeleteResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(
    versions: NegotiatedVersions, group_id: str, partitions: Collection[TopicPartition]
) -> RequestPayload:
    """Delete ``group_id``'s committed offsets of ``partitions``."""
    module = versions.request_module(API)
    return versions.new_request(
        API,
        group_id=group_id,
        topics=tuple(
            module.OffsetDeleteRequestTopic(
                name=topic,
                partitions=tuple(
                    module.OffsetDeleteRequestPartition(partition_index=p) for p in ps
                ),
            )
            for topic, ps in by_topic(partitions).items()
        ),
    )


def parse(response: Response) -> dict[TopicPartition, int]:
    """The error code per partition (0: deleted).

    Raises:
        BrokerError: the whole request was refused (GROUP_ID_NOT_FOUND ...).
    """
    raise_for_error(response.error_code)
    return {
        TopicPartition(str(topic.name), int(p.partition_index)): int(p.error_code)
        for topic in response.topics
        for p in topic.partitions
    }
