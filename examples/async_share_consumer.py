"""A share-group worker on asyncio or trio.

    python examples/async_share_consumer.py BOOTSTRAP TOPIC [GROUP]
        [--backend trio] [--max-records N]

The same worker as ``share_consumer.py`` with ``await``, in implicit
acknowledgement mode (the default): each ``consume()`` accepts every record
the previous one returned, so a record counts as done once the loop comes
back for more, and one the loop never finished (the process died) goes to
another worker when its lock runs out. Releasing or rejecting single records
takes explicit mode (``share_consumer.py``). Heartbeats and fetches run in the
consumer's own tasks: a slow ``await`` in the loop body holds up neither.
"""

from __future__ import annotations

import argparse
import sys

import anyio

import kgroup
from kgroup.admin.share import set_share_auto_offset_reset
from kgroup.transport.client import KafkaClient


async def work(bootstrap: str, topic: str, group: str, max_records: int) -> int:
    async with KafkaClient(bootstrap) as client:
        # A group config, not a consumer setting: where a new share group starts.
        await set_share_auto_offset_reset(client, group, "earliest")
    config = {"bootstrap.servers": bootstrap, "group.id": group}
    done = 0
    async with kgroup.AsyncShareConsumer(config) as consumer:
        await consumer.subscribe([topic])
        while max_records == 0 or done < max_records:
            # Never more than --max-records: records not taken stay with the group.
            wanted = 100 if max_records == 0 else min(100, max_records - done)
            for record in await consumer.consume(num_messages=wanted, timeout=1.0):
                value = (record.value() or b"").decode()
                print(f"{record.topic()}-{record.partition()}@{record.offset()}: {value}")
                done += 1
        # Closing accepts the last batch and leaves the group.
    return done


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group", nargs="?", default="kgroup-share-async")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--max-records", type=int, default=0, help="stop after N (0: never)")
    args = parser.parse_args(argv)
    try:
        done = anyio.run(
            work, args.bootstrap, args.topic, args.group, args.max_records, backend=args.backend
        )
    except KeyboardInterrupt:
        return 130
    print(f"settled {done} records on {args.backend}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
