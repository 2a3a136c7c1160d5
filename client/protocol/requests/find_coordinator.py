"""FindCoordinator (batched form, v4+): which broker coordinates a consumer group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeAlias

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8
from kio.static.protocol import RequestPayload

from kgroup.errors import broker_error
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.cluster import BrokerAddress
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow

__all__ = ["GROUP_KEY_TYPE", "Response", "build", "narrow", "parse"]

API = ApiKey.FIND_COORDINATOR

GROUP_KEY_TYPE: Final = i8(0)
"""FindCoordinator's key type of a consumer group (1 is a transaction)."""

if TYPE_CHECKING:
    import kio.schema.find_coordinator.v4.response as v4
    import kio.schema.find_coordinator.v5.response as v5
    import kio.schema.find_coordinator.v6.response as v6

    Response: TypeAlias = (
        v4.FindCoordinatorResponse | v5.FindCoordinatorResponse | v6.FindCoordinatorResponse
    )
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(versions: NegotiatedVersions, group_id: str) -> RequestPayload:
    """The coordinator lookup of group ``group_id``."""
    return versions.new_request(API, key_type=GROUP_KEY_TYPE, coordinator_keys=(group_id,))


def parse(response: Response, group_id: str) -> BrokerAddress:
    """The coordinator of ``group_id`` named in ``response``.

    Raises:
        BrokerError: the group's error (retriable ones such as
            COORDINATOR_NOT_AVAILABLE included: the caller decides to retry), or
            INVALID_REQUEST when the response skipped the group.
    """
    entry = next((c for c in response.coordinators if c.key == group_id), None)
    if entry is None:
        raise broker_error(ErrorCode.invalid_request, "FindCoordinator skipped the group")
    if entry.error_code != ErrorCode.none:
        raise broker_error(entry.error_code, entry.error_message)
    return BrokerAddress(int(entry.node_id), entry.host, int(entry.port))
