"""``kgroup consume`` / ``kgroup produce`` without a broker: the format, JSON lines,
where a partition starts, input lines, and the options the parser takes."""

from __future__ import annotations

import base64
import json

import pytest

from kgroup.cli import build_parser, main
from kgroup.cli.tail import (
    DEFAULT_FORMAT,
    TailRecord,
    json_line,
    parse_format,
    parse_line,
    render,
    start_offset,
)
from kgroup.errors import ConfigError

RECORD = TailRecord(
    topic="orders",
    partition=2,
    offset=41,
    timestamp=1_700_000_000_123,
    key=b"k1",
    value=b"hello",
    headers=(("trace", b"abc"), ("empty", None)),
)
BARE = TailRecord(
    topic="orders", partition=0, offset=0, timestamp=None, key=None, value=None, headers=()
)


def fmt(text: str, record: TailRecord = RECORD) -> bytes:
    return render(parse_format(text), record)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("%t", b"orders"),
        ("%p", b"2"),
        ("%o", b"41"),
        ("%k", b"k1"),
        ("%s", b"hello"),
        ("%K", b"2"),
        ("%S", b"5"),
        ("%T", b"1700000000123"),
        ("%h", b"trace=abc,empty="),
        ("%%", b"%"),
        ("%t/%p@%o %k=%s\\n", b"orders/2@41 k1=hello\n"),
        ("a\\tb\\r\\\\", b"a\tb\r\\"),
        ("plain", b"plain"),
    ],
)
def test_each_token_renders_its_part_of_the_record(text: str, expected: bytes) -> None:
    assert fmt(text) == expected


def test_absent_key_value_timestamp_and_headers_render_empty_or_minus_one() -> None:
    assert fmt("[%k][%s][%K][%S][%T][%h]", BARE) == b"[][][-1][-1][-1][]"


def test_the_default_format_is_the_value_on_a_line() -> None:
    assert fmt(DEFAULT_FORMAT) == b"hello\n"


def test_values_are_printed_as_their_raw_bytes() -> None:
    record = TailRecord("t", 0, 0, None, None, b"\xff\x00caf\xc3\xa9", ())
    assert fmt("%s", record) == b"\xff\x00caf\xc3\xa9"


@pytest.mark.parametrize(
    ("text", "says"),
    [("%x", "unknown token %x"), ("%", "lone '%'"), ("\\q", "unknown escape"), ("a\\", "lone")],
)
def test_a_bad_format_is_refused_naming_the_problem(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match="--format") as caught:
        parse_format(text)
    assert says in str(caught.value)


def test_json_line_has_every_field_with_text_for_utf8() -> None:
    assert json.loads(json_line(RECORD)) == {
        "topic": "orders",
        "partition": 2,
        "offset": 41,
        "timestamp": 1_700_000_000_123,
        "key": "k1",
        "key_base64": False,
        "value": "hello",
        "value_base64": False,
        "headers": [
            {"key": "trace", "value": "abc", "value_base64": False},
            {"key": "empty", "value": None, "value_base64": False},
        ],
    }


def test_json_line_shows_bytes_that_are_not_utf8_as_base64_and_says_so() -> None:
    raw = b"\xff\xfe\x00"
    record = TailRecord("t", 0, 5, None, raw, "café".encode(), (("bin", raw),))
    line = json_line(record)
    assert "\n" not in line
    data = json.loads(line)
    assert (data["key"], data["key_base64"]) == (base64.b64encode(raw).decode(), True)
    assert (data["value"], data["value_base64"]) == ("café", False)
    assert data["headers"] == [
        {"key": "bin", "value": base64.b64encode(raw).decode(), "value_base64": True}
    ]
    assert data["timestamp"] is None


def test_json_line_of_a_record_without_key_or_value_has_nulls() -> None:
    data = json.loads(json_line(BARE))
    assert (data["key"], data["value"], data["headers"]) == (None, None, [])


@pytest.mark.parametrize(
    ("offset", "from_beginning", "expected"),
    [
        (None, False, 100),  # new records only
        (None, True, 10),
        (50, False, 50),
        (5, False, 10),  # below the log start: clamped up
        (500, False, 100),  # past the end: clamped down
        (-3, False, 97),  # the last three records
        (-1000, False, 10),  # more than the log holds: from its start
    ],
)
def test_where_a_partition_of_the_log_10_to_100_starts(
    offset: int | None, from_beginning: bool, expected: int
) -> None:
    assert start_offset(offset, from_beginning, low=10, high=100) == expected


@pytest.mark.parametrize(
    ("line", "separator", "expected"),
    [
        (b"k:v", b":", (b"k", b"v")),
        (b"k:v:w", b":", (b"k", b"v:w")),  # the first separator splits
        (b"no-separator", b":", (None, b"no-separator")),
        (b":v", b":", (b"", b"v")),  # an empty key, not a missing one
        (b"k::v", b"::", (b"k", b"v")),
        (b"k:v", None, (None, b"k:v")),
        (b"", None, (None, b"")),
    ],
)
def test_an_input_line_splits_into_key_and_value(
    line: bytes, separator: bytes | None, expected: tuple[bytes | None, bytes]
) -> None:
    assert parse_line(line, separator) == expected


def test_consume_options_parse() -> None:
    args = build_parser().parse_args(
        [
            "consume",
            "orders",
            "--offset",
            "-5",
            "--partition",
            "0",
            "--partition",
            "2",
            "--count",
            "7",
            "--exit-at-end",
            "--format",
            "%k %s\\n",
            "--bootstrap-server",  # kafka's singular spelling works too (a prefix)
            "b:9092",
        ]
    )
    assert (args.topic, args.offset, args.partition, args.count) == ("orders", -5, [0, 2], 7)
    assert (args.exit_at_end, args.json, args.format) == (True, False, "%k %s\\n")
    assert (args.bootstrap_servers, args.group) == ("b:9092", None)


def test_consume_defaults_print_values_of_new_records_forever() -> None:
    args = build_parser().parse_args(["consume", "orders"])
    assert (args.offset, args.from_beginning, args.count, args.exit_at_end) == (
        None,
        False,
        None,
        False,
    )
    assert (args.format, args.partition) == (DEFAULT_FORMAT, None)


@pytest.mark.parametrize(
    "argv",
    [
        ["--from-beginning", "--offset", "3"],
        ["--json", "--format", "%s"],
        ["--format", "%x"],
        ["--count", "0"],
        ["--partition", "-1"],
        ["--offset", "three"],
    ],
)
def test_consume_refuses_bad_or_conflicting_options(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["consume", "orders", *argv])
    assert exited.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [["--partition", "1"], ["--offset", "4"]])
def test_consume_with_a_group_refuses_partitions_and_offsets(
    extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["consume", "orders", "--group", "g", *extra])
    with pytest.raises(SystemExit) as exited:
        args.func(args)  # refused before anything connects
    assert exited.value.code == 2
    assert "--group takes neither --partition nor --offset" in capsys.readouterr().err


def test_produce_options_parse() -> None:
    args = build_parser().parse_args(
        [
            *("produce", "orders", "--key-separator", ":", "--partition", "1"),
            *("--header", "a=1", "--header", "b=x=y", "--command-config", "ops.properties"),
        ]
    )
    assert (args.topic, args.key_separator, args.partition) == ("orders", ":", 1)
    assert args.header == [("a", "1"), ("b", "x=y")]
    assert args.command_config == "ops.properties"


def test_produce_refuses_a_header_without_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["produce", "orders", "--header", "=v"])
    assert "expected key=value" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["consume", "produce"])
def test_no_broker_answering_exits_3_within_the_timeout(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Port 1 refuses connections: the command gives up after --timeout, not never.
    argv = [command, "orders", "--bootstrap-servers", "127.0.0.1:1", "--timeout", "0.5"]
    assert main(argv) == 3
    assert "no broker answered at 127.0.0.1:1 within 0.5 s" in capsys.readouterr().err
