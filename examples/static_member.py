"""A static group member: restart it quickly and it gets its partitions back.

    python examples/static_member.py BOOTSTRAP TOPIC INSTANCE_ID [GROUP] [--max-records N]

With ``group.instance.id`` set, closing the consumer leaves the group
*temporarily* (member epoch -2): the broker keeps this member's partitions
for the session timeout (``group.consumer.session.timeout.ms`` on the broker,
45 s by default), and a consumer that joins with the same instance id within
it takes them over with no rebalance — the other members are not disturbed.
Rolling restarts and deployments cost no partition movement.

Run two of these with different instance ids, stop one, start it again
within the session timeout: it prints the same assignment as before.
"""

from __future__ import annotations

import argparse
import sys

import kgroup
from kgroup import TopicPartition


class Listener:
    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        print(f"assigned {sorted(map(str, partitions))}", file=sys.stderr)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        print(f"revoked {sorted(map(str, partitions))}", file=sys.stderr)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("instance_id")
    parser.add_argument("group", nargs="?", default="kgroup-static")
    parser.add_argument("--max-records", type=int, default=0, help="stop after N (0: never)")
    args = parser.parse_args(argv)

    config = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "group.instance.id": args.instance_id,
        "auto.offset.reset": "earliest",
    }
    count = 0
    with kgroup.Consumer(config) as consumer:
        consumer.subscribe([args.topic], Listener())
        try:
            for message in consumer:
                print(f"{message.topic()}-{message.partition()}@{message.offset()}")
                count += 1
                if count == args.max_records:
                    break
        except KeyboardInterrupt:
            pass
        print(
            f"instance {consumer.group_instance_id} (member {consumer.member_id}) "
            f"consumed {count} records; leaving temporarily",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
