"""A read-process-write member in a process of its own: kgroup Consumer + transactional producer.

Run as ``python eos_process.py SPEC`` with the spec ``process_helpers.MemberProcess``
writes: ``{"conf": {...}, "topics": [...], "trace_commits": false}``, where
``conf`` also holds ``"_eos": {"out": TOPIC, "producer": {...producer config...}}``
(taken out before the rest becomes the kgroup config; the producer config
carries the ``transactional.id``).

Every non-empty batch becomes one transaction: its records copied to the
output topic, and the offsets past them committed to the group with
``send_offsets_to_transaction`` and the consumer's ``consumer_group_metadata()``
(so the broker checks the member id and epoch). A transaction that fails is
aborted and the consumer rewinds its partitions to the committed offsets.

Reports on stdout, one JSON line each (``"ev"`` and ``"t"``, as member_process.py):
``started``, ``assigned`` / ``revoked`` / ``lost``, ``txn`` (committed, with
the number of records), ``aborted`` (with the error), ``hold_armed`` (the
``hold`` command was read) and ``holding``.

Commands on stdin: ``hold`` (the next transaction stops after its records
were written and its offsets sent, before the commit, and waits there to be
killed), ``close``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import sys
import threading
import time
from typing import Any

import confluent_kafka as ck

import kgroup
from kgroup import TopicPartition

_out_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"ev": event, "t": time.monotonic(), **fields})
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class _Listener:
    def _report(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        emit(kind, partitions=[[tp.topic, tp.partition] for tp in sorted(partitions)])

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self._report("assigned", partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self._report("revoked", partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self._report("lost", partitions)


def _read_commands(commands: queue.Queue[str]) -> None:
    for line in sys.stdin:
        if line.strip():
            commands.put(line.strip())
    commands.put("close")


def _rewind(consumer: kgroup.Consumer, partitions: set[TopicPartition]) -> None:
    """After an abort: read the batch's partitions again from their committed offsets."""
    owned = consumer.assignment() & partitions
    if not owned:
        return
    for tp, offset in consumer.committed(owned).items():
        # Revoked meanwhile: its next owner starts at the committed offset.
        with contextlib.suppress(kgroup.NotAssignedError):
            consumer.seek(tp, ck.OFFSET_BEGINNING if offset is None else offset)


def main(spec: dict[str, Any]) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
    )
    conf = dict(spec["conf"])
    eos = conf.pop("_eos")
    commands: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_commands, args=(commands,), daemon=True).start()
    producer_conf = {"bootstrap.servers": conf["bootstrap.servers"], **eos["producer"]}
    producer = ck.Producer(producer_conf)
    # Fences an earlier process with the same transactional.id and aborts its
    # open transaction (its records and offsets are never committed).
    producer.init_transactions(60)
    consumer = kgroup.Consumer(conf)
    consumer.subscribe(spec["topics"], _Listener())
    emit("started", pid=os.getpid())
    hold = False
    while True:
        try:
            command = commands.get_nowait()
        except queue.Empty:
            command = None
        if command == "close":
            consumer.close(20)
            emit("closed")
            return 0
        if command == "hold":
            hold = True
            # The test produces only after this: records arriving before the
            # command was read would go through in an ordinary transaction.
            emit("hold_armed")
        batch = consumer.consume(200, 0.1)
        if not batch:
            continue
        progress: dict[TopicPartition, int] = {}
        for record in batch:
            topic, partition, offset = record.topic(), record.partition(), record.offset()
            assert topic is not None
            assert partition is not None
            assert offset is not None
            progress[TopicPartition(topic, partition)] = offset + 1
        try:
            producer.begin_transaction()
            for record in batch:
                producer.produce(eos["out"], record.value())
            producer.send_offsets_to_transaction(
                [ck.TopicPartition(tp.topic, tp.partition, o) for tp, o in progress.items()],
                consumer.consumer_group_metadata(),
                30,
            )
            if hold:
                producer.flush(30)  # the records are in the log, uncommitted
                emit("holding", records=len(batch))
                threading.Event().wait()  # until killed
            producer.commit_transaction(30)
            emit("txn", records=len(batch))
        except ck.KafkaException as exc:
            error = exc.args[0]
            emit("aborted", error=str(error))
            if error.fatal():
                return 2
            try:
                producer.abort_transaction(30)
            except ck.KafkaException as again:
                emit("aborted", error=f"abort failed: {again.args[0]}")
                return 2
            _rewind(consumer, set(progress))


if __name__ == "__main__":
    status = main(json.loads(sys.argv[1]))
    sys.stdout.flush()
    os._exit(status)
