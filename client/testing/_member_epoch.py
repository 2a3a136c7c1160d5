"""KIP-848's member epoch rule, as both in-process coordinators apply it.

The fake broker (:mod:`kgroup.testing.fake`) and the simulator
(:mod:`kgroup.testing.sim`) model a consumer group coordinator differently,
but they fence a heartbeat's member epoch by the same rule as the broker's
``throwIfMemberEpochIsInvalid``.
"""

from __future__ import annotations

from kgroup.types import TopicIdPartition

__all__ = ["member_epoch_fenced"]


def member_epoch_fenced(
    epoch: int,
    *,
    current: int,
    previous: int,
    owned: frozenset[TopicIdPartition] | None,
    assigned: frozenset[TopicIdPartition],
) -> bool:
    """Whether a heartbeat at ``epoch`` is answered FENCED_MEMBER_EPOCH.

    The member's record is at ``current`` (``previous`` before that) with
    ``assigned``; ``owned`` is what the heartbeat says the member owns (None:
    not sent). A greater epoch is fenced. A smaller one is accepted only when
    it is the previous epoch and the member owns no more than its assignment:
    the acknowledgement of the new epoch got lost.
    """
    if epoch > current:
        return True
    if epoch < current:
        return epoch != previous or owned is None or not owned <= assigned
    return False
