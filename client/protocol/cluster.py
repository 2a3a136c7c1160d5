"""What kgroup knows about the cluster: brokers, topics, partitions, leaders.

Immutable snapshots: :func:`kgroup.protocol.requests.metadata.parse` builds one
from a Metadata response, FindCoordinator answers a :class:`BrokerAddress`, and
the transport's client replaces its snapshot with a merged one on every refresh.
Plain values, no kio: they are what the rest of kgroup reads.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kgroup.types import TopicPartition

__all__ = ["BrokerAddress", "ClusterMetadata", "PartitionInfo", "TopicInfo", "frozen_map"]


def frozen_map(data: Mapping[Any, Any] | None = None) -> Mapping[Any, Any]:
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

    brokers: Mapping[int, BrokerAddress] = field(default_factory=frozen_map)
    topics: Mapping[str, TopicInfo] = field(default_factory=frozen_map)
    topic_errors: Mapping[str, int] = field(default_factory=frozen_map)
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
            topics=frozen_map(topics),
            topic_errors=frozen_map(errors),
            cluster_id=newer.cluster_id,
            controller_id=newer.controller_id,
        )
