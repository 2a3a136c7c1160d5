"""kgroup groups / kgroup migrate without a broker: arguments, bootstrap resolution,
the text and JSON renderings of the admin values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgroup.admin import (
    Finding,
    GroupDescription,
    GroupLag,
    GroupType,
    MemberDescription,
    MemberProtocol,
    MemberStep,
    MigrationPlan,
    MigrationReport,
    PartitionLag,
    Severity,
)
from kgroup.cli import build_parser, main
from kgroup.cli.common import resolve_bootstrap_servers
from kgroup.cli.groups import (
    describe_text,
    format_assignment,
    jsonable,
    lag_text,
    plan_text,
    report_text,
)
from kgroup.cli.state import BrokerRecord
from kgroup.errors import ConfigError
from kgroup.protocol.cluster import BrokerAddress
from kgroup.types import TopicPartition

NODE = BrokerAddress(1, "broker", 9092)
A0, A1, B3 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 3)


def _consumer_group() -> GroupDescription:
    return GroupDescription(
        group_id="g",
        group_type=GroupType.CONSUMER,
        protocol_type="consumer",
        state="Reconciling",
        assignor="uniform",
        coordinator=NODE,
        members=(
            MemberDescription(
                member_id="m-new",
                instance_id=None,
                client_id="kgroup",
                client_host="/10.0.0.1",
                protocol=MemberProtocol.CONSUMER,
                member_epoch=7,
                assignment=frozenset({A0}),
                target_assignment=frozenset({A0, A1}),
                subscribed_regex="a.*",
            ),
            MemberDescription(
                member_id="m-old",
                instance_id="pod-1",
                client_id="rdkafka",
                client_host="/10.0.0.2",
                protocol=MemberProtocol.CLASSIC,
                member_epoch=7,
                assignment=frozenset({B3}),
                target_assignment=frozenset({B3}),
            ),
        ),
        group_epoch=7,
        assignment_epoch=7,
    )


# ------------------------------------------------------------------ arguments


def test_the_group_and_migrate_commands_parse() -> None:
    parser = build_parser()
    args = parser.parse_args(["groups", "list", "--type", "consumer", "--json"])
    assert (args.type, args.json, args.bootstrap_servers) == (["consumer"], True, None)
    args = parser.parse_args(["groups", "lag", "g", "--bootstrap-servers", "h:1"])
    assert (args.group, args.bootstrap_servers) == ("g", "h:1")
    args = parser.parse_args(
        ["migrate", "check", "g", "--regex", "^a", "--regex", "b.*", "--strict"]
    )
    assert (args.regex, args.strict, args.remote_assignor) == (["^a", "b.*"], True, None)
    args = parser.parse_args(["migrate", "plan", "g", "--remote-assignor", "range"])
    assert args.remote_assignor == "range"
    with pytest.raises(SystemExit):
        parser.parse_args(["groups", "list", "--type", "nonsense"])


def test_bootstrap_servers_come_from_the_flag_then_the_environment_then_broker_up(
    tmp_path: Path,
) -> None:
    env = {"KGROUP_STATE_DIR": str(tmp_path), "KAFKA_BOOTSTRAP_SERVERS": "env:9092"}
    assert resolve_bootstrap_servers("flag:1", env) == "flag:1"
    assert resolve_bootstrap_servers(None, env) == "env:9092"
    del env["KAFKA_BOOTSTRAP_SERVERS"]
    record = BrokerRecord(version="4.4.0", bootstrap_servers="up:1234", work_dir="w", nodes=())
    (tmp_path / "broker.json").write_text(record.to_json())
    assert resolve_bootstrap_servers(None, env) == "up:1234"


def test_no_broker_anywhere_is_a_config_error_naming_the_three_ways(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_bootstrap_servers(None, {"KGROUP_STATE_DIR": str(tmp_path)})
    for way in ("--bootstrap-servers", "KAFKA_BOOTSTRAP_SERVERS", "kgroup broker up"):
        assert way in str(raised.value)


def test_the_command_exits_2_with_the_reason_when_no_broker_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KGROUP_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert main(["groups", "describe", "g"]) == 2
    assert "no broker to talk to" in capsys.readouterr().err


# ----------------------------------------------------------------- rendering


def test_assignments_are_compact_and_sorted() -> None:
    assert format_assignment([B3, A1, A0]) == "a:0,1 b:3"
    assert format_assignment([]) == "-"


def test_describe_shows_each_members_protocol_epoch_and_target() -> None:
    text = describe_text(_consumer_group())
    assert "consumer group, state Reconciling" in text
    assert "group epoch 7, assignment epoch 7" in text
    assert "1 on the consumer protocol, 1 classic" in text
    new_row = next(line for line in text.splitlines() if line.startswith("m-new"))
    assert new_row.split()[4:] == ["consumer", "7", "a:0", "a:0,1"]
    old_row = next(line for line in text.splitlines() if line.startswith("m-old"))
    assert old_row.split()[1] == "pod-1"
    assert old_row.split()[4:] == ["classic", "7", "b:3", "="]
    assert "m-new subscribes to the regex 'a.*'" in text


def test_describe_of_a_classic_group_shows_assignor_user_data() -> None:
    group = GroupDescription(
        group_id="c",
        group_type=GroupType.CLASSIC,
        protocol_type="consumer",
        state="Stable",
        assignor="capacity",
        coordinator=NODE,
        members=(
            MemberDescription(
                member_id="m",
                instance_id=None,
                client_id="x",
                client_host="/h",
                protocol=MemberProtocol.CLASSIC,
                assignment=frozenset({A0}),
                assignment_user_data=b"\x00\x01\x02",
            ),
        ),
    )
    text = describe_text(group)
    assert "assignor capacity" in text
    assert "EPOCH" not in text
    assert "3 bytes" in text


def test_describe_warns_of_partitions_owned_by_nobody_in_a_settled_group() -> None:
    text = describe_text(_consumer_group(), frozenset({B3, A1}))
    warning = next(line for line in text.splitlines() if "WARNING" in line)
    assert "2 partition(s) of the group's subscription owned by nobody" in warning
    assert "a:1 b:3" in warning
    assert "WARNING" not in describe_text(_consumer_group(), frozenset())
    assert "WARNING" not in describe_text(_consumer_group(), None)


def test_lag_rows_and_json_carry_the_computed_lag() -> None:
    lag = GroupLag(
        group=_consumer_group(),
        partitions=(
            PartitionLag(A0, committed=10, log_end=25, member_id="m-new"),
            PartitionLag(B3, committed=None, log_end=5),
        ),
    )
    text = lag_text(lag)
    assert "total lag 15" in text
    a0 = next(line for line in text.splitlines() if line.startswith("a "))
    assert a0.split()[:6] == ["a", "0", "10", "25", "15", "m-new"]
    b3 = next(line for line in text.splitlines() if line.startswith("b "))
    assert b3.split()[:5] == ["b", "3", "-", "5", "-"]
    data = json.loads(json.dumps(jsonable(lag)))
    assert data["total"] == 15
    first = data["partitions"][0]
    assert first["partition"] == {"topic": "a", "partition": 0}
    assert (first["committed"], first["log_end"], first["lag"]) == (10, 25, 15)
    member = data["group"]["members"][0]
    assert member["protocol"] == "consumer"
    assert member["target_assignment"] == [
        {"topic": "a", "partition": 0},
        {"topic": "a", "partition": 1},
    ]
    assert data["group"]["members"][1]["is_static"] is True


def test_json_writes_bytes_as_hex() -> None:
    assert jsonable({"user_data": b"\x00\xff"}) == {"user_data": "00ff"}


def _report() -> MigrationReport:
    return MigrationReport(
        "g",
        (
            Finding(Severity.BLOCKER, "custom-assignor-user-data", "W1.", "Y1.", "F1."),
            Finding(Severity.INFO, "broker-ready", "W2.", "Y2."),
        ),
    )


def test_the_report_text_gives_the_verdict_then_what_why_and_fix() -> None:
    text = report_text(_report())
    first = text.splitlines()[0]
    assert "NOT safe to roll" in first
    assert "1 blocker, 0 warnings, 1 info" in first
    assert "[BLOCKER] custom-assignor-user-data" in text
    assert "what: W1." in text
    assert "fix:  F1." in text
    # An info without a fix prints no empty fix line.
    assert text.count("fix:") == 1


def test_the_report_json_says_whether_it_is_safe() -> None:
    data = jsonable(_report())
    assert data["safe"] is False
    assert data["findings"][0]["severity"] == "blocker"


def test_the_plan_text_lists_settings_then_the_order() -> None:
    plan = MigrationPlan(
        group_id="g",
        steps=(MemberStep(1, "m1", "pod-1", "app", "/h", 2),),
        set_keys={"group.protocol": "consumer"},
        remove_keys=("session.timeout.ms",),
        subscription_changes={"^a": "^a.*"},
        notes=("Watch the lag.",),
        blocked=True,
    )
    text = plan_text(plan)
    assert "resolve them before rolling" in text
    assert "set     group.protocol=consumer" in text
    assert "remove  session.timeout.ms" in text
    assert "subscribe with '^a.*' instead of '^a'" in text
    assert "1. m1 (instance pod-1, client app on /h, 2 partition(s))" in text
    assert "- Watch the lag." in text
