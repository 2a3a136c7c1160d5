"""An idle classic-protocol group member of kafka-python or aiokafka, for bench_footprint.

    python tests/benchmarks/idle_member.py KIND BOOTSTRAP GROUP TOPIC

KIND is ``kafka-python`` or ``aiokafka``. Neither client speaks the new group
protocol (KIP-848), so the member joins a classic group (heartbeat 0.5 s,
session 6 s, the settings the new-protocol members get from the broker) and
polls 100 ms at a time, like the peers of ``tests/peers``. It prints
``assigned <partitions>`` (comma-separated, ``-`` when empty) whenever its
assignment changes, and leaves the group at the end of its standard input.
Not a benchmark itself (no ``bench_`` prefix).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

POLL_MS = 100
SETTINGS: dict[str, Any] = {
    "heartbeat_interval_ms": 500,
    "session_timeout_ms": 6000,
    "auto_offset_reset": "earliest",
}


def _report(partitions: set[int], last: list[set[int] | None]) -> None:
    if partitions != last[0]:
        last[0] = partitions
        print("assigned " + (",".join(str(p) for p in sorted(partitions)) or "-"), flush=True)


def run_kafka_python(bootstrap: str, group: str, topic: str, stop: threading.Event) -> None:
    from kafka import KafkaConsumer  # noqa: PLC0415

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, **SETTINGS)
    last: list[set[int] | None] = [None]
    while not stop.is_set():
        consumer.poll(timeout_ms=POLL_MS)
        _report({tp.partition for tp in consumer.assignment()}, last)
    consumer.close()


def run_aiokafka(bootstrap: str, group: str, topic: str, stop: threading.Event) -> None:
    import asyncio  # noqa: PLC0415

    from aiokafka import AIOKafkaConsumer  # noqa: PLC0415

    async def main() -> None:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, **SETTINGS)
        await consumer.start()
        last: list[set[int] | None] = [None]
        try:
            while not stop.is_set():
                await consumer.getmany(timeout_ms=POLL_MS)
                _report({tp.partition for tp in consumer.assignment()}, last)
        finally:
            await consumer.stop()

    asyncio.run(main())


def main() -> None:
    kind, bootstrap, group, topic = sys.argv[1:5]
    stop = threading.Event()

    def wait_for_eof() -> None:
        for _ in sys.stdin:
            pass
        stop.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    run = {"kafka-python": run_kafka_python, "aiokafka": run_aiokafka}[kind]
    run(bootstrap, group, topic, stop)


if __name__ == "__main__":
    main()
