"""States of the new-protocol member and the one table of its legal transitions.

:data:`TRANSITIONS` maps ``(state, trigger)`` to the next state. The member
changes state only through :func:`next_state`, so a transition missing from the
table is a bug that raises :class:`IllegalTransitionError` instead of silently
corrupting the member. :func:`render_mermaid` draws the same table for
``docs/new-protocol.md``; a unit test keeps the two in step.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

__all__ = [
    "DIAGRAM_BEGIN",
    "DIAGRAM_END",
    "TRANSITIONS",
    "IllegalTransitionError",
    "MemberState",
    "Trigger",
    "next_state",
    "render_mermaid",
    "render_table",
    "replace_between",
    "replace_diagram",
]

_St = TypeVar("_St", bound=enum.Enum)
_Tr = TypeVar("_Tr", bound=enum.Enum)


class MemberState(enum.Enum):
    """Where the member stands in the group (the Java client's MemberState)."""

    UNSUBSCRIBED = "not in the group; no heartbeats"
    JOINING = "epoch 0 sent, waiting for an epoch > 0"
    RECONCILING = "target differs from current; committing, running callbacks"
    ACKNOWLEDGING = "reconciled; the next heartbeat (sent at once) acknowledges"
    STABLE = "current == target; heartbeats on the interval"
    FENCED = "fenced by the broker; lost callback, then rejoin with epoch 0"
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


_S = MemberState
_T = Trigger

# The members of the group proper: heartbeating with a (possibly zero) epoch.
_IN_GROUP = (_S.JOINING, _S.RECONCILING, _S.ACKNOWLEDGING, _S.STABLE)


def _table() -> dict[tuple[MemberState, Trigger], MemberState]:
    t: dict[tuple[MemberState, Trigger], MemberState] = {
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
    }
    for state in _IN_GROUP:
        t[(state, _T.FENCED)] = _S.FENCED
        t[(state, _T.FATAL_ERROR)] = _S.FATAL
        t[(state, _T.LEAVE)] = _S.PREPARE_LEAVING
        # Poll expiry skips PREPARE_LEAVING: a stale member runs no revoke
        # callback and commits nothing, it leaves and then reports the loss.
        t[(state, _T.POLL_EXPIRED)] = _S.LEAVING
    return t


TRANSITIONS: Mapping[tuple[MemberState, Trigger], MemberState] = MappingProxyType(_table())


class IllegalTransitionError(RuntimeError):
    """Internal error: a member tried a transition that is not in its transition table.

    Raised by both machines (new-protocol and classic); ``state`` and
    ``trigger`` are members of that machine's state and trigger enums.
    """

    def __init__(self, state: enum.Enum, trigger: enum.Enum) -> None:
        self.state = state
        self.trigger = trigger
        super().__init__(
            f"internal error in kgroup.membership: no transition from {state.name} "
            f"on {trigger.name} ({trigger.value!r}); this is a bug, please report it"
        )


def next_state(state: MemberState, trigger: Trigger) -> MemberState:
    """The state ``trigger`` leads to from ``state``; raises :class:`IllegalTransitionError`."""
    try:
        return TRANSITIONS[(state, trigger)]
    except KeyError:
        raise IllegalTransitionError(state, trigger) from None


DIAGRAM_BEGIN = "<!-- BEGIN GENERATED: membership state diagram (kgroup.membership.states) -->"
DIAGRAM_END = "<!-- END GENERATED: membership state diagram -->"


def render_mermaid() -> str:
    """:data:`TRANSITIONS` as a Mermaid state diagram, fenced and between the doc markers.

    Edges with the same endpoints are merged into one edge with a combined
    label; the output is deterministic (table order of states and triggers).
    """
    return render_table(
        TRANSITIONS,
        initial=MemberState.UNSUBSCRIBED,
        finals=(MemberState.FATAL,),
        begin=DIAGRAM_BEGIN,
        end=DIAGRAM_END,
    )


def render_table(
    table: Mapping[tuple[_St, _Tr], _St],
    *,
    initial: _St,
    finals: tuple[_St, ...],
    begin: str,
    end: str,
) -> str:
    """Any machine's transition ``table`` as a fenced Mermaid diagram between ``begin`` / ``end``.

    Shared by the new-protocol and the classic member. States are ordered as
    in their enum, edges with the same endpoints merged (labels joined by
    "; "), so the output is deterministic.
    """
    order = {s: i for i, s in enumerate(type(initial))}
    labels: dict[tuple[_St, _St], list[str]] = {}
    for (src, trigger), dst in sorted(
        table.items(), key=lambda kv: (order[kv[0][0]], order[kv[1]], kv[0][1].name)
    ):
        labels.setdefault((src, dst), []).append(str(trigger.value))
    lines = [begin, "```mermaid", "stateDiagram-v2"]
    lines.append(f"    [*] --> {initial.name}")
    for (src, dst), names in labels.items():
        lines.append(f"    {src.name} --> {dst.name}: {'; '.join(names)}")
    lines += [f"    {final.name} --> [*]" for final in finals]
    lines += ["```", end]
    return "\n".join(lines) + "\n"


def replace_between(document: str, begin: str, end: str, rendered: str) -> str:
    """``document`` with the text from ``begin`` through ``end`` (and its newline) replaced."""
    start = document.index(begin)
    stop = document.index(end) + len(end) + 1
    return document[:start] + rendered + document[stop:]


def replace_diagram(document: str) -> str:
    """``document`` with the text between the diagram markers replaced by :func:`render_mermaid`.

    ``docs/new-protocol.md`` says how to regenerate its diagram with it.
    """
    return replace_between(document, DIAGRAM_BEGIN, DIAGRAM_END, render_mermaid())
