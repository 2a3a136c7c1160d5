"""Helpers shared by the request-module tests (test_requests.py, test_admin_requests.py)."""

from __future__ import annotations

from typing import Any

from kgroup.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    VersionRange,
    decode_request,
    encode_request,
    negotiate,
)
from kgroup.protocol.negotiation import NegotiatedVersions


def at(api: ApiKey, version: int) -> NegotiatedVersions:
    """Versions negotiated with a broker that supports only ``version`` of ``api``."""
    return negotiate({api: VersionRange(version, version)})


def lowest(api: ApiKey) -> NegotiatedVersions:
    return at(api, SUPPORTED_VERSIONS[api].min)


def highest(api: ApiKey) -> NegotiatedVersions:
    return at(api, SUPPORTED_VERSIONS[api].max)


def wire(request: Any) -> Any:
    """``request`` after a trip through a whole frame, as a broker reads it."""
    sent: Any = decode_request(encode_request(request, 7, "kgroup")).request
    assert sent == request
    return sent
