"""The classic leader's assignor input as pure functions, shared by the runtime and the simulator.

A ``RunAssignor`` action carries the members' decoded subscriptions; before
running a :class:`~kgroup.assignors.ConsumerPartitionAssignor` the leader turns
them into the assignor's :class:`~kgroup.assignors.GroupSubscription` and picks
the rebalance protocol its output is validated under.
"""

from __future__ import annotations

from collections.abc import Iterable

from kgroup.assignors import ConsumerPartitionAssignor, GroupSubscription, Subscription
from kgroup.assignors import RebalanceProtocol as AssignorProtocol
from kgroup.membership import GroupMember

__all__ = ["group_subscription", "validation_protocol"]


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
