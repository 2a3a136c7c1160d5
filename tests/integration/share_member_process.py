"""A share consumer in a process of its own, to be killed mid-batch.

Run as ``python share_member_process.py FRONT SPEC`` where FRONT is
``threads``, ``asyncio`` or ``trio`` and SPEC a JSON object
``{"conf": {...}, "topics": [...], "want": N}``. The process subscribes in
explicit acknowledgement mode, consumes one non-empty batch of at most ``want``
records, prints one JSON line ``{"offsets": [[partition, offset], ...]}`` and
then waits on stdin without acknowledging anything: the test kills it there,
with the records acquired and unacknowledged.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio

import kgroup


def _report(records: list[kgroup.ShareRecord]) -> None:
    offsets = [[r.partition(), r.offset()] for r in records]
    print(json.dumps({"offsets": offsets}), flush=True)


def _threads(spec: dict[str, Any]) -> None:
    consumer = kgroup.ShareConsumer(spec["conf"])
    consumer.subscribe(spec["topics"])
    held: list[kgroup.ShareRecord] = []
    # One non-empty batch: explicit mode refuses a further consume() while it
    # is unacknowledged, and unacknowledged is how the test wants it.
    while not held:
        held = consumer.consume(spec["want"], 0.2)
    _report(held)
    sys.stdin.read()


async def _async(spec: dict[str, Any]) -> None:
    async with kgroup.AsyncShareConsumer(spec["conf"]) as consumer:
        await consumer.subscribe(spec["topics"])
        held: list[kgroup.ShareRecord] = []
        while not held:
            held = await consumer.consume(spec["want"], 0.2)
        _report(held)
        await anyio.to_thread.run_sync(sys.stdin.read)


def main() -> None:
    front, spec = sys.argv[1], json.loads(sys.argv[2])
    spec["conf"]["share.acknowledgement.mode"] = "explicit"
    if front == "threads":
        _threads(spec)
    else:
        anyio.run(_async, spec, backend=front)


if __name__ == "__main__":
    main()
