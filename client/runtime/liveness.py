"""Noticing a group that the coordinator left stuck (sans-IO).

Apache Kafka computes a group's assignment only when something asks for it: a
classic rebalance, or a consumer group's epoch bump (a member joining, leaving
or changing its subscription) followed by a consumer-protocol heartbeat or a
classic member's JoinGroup. Two sequences seen on Apache Kafka 4.4 leave a
group stuck with nothing that would ask again:

- **Unowned partitions.** A static member's consumer-protocol replacement
  converts a classic group whose cooperative rebalance is between its two
  rounds: the consumer group inherits the first round's assignment, in which
  the partitions being moved belong to nobody, and static replacements bump no
  epoch. The group is ``Stable`` with partitions owned by nobody, for good.
- **A stalled assignment.** Under migration policy ``upgrade``, the last
  consumer-protocol member of a converted group leaves: the group epoch is
  bumped, but the classic members' heartbeats are answered ``NONE`` and none of
  them rejoins, so the group stays ``Assigning`` and the leaver's partitions
  unowned.

:class:`UnownedWatch` decides when a settled member looks at its group (soon
when it owns nothing, rarely otherwise) and when what it saw twice in a row,
``confirm`` seconds apart and at the same generation or epoch of its own, is a
stuck group rather than a rebalance in progress. Its verdict names the
:class:`Repair`: for unowned partitions a member leaves for good and joins
again (that join makes the coordinator assign) — a member that owns nothing at
once, one that owns partitions (releasing them first) only after the members
holding fewer had their turn; for a stalled assignment a classic member joins
again (its JoinGroup makes the coordinator compute the pending assignment).
The runtime hands the verdict to the member as
:class:`~kgroup.membership.RejoinRequested`.

Pure bookkeeping, time passed in: the driver performs the looks (a describe
of the group and the metadata of its topics) and feeds a :class:`Look` back.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kgroup.types import TopicPartition

if TYPE_CHECKING:
    from kgroup.admin.model import GroupDescription

__all__ = ["NOTHING_SEEN", "LivenessTimes", "Look", "Repair", "UnownedWatch", "Verdict"]


class Repair(enum.Enum):
    """What a member does about a stuck group."""

    REJOIN_AS_NEW = "leave for good, then join as a new member"
    """Unowned partitions: the member's join as a new member bumps the group epoch
    (a static member's rejoin under its instance id would only replace it). A
    member that owns nothing gives nothing up; one that owns partitions
    releases them first (revoke callback, commit), and is asked only when no
    member holding fewer did it."""
    REJOIN = "join again"
    """A stalled assignment: a classic member's JoinGroup makes the coordinator
    compute the assignment the group epoch waits for."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The group is stuck: what to do, and why (for the member's log)."""

    repair: Repair
    reason: str


@dataclass(frozen=True, slots=True)
class LivenessTimes:
    """How long a settled member waits before each look, in seconds.

    ``first``: settled and owning nothing for this long before the first look
    (a rebalance that hands it partitions ends sooner). ``first_busy``: the same
    for a member that owns partitions (it looks only for a stalled assignment,
    rarely: every settled member of a large group does it). ``confirm``: between
    the look that saw the group stuck and the one that confirms it. ``quiet``:
    between looks that saw nothing wrong.
    """

    first: float = 5.0
    first_busy: float = 30.0
    confirm: float = 5.0
    quiet: float = 30.0


@dataclass(frozen=True, slots=True)
class Look:
    """What one look at the group found.

    ``unowned``: partitions of the subscription owned by nobody in a settled
    group (empty: none), None when the group was not settled. ``stalled_epoch``:
    a consumer group's epoch while its assignment lags behind it (``Assigning``),
    else None.
    """

    unowned: frozenset[TopicPartition] | None
    stalled_epoch: int | None = None
    rank: int | None = None
    """This member's place among the group's members ordered by how many partitions
    each holds (then by member id), None if it is not in the description: which
    member that owns partitions repairs unowned ones, and when (see looked)."""

    @classmethod
    def of(
        cls,
        group: GroupDescription,
        partition_counts: Mapping[str, int],
        member_id: str | None = None,
    ) -> Look:
        """The look at ``group`` given its topics' partition counts, seen by ``member_id``."""
        epoch, assigned = group.group_epoch, group.assignment_epoch
        stalled = epoch if epoch is not None and assigned is not None and epoch > assigned else None
        order = sorted(
            group.members,
            key=lambda m: (len(m.assignment | (m.target_assignment or frozenset())), m.member_id),
        )
        ids = [m.member_id for m in order]
        rank = ids.index(member_id) if member_id in ids else None
        return cls(group.unowned_partitions(partition_counts), stalled, rank)


def unowned_partitions(
    group: GroupDescription, partition_counts: Mapping[str, int]
) -> frozenset[TopicPartition] | None:
    """``group.unowned_partitions(partition_counts)`` (for callers holding a description)."""
    return group.unowned_partitions(partition_counts)


NOTHING_SEEN = Look(frozenset())
"""A look that found nothing wrong (also what a failed look counts as)."""


class UnownedWatch:
    """When a settled member should look at its group, and when to repair it."""

    def __init__(self, times: LivenessTimes | None = None) -> None:
        self._times = times or LivenessTimes()
        self._key: tuple[int, bool] | None = None  # (generation / epoch, idle) while settled
        self._next_look: float | None = None
        self._looking = False
        self._look_round = 0  # the watch round a look under way belongs to
        self._round = 0  # bumped whenever what was seen is forgotten
        self._seen: tuple[object, float] | None = None  # (what was stuck, when first seen)

    @property
    def times(self) -> LivenessTimes:
        """The waits in force."""
        return self._times

    def observe(self, now: float, *, settled: bool, idle: bool, generation: int) -> None:
        """The member's state after a step.

        ``settled``: subscribed and holding its assignment with no rebalance
        step under way. ``idle``: settled and owning nothing. ``generation``:
        its generation (classic) or epoch (consumer protocol); a change ends
        what was seen, since the group has moved on.
        """
        if not settled:
            self._reset()
            return
        key = (generation, idle)
        if self._key != key:
            self._reset()
            self._key = key
            self._next_look = now + (self._times.first if idle else self._times.first_busy)

    def _reset(self) -> None:
        # A look under way still ends; its result is dropped (see looked).
        self._round += 1
        self._key = None
        self._next_look = None
        self._seen = None

    def next_deadline(self) -> float | None:
        """When the next look is due, or None (not settled, or a look under way)."""
        return None if self._looking else self._next_look

    def due(self, now: float) -> bool:
        """Whether a look should start now; if so it counts as started."""
        if self._looking or self._next_look is None or now < self._next_look:
            return False
        self._looking = True
        self._look_round = self._round
        self._next_look = None
        return True

    def looked(self, now: float, look: Look) -> Verdict | None:
        """A look ended with ``look``: the repair when the group is stuck, else None.

        The next look is scheduled while the member stays settled.
        """
        self._looking = False
        if self._key is None or self._look_round != self._round:
            return None  # the member moved on meanwhile: the result is stale
        idle = self._key[1]
        stuck: object = None
        # How long the stall must have been seen: one confirmation; for unowned
        # partitions seen by a member that owns some, more, by its rank, so that
        # idle members and the one holding the fewest partitions go first (one
        # leave is enough), and members of other clients, which never repair,
        # only delay the next in line.
        wait = self._times.confirm
        if look.stalled_epoch is not None:
            stuck = ("stalled", look.stalled_epoch)
        elif look.unowned and (idle or look.rank is not None):
            stuck = "unowned"
            if not idle:
                wait = self._times.confirm * (2 + (look.rank or 0))
        if stuck is None:
            # Nothing wrong (quiet), or the group was rebalancing (look again
            # soon: the rebalance may end as stuck as it began).
            self._seen = None
            self._next_look = now + (
                self._times.quiet if look.unowned is not None else self._times.confirm
            )
            return None
        if self._seen is None or self._seen[0] != stuck:
            self._seen = (stuck, now)
        since = self._seen[1]
        if now - since < wait:
            self._next_look = now + min(self._times.confirm, since + wait - now)
            return None
        self._reset()
        if look.stalled_epoch is not None:
            return Verdict(
                Repair.REJOIN,
                f"the group's assignment has waited {now - since:.1f} s for group epoch "
                f"{look.stalled_epoch} with no member asking for it",
            )
        unowned = look.unowned or frozenset()
        shown = ", ".join(str(tp) for tp in sorted(unowned)[:8])
        more = f" and {len(unowned) - 8} more" if len(unowned) > 8 else ""
        return Verdict(
            Repair.REJOIN_AS_NEW,
            f"the group has been settled for {now - since:.1f} s with {len(unowned)} "
            f"partition(s) of its subscription owned by nobody ({shown}{more})",
        )
