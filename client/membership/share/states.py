"""States of the share-group member and the one table of its legal transitions.

A share member owns no partition exclusively: records are acquired per fetch
under a time-limited lock, so a new assignment needs no revocation, no
callback and no commit before it takes effect. The machine is therefore the
new-protocol one without its reconciliation states: the member applies each
assignment in the step that brings it. :data:`MACHINE` draws the diagram for
``docs/share-groups.md``; a unit test keeps the two in step.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from kgroup.membership.common.transitions import TransitionTable, from_each

__all__ = ["IN_GROUP", "MACHINE", "TRANSITIONS", "ShareMemberState", "ShareTrigger"]


class ShareMemberState(enum.Enum):
    """Where the share member stands in the group (the Java client's MemberState, less
    the states a revocation needs)."""

    UNSUBSCRIBED = "not in the group; no heartbeats"
    JOINING = "epoch 0 sent, waiting for an epoch > 0"
    STABLE = "in the group; the latest assignment applied; heartbeats on the interval"
    FENCED = "fenced by the broker: stop fetching, rejoin with epoch 0"
    PREPARE_LEAVING = "stopped fetching; acknowledgements being flushed before the leave"
    LEAVING = "leave heartbeat (-1) being sent, once"
    STALE = "left because poll was not called in time; rejoins on the next poll"
    FATAL = "unrecoverable; no more heartbeats"


class ShareTrigger(enum.Enum):
    """Why the share member changes state; the edge labels of the diagram."""

    SUBSCRIBE = "subscribe"
    JOINED = "epoch > 0"
    FENCED = "fenced"
    RELEASED = "fetching stopped"
    FATAL_ERROR = "fatal error"
    LEAVE = "unsubscribe / close"
    FLUSHED = "acknowledgements flushed"
    CLOSE_TIMEOUT = "close deadline"
    LEAVE_SENT = "leave sent"
    POLL_EXPIRED = "poll timer expired"
    STALE_LEAVE_SENT = "leave sent (stale)"
    REJOIN = "poll after stale"


_S = ShareMemberState
_T = ShareTrigger

IN_GROUP: frozenset[ShareMemberState] = frozenset({_S.JOINING, _S.STABLE})
"""The members of the group proper: heartbeating with a (possibly zero) epoch."""

MACHINE: TransitionTable[ShareMemberState, ShareTrigger] = TransitionTable(
    {
        (_S.UNSUBSCRIBED, _T.SUBSCRIBE): _S.JOINING,
        (_S.JOINING, _T.JOINED): _S.STABLE,
        # No lost callback to wait for: the records it held return to the
        # group when their locks expire, and the member rejoins at once.
        (_S.FENCED, _T.RELEASED): _S.JOINING,
        # While it flushes, the member heeds no heartbeat answer: it is leaving.
        (_S.PREPARE_LEAVING, _T.FLUSHED): _S.LEAVING,
        (_S.PREPARE_LEAVING, _T.CLOSE_TIMEOUT): _S.LEAVING,
        (_S.LEAVING, _T.LEAVE_SENT): _S.UNSUBSCRIBED,
        (_S.LEAVING, _T.STALE_LEAVE_SENT): _S.STALE,
        (_S.STALE, _T.REJOIN): _S.JOINING,
        (_S.STALE, _T.LEAVE): _S.UNSUBSCRIBED,
        **from_each(
            IN_GROUP,
            {
                _T.FENCED: _S.FENCED,
                _T.FATAL_ERROR: _S.FATAL,
                _T.LEAVE: _S.PREPARE_LEAVING,
                # A stale member flushes nothing: its acknowledgements would be
                # refused (its records go back to the group when their locks expire).
                _T.POLL_EXPIRED: _S.LEAVING,
            },
        ),
    },
    initial=ShareMemberState.UNSUBSCRIBED,
    finals=(ShareMemberState.FATAL,),
    diagram="share membership state diagram",
    module=__name__,
)
"""The table with its lookup and its diagram for ``docs/share-groups.md``."""

TRANSITIONS: Mapping[tuple[ShareMemberState, ShareTrigger], ShareMemberState] = MACHINE.table
