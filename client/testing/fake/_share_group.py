"""The fake broker's share groups (KIP-932): membership, epochs and the simple assignor.

A :class:`ShareGroup` answers ShareGroupHeartbeat as Apache Kafka 4.x's group
coordinator does, as far as a client can observe it:

- the member generates its id; epoch 0 joins (or rejoins under the same id),
  -1 leaves, any other epoch must be the member's current one or the one
  before it (a lost response), else ``FENCED_MEMBER_EPOCH``; an id the group
  does not know is ``UNKNOWN_MEMBER_ID``; an empty id, an epoch below -1 or a
  join without topics is ``INVALID_REQUEST``;
- the group epoch grows on every change of members, subscriptions or the
  subscribed topics' partitions, and a member's epoch catches up with it on
  the member's own heartbeat;
- the first answer to a join carries an empty assignment and the partitions
  come with the next heartbeat (the real broker first initialises the share
  partitions' state);
- the assignment is the simple assignor's outcome: every partition of the
  subscribed topics is assigned, to one member while there are at least as
  many partitions as members, and otherwise to ``ceil(members / partitions)``
  members each, every member getting its share (see :func:`simple_assignment`);
- a member that does not heartbeat within the session timeout is removed on
  the broker's sweep (:meth:`ShareGroup.expire`).

No I/O and no kio: :mod:`._share_wire` translates requests into these calls,
and :mod:`._share_data` is told (through ``on_member_gone``) when a member
leaves, so that its share sessions close and its records are released.
"""

from __future__ import annotations

import itertools
import math
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kgroup.testing.fake._topics import Topics
from kgroup.types import TopicIdPartition

__all__ = [
    "ShareGroup",
    "ShareHeartbeatOutcome",
    "ShareMemberView",
    "simple_assignment",
    "validate_heartbeat",
]


@dataclass(frozen=True, slots=True)
class ShareMemberView:
    """One share-group member as the coordinator keeps it, at the moment it was read."""

    member_id: str
    epoch: int
    previous_epoch: int
    client_id: str
    rack_id: str | None
    subscribed_names: tuple[str, ...]
    assigned: frozenset[TopicIdPartition]
    """What the member was last told it owns (empty until its second heartbeat)."""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatOutcome:
    """The coordinator's answer to one ShareGroupHeartbeat.

    ``assignment`` is None when the member's assignment did not change (the
    response then carries none).
    """

    error_code: ErrorCode
    error_message: str | None = None
    member_epoch: int = -1
    assignment: frozenset[TopicIdPartition] | None = None


@dataclass(eq=False)
class _Member:
    member_id: str
    epoch: int
    previous_epoch: int
    client_id: str
    rack_id: str | None
    subscribed: tuple[str, ...]
    deadline: float
    order: int
    assigned: frozenset[TopicIdPartition] = frozenset()
    initialised: bool = False
    """Whether the member has had its join answered (the empty first assignment)."""

    def view(self) -> ShareMemberView:
        return ShareMemberView(
            member_id=self.member_id,
            epoch=self.epoch,
            previous_epoch=self.previous_epoch,
            client_id=self.client_id,
            rack_id=self.rack_id,
            subscribed_names=self.subscribed,
            assigned=self.assigned,
        )


def simple_assignment(
    subscriptions: Mapping[str, Sequence[str]],
    partitions: Mapping[str, tuple[uuid.UUID, int]],
) -> dict[str, frozenset[TopicIdPartition]]:
    """The simple share assignor's outcome: every subscribed partition to some member.

    ``subscriptions`` maps member ids, in the order they joined, to their topic
    names; ``partitions`` maps each existing topic name to its id and partition
    count (names missing from it are not assigned).

    Per topic, with ``M`` subscribed members and ``P`` partitions, each
    partition goes to ``ceil(M / P)`` members (one while ``P >= M``) and the
    ``ceil(M / P) * P`` shares are dealt out in turn, so any two members'
    counts differ by at most one and no member gets a partition twice. Kafka's
    assignor also keeps members' earlier partitions where balance allows; the
    fake recomputes from the join order, which is just as stable while the
    members do not change.
    """
    out: dict[str, set[TopicIdPartition]] = {m: set() for m in subscriptions}
    dealt = 0  # start each topic's deal where the last one ended, to spread topics out
    for name in sorted({t for names in subscriptions.values() for t in names}):
        if name not in partitions:
            continue
        topic_id, count = partitions[name]
        members = [m for m, names in subscriptions.items() if name in names]
        if not members or count < 1:
            continue
        sharing = math.ceil(len(members) / count)
        shares = [p for _round in range(sharing) for p in range(count)]
        # Member k takes the contiguous run of shares between ceil(k*L/M) and
        # ceil((k+1)*L/M): at most ceil(L/M) <= P of them, so no repeats.
        total = len(shares)
        rotated = members[dealt % len(members) :] + members[: dealt % len(members)]
        for k, member in enumerate(rotated):
            lo = math.ceil(k * total / len(rotated))
            hi = math.ceil((k + 1) * total / len(rotated))
            out[member].update(TopicIdPartition(topic_id, p) for p in shares[lo:hi])
        dealt += total
    return {m: frozenset(parts) for m, parts in out.items()}


class ShareGroup:
    """One share group of the fake broker.

    Changes happen under the broker's lock (``lock``); the views take it
    themselves, so a test may read them from any thread.
    """

    def __init__(
        self,
        group_id: str,
        *,
        heartbeat_interval_ms: int,
        session_timeout_ms: int,
        topics: Topics,
        lock: threading.RLock,
        on_member_gone: Callable[[str, str], None],
    ) -> None:
        self.group_id = group_id
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.session_timeout_ms = session_timeout_ms
        self._topics = topics
        self._lock = lock
        self._on_member_gone = on_member_gone
        self._members: dict[str, _Member] = {}
        self._order = itertools.count()
        self._group_epoch = 0
        self._targets: dict[str, frozenset[TopicIdPartition]] = {}

    # -------------------------------------------------------------- requests

    def heartbeat(
        self,
        *,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed: Sequence[str] | None,
        client_id: str,
        now: float,
    ) -> ShareHeartbeatOutcome:
        """Handle one ShareGroupHeartbeat at ``now`` (the broker's clock, seconds)."""
        refused = validate_heartbeat(member_id, member_epoch, subscribed)
        if refused is not None:
            return refused
        if member_epoch == -1:
            return self._leave(member_id)
        member = self._members.get(member_id)
        bump = False
        if member_epoch == 0:
            if member is None:
                member = self._members[member_id] = _Member(
                    member_id=member_id,
                    epoch=0,
                    previous_epoch=0,
                    client_id=client_id,
                    rack_id=rack_id,
                    subscribed=tuple(sorted(set(subscribed or ()))),
                    deadline=0.0,
                    order=next(self._order),
                )
                bump = True
            else:
                # A rejoin under the same id starts over: the empty first answer again.
                member.initialised = False
                member.assigned = frozenset()
        elif member is None:
            return ShareHeartbeatOutcome(
                ErrorCode.unknown_member_id,
                f"Member {member_id} is not a member of share group {self.group_id}.",
            )
        elif member_epoch not in (member.epoch, member.previous_epoch):
            return ShareHeartbeatOutcome(
                ErrorCode.fenced_member_epoch,
                f"The share group member has epoch {member_epoch}; the coordinator knows "
                f"{member.epoch}. The member must abandon all its partitions and rejoin.",
            )
        member.deadline = now + self.session_timeout_ms / 1000
        member.client_id = client_id
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed is not None:
            names = tuple(sorted(set(subscribed)))
            if names != member.subscribed:
                member.subscribed = names
                bump = True
        self._recompute(bump)
        changed = member_epoch == 0
        if member.epoch != self._group_epoch:
            member.previous_epoch, member.epoch = member.epoch, self._group_epoch
            changed = True
        if not member.initialised:
            member.initialised = True
            return ShareHeartbeatOutcome(ErrorCode.none, None, member.epoch, frozenset())
        target = self._targets.get(member_id, frozenset())
        if target != member.assigned:
            member.assigned = target
            changed = True
        return ShareHeartbeatOutcome(
            ErrorCode.none, None, member.epoch, member.assigned if changed else None
        )

    def _leave(self, member_id: str) -> ShareHeartbeatOutcome:
        if member_id not in self._members:
            return ShareHeartbeatOutcome(
                ErrorCode.unknown_member_id,
                f"Member {member_id} is not a member of share group {self.group_id}.",
            )
        self.remove(member_id)
        return ShareHeartbeatOutcome(ErrorCode.none, None, -1, None)

    def remove(self, member_id: str) -> None:
        """Remove ``member_id`` (left, expired, or removed by the test): the group epoch
        moves on, its share sessions close and its acquired records are released."""
        if self._members.pop(member_id, None) is None:
            return
        self._recompute(True)
        self._on_member_gone(self.group_id, member_id)

    def expire(self, now: float) -> list[str]:
        """Remove the members whose session timed out by ``now``; their ids."""
        gone = [m.member_id for m in self._members.values() if m.deadline <= now]
        for member_id in gone:
            self.remove(member_id)
        return gone

    def _recompute(self, bump: bool) -> None:
        """The targets afresh; the group epoch moves on when the members or their
        subscriptions changed (``bump``) or a subscribed topic appeared or grew."""
        targets = self._compute()
        if bump or targets != self._targets:
            self._group_epoch += 1
            self._targets = targets

    def _compute(self) -> dict[str, frozenset[TopicIdPartition]]:
        partitions = {
            name: (topic.topic_id, topic.partitions) for name, topic in self._topics.by_name.items()
        }
        return simple_assignment(
            {m.member_id: m.subscribed for m in self._members.values()}, partitions
        )

    # ------------------------------------------------------------------ views

    @property
    def members(self) -> dict[str, ShareMemberView]:
        """Every member, by member id, in the order they joined."""
        with self._lock:
            return {mid: m.view() for mid, m in self._members.items()}

    @property
    def epoch(self) -> int:
        """The group epoch."""
        with self._lock:
            return self._group_epoch

    @property
    def state(self) -> str:
        """``Empty`` or ``Stable``, as ShareGroupDescribe reports it."""
        with self._lock:
            return "Stable" if self._members else "Empty"

    @property
    def target(self) -> dict[str, frozenset[TopicIdPartition]]:
        """What the assignor gives each member now (members get it on their next heartbeat)."""
        with self._lock:
            return self._compute()

    def member_epoch(self, member_id: str) -> int | None:
        """The epoch of ``member_id``, None if it is not a member."""
        with self._lock:
            member = self._members.get(member_id)
            return None if member is None else member.epoch


def validate_heartbeat(
    member_id: str, member_epoch: int, subscribed: Sequence[str] | None
) -> ShareHeartbeatOutcome | None:
    """INVALID_REQUEST for a heartbeat no coordinator takes, whatever its group; else None."""
    if not member_id:
        return _invalid("MemberId can't be empty.")
    if member_epoch < -1:
        return _invalid(f"MemberEpoch is {member_epoch}; it must be -1 or greater.")
    if member_epoch == 0 and not subscribed:
        return _invalid("SubscribedTopicNames must be set in first request.")
    return None


def _invalid(message: str) -> ShareHeartbeatOutcome:
    return ShareHeartbeatOutcome(ErrorCode.invalid_request, message)
