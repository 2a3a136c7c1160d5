"""Checks a leader runs on an assignor's output before sending it in SyncGroup."""

from __future__ import annotations

from kgroup.assignors.classic import Cluster, GroupAssignment, GroupSubscription, RebalanceProtocol
from kgroup.errors import AssignmentViolation, InvalidAssignmentError
from kgroup.types import TopicPartition

__all__ = ["validate_assignment"]

_SHOWN = 5  # how many offending partitions a message lists before "..."


def _some(partitions: list[TopicPartition]) -> str:
    shown = ", ".join(str(tp) for tp in sorted(partitions)[:_SHOWN])
    more = len(partitions) - _SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def validate_assignment(
    assignor_name: str,
    cluster: Cluster,
    subscriptions: GroupSubscription,
    assignment: GroupAssignment,
    protocol: RebalanceProtocol,
) -> None:
    """Raise :class:`~kgroup.errors.InvalidAssignmentError` if ``assignment`` breaks a rule.

    The rules, checked in this order (the first broken one is reported):

    1. UNKNOWN_MEMBER: every member in the assignment is in ``subscriptions``.
    2. UNKNOWN_PARTITION: every assigned partition exists in ``cluster``.
    3. UNSUBSCRIBED_TOPIC: members only get partitions of topics they subscribe to.
    4. DUPLICATE_PARTITION: no partition is assigned twice.
    5. DIRECT_TRANSFER (cooperative only): a partition that a member reports as
       owned is not given to another member that does not also report it.
    6. MISSING_PARTITION: every partition of every subscribed topic that the
       cluster knows is assigned, except, under cooperative, partitions withheld
       because an owner is revoking them this round.

    Topics that members subscribe to but the cluster does not know are skipped,
    as the assignors skip them.
    """
    subs = subscriptions.subscriptions

    def fail(violation: AssignmentViolation, detail: str) -> InvalidAssignmentError:
        return InvalidAssignmentError(assignor_name, violation, detail)

    unknown = sorted(set(assignment.assignments) - set(subs))
    if unknown:
        raise fail(
            AssignmentViolation.UNKNOWN_MEMBER,
            f"members {', '.join(map(repr, unknown))} are not in the group",
        )

    owner: dict[TopicPartition, str] = {}
    for member in sorted(assignment.assignments):
        parts = list(assignment.assignments[member].partitions)
        bad = [
            tp for tp in parts if not 0 <= tp.partition < (cluster.partitions_for(tp.topic) or 0)
        ]
        if bad:
            raise fail(
                AssignmentViolation.UNKNOWN_PARTITION,
                f"member {member!r} is assigned {_some(bad)}, unknown to the cluster metadata",
            )
        topics = set(subs[member].topics)
        off_topic = [tp for tp in parts if tp.topic not in topics]
        if off_topic:
            raise fail(
                AssignmentViolation.UNSUBSCRIBED_TOPIC,
                f"member {member!r} is assigned {_some(off_topic)} but subscribes only to "
                f"{sorted(topics)}",
            )
        for tp in parts:
            previous = owner.get(tp)
            if previous is not None:
                whom = (
                    f"member {member!r} twice"
                    if previous == member
                    else (f"members {previous!r} and {member!r}")
                )
                raise fail(AssignmentViolation.DUPLICATE_PARTITION, f"{tp} is assigned to {whom}")
            owner[tp] = member

    claimants: dict[TopicPartition, set[str]] = {}
    for member, sub in subs.items():
        for tp in sub.owned_partitions:
            claimants.setdefault(tp, set()).add(member)

    if protocol is RebalanceProtocol.COOPERATIVE:
        for tp, member in sorted(owner.items()):
            others = claimants.get(tp)
            if others and member not in others:
                raise fail(
                    AssignmentViolation.DIRECT_TRANSFER,
                    f"{tp} is owned by {', '.join(map(repr, sorted(others)))} and assigned to "
                    f"{member!r} in the same round; it must be revoked first",
                )

    missing: list[TopicPartition] = []
    for topic in sorted({t for sub in subs.values() for t in sub.topics}):
        count = cluster.partitions_for(topic) or 0
        for p in range(count):
            tp = TopicPartition(topic, p)
            if tp in owner:
                continue
            if protocol is RebalanceProtocol.COOPERATIVE and tp in claimants:
                # Withheld while its owner revokes it; placed in the next round.
                continue
            missing.append(tp)
    if missing:
        raise fail(
            AssignmentViolation.MISSING_PARTITION,
            f"{_some(missing)} of subscribed topics are assigned to nobody",
        )
