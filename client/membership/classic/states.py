"""States of the classic member and the one table of its legal transitions.

:data:`CLASSIC_TRANSITIONS` maps ``(state, trigger)`` to the next state. The
classic member changes state only through :func:`next_classic_state`, so a
transition missing from the table raises
:class:`~kgroup.membership.common.IllegalTransitionError`.
:func:`render_classic_mermaid` draws the same table for
``docs/classic-protocol.md``; a unit test keeps the two in step.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kgroup.membership.common.transitions import TransitionTable, from_each

__all__ = [
    "CLASSIC_DIAGRAM_BEGIN",
    "CLASSIC_DIAGRAM_END",
    "CLASSIC_MACHINE",
    "CLASSIC_TRANSITIONS",
    "IN_GROUP",
    "ClassicState",
    "ClassicTrigger",
    "next_classic_state",
    "render_classic_mermaid",
    "replace_classic_diagram",
]


class ClassicState(enum.Enum):
    """Where a classic member stands (the Java client's MemberState, split finer)."""

    UNJOINED = "not in the group"
    PREPARING = "before JoinGroup: revoking (eager), revoking unsubscribed (cooperative), or lost"
    JOINING = "JoinGroup being sent or in flight"
    AWAITING_ASSIGNOR = "leader: the runtime runs the assignor"
    SYNCING = "SyncGroup being sent or in flight"
    RECONCILING = "applying the SyncGroup assignment: commit, callbacks, fetching"
    STABLE = "assignment installed; heartbeating"
    STALE = "left because poll was not called in time; rejoins on the next poll"
    LEAVING = "releasing the assignment, then LeaveGroup (dynamic members)"
    FATAL = "unrecoverable; no more requests"
    CLOSED = "closed; every event is ignored"


class ClassicTrigger(enum.Enum):
    """Why the classic member changes state; the edge labels of the diagram."""

    SUBSCRIBE = "subscribe"
    PREPARED = "prepared"
    MEMBER_ID_REQUIRED = "MEMBER_ID_REQUIRED"
    JOINED_AS_LEADER = "joined (leader)"
    JOINED_AS_FOLLOWER = "joined (follower)"
    ASSIGNMENT_COMPUTED = "assignment computed"
    SYNCED = "synced"
    RECONCILED = "reconciled"
    REJOIN = "rejoin needed"
    RESET = "generation reset"
    POLL_EXPIRED = "poll timer expired"
    POLLED = "poll after stale"
    LEAVE = "unsubscribe / close"
    LEFT = "left"
    FATAL_ERROR = "fatal error"
    CLOSE = "closed"


_S = ClassicState
_T = ClassicTrigger

IN_GROUP: frozenset[ClassicState] = frozenset(
    {_S.PREPARING, _S.JOINING, _S.AWAITING_ASSIGNOR, _S.SYNCING, _S.RECONCILING, _S.STABLE}
)
"""States in which the member takes part in the group's rebalances."""


CLASSIC_MACHINE: TransitionTable[ClassicState, ClassicTrigger] = TransitionTable(
    {
        (_S.UNJOINED, _T.SUBSCRIBE): _S.PREPARING,
        (_S.PREPARING, _T.PREPARED): _S.JOINING,
        (_S.JOINING, _T.MEMBER_ID_REQUIRED): _S.JOINING,
        (_S.JOINING, _T.JOINED_AS_LEADER): _S.AWAITING_ASSIGNOR,
        (_S.JOINING, _T.JOINED_AS_FOLLOWER): _S.SYNCING,
        (_S.AWAITING_ASSIGNOR, _T.ASSIGNMENT_COMPUTED): _S.SYNCING,
        (_S.SYNCING, _T.SYNCED): _S.RECONCILING,
        (_S.RECONCILING, _T.RECONCILED): _S.STABLE,
        # Rejoin without a reset: REBALANCE_IN_PROGRESS, a failed SyncGroup, a
        # subscription or metadata change, a cooperative revocation.
        (_S.SYNCING, _T.REJOIN): _S.PREPARING,
        (_S.RECONCILING, _T.REJOIN): _S.PREPARING,
        (_S.STABLE, _T.REJOIN): _S.PREPARING,
        (_S.STALE, _T.POLLED): _S.PREPARING,
        (_S.STALE, _T.LEAVE): _S.LEAVING,
        (_S.LEAVING, _T.LEFT): _S.UNJOINED,
        (_S.LEAVING, _T.CLOSE): _S.CLOSED,
        # A fatal error heard while releasing ends an unsubscribe's leave there.
        (_S.LEAVING, _T.FATAL_ERROR): _S.FATAL,
        (_S.UNJOINED, _T.CLOSE): _S.CLOSED,
        (_S.FATAL, _T.CLOSE): _S.CLOSED,
        # ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID: the assignment is lost. A
        # member in PREPARING stays there: its preparation already leads to a join.
        **from_each(IN_GROUP - {_S.PREPARING}, {_T.RESET: _S.PREPARING}),
        **from_each(
            IN_GROUP,
            {_T.POLL_EXPIRED: _S.STALE, _T.LEAVE: _S.LEAVING, _T.FATAL_ERROR: _S.FATAL},
        ),
    },
    initial=ClassicState.UNJOINED,
    finals=(ClassicState.CLOSED,),
    diagram="classic member state diagram",
    module=__name__,
)
"""The table with its lookup and its diagram for ``docs/classic-protocol.md``."""

CLASSIC_TRANSITIONS: Mapping[tuple[ClassicState, ClassicTrigger], ClassicState] = (
    CLASSIC_MACHINE.table
)
CLASSIC_DIAGRAM_BEGIN = CLASSIC_MACHINE.begin
CLASSIC_DIAGRAM_END = CLASSIC_MACHINE.end
next_classic_state = CLASSIC_MACHINE.next
render_classic_mermaid = CLASSIC_MACHINE.render_mermaid
replace_classic_diagram = CLASSIC_MACHINE.replace_diagram
