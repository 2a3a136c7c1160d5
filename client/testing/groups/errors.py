"""Errors of the group model, rooted in :class:`kgroup.errors.KgroupError`.

The simulator raises the same classes (``kgroup.testing.sim`` exports them):
a model whose bookkeeping breaks its own rules is a simulation error
wherever the model runs, and a bad model setting is a scenario error.
"""

from __future__ import annotations

from kgroup.errors import KgroupError

__all__ = ["ScenarioError", "SimulationError"]


class SimulationError(KgroupError):
    """The simulator could not run, or a run broke one of its rules."""


class ScenarioError(SimulationError, ValueError):
    """A scenario or simulation setting is invalid; the message names it and the fix."""
