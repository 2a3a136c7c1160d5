"""ApiVersions read for what a broker offers beyond API ranges: its feature levels.

Connections negotiate API versions from ApiVersions
(:mod:`~kgroup.protocol.requests.api_versions`) and keep only the ranges; the
group tooling asks again to read the features (KIP-584) a v3+ answer carries:
the levels the broker supports and the cluster-wide finalized ones, such as
``group.version`` (1 or more: the consumer protocol is enabled, Kafka 4.x).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

import kio.schema.api_versions.v3.response as v3
import kio.schema.api_versions.v4.response as v4
from kio.static.protocol import RequestPayload

from kgroup._version import __version__
from kgroup.errors import raise_for_error
from kgroup.protocol.apis import ApiKey, VersionRange
from kgroup.protocol.cluster import frozen_map
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests import api_versions

if TYPE_CHECKING:
    from kgroup.protocol.requests.api_versions import Response

__all__ = ["BrokerFeatures", "build", "narrow", "parse"]

narrow: Final = api_versions.narrow
"""``payload`` as an ApiVersions response."""


@dataclass(frozen=True, slots=True)
class BrokerFeatures:
    """What one broker answered to ApiVersions.

    Attributes:
        api_ranges: the version range of every API it lists, by API key.
        supported: the level range of every feature it supports, by name.
        finalized: the cluster-wide finalized level of each feature, by name
            (a feature the cluster has not finalized is absent: level 0).
        finalized_epoch: the epoch of those levels, -1 when unknown.
    """

    api_ranges: Mapping[int, VersionRange] = field(default_factory=frozen_map)
    supported: Mapping[str, VersionRange] = field(default_factory=frozen_map)
    finalized: Mapping[str, int] = field(default_factory=frozen_map)
    finalized_epoch: int = -1

    def level(self, feature: str) -> int:
        """The finalized level of ``feature`` (0 when not finalized)."""
        return self.finalized.get(feature, 0)

    def api_range(self, api: ApiKey) -> VersionRange | None:
        """The broker's version range of ``api``, or None when it lacks the API."""
        return self.api_ranges.get(int(api))


def build(versions: NegotiatedVersions) -> RequestPayload:
    """ApiVersions at the version negotiated with the broker it goes to."""
    return api_versions.build(versions.version(ApiKey.API_VERSIONS), "kgroup", __version__)


def parse(response: Response) -> BrokerFeatures:
    """The broker's API ranges and features (none before v3).

    Raises:
        BrokerError: the response's error code.
    """
    raise_for_error(response.error_code)
    supported: dict[str, VersionRange] = {}
    finalized: dict[str, int] = {}
    epoch = -1
    if isinstance(response, v3.ApiVersionsResponse | v4.ApiVersionsResponse):
        for s in response.supported_features:
            # A feature whose range starts at 0 is supported but not required.
            if 0 <= s.min_version <= s.max_version:
                supported[s.name] = VersionRange(int(s.min_version), int(s.max_version))
        for f in response.finalized_features:
            finalized[f.name] = int(f.max_version_level)
        epoch = int(response.finalized_features_epoch)
    return BrokerFeatures(
        api_ranges=frozen_map(api_versions.parse(response)),
        supported=frozen_map(supported),
        finalized=frozen_map(finalized),
        finalized_epoch=epoch,
    )
