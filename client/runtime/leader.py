"""The classic leader's assignor input and output as pure functions, shared by the
runtime and the simulator.

A ``RunAssignor`` action carries the members' decoded subscriptions; before
running a :class:`~kgroup.assignors.ConsumerPartitionAssignor` the leader turns
them into the assignor's :class:`~kgroup.assignors.GroupSubscription` and picks
the rebalance protocol its output is validated under; after, it turns the
assignor's :class:`~kgroup.assignors.GroupAssignment` into each member's
:class:`~kgroup.membership.ClassicAssignment` for ``AssignmentComputed``.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgroup.assignors import (
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupSubscription,
    Subscription,
)
from kgroup.assignors import RebalanceProtocol as AssignorProtocol
from kgroup.membership import ClassicAssignment, GroupMember

__all__ = ["group_subscription", "member_assignments", "validation_protocol"]


def group_subscription(members: Iterable[GroupMember]) -> GroupSubscription:
    """The members' subscriptions in the assignor's terms (a -1 generation is None)."""
    return GroupSubscription(
        {
            m.member_id: Subscription(
                topics=tuple(sorted(m.subscription.topics)),
                user_data=m.subscription.user_data,
                owned_partitions=tuple(sorted(m.subscription.owned_partitions)),
                generation_id=(
                    m.subscription.generation_id if m.subscription.generation_id >= 0 else None
                ),
                rack_id=m.subscription.rack_id,
                group_instance_id=m.instance_id,
            )
            for m in members
        }
    )


def validation_protocol(assignor: ConsumerPartitionAssignor) -> AssignorProtocol:
    """COOPERATIVE when the assignor supports it (its output may withhold moving partitions)."""
    if AssignorProtocol.COOPERATIVE in assignor.supported_protocols:
        return AssignorProtocol.COOPERATIVE
    return AssignorProtocol.EAGER


def member_assignments(
    result: GroupAssignment, members: Iterable[GroupMember]
) -> dict[str, ClassicAssignment]:
    """Each member's share of a validated ``result`` (a member it left out gets nothing)."""
    return {
        m.member_id: ClassicAssignment(
            frozenset(result.partitions(m.member_id)),
            result.assignments[m.member_id].user_data
            if m.member_id in result.assignments
            else None,
        )
        for m in members
    }
