"""kgroup: Kafka consumer groups for Python.

The new consumer group protocol (KIP-848) natively, the classic protocol, and
pluggable Python assignors, on asyncio, trio and plain threads.
"""

from kgroup.errors import (
    BrokerError,
    ConfigError,
    KafkaConnectionError,
    KafkaProtocolError,
    KgroupError,
    RequestTimeoutError,
    TransportError,
)
from kgroup.types import TopicIdPartition, TopicPartition

__version__ = "0.1.0"

__all__ = [
    "BrokerError",
    "ConfigError",
    "KafkaConnectionError",
    "KafkaProtocolError",
    "KgroupError",
    "RequestTimeoutError",
    "TopicIdPartition",
    "TopicPartition",
    "TransportError",
    "__version__",
]
