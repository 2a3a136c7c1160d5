"""kgroup groups on share groups without a broker: DescribeShareGroupOffsets on the
wire, the lag rule, the configure command's arguments and the text renderings."""

from __future__ import annotations

import argparse
import datetime
import json
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64
from request_helpers import assert_narrows_exactly_the_negotiated_versions
from request_helpers import highest as _highest
from request_helpers import lowest as _lowest
from request_helpers import wire as _wire

from kgroup.admin import (
    GroupDescription,
    GroupType,
    MemberDescription,
    MemberProtocol,
    ShareGroupOffsets,
    SharePartitionOffset,
)
from kgroup.admin.share import SHARE_GROUP_CONFIGS
from kgroup.cli import build_parser, main
from kgroup.cli.groups import (
    _SHARE_KEYS,
    configure_changes,
    jsonable,
    parse_config_setting,
    share_describe_text,
    share_lag_text,
)
from kgroup.errors import ConfigError
from kgroup.protocol import ApiKey, response_module
from kgroup.protocol.cluster import BrokerAddress
from kgroup.protocol.requests import describe_share_group_offsets
from kgroup.types import TopicPartition

NODE = BrokerAddress(1, "broker", 9092)
Q0, Q1, Q2 = (TopicPartition("queue", p) for p in range(3))


# ------------------------------------------------------ DescribeShareGroupOffsets


@pytest.mark.parametrize("versions", [_lowest, _highest])
def test_describe_share_group_offsets_asks_for_every_partition(versions: Any) -> None:
    sent = _wire(
        describe_share_group_offsets.build(versions(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS), "q")
    )
    (group,) = sent.groups
    assert (group.group_id, group.topics) == ("q", None)


def _response(version: int, **lag: Any) -> Any:
    module = response_module(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version)

    def part(index: int, start: int, code: ErrorCode = ErrorCode.none, **extra: Any) -> Any:
        return module.DescribeShareGroupOffsetsResponsePartition(
            partition_index=i32(index),
            start_offset=i64(start),
            leader_epoch=i32(3),
            error_code=code,
            **extra,
        )

    return module.DescribeShareGroupOffsetsResponse(
        throttle_time=datetime.timedelta(0),
        groups=(
            module.DescribeShareGroupOffsetsResponseGroup(
                group_id="q",
                error_code=ErrorCode.none,
                topics=(
                    module.DescribeShareGroupOffsetsResponseTopic(
                        topic_name="queue",
                        topic_id=None,
                        partitions=(
                            part(2, -1, ErrorCode.unknown_topic_or_partition),
                            part(0, 40, **lag),
                            part(1, -1),
                        ),
                    ),
                ),
            ),
        ),
    )


def test_describe_share_group_offsets_parse_reads_start_offsets_sorted_unknown_as_none() -> None:
    (group,) = describe_share_group_offsets.parse(_response(0))
    assert (group.group_id, group.error_code) == ("q", 0)
    assert [(o.partition, o.start_offset, o.lag, o.error_code) for o in group.partitions] == [
        (Q0, 40, None, 0),  # v0 has no lag
        (Q1, None, None, 0),  # -1: the group has no state for the partition
        (Q2, None, None, int(ErrorCode.unknown_topic_or_partition)),
    ]
    assert group.partitions[0].leader_epoch == 3


def test_describe_share_group_offsets_parse_reads_the_lag_from_v1() -> None:
    (group,) = describe_share_group_offsets.parse(_response(1, lag=i64(7)))
    assert group.partitions[0].lag == 7
    (group,) = describe_share_group_offsets.parse(_response(1))
    assert group.partitions[0].lag is None  # the default -1: unknown


def test_describe_share_group_offsets_narrows_exactly_the_negotiated_versions() -> None:
    assert_narrows_exactly_the_negotiated_versions(describe_share_group_offsets)


# ------------------------------------------------------------------ the lag rule


def test_share_lag_is_the_brokers_when_it_gives_one_else_log_end_minus_start() -> None:
    assert SharePartitionOffset(Q0, 4, 10, broker_lag=2).lag == 2
    assert SharePartitionOffset(Q0, 4, 10).lag == 6
    assert SharePartitionOffset(Q0, 12, 10).lag == 0  # never negative
    assert SharePartitionOffset(Q0, None, 10).lag is None
    assert SharePartitionOffset(Q0, 4, None).lag is None


def _share_group(members: bool = True) -> ShareGroupOffsets:
    group = GroupDescription(
        group_id="q",
        group_type=GroupType.SHARE,
        protocol_type="share",
        state="Stable" if members else "Empty",
        assignor="simple",
        coordinator=NODE,
        members=(
            (
                MemberDescription(
                    member_id="m1",
                    instance_id=None,
                    client_id="kgroup",
                    client_host="/10.0.0.1",
                    protocol=MemberProtocol.SHARE,
                    member_epoch=5,
                    subscribed_topics=frozenset({"queue"}),
                    assignment=frozenset({Q0, Q1}),
                ),
            )
            if members
            else ()
        ),
        group_epoch=5,
        assignment_epoch=5,
    )
    return ShareGroupOffsets(
        group=group,
        partitions=(
            SharePartitionOffset(Q0, 40, 50, broker_lag=8),
            SharePartitionOffset(Q1, None, 9),
        ),
    )


def test_share_describe_text_shows_epochs_members_and_start_offsets() -> None:
    text = share_describe_text(_share_group())
    lines = text.splitlines()
    assert lines[0] == "Group q: share group, state Stable"
    assert "group epoch 5, assignment epoch 5, assignor simple" in lines[1]
    assert lines[2] == "  1 member(s), total lag 8"
    header = next(line for line in lines if line.startswith("MEMBER-ID"))
    assert header.split() == ["MEMBER-ID", "CLIENT-ID", "HOST", "EPOCH", "SUBSCRIBED", "ASSIGNMENT"]
    member = next(line for line in lines if line.startswith("m1"))
    assert member.split() == ["m1", "kgroup", "/10.0.0.1", "5", "queue", "queue:0,1"]
    rows = [line.split() for line in lines[lines.index(header) + 2 :] if line]
    assert rows[0] == ["TOPIC", "PARTITION", "START-OFFSET", "LOG-END", "LAG"]
    assert rows[1:] == [["queue", "0", "40", "50", "8"], ["queue", "1", "-", "9", "-"]]


def test_share_texts_of_a_group_without_members_or_state() -> None:
    empty = ShareGroupOffsets(group=_share_group(members=False).group, partitions=())
    assert "MEMBER-ID" not in share_describe_text(empty)
    assert "no partition has share state yet" in share_describe_text(empty)
    assert share_lag_text(empty) == (
        "Group q: share group, state Empty, 0 member(s), total lag 0\n"
        "  no partition has share state yet (no member fetched)"
    )


def test_share_lag_text_and_json_carry_the_lag_and_total() -> None:
    offsets = _share_group()
    text = share_lag_text(offsets)
    assert text.startswith("Group q: share group, state Stable, 1 member(s), total lag 8\n\n")
    as_json = json.loads(json.dumps(jsonable(offsets)))
    assert as_json["total"] == 8
    assert as_json["partitions"][0] == {
        "partition": {"topic": "queue", "partition": 0},
        "start_offset": 40,
        "log_end": 50,
        "broker_lag": 8,
        "lag": 8,
    }
    assert as_json["group"]["members"][0]["protocol"] == "share"


# ------------------------------------------------------------------ configure


def test_parse_config_setting_splits_at_the_first_equals_sign() -> None:
    assert parse_config_setting("share.auto.offset.reset=by_duration:PT1H") == (
        "share.auto.offset.reset",
        "by_duration:PT1H",
    )
    assert parse_config_setting(" k = a=b ") == ("k", "a=b")
    for bad in ("share.auto.offset.reset", "=earliest", "share.auto.offset.reset="):
        with pytest.raises(argparse.ArgumentTypeError, match="expected KEY=VALUE"):
            parse_config_setting(bad)


def test_configure_changes_orders_sets_then_deletes_and_refuses_repeats_or_nothing() -> None:
    assert configure_changes([("a", "1"), ("b", "2")], ["c"]) == {"a": "1", "b": "2", "c": None}
    with pytest.raises(ConfigError, match="a is named twice"):
        configure_changes([("a", "1")], ["a"])
    with pytest.raises(ConfigError, match="nothing to change"):
        configure_changes([], [])


def test_configure_arguments_parse_and_nothing_to_change_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = build_parser().parse_args(
        ["groups", "configure", "q", "--set", "share.auto.offset.reset=earliest", "--delete", "x"]
    )
    assert (args.group, args.set, args.delete) == (
        "q",
        [("share.auto.offset.reset", "earliest")],
        ["x"],
    )
    # Refused before any broker is asked.
    assert main(["groups", "configure", "q", "--bootstrap-servers", "127.0.0.1:1"]) == 2
    assert "nothing to change" in capsys.readouterr().err


def test_the_help_names_the_share_group_configs_the_admin_layer_knows() -> None:
    assert _SHARE_KEYS == SHARE_GROUP_CONFIGS
