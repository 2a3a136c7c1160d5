"""The transition-table machinery both members use: lookup, errors, Mermaid rendering.

Each member's legal transitions live in one table, ``(state, trigger) -> next
state`` (:mod:`kgroup.membership.consumer.states`,
:mod:`kgroup.membership.classic.states`). A member changes state only through
:meth:`TransitionTable.next`, so a transition missing from its table is a bug
that raises :class:`IllegalTransitionError` instead of silently corrupting the
member. :meth:`TransitionTable.render_mermaid` draws the same table for the
docs; unit tests keep the two in step.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Generic, TypeVar

__all__ = ["IllegalTransitionError", "TransitionTable", "from_each", "replace_between"]

_St = TypeVar("_St", bound=enum.Enum)
_Tr = TypeVar("_Tr", bound=enum.Enum)


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


class TransitionTable(Generic[_St, _Tr]):
    """One machine's legal transitions, and the diagram of them between two doc markers.

    ``initial`` is where the machine starts, ``finals`` where it ends. In the
    docs the generated diagram stands between two HTML comments naming it
    ``diagram`` (``begin`` names the module that draws it, ``module``).
    """

    def __init__(
        self,
        table: Mapping[tuple[_St, _Tr], _St],
        *,
        initial: _St,
        finals: tuple[_St, ...],
        diagram: str,
        module: str,
    ) -> None:
        self.table: Mapping[tuple[_St, _Tr], _St] = MappingProxyType(dict(table))
        self.initial = initial
        self.finals = finals
        self.begin = f"<!-- BEGIN GENERATED: {diagram} ({module}) -->"
        self.end = f"<!-- END GENERATED: {diagram} -->"

    def next(self, state: _St, trigger: _Tr) -> _St:
        """The state ``trigger`` leads to from ``state``; raises :class:`IllegalTransitionError`."""
        try:
            return self.table[(state, trigger)]
        except KeyError:
            raise IllegalTransitionError(state, trigger) from None

    def render_mermaid(self) -> str:
        """The table as a fenced Mermaid state diagram between the doc markers.

        States are ordered as in their enum, edges with the same endpoints
        merged into one edge (labels joined by "; "), so the output is
        deterministic.
        """
        order = {s: i for i, s in enumerate(type(self.initial))}
        labels: dict[tuple[_St, _St], list[str]] = {}
        for (src, trigger), dst in sorted(
            self.table.items(), key=lambda kv: (order[kv[0][0]], order[kv[1]], kv[0][1].name)
        ):
            labels.setdefault((src, dst), []).append(str(trigger.value))
        lines = [self.begin, "```mermaid", "stateDiagram-v2"]
        lines.append(f"    [*] --> {self.initial.name}")
        for (src, dst), names in labels.items():
            lines.append(f"    {src.name} --> {dst.name}: {'; '.join(names)}")
        lines += [f"    {final.name} --> [*]" for final in self.finals]
        lines += ["```", self.end]
        return "\n".join(lines) + "\n"

    def replace_diagram(self, document: str) -> str:
        """``document`` with its diagram block replaced by :meth:`render_mermaid`."""
        return replace_between(document, self.begin, self.end, self.render_mermaid())


def from_each(states: Iterable[_St], edges: Mapping[_Tr, _St]) -> dict[tuple[_St, _Tr], _St]:
    """The same ``edges`` (trigger -> next state) out of every one of ``states``.

    For the transitions a whole group of states shares (leaving, a fatal
    error, the poll timer expiring from any in-group state); the states are
    taken in their enum's order, so the table's order does not depend on
    set iteration.
    """
    listed = list(states)
    if not listed:
        return {}
    position = {state: i for i, state in enumerate(type(listed[0]))}
    listed.sort(key=position.__getitem__)
    return {(state, trigger): target for state in listed for trigger, target in edges.items()}


def replace_between(document: str, begin: str, end: str, rendered: str) -> str:
    """``document`` with the text from ``begin`` through ``end`` (and its newline) replaced."""
    start = document.index(begin)
    stop = document.index(end) + len(end) + 1
    return document[:start] + rendered + document[stop:]
