"""The classic payload embedded in JoinGroup and SyncGroup: subscriptions and assignments.

A classic consumer group carries its own payloads inside the group protocol:
each JoinGroup protocol entry's metadata is a ConsumerProtocolSubscription,
each SyncGroup member state a ConsumerProtocolAssignment. Both are encoded as
a 2-byte big-endian version followed by the kio-encoded body of that version
(Kafka's ``ConsumerProtocol`` / ``MessageUtil.toVersionPrefixedByteBuffer``).

Kafka calls this embedded format "ConsumerProtocol"; kgroup calls it the
classic payload, since "consumer protocol" names KIP-848's group protocol.

This module converts between those bytes and the plain values of
:mod:`kgroup.membership` (:class:`~kgroup.membership.MemberSubscription`,
:class:`~kgroup.membership.ClassicAssignment`), so the membership machines never
see kio. As in the Java client, decoding reads any version from 0 up: a version
newer than kgroup knows is read with the newest known schema (newer versions
may only add fields at the end), and bytes after the known fields are
ignored.

These bytes come from other clients (the group leader's assignor, every
member's subscription), so decoding trusts none of them: every failure is a
:class:`ClassicPayloadError` naming the field — a length that does not fit,
a null array (Kafka's schema allows null only for the user data and the rack
id), a negative partition number, bytes left over after a version kgroup
knows completely — and never a ``TypeError`` from iterating a ``None``
further on.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, Final, TypeVar

import kio.schema.consumer_protocol_assignment.v0 as assignment_v0
import kio.schema.consumer_protocol_assignment.v1 as assignment_v1
import kio.schema.consumer_protocol_assignment.v2 as assignment_v2
import kio.schema.consumer_protocol_assignment.v3 as assignment_v3
import kio.schema.consumer_protocol_subscription.v0 as subscription_v0
import kio.schema.consumer_protocol_subscription.v1 as subscription_v1
import kio.schema.consumer_protocol_subscription.v2 as subscription_v2
import kio.schema.consumer_protocol_subscription.v3 as subscription_v3
from kio.schema.types import TopicName
from kio.serial import entity_writer
from kio.static.primitive import i32

from kgroup.errors import ClassicPayloadError, KafkaProtocolError
from kgroup.membership import ClassicAssignment, MemberSubscription
from kgroup.protocol.framing import read_entity
from kgroup.protocol.requests._common import by_topic
from kgroup.types import TopicPartition

__all__ = [
    "HIGHEST_VERSION",
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

_Entity = TypeVar("_Entity", _SubscriptionEntity, _AssignmentEntity)

_ASSIGNMENT_MODULES: Final = (assignment_v0, assignment_v1, assignment_v2, assignment_v3)
_SUBSCRIPTION_MODULES: Final = (subscription_v0, subscription_v1, subscription_v2, subscription_v3)

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


def read_version(data: bytes) -> int:
    """The version prefix of an embedded subscription or assignment.

    Raises:
        ClassicPayloadError: fewer than two bytes.
    """
    if len(data) < _VERSION.size:
        raise ClassicPayloadError(f"classic payload of {len(data)} bytes has no version prefix")
    version: int = _VERSION.unpack_from(data, 0)[0]
    return version


def _schema_version(data: bytes, what: str) -> int:
    version = read_version(data)
    if version < 0:
        raise ClassicPayloadError(f"unsupported {what} version {version}")
    return min(version, HIGHEST_VERSION)


def _check_write_version(version: int) -> None:
    if not 0 <= version <= HIGHEST_VERSION:
        raise ValueError(f"classic payload version must be 0..{HIGHEST_VERSION}, got {version}")


def _i32s(values: list[int]) -> tuple[i32, ...]:
    return tuple(i32(v) for v in values)


def _topic_partitions(module: ModuleType, partitions: Iterable[TopicPartition]) -> tuple[Any, ...]:
    """``partitions`` as ``module``'s TopicPartition entries, topics and partitions sorted
    (as Java sorts owned ones)."""
    return tuple(
        module.data.TopicPartition(topic=TopicName(t), partitions=_i32s(ps))
        for t, ps in by_topic(partitions).items()
    )


def _encode(what: str, version: int, entity: Callable[[], Any]) -> bytes:
    _check_write_version(version)
    buf = io.BytesIO()
    buf.write(_VERSION.pack(version))
    try:
        body = entity()
        entity_writer(type(body))(buf, body)
    except Exception as exc:  # kio raises plain errors for out-of-range values
        raise ClassicPayloadError(f"cannot encode {what}: {exc!r}") from exc
    return buf.getvalue()


def _decode(what: str, data: bytes, classes: tuple[type[_Entity], ...]) -> _Entity:
    version = _schema_version(data, what)
    body = data[_VERSION.size :]
    label = f"{what} (v{read_version(data)})"
    try:
        entity, end = read_entity(label, classes[version], body)
    except KafkaProtocolError as exc:
        raise ClassicPayloadError(str(exc)) from exc
    if end != len(body) and read_version(data) <= HIGHEST_VERSION:
        # A version kgroup knows is fully specified: bytes after it mean writer and
        # reader disagree on the layout. (Newer versions add fields at the end.)
        raise ClassicPayloadError(f"{label}: {len(body) - end} bytes after its last field")
    return entity


def _partitions(what: str, field: str, entries: Iterable[Any]) -> frozenset[TopicPartition]:
    """The partitions of ``entries`` (kio TopicPartition entities), refusing negative ones."""
    result: set[TopicPartition] = set()
    for i, entry in enumerate(entries):
        for j, partition in enumerate(entry.partitions):
            if partition < 0:
                raise ClassicPayloadError(
                    f"{what}: field {field}[{i}].partitions[{j}]: negative partition "
                    f"{partition} of topic {entry.topic!r}"
                )
            result.add(TopicPartition(str(entry.topic), int(partition)))
    return frozenset(result)


# ----------------------------------------------------------------- subscription


def _subscription_entity(sub: MemberSubscription, version: int) -> _SubscriptionEntity:
    module = _SUBSCRIPTION_MODULES[version]
    fields: dict[str, Any] = {"topics": tuple(sorted(sub.topics)), "user_data": sub.user_data}
    # Each version adds fields at the end: v1 owned partitions, v2 generation, v3 rack.
    if version >= 1:
        fields["owned_partitions"] = _topic_partitions(module, sub.owned_partitions)
    if version >= 2:
        fields["generation_id"] = i32(sub.generation_id)
    if version >= 3:
        fields["rack_id"] = sub.rack_id
    entity: _SubscriptionEntity = module.ConsumerProtocolSubscription(**fields)
    return entity


def encode_subscription(sub: MemberSubscription, version: int = HIGHEST_VERSION) -> bytes:
    """``sub`` as JoinGroup protocol metadata: version prefix + body of ``version``.

    Topics and owned partitions are written sorted. Fields the version lacks
    are dropped (v0: owned partitions; v0-v1: generation id; v0-v2: rack id).

    Raises:
        ValueError: ``version`` outside 0..3.
    """
    return _encode("subscription", version, lambda: _subscription_entity(sub, version))


def decode_subscription(data: bytes) -> MemberSubscription:
    """The subscription in JoinGroup protocol metadata, of any version.

    Missing fields of older versions take their defaults (no owned
    partitions, generation -1, no rack); an empty rack id reads as None, as
    in the Java client.

    Raises:
        ClassicPayloadError: the bytes do not decode: truncated, a null topic or
            partition array, a negative partition, bytes after a known version's
            last field ...; the message names the field.
    """
    entity = _decode("subscription", data, _SUBSCRIPTION_CLASSES)
    owned: frozenset[TopicPartition] = frozenset()
    generation = -1
    rack: str | None = None
    if not isinstance(entity, subscription_v0.ConsumerProtocolSubscription):
        owned = _partitions("subscription", "owned_partitions", entity.owned_partitions)
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


def _assignment_entity(assignment: ClassicAssignment, version: int) -> _AssignmentEntity:
    module = _ASSIGNMENT_MODULES[version]
    entity: _AssignmentEntity = module.ConsumerProtocolAssignment(
        assigned_partitions=_topic_partitions(module, assignment.partitions),
        user_data=assignment.user_data,
    )
    return entity


def encode_assignment(assignment: ClassicAssignment, version: int = HIGHEST_VERSION) -> bytes:
    """``assignment`` as SyncGroup member state: version prefix + body (topics sorted).

    Raises:
        ValueError: ``version`` outside 0..3.
    """
    return _encode("assignment", version, lambda: _assignment_entity(assignment, version))


def decode_assignment(data: bytes) -> ClassicAssignment:
    """The assignment in a SyncGroup member state, of any version.

    Raises:
        ClassicPayloadError: the bytes do not decode (fewer than two bytes
            included: Java refuses those too, naming a buggy leader assignor):
            truncated, a null partition array, a negative partition, bytes after a
            known version's last field ...; the message names the field.
    """
    entity = _decode("assignment", data, _ASSIGNMENT_CLASSES)
    return ClassicAssignment(
        partitions=_partitions("assignment", "assigned_partitions", entity.assigned_partitions),
        user_data=None if entity.user_data is None else bytes(entity.user_data),
    )
