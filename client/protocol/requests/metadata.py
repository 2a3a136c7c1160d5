"""Metadata (v10+, topic ids): brokers, topics and partitions as a :class:`ClusterMetadata`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from kio.schema.errors import ErrorCode
from kio.static.constants import uuid_zero
from kio.static.protocol import RequestPayload

from kgroup.errors import raise_for_error
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.cluster import (
    BrokerAddress,
    ClusterMetadata,
    PartitionInfo,
    TopicInfo,
    frozen_map,
)
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests._common import Narrow

__all__ = ["build", "narrow", "parse"]

API = ApiKey.METADATA

if TYPE_CHECKING:
    import kio.schema.metadata.v10.response as v10
    import kio.schema.metadata.v11.response as v11
    import kio.schema.metadata.v12.response as v12
    import kio.schema.metadata.v13.response as v13

    Response: TypeAlias = (
        v10.MetadataResponse | v11.MetadataResponse | v12.MetadataResponse | v13.MetadataResponse
    )
narrow: Final[Narrow[Response]] = Narrow(API)
"""``payload`` as a response of this API (:class:`~kgroup.protocol.requests._common.Narrow`)."""


def build(versions: NegotiatedVersions, topics: Sequence[str] | None) -> RequestPayload:
    """A description of ``topics`` (None: every topic; ``()``: brokers only).

    Topics are never auto-created and no authorized operations are asked for.
    """
    module: Any = versions.request_module(API)
    fields: dict[str, Any] = {
        "topics": None
        if topics is None
        else tuple(module.MetadataRequestTopic(topic_id=None, name=n) for n in topics),
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    # v11 dropped the cluster-wide flag.
    if versions.version(API) <= 10:
        fields["include_cluster_authorized_operations"] = False
    return versions.new_request(API, **fields)


def parse(response: Response) -> ClusterMetadata:
    """A snapshot of what ``response`` describes; failed topics in ``topic_errors``.

    Raises:
        BrokerError: the response's top-level error (v13+: REBOOTSTRAP_REQUIRED ...).
    """
    raise_for_error(getattr(response, "error_code", ErrorCode.none))
    brokers = {
        int(b.node_id): BrokerAddress(int(b.node_id), b.host, int(b.port), b.rack)
        for b in response.brokers
    }
    topics: dict[str, TopicInfo] = {}
    errors: dict[str, int] = {}
    for t in response.topics:
        name = t.name
        if name is None:
            continue
        if t.error_code != ErrorCode.none:
            errors[name] = int(t.error_code)
            continue
        partitions = {
            int(p.partition_index): PartitionInfo(
                partition=int(p.partition_index),
                leader=int(p.leader_id),
                leader_epoch=int(p.leader_epoch),
                replicas=tuple(int(n) for n in p.replica_nodes),
                isr=tuple(int(n) for n in p.isr_nodes),
                error_code=int(p.error_code),
            )
            for p in t.partitions
        }
        topics[name] = TopicInfo(
            name=name,
            topic_id=t.topic_id if t.topic_id is not None else uuid_zero,
            partitions=frozen_map(partitions),
            is_internal=bool(t.is_internal),
        )
    return ClusterMetadata(
        brokers=frozen_map(brokers),
        topics=frozen_map(topics),
        topic_errors=frozen_map(errors),
        cluster_id=response.cluster_id,
        controller_id=int(response.controller_id),
    )
