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

Share groups (KIP-932) are answered too: ShareGroupHeartbeat and
ShareGroupDescribe from a share-group model (client-generated member ids,
epochs, the simple assignor's outcome, session timeouts), ShareFetch and
ShareAcknowledge from share partitions over the same record log (share
sessions, acquisition locks with delivery counts and a delivery limit,
ACCEPT / RELEASE / REJECT / GAP / RENEW), and IncrementalAlterConfigs on the
GROUP resource for ``share.auto.offset.reset`` and the lock duration. Read
them with :meth:`FakeBroker.share_group`, :meth:`FakeBroker.share_partition`
and :meth:`FakeBroker.share_sessions`; steer them with
:meth:`FakeBroker.set_share_group_config` (any lock duration, for tests),
:meth:`FakeBroker.expire_acquisition_locks` and
:meth:`FakeBroker.remove_member`.

A model, not a broker: it is for testing the client's behaviour, never for
claims about Kafka's (those need :mod:`kgroup.testing`'s real brokers).
See ``docs/testing.md``.
"""

from kgroup.testing.fake._classic_group import ClassicGroup, ClassicState
from kgroup.testing.fake._consumer_group import ConsumerGroup, ConsumerMember
from kgroup.testing.fake._share_data import (
    RecordState,
    ShareGroupConfig,
    SharePartitionView,
    ShareRecordState,
    ShareSessionView,
)
from kgroup.testing.fake._share_group import ShareGroup, ShareMemberView
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
    "RecordState",
    "SeenRequest",
    "ShareGroup",
    "ShareGroupConfig",
    "ShareMemberView",
    "SharePartitionView",
    "ShareRecordState",
    "ShareSessionView",
    "Verdict",
]
