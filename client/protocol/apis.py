"""The Kafka APIs kgroup speaks, and the versions of each that kgroup supports.

Every range here is bounded above by what kio 0.6 generates and below by the
first version that carries something kgroup relies on; the comment on each row
says what that is. :mod:`kgroup.protocol.negotiation` intersects these ranges
with a broker's.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Final, Literal, TypeVar

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.static.constants import EntityType
from kio.static.protocol import RequestPayload, ResponsePayload

__all__ = [
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "VersionRange",
    "request_class",
    "request_module",
    "response_class",
    "response_module",
]


_T = TypeVar("_T")


class ApiKey(enum.IntEnum):
    """Kafka API keys of the requests kgroup sends (values are the wire keys)."""

    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90

    @property
    def api_name(self) -> str:
        """The API's protocol name, as Kafka's schemas spell it (``ConsumerGroupHeartbeat``)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of API versions, ``min <= version <= max``."""

    min: int
    max: int

    def __post_init__(self) -> None:
        if not 0 <= self.min <= self.max:
            raise ValueError(f"invalid version range {self.min}..{self.max}")

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min <= version <= self.max

    def __str__(self) -> str:
        return f"v{self.min}-v{self.max}"

    def intersect(self, other: VersionRange) -> VersionRange | None:
        """The versions in both ranges, or ``None`` when they do not overlap."""
        low, high = max(self.min, other.min), min(self.max, other.max)
        return VersionRange(low, high) if low <= high else None


SUPPORTED_VERSIONS: Final[Mapping[ApiKey, VersionRange]] = MappingProxyType(
    {
        # v0 is the universal fallback when a broker rejects a newer ApiVersions.
        ApiKey.API_VERSIONS: VersionRange(0, 4),
        # v10 returns topic ids, which the new protocol names partitions by.
        ApiKey.METADATA: VersionRange(10, 13),
        # v4 batches coordinator keys; kgroup always sends the batched form.
        ApiKey.FIND_COORDINATOR: VersionRange(4, 6),
        # v1 (KIP-1082) lets the client pick its member id and adds regexes.
        ApiKey.CONSUMER_GROUP_HEARTBEAT: VersionRange(0, 1),
        ApiKey.CONSUMER_GROUP_DESCRIBE: VersionRange(0, 1),
        # v1 is the first version Apache Kafka ships (4.1; v0 was early access).
        ApiKey.SHARE_GROUP_HEARTBEAT: VersionRange(1, 1),
        ApiKey.SHARE_GROUP_DESCRIBE: VersionRange(1, 1),
        # v1 is the first version Apache Kafka ships (4.1); v2 (4.2) adds renewing
        # acquisition locks (KIP-1222) and the strict record limit (KIP-1206).
        ApiKey.SHARE_FETCH: VersionRange(1, 2),
        ApiKey.SHARE_ACKNOWLEDGE: VersionRange(1, 2),
        # v0 is what Kafka 4.1 serves; v1 (4.2, KIP-1226) adds each partition's lag.
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: VersionRange(0, 1),
        # v5 carries group.instance.id (static membership, KIP-345) in the classic APIs.
        ApiKey.JOIN_GROUP: VersionRange(5, 9),
        ApiKey.SYNC_GROUP: VersionRange(3, 5),
        ApiKey.HEARTBEAT: VersionRange(3, 4),
        # v3 leaves with a batch of members, each with its instance id.
        ApiKey.LEAVE_GROUP: VersionRange(3, 5),
        # v7 carries the instance id; v9 the member epoch; v10 names topics by id.
        ApiKey.OFFSET_COMMIT: VersionRange(7, 10),
        # v8 batches groups; v9 carries member id and epoch; v10 names topics by id.
        ApiKey.OFFSET_FETCH: VersionRange(8, 10),
        # v6 is the first flexible version.
        ApiKey.LIST_OFFSETS: VersionRange(6, 11),
        # v3 carries the replica id (-1: a consumer); Kafka 4 serves v2-v4.
        ApiKey.OFFSET_FOR_LEADER_EPOCH: VersionRange(3, 4),
        # v4 reports group.instance.id of members.
        ApiKey.DESCRIBE_GROUPS: VersionRange(4, 6),
        # v4 filters by state.
        ApiKey.LIST_GROUPS: VersionRange(4, 5),
        # v5 reports partition counts and configs of created topics; tests use it.
        ApiKey.CREATE_TOPICS: VersionRange(5, 7),
        # v1 reports each config's source; Kafka 4 removed v0.
        ApiKey.DESCRIBE_CONFIGS: VersionRange(1, 4),
        # v0 is what every supported broker serves; v1 is its flexible form.
        ApiKey.INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),
        # Group tooling. Every DeleteGroups version has the same fields (v2: flexible);
        # OffsetDelete has one version.
        ApiKey.DELETE_GROUPS: VersionRange(0, 2),
        ApiKey.OFFSET_DELETE: VersionRange(0, 0),
    }
)
"""The version range kgroup supports for every API it uses."""


def _load(kind: str, api_key: int, version: int, load: Callable[[], _T]) -> _T:
    try:
        return load()
    except Exception as exc:  # kio raises its own index errors and ImportErrors
        raise KeyError(f"kio has no {kind} for API key {api_key} v{version}") from exc


# kio finds a class by importing its module and walking its names; every request
# and response asks again (three lookups a heartbeat), so the answers are kept.
@functools.cache
def request_class(api_key: int, version: int) -> type[RequestPayload]:
    """kio's request class of ``api_key`` at ``version``.

    Raises:
        KeyError: kio has no such API or version.
    """
    return _load("request", api_key, version, lambda: load_request_schema(api_key, version))


@functools.cache
def response_class(api_key: int, version: int) -> type[ResponsePayload]:
    """kio's response class of ``api_key`` at ``version``.

    Raises:
        KeyError: kio has no such API or version.
    """
    return _load("response", api_key, version, lambda: load_response_schema(api_key, version))


def request_module(api_key: int, version: int) -> ModuleType:
    """kio's request module of ``api_key`` at ``version``: the request class and its nested types.

    Raises:
        KeyError: kio has no such API or version.
    """
    return _payload_module(EntityType.request, api_key, version)


def response_module(api_key: int, version: int) -> ModuleType:
    """kio's response module of ``api_key`` at ``version``.

    Raises:
        KeyError: kio has no such API or version.
    """
    return _payload_module(EntityType.response, api_key, version)


@functools.cache
def _payload_module(
    kind: Literal[EntityType.request, EntityType.response], api_key: int, version: int
) -> ModuleType:
    return _load(kind.name, api_key, version, lambda: load_payload_module(api_key, version, kind))
