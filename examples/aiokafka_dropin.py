"""An aiokafka application on kgroup: the one changed line is the import.

    python examples/aiokafka_dropin.py BOOTSTRAP TOPIC [GROUP] [--protocol P] [--max-records N]

Written as an aiokafka application is (``asyncio.run``, ``AIOKafkaConsumer``,
``getmany``, a ``ConsumerRebalanceListener``, manual commits); only the import
comes from ``kgroup.aiokafka``. ``--protocol consumer`` joins with KIP-848,
which aiokafka itself cannot.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from kgroup.aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition


class Listener(ConsumerRebalanceListener):
    """As on aiokafka: revoked gets everything owned before, assigned everything owned after."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if revoked:
            await self.consumer.commit()  # still owned: the commit is accepted
        print(f"revoked {sorted(revoked)}", file=sys.stderr)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        print(f"assigned {sorted(assigned)}", file=sys.stderr)


async def consume(bootstrap: str, topic: str, group: str, protocol: str, max_records: int) -> int:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        group_protocol=protocol,  # the one keyword aiokafka does not have: optional
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        value_deserializer=lambda value: value.decode() if value is not None else None,
    )
    consumer.subscribe(topics=[topic], listener=Listener(consumer))
    await consumer.start()
    count = 0
    try:
        while max_records == 0 or count < max_records:
            # Never more than --max-records: what is left stays uncommitted for the next run.
            wanted = 100 if max_records == 0 else min(100, max_records - count)
            batches = await consumer.getmany(timeout_ms=1000, max_records=wanted)
            for tp, records in batches.items():
                for record in records:
                    print(f"{tp.topic}-{tp.partition}@{record.offset}: {record.value!r}")
                    count += 1
            if batches:
                await consumer.commit()
    finally:
        await consumer.stop()
    print(f"consumed {count} records", file=sys.stderr)
    return count


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group", nargs="?", default="kgroup-aiokafka-dropin")
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    parser.add_argument("--max-records", type=int, default=0, help="stop after N (0: never)")
    args = parser.parse_args(argv)
    try:
        asyncio.run(
            consume(args.bootstrap, args.topic, args.group, args.protocol, args.max_records)
        )
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
