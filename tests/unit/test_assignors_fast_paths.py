"""The classic assignors' fast paths give what the plain ways of doing the same thing give.

The assignors were made fast (issue 15) with shortcuts that must not change a
result: partitions built without the dataclass constructor and interned across
calls, Java string hashes as dot products (and remembered), sticky user data
read through compiled whole-body layouts straight into partition numbers.
Each test here holds one shortcut against the straightforward computation.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import pytest

from kgroup.assignors import (
    Assignment,
    Cluster,
    ConsumerPartitionAssignor,
    CooperativeStickyAssignor,
    GroupSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    _caches,
    _common,
    java_order,
    sticky,
)
from kgroup.assignors.sticky import MemberData, decode_sticky_user_data, encode_sticky_user_data
from kgroup.types import TopicPartition


def test_partitions_are_built_fast_and_equal_to_constructed_ones() -> None:
    # If TopicPartition gains validation or fields, the fast path switches itself
    # off; this test then fails to say the assignors got slower.
    assert _common.FAST_PARTITIONS
    made = _common.make_partitions("orders", range(5))
    plain = [TopicPartition("orders", p) for p in range(5)]
    assert made == plain
    assert [hash(p) for p in made] == [hash(p) for p in plain]
    assert all(type(p) is TopicPartition for p in made)
    assert sorted(reversed(made)) == plain
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[0].partition = 9  # type: ignore[misc]


def test_assignments_are_built_fast_and_equal_to_constructed_ones() -> None:
    assert _common._ASSIGNMENT_SETTERS is not None  # the fast path is active
    partitions = tuple(_common.make_partitions("t", range(3)))
    made = _common.make_assignment(partitions)
    assert made == Assignment(partitions)
    assert hash(made) == hash(Assignment(partitions))
    assert made.user_data is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.user_data = b"x"  # type: ignore[misc]


def test_interned_partitions_are_shared_grown_cut_and_bounded() -> None:
    interned = _common._Interned(limit=10)
    first = interned.get("a", 4)
    assert first == tuple(TopicPartition("a", p) for p in range(4))
    assert interned.get("a", 4) is first  # shared across calls
    assert interned.get("a", 2) == first[:2]  # fewer partitions than before
    grown = interned.get("a", 6)  # more partitions than before
    assert grown == tuple(TopicPartition("a", p) for p in range(6))
    assert interned.count == 6
    interned.get("b", 5)  # 6 + 5 > 10: starts over with only "b"
    assert set(interned.by_topic) == {"b"}
    assert interned.count == 5
    assert interned.get("c", 11) == tuple(TopicPartition("c", p) for p in range(11))
    assert "c" not in interned.by_topic  # larger than the whole cache: not kept


def _java_hash_by_definition(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def test_java_string_hash_matches_its_definition() -> None:
    rng = random.Random(848)
    alphabets = [(0x20, 0x7E), (0x80, 0xD7FF), (0xE000, 0xFFFF), (0x10000, 0x10FFFF)]
    for _ in range(3000):
        length = rng.choice([0, 1, 7, 63, 64, 65, 130])
        ranges = rng.sample(alphabets, k=rng.randint(1, 2))
        s = "".join(chr(rng.randint(*rng.choice(ranges))) for _ in range(length))
        assert java_order.java_string_hash(s) == _java_hash_by_definition(s), s
        assert java_order.java_string_hash(s) == _java_hash_by_definition(s), s  # remembered


def test_hash_order_is_bucket_then_insertion_order() -> None:
    rng = random.Random(15)
    for _ in range(200):
        keys = [f"member-{rng.randrange(10**6)}" for _ in range(rng.randint(0, 40))]
        capacity = java_order.grown_capacity(len(keys))
        buckets = [(h ^ (h >> 16)) & (capacity - 1) for h in map(_java_hash_by_definition, keys)]
        expected = [keys[i] for i in sorted(range(len(keys)), key=lambda i: (buckets[i], i))]
        assert java_order.hash_order(keys, java_order.java_string_hash, capacity) == expected


def _blobs(rng: random.Random) -> list[bytes]:
    """User data of a few recurring shapes, some with fields broken in place."""
    out: list[bytes] = []
    for _ in range(60):
        topics = [
            rng.choice(["a", "bb", "t\u00e9", f"topic-{rng.randrange(10):03d}"])
            for _ in range(rng.randint(0, 4))
        ]
        per_topic = [rng.randint(1, 3) for _ in topics]
        generation = rng.choice([None, 4])
        prefix = b"\x00\x01" if rng.random() < 0.3 else b""
        for _ in range(8):
            claimed = [
                TopicPartition(t, rng.randint(-2, 40))
                for t, k in zip(topics, per_topic, strict=True)
                for _ in range(k)
            ]
            blob = bytearray(prefix + encode_sticky_user_data(claimed, generation))
            if blob and rng.random() < 0.4:
                # the same size, another meaning: a count, a length, a name byte ...
                blob[rng.randrange(len(blob))] = rng.choice([0, 1, 2, 0x7F, 0x80, 0xFF])
            out.append(bytes(blob))
    return out


def _walked(data: bytes) -> tuple[list[tuple[str, tuple[int, ...]]], int | None]:
    """What the entry-by-entry parser alone reads (kafka-python's prefix included)."""
    for start in (0, 2):
        if start == 2 and not (len(data) >= 2 and data[:2] in (b"\x00\x00", b"\x00\x01")):
            break
        parsed = sticky._parse_walking(data, start)
        if parsed is not None:
            return parsed
    return [], sticky.DEFAULT_GENERATION


def test_user_data_of_a_compiled_shape_reads_as_walking_it_does() -> None:
    blobs = _blobs(random.Random(20261121))
    for blob in blobs:  # teach the shapes
        decode_sticky_user_data(blob)
    compiled = [shape for _, shape in sticky._SHAPES.by_size.values() if shape is not None]
    assert compiled, "no shape was compiled: the test would prove nothing"
    for blob in blobs:
        pairs, generation = _walked(blob)
        expected = MemberData(
            tuple(TopicPartition(t, p) for t, numbers in pairs for p in numbers), generation
        )
        assert decode_sticky_user_data(blob) == expected, blob.hex()


def test_user_data_read_straight_into_numbers_as_decoding_then_mapping_does() -> None:
    blobs = _blobs(random.Random(7))
    layout = sticky._Layout(
        ["a", "bb", "t\u00e9", "topic-001", "topic-004"],
        {"a": 30, "bb": 5, "t\u00e9": 41, "topic-001": 12, "topic-004": 3},
    )
    subscribed = [frozenset(layout.topics), frozenset({"bb", "topic-004"}), frozenset()]
    for _ in range(2):  # the second round finds compiled shapes
        for blob in blobs:
            pairs, generation = _walked(blob)
            for topics in subscribed:
                expected = (generation, sticky._numbers_of_pairs(pairs, topics, layout.offsets))
                assert sticky._claimed_in_user_data(blob, topics, layout) == expected, blob.hex()


def test_an_overridden_member_data_is_used() -> None:
    # StickyAssignor reads user data itself, without MemberData values, unless a
    # subclass says what members claim.
    class ForgetfulSticky(StickyAssignor):
        def member_data(self, subscription: Subscription) -> MemberData:
            return MemberData((), None)

    cluster = Cluster({"t": 4})
    previous = encode_sticky_user_data([TopicPartition("t", 3), TopicPartition("t", 2)], 5)
    subs = GroupSubscription(
        {"c1": Subscription(("t",), user_data=previous), "c2": Subscription(("t",))}
    )
    fresh = GroupSubscription({"c1": Subscription(("t",)), "c2": Subscription(("t",))})
    assert ForgetfulSticky().assign(cluster, subs) == StickyAssignor().assign(cluster, fresh)
    assert StickyAssignor().assign(cluster, subs).partitions("c1") == (
        TopicPartition("t", 2),
        TopicPartition("t", 3),
    )


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_results_do_not_depend_on_what_is_cached(name: str) -> None:
    assignors: dict[str, Callable[[], ConsumerPartitionAssignor]] = {
        "range": RangeAssignor,
        "roundrobin": RoundRobinAssignor,
        "sticky": StickyAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    assignor = assignors[name]
    cluster = Cluster({f"t{i}": 30 for i in range(4)})
    members = [f"member-{i}" for i in range(7)]
    topics = tuple(cluster.partition_counts)
    first = assignor().assign(
        cluster, GroupSubscription({m: Subscription(topics) for m in members[:-2]})
    )
    # the next round: everyone reports what it had (eager sticky in its user data)
    subs = GroupSubscription(
        {
            m: Subscription(
                topics,
                user_data=encode_sticky_user_data(first.partitions(m), 1)
                if name == "sticky"
                else None,
                owned_partitions=first.partitions(m) if name != "sticky" else (),
                generation_id=1,
            )
            for m in members
        }
    )
    _caches.clear()
    cold = assignor().assign(cluster, subs)
    warm = [assignor().assign(cluster, subs) for _ in range(3)]
    assert all(result == cold for result in warm)
    assert _common._INTERNED.by_topic  # the warm runs had partitions to reuse
    _caches.clear()
    assert not _common._INTERNED.by_topic
    assert not java_order._hashes
    assert not sticky._SHAPES.by_size
