"""Noticing a group that the coordinator left with partitions owned by nobody (sans-IO).

Apache Kafka computes a group's assignment only when something asks for it: a
classic rebalance, or a consumer group's epoch bump (a member joining, leaving
or changing its subscription). Some sequences leave a settled group with
partitions of its subscription assigned to nobody and nothing that would ask
again. Seen on Apache Kafka 4.4: a static member's consumer-protocol replacement
converts a classic group whose cooperative rebalance is between its two rounds;
the consumer group inherits the first round's assignment, in which the
partitions being moved belong to nobody, and static replacements bump no
epoch, so they stay unowned for good.

:class:`UnownedWatch` decides when a member should look (it owns nothing and
is settled), and when what it saw is a stuck group rather than a rebalance in
progress: unowned partitions in two looks ``confirm`` seconds apart, the group
settled both times and the member's own generation or epoch unchanged between
them. The runtime then asks the member to leave and join again
(:class:`~kgroup.membership.RejoinRequested`): that join is what makes the
coordinator assign again. A member that owns nothing gives nothing up.

Pure bookkeeping, time passed in: the driver performs the looks (a describe
of the group and the metadata of its topics,
:meth:`kgroup.admin.GroupDescription.unowned_partitions`) and feeds their results back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kgroup.types import TopicPartition

if TYPE_CHECKING:
    from kgroup.admin.model import GroupDescription

__all__ = ["LivenessTimes", "UnownedWatch", "unowned_partitions"]


@dataclass(frozen=True, slots=True)
class LivenessTimes:
    """How long an idle member waits before each look, in seconds.

    ``first``: settled and owning nothing for this long before the first look
    (a rebalance that hands it partitions ends sooner). ``confirm``: between
    the look that saw unowned partitions and the one that confirms them.
    ``quiet``: between looks that saw every partition owned (an idle standby
    member, more members than partitions, looks this often).
    """

    first: float = 5.0
    confirm: float = 5.0
    quiet: float = 30.0


def unowned_partitions(
    group: GroupDescription, partition_counts: Mapping[str, int]
) -> frozenset[TopicPartition] | None:
    """``group.unowned_partitions(partition_counts)``: what a look found (None: not settled)."""
    return group.unowned_partitions(partition_counts)


class UnownedWatch:
    """When an idle member should look at its group, and when to rejoin to repair it."""

    def __init__(self, times: LivenessTimes | None = None) -> None:
        self._times = times or LivenessTimes()
        self._key: int | None = None  # the member's generation / epoch while idle
        self._next_look: float | None = None
        self._looking = False
        self._look_round = 0  # the watch round a look under way belongs to
        self._round = 0  # bumped whenever what was seen is forgotten
        self._seen_unowned_at: float | None = None

    @property
    def times(self) -> LivenessTimes:
        """The waits in force."""
        return self._times

    def observe(self, now: float, *, idle: bool, generation: int) -> None:
        """The member's state after a step.

        ``idle``: settled, subscribed, owning nothing. ``generation``: its
        generation (classic) or epoch (consumer protocol); a change ends what
        was seen, since the group has moved on.
        """
        if not idle:
            self._reset()
            return
        if self._key != generation:
            self._reset()
            self._key = generation
            self._next_look = now + self._times.first

    def _reset(self) -> None:
        # A look under way still ends; its result is dropped (see looked).
        self._round += 1
        self._key = None
        self._next_look = None
        self._seen_unowned_at = None

    def next_deadline(self) -> float | None:
        """When the next look is due, or None (not idle, or a look under way)."""
        return None if self._looking else self._next_look

    def due(self, now: float) -> bool:
        """Whether a look should start now; if so it counts as started."""
        if self._looking or self._next_look is None or now < self._next_look:
            return False
        self._looking = True
        self._look_round = self._round
        self._next_look = None
        return True

    def looked(self, now: float, unowned: frozenset[TopicPartition] | None) -> str | None:
        """A look ended: what it found unowned (None: could not tell).

        Returns the reason to give the member's rejoin when the group is
        stuck, else None (the next look is scheduled while still idle).
        """
        self._looking = False
        if self._key is None or self._look_round != self._round:
            return None  # the member moved on meanwhile: the result is stale
        if not unowned:
            # Every partition owned (quiet), or the group was rebalancing (look
            # again soon: the rebalance may end as stuck as it began).
            self._seen_unowned_at = None
            self._next_look = now + (
                self._times.quiet if unowned is not None else self._times.confirm
            )
            return None
        seen = self._seen_unowned_at
        if seen is None or now - seen < self._times.confirm:
            if seen is None:
                self._seen_unowned_at = now
            self._next_look = now + self._times.confirm
            return None
        self._reset()
        shown = ", ".join(str(tp) for tp in sorted(unowned)[:8])
        more = f" and {len(unowned) - 8} more" if len(unowned) > 8 else ""
        return (
            f"the group has been settled for {now - seen:.1f} s with {len(unowned)} "
            f"partition(s) of its subscription owned by nobody ({shown}{more})"
        )
