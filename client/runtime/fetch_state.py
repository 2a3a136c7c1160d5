"""What each partition may do on the data plane: a sans-IO record of fetching.

The member decides *which* partitions this consumer owns and when they start
or stop fetching; :class:`FetchState` keeps what the data plane needs on top of
that, per partition:

- **fetching**: assigned on the data plane (records may be handed out);
- **paused**: fetching, but the application paused it;
- **held**: paused before it started fetching (``pause()`` from
  ``on_partitions_assigned``, as the Java client and librdkafka allow); paused
  right after it is assigned, before any record of it is handed out;
- **stopped at a position**: the position captured when it stopped fetching,
  which the commit before its revocation uses, and where it resumes if it
  starts again without having left the assignment;
- **seek override**: a ``seek()`` before it started fetching: it starts there
  instead of at the committed offset;
- **awaiting a seek**: owned, but its committed offset may not be used (the
  leader's log was truncated below it and ``auto.offset.reset=error``, KIP-320):
  it does not fetch until the application's ``seek()`` starts it there;
- **fetch generation**: bumped on every start and stop, so that an offset fetch
  started before a later stop cannot start the partition again;
- **tenure**: how many times it left the member's assignment (or its topic
  was deleted and created again), so that a commit can drop partitions lost
  and assigned again while it waited.

Its methods change the record and return the data-plane operations to perform
(:data:`FetchOp`); the driver performs them in order. No I/O, no clock: the
same object runs under the driver and in a simulator.
"""

from __future__ import annotations

import collections
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from kgroup.errors import NotAssignedError
from kgroup.types import TopicPartition

__all__ = [
    "Assign",
    "CapturePositions",
    "FetchOp",
    "FetchState",
    "FetchTicket",
    "PartitionsOp",
    "Pause",
    "Resume",
    "Seek",
    "Unassign",
]


@dataclass(frozen=True, slots=True)
class Assign:
    """Start fetching at these offsets (None: where ``auto.offset.reset`` says)."""

    offsets: Mapping[TopicPartition, int | None]


@dataclass(frozen=True, slots=True)
class PartitionsOp:
    """An operation on a set of partitions (the base of the four below)."""

    partitions: frozenset[TopicPartition]


class Unassign(PartitionsOp):
    """Stop fetching these partitions."""

    __slots__ = ()


class Pause(PartitionsOp):
    """Stop handing out records of these fetching partitions."""

    __slots__ = ()


class Resume(PartitionsOp):
    """Hand out records of these paused partitions again."""

    __slots__ = ()


class CapturePositions(PartitionsOp):
    """Read these partitions' positions and give them to :meth:`FetchState.positions_captured`.

    Comes before the :class:`Unassign` of the same partitions: the data plane
    forgets a partition's position when it stops fetching it.
    """

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Seek:
    """Make the next record of ``partition`` the one at ``offset``."""

    partition: TopicPartition
    offset: int


FetchOp = Assign | Unassign | Pause | Resume | Seek | CapturePositions
"""A data-plane operation, in the order returned."""


@dataclass(frozen=True, slots=True)
class FetchTicket:
    """A start of fetching waiting for committed offsets: each partition's generation."""

    generations: Mapping[TopicPartition, int] = field(default_factory=dict)


class FetchState:
    """The fetching record of one consumer's partitions (see the module docs)."""

    def __init__(self) -> None:
        self._generation: dict[TopicPartition, int] = collections.defaultdict(int)
        self._fetching: set[TopicPartition] = set()
        self._paused: set[TopicPartition] = set()
        self._held: set[TopicPartition] = set()
        self._stopped_at: dict[TopicPartition, int] = {}
        self._seek_overrides: dict[TopicPartition, int] = {}
        self._awaiting_seek: set[TopicPartition] = set()
        self._tenure: dict[TopicPartition, int] = {}
        self._last_assignment: frozenset[TopicPartition] = frozenset()

    # ------------------------------------------------------------------ views

    @property
    def fetching(self) -> frozenset[TopicPartition]:
        """Partitions assigned on the data plane."""
        return frozenset(self._fetching)

    @property
    def paused(self) -> frozenset[TopicPartition]:
        """Fetching partitions the application paused."""
        return frozenset(self._paused)

    @property
    def held(self) -> frozenset[TopicPartition]:
        """Partitions paused before they started fetching; paused as they start."""
        return frozenset(self._held)

    @property
    def awaiting_seek(self) -> frozenset[TopicPartition]:
        """Owned partitions that start only where the application seeks them."""
        return frozenset(self._awaiting_seek)

    def seek_override(self, partition: TopicPartition) -> int | None:
        """Where ``partition`` starts instead of its committed offset, if seeked early."""
        return self._seek_overrides.get(partition)

    def stopped_positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Positions captured when these partitions stopped fetching (those known)."""
        return {tp: self._stopped_at[tp] for tp in partitions if tp in self._stopped_at}

    def tenure(self, partition: TopicPartition) -> int:
        """How many times ``partition`` left the member's assignment so far."""
        return self._tenure.get(partition, 0)

    # ---------------------------------------------------------- the member's

    def stop(self, partitions: Collection[TopicPartition]) -> list[FetchOp]:
        """The member stops fetching ``partitions`` (before a revocation, or lost)."""
        for tp in partitions:
            self._generation[tp] += 1
            self._stopped_at.pop(tp, None)
            self._seek_overrides.pop(tp, None)
        self._awaiting_seek.difference_update(partitions)
        self._held.difference_update(partitions)
        self._paused.difference_update(partitions)
        gone = frozenset(self._fetching.intersection(partitions))
        if not gone:
            return []
        self._fetching.difference_update(gone)
        return [CapturePositions(gone), Unassign(gone)]

    def positions_captured(self, positions: Mapping[TopicPartition, int]) -> None:
        """The positions a :class:`CapturePositions` read."""
        self._stopped_at.update(positions)

    def start(self, partitions: Collection[TopicPartition]) -> FetchTicket:
        """The member starts fetching ``partitions``: their committed offsets are needed first.

        A partition stopped without leaving the assignment (kept while the
        member was unsure of its membership) keeps its stopped position: it
        resumes there, and a commit before it resumes still covers it.
        """
        generations = {}
        for tp in partitions:
            self._generation[tp] += 1
            generations[tp] = self._generation[tp]
        # A new start decides again (from a fresh committed offset) whether it waits.
        self._awaiting_seek.difference_update(partitions)
        return FetchTicket(generations)

    def wanted(self, ticket: FetchTicket) -> frozenset[TopicPartition]:
        """The partitions of ``ticket`` not stopped or started again since."""
        return frozenset(tp for tp, g in ticket.generations.items() if self._generation[tp] == g)

    def offsets_fetched(
        self,
        ticket: FetchTicket,
        committed: Mapping[TopicPartition, int | None],
        owned: Collection[TopicPartition],
        diverged: Collection[TopicPartition] = frozenset(),
    ) -> list[FetchOp]:
        """The committed offsets of ``ticket``'s partitions arrived: start those still wanted.

        A partition starts at its seek override, else where it stopped if it
        never left the assignment since, else at its committed offset. Held
        partitions are paused right after the assignment, before the
        application's next ``consume()`` can hand out any of their records.

        A partition of ``diverged`` (its committed offset must not be used) that
        would start at its committed offset does not start: it awaits the
        application's ``seek()`` (:attr:`awaiting_seek`).
        """
        start: dict[TopicPartition, int | None] = {}
        for tp in sorted(self.wanted(ticket)):
            if tp in owned:
                stopped = self._stopped_at.pop(tp, None)
                override = self._seek_overrides.pop(tp, None)
                if override is not None:
                    start[tp] = override
                elif stopped is not None:
                    start[tp] = stopped
                elif tp in diverged:
                    self._awaiting_seek.add(tp)
                else:
                    start[tp] = committed.get(tp)
        if not start:
            return []
        self._fetching.update(start)
        ops: list[FetchOp] = [Assign(start)]
        held = frozenset(self._held.intersection(start))
        if held:
            self._paused.update(held)
            self._held.difference_update(held)
            ops.append(Pause(held))
        return ops

    def assign_failed(self, operation: Assign) -> None:
        """The data plane refused ``operation``: its partitions are not fetching."""
        partitions = operation.offsets.keys()
        held = self._paused.intersection(partitions)
        self._fetching.difference_update(partitions)
        self._paused.difference_update(partitions)
        # Still owned and not started: a later start honours the pause.
        self._held.update(held)

    def assignment_changed(self, assignment: frozenset[TopicPartition]) -> None:
        """The member's installed assignment is now ``assignment`` (counts tenure)."""
        for gone in self._last_assignment - assignment:
            self._tenure[gone] = self._tenure.get(gone, 0) + 1
            self._awaiting_seek.discard(gone)
            # The position captured when it stopped served the revocation's
            # commit. Kept, it would be committed again if the partition came
            # back and a commit ran before its fetch started, rewinding the
            # offset another owner committed meanwhile (seen in a protocol
            # switch under load: the group re-read ~100 records per partition).
            self._stopped_at.pop(gone, None)
        self._last_assignment = assignment

    def topic_recreated(self, partitions: Collection[TopicPartition]) -> list[FetchOp]:
        """These owned partitions' topic was deleted and created again: fetch them anew.

        Their positions are not to be trusted (the data plane's may point past
        the new log's records) and their stopped positions belong to the old
        topic: both are forgotten, and their tenure counts a departure, so a
        commit holding offsets read before cannot commit them. Fetching ones
        start again where ``auto.offset.reset`` says (the broker deleted the old
        topic's committed offsets with it), paused again if they were.
        """
        for tp in partitions:
            self._tenure[tp] = self._tenure.get(tp, 0) + 1
            self._stopped_at.pop(tp, None)
        again = frozenset(self._fetching.intersection(partitions))
        if not again:
            return []
        ops: list[FetchOp] = [Unassign(again), Assign(dict.fromkeys(sorted(again)))]
        paused = frozenset(self._paused.intersection(again))
        if paused:
            ops.append(Pause(paused))
        return ops

    # ----------------------------------------------------- the application's

    def seek(
        self, partition: TopicPartition, offset: int, owned: Collection[TopicPartition]
    ) -> list[FetchOp]:
        """``seek()``: at once when fetching, else where the owned partition will start.

        A partition awaiting a seek starts fetching there now (paused if held).

        Raises:
            NotAssignedError: ``partition`` is not owned by this consumer.
        """
        if partition in self._fetching:
            return [Seek(partition, offset)]
        if partition in self._awaiting_seek and partition in owned:
            self._awaiting_seek.discard(partition)
            self._fetching.add(partition)
            ops: list[FetchOp] = [Assign({partition: offset})]
            if partition in self._held:
                self._held.discard(partition)
                self._paused.add(partition)
                ops.append(Pause(frozenset({partition})))
            return ops
        if partition in owned:
            self._seek_overrides[partition] = offset
            return []
        raise NotAssignedError(f"cannot seek {partition}: it is not assigned to this consumer")

    def pause(
        self, partitions: Collection[TopicPartition], owned: Collection[TopicPartition]
    ) -> list[FetchOp]:
        """``pause()``: fetching partitions pause now, owned ones as they start fetching."""
        now = frozenset(self._fetching.intersection(partitions))
        self._paused.update(now)
        self._held.update(tp for tp in partitions if tp in owned and tp not in now)
        return [Pause(now)] if now else []

    def resume(self, partitions: Collection[TopicPartition]) -> list[FetchOp]:
        """``resume()``: undo :meth:`pause` (also of partitions held before starting)."""
        now = frozenset(self._fetching.intersection(partitions))
        self._paused.difference_update(now)
        self._held.difference_update(partitions)
        return [Resume(now)] if now else []
