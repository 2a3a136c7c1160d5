"""Errors of the simulator, rooted in :class:`kgroup.errors.KgroupError`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kgroup.errors import KgroupError

if TYPE_CHECKING:
    from kgroup.testing.sim.invariants import Violation

__all__ = ["InvariantViolationError", "ScenarioError", "SimulationError"]


class SimulationError(KgroupError):
    """The simulator could not run, or a run broke one of its rules."""


class ScenarioError(SimulationError, ValueError):
    """A scenario or simulation setting is invalid; the message names it and the fix."""


class InvariantViolationError(SimulationError):
    """A safety or liveness invariant failed during a run.

    ``violation`` says which one, when (virtual seconds) and what was seen.
    """

    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation
