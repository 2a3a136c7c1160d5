"""Value types shared across kgroup's layers. All are frozen and hashable.

Standard library (and :mod:`kgroup.errors`) only: the sans-IO membership
machines import this module, as do the transport and the runtime.
"""

from __future__ import annotations

import enum
import math
import random as _random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kgroup import config_keys as keys
from kgroup.errors import ConfigError

__all__ = [
    "Backoff",
    "CallbackKind",
    "OffsetAndMetadata",
    "RebalanceProtocol",
    "TopicIdPartition",
    "TopicPartition",
    "Truncation",
]


class CallbackKind(enum.Enum):
    """Which rebalance listener method is called: the value is the method's name.

    A public value because the listener (:mod:`kgroup.listener`) and the
    membership machines (whose callback actions carry it) both name it, and
    the public layer may not import the machines.
    """

    REVOKED = "on_partitions_revoked"
    ASSIGNED = "on_partitions_assigned"
    LOST = "on_partitions_lost"


class RebalanceProtocol(enum.Enum):
    """How members give up partitions during a classic rebalance (KIP-429).

    What a classic assignor supports and how a classic member rebalances; the
    values are the ids the Java client uses.
    """

    EAGER = 0
    """Every member revokes everything before it rejoins."""
    COOPERATIVE = 1
    """Members keep their partitions; only partitions that move are revoked."""


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A partition named by its topic's name."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True, order=True)
class TopicIdPartition:
    """A partition named by its topic's id, as the new protocol names them on the wire."""

    topic_id: uuid.UUID
    partition: int

    def __str__(self) -> str:
        return f"{self.topic_id}:{self.partition}"


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset with the application's metadata string (the Java client's name).

    ``offset`` is the next offset to read; ``metadata`` is stored with it by the
    group coordinator (``offset.metadata.max.bytes``, 4096 by default) and read
    back by :meth:`kgroup.Consumer.committed_with_metadata`.
    """

    offset: int
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class Truncation:
    """A committed offset past the end of its leader epoch in the leader's log (KIP-320).

    The records the offset counted were truncated (an unclean leader election
    made a replica without them leader), and the log goes on with other records
    from ``resume_at``: resuming there reads every record the log holds now;
    resuming at ``committed`` would skip the new ones up to it, or fall out of range.

    Attributes:
        partition: the partition.
        committed: the committed offset (the next record to read, as committed).
        committed_epoch: the leader epoch committed with it (of the record before it).
        resume_at: the divergence point: where the committed epoch ends in the
            leader's log, the first offset the committed one may not count.
        resume_epoch: the leader epoch the leader answered for ``resume_at``.
    """

    partition: TopicPartition
    committed: int
    committed_epoch: int
    resume_at: int
    resume_epoch: int


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait before retry number ``attempt`` (0-based), in seconds.

    Kafka's ``ExponentialBackoff``, the one retry policy of kgroup: the
    transport's request retries, the offset manager, and both membership
    machines' heartbeat / join retries use it. The delay is
    ``initial * multiplier ** attempt``, capped at ``maximum``, then scaled by
    a random factor in ``[1 - jitter, 1 + jitter)`` and capped at ``maximum``
    again. The defaults are Kafka's: ``retry.backoff.ms`` doubling to
    ``retry.backoff.max.ms`` (100 ms to 1 s), +-20 %. When
    ``maximum`` is not above ``initial`` the delay is a constant ``initial``
    without jitter, as in Kafka.

    ``kgroup.transport.Backoff`` is the same class (re-exported).
    """

    initial: float = keys.RETRY_BACKOFF_MS.default / 1000
    maximum: float = keys.RETRY_BACKOFF_MAX_MS.default / 1000
    multiplier: float = 2.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.initial < 0 or self.maximum < 0:
            raise ConfigError(f"backoff times must not be negative: {self}")
        if self.multiplier < 1:
            raise ConfigError(f"backoff multiplier must be at least 1: {self}")
        if not 0 <= self.jitter < 1:
            raise ConfigError(f"backoff jitter must be in [0, 1): {self}")

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> Backoff:
        """From Kafka's ``retry.backoff.ms`` and ``retry.backoff.max.ms`` (defaults if absent).

        Raises:
            ConfigError: a value is not a non-negative integer.
        """
        values: list[float] = []
        for k in (keys.RETRY_BACKOFF_MS, keys.RETRY_BACKOFF_MAX_MS):
            value = config.get(k.name, k.default)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{k.name} must be a non-negative integer (ms), got {value!r}")
            values.append(value / 1000)
        return cls(initial=values[0], maximum=values[1])

    @classmethod
    def from_ms(cls, initial_ms: int, maximum_ms: int) -> Backoff:
        """From ``retry.backoff.ms`` / ``retry.backoff.max.ms`` values already validated."""
        return cls(initial=initial_ms / 1000, maximum=maximum_ms / 1000)

    def delay(self, attempt: int, random: Callable[[], float] = _random.random) -> float:
        """Seconds to wait before retry ``attempt`` (0 for the first retry).

        ``random`` returns floats in ``[0, 1)``; pass a fixed one to get exact
        values (``lambda: 0.5`` means no jitter).
        """
        if attempt < 0:
            raise ValueError(f"attempt must be >= 0, got {attempt}")
        if self.maximum <= self.initial or self.initial == 0:
            return self.initial
        # Cap the exponent rather than the product so huge attempts cannot overflow.
        ceiling = (
            math.log(self.maximum / self.initial, self.multiplier) if self.multiplier > 1 else 0
        )
        term = self.initial * self.multiplier ** min(attempt, ceiling)
        factor = 1.0 + self.jitter * (2.0 * random() - 1.0)
        return min(term * factor, self.maximum)
