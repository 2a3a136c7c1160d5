"""ApiVersions: the first request on every connection; its answer drives negotiation.

Unlike the other request modules, :func:`build` takes a version number rather
than negotiated versions: this is the request versions are negotiated from. A
broker that does not know the version sent answers in v0's shape with
UNSUPPORTED_VERSION; :func:`retry_version` says what to try next.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload

from kgroup.protocol import apis
from kgroup.protocol.apis import SUPPORTED_VERSIONS, ApiKey, VersionRange
from kgroup.protocol.requests._common import Narrow

__all__ = ["build", "narrow", "parse", "retry_version"]

if TYPE_CHECKING:
    import kio.schema.api_versions.v0.response as v0
    import kio.schema.api_versions.v1.response as v1
    import kio.schema.api_versions.v2.response as v2
    import kio.schema.api_versions.v3.response as v3
    import kio.schema.api_versions.v4.response as v4

    Response: TypeAlias = (
        v0.ApiVersionsResponse
        | v1.ApiVersionsResponse
        | v2.ApiVersionsResponse
        | v3.ApiVersionsResponse
        | v4.ApiVersionsResponse
    )
narrow: Final[Narrow[Response]] = Narrow(ApiKey.API_VERSIONS)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""

# What brokers accept as ClientSoftwareName / ClientSoftwareVersion (KIP-511).
_SOFTWARE_FIELD = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def build(
    version: int, software_name: str = "kgroup", software_version: str = "0"
) -> RequestPayload:
    """An ApiVersions request of ``version``; v3+ carry the client's software name and version.

    Raises:
        ValueError: a software field has characters brokers reject.
    """
    cls: Any = apis.request_class(ApiKey.API_VERSIONS, version)
    if version < 3:
        request: RequestPayload = cls()
        return request
    for value in (software_name, software_version):
        if not _SOFTWARE_FIELD.fullmatch(value):
            raise ValueError(f"brokers reject {value!r} as client software name or version")
    request = cls(client_software_name=software_name, client_software_version=software_version)
    return request


def parse(response: Response) -> dict[int, VersionRange]:
    """The version range of every API the broker lists."""
    ranges: dict[int, VersionRange] = {}
    for entry in response.api_keys:
        # A broker never sends an empty range; skip one rather than fail the connection.
        if 0 <= entry.min_version <= entry.max_version:
            ranges[int(entry.api_key)] = VersionRange(
                int(entry.min_version), int(entry.max_version)
            )
    return ranges


def retry_version(response: Response, sent_version: int) -> int | None:
    """The ApiVersions version to retry with after ``response``, or None to stop.

    A broker that does not know the version sent answers UNSUPPORTED_VERSION and
    (usually) its own ApiVersions range; retry with the highest version both
    support, or with v0, as Kafka's clients do.
    """
    if response.error_code != ErrorCode.unsupported_version or sent_version == 0:
        return None
    theirs = parse(response).get(ApiKey.API_VERSIONS)
    ours = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
    common = ours.intersect(theirs) if theirs is not None else None
    if common is not None and common.max < sent_version:
        return common.max
    return 0
