"""Partition assignors: pure code, no I/O.

Classic protocol (JoinGroup/SyncGroup, the leader assigns):
:class:`ConsumerPartitionAssignor` and the built-ins :class:`RangeAssignor`
(``range``), :class:`RoundRobinAssignor` (``roundrobin``), :class:`StickyAssignor`
(``sticky``) and :class:`CooperativeStickyAssignor` (``cooperative-sticky``);
:func:`resolve_assignors` for ``partition.assignment.strategy``;
:func:`validate_assignment` for the leader's check before SyncGroup;
:func:`use_rack_aware` for whether rack-aware placement (KIP-881) applies.

Consumer protocol (KIP-848, the broker assigns; module
``kgroup.assignors.consumer_protocol``): :class:`PartitionAssignor`, and
:class:`UniformAssignor` (``uniform``) and :class:`RangeServerAssignor`
(``range``), which reproduce the broker's assignors for offline use.

See ``docs/assignors.md``.
"""

from kgroup.assignors._common import use_rack_aware
from kgroup.assignors.classic import (
    Assignment,
    Cluster,
    ConsumerPartitionAssignor,
    GroupAssignment,
    GroupMetadata,
    GroupSubscription,
    RebalanceProtocol,
    Subscription,
)
from kgroup.assignors.consumer_protocol import (
    AssignmentSpec,
    AssignorMetadata,
    MemberAssignment,
    MemberSpec,
    PartitionAssignor,
    RangeServerAssignor,
    SubscriptionType,
    TargetAssignment,
    TopicMetadata,
    UniformAssignor,
)
from kgroup.assignors.range import RangeAssignor
from kgroup.assignors.resolve import BUILTIN_ASSIGNORS, resolve_assignors
from kgroup.assignors.roundrobin import RoundRobinAssignor
from kgroup.assignors.sticky import CooperativeStickyAssignor, StickyAssignor
from kgroup.assignors.validation import validate_assignment
from kgroup.errors import AssignmentViolation, AssignorError, InvalidAssignmentError

__all__ = [
    "BUILTIN_ASSIGNORS",
    "Assignment",
    "AssignmentSpec",
    "AssignmentViolation",
    "AssignorError",
    "AssignorMetadata",
    "Cluster",
    "ConsumerPartitionAssignor",
    "CooperativeStickyAssignor",
    "GroupAssignment",
    "GroupMetadata",
    "GroupSubscription",
    "InvalidAssignmentError",
    "MemberAssignment",
    "MemberSpec",
    "PartitionAssignor",
    "RangeAssignor",
    "RangeServerAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "SubscriptionType",
    "TargetAssignment",
    "TopicMetadata",
    "UniformAssignor",
    "resolve_assignors",
    "use_rack_aware",
    "validate_assignment",
]
