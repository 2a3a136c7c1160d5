"""What the blocking and the async consumer share: config checks, subscription parsing."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from kgroup.assignors import resolve_assignors
from kgroup.classic_runtime import DEFAULT_ASSIGNMENT_STRATEGY
from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.dataplane import Record, validate_passthrough
from kgroup.errors import KgroupError
from kgroup.types import TopicPartition

if TYPE_CHECKING:
    from kgroup.runtime import Runtime

__all__ = [
    "POLL_EVENT_INTERVAL",
    "SERVICE_SLICE",
    "ConsumerClosedError",
    "ConsumerViews",
    "InvalidSubscriptionError",
    "Subscription",
    "build_config",
    "commit_offsets_arg",
    "parse_subscription",
]

log = logging.getLogger("kgroup.consumer")

SERVICE_SLICE: Final = 0.1
"""Longest wait for records (seconds) before the front end looks at its rebalance work again."""

POLL_EVENT_INTERVAL: Final = 0.1
"""Polls closer together than this (seconds) tell the member only once."""

Subscription = str | re.Pattern[str] | Iterable[str | re.Pattern[str]]
"""Topic names, or one regex: a ``re.Pattern`` or a string starting with ``^``."""


class InvalidSubscriptionError(KgroupError, ValueError):
    """The subscription mixes a regex with names, or has more than one regex."""


class ConsumerClosedError(KgroupError):
    """The consumer was closed; it cannot be used any more."""


def build_config(conf: Mapping[str, Any]) -> ConsumerConfig:
    """Validate the user's dict for a new-protocol consumer.

    With ``group.protocol`` classic or auto, ``partition.assignment.strategy``
    is resolved here too, so an unknown assignor fails at construction.

    Raises:
        ConfigError: naming the key.
    """
    config = ConsumerConfig.from_dict(conf, validate_passthrough=validate_passthrough)
    if config.group_protocol is not GroupProtocol.CONSUMER:
        strategy: Any = config.partition_assignment_strategy or DEFAULT_ASSIGNMENT_STRATEGY
        resolve_assignors(strategy)
    return config


def parse_subscription(
    topics: Subscription | None, pattern: str | re.Pattern[str] | None
) -> tuple[frozenset[str], str | None]:
    """Topic names and regex of a subscription.

    A regex is given as ``pattern=``, as a compiled ``re.Pattern`` in place of
    the topics, or (as with confluent-kafka) as a topic string starting with
    ``^``. The broker evaluates it (RE2J syntax, full match on topic names).
    """
    names: set[str] = set()
    regexes: list[str] = []
    if pattern is not None:
        regexes.append(pattern.pattern if isinstance(pattern, re.Pattern) else pattern)
    if isinstance(topics, re.Pattern):
        regexes.append(topics.pattern)
    elif topics is not None:
        items = [topics] if isinstance(topics, str) else list(topics)
        for item in items:
            if isinstance(item, re.Pattern):
                regexes.append(item.pattern)
            elif not isinstance(item, str) or not item:
                raise InvalidSubscriptionError(f"topics must be non-empty strings, got {item!r}")
            elif item.startswith("^"):
                regexes.append(item)
            else:
                names.add(item)
    if len(regexes) > 1:
        raise InvalidSubscriptionError(
            f"subscribe to at most one regex (combine them with |), got {regexes}"
        )
    if regexes and names:
        raise InvalidSubscriptionError(
            f"subscribe to topic names or to a regex, not both: {sorted(names)} and {regexes[0]!r}"
        )
    return frozenset(names), (regexes[0] if regexes else None)


def commit_offsets_arg(
    offsets: Mapping[TopicPartition, int] | None, message: Record | None
) -> dict[TopicPartition, int] | None:
    """The offsets a commit call asks for; ``message`` commits just past that record."""
    if message is not None:
        if offsets is not None:
            raise ValueError("pass offsets or message, not both")
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        if topic is None or partition is None or offset is None:
            raise ValueError("message has no topic, partition or offset")
        return {TopicPartition(topic, partition): offset + 1}
    if offsets is None:
        return None
    result = {}
    for tp, offset in offsets.items():
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"offsets keys must be kgroup.TopicPartition, got {tp!r}")
        if offset < 0:
            raise ValueError(f"offset of {tp} must be >= 0, got {offset}")
        result[tp] = int(offset)
    return result


class ConsumerViews:
    """The read-only views ``Consumer`` and ``AsyncConsumer`` share."""

    _config: ConsumerConfig
    _runtime: Runtime

    @property
    def group_protocol(self) -> GroupProtocol:
        """The group protocol in use: CONSUMER or CLASSIC (``auto`` is resolved before joining).

        With the classic protocol ``member_epoch`` is the generation id.
        """
        return self._runtime.group_protocol

    @property
    def member_id(self) -> str:
        """The member id (chosen by the client, kept for the consumer's life)."""
        return self._runtime.member.member_id

    @property
    def member_epoch(self) -> int:
        """The member epoch: 0 while joining, > 0 in the group, < 0 after leaving."""
        return self._runtime.member.member_epoch

    @property
    def group_instance_id(self) -> str | None:
        """``group.instance.id`` (static membership), or None."""
        return self._config.group_instance_id

    @property
    def config(self) -> ConsumerConfig:
        """The validated configuration."""
        return self._config
