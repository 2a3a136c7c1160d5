"""The cluster client as the layers above use it: a typing protocol.

:class:`~kgroup.transport.KafkaClient` is the implementation; the offset
manager and the runtime's driver depend only on :class:`ClusterClient`, so a
test can hand them a wrapped or scripted client (the consumers' ``transport=``
seam).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup.protocol.cluster import BrokerAddress, ClusterMetadata
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.transport.client import RequestBuilder

__all__ = ["ClusterClient", "NodeConnection"]


class NodeConnection(Protocol):
    """A connection to one broker (:class:`~kgroup.transport.BrokerConnection`)."""

    @property
    def versions(self) -> NegotiatedVersions: ...

    async def request(
        self, request: RequestPayload, *, timeout: float | None = None
    ) -> ResponsePayload: ...


class ClusterClient(Protocol):
    """What the upper layers use of :class:`~kgroup.transport.KafkaClient`."""

    @property
    def cluster(self) -> ClusterMetadata: ...

    async def metadata(
        self, topics: Iterable[str] | None = None, *, timeout: float | None = None
    ) -> ClusterMetadata: ...

    def described_at(self, topic: str) -> float | None: ...

    async def coordinator(
        self, group_id: str, *, refresh: bool = False, timeout: float | None = None
    ) -> BrokerAddress: ...

    async def connection(self, node_id: int) -> NodeConnection: ...

    def mark_coordinator_stale(self, group_id: str) -> None: ...

    async def coordinator_request(
        self,
        group_id: str,
        request: RequestPayload | RequestBuilder,
        *,
        timeout: float | None = None,
    ) -> ResponsePayload: ...
