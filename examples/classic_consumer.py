"""A consumer on the classic group protocol, optionally with the example capacity assignor.

    python examples/classic_consumer.py BOOTSTRAP TOPIC [GROUP] [--capacity N]
        [--protocol classic|auto] [--max-records N]

or with ``KAFKA_BOOTSTRAP_SERVERS`` / ``KAFKA_TOPIC`` / ``KAFKA_GROUP`` in the
environment. Start it several times with the same group: the members join with
JoinGroup / SyncGroup, the first one leads and runs the assignor, and with
``cooperative-sticky`` (the default here) a joining member only takes the
partitions that move; the others keep consuming. Each prints the protocol in
use, its generation and its assignment.

``--capacity N`` uses the capacity assignor of ``examples/custom_assignor.py``
(every member of the group must then pass it): the leader gives each member a
share of the partitions in proportion to its capacity, read from the user data
of its subscription. ``--protocol auto`` uses the new protocol where the broker
offers it and falls back to classic (with a warning) where it does not.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from pathlib import Path

import kgroup
from kgroup import TopicPartition


class Listener:
    """Prints the deltas (cooperative: only what moves)."""

    def __init__(self) -> None:
        self.consumer: kgroup.Consumer | None = None

    def _generation(self) -> str:
        return "" if self.consumer is None else f" (generation {self.consumer.member_epoch})"

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        print(f"assigned {sorted(map(str, partitions))}{self._generation()}", flush=True)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        print(f"revoked {sorted(map(str, partitions))}{self._generation()}", flush=True)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        print(f"lost {sorted(map(str, partitions))}", flush=True)


def _option(argv: list[str], name: str) -> tuple[list[str], str | None]:
    if name not in argv:
        return argv, None
    at = argv.index(name)
    return argv[:at] + argv[at + 2 :], argv[at + 1]


def _strategy(capacity: str | None) -> object:
    if capacity is None:
        return "cooperative-sticky"
    # The custom assignor lives next to this file.
    path = Path(__file__).resolve().parent / "custom_assignor.py"
    spec = importlib.util.spec_from_file_location("custom_assignor", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [module.CapacityAssignor(capacity=int(capacity))]


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    argv, max_records_arg = _option(argv, "--max-records")
    argv, capacity = _option(argv, "--capacity")
    argv, protocol = _option(argv, "--protocol")
    max_records = int(max_records_arg or 0)  # 0: until Ctrl-C
    bootstrap = argv[1] if len(argv) > 1 else os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    topic = argv[2] if len(argv) > 2 else os.environ.get("KAFKA_TOPIC")
    group = argv[3] if len(argv) > 3 else os.environ.get("KAFKA_GROUP", "kgroup-classic-example")
    if not bootstrap or not topic:
        print(__doc__, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol or "classic",
        "partition.assignment.strategy": _strategy(capacity),
        "auto.offset.reset": "earliest",
    }
    listener = Listener()
    count = 0
    with kgroup.Consumer(config) as consumer:
        listener.consumer = consumer
        print(f"group protocol: {consumer.group_protocol.value}", flush=True)
        consumer.subscribe([topic], listener)
        try:
            while not max_records or count < max_records:
                count += len(consumer.consume(500, timeout=1.0))
        except KeyboardInterrupt:
            pass
    print(f"consumed {count} records", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
