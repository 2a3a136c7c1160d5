"""DescribeConfigs (v1+): the configuration of brokers, topics and groups.

A broker's own settings (``group.consumer.migration.policy`` ...) are read from
the ``BROKER`` resource named by its node id, answered by that broker; the
``GROUP`` resource (KIP-848) holds the per-group overrides
(``consumer.session.timeout.ms`` ...), answered by any broker.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.static.primitive import i8
from kio.static.protocol import RequestPayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.cluster import frozen_map
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow

__all__ = [
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "DescribedConfigs",
    "Response",
    "build",
    "narrow",
    "parse",
]

API = ApiKey.DESCRIBE_CONFIGS

if TYPE_CHECKING:
    import kio.schema.describe_configs.v1.response as v1
    import kio.schema.describe_configs.v2.response as v2
    import kio.schema.describe_configs.v3.response as v3
    import kio.schema.describe_configs.v4.response as v4

    Response: TypeAlias = (
        v1.DescribeConfigsResponse
        | v2.DescribeConfigsResponse
        | v3.DescribeConfigsResponse
        | v4.DescribeConfigsResponse
    )
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


class ConfigResourceType(enum.IntEnum):
    """What a config resource is (Kafka's ``ConfigResource.Type``; wire values)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.IntEnum):
    """Where a config value comes from (Kafka's ``DescribeConfigsResponse.ConfigSource``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True, slots=True)
class ConfigResource:
    """A resource to describe: its type, its name (a broker's node id as text, a
    topic or group name), and the keys wanted (None: every key)."""

    type: ConfigResourceType
    name: str
    keys: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config of a resource.

    Attributes:
        name: the key.
        value: its value; None when it is sensitive (the broker hides it) or unset.
        source: where the value comes from.
        read_only: whether it can be changed without a restart.
        sensitive: whether the broker hid the value.
    """

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool


@dataclass(frozen=True, slots=True)
class DescribedConfigs:
    """One resource's configs, or the error describing it.

    Attributes:
        resource: the resource (type and name) as the broker answered it.
        error_code: 0, or why it could not be described (UNKNOWN_TOPIC_OR_PARTITION ...).
        error_message: the broker's message with it, or None.
        entries: the configs by key.
    """

    resource: ConfigResource
    error_code: int
    error_message: str | None
    entries: Mapping[str, ConfigEntry] = field(default_factory=frozen_map)


def build(versions: NegotiatedVersions, resources: Iterable[ConfigResource]) -> RequestPayload:
    """A description of ``resources``, without synonyms or documentation."""
    module: Any = versions.request_module(API)
    return versions.new_request(
        API,
        resources=tuple(
            module.DescribeConfigsResource(
                resource_type=i8(int(r.type)),
                resource_name=r.name,
                configuration_keys=None if r.keys is None else tuple(r.keys),
            )
            for r in resources
        ),
        include_synonyms=False,
    )


def _resource_type(value: int) -> ConfigResourceType:
    try:
        return ConfigResourceType(value)
    except ValueError:
        return ConfigResourceType.UNKNOWN


def _source(value: int) -> ConfigSource:
    try:
        return ConfigSource(value)
    except ValueError:
        return ConfigSource.UNKNOWN


def parse(response: Response) -> tuple[DescribedConfigs, ...]:
    """Every described resource; per-resource errors are returned, not raised."""
    return tuple(
        DescribedConfigs(
            resource=ConfigResource(_resource_type(int(r.resource_type)), r.resource_name),
            error_code=int(r.error_code),
            error_message=r.error_message,
            entries=frozen_map(
                {
                    c.name: ConfigEntry(
                        name=c.name,
                        value=c.value,
                        source=_source(int(c.config_source)),
                        read_only=bool(c.read_only),
                        sensitive=bool(c.is_sensitive),
                    )
                    for c in r.configs
                }
            ),
        )
        for r in response.results
    )
