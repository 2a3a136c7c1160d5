"""The smallest useful kgroup consumer: a blocking loop on the new protocol.

    python examples/basic_consumer.py BOOTSTRAP TOPIC [GROUP] [--max-records N]

Joins GROUP (default ``kgroup-basic``) with the new consumer group protocol
(KIP-848), prints each record's value as UTF-8 text, and lets auto-commit
(every 5 s, before a revocation and on close) record its progress. A record
that is not UTF-8 is reported and skipped (the consumer stops at it until
told to skip). Stops after N records, or on Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys

from confluent_kafka.serialization import StringDeserializer

import kgroup
from kgroup.errors import DeserializationError, NoBrokersAvailableError


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
        "value.deserializer": StringDeserializer("utf_8"),
    }
    count = 0
    with kgroup.Consumer(config) as consumer:
        consumer.subscribe([args.topic])
        try:
            while not args.max_records or count < args.max_records:
                try:
                    message = consumer.poll(1.0)
                except NoBrokersAvailableError as error:
                    # Raised once when no bootstrap server answered (a wrong
                    # address, a cluster still starting); the consumer keeps trying.
                    print(f"{error}; still trying (Ctrl-C to stop)", file=sys.stderr)
                    continue
                except DeserializationError as error:
                    # The consumer stays at the record (no commit passes it)
                    # until the application decides: here, report and skip it.
                    print(f"skipping {error}", file=sys.stderr)
                    consumer.seek(error.topic_partition, error.offset + 1)
                    continue
                if message is None:
                    continue
                # Counted before it is printed: a Ctrl-C in between still counts it.
                count += 1
                print(f"{message.partition()}@{message.offset()}: {message.value()!r}")
        except KeyboardInterrupt:
            pass
    # Leaving the `with` block closed the consumer: final commit, then leave.
    print(f"consumed {count} records", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
