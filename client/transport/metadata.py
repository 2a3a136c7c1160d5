"""The cluster metadata values, re-exported where the transport always offered them.

They live in :mod:`kgroup.protocol.cluster` since the Metadata and
FindCoordinator parsers (:mod:`kgroup.protocol.requests`) build them, and the
protocol layer must not import the transport.
"""

from kgroup.protocol.cluster import BrokerAddress, ClusterMetadata, PartitionInfo, TopicInfo

__all__ = ["BrokerAddress", "ClusterMetadata", "PartitionInfo", "TopicInfo"]
