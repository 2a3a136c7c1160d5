"""KIP-848 ConsumerGroupHeartbeat rules of the group model (:mod:`kgroup.testing.groups`).

A heartbeat is read by the broker's rules: a null field leaves the member's
value as it was, and the member epoch is fenced as the broker's
``throwIfConsumerGroupMemberEpochIsInvalid`` does.
"""

from __future__ import annotations

from typing import TypeVar

from kgroup.types import TopicIdPartition

__all__ = ["member_epoch_fenced", "sent_or_kept"]

_T = TypeVar("_T")


def sent_or_kept(sent: _T | None, current: _T) -> _T:
    """A member's value after a heartbeat: the field as ``sent``, or ``current``
    when the field is null (a heartbeat sends only what changed)."""
    return current if sent is None else sent


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
