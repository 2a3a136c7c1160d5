"""Pieces the request modules share: topic grouping, topic naming, response checks."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from kio.static.protocol import ResponsePayload

from kgroup.errors import KafkaProtocolError
from kgroup.protocol.apis import ApiKey
from kgroup.types import TopicPartition

__all__ = ["by_topic", "topic_name", "unexpected"]


def by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partitions grouped by topic, topics and partitions sorted (the order Java sends)."""
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def topic_name(topic: object, names: Mapping[uuid.UUID, str]) -> str | None:
    """The name of a response's topic entry: its own ``name`` (before topic ids), or
    the name of its ``topic_id`` in ``names``; None when neither is known."""
    name: str | None = getattr(topic, "name", None)
    if name:
        return name
    topic_id: uuid.UUID | None = getattr(topic, "topic_id", None)
    return None if topic_id is None else names.get(topic_id)


def unexpected(payload: ResponsePayload, api: ApiKey) -> KafkaProtocolError:
    """The error for a response that is not one of ``api``'s negotiable versions."""
    return KafkaProtocolError(
        f"expected a {api.api_name} response, got {type(payload).__name__} "
        f"v{payload.__version__} of API key {payload.__api_key__}"
    )
