"""Client-side mode: the computing member hands every member's assignor metadata to its assignor."""

from __future__ import annotations

import uuid

import pytest

from kgroup.assignors import (
    AssignmentSpec,
    AssignorError,
    AssignorMetadata,
    GroupMetadata,
    MemberAssignment,
    MemberSpec,
    TargetAssignment,
)
from kgroup.testing.sim import Simulation


class WeightedAssignor:
    """A toy Python client assignor: each member reports a weight, and gets a share to match.

    Weights travel as the members' assignor metadata (version 1: one byte), so
    the assignment is only right if every member's metadata reaches ``assign``.
    """

    name = "py-weighted"
    min_version = 1
    max_version = 1

    def __init__(self, weight: int) -> None:
        self.weight = weight
        self.seen: list[dict[str, AssignorMetadata | None]] = []

    def metadata(self) -> bytes | None:
        return bytes([self.weight])

    def assign(self, spec: AssignmentSpec) -> TargetAssignment:
        self.seen.append({mid: m.assignor_metadata for mid, m in spec.members.items()})
        weights: dict[str, int] = {}
        for mid, m in spec.members.items():
            meta = m.assignor_metadata
            if meta is None or meta.version != 1:
                # An assignor error: the member installs it as such and the test sees no split.
                raise AssignorError(self.name, f"no usable metadata from {mid}: {meta}")
            weights[mid] = meta.data[0]
        order = sorted(weights)
        total = sum(weights.values())
        out: dict[str, dict[uuid.UUID, set[int]]] = {mid: {} for mid in order}
        for topic_id in sorted(spec.topics):
            count = spec.topics[topic_id].num_partitions
            start = 0
            for i, mid in enumerate(order):
                # The last member takes the rounding remainder.
                end = count if i == len(order) - 1 else start + count * weights[mid] // total
                out[mid][topic_id] = set(range(start, end))
                start = end
        return TargetAssignment(
            {
                mid: MemberAssignment({t: frozenset(p) for t, p in parts.items()})
                for mid, parts in out.items()
            }
        )

    def on_assignment(self, assignment: MemberAssignment, metadata: GroupMetadata) -> None:
        pass


def test_every_members_assignor_metadata_reaches_the_assignor_and_the_group_converges_on_it() -> (
    None
):
    weights = {"light": 1, "medium": 2, "heavy": 3}
    assignors = {name: WeightedAssignor(w) for name, w in weights.items()}
    sim = Simulation(seed=3, topics={"orders": 12})
    for name in weights:
        sim.add_member(name, topics={"orders"}, client_assignors=(assignors[name],))
    sim.run_until_converged(faults_end=2.0)

    fetched = sim.assignment()
    # 12 partitions shared 1 : 2 : 3 — only possible with every member's weight.
    assert {name: len(parts) for name, parts in fetched.items()} == {
        "light": 2,
        "medium": 4,
        "heavy": 6,
    }
    runs = [seen for a in assignors.values() for seen in a.seen]
    assert runs, "no member ran the client assignor"
    last = runs[-1]
    assert sorted(m.data[0] for m in last.values() if m is not None) == [1, 2, 3]
    assert all(m is not None and m.version == 1 for m in last.values())


def test_member_spec_keeps_working_without_assignor_metadata() -> None:
    # Additive: existing code that builds a MemberSpec positionally or by keyword is unchanged.
    topic = uuid.uuid4()
    spec = MemberSpec(frozenset({topic}), {}, None, None)
    assert spec.assignor_metadata is None
    assert spec == MemberSpec(subscribed_topic_ids=frozenset({topic}))


@pytest.mark.parametrize(
    ("version", "data", "complaint"),
    [
        (-1, b"", "must be >= 0"),
        ("1", b"", "must be an int"),
        (1, "text", "must be bytes"),
    ],
)
def test_bad_assignor_metadata_is_refused_with_what_is_wrong(
    version: object, data: object, complaint: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=complaint):
        AssignorMetadata(version, data)  # type: ignore[arg-type]
