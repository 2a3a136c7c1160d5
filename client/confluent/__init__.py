"""Drop-ins for ``confluent_kafka.Consumer`` and ``DeserializingConsumer``: change the import.

``from kgroup.confluent import Consumer`` takes confluent-kafka's config dict,
method signatures and callbacks, and returns confluent-kafka's own types
(``confluent_kafka.Message``, lists of ``confluent_kafka.TopicPartition``);
errors are ``confluent_kafka.KafkaException(KafkaError(code))`` with
confluent-kafka's codes. Underneath is the blocking :class:`kgroup.Consumer`:
this package only translates arguments, results, errors and the rebalance
callbacks. ``group.protocol`` defaults to ``classic``, as confluent-kafka's.
What differs is in ``docs/porting-confluent.md``.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from kgroup.confluent._consumer import Consumer, build_config, wants_eof
from kgroup.confluent._deserializing import DeserializingConsumer

__all__ = [
    "Consumer",
    "DeserializingConsumer",
    "KafkaError",
    "KafkaException",
    "Message",
    "TopicPartition",
    "build_config",
    "wants_eof",
]
