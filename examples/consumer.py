"""Consume a topic in a consumer group, with a rebalance listener that commits on revoke.

    python examples/consumer.py BOOTSTRAP TOPIC [GROUP] [--max-records N]

or with ``KAFKA_BOOTSTRAP_SERVERS`` / ``KAFKA_TOPIC`` / ``KAFKA_GROUP`` in the
environment. Start it several times with the same group to watch partitions
move between the members (each prints its epoch and assignment); stop one with
Ctrl-C and the others take its partitions over, resuming after its commits.

Auto-commit is off here to show manual commits: records are committed after
they are processed, every ``COMMIT_EVERY`` records and in
``on_partitions_revoked`` — the last moment this member owns the partitions.
"""

from __future__ import annotations

import logging
import os
import sys

import kgroup
from kgroup import TopicPartition
from kgroup.errors import NoBrokersAvailableError

COMMIT_EVERY = 1000


class Listener:
    """Prints the deltas and commits what was processed before partitions go."""

    def __init__(self) -> None:
        self.consumer: kgroup.Consumer | None = None
        self.processed: dict[TopicPartition, int] = {}

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        print(f"assigned {sorted(map(str, partitions))}", flush=True)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        done = {tp: off for tp, off in self.processed.items() if tp in partitions}
        if self.consumer is not None and done:
            self.consumer.commit(done)  # still owned here: the broker accepts it
        for tp in partitions:
            self.processed.pop(tp, None)
        print(f"revoked {sorted(map(str, partitions))} (committed {len(done)})", flush=True)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        # Another member may own them already: no commit, just forget them.
        for tp in partitions:
            self.processed.pop(tp, None)
        print(f"lost {sorted(map(str, partitions))}", flush=True)


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    max_records = 0  # 0: until Ctrl-C
    if "--max-records" in argv:
        at = argv.index("--max-records")
        max_records = int(argv[at + 1])
        argv = argv[:at] + argv[at + 2 :]
    bootstrap = argv[1] if len(argv) > 1 else os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    topic = argv[2] if len(argv) > 2 else os.environ.get("KAFKA_TOPIC")
    group = argv[3] if len(argv) > 3 else os.environ.get("KAFKA_GROUP", "kgroup-example")
    if not bootstrap or not topic:
        print(__doc__, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    listener = Listener()
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    count = 0
    with kgroup.Consumer(config) as consumer:
        listener.consumer = consumer
        consumer.subscribe([topic], listener)
        try:
            while not max_records or count < max_records:
                # Never more than --max-records: the rest stays uncommitted for the next run.
                wanted = 500 if not max_records else min(500, max_records - count)
                try:
                    batch = consumer.consume(wanted, timeout=1.0)
                except NoBrokersAvailableError as error:
                    # Raised once when no bootstrap server answered; it keeps trying.
                    print(f"{error}; still trying (Ctrl-C to stop)", file=sys.stderr)
                    continue
                for message in batch:
                    # ... process the record here ...
                    topic, partition, offset = (
                        message.topic(),
                        message.partition(),
                        message.offset(),
                    )
                    assert topic is not None
                    assert partition is not None
                    assert offset is not None
                    listener.processed[TopicPartition(topic, partition)] = offset + 1
                    count += 1
                    if count % COMMIT_EVERY == 0:
                        consumer.commit_async(dict(listener.processed))
        except KeyboardInterrupt:
            pass
        if listener.processed:
            consumer.commit(dict(listener.processed))
        print(f"member {consumer.member_id} consumed {count} records", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
