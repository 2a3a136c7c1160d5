"""The consumer protocol embedded in JoinGroup and SyncGroup: subscriptions and assignments.

A classic consumer group carries its own payloads inside the group protocol:
each JoinGroup protocol entry's metadata is a ConsumerProtocolSubscription,
each SyncGroup member state a ConsumerProtocolAssignment. Both are encoded as
a 2-byte big-endian version followed by the kio-encoded body of that version
(Kafka's ``ConsumerProtocol`` / ``MessageUtil.toVersionPrefixedByteBuffer``).

This module converts between those bytes and the plain values of
:mod:`kgroup.membership.classic_types`, so the membership machines never see
kio. As in the Java client, decoding reads any version from 0 up: a version
newer than kgroup knows is read with the newest known schema (newer versions
may only add fields at the end), and bytes after the known fields are
ignored.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable
from typing import Final

import kio.schema.consumer_protocol_assignment.v0 as assignment_v0
import kio.schema.consumer_protocol_assignment.v1 as assignment_v1
import kio.schema.consumer_protocol_assignment.v2 as assignment_v2
import kio.schema.consumer_protocol_assignment.v3 as assignment_v3
import kio.schema.consumer_protocol_subscription.v0 as subscription_v0
import kio.schema.consumer_protocol_subscription.v1 as subscription_v1
import kio.schema.consumer_protocol_subscription.v2 as subscription_v2
import kio.schema.consumer_protocol_subscription.v3 as subscription_v3
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from kgroup.errors import MalformedResponseError
from kgroup.membership import MemberAssignment, MemberSubscription
from kgroup.types import TopicPartition

__all__ = [
    "HIGHEST_VERSION",
    "ConsumerProtocolError",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "read_version",
]

HIGHEST_VERSION: Final = 3
"""The newest subscription / assignment version kgroup knows (and writes by default)."""

_VERSION = struct.Struct(">h")

_SubscriptionEntity = (
    subscription_v0.ConsumerProtocolSubscription
    | subscription_v1.ConsumerProtocolSubscription
    | subscription_v2.ConsumerProtocolSubscription
    | subscription_v3.ConsumerProtocolSubscription
)
_AssignmentEntity = (
    assignment_v0.ConsumerProtocolAssignment
    | assignment_v1.ConsumerProtocolAssignment
    | assignment_v2.ConsumerProtocolAssignment
    | assignment_v3.ConsumerProtocolAssignment
)

_ASSIGNMENT_CLASSES: Final[tuple[type[_AssignmentEntity], ...]] = (
    assignment_v0.ConsumerProtocolAssignment,
    assignment_v1.ConsumerProtocolAssignment,
    assignment_v2.ConsumerProtocolAssignment,
    assignment_v3.ConsumerProtocolAssignment,
)
_SUBSCRIPTION_CLASSES: Final[tuple[type[_SubscriptionEntity], ...]] = (
    subscription_v0.ConsumerProtocolSubscription,
    subscription_v1.ConsumerProtocolSubscription,
    subscription_v2.ConsumerProtocolSubscription,
    subscription_v3.ConsumerProtocolSubscription,
)


class ConsumerProtocolError(MalformedResponseError):
    """Embedded subscription or assignment bytes that do not decode (or cannot be encoded)."""


def read_version(data: bytes) -> int:
    """The version prefix of an embedded subscription or assignment.

    Raises:
        ConsumerProtocolError: fewer than two bytes.
    """
    if len(data) < _VERSION.size:
        raise ConsumerProtocolError(
            f"consumer protocol payload of {len(data)} bytes has no version prefix"
        )
    version: int = _VERSION.unpack_from(data, 0)[0]
    return version


def _schema_version(data: bytes, what: str) -> int:
    version = read_version(data)
    if version < 0:
        raise ConsumerProtocolError(f"unsupported {what} version {version}")
    return min(version, HIGHEST_VERSION)


def _check_write_version(version: int) -> None:
    if not 0 <= version <= HIGHEST_VERSION:
        raise ValueError(f"consumer protocol version must be 0..{HIGHEST_VERSION}, got {version}")


def _grouped(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Partitions grouped by topic, topics and partitions sorted (as Java sorts owned ones)."""
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return list(out.items())


def _i32s(values: list[int]) -> tuple[i32, ...]:
    return tuple(i32(v) for v in values)


# ----------------------------------------------------------------- subscription


def _subscription_entity(sub: MemberSubscription, version: int) -> _SubscriptionEntity:
    topics = tuple(sorted(sub.topics))
    if version == 0:
        return subscription_v0.ConsumerProtocolSubscription(topics=topics, user_data=sub.user_data)
    if version == 1:
        owned1 = tuple(
            subscription_v1.data.TopicPartition(topic=TopicName(t), partitions=_i32s(ps))
            for t, ps in _grouped(sub.owned_partitions)
        )
        return subscription_v1.ConsumerProtocolSubscription(
            topics=topics, user_data=sub.user_data, owned_partitions=owned1
        )
    if version == 2:
        owned2 = tuple(
            subscription_v2.data.TopicPartition(topic=TopicName(t), partitions=_i32s(ps))
            for t, ps in _grouped(sub.owned_partitions)
        )
        return subscription_v2.ConsumerProtocolSubscription(
            topics=topics,
            user_data=sub.user_data,
            owned_partitions=owned2,
            generation_id=i32(sub.generation_id),
        )
    owned3 = tuple(
        subscription_v3.data.TopicPartition(topic=TopicName(t), partitions=_i32s(ps))
        for t, ps in _grouped(sub.owned_partitions)
    )
    return subscription_v3.ConsumerProtocolSubscription(
        topics=topics,
        user_data=sub.user_data,
        owned_partitions=owned3,
        generation_id=i32(sub.generation_id),
        rack_id=sub.rack_id,
    )


def encode_subscription(sub: MemberSubscription, version: int = HIGHEST_VERSION) -> bytes:
    """``sub`` as JoinGroup protocol metadata: version prefix + body of ``version``.

    Topics and owned partitions are written sorted. Fields the version lacks
    are dropped (v0: owned partitions; v0-v1: generation id; v0-v2: rack id).

    Raises:
        ValueError: ``version`` outside 0..3.
    """
    _check_write_version(version)
    buf = io.BytesIO()
    buf.write(_VERSION.pack(version))
    try:
        entity = _subscription_entity(sub, version)
        entity_writer(type(entity))(buf, entity)
    except Exception as exc:  # kio raises plain errors for out-of-range values
        raise ConsumerProtocolError(f"cannot encode subscription: {exc!r}") from exc
    return buf.getvalue()


def decode_subscription(data: bytes) -> MemberSubscription:
    """The subscription in JoinGroup protocol metadata, of any version.

    Missing fields of older versions take their defaults (no owned
    partitions, generation -1, no rack); an empty rack id reads as None, as
    in the Java client.

    Raises:
        ConsumerProtocolError: the bytes do not decode.
    """
    version = _schema_version(data, "subscription")
    cls = _SUBSCRIPTION_CLASSES[version]
    try:
        entity, _ = entity_reader(cls)(data[_VERSION.size :], 0)
    except Exception as exc:
        raise ConsumerProtocolError(f"undecodable subscription (v{version}): {exc!r}") from exc
    owned: frozenset[TopicPartition] = frozenset()
    generation = -1
    rack: str | None = None
    if not isinstance(entity, subscription_v0.ConsumerProtocolSubscription):
        owned = frozenset(
            TopicPartition(str(tp.topic), int(p))
            for tp in entity.owned_partitions
            for p in tp.partitions
        )
    if isinstance(
        entity,
        subscription_v2.ConsumerProtocolSubscription | subscription_v3.ConsumerProtocolSubscription,
    ):
        generation = int(entity.generation_id)
    if isinstance(entity, subscription_v3.ConsumerProtocolSubscription):
        rack = entity.rack_id or None
    return MemberSubscription(
        topics=frozenset(entity.topics),
        user_data=None if entity.user_data is None else bytes(entity.user_data),
        owned_partitions=owned,
        generation_id=generation,
        rack_id=rack,
    )


# ------------------------------------------------------------------- assignment


def _assignment_entity(assignment: MemberAssignment, version: int) -> _AssignmentEntity:
    grouped = _grouped(assignment.partitions)
    if version == 0:
        return assignment_v0.ConsumerProtocolAssignment(
            assigned_partitions=tuple(
                assignment_v0.data.TopicPartition(topic=TopicName(t), partitions=_i32s(ps))
                for t, ps in grouped
            ),
            user_data=assignment.user_data,
        )
    if version == 1:
        return assignment_v1.ConsumerProtocolAssignment(
            assigned_partitions=tuple(
                assignment_v1.data.TopicPartition(topic=TopicName(t), partitions=_i32s(ps))
                for t, ps in grouped
            ),
            user_data=assignment.user_data,
        )
    if version == 2:
        return assignment_v2.ConsumerProtocolAssignment(
            assigned_partitions=tuple(
                assignment_v2.data.TopicPartition(topic=TopicName(t), partitions=_i32s(ps))
                for t, ps in grouped
            ),
            user_data=assignment.user_data,
        )
    return assignment_v3.ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            assignment_v3.data.TopicPartition(topic=TopicName(t), partitions=_i32s(ps))
            for t, ps in grouped
        ),
        user_data=assignment.user_data,
    )


def encode_assignment(assignment: MemberAssignment, version: int = HIGHEST_VERSION) -> bytes:
    """``assignment`` as SyncGroup member state: version prefix + body (topics sorted).

    Raises:
        ValueError: ``version`` outside 0..3.
    """
    _check_write_version(version)
    buf = io.BytesIO()
    buf.write(_VERSION.pack(version))
    try:
        entity = _assignment_entity(assignment, version)
        entity_writer(type(entity))(buf, entity)
    except Exception as exc:
        raise ConsumerProtocolError(f"cannot encode assignment: {exc!r}") from exc
    return buf.getvalue()


def decode_assignment(data: bytes) -> MemberAssignment:
    """The assignment in a SyncGroup member state, of any version.

    Raises:
        ConsumerProtocolError: the bytes do not decode (fewer than two bytes
            included: Java refuses those too, naming a buggy leader assignor).
    """
    version = _schema_version(data, "assignment")
    cls = _ASSIGNMENT_CLASSES[version]
    try:
        entity, _ = entity_reader(cls)(data[_VERSION.size :], 0)
    except Exception as exc:
        raise ConsumerProtocolError(f"undecodable assignment (v{version}): {exc!r}") from exc
    return MemberAssignment(
        partitions=frozenset(
            TopicPartition(str(tp.topic), int(p))
            for tp in entity.assigned_partitions
            for p in tp.partitions
        ),
        user_data=None if entity.user_data is None else bytes(entity.user_data),
    )
