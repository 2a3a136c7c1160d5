"""What kgroup knows about the cluster: brokers, topics, partitions, leaders.

Immutable snapshots built from Metadata responses; the client replaces its
snapshot with a merged one on every refresh.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.constants import uuid_zero
from kio.static.protocol import ResponsePayload

from kgroup.errors import KafkaProtocolError
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.errors import raise_for_error
from kgroup.types import TopicPartition

__all__ = ["BrokerAddress", "ClusterMetadata", "PartitionInfo", "TopicInfo"]


def _frozen_map(data: Mapping[Any, Any] | None = None) -> Mapping[Any, Any]:
    return MappingProxyType(dict(data or {}))


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """A broker: its node id and where to reach it."""

    node_id: int
    host: str
    port: int
    rack: str | None = None

    def __str__(self) -> str:
        return f"node {self.node_id} ({self.host}:{self.port})"


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition of a topic as the last metadata described it."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic: its name, id and partitions (by index)."""

    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionInfo]
    is_internal: bool = False

    @property
    def partition_count(self) -> int:
        """How many partitions the topic has."""
        return len(self.partitions)


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    """A snapshot of cluster metadata.

    Attributes:
        brokers: every live broker by node id.
        topics: topics by name (only those described without error).
        topic_errors: error code by topic name for topics the broker could not
            describe (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED ...).
        cluster_id: the cluster's id, if the broker sent it.
        controller_id: the node id the broker reports as controller (-1 unknown).
    """

    brokers: Mapping[int, BrokerAddress] = field(default_factory=_frozen_map)
    topics: Mapping[str, TopicInfo] = field(default_factory=_frozen_map)
    topic_errors: Mapping[str, int] = field(default_factory=_frozen_map)
    cluster_id: str | None = None
    controller_id: int = -1

    def topic_id(self, name: str) -> uuid.UUID:
        """The id of topic ``name``. Raises KeyError if unknown."""
        return self.topics[name].topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str:
        """The name of the topic with id ``topic_id``. Raises KeyError if unknown."""
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic.name
        raise KeyError(topic_id)

    def partition_count(self, name: str) -> int:
        """How many partitions topic ``name`` has. Raises KeyError if unknown."""
        return self.topics[name].partition_count

    def leader(self, partition: TopicPartition) -> BrokerAddress | None:
        """The leader of ``partition``, or None while it has none or is unknown."""
        topic = self.topics.get(partition.topic)
        info = topic.partitions.get(partition.partition) if topic is not None else None
        if info is None:
            return None
        return self.brokers.get(info.leader)

    @classmethod
    def from_response(cls, response: ResponsePayload) -> ClusterMetadata:
        """Build a snapshot from a Metadata response (v10 or later).

        Raises:
            KafkaProtocolError: not a Metadata response.
            BrokerError: the response's top-level error (v13+: REBOOTSTRAP_REQUIRED ...).
        """
        if int(response.__api_key__) != ApiKey.METADATA:
            raise KafkaProtocolError(f"expected a Metadata response, got {type(response)}")
        body: Any = response
        raise_for_error(getattr(body, "error_code", ErrorCode.none))
        brokers = {
            int(b.node_id): BrokerAddress(int(b.node_id), b.host, int(b.port), b.rack)
            for b in body.brokers
        }
        topics: dict[str, TopicInfo] = {}
        errors: dict[str, int] = {}
        for t in body.topics:
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
                partitions=_frozen_map(partitions),
                is_internal=bool(t.is_internal),
            )
        return cls(
            brokers=_frozen_map(brokers),
            topics=_frozen_map(topics),
            topic_errors=_frozen_map(errors),
            cluster_id=body.cluster_id,
            controller_id=int(body.controller_id),
        )

    def merge(self, newer: ClusterMetadata, *, all_topics: bool) -> ClusterMetadata:
        """This snapshot updated by ``newer``.

        Brokers, cluster and controller come from ``newer``. With ``all_topics``
        (``newer`` described every topic) its topics replace ours; otherwise only
        the topics it names are updated and the rest are kept.
        """
        if all_topics:
            topics = dict(newer.topics)
            errors = dict(newer.topic_errors)
        else:
            topics = {n: t for n, t in self.topics.items() if n not in newer.topic_errors}
            topics.update(newer.topics)
            errors = {n: c for n, c in self.topic_errors.items() if n not in newer.topics}
            errors.update(newer.topic_errors)
        return ClusterMetadata(
            brokers=newer.brokers,
            topics=_frozen_map(topics),
            topic_errors=_frozen_map(errors),
            cluster_id=newer.cluster_id,
            controller_id=newer.controller_id,
        )
