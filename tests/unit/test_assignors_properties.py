"""Hypothesis invariants of every assignor: complete, exclusive, subscribed, balanced, sticky."""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kgroup.assignors import (
    AssignmentSpec,
    Cluster,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    GroupAssignment,
    GroupSubscription,
    MemberSpec,
    RangeAssignor,
    RangeServerAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    TargetAssignment,
    TopicMetadata,
    UniformAssignor,
    use_rack_aware,
    validate_assignment,
)
from kgroup.types import TopicIdPartition, TopicPartition

SETTINGS = settings(max_examples=100, deadline=None)
TOPICS = ["a", "b", "c", "d"]
RACKS = ["r0", "r1", "r2"]


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool | None = None) -> tuple[Cluster, GroupSubscription]:
    counts = {t: draw(st.integers(0, 12)) for t in TOPICS}
    racks: dict[TopicPartition, frozenset[str]] = {}
    if draw(st.booleans()):
        for t, n in counts.items():
            for p in range(n):
                racks[TopicPartition(t, p)] = frozenset(
                    draw(st.sets(st.sampled_from(RACKS), max_size=2))
                )
    n_members = draw(st.integers(1, 7))
    same = draw(st.booleans()) if homogeneous is None else homogeneous
    common = draw(st.sets(st.sampled_from(TOPICS), min_size=1))
    subs = {}
    for i in range(n_members):
        topics = common if same else draw(st.sets(st.sampled_from(TOPICS), min_size=1))
        rack = draw(st.sampled_from([None, *RACKS])) if racks else None
        subs[f"m{i}"] = Subscription(tuple(sorted(topics)), rack_id=rack)
    return Cluster(counts, racks), GroupSubscription(subs)


def check_valid(cluster: Cluster, subs: GroupSubscription, result: GroupAssignment) -> None:
    """Complete, exclusive, only subscribed topics, only members of the group."""
    assigned = Counter(tp for m in result for tp in result.partitions(m))
    assert all(n == 1 for n in assigned.values()), "a partition is assigned twice"
    expected = {
        TopicPartition(t, p)
        for s in subs.subscriptions.values()
        for t in s.topics
        for p in range(cluster.partition_counts.get(t, 0))
    }
    assert set(assigned) == expected
    for m in result:
        assert m in subs.subscriptions
        assert all(tp.topic in subs[m].topics for tp in result.partitions(m))
    validate_assignment("x", cluster, subs, result, RebalanceProtocol.EAGER)


def all_assigned(cluster: Cluster, subs: GroupSubscription, result: GroupAssignment) -> bool:
    assigned = {tp for m in result for tp in result.partitions(m)}
    return all(
        TopicPartition(t, p) in assigned
        for s in subs.subscriptions.values()
        for t in s.topics
        for p in range(cluster.partition_counts.get(t, 0))
    )


def sizes(result: GroupAssignment, subs: GroupSubscription) -> list[int]:
    return [len(result.partitions(m)) for m in subs]


def with_owned(
    subs: GroupSubscription, result: GroupAssignment, generation: int = 1
) -> dict[str, Subscription]:
    return {
        m: Subscription(
            s.topics,
            owned_partitions=result.partitions(m),
            generation_id=generation,
            rack_id=s.rack_id,
        )
        for m, s in subs.subscriptions.items()
    }


ALL_CLASSIC: list[type[ConsumerPartitionAssignor]] = [
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    CooperativeStickyAssignor,
]


@SETTINGS
@given(groups())
def test_every_classic_assignor_is_complete_exclusive_and_subscribed(
    group: tuple[Cluster, GroupSubscription],
) -> None:
    cluster, subs = group
    for cls in ALL_CLASSIC:
        check_valid(cluster, subs, cls().assign(cluster, subs))


@SETTINGS
@given(groups(homogeneous=True))
def test_roundrobin_and_sticky_balance_homogeneous_groups(
    group: tuple[Cluster, GroupSubscription],
) -> None:
    cluster, subs = group
    for cls in (RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor):
        counts = sizes(cls().assign(cluster, subs), subs)
        assert max(counts) - min(counts) <= 1, cls.__name__


@SETTINGS
@given(groups())
def test_range_balances_each_topic(group: tuple[Cluster, GroupSubscription]) -> None:
    cluster, subs = group
    result = RangeAssignor().assign(cluster, subs)
    for topic in TOPICS:
        members = [m for m in subs if topic in subs[m].topics]
        per = [sum(tp.topic == topic for tp in result.partitions(m)) for m in members]
        if per:
            assert max(per) - min(per) <= 1


@SETTINGS
@given(groups(), st.integers(0, 6), st.booleans(), st.integers(0, 4))
def test_sticky_moves_only_what_balance_needs(
    group: tuple[Cluster, GroupSubscription], which: int, add: bool, more_partitions: int
) -> None:
    cluster, subs = group
    racks = [s.rack_id for s in subs.subscriptions.values()]
    every = [TopicPartition(t, p) for t, n in cluster.partition_counts.items() for p in range(n)]
    # Rack-aware placement puts locality before stickiness (as the Java client
    # does), so stickiness is only promised without it.
    assume(not use_rack_aware(racks, every, cluster))
    for cls in (StickyAssignor, CooperativeStickyAssignor):
        first = cls().assign(cluster, subs)
        # Unchanged group: nothing moves.
        again = cls().assign(cluster, GroupSubscription(with_owned(subs, first)))
        assert {m: again.partitions(m) for m in subs} == {m: first.partitions(m) for m in subs}

        # Change the group: a member joins or leaves, and a topic may grow.
        changed = with_owned(subs, first)
        members = list(changed)
        if add:
            changed["new"] = Subscription(subs[members[0]].topics)
        elif len(members) > 1:
            del changed[members[which % len(members)]]
        counts = dict(cluster.partition_counts)
        counts["a"] += more_partitions
        cluster2 = Cluster(counts, cluster.replica_racks)
        second = cls().assign(cluster2, GroupSubscription(changed))
        if cls is StickyAssignor:
            # (cooperative-sticky withholds moving partitions; tested below)
            check_valid(cluster2, GroupSubscription(changed), second)
        if len({frozenset(s.topics) for s in changed.values()}) == 1:
            # Homogeneous: each surviving member keeps as much as its new share allows.
            for m, s in changed.items():
                kept = set(s.owned_partitions) & set(second.partitions(m))
                assert len(kept) == min(len(s.owned_partitions), len(second.partitions(m)))
            if cls is StickyAssignor:
                counts2 = [len(second.partitions(m)) for m in changed]
                assert max(counts2) - min(counts2) <= 1


@SETTINGS
@given(groups(), st.integers(0, 6))
def test_cooperative_sticky_never_transfers_directly(
    group: tuple[Cluster, GroupSubscription], which: int
) -> None:
    cluster, subs = group
    assignor = CooperativeStickyAssignor()
    first = assignor.assign(cluster, subs)
    changed = with_owned(subs, first)
    changed[f"joiner{which}"] = Subscription(subs[next(iter(subs))].topics)
    group2 = GroupSubscription(changed)
    second = assignor.assign(cluster, group2)
    validate_assignment(assignor.name, cluster, group2, second, RebalanceProtocol.COOPERATIVE)
    for m in changed:
        for tp in second.partitions(m):
            owners = {o for o, s in changed.items() if tp in s.owned_partitions}
            assert not owners or m in owners
    # After the owners revoke, follow-up rounds complete the assignment (one
    # round normally; rack-aware releases can take one more).
    current, result = group2, second
    for generation in (2, 3, 4):
        current = GroupSubscription(with_owned(current, result, generation))
        result = assignor.assign(cluster, current)
        validate_assignment(assignor.name, cluster, current, result, RebalanceProtocol.COOPERATIVE)
        if all_assigned(cluster, current, result):
            break
    check_valid(cluster, current, result)


# --- new protocol ---------------------------------------------------------------

TOPIC_IDS = [uuid.UUID(int=(i + 1) * 0x1234567890ABCDEF1234567) for i in range(4)]


@st.composite
def specs(draw: st.DrawFn, homogeneous: bool | None = None) -> AssignmentSpec:
    topics = {
        t: TopicMetadata(f"topic{i}", draw(st.integers(0, 12))) for i, t in enumerate(TOPIC_IDS)
    }
    same = draw(st.booleans()) if homogeneous is None else homogeneous
    common = draw(st.sets(st.sampled_from(TOPIC_IDS), min_size=1))
    n = draw(st.integers(1, 7))
    members = {
        f"member-{i}": MemberSpec(
            frozenset(common if same else draw(st.sets(st.sampled_from(TOPIC_IDS))))
        )
        for i in range(n)
    }
    return AssignmentSpec(members, topics)


def check_target(spec: AssignmentSpec, result: TargetAssignment) -> None:
    assigned = Counter(tp for m in result.members for tp in result.partitions(m))
    assert all(n == 1 for n in assigned.values())
    expected = {
        TopicIdPartition(t, p)
        for m in spec.members.values()
        for t in m.subscribed_topic_ids
        for p in range(spec.topics[t].num_partitions)
    }
    assert set(assigned) == expected
    for m in result.members:
        assert all(
            tp.topic_id in spec.members[m].subscribed_topic_ids for tp in result.partitions(m)
        )


def rerun(
    spec: AssignmentSpec, result: TargetAssignment, **changes: MemberSpec | None
) -> AssignmentSpec:
    members: dict[str, MemberSpec] = {
        m: MemberSpec(
            s.subscribed_topic_ids, result.members[m].partitions if m in result.members else {}
        )
        for m, s in spec.members.items()
    }
    for m, s in changes.items():
        if s is None:
            members.pop(m, None)
        else:
            members[m] = s
    return AssignmentSpec(members, spec.topics)


@SETTINGS
@given(specs())
def test_server_assignors_are_complete_exclusive_and_subscribed(spec: AssignmentSpec) -> None:
    check_target(spec, UniformAssignor().assign(spec))
    range_result = RangeServerAssignor().assign(spec)
    check_target(spec, range_result)
    for t in TOPIC_IDS:
        per = [
            len(range_result.members[m].partitions.get(t, ()))
            for m, s in spec.members.items()
            if t in s.subscribed_topic_ids
        ]
        if per:
            assert max(per) - min(per) <= 1


@SETTINGS
@given(specs(homogeneous=True), st.integers(0, 6), st.booleans(), st.integers(0, 4))
def test_uniform_homogeneous_is_balanced_and_sticky(
    spec: AssignmentSpec, which: int, add: bool, more_partitions: int
) -> None:
    assignor = UniformAssignor()
    first = assignor.assign(spec)
    counts = [len(first.members[m]) for m in first.members]
    assert not counts or max(counts) - min(counts) <= 1
    # Unchanged group: nothing moves.
    same = rerun(spec, first)
    assert assignor.assign(same) == first
    # A member joins or leaves: survivors keep as much as their new share allows.
    members = list(spec.members)
    if add:
        changed = rerun(
            spec, first, joiner=MemberSpec(spec.members[members[0]].subscribed_topic_ids)
        )
    elif len(members) > 1:
        changed = rerun(spec, first, **{members[which % len(members)]: None})
    else:
        return
    # ... and a topic may grow.
    grown = dict(changed.topics)
    first_topic = TOPIC_IDS[0]
    grown[first_topic] = TopicMetadata(
        "topic0", grown[first_topic].num_partitions + more_partitions
    )
    changed = AssignmentSpec(changed.members, grown)
    second = assignor.assign(changed)
    check_target(changed, second)
    for m, s in changed.members.items():
        before = {TopicIdPartition(t, p) for t, ps in s.assignment.items() for p in ps}
        after = second.partitions(m)
        assert len(before & after) == min(len(before), len(after))
