"""The classic built-in assignors give exactly the outputs they gave before they were optimised.

``range``, ``roundrobin``, ``sticky`` and ``cooperative-sticky`` were rewritten for
speed (issue 15) with the promise that every output stays identical. This test
runs them on seeded random inputs that reach every branch (racks, static
members, co-partitioned topics, heterogeneous subscriptions, owned partitions
from an earlier round, stale and conflicting claims, sticky user data in
several formats) and compares a digest of each output with the digest the
pre-optimisation implementation produced, recorded in
``test_assignors_regression.json``.

The recording was made once, from the code before the rewrite (commit d45f33f).
Re-record (``python tests/unit/test_assignors_regression.py --record``) only for a
deliberate change of output, and say so in the commit.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

import pytest

from kgroup.assignors import (
    Cluster,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    GroupAssignment,
    GroupSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
)
from kgroup.assignors.sticky import encode_cooperative_user_data, encode_sticky_user_data
from kgroup.types import TopicPartition

RECORDING = Path(__file__).with_suffix(".json")
SMALL_CASES = 400  # small groups: every branch, many times
LARGE_CASES = 12  # a few larger groups: the quota and heap bookkeeping at scale
RACKS = ("r0", "r1", "r2", "r3")


def _assignors() -> dict[str, type[ConsumerPartitionAssignor]]:
    return {
        "range": RangeAssignor,
        "roundrobin": RoundRobinAssignor,
        "sticky": StickyAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }


def _cluster(rng: random.Random, large: bool) -> Cluster:
    n_topics = rng.randint(1, 12 if large else 5)
    counts = {
        f"t{i}": rng.randint(0, 400 if large else 24) if rng.random() < 0.95 else 0
        for i in range(n_topics)
    }
    if rng.random() < 0.3:
        # co-partitioned topics (range's rack-aware path pairs them up)
        same = rng.randint(1, 40 if large else 12)
        for t in rng.sample(sorted(counts), k=min(len(counts), rng.randint(1, 3))):
            counts[t] = same
    racks: dict[TopicPartition, frozenset[str]] = {}
    mode = rng.random()
    if mode < 0.35:
        pool = RACKS[: rng.randint(1, len(RACKS))]
        for t, n in counts.items():
            for p in range(n):
                if rng.random() < 0.9:
                    racks[TopicPartition(t, p)] = frozenset(
                        rng.sample(pool, k=rng.randint(0, min(2, len(pool))))
                    )
    elif mode < 0.45:
        # every partition on every rack: rack-aware placement must not apply
        for t, n in counts.items():
            for p in range(n):
                racks[TopicPartition(t, p)] = frozenset(RACKS[:2])
    return Cluster(counts, racks)


def _members(rng: random.Random, large: bool) -> list[str]:
    n = rng.randint(1, 60 if large else 9)
    names = [f"member-{rng.randrange(10**6):06d}-{i}" for i in range(n)]
    rng.shuffle(names)
    return names


def _subscriptions(
    rng: random.Random,
    cluster: Cluster,
    members: list[str],
    owned: GroupAssignment | None,
    assignor: str,
) -> GroupSubscription:
    topics = sorted(cluster.partition_counts)
    extra = ["unknown-topic"] if rng.random() < 0.2 else []
    homogeneous = rng.random() < 0.6
    common = rng.sample(topics, k=rng.randint(1, len(topics))) + extra
    any_racks = rng.random() < 0.6
    subs: dict[str, Subscription] = {}
    for m in members:
        chosen = common if homogeneous else rng.sample(topics, k=rng.randint(1, len(topics)))
        rng.shuffle(chosen)
        parts: tuple[TopicPartition, ...] = owned.partitions(m) if owned is not None else ()
        roll = rng.random()
        if roll < 0.1 and parts:
            parts = parts[: len(parts) // 2]  # lost some
        elif roll < 0.2:
            # bogus and out-of-range claims, and a partition another member has
            parts = (
                *parts,
                TopicPartition("unknown-topic", 0),
                TopicPartition(topics[0], 10_000),
                TopicPartition(rng.choice(topics), rng.randrange(30)),
            )
        generation = rng.choice((None, 1, 1, 1, 2, 0))
        user_data: bytes | None = None
        if assignor == "sticky" and parts and rng.random() < 0.7:
            form = rng.random()
            if form < 0.6:
                user_data = encode_sticky_user_data(parts, generation)
            elif form < 0.8:
                user_data = b"\x00\x01" + encode_sticky_user_data(parts, generation or 1)
            else:
                user_data = b"\x07garbage"
        elif assignor == "cooperative-sticky" and rng.random() < 0.5:
            user_data = (
                encode_cooperative_user_data(rng.randint(0, 3)) if rng.random() < 0.8 else b"\x01"
            )
            if rng.random() < 0.5:
                generation = None
        subs[m] = Subscription(
            tuple(chosen),
            user_data=user_data,
            owned_partitions=parts,
            generation_id=generation,
            rack_id=(rng.choice((*RACKS, "", "r9")) if any_racks and rng.random() < 0.8 else None),
            group_instance_id=(f"static-{rng.randrange(50):02d}" if rng.random() < 0.15 else None),
        )
    return GroupSubscription(subs)


def _digest(result: GroupAssignment) -> str:
    canonical = [
        (m, [(tp.topic, tp.partition) for tp in result[m].partitions], result[m].user_data)
        for m in sorted(result)
    ]
    return hashlib.sha256(repr(canonical).encode()).hexdigest()[:16]


def _case(name: str, index: int) -> str:
    """The digest of one assignor on case ``index``: a first round, then a changed group."""
    large = index >= SMALL_CASES
    rng = random.Random(f"{name}/{index}")
    make = _assignors()[name]
    cluster = _cluster(rng, large)
    members = _members(rng, large)
    first = make().assign(cluster, _subscriptions(rng, cluster, members, None, name))
    # The next round: members leave and join, topics grow; owners report what they had.
    if len(members) > 1 and rng.random() < 0.5:
        members = rng.sample(members, k=rng.randint(1, len(members)))
    members += [f"joiner-{i}" for i in range(rng.randint(0, 3))]
    rng.shuffle(members)
    if rng.random() < 0.3:
        grown = {t: n + rng.randint(0, 3) for t, n in cluster.partition_counts.items()}
        cluster = Cluster(grown, cluster.replica_racks)
    second = make().assign(cluster, _subscriptions(rng, cluster, members, first, name))
    return _digest(first) + _digest(second)


def _all_cases() -> list[tuple[str, int]]:
    return [(name, i) for name in _assignors() for i in range(SMALL_CASES + LARGE_CASES)]


def _recorded() -> dict[str, list[str]]:
    data: dict[str, list[str]] = json.loads(RECORDING.read_text())
    return data


@pytest.mark.parametrize("name", sorted(_assignors()))
def test_outputs_match_the_recorded_pre_optimisation_outputs(name: str) -> None:
    expected = _recorded()[name]
    assert len(expected) == SMALL_CASES + LARGE_CASES
    changed = [i for i in range(len(expected)) if _case(name, i) != expected[i]]
    assert not changed, f"{name}: outputs differ from the recording on cases {changed[:20]}"


def _record() -> None:
    out: dict[str, list[str]] = {name: [] for name in _assignors()}
    for name, i in _all_cases():
        out[name].append(_case(name, i))
    RECORDING.write_text(json.dumps(out, indent=0) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        _record()
    else:
        sys.exit("usage: python tests/unit/test_assignors_regression.py --record")
