"""Pure set arithmetic of reconciliation: resolving topic ids, revoked and added sets.

No state, no I/O: each function maps its arguments to a fresh result, so the
member's reconciliation steps are easy to test on their own.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from kgroup.types import TopicIdPartition, TopicPartition

__all__ = [
    "Diff",
    "Resolution",
    "diff",
    "names_of",
    "resolve",
    "to_id_partitions",
]


@dataclass(frozen=True, slots=True)
class Resolution:
    """A target assignment split into the part whose topic names are known and the rest.

    Attributes:
        resolved: target partitions whose topic id has a known name.
        unresolved_topic_ids: topic ids of the target with no known name yet.
        names: the topic id -> name mapping used, for every resolved id.
    """

    resolved: frozenset[TopicIdPartition]
    unresolved_topic_ids: frozenset[uuid.UUID]
    names: Mapping[uuid.UUID, str]


@dataclass(frozen=True, slots=True)
class Diff:
    """What changes between the owned partitions and a (resolved) target."""

    revoked: frozenset[TopicIdPartition]
    added: frozenset[TopicIdPartition]

    @property
    def empty(self) -> bool:
        """True when nothing is revoked and nothing is added."""
        return not self.revoked and not self.added


def to_id_partitions(
    assignment: Mapping[uuid.UUID, Collection[int]],
) -> frozenset[TopicIdPartition]:
    """Flatten a wire-shaped assignment (topic id -> partitions) into a set."""
    return frozenset(
        TopicIdPartition(topic_id, partition)
        for topic_id, partitions in assignment.items()
        for partition in partitions
    )


def resolve(
    target: Iterable[TopicIdPartition],
    metadata: Mapping[uuid.UUID, str],
    assigned_names: Mapping[uuid.UUID, str],
) -> Resolution:
    """Resolve ``target``'s topic ids from ``metadata``, falling back to ``assigned_names``.

    The fallback is the cache of names of topics already assigned to the
    member, so that a topic deleted (and gone from metadata) can still be
    revoked by name.
    """
    resolved: set[TopicIdPartition] = set()
    unresolved: set[uuid.UUID] = set()
    names: dict[uuid.UUID, str] = {}
    for tip in target:
        name = metadata.get(tip.topic_id) or assigned_names.get(tip.topic_id)
        if name is None:
            unresolved.add(tip.topic_id)
        else:
            names[tip.topic_id] = name
            resolved.add(tip)
    return Resolution(frozenset(resolved), frozenset(unresolved), names)


def diff(owned: frozenset[TopicIdPartition], target: frozenset[TopicIdPartition]) -> Diff:
    """``revoked = owned - target`` and ``added = target - owned``."""
    return Diff(revoked=owned - target, added=target - owned)


def names_of(
    partitions: Iterable[TopicIdPartition], names: Mapping[uuid.UUID, str]
) -> frozenset[TopicPartition]:
    """The same partitions named by topic name; every topic id must be in ``names``."""
    return frozenset(TopicPartition(names[tip.topic_id], tip.partition) for tip in partitions)
