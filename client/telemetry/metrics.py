"""``consumer.metrics()``: counters and latency histograms, for users who want numbers.

:class:`ConsumerMetrics` is a frozen snapshot; the runtime keeps the live
counters (:class:`kgroup.telemetry.recorder.ConsumerTelemetry`) whether or not
telemetry events are turned on. Histograms have fixed buckets (seconds, the
same for every histogram), so snapshots of many consumers add up bucket by
bucket.

Lag and fetched bytes come from librdkafka's statistics, which it computes
only when ``statistics.interval.ms`` is set (> 0); without it they are empty /
``None`` rather than a guess.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kgroup.telemetry.sinks import SinkStats
from kgroup.types import TopicPartition

__all__ = [
    "BUCKET_BOUNDS",
    "ConsumerMetrics",
    "DataPlaneStatistics",
    "Histogram",
    "LatencyHistogram",
    "parse_librdkafka_statistics",
]

BUCKET_BOUNDS: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    math.inf,
)
"""Upper bounds (seconds, inclusive) of every histogram's buckets; the last catches the rest."""


@dataclass(frozen=True, slots=True)
class LatencyHistogram:
    """A snapshot of a latency histogram (seconds)."""

    count: int = 0
    total_s: float = 0.0
    min_s: float | None = None
    max_s: float | None = None
    buckets: tuple[int, ...] = (0,) * len(BUCKET_BOUNDS)
    """Observations per bucket of :data:`BUCKET_BOUNDS` (not cumulative)."""

    @property
    def mean_s(self) -> float | None:
        """The mean, or None without observations."""
        return self.total_s / self.count if self.count else None

    def quantile(self, q: float) -> float | None:
        """An upper estimate of the ``q`` quantile (0 < q <= 1): its bucket's bound.

        Capped by the largest observation, so a histogram of one value returns it.

        Raises:
            ValueError: ``q`` outside (0, 1].
        """
        if not 0 < q <= 1:
            raise ValueError(f"q must be in (0, 1], got {q}")
        if not self.count or self.max_s is None:
            return None
        rank = math.ceil(q * self.count)
        seen = 0
        for bound, n in zip(BUCKET_BOUNDS, self.buckets, strict=True):
            seen += n
            if seen >= rank:
                return min(bound, self.max_s)
        return self.max_s  # pragma: no cover - the last bucket is unbounded


class Histogram:
    """The live form of :class:`LatencyHistogram` (not thread-safe: the owner locks)."""

    __slots__ = ("_buckets", "_count", "_max", "_min", "_total")

    def __init__(self) -> None:
        self._buckets = [0] * len(BUCKET_BOUNDS)
        self._count = 0
        self._total = 0.0
        self._min: float | None = None
        self._max: float | None = None

    def record(self, seconds: float) -> None:
        """Add one observation (negative values count as 0: clocks are not to blame here)."""
        value = max(0.0, seconds)
        self._buckets[bisect.bisect_left(BUCKET_BOUNDS, value)] += 1
        self._count += 1
        self._total += value
        self._min = value if self._min is None else min(self._min, value)
        self._max = value if self._max is None else max(self._max, value)

    def snapshot(self) -> LatencyHistogram:
        """The observations so far, frozen."""
        return LatencyHistogram(
            self._count, self._total, self._min, self._max, tuple(self._buckets)
        )


@dataclass(frozen=True, slots=True)
class DataPlaneStatistics:
    """What the report of librdkafka's statistics gives ``metrics()``."""

    lag: Mapping[TopicPartition, int] = field(default_factory=lambda: MappingProxyType({}))
    """Messages between the position and the end of each fetching partition."""
    bytes: int = 0
    """Message bytes (framing included) received from the brokers."""


def parse_librdkafka_statistics(text: str) -> DataPlaneStatistics | None:
    """Lag and bytes from one of librdkafka's statistics JSON documents; None if unreadable.

    Lag is the partition's last stable offset (``ls_offset``; ``hi_offset``
    when librdkafka reports none) minus ``app_offset`` (the offset after the
    last record handed to the application). librdkafka's own
    ``consumer_lag`` needs its committed offset, which it never learns:
    kgroup commits offsets itself.
    """
    try:
        doc: Any = json.loads(text)
        topics = doc.get("topics") or {}
        lag: dict[TopicPartition, int] = {}
        for topic, tdoc in topics.items():
            for pid, pdoc in (tdoc.get("partitions") or {}).items():
                partition = int(pid)
                if partition < 0 or not pdoc.get("fetch_state") or pdoc["fetch_state"] == "none":
                    continue  # -1 is librdkafka's internal "unassigned" partition
                end = int(pdoc.get("ls_offset", -1))
                if end < 0:
                    end = int(pdoc.get("hi_offset", -1))
                app = int(pdoc.get("app_offset", -1))
                if end >= 0 and app >= 0:
                    lag[TopicPartition(str(topic), partition)] = max(0, end - app)
        return DataPlaneStatistics(MappingProxyType(lag), int(doc.get("rxmsg_bytes", 0)))
    except (ValueError, TypeError, AttributeError):
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerMetrics:
    """A snapshot of a consumer's counters and latency histograms (``consumer.metrics()``).

    Counts are since the consumer was created; latencies are seconds.
    """

    rebalances: int
    """Rebalances this member completed (reached a stable assignment after a change)."""
    rebalance_latency: LatencyHistogram
    """From the start of a rebalance (join, fencing, new assignment) to stable again."""
    heartbeats: int
    """Heartbeat responses received (ConsumerGroupHeartbeat or classic Heartbeat)."""
    heartbeat_errors: int
    """Heartbeats (and JoinGroup / SyncGroup) answered with an error or not at all."""
    heartbeat_rtt: LatencyHistogram
    """Heartbeat round trips, send to response."""
    fenced: int
    """Times the coordinator fenced the member."""
    commits: int
    """Offset commits that succeeded (application's, auto-commits, before revocations)."""
    commit_failures: int
    commit_latency: LatencyHistogram
    callback_latency: LatencyHistogram
    """Rebalance listener callbacks, all three kinds."""
    records: int
    """Records handed to the application."""
    bytes: int | None
    """Message bytes the data plane received; None without ``statistics.interval.ms``."""
    lag: Mapping[TopicPartition, int]
    """Per fetching partition; empty without ``statistics.interval.ms``."""
    telemetry: SinkStats | None
    """The telemetry sink's counters (events written, dropped ...); None when telemetry is off."""
