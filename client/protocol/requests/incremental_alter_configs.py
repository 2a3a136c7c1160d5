"""IncrementalAlterConfigs: set or delete single config keys of brokers, topics and groups.

Unlike the older AlterConfigs, keys not named keep their values. The ``GROUP``
resource (KIP-848) holds per-group overrides: a share group's
``share.auto.offset.reset`` and ``share.record.lock.duration.ms`` among them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.static.primitive import i8
from kio.static.protocol import RequestPayload

from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow
from kgroup.protocol.requests.describe_configs import ConfigResourceType

__all__ = [
    "AlterConfigOp",
    "AlterResult",
    "ConfigAlteration",
    "ConfigResourceType",
    "build",
    "narrow",
    "parse",
]

API = ApiKey.INCREMENTAL_ALTER_CONFIGS

if TYPE_CHECKING:
    import kio.schema.incremental_alter_configs.v0.response as v0
    import kio.schema.incremental_alter_configs.v1.response as v1

    Response: TypeAlias = v0.IncrementalAlterConfigsResponse | v1.IncrementalAlterConfigsResponse
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


class AlterConfigOp(enum.IntEnum):
    """What to do to a key (Kafka's ``AlterConfigOp.OpType``; wire values)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigAlteration:
    """One key of one resource to change: ``value`` is None for DELETE."""

    resource_type: ConfigResourceType
    resource_name: str
    key: str
    value: str | None
    op: AlterConfigOp = AlterConfigOp.SET


@dataclass(frozen=True, slots=True)
class AlterResult:
    """What the broker made of one resource's changes (all of them, or none).

    Attributes:
        resource_type: the resource's type.
        resource_name: its name.
        error_code: 0 when applied; INVALID_CONFIG, POLICY_VIOLATION ... otherwise.
        error_message: the broker's reason, or None.
    """

    resource_type: ConfigResourceType
    resource_name: str
    error_code: int
    error_message: str | None


def build(
    versions: NegotiatedVersions,
    alterations: Iterable[ConfigAlteration],
    *,
    validate_only: bool = False,
) -> RequestPayload:
    """The ``alterations``, one resource entry per resource, in the order first named."""
    module: Any = versions.request_module(API)
    resources: dict[tuple[ConfigResourceType, str], list[Any]] = {}
    for a in alterations:
        resources.setdefault((a.resource_type, a.resource_name), []).append(
            module.AlterableConfig(name=a.key, config_operation=i8(int(a.op)), value=a.value)
        )
    return versions.new_request(
        API,
        resources=tuple(
            module.AlterConfigsResource(
                resource_type=i8(int(kind)), resource_name=name, configs=tuple(configs)
            )
            for (kind, name), configs in resources.items()
        ),
        validate_only=validate_only,
    )


def _resource_type(value: int) -> ConfigResourceType:
    try:
        return ConfigResourceType(value)
    except ValueError:
        return ConfigResourceType.UNKNOWN


def parse(response: Response) -> tuple[AlterResult, ...]:
    """Every resource's result; errors are returned, not raised."""
    return tuple(
        AlterResult(
            resource_type=_resource_type(int(r.resource_type)),
            resource_name=r.resource_name,
            error_code=int(r.error_code),
            error_message=r.error_message,
        )
        for r in response.responses
    )
