"""Slow classic members keep their membership when a consumer-protocol member converts the group.

A rolling upgrade on Apache Kafka 4.4 with slow classic cooperative-sticky
members: polls 2.5 s apart (the application processes each batch that long),
rebalance callbacks of 0.75 s, ``max.poll.interval.ms`` 6 s (the rebalance
timeout). A consumer-protocol member joins and converts the group; each
classic member must give a partition up and rejoin within the rebalance
timeout, or the coordinator removes it.

The step costs one poll: the poll that commits before the revocation waits
for the commit's answer, runs the revoke callback and the assign callback
that follows it, and the member rejoins (at most 2.5 + 2 x 0.75 s after its
SyncGroup). When each of the three waited for a poll of its own (at least
2 x 2.5 + 2 x 0.75 s), the coordinator removed the members round after
round (simulator seed 254489). Run on the code before the change, this test
failed twice in two runs: both classic members were removed and told their
partitions were lost, and the group settled 24.3 s after the new member
joined (4.2 s with the change).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from helpers import EventLog, classic_conf, consumer_conf, converged, partitions_of, wait_until
from process_helpers import SteadyProducer

import kgroup
from kgroup import TopicPartition
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration

PARTITIONS = 6
PROCESSING_S = 2.5
"""How long the slow members' application processes a batch between polls."""
CALLBACK_S = 0.75
"""How long each of their rebalance callbacks takes."""
REBALANCE_TIMEOUT_MS = 6_000


class _SlowListener:
    """Records every callback in the log, then takes :data:`CALLBACK_S`."""

    def __init__(self, log: EventLog, member: str) -> None:
        self._recorder = log.listener(member)

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self._recorder.on_partitions_assigned(partitions)
        time.sleep(CALLBACK_S)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self._recorder.on_partitions_revoked(partitions)
        time.sleep(CALLBACK_S)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self._recorder.on_partitions_lost(partitions)


class _Member:
    """A kgroup consumer polling in its own thread, ``processing_s`` per batch."""

    def __init__(
        self, conf: dict[str, Any], topic: str, listener: object, processing_s: float
    ) -> None:
        self.consumer = kgroup.Consumer(conf)
        self.consumer.subscribe([topic], listener=listener)
        self.errors: list[BaseException] = []
        self.batches = 0  # batches handed to the application
        self._processing_s = processing_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                if self.consumer.consume(100, 1.0):
                    self.batches += 1
                    # The application's work on the batch (not a wait for anything).
                    self._stop.wait(self._processing_s)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            self.consumer.close(15)

    def assignment(self) -> frozenset[TopicPartition]:
        return self.consumer.assignment()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()
        assert not self.errors, self.errors


def test_slow_classic_members_revoke_within_the_rebalance_timeout_when_the_group_converts(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic = make_topic(partitions=PARTITIONS)
    group = make_group_id()
    everything = partitions_of(topic, PARTITIONS)
    feeder = SteadyProducer(kafka_bootstrap_servers, topic, PARTITIONS, 0.1)
    log = EventLog()
    slow_conf = classic_conf(
        kafka_bootstrap_servers,
        group,
        "cooperative-sticky",
        max_poll_interval_ms=REBALANCE_TIMEOUT_MS,
    )
    members: list[_Member] = []
    try:
        for name in ("a", "b"):
            members.append(
                _Member(slow_conf, topic, _SlowListener(log, name), processing_s=PROCESSING_S)
            )
        wait_until(
            lambda: (
                converged(members, everything)
                and all(
                    m.assignment() and log.held(n) == m.assignment()
                    for n, m in zip("ab", members, strict=True)
                )
            ),
            60,
            "the slow classic members share the partitions, their listeners told",
        )
        # Settled: each has processed batches since (its polls 2.5 s apart). Records
        # wait in every poll from here on: the feeder keeps producing.
        settled_at = [m.batches for m in members]
        wait_until(
            lambda: all(m.batches >= n + 2 for m, n in zip(members, settled_at, strict=True)),
            60,
            "the slow members process batches",
        )
        joined = time.monotonic()
        new = _Member(
            consumer_conf(kafka_bootstrap_servers, group, group_protocol="consumer"),
            topic,
            log.listener("c"),
            processing_s=0.0,
        )
        members.append(new)
        wait_until(
            lambda: converged(members, everything) and all(m.assignment() for m in members),
            60,
            "the converted group shares the partitions among all three members",
        )
        took = time.monotonic() - joined
        lost = {name: log.of(name, "lost") for name in ("a", "b")}
        assert lost == {"a": [], "b": []}, (
            f"a slow classic member was removed while revoking (converged {took:.1f} s "
            f"after the consumer-protocol member joined): "
            + "; ".join(
                f"{e.at / 1e9 - joined:+.2f} s {e.member} {e.kind} "
                f"{sorted(tp.partition for tp in e.partitions)}"
                for e in log.events
            )
        )
        revoked = [e for name in ("a", "b") for e in log.of(name, "revoked")]
        assert revoked, "no classic member gave a partition up"
    finally:
        for member in members:
            member.stop()
        feeder.stop()
    log.check_handover_order()
