"""States of the new-protocol member and the one table of its legal transitions.

:data:`TRANSITIONS` maps ``(state, trigger)`` to the next state. The member
changes state only through :func:`next_state`, so a transition missing from the
table raises :class:`~kgroup.membership.common.IllegalTransitionError`.
:func:`render_mermaid` draws the same table for ``docs/new-protocol.md``; a
unit test keeps the two in step.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kgroup.membership.common.transitions import TransitionTable, from_each

__all__ = [
    "DIAGRAM_BEGIN",
    "DIAGRAM_END",
    "IN_GROUP",
    "MACHINE",
    "TRANSITIONS",
    "MemberState",
    "Trigger",
    "next_state",
    "render_mermaid",
    "replace_diagram",
]


class MemberState(enum.Enum):
    """Where the member stands in the group (the Java client's MemberState)."""

    # Members are singletons compared by identity: hash them by identity too, in C.
    # Enum's own __hash__ is a Python call, and the member tests its state in sets
    # a few dozen times per heartbeat.
    __hash__ = object.__hash__

    UNSUBSCRIBED = "not in the group; no heartbeats"
    JOINING = "epoch 0 sent, waiting for an epoch > 0"
    RECONCILING = "target differs from current; committing, running callbacks"
    ACKNOWLEDGING = "reconciled; the next heartbeat (sent at once) acknowledges"
    STABLE = "current == target; heartbeats on the interval"
    FENCED = "fenced by the broker; lost callback, then rejoin with epoch 0"
    LEAVING_TO_REJOIN = "leave (-1) then rejoin: rejoin refused, or the group stuck"
    PREPARE_LEAVING = "releasing the assignment before the leave heartbeat"
    LEAVING = "leave heartbeat (-1 / -2) being sent, once"
    STALE = "left because poll was not called in time; rejoins on the next poll"
    FATAL = "unrecoverable; no more heartbeats"


class Trigger(enum.Enum):
    """Why the member changes state; the edge labels of the diagram."""

    SUBSCRIBE = "subscribe"
    NEW_TARGET = "new target"
    TARGET_REACHED = "target equals current"
    RECONCILED = "reconciled"
    ACK_SENT = "ack sent"
    ACK_SENT_MORE_PENDING = "ack sent, target pending"
    FENCED = "fenced"
    LOST_RELEASED = "lost callback done"
    FATAL_ERROR = "fatal error"
    LEAVE = "unsubscribe / close"
    RELEASED = "assignment released"
    LEAVE_SENT = "leave sent"
    POLL_EXPIRED = "poll timer expired"
    STALE_LEAVE_SENT = "leave sent (stale)"
    REJOIN = "poll after stale"
    CLOSE_TIMEOUT = "close deadline"
    REJOIN_REFUSED = "rejoin refused, member id still held"
    HELD_LEFT = "held member left"
    REPAIR = "group stuck with unowned partitions"


_S = MemberState
_T = Trigger

IN_GROUP: frozenset[MemberState] = frozenset(
    {_S.JOINING, _S.RECONCILING, _S.ACKNOWLEDGING, _S.STABLE}
)
"""The members of the group proper: heartbeating with a (possibly zero) epoch."""


MACHINE: TransitionTable[MemberState, Trigger] = TransitionTable(
    {
        (_S.UNSUBSCRIBED, _T.SUBSCRIBE): _S.JOINING,
        (_S.JOINING, _T.NEW_TARGET): _S.RECONCILING,
        (_S.STABLE, _T.NEW_TARGET): _S.RECONCILING,
        (_S.ACKNOWLEDGING, _T.NEW_TARGET): _S.RECONCILING,
        (_S.RECONCILING, _T.NEW_TARGET): _S.RECONCILING,
        (_S.RECONCILING, _T.TARGET_REACHED): _S.STABLE,
        (_S.RECONCILING, _T.RECONCILED): _S.ACKNOWLEDGING,
        (_S.ACKNOWLEDGING, _T.ACK_SENT): _S.STABLE,
        (_S.ACKNOWLEDGING, _T.ACK_SENT_MORE_PENDING): _S.RECONCILING,
        (_S.FENCED, _T.LOST_RELEASED): _S.JOINING,
        # A broker before KAFKA-19233 (Apache Kafka 4.0 / 4.1) refuses a rejoin at
        # epoch 0 with FENCED_MEMBER_EPOCH while it still holds the member id at a
        # later epoch, and every broker refuses a static member's with
        # UNRELEASED_INSTANCE_ID: a leave heartbeat (-1) removes the held member,
        # then the member rejoins (docs/new-protocol.md, "Rejoin refused").
        (_S.JOINING, _T.REJOIN_REFUSED): _S.LEAVING_TO_REJOIN,
        (_S.LEAVING_TO_REJOIN, _T.HELD_LEFT): _S.JOINING,
        # A settled member that owns nothing while the group leaves partitions
        # unowned leaves (-1) and joins again: only a join or a subscription
        # change makes the coordinator compute a new target (docs/reliability.md).
        (_S.STABLE, _T.REPAIR): _S.LEAVING_TO_REJOIN,
        (_S.LEAVING_TO_REJOIN, _T.LEAVE): _S.PREPARE_LEAVING,
        (_S.LEAVING_TO_REJOIN, _T.FATAL_ERROR): _S.FATAL,
        # A fence while releasing for a leave: the broker already dropped the
        # member, so no leave heartbeat is sent (as in the Java client).
        (_S.PREPARE_LEAVING, _T.FENCED): _S.UNSUBSCRIBED,
        (_S.PREPARE_LEAVING, _T.FATAL_ERROR): _S.FATAL,
        (_S.PREPARE_LEAVING, _T.RELEASED): _S.LEAVING,
        (_S.PREPARE_LEAVING, _T.CLOSE_TIMEOUT): _S.LEAVING,
        (_S.LEAVING, _T.LEAVE_SENT): _S.UNSUBSCRIBED,
        (_S.LEAVING, _T.STALE_LEAVE_SENT): _S.STALE,
        (_S.FENCED, _T.LEAVE): _S.UNSUBSCRIBED,
        (_S.STALE, _T.LEAVE): _S.UNSUBSCRIBED,
        (_S.STALE, _T.REJOIN): _S.JOINING,
        **from_each(
            IN_GROUP,
            {
                _T.FENCED: _S.FENCED,
                _T.FATAL_ERROR: _S.FATAL,
                _T.LEAVE: _S.PREPARE_LEAVING,
                # Poll expiry skips PREPARE_LEAVING: a stale member runs no revoke
                # callback and commits nothing, it leaves and then reports the loss.
                _T.POLL_EXPIRED: _S.LEAVING,
            },
        ),
    },
    initial=MemberState.UNSUBSCRIBED,
    finals=(MemberState.FATAL,),
    diagram="membership state diagram",
    module=__name__,
)
"""The table with its lookup and its diagram for ``docs/new-protocol.md``."""

TRANSITIONS: Mapping[tuple[MemberState, Trigger], MemberState] = MACHINE.table
DIAGRAM_BEGIN = MACHINE.begin
DIAGRAM_END = MACHINE.end
next_state = MACHINE.next
render_mermaid = MACHINE.render_mermaid
replace_diagram = MACHINE.replace_diagram
