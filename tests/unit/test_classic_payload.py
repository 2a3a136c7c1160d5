"""The classic payload in JoinGroup/SyncGroup: fixed vectors from Kafka's schema, round trips."""

from __future__ import annotations

import contextlib
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgroup.errors import ClassicPayloadError, MalformedResponseError
from kgroup.membership import ClassicAssignment, MemberSubscription
from kgroup.protocol.classic_payload import (
    HIGHEST_VERSION,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    read_version,
)
from kgroup.protocol.fuzz import mutate
from kgroup.types import TopicPartition

FOO_0 = TopicPartition("foo", 0)
FOO_2 = TopicPartition("foo", 2)

# ConsumerProtocolSubscription v3, written out by hand from Kafka's
# clients/src/main/resources/common/message/ConsumerProtocolSubscription.json
# (non-flexible: int16-length strings, int32 array counts, int32-length bytes),
# behind the int16 version prefix of MessageUtil.toVersionPrefixedByteBuffer.
# The Java client sorts topics and owned partitions before writing them.
JAVA_SUBSCRIPTION_V3 = bytes.fromhex(
    "0003"  # version 3
    "00000002"  # Topics: 2 entries
    "0003626172"  # "bar"
    "0003666f6f"  # "foo"
    "00000002"
    "0102"  # UserData: 2 bytes
    "00000001"  # OwnedPartitions: 1 entry
    "0003666f6f"  # Topic "foo"
    "00000002"
    "00000000"
    "00000002"  # Partitions [0, 2]
    "00000007"  # GenerationId 7
    "00027231"  # RackId "r1"
)
SUBSCRIPTION = MemberSubscription(
    topics=frozenset({"foo", "bar"}),
    user_data=b"\x01\x02",
    owned_partitions=frozenset({FOO_2, FOO_0}),
    generation_id=7,
    rack_id="r1",
)
JAVA_SUBSCRIPTION_V0 = bytes.fromhex(
    "0000"  # version 0
    "00000002"
    "0003626172"
    "0003666f6f"  # Topics ["bar", "foo"]
    "ffffffff"  # UserData null
)
JAVA_ASSIGNMENT_V3 = bytes.fromhex(
    "0003"  # version 3
    "00000001"  # AssignedPartitions: 1 entry
    "0003666f6f"  # Topic "foo"
    "00000001"
    "00000001"  # Partitions [1]
    "ffffffff"  # UserData null
)


def test_subscription_matches_the_bytes_kafkas_java_client_writes() -> None:
    assert encode_subscription(SUBSCRIPTION) == JAVA_SUBSCRIPTION_V3
    assert decode_subscription(JAVA_SUBSCRIPTION_V3) == SUBSCRIPTION
    assert read_version(JAVA_SUBSCRIPTION_V3) == 3


def test_v0_subscription_drops_the_newer_fields() -> None:
    sub = MemberSubscription(
        topics=frozenset({"foo", "bar"}),
        owned_partitions=frozenset({FOO_0}),
        generation_id=3,
        rack_id="r",
    )
    assert encode_subscription(sub, version=0) == JAVA_SUBSCRIPTION_V0
    assert decode_subscription(JAVA_SUBSCRIPTION_V0) == MemberSubscription(
        topics=frozenset({"foo", "bar"})
    )


def test_assignment_matches_the_bytes_kafkas_java_client_writes() -> None:
    assignment = ClassicAssignment(frozenset({TopicPartition("foo", 1)}))
    assert encode_assignment(assignment) == JAVA_ASSIGNMENT_V3
    assert decode_assignment(JAVA_ASSIGNMENT_V3) == assignment


topics = st.frozensets(st.text(min_size=1, max_size=8), max_size=4)
partitions = st.frozensets(
    st.builds(
        TopicPartition,
        st.sampled_from(["a", "b", "topic-with-a-longer-name"]),
        st.integers(0, 2**31 - 1),
    ),
    max_size=8,
)
subscriptions = st.builds(
    MemberSubscription,
    topics=topics,
    user_data=st.none() | st.binary(max_size=16),
    owned_partitions=partitions,
    generation_id=st.integers(-1, 2**31 - 1),
    rack_id=st.none() | st.text(min_size=1, max_size=6),
)
assignments = st.builds(
    ClassicAssignment,
    partitions=partitions,
    user_data=st.none() | st.binary(max_size=16),
)


def _as_of_version(sub: MemberSubscription, version: int) -> MemberSubscription:
    """What survives encoding at ``version``: the fields it lacks fall back to defaults."""
    return MemberSubscription(
        topics=sub.topics,
        user_data=sub.user_data,
        owned_partitions=sub.owned_partitions if version >= 1 else frozenset(),
        generation_id=sub.generation_id if version >= 2 else -1,
        rack_id=sub.rack_id if version >= 3 else None,
    )


@pytest.mark.parametrize("version", range(HIGHEST_VERSION + 1))
@given(sub=subscriptions)
def test_subscription_round_trips_at_every_version(version: int, sub: MemberSubscription) -> None:
    data = encode_subscription(sub, version)
    assert read_version(data) == version
    assert decode_subscription(data) == _as_of_version(sub, version)


@pytest.mark.parametrize("version", range(HIGHEST_VERSION + 1))
@given(assignment=assignments)
def test_assignment_round_trips_at_every_version(
    version: int, assignment: ClassicAssignment
) -> None:
    data = encode_assignment(assignment, version)
    assert read_version(data) == version
    assert decode_assignment(data) == assignment


@given(sub=subscriptions, version=st.integers(4, 2**15 - 1), tail=st.binary(max_size=12))
def test_a_newer_subscription_version_is_read_with_the_fields_kgroup_knows(
    sub: MemberSubscription, version: int, tail: bytes
) -> None:
    # Newer versions may only add fields at the end: read them as v3, as Java does.
    body = encode_subscription(sub)[2:]
    data = struct.pack(">h", version) + body + tail
    assert decode_subscription(data) == sub


@given(assignment=assignments, version=st.integers(4, 2**15 - 1), tail=st.binary(max_size=12))
def test_a_newer_assignment_version_is_read_with_the_fields_kgroup_knows(
    assignment: ClassicAssignment, version: int, tail: bytes
) -> None:
    data = struct.pack(">h", version) + encode_assignment(assignment)[2:] + tail
    assert decode_assignment(data) == assignment


def test_an_empty_rack_id_reads_as_none_as_in_java() -> None:
    data = encode_subscription(MemberSubscription(rack_id="r"))
    empty_rack = data[:-3] + b"\x00\x00"
    assert decode_subscription(empty_rack).rack_id is None


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\xff\xff" + JAVA_SUBSCRIPTION_V3[2:], JAVA_SUBSCRIPTION_V3[:9]],
    ids=["empty", "one byte", "negative version", "truncated"],
)
def test_undecodable_subscriptions_raise_a_typed_error(data: bytes) -> None:
    with pytest.raises(ClassicPayloadError):
        decode_subscription(data)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\x80\x00", JAVA_ASSIGNMENT_V3[:-2]],
    ids=["empty", "one byte", "negative version", "truncated"],
)
def test_undecodable_assignments_raise_a_typed_error(data: bytes) -> None:
    with pytest.raises(MalformedResponseError):
        decode_assignment(data)


def test_encoding_checks_the_version_and_the_values() -> None:
    with pytest.raises(ValueError, match="0..3"):
        encode_subscription(SUBSCRIPTION, version=4)
    with pytest.raises(ValueError, match="0..3"):
        encode_assignment(ClassicAssignment(), version=-1)
    too_big = ClassicAssignment(frozenset({TopicPartition("a", 2**31)}))
    with pytest.raises(ClassicPayloadError):
        encode_assignment(too_big)


# --- malformed payloads from other clients (issue 10) ----------------------------------
#
# Written out by hand like the vectors above; a null array is a count of -1
# (ffffffff), which Kafka's schema allows for no array in either payload.

FOO_HEX = "0003666f6f"  # "foo"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ("0000ffffffffffffffff", "topics"),
        ("0003ffffffffffffffff00000000ffffffffffff", "topics"),
        ("000100000000ffffffffffffffff", "owned_partitions"),
        (
            "000300000000ffffffff00000001" + FOO_HEX + "ffffffffffffffffffff",
            r"owned_partitions\[0\]\.partitions",
        ),
    ],
    ids=["v0 topics", "v3 topics", "v1 owned partitions", "v3 owned partitions' partitions"],
)
def test_null_arrays_in_a_subscription_are_a_typed_error_naming_the_field(
    data: str, field: str
) -> None:
    with pytest.raises(ClassicPayloadError, match=rf"subscription \(v\d\): field {field}: null"):
        decode_subscription(bytes.fromhex(data))


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ("0000ffffffffffffffff", "assigned_partitions"),
        ("000300000001" + FOO_HEX + "ffffffffffffffff", r"assigned_partitions\[0\]\.partitions"),
    ],
    ids=["assigned partitions", "partitions of a topic"],
)
def test_null_arrays_in_an_assignment_are_a_typed_error_naming_the_field(
    data: str, field: str
) -> None:
    with pytest.raises(ClassicPayloadError, match=rf"assignment \(v\d\): field {field}: null"):
        decode_assignment(bytes.fromhex(data))


def test_negative_partitions_are_a_typed_error_naming_the_field() -> None:
    assignment = "000100000001" + FOO_HEX + "0000000200000001fffffffdffffffff"
    with pytest.raises(
        ClassicPayloadError,
        match=r"assigned_partitions\[0\]\.partitions\[1\]: negative partition -3 of topic 'foo'",
    ):
        decode_assignment(bytes.fromhex(assignment))
    subscription = "000100000000ffffffff00000001" + FOO_HEX + "00000001ffffffff"
    with pytest.raises(
        ClassicPayloadError, match=r"field owned_partitions\[0\]\.partitions\[0\]: negative"
    ):
        decode_subscription(bytes.fromhex(subscription))


def test_truncated_payloads_name_the_field_they_end_in() -> None:
    with pytest.raises(
        ClassicPayloadError, match=r"field assigned_partitions\[0\]\.partitions: needs 4 bytes, 1"
    ):
        decode_assignment(JAVA_ASSIGNMENT_V3[:12])
    with pytest.raises(ClassicPayloadError, match=r"field generation_id: needs 4 bytes, 2 left"):
        decode_subscription(JAVA_SUBSCRIPTION_V3[:-6])


def test_an_array_count_beyond_the_bytes_is_a_typed_error() -> None:
    with pytest.raises(ClassicPayloadError, match="array length 2147483647 exceeds the 4 bytes"):
        decode_assignment(bytes.fromhex("00037fffffffffffffff"))


def test_trailing_bytes_after_a_known_version_are_a_typed_error() -> None:
    with pytest.raises(ClassicPayloadError, match=r"assignment \(v3\): 2 bytes after its last"):
        decode_assignment(JAVA_ASSIGNMENT_V3 + b"\x00\x01")
    with pytest.raises(ClassicPayloadError, match=r"subscription \(v0\): 1 bytes after its last"):
        decode_subscription(JAVA_SUBSCRIPTION_V0 + b"\x00")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_decode_or_raise_a_classic_payload_error(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        with contextlib.suppress(ClassicPayloadError):
            decode(data)


@settings(max_examples=300, deadline=None)
@given(sub=subscriptions, assignment=assignments, rnd=st.randoms(use_true_random=False))
def test_mutated_payloads_decode_or_raise_a_classic_payload_error(
    sub: MemberSubscription, assignment: ClassicAssignment, rnd: random.Random
) -> None:
    for data, decode in (
        (encode_subscription(sub, rnd.randint(0, HIGHEST_VERSION)), decode_subscription),
        (encode_assignment(assignment, rnd.randint(0, HIGHEST_VERSION)), decode_assignment),
    ):
        with contextlib.suppress(ClassicPayloadError):
            decode(mutate(b"\0\0\0\0" + data, rnd)[4:])
