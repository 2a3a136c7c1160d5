"""kgroup end to end on an embedded broker.

Starts a real Apache Kafka broker (kgroup.testing; the first run resolves its
jars from Maven Central and caches them), creates a topic, produces records,
talks to the broker with kgroup's own wire layer (API versions, topic ids, the
group coordinator), reads the records back through kgroup's data plane, and
stops the broker.

    python examples/wire_tour.py [BOOTSTRAP]

Give BOOTSTRAP (or set ``KAFKA_BOOTSTRAP_SERVERS``) to run it against a broker
you already have; it creates a fresh topic there either way.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

import anyio
from confluent_kafka import Producer

from kgroup.config import ConsumerConfig
from kgroup.dataplane import DataPlane
from kgroup.protocol import ApiKey
from kgroup.testing import broker_from_env, create_topic
from kgroup.transport import KafkaClient
from kgroup.types import TopicPartition

PARTITIONS = 3
RECORDS = 30


def say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, key=str(i % PARTITIONS), value=f"record {i}".encode())
    if producer.flush(30) != 0:
        raise SystemExit("some records were not delivered within 30 s")


async def inspect(bootstrap: str, topic: str, group: str) -> None:
    """Talk to the broker with kgroup's own protocol and transport layers."""
    async with KafkaClient(bootstrap, client_id="kgroup-demo") as client:
        meta = await client.metadata([topic])
        node = next(iter(meta.brokers))
        versions = await client.versions(node)
        heartbeat = versions.version(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        say(f"negotiated ConsumerGroupHeartbeat v{heartbeat} (KIP-848) with broker {node}")
        say(
            f"topic {topic} has id {meta.topic_id(topic)}, {meta.partition_count(topic)} partitions"
        )
        coordinator = await client.coordinator(group)
        say(f"group {group} is coordinated by broker {coordinator.node_id} ({coordinator})")


def read_back(bootstrap: str, topic: str, group: str) -> list[str]:
    config = ConsumerConfig.from_dict(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    plane = DataPlane(config)
    try:
        plane.assign({TopicPartition(topic, p): None for p in range(PARTITIONS)})
        values: list[str] = []
        deadline = time.monotonic() + 30
        while len(values) < RECORDS and time.monotonic() < deadline:
            values.extend((m.value() or b"").decode() for m in plane.consume(100, 1.0))
        return values
    finally:
        plane.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description="kgroup's wire layer and data plane, request by request, on a real broker."
    )
    parser.add_argument(
        "bootstrap",
        nargs="?",
        help="a broker you have (default: $KAFKA_BOOTSTRAP_SERVERS, else an embedded one)",
    )
    args = parser.parse_args()
    if args.bootstrap:
        # broker_from_env's external backend: use that broker, start none.
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = args.bootstrap
    topic = f"demo-{uuid.uuid4().hex[:8]}"
    group = f"demo-group-{uuid.uuid4().hex[:8]}"
    embedded = not os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if embedded:
        say("starting the embedded broker (the first run downloads Kafka's jars)")
    started = time.monotonic()
    with broker_from_env() as broker:
        bootstrap = broker.bootstrap_servers
        say(f"broker ready at {bootstrap} in {time.monotonic() - started:.1f} s")
        create_topic(bootstrap, topic, partitions=PARTITIONS)
        say(f"created topic {topic} with {PARTITIONS} partitions")
        produce(bootstrap, topic)
        say(f"produced {RECORDS} records")
        anyio.run(inspect, bootstrap, topic, group)
        values = read_back(bootstrap, topic, group)
        say(f"read back {len(values)} records through kgroup's data plane")
        if sorted(values) != sorted(f"record {i}" for i in range(RECORDS)):
            say("MISMATCH: the records read back are not the records produced")
            return 1
        if embedded:
            say("stopping the broker")
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
