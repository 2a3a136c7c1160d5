"""Acknowledgements of share records: per offset, coalesced for the wire, routed, answered.

A share consumer tells the broker, per acquired record, what became of it
(:class:`AcknowledgeType`): accepted, released for redelivery, rejected for
good, or its acquisition lock renewed (KIP-1222, ShareFetch/ShareAcknowledge
v2); offsets inside an acquired range that hold no record are acknowledged as
gaps. On the wire a partition's acknowledgements are *acknowledgement
batches*: a run of consecutive offsets with either one type for the whole run
or one type per offset (:func:`coalesce`, which :func:`expand` inverts).

Acknowledgements are owed to the leader the records were acquired from
(:class:`PendingAcknowledgements`, keyed by node): they ride on the next
ShareFetch to that node for the partitions that fetch names
(:meth:`PendingAcknowledgements.take_for_fetch`), and go alone in a
ShareAcknowledge when the node has nothing to fetch, on ``commit()`` and on
close (:meth:`PendingAcknowledgements.take_all`). The broker answers with one
error code per partition; :func:`outcomes` pairs what was sent with those
codes: the results ``commit()`` returns per partition (:func:`commit_results`),
the acknowledgement-commit callback's calls (:func:`callback_calls`), and what
a synchronous commit may retry (:attr:`AcknowledgementOutcome.retriable`,
:meth:`PendingAcknowledgements.restore`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kgroup.error_codes import ErrorCode, Trait
from kgroup.errors import BrokerError, RetriableBrokerError, broker_error
from kgroup.types import TopicIdPartition

__all__ = [
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcknowledgementOutcome",
    "PendingAcknowledgements",
    "callback_calls",
    "coalesce",
    "commit_results",
    "expand",
    "outcomes",
]


class AcknowledgeType(enum.IntEnum):
    """What became of an acquired offset, numbered as the wire numbers them."""

    GAP = 0
    """Not a record (compacted away, a transaction marker): nothing to deliver."""
    ACCEPT = 1
    """Processed: the broker archives it."""
    RELEASE = 2
    """Give it back: the broker delivers it again (to any member), delivery count + 1."""
    REJECT = 3
    """Unprocessable: the broker archives it and never delivers it again."""
    RENEW = 4
    """Still being processed: extend the acquisition lock (KIP-1222, API version 2+)."""


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """Consecutive offsets ``first_offset..last_offset`` (inclusive) and their types.

    ``types`` holds one type for the whole run, or one per offset in order, the
    two shapes the ShareFetch/ShareAcknowledge schemas allow.
    """

    first_offset: int
    last_offset: int
    types: tuple[AcknowledgeType, ...]

    def __post_init__(self) -> None:
        span = self.last_offset - self.first_offset + 1
        if span < 1:
            raise ValueError(f"empty acknowledgement batch {self.first_offset}..{self.last_offset}")
        if len(self.types) not in {1, span}:
            raise ValueError(
                f"acknowledgement batch {self.first_offset}..{self.last_offset} needs 1 or "
                f"{span} types, got {len(self.types)}"
            )

    def type_of(self, offset: int) -> AcknowledgeType:
        """The type acknowledged for ``offset`` (which the batch must cover)."""
        if not self.first_offset <= offset <= self.last_offset:
            raise ValueError(f"offset {offset} is outside {self.first_offset}..{self.last_offset}")
        if len(self.types) == 1:
            return self.types[0]
        return self.types[offset - self.first_offset]

    def offsets(self) -> range:
        """The offsets the batch covers."""
        return range(self.first_offset, self.last_offset + 1)


def coalesce(acknowledgements: Mapping[int, AcknowledgeType]) -> tuple[AcknowledgementBatch, ...]:
    """One partition's acknowledgements as the fewest wire batches.

    A batch is a maximal run of consecutive offsets (as the Java client builds
    them); a run whose offsets share one type is sent with that type once.
    """
    batches: list[AcknowledgementBatch] = []
    run: list[AcknowledgeType] = []
    first = previous = 0
    for offset in sorted(acknowledgements):
        if run and offset != previous + 1:
            batches.append(_batch(first, previous, run))
            run = []
        if not run:
            first = offset
        run.append(acknowledgements[offset])
        previous = offset
    if run:
        batches.append(_batch(first, previous, run))
    return tuple(batches)


def _batch(first: int, last: int, types: list[AcknowledgeType]) -> AcknowledgementBatch:
    if len(set(types)) == 1:
        return AcknowledgementBatch(first, last, (types[0],))
    return AcknowledgementBatch(first, last, tuple(types))


def expand(batches: Iterable[AcknowledgementBatch]) -> dict[int, AcknowledgeType]:
    """Offset -> type for every offset the batches cover (the inverse of :func:`coalesce`)."""
    return {offset: batch.type_of(offset) for batch in batches for offset in batch.offsets()}


class PendingAcknowledgements:
    """Acknowledgements not yet sent, per leader node and partition.

    Owed to the node the records were acquired from: a share partition's
    acquisition state lives on its leader, so the same offsets acknowledged to
    another broker would be refused. A later acknowledgement of an offset
    replaces an earlier unsent one (a RENEW then an ACCEPT sends the ACCEPT).
    Mutable on purpose: it is the consumer's working set, and it hands out
    frozen :class:`AcknowledgementBatch` tuples when a request is built.
    """

    def __init__(self) -> None:
        self._by_node: dict[int, dict[TopicIdPartition, dict[int, AcknowledgeType]]] = {}

    def add(
        self, node: int, partition: TopicIdPartition, offset: int, kind: AcknowledgeType
    ) -> None:
        """Owe ``kind`` for ``offset`` of ``partition``, acquired from ``node``."""
        self._by_node.setdefault(node, {}).setdefault(partition, {})[offset] = kind

    def nodes(self) -> frozenset[int]:
        """The nodes something is owed to."""
        return frozenset(self._by_node)

    def partitions(self, node: int) -> frozenset[TopicIdPartition]:
        """The partitions with acknowledgements owed to ``node``."""
        return frozenset(self._by_node.get(node, ()))

    def __len__(self) -> int:
        """How many offsets are owed, over every node."""
        return sum(len(acks) for parts in self._by_node.values() for acks in parts.values())

    def take_for_fetch(
        self, node: int, fetching: Collection[TopicIdPartition]
    ) -> dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]]:
        """Remove and return what rides on the next ShareFetch to ``node``.

        Only partitions that ShareFetch names (``fetching``: the node's share
        session's partitions) carry acknowledgements; the rest stay owed and go
        in a ShareAcknowledge (:meth:`take_all`).
        """
        parts = self._by_node.get(node)
        if not parts:
            return {}
        taken = {tp: coalesce(parts.pop(tp)) for tp in sorted(parts) if tp in fetching}
        if not parts:
            del self._by_node[node]
        return taken

    def restore(
        self,
        node: int,
        partition: TopicIdPartition,
        batches: Iterable[AcknowledgementBatch],
    ) -> None:
        """Owe again what a failed request carried (to retry it), except offsets
        acknowledged again since, whose newer type wins."""
        acks = self._by_node.setdefault(node, {}).setdefault(partition, {})
        for offset, kind in expand(batches).items():
            acks.setdefault(offset, kind)

    def take_all(self, node: int) -> dict[TopicIdPartition, tuple[AcknowledgementBatch, ...]]:
        """Remove and return everything owed to ``node``: a ShareAcknowledge's body
        (``commit()``, close, or no fetch to ride on)."""
        parts = self._by_node.pop(node, {})
        return {tp: coalesce(parts[tp]) for tp in sorted(parts)}


@dataclass(frozen=True, slots=True)
class AcknowledgementOutcome:
    """What the broker made of one partition's acknowledgements in one request.

    Attributes:
        partition: the partition.
        offsets: the offsets acknowledged (gaps included).
        error_code: the partition's acknowledge error code, 0 when they were applied.
    """

    partition: TopicIdPartition
    offsets: frozenset[int]
    error_code: int

    @property
    def succeeded(self) -> bool:
        """Whether the broker applied the acknowledgements."""
        return self.error_code == ErrorCode.NONE

    @property
    def retriable(self) -> bool:
        """Whether Kafka marks the failure retriable (a leader moved, a timeout ...):
        a synchronous commit may send them again before its deadline."""
        return not self.succeeded and _is_retriable(self.error_code)

    def error(self) -> BrokerError | None:
        """The typed error for a failure, ``None`` on success."""
        return None if self.succeeded else broker_error(self.error_code)


def outcomes(
    sent: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]],
    error_codes: Mapping[TopicIdPartition, int],
    *,
    request_error: int = ErrorCode.NONE,
) -> tuple[AcknowledgementOutcome, ...]:
    """Pair the acknowledgements a request carried with the broker's answer.

    ``error_codes`` is the response's acknowledge error code per partition;
    ``request_error`` a top-level error code, or the code standing for a
    request that got no answer at all (the transport's failure), which every
    partition then shares. A partition sent but absent from the answer failed
    with ``UNKNOWN_SERVER_ERROR``: the broker did not say it applied them.
    """
    results = []
    for partition in sorted(sent):
        if request_error != ErrorCode.NONE:
            code = request_error
        else:
            code = error_codes.get(partition, ErrorCode.UNKNOWN_SERVER_ERROR)
        offsets = frozenset(o for batch in sent[partition] for o in batch.offsets())
        results.append(AcknowledgementOutcome(partition, offsets, int(code)))
    return tuple(results)


def _is_retriable(code: int) -> bool:
    try:
        return Trait.RETRIABLE in ErrorCode(code).traits
    except ValueError:
        # A code kgroup does not tell apart: broker_error's class says.
        return isinstance(broker_error(code), RetriableBrokerError)


def callback_calls(
    results: Iterable[AcknowledgementOutcome],
) -> tuple[tuple[Mapping[TopicIdPartition, frozenset[int]], BrokerError | None], ...]:
    """The acknowledgement-commit callback's calls for ``results``: one per error code
    (success first, then by code), each with the offsets per partition it covers, as
    the Java client calls ``onComplete(offsets, exception)`` once per exception."""
    by_code: dict[int, dict[TopicIdPartition, set[int]]] = {}
    for result in results:
        offsets = by_code.setdefault(result.error_code, {}).setdefault(result.partition, set())
        offsets.update(result.offsets)
    return tuple(
        (
            MappingProxyType({tp: frozenset(o) for tp, o in sorted(parts.items())}),
            None if code == ErrorCode.NONE else broker_error(code),
        )
        for code, parts in sorted(by_code.items(), key=lambda item: (item[0] != 0, item[0]))
    )


def commit_results(
    results: Iterable[AcknowledgementOutcome],
) -> Mapping[TopicIdPartition, BrokerError | None]:
    """Per partition, ``None`` if every acknowledgement was applied, else the first error:
    what a synchronous ``commit()`` returns (Java's ``commitSync`` map)."""
    merged: dict[TopicIdPartition, BrokerError | None] = {}
    for result in results:
        if merged.get(result.partition) is None:
            merged[result.partition] = result.error()
    return MappingProxyType(merged)
