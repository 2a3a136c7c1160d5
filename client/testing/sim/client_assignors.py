"""A Python client-side assignor for the simulator's scenarios (the KIP-848 draft's mode).

:class:`VersionedAssignor` gives any :class:`~kgroup.assignors.PartitionAssignor`
another name and metadata version range, so scenarios can mix members that
read different metadata versions (the coordinator must then pick a member
able to read them all) without writing a new assignment algorithm.
"""

from __future__ import annotations

from kgroup.assignors import (
    AssignmentSpec,
    GroupMetadata,
    MemberAssignment,
    PartitionAssignor,
    TargetAssignment,
    UniformAssignor,
)
from kgroup.testing.sim.errors import ScenarioError

__all__ = ["VersionedAssignor"]


class VersionedAssignor:
    """``inner``'s assignments under another name and metadata version range."""

    def __init__(
        self,
        name: str = "py-uniform",
        *,
        min_version: int = 0,
        max_version: int = 0,
        inner: PartitionAssignor | None = None,
    ) -> None:
        if not name or not 0 <= min_version <= max_version:
            raise ScenarioError(
                f"a client assignor needs a name and 0 <= min_version <= max_version, got "
                f"{name!r} {min_version}..{max_version}"
            )
        self._name = name
        self._min = min_version
        self._max = max_version
        self._inner = inner or UniformAssignor()

    @property
    def name(self) -> str:
        """The name members advertise."""
        return self._name

    @property
    def min_version(self) -> int:
        """The lowest metadata version this member reads."""
        return self._min

    @property
    def max_version(self) -> int:
        """The highest metadata version this member reads (and the one it writes)."""
        return self._max

    def metadata(self) -> bytes | None:
        """The member's metadata: its version, as a stand-in for real content."""
        return self._max.to_bytes(2, "big")

    def assign(self, spec: AssignmentSpec) -> TargetAssignment:
        """The inner assignor's target assignment."""
        return self._inner.assign(spec)

    def on_assignment(self, assignment: MemberAssignment, metadata: GroupMetadata) -> None:
        """Forwarded to the inner assignor."""
        self._inner.on_assignment(assignment, metadata)
