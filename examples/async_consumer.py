"""An async kgroup consumer, on asyncio or trio.

    python examples/async_consumer.py BOOTSTRAP TOPIC [GROUP] [--backend trio] [--max-records N]

The same consumer as ``basic_consumer.py`` with ``await`` and ``async for``.
Heartbeats run in the consumer's own task, so a slow ``await`` in the loop
body does not stall the group; the rebalance listener's methods may be
coroutines and run inside the loop, between records.
"""

from __future__ import annotations

import argparse
import sys

import anyio

import kgroup
from kgroup import TopicPartition
from kgroup.errors import NoBrokersAvailableError


class Listener:
    """Async listener methods run inside the ``async for``, never alongside a record."""

    async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        print(f"assigned {sorted(map(str, partitions))}", file=sys.stderr)

    async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        print(f"revoked {sorted(map(str, partitions))}", file=sys.stderr)


async def consume(bootstrap: str, topic: str, group: str, max_records: int) -> int:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    count = 0
    async with kgroup.AsyncConsumer(config) as consumer:
        consumer.subscribe([topic], Listener())
        async for message in consumer:
            print(
                f"{message.topic()}-{message.partition()}@{message.offset()}: {message.value()!r}"
            )
            count += 1
            if count == max_records:
                break
    return count


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group", nargs="?", default="kgroup-async")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--max-records", type=int, default=0, help="stop after N (0: never)")
    args = parser.parse_args(argv)
    try:
        count = anyio.run(
            consume, args.bootstrap, args.topic, args.group, args.max_records, backend=args.backend
        )
    except KeyboardInterrupt:
        return 130
    except NoBrokersAvailableError as error:
        # Iteration raises it once when no bootstrap server answered; this
        # example stops there (a service would catch it in a poll loop and wait).
        print(f"{error}", file=sys.stderr)
        return 1
    print(f"consumed {count} records on {args.backend}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
