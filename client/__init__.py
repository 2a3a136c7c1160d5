"""kgroup: Kafka consumer groups for Python.

The new consumer group protocol (KIP-848) natively, the classic protocol, and
pluggable Python assignors, on asyncio, trio and plain threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# First: it imports kio's phantom types with Hypothesis hidden (see the module).
from kgroup import _kio_import  # noqa: F401
from kgroup._lazy import lazy_attributes
from kgroup._version import __version__
from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.errors import (
    AlreadyAssignedError,
    BrokerError,
    CommitFailedError,
    ConfigError,
    ConsumerClosedError,
    DeserializationError,
    InvalidAcknowledgementError,
    InvalidSubscriptionError,
    KafkaConnectionError,
    KafkaProtocolError,
    KeyDeserializationError,
    KgroupError,
    LogTruncationError,
    MixedAssignmentError,
    NotAssignedError,
    NothingToCommitError,
    RequestTimeoutError,
    TransportError,
    UnacknowledgedRecordsError,
    ValueDeserializationError,
    WakeupError,
)
from kgroup.listener import RebalanceListener
from kgroup.types import OffsetAndMetadata, TopicIdPartition, TopicPartition

if TYPE_CHECKING:
    from kgroup.aio import AsyncConsumer
    from kgroup.dataplane.share.acknowledgements import AcknowledgeType
    from kgroup.dataplane.share.records import ShareRecord
    from kgroup.share.consumer import AsyncShareConsumer, ShareConsumer
    from kgroup.sync import Consumer

# The consumers pull in anyio and confluent-kafka; loaded on first use so that
# importing a lower layer (kgroup.protocol, kgroup.membership) stays light.
_LAZY = {
    "AsyncConsumer": "kgroup.aio",
    "Consumer": "kgroup.sync",
    "AcknowledgeType": "kgroup.dataplane.share.acknowledgements",
    "AsyncShareConsumer": "kgroup.share.consumer",
    "ShareConsumer": "kgroup.share.consumer",
    "ShareRecord": "kgroup.dataplane.share.records",
}


__getattr__ = lazy_attributes(globals(), _LAZY)


__all__ = [
    "AcknowledgeType",
    "AlreadyAssignedError",
    "AsyncConsumer",
    "AsyncShareConsumer",
    "BrokerError",
    "CommitFailedError",
    "ConfigError",
    "Consumer",
    "ConsumerClosedError",
    "ConsumerConfig",
    "DeserializationError",
    "GroupProtocol",
    "InvalidAcknowledgementError",
    "InvalidSubscriptionError",
    "KafkaConnectionError",
    "KafkaProtocolError",
    "KeyDeserializationError",
    "KgroupError",
    "LogTruncationError",
    "MixedAssignmentError",
    "NotAssignedError",
    "NothingToCommitError",
    "OffsetAndMetadata",
    "RebalanceListener",
    "RequestTimeoutError",
    "ShareConsumer",
    "ShareRecord",
    "TopicIdPartition",
    "TopicPartition",
    "TransportError",
    "UnacknowledgedRecordsError",
    "ValueDeserializationError",
    "WakeupError",
    "__version__",
]
