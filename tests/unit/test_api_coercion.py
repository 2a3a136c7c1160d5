"""The front end's argument coercion: confluent-kafka's TopicPartition and Message accepted.

Every call taking partitions or offsets goes through these helpers, so their
meanings (confluent-kafka's) and their TypeErrors are pinned here; the calls
themselves are exercised on a real broker in tests/integration/test_consumer_api.py.
"""

from __future__ import annotations

import struct

import confluent_kafka as ck
import pytest

from kgroup import OffsetAndMetadata, TopicPartition
from kgroup._frontend import (
    as_assignment,
    as_offsets,
    as_partition,
    as_partitions,
    as_seek,
    commit_args,
    commit_offsets_arg,
    encode_group_metadata,
)

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def test_partition_of_either_kind() -> None:
    assert as_partition(TP0, "x") == TP0
    assert as_partition(ck.TopicPartition("t", 0, 42), "x") == TP0


@pytest.mark.parametrize("bad", ["t-0", ("t", 0), 0, None])
def test_partition_of_a_wrong_type_is_a_type_error_naming_both_kinds(bad: object) -> None:
    with pytest.raises(TypeError, match=r"pause\(\): expected a kgroup.TopicPartition or "):
        as_partition(bad, "pause()")


def test_partitions_single_list_set_and_mixed() -> None:
    assert as_partitions(TP0, "x") == [TP0]
    assert as_partitions(ck.TopicPartition("t", 1), "x") == [TP1]
    assert as_partitions([ck.TopicPartition("t", 0), TP1], "x") == [TP0, TP1]
    assert as_partitions(frozenset({TP0}), "x") == [TP0]
    assert as_partitions((p for p in [TP1]), "x") == [TP1]


@pytest.mark.parametrize("bad", ["topic", b"topic", 3, [TP0, "t-1"], [("t", 0)]])
def test_partitions_of_a_wrong_type(bad: object) -> None:
    with pytest.raises(TypeError, match="resume"):
        as_partitions(bad, "resume()")


def test_offsets_from_a_dict_of_either_key_or_a_confluent_list() -> None:
    assert as_offsets({TP0: 5, ck.TopicPartition("t", 1): 7}, "x") == {TP0: 5, TP1: 7}
    assert as_offsets([ck.TopicPartition("t", 0, 5), ck.TopicPartition("t", 1, 0)], "x") == {
        TP0: 5,
        TP1: 0,
    }
    assert as_offsets(ck.TopicPartition("t", 0, 3), "x") == {TP0: 3}


def test_a_kgroup_partition_in_a_list_has_no_offset() -> None:
    with pytest.raises(TypeError, match="carries no offset"):
        as_offsets([TP0], "commit(offsets=...)")


def test_a_confluent_partition_without_an_offset_is_a_value_error() -> None:
    # TopicPartition("t", 0) carries OFFSET_INVALID (-1001): nothing to commit.
    with pytest.raises(ValueError, match="must be >= 0"):
        as_offsets([ck.TopicPartition("t", 0)], "commit(offsets=...)")


@pytest.mark.parametrize(
    "given",
    [
        ck.TopicPartition("t", 0, 5, metadata="checkpoint-7"),
        [ck.TopicPartition("t", 1, 0), ck.TopicPartition("t", 0, 5, metadata="checkpoint-7")],
    ],
    ids=["one", "in a list"],
)
def test_offset_metadata_is_refused_rather_than_dropped(given: object) -> None:
    # It was committed without the metadata, silently.
    with pytest.raises(ValueError, match="t-0 carries offset metadata 'checkpoint-7'"):
        as_offsets(given, "commit(offsets=...)")
    # Empty metadata (what confluent-kafka's own objects may carry) is no metadata.
    assert as_offsets([ck.TopicPartition("t", 0, 5, metadata="")], "x") == {TP0: 5}
    # offsets_for_times' timestamps are not offsets: metadata is moot there.
    assert as_offsets(given, "offsets_for_times()", offsets=False)[TP0] == 5


def test_commit_keeps_offset_metadata_of_either_kind() -> None:
    given = [ck.TopicPartition("t", 1, 0), ck.TopicPartition("t", 0, 5, metadata="checkpoint-7")]
    assert commit_args(given, None) == ({TP1: 0, TP0: 5}, {TP0: "checkpoint-7"})
    mapped = {TP0: OffsetAndMetadata(5, "checkpoint-7"), TP1: 3}
    assert commit_args(mapped, None) == ({TP0: 5, TP1: 3}, {TP0: "checkpoint-7"})
    # Empty metadata is no metadata; a message commits none.
    assert commit_args({TP0: OffsetAndMetadata(5)}, None) == ({TP0: 5}, {})
    with pytest.raises(TypeError, match="metadata of t-0 must be a str"):
        commit_args({TP0: OffsetAndMetadata(5, 7)}, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="offset of t-0 must be an int"):
        commit_args({TP0: OffsetAndMetadata("5", "x")}, None)  # type: ignore[arg-type]
    # The offsets-only parser (store_offsets) still refuses it rather than drop it.
    with pytest.raises(ValueError, match="only commit"):
        commit_offsets_arg(mapped, None)


@pytest.mark.parametrize("bad", [{TP0: "5"}, {TP0: True}, {TP0: 1.5}, "t", 5, [5]])
def test_offsets_of_a_wrong_type(bad: object) -> None:
    with pytest.raises(TypeError):
        as_offsets(bad, "commit(offsets=...)")


def test_assignment_meanings_as_confluent_kafka() -> None:
    got = as_assignment(
        [
            TP0,  # committed offset
            ck.TopicPartition("t", 1),  # OFFSET_INVALID: committed offset
            ck.TopicPartition("t", 2, ck.OFFSET_BEGINNING),
            ck.TopicPartition("t", 3, ck.OFFSET_END),
            ck.TopicPartition("t", 4, 9),
            ck.TopicPartition("t", 5, ck.OFFSET_STORED),
        ],
        "assign()",
    )
    assert got == {
        TP0: None,
        TP1: None,
        TopicPartition("t", 2): ck.OFFSET_BEGINNING,
        TopicPartition("t", 3): ck.OFFSET_END,
        TopicPartition("t", 4): 9,
        TopicPartition("t", 5): None,
    }
    assert as_assignment({TP0: None, TP1: 3}, "assign()") == {TP0: None, TP1: 3}


def test_assignment_refuses_a_tail_offset() -> None:
    with pytest.raises(ValueError, match="cannot start at offset -2005"):
        as_assignment([ck.TopicPartition("t", 0, -2005)], "assign()")


def test_seek_two_ways() -> None:
    assert as_seek(TP0, 4) == (TP0, 4)
    assert as_seek(ck.TopicPartition("t", 0, 4), None) == (TP0, 4)
    assert as_seek(ck.TopicPartition("t", 0), 6) == (TP0, 6)  # the explicit offset wins
    assert as_seek(TP0, ck.OFFSET_BEGINNING) == (TP0, ck.OFFSET_BEGINNING)


def test_seek_without_an_offset() -> None:
    with pytest.raises(TypeError, match="seek\\(partition, offset\\)"):
        as_seek(TP0, None)
    with pytest.raises(ValueError, match="must be >= 0"):
        as_seek(ck.TopicPartition("t", 0), None)  # OFFSET_INVALID


class _Message:
    """Stands in for confluent_kafka.Message in isinstance checks (it cannot be built in Python)."""


def test_commit_arguments() -> None:
    assert commit_offsets_arg(None, None) is None
    assert commit_offsets_arg([ck.TopicPartition("t", 0, 8)], None) == {TP0: 8}
    assert commit_offsets_arg({TP1: 2}, None) == {TP1: 2}
    with pytest.raises(TypeError, match="expected a confluent_kafka.Message"):
        commit_offsets_arg(None, _Message())
    with pytest.raises(TypeError):
        commit_offsets_arg("t", None)


def test_group_metadata_is_what_librdkafka_writes() -> None:
    # confluent-kafka's own consumer (never connected) serializes a non-member's metadata.
    consumer = ck.Consumer({"group.id": "grp", "bootstrap.servers": "localhost:1", "log_level": 0})
    try:
        assert encode_group_metadata("grp", -1, "", None) == consumer.consumer_group_metadata()
    finally:
        consumer.close()
    static = ck.Consumer(
        {
            "group.id": "grp",
            "group.instance.id": "inst",
            "bootstrap.servers": "localhost:1",
            "log_level": 0,
        }
    )
    try:
        assert encode_group_metadata("grp", -1, "", "inst") == static.consumer_group_metadata()
    finally:
        static.close()
    encoded = encode_group_metadata("g", 7, "m", None)
    assert encoded == b"CGMDv2:" + struct.pack("=i", 7) + b"g\0m\0\x01"
