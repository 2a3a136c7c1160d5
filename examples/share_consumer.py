"""A share-group (KIP-932) worker: records shared by every worker, each acknowledged.

    python examples/share_consumer.py BOOTSTRAP TOPIC [GROUP] [--max-records N] [--earliest]

Joins share group GROUP (default ``kgroup-share``) with explicit
acknowledgement: each record whose value is UTF-8 text is printed and
accepted; any other is rejected, so no worker of the group gets it again.
Start several: the broker hands each record to one of them at a time.
``--earliest`` first sets the group's ``share.auto.offset.reset`` to
``earliest`` (a new share group otherwise starts at the end of the log).
Stops after N records, or on Ctrl-C; closing releases what was not acknowledged.
"""

from __future__ import annotations

import argparse
import sys

import anyio

import kgroup
from kgroup.admin.share import set_share_auto_offset_reset
from kgroup.transport import KafkaClient


async def start_at_earliest(bootstrap: str, group: str) -> None:
    """Set the group's share.auto.offset.reset (a group config, set by an admin call)."""
    async with KafkaClient(bootstrap.split(",")) as client:
        await set_share_auto_offset_reset(client, group, "earliest")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group", nargs="?", default="kgroup-share")
    parser.add_argument("--max-records", type=int, default=0, help="stop after N (0: never)")
    parser.add_argument("--earliest", action="store_true", help="start the group at the log start")
    args = parser.parse_args(argv)

    if args.earliest:
        anyio.run(start_at_earliest, args.bootstrap, args.group)
    config = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "share.acknowledgement.mode": "explicit",
    }
    count = 0
    with kgroup.ShareConsumer(config) as consumer:
        consumer.subscribe([args.topic])
        try:
            while not args.max_records or count < args.max_records:
                for record in consumer.consume(100, 1.0):
                    try:
                        text = (record.value() or b"").decode()
                    except UnicodeDecodeError:
                        print(f"rejecting {record.partition()}@{record.offset()}", file=sys.stderr)
                        consumer.acknowledge(record, kgroup.AcknowledgeType.REJECT)
                        continue
                    where = f"{record.partition()}@{record.offset()}"
                    print(f"{where} (delivery {record.delivery_count()}): {text}")
                    consumer.acknowledge(record, kgroup.AcknowledgeType.ACCEPT)
                    count += 1
                    if count == args.max_records:
                        break
        except KeyboardInterrupt:
            pass
    # Leaving the `with` block closed the consumer: owed acknowledgements sent,
    # records not acknowledged (after --max-records) released to the group.
    print(f"consumed {count} records", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
