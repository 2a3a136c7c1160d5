"""A share-group worker (KIP-932, "queues for Kafka"), blocking API.

    python examples/share_consumer.py BOOTSTRAP TOPIC [GROUP] [--max-records N]

Every worker started with the same GROUP takes records from TOPIC one batch at
a time, however many partitions it has: start more workers than partitions
and they all get work. Each record is acknowledged on its own: ``ACCEPT`` when
it was processed, ``RELEASE`` to hand it back for another try (to this or
another worker, with ``delivery_count()`` one higher), ``REJECT`` when trying
again is pointless. A record nobody acknowledges in time (the group's
``share.record.lock.duration.ms``, 30 s by default) goes back too.

Here a value containing ``flaky`` fails its first try and succeeds its
second; a value containing ``poison`` is rejected. The group is set to start
from the beginning of the topic (a share group starts at its end by default).
"""

from __future__ import annotations

import argparse
import sys

import anyio

import kgroup
from kgroup.admin.share import set_share_auto_offset_reset
from kgroup.transport.client import KafkaClient


async def start_at_beginning(bootstrap: str, group: str) -> None:
    """A group config, not a consumer setting: set once for the whole group."""
    async with KafkaClient(bootstrap) as client:
        await set_share_auto_offset_reset(client, group, "earliest")


def process(record: kgroup.ShareRecord) -> kgroup.AcknowledgeType:
    """What became of one record: the application's part."""
    value = (record.value() or b"").decode()
    if "poison" in value:
        return kgroup.AcknowledgeType.REJECT
    if "flaky" in value and record.delivery_count() == 1:
        return kgroup.AcknowledgeType.RELEASE
    return kgroup.AcknowledgeType.ACCEPT


def work(bootstrap: str, topic: str, group: str, max_records: int) -> int:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        # Every record acknowledged by the application (the default, implicit,
        # accepts a batch when the next consume() is called).
        "share.acknowledgement.mode": "explicit",
    }
    done = 0
    with kgroup.ShareConsumer(config) as consumer:
        consumer.subscribe([topic])
        while max_records == 0 or done < max_records:
            for record in consumer.consume(num_messages=100, timeout=1.0):
                outcome = process(record)
                consumer.acknowledge(record, outcome)
                print(
                    f"{record.topic()}-{record.partition()}@{record.offset()} "
                    f"try {record.delivery_count()}: {outcome.name}"
                )
                if outcome is not kgroup.AcknowledgeType.RELEASE:
                    done += 1
            # Send the acknowledgements now and learn whether they held: a
            # partition whose result is an error was not acknowledged (its
            # lock had run out, say) and its records come back.
            for partition, error in consumer.commit().items():
                if error is not None:
                    print(f"acknowledgement failed for {partition}: {error}", file=sys.stderr)
    return done


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group", nargs="?", default="kgroup-share")
    parser.add_argument("--max-records", type=int, default=0, help="stop after N (0: never)")
    args = parser.parse_args(argv)
    anyio.run(start_at_beginning, args.bootstrap, args.group)
    try:
        done = work(args.bootstrap, args.topic, args.group, args.max_records)
    except KeyboardInterrupt:
        return 130
    print(f"settled {done} records", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
