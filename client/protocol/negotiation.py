"""Choosing API versions: the highest version both kgroup and a broker support.

A broker advertises its ranges in its ApiVersions response; :func:`negotiate`
intersects them with :data:`~kgroup.protocol.apis.SUPPORTED_VERSIONS` once per
connection, and the resulting :class:`NegotiatedVersions` hands out the kio
classes of the chosen versions::

    versions = negotiate(broker_ranges(api_versions_response))
    Metadata = versions.request_class(ApiKey.METADATA)
    topics = versions.request_module(ApiKey.METADATA).MetadataRequestTopic

An API the broker lacks, or supports only in versions kgroup does not, is not
an error until someone asks for it: a broker without the new group protocol is
still fine for the classic one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any, Final

from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup.errors import UnsupportedVersionError
from kgroup.protocol import apis
from kgroup.protocol.apis import SUPPORTED_VERSIONS, ApiKey, VersionRange
from kgroup.protocol.requests import api_versions
from kgroup.protocol.requests.api_versions import build as api_versions_request

__all__ = [
    "API_VERSIONS_FIRST_VERSION",
    "NegotiatedVersions",
    "api_versions_request",
    "api_versions_retry_version",
    "broker_ranges",
    "negotiate",
    "pick_version",
]

API_VERSIONS_FIRST_VERSION: Final = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS].max
"""The ApiVersions version a connection tries first."""


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).api_name
    except ValueError:
        return f"API key {api_key}"


def pick_version(api_key: int, ours: VersionRange, theirs: VersionRange | None) -> int:
    """The highest version in both ranges.

    Raises:
        UnsupportedVersionError: the broker lacks the API (``theirs`` is None) or
            the ranges do not overlap; the message names the API and both ranges.
    """
    name = _api_name(api_key)
    if theirs is None:
        # Every Kafka broker listener serves Metadata: an address that does not is
        # another port of the cluster (a KRaft controller's) or not Kafka at all.
        hint = (
            "; every Kafka broker listener serves it, so this address is not one (a KRaft "
            "controller's port?): point bootstrap.servers at a broker listener"
            if api_key == ApiKey.METADATA
            else ""
        )
        raise UnsupportedVersionError(
            f"the broker does not support {name} (kgroup supports {ours}){hint}"
        )
    common = ours.intersect(theirs)
    if common is None:
        raise UnsupportedVersionError(
            f"no common version of {name}: kgroup supports {ours}, the broker {theirs}"
        )
    return common.max


def broker_ranges(response: ResponsePayload) -> dict[int, VersionRange]:
    """The version range of every API a broker lists in an ApiVersions response.

    Raises:
        KafkaProtocolError: ``response`` is not an ApiVersions response.
    """
    return api_versions.parse(api_versions.narrow(response))


@dataclass(frozen=True, slots=True)
class NegotiatedVersions:
    """The API versions chosen for one broker.

    Attributes:
        broker: the broker's advertised range per API key (every API it lists).
        chosen: the chosen version per API that both sides support.
        supported: kgroup's ranges the choice was made from.
    """

    broker: Mapping[int, VersionRange]
    chosen: Mapping[ApiKey, int]
    supported: Mapping[ApiKey, VersionRange] = field(default_factory=lambda: SUPPORTED_VERSIONS)

    def supports(self, api: ApiKey) -> bool:
        """Whether some version of ``api`` is supported by both sides."""
        return api in self.chosen

    def version(self, api: ApiKey) -> int:
        """The version of ``api`` to send.

        Raises:
            UnsupportedVersionError: no version both sides support (names both ranges).
        """
        try:
            return self.chosen[api]
        except KeyError:
            pass
        pick_version(api, self.supported[api], self.broker.get(api))
        raise AssertionError("pick_version raises when negotiation found no version")

    def request_class(self, api: ApiKey) -> type[RequestPayload]:
        """kio's request class of ``api`` at the negotiated version."""
        return apis.request_class(api, self.version(api))

    def response_class(self, api: ApiKey) -> type[ResponsePayload]:
        """kio's response class of ``api`` at the negotiated version."""
        return apis.response_class(api, self.version(api))

    def request_module(self, api: ApiKey) -> ModuleType:
        """kio's request module at the negotiated version, for its nested types."""
        return apis.request_module(api, self.version(api))

    def response_module(self, api: ApiKey) -> ModuleType:
        """kio's response module at the negotiated version."""
        return apis.response_module(api, self.version(api))

    def new_request(self, api: ApiKey, /, **fields: Any) -> RequestPayload:
        """A request of ``api`` at the negotiated version, built from its fields.

        Raises:
            UnsupportedVersionError: no version both sides support.
            TypeError: ``fields`` do not fit that version's request.
        """
        cls: Any = self.request_class(api)
        request: RequestPayload = cls(**fields)
        return request

    def check(self, request: RequestPayload) -> None:
        """Check that the broker supports the version of an already built request.

        Raises:
            UnsupportedVersionError: the broker does not support that version.
        """
        key = int(request.__api_key__)
        theirs = self.broker.get(key)
        if theirs is None or request.__version__ not in theirs:
            raise UnsupportedVersionError(
                f"the broker does not support {_api_name(key)} v{request.__version__} "
                f"(it supports {theirs if theirs is not None else 'no version'})"
            )


def negotiate(
    broker: Mapping[int, VersionRange],
    supported: Mapping[ApiKey, VersionRange] = SUPPORTED_VERSIONS,
) -> NegotiatedVersions:
    """Pick, per API in ``supported``, the highest version the broker also supports."""
    chosen: dict[ApiKey, int] = {}
    for api, ours in supported.items():
        common = ours.intersect(broker[api]) if api in broker else None
        if common is not None:
            chosen[api] = common.max
    return NegotiatedVersions(
        broker=MappingProxyType(dict(broker)),
        chosen=MappingProxyType(chosen),
        supported=supported,
    )


def api_versions_retry_version(response: ResponsePayload, sent_version: int) -> int | None:
    """The ApiVersions version to retry with after ``response``, or None to stop.

    See :func:`kgroup.protocol.requests.api_versions.retry_version`.

    Raises:
        KafkaProtocolError: ``response`` is not an ApiVersions response.
    """
    return api_versions.retry_version(api_versions.narrow(response), sent_version)
