"""A member listener for the machines' property tests (both protocols use it)."""

from __future__ import annotations


class StateSeen:
    """The member's listener: the state it was last told, checked against the member's."""

    def __init__(self) -> None:
        self.state: object = None

    def started(self, state: object, now: float) -> None:
        assert self.state is None
        self.state = state

    def state_changed(self, old: object, new: object, now: float) -> None:
        assert old is self.state
        assert new is not old
        self.state = new
