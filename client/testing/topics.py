"""Topic administration for tests and demos, through confluent-kafka's AdminClient."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kgroup.errors import HarnessError

__all__ = ["create_topic", "delete_topics"]

_log = logging.getLogger("kgroup.testing.topics")


def create_topic(
    bootstrap_servers: str,
    name: str,
    *,
    partitions: int = 1,
    replication_factor: int = 1,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> None:
    """Create topic ``name`` and return once metadata shows every partition with a leader.

    Raises:
        HarnessError: the broker refused the topic, or it was not ready in ``timeout`` s.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    new = NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        config=dict(config or {}),
    )
    futures = admin.create_topics([new], request_timeout=timeout)
    try:
        futures[name].result(timeout=timeout)
    except KafkaException as exc:
        raise HarnessError(f"could not create topic {name!r}: {exc}") from exc
    deadline = time.monotonic() + timeout
    problem = "no metadata yet"
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(topic=name, timeout=5)
        except KafkaException as exc:
            problem = str(exc)
        else:
            topic = metadata.topics.get(name)
            if topic is not None and topic.error is None:
                leaders = [p.leader for p in topic.partitions.values() if p.error is None]
                if len(leaders) == partitions and all(leader >= 0 for leader in leaders):
                    return
                problem = f"{len(leaders)}/{partitions} partitions with leaders {leaders}"
            elif topic is not None:
                problem = str(topic.error)
        time.sleep(0.05)
    raise HarnessError(f"topic {name!r} not ready within {timeout:.0f} s: {problem}")


def delete_topics(bootstrap_servers: str, names: list[str]) -> None:
    """Delete topics ``names``; failures are logged, never raised (this is clean-up)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    futures = admin.delete_topics(names, operation_timeout=10, request_timeout=10)
    for name, future in futures.items():
        try:
            future.result(timeout=15)
        except Exception as exc:  # cleanup must not fail the test
            _log.warning("could not delete topic %s: %s", name, exc)
