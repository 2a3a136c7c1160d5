"""What a subscription's topic names need before and while the member waits for them.

A subscribed topic the principal may not describe is fatal (as the Java
client: the ACL denial is the application's error, raised from poll); one that
does not exist is a WARNING, repeated with backoff, while it is missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio

from kgroup.config import ConsumerConfig
from kgroup.config_security import explain_denial
from kgroup.errors import (
    KgroupError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    broker_error,
)
from kgroup.runtime._log import log
from kgroup.runtime.interfaces import TransportInterface

__all__ = [
    "FRESH_METADATA",
    "MISSING_TOPIC_WARNINGS",
    "denied",
    "described_lately",
    "missing_topic_delays",
    "warn_while_missing",
]

MISSING_TOPIC_WARNINGS = (1.0, 60.0)
"""Seconds before the first repeat of the missing-topic warning, and the cap.

The wait doubles between warnings: loud at first, when a typo or a topic not
created yet is the likely cause, then rare, so a long wait stays in the log
without flooding it.
"""


FRESH_METADATA = 1.0
"""Seconds a topic's description stays fresh enough to serve a subscription's other
checks: the denial check's Metadata answer also gives the session its topic ids and
tells the missing-topic watch the topics exist (one request before the join, not three)."""


def described_lately(client: TransportInterface, topics: frozenset[str]) -> bool:
    """Every one of ``topics`` was described by a broker within :data:`FRESH_METADATA`."""
    now = anyio.current_time()
    for topic in topics:
        at = client.described_at(topic)
        if at is None or now - at > FRESH_METADATA:
            return False
    return True


def missing_topic_delays(first: float, cap: float) -> Iterator[float]:
    """The waits between missing-topic warnings: first, doubling, capped."""
    delay = first
    while True:
        yield delay
        delay = min(delay * 2, cap)


async def warn_while_missing(
    client: TransportInterface, config: ConsumerConfig, topics: frozenset[str], timeout: float
) -> bool:
    """Log a WARNING while a subscribed topic is unknown, repeated with backoff.

    Returns whether a topic that was missing has appeared (False: none was missing).

    Without it a consumer of a topic that does not exist waits silently:
    the group assigns it nothing and no error is due (the topic may be
    created later, as the Java client waits too). The broker answers
    UNKNOWN_TOPIC_OR_PARTITION both for a missing topic and, with some
    authorizers, for one the principal may not describe, so both are named.
    """
    if described_lately(client, topics):
        return False  # every topic exists: the subscription's denial check just saw them
    was_missing = False
    for delay in missing_topic_delays(*MISSING_TOPIC_WARNINGS):
        try:
            cluster = await client.metadata(sorted(topics), timeout=timeout)
        except KgroupError as exc:
            log.info("group %s: metadata for %s failed: %s", config.group_id, sorted(topics), exc)
        else:
            errors = cluster.topic_errors
            missing = sorted(
                t
                for t in topics
                if errors.get(t)
                and isinstance(broker_error(errors[t]), UnknownTopicOrPartitionError)
            )
            if not missing:
                return was_missing
            was_missing = True
            log.warning(
                "group %s: subscribed topic %s does not exist or is not authorized for "
                "this client, so no partitions are assigned; create it (for example "
                "`kgroup topics create %s --bootstrap-servers %s`), check the spelling, "
                "or grant DESCRIBE and READ on it; checking again in %.0f s",
                config.group_id,
                ", ".join(missing),
                missing[0],
                ",".join(config.bootstrap_servers),
                delay,
            )
        await anyio.sleep(delay)
    raise AssertionError("unreachable: the delays never end")


async def denied(
    client: TransportInterface, config: ConsumerConfig, topics: frozenset[str], timeout: float
) -> BaseException | None:
    """The fatal error if the principal may not describe a subscribed topic, else None.

    A failed lookup is not a denial: the member joins and the session reports
    what fails.
    """
    try:
        cluster = await client.metadata(sorted(topics), timeout=timeout)
    except KgroupError as exc:
        log.info("group %s: metadata for %s failed: %s", config.group_id, sorted(topics), exc)
        return None
    errors = cluster.topic_errors
    refused = sorted(
        t
        for t in topics
        if errors.get(t) and isinstance(broker_error(errors[t]), TopicAuthorizationFailedError)
    )
    if not refused:
        return None
    return explain_denial(broker_error(errors[refused[0]]), group=config.group_id, topics=refused)
