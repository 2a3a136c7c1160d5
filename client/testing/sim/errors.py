"""Errors of the simulator, rooted in :class:`kgroup.errors.KgroupError`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kgroup.testing.groups.errors import ScenarioError, SimulationError

if TYPE_CHECKING:
    from kgroup.testing.sim.invariants import Violation

__all__ = ["InvariantViolationError", "ScenarioError", "SimulationError"]


class InvariantViolationError(SimulationError):
    """A safety or liveness invariant failed during a run.

    ``violation`` says which one, when (virtual seconds) and what was seen.
    """

    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation
