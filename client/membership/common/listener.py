"""A typed observer of a member: told of its state changes as they happen.

The runtime's telemetry implements :class:`MemberListener` and is handed to
the member at construction, so it learns the member's states as the enum
values the transition table moves between, at the time of the event that
moved them, instead of comparing state names after each step. The member
stays sans-IO: a listener is called synchronously inside
:meth:`~kgroup.membership.common.member.MemberBase.handle`, with the ``now``
the member was given; what it does with that is its own business, and what it
raises is not caught (a listener must not raise: it would break the member).
"""

from __future__ import annotations

import enum
from typing import Protocol, TypeVar

__all__ = ["NO_LISTENER", "MemberListener", "NoListener"]

_St_contra = TypeVar("_St_contra", bound=enum.Enum, contravariant=True)


class MemberListener(Protocol[_St_contra]):
    """What a member tells an observer; ``_St_contra`` is the member's state enum."""

    def started(self, state: _St_contra, now: float) -> None:
        """The member handles its first event, in ``state`` (its table's initial state)."""

    def state_changed(self, old: _St_contra, new: _St_contra, now: float) -> None:
        """The member moved from ``old`` to ``new`` (never equal) handling an event at ``now``."""


class NoListener:
    """The default listener: nothing is told anything."""

    def started(self, state: enum.Enum, now: float) -> None:
        """Nothing."""

    def state_changed(self, old: enum.Enum, new: enum.Enum, now: float) -> None:
        """Nothing."""


NO_LISTENER = NoListener()
