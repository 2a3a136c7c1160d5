"""The parts of ``kgroup groups reset-offsets | delete | delete-offsets`` that need no broker:
option parsing, durations and times, the plan's text."""

from __future__ import annotations

import argparse
import datetime

import pytest

from kgroup.admin.writes import OffsetReset, ResetKind, ResetTarget, parse_duration
from kgroup.cli import build_parser, main
from kgroup.cli.groups import _reset_target, _topics, parse_topic_partitions, reset_text
from kgroup.errors import ConfigError
from kgroup.types import TopicPartition


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT1H", datetime.timedelta(hours=1)),
        ("P1D", datetime.timedelta(days=1)),
        ("P1DT12H", datetime.timedelta(days=1, hours=12)),
        ("PT30M", datetime.timedelta(minutes=30)),
        ("PT0.5S", datetime.timedelta(seconds=0.5)),
        ("pt5h30m", datetime.timedelta(hours=5, minutes=30)),
        ("-PT1H", -datetime.timedelta(hours=1)),
    ],
)
def test_iso_durations_in_days_and_time_are_read(text: str, expected: datetime.timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "P1W", "P1M", "PT1H2", "yesterday"])
def test_anything_else_is_a_config_error_naming_the_option(text: str) -> None:
    with pytest.raises(ConfigError, match="--by-duration"):
        parse_duration(text)


def test_topic_partitions_are_a_topic_or_a_topic_and_its_partitions() -> None:
    assert parse_topic_partitions("orders") == ("orders", ())
    assert parse_topic_partitions("orders:2,0,2") == ("orders", (0, 2))
    for bad in (":1", "orders:", "orders:a", "orders:-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_topic_partitions(bad)


def test_repeated_topics_add_up_and_a_whole_topic_wins() -> None:
    args = argparse.Namespace(
        topic=[("a", (0,)), ("a", (2,)), ("b", (1,)), ("b", ()), ("c", ()), ("c", (3,))]
    )
    assert _topics(args) == {"a": (0, 2), "b": (), "c": ()}


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["groups", "reset-offsets", "g", *argv])


def test_each_option_names_its_target() -> None:
    assert _reset_target(_parse("--all-topics", "--to-earliest")) == ResetTarget(ResetKind.EARLIEST)
    assert _reset_target(_parse("--all-topics", "--to-latest")) == ResetTarget(ResetKind.LATEST)
    assert _reset_target(_parse("--all-topics", "--to-offset", "5")) == ResetTarget(
        ResetKind.OFFSET, 5
    )
    assert _reset_target(_parse("--all-topics", "--shift-by", "-3")) == ResetTarget(
        ResetKind.SHIFT, -3
    )
    # A time without a zone is UTC; one with a zone means that instant.
    utc = _reset_target(_parse("--all-topics", "--to-datetime", "2026-01-31T12:00:00"))
    zoned = _reset_target(_parse("--all-topics", "--to-datetime", "2026-01-31T13:00:00+01:00"))
    z = _reset_target(_parse("--all-topics", "--to-datetime", "2026-01-31T12:00:00Z"))
    expected = int(datetime.datetime(2026, 1, 31, 12, tzinfo=datetime.UTC).timestamp() * 1000)
    assert utc == zoned == z == ResetTarget(ResetKind.TIMESTAMP, expected)


def test_a_duration_is_that_long_before_now() -> None:
    before = datetime.datetime.now(datetime.UTC)
    target = _reset_target(_parse("--all-topics", "--by-duration", "PT2H"))
    after = datetime.datetime.now(datetime.UTC)
    assert target.kind is ResetKind.TIMESTAMP
    two_hours = datetime.timedelta(hours=2)
    assert int((before - two_hours).timestamp() * 1000) <= target.value
    assert target.value <= int((after - two_hours).timestamp() * 1000)


def test_a_bad_datetime_exits_2_naming_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["groups", "reset-offsets", "g", "--all-topics", "--to-datetime", "noon"]
    assert main([*argv, "--bootstrap-servers", "127.0.0.1:1"]) == 2
    assert "--to-datetime 'noon': expected ISO-8601" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ("--to-earliest",),  # no partitions named
        ("--all-topics",),  # no target
        ("--all-topics", "--topic", "t", "--to-earliest"),
        ("--all-topics", "--to-earliest", "--to-latest"),
        ("--all-topics", "--to-earliest", "--dry-run", "--execute"),
    ],
)
def test_one_choice_of_partitions_target_and_mode(argv: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse(*argv)
    assert exited.value.code == 2


def test_dry_run_is_the_default() -> None:
    assert _parse("--all-topics", "--to-earliest").execute is False
    assert _parse("--all-topics", "--to-earliest", "--execute").execute is True


def test_the_plan_prints_as_a_table_saying_whether_it_was_written() -> None:
    plan = (
        OffsetReset(TopicPartition("orders", 0), 10, 7),
        OffsetReset(TopicPartition("orders", 1), None, 0),
    )
    dry = reset_text("app", plan, executed=False)
    assert dry.splitlines() == [
        "Group app: 2 partition(s), dry run, nothing written (add --execute to reset)",
        "",
        "TOPIC   PARTITION  CURRENT  NEW",
        "orders  0          10       7",
        "orders  1          -        0",
    ]
    assert reset_text("app", plan, executed=True).splitlines()[0] == (
        "Group app: 2 partition(s), reset"
    )
    assert reset_text("app", (), executed=True) == "Group app: no partition to reset"
