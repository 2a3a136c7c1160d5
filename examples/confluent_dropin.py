"""A confluent-kafka application on kgroup: the one changed line is the import.

    python examples/confluent_dropin.py BOOTSTRAP TOPIC [GROUP] [--protocol P] [--max-records N]

Written as a confluent-kafka application is (a config dict, ``subscribe`` with
``on_assign``/``on_revoke`` callbacks, a ``poll()`` loop reading
``msg.error()``, synchronous commits, ``KafkaException``); only the import
comes from ``kgroup.confluent``. ``--protocol consumer`` joins with KIP-848.
"""

from __future__ import annotations

import argparse
import sys

from kgroup.confluent import Consumer, KafkaException, TopicPartition


def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
    print(f"assigned {[(tp.topic, tp.partition) for tp in partitions]}", file=sys.stderr)


def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
    if partitions:
        try:
            consumer.commit(asynchronous=False)  # still owned: the commit is accepted
        except KafkaException as exc:
            print(f"commit on revoke: {exc.args[0].str()}", file=sys.stderr)
    print(f"revoked {[(tp.topic, tp.partition) for tp in partitions]}", file=sys.stderr)


def consume(bootstrap: str, topic: str, group: str, protocol: str, max_records: int) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,  # confluent-kafka's key; classic when left out
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    count = 0
    try:
        while max_records == 0 or count < max_records:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            value = msg.value()
            print(f"{msg.topic()}-{msg.partition()}@{msg.offset()}: {value!r}")
            count += 1
            consumer.commit(message=msg, asynchronous=False)
    finally:
        consumer.close()
    print(f"consumed {count} records", file=sys.stderr)
    return count


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group", nargs="?", default="kgroup-confluent-dropin")
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    parser.add_argument("--max-records", type=int, default=0, help="stop after N (0: never)")
    args = parser.parse_args(argv)
    try:
        consume(args.bootstrap, args.topic, args.group, args.protocol, args.max_records)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
