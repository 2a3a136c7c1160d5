"""The smallest useful kgroup consumer: a blocking loop on the new protocol.

    python examples/basic_consumer.py BOOTSTRAP TOPIC [GROUP] [--max-records N]

Joins GROUP (default ``kgroup-basic``) with the new consumer group protocol
(KIP-848), prints each record, and lets auto-commit (every 5 s, before a
revocation and on close) record its progress. Stops after N records, or on
Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys

import kgroup


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group", nargs="?", default="kgroup-basic")
    parser.add_argument("--max-records", type=int, default=0, help="stop after N (0: never)")
    args = parser.parse_args(argv)

    config = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
    }
    count = 0
    with kgroup.Consumer(config) as consumer:
        consumer.subscribe([args.topic])
        try:
            for message in consumer:
                print(f"{message.partition()}@{message.offset()}: {message.value()!r}")
                count += 1
                if count == args.max_records:
                    break
        except KeyboardInterrupt:
            pass
    # Leaving the `with` block closed the consumer: final commit, then leave.
    print(f"consumed {count} records", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
