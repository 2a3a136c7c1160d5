"""OffsetFetch (v8+, batched groups): a group's committed offsets, read stably.

From v9 the request carries the member id and epoch (the broker answers
STALE_MEMBER_EPOCH to an outdated epoch); v10 names topics by id.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.static.protocol import RequestPayload

from kgroup.errors import raise_for_error
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow, by_topic, topic_name
from kgroup.types import TopicPartition

__all__ = ["build", "committed_leader_epochs", "committed_metadata", "narrow", "parse"]

API = ApiKey.OFFSET_FETCH

if TYPE_CHECKING:
    import kio.schema.offset_fetch.v8.response as v8
    import kio.schema.offset_fetch.v9.response as v9
    import kio.schema.offset_fetch.v10.response as v10

    Response: TypeAlias = v8.OffsetFetchResponse | v9.OffsetFetchResponse | v10.OffsetFetchResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(
    versions: NegotiatedVersions,
    *,
    group_id: str,
    member_id: str | None,
    member_epoch: int,
    partitions: Collection[TopicPartition] | None,
    topic_ids: Mapping[str, uuid.UUID],
) -> RequestPayload:
    """The committed offsets of ``partitions`` in ``group_id`` (require_stable).

    ``member_id`` None and ``member_epoch`` -1 read as a non-member; v8 sends
    neither. ``topic_ids`` names every topic of ``partitions`` for v10.
    ``partitions`` None asks for every partition the group has an offset for
    (a null topic list).
    """
    module: Any = versions.request_module(API)
    by_id = versions.version(API) >= 10
    topics = (
        None
        if partitions is None
        else tuple(
            module.OffsetFetchRequestTopics(
                **({"topic_id": topic_ids[t]} if by_id else {"name": t}),
                partition_indexes=tuple(p),
            )
            for t, p in by_topic(partitions).items()
        )
    )
    group: dict[str, Any] = {"group_id": group_id, "topics": topics}
    if versions.version(API) >= 9:
        group.update(member_id=member_id, member_epoch=member_epoch)
    return versions.new_request(
        API, groups=(module.OffsetFetchRequestGroup(**group),), require_stable=True
    )


def parse(
    response: Response, topic_names: Mapping[uuid.UUID, str]
) -> dict[TopicPartition, int | None]:
    """The committed offset of each partition in ``response`` (None: nothing committed).

    ``topic_names`` names the topic ids a v10 response uses; a topic it cannot
    name is skipped.

    Raises:
        BrokerError: the first group or partition error in the response.
    """
    result: dict[TopicPartition, int | None] = {}
    for group in response.groups:
        raise_for_error(group.error_code)
        for topic in group.topics:
            name = topic_name(topic, topic_names)
            if name is None:
                continue
            for part in topic.partitions:
                raise_for_error(part.error_code)
                offset = int(part.committed_offset)
                result[TopicPartition(name, int(part.partition_index))] = (
                    offset if offset >= 0 else None
                )
    return result


def committed_metadata(
    response: Response, topic_names: Mapping[uuid.UUID, str]
) -> dict[TopicPartition, str]:
    """The metadata committed with each partition's offset ("" when none was).

    One trailing NUL is dropped: confluent-kafka's Python binding commits a
    metadata string with its C terminator (``"abc"`` is stored as ``"abc\\0"``),
    and the application that committed it meant ``"abc"``. Partitions without a
    committed offset are left out. Errors are :func:`parse`'s to raise.
    """
    result: dict[TopicPartition, str] = {}
    for tp, part in _committed(response, topic_names):
        text = part.metadata or ""
        result[tp] = text[:-1] if text.endswith("\x00") else text
    return result


def committed_leader_epochs(
    response: Response, topic_names: Mapping[uuid.UUID, str]
) -> dict[TopicPartition, int]:
    """The leader epoch committed with each partition's offset, where one was (KIP-320).

    Partitions without a committed offset, or committed without an epoch (-1),
    are left out. Errors are :func:`parse`'s to raise.
    """
    result: dict[TopicPartition, int] = {}
    for tp, part in _committed(response, topic_names):
        epoch = int(part.committed_leader_epoch)
        if epoch >= 0:
            result[tp] = epoch
    return result


def _committed(
    response: Response, topic_names: Mapping[uuid.UUID, str]
) -> Iterator[tuple[TopicPartition, Any]]:
    """Each partition of ``response`` with a committed offset, and its answer."""
    for group in response.groups:
        for topic in group.topics:
            name = topic_name(topic, topic_names)
            if name is None:
                continue
            for part in topic.partitions:
                if int(part.committed_offset) >= 0:
                    yield TopicPartition(name, int(part.partition_index)), part
