"""An in-process fake Kafka cluster and data plane, for runtime tests: ``kgroup.testing.fake``.

:class:`FakeBroker` speaks the real wire protocol (kio codecs) on 127.0.0.1
and answers the metadata, coordinator, group (both protocols) and offset APIs
from the group model the simulator runs too (:mod:`kgroup.testing.groups`);
a test can intercept any request to answer it itself, fail it, delay it,
drop the connection, or never answer.
:class:`FakeDataPlane` replaces librdkafka with per-partition record lists.
Together they run the real consumers, runtime and membership machines without
a JVM, on asyncio and trio, in milliseconds::

    async with FakeBroker() as broker:
        broker.create_topic("orders", 3)
        broker.produce("orders", 0, b"hello")
        config = {"bootstrap.servers": broker.bootstrap_servers, "group.id": "g"}
        async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
            consumer.subscribe(["orders"])
            record = await consumer.poll(5.0)

A model, not a broker: it is for testing the client's behaviour, never for
claims about Kafka's (those need :mod:`kgroup.testing`'s real brokers).
See ``docs/testing.md``.
"""

from kgroup.testing.fake._classic_group import ClassicGroup, ClassicState
from kgroup.testing.fake._consumer_group import ConsumerGroup, ConsumerMember
from kgroup.testing.fake._topics import FakeTopic
from kgroup.testing.fake.broker import (
    FakeBroker,
    Handler,
    HandlerResult,
    Interception,
    SeenRequest,
    Verdict,
)
from kgroup.testing.fake.dataplane import DataPlaneCall, FakeDataPlane, RecordLog

__all__ = [
    "ClassicGroup",
    "ClassicState",
    "ConsumerGroup",
    "ConsumerMember",
    "DataPlaneCall",
    "FakeBroker",
    "FakeDataPlane",
    "FakeTopic",
    "Handler",
    "HandlerResult",
    "Interception",
    "RecordLog",
    "SeenRequest",
    "Verdict",
]
