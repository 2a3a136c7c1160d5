"""``kgroup topics`` without a broker: where the broker comes from, records, errors, exit codes."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kgroup.cli import build_parser, main
from kgroup.cli.topics import (
    EXIT_FAILED,
    EXIT_UNREACHABLE,
    RecordedBootstrap,
    choose_bootstrap_servers,
    record_value,
)
from kgroup.errors import ConfigError


def brokers(table: dict[str | None, str]) -> RecordedBootstrap:
    """A stand-in for the ``kgroup broker up`` records: name (None: this directory) -> servers."""
    return table.get


class TestChooseBootstrapServers:
    def test_the_flag_comes_first(self) -> None:
        env = {"KAFKA_BOOTSTRAP_SERVERS": "env:1"}
        here = brokers({None: "here:1", "named": "named:1"})
        assert choose_bootstrap_servers("flag:1", None, here, env) == "flag:1"

    def test_a_named_broker_comes_before_the_environment(self) -> None:
        env = {"KAFKA_BOOTSTRAP_SERVERS": "env:1"}
        here = brokers({None: "here:1", "named": "named:1"})
        assert choose_bootstrap_servers(None, "named", here, env) == "named:1"

    def test_the_environment_comes_before_this_directorys_broker(self) -> None:
        here = brokers({None: "here:1"})
        assert choose_bootstrap_servers(None, None, here, {"KAFKA_BOOTSTRAP_SERVERS": "e:1"}) == (
            "e:1"
        )
        assert choose_bootstrap_servers(None, None, here, {"KAFKA_BOOTSTRAP_SERVERS": " "}) == (
            "here:1"
        )

    def test_no_broker_anywhere_says_how_to_get_one(self) -> None:
        with pytest.raises(ConfigError) as raised:
            choose_bootstrap_servers(None, None, brokers({}), {})
        for hint in ("--bootstrap-servers", "KAFKA_BOOTSTRAP_SERVERS", "kgroup broker up"):
            assert hint in str(raised.value)

    def test_a_named_broker_that_does_not_run(self) -> None:
        with pytest.raises(ConfigError, match="kgroup broker up --name team"):
            choose_bootstrap_servers(None, "team", brokers({}), {"KAFKA_BOOTSTRAP_SERVERS": "e:1"})


class TestRecordValue:
    @pytest.mark.parametrize("size", [0, 1, 5, 9, 10, 64, 1000])
    def test_exactly_size_bytes(self, size: int) -> None:
        assert len(record_value(7, size)) == size

    def test_readable(self) -> None:
        assert record_value(12, 16) == b"record 12 ......"


class TestParser:
    def test_defaults(self) -> None:
        create = build_parser().parse_args(["topics", "create", "orders"])
        assert (create.name, create.partitions, create.replication_factor) == ("orders", 3, 1)
        assert create.config is None
        assert not create.if_not_exists
        produce = build_parser().parse_args(["topics", "produce", "orders"])
        assert (produce.count, produce.size, produce.key_prefix, produce.rate) == (
            100,
            64,
            "key-",
            None,
        )

    def test_options(self) -> None:
        args = build_parser().parse_args(
            ["topics", "create", "t", "--partitions", "6", "--config", "retention.ms=1000"]
        )
        assert args.partitions == 6
        assert args.config == [("retention.ms", "1000")]

    @pytest.mark.parametrize(
        ("argv", "complaint"),
        [
            (["topics", "create", "t", "--partitions", "0"], "at least 1"),
            (["topics", "create", "t", "--replication-factor", "x"], "whole number"),
            (["topics", "create", "t", "--config", "novalue"], "key=value"),
            (["topics", "produce", "t", "--count", "-1"], "not be negative"),
            (["topics", "produce", "t", "--rate", "0"], "above 0"),
            (["topics", "produce", "t", "--broker-name", "../x"], "not a broker name"),
            (
                ["topics", "produce", "t", "--bootstrap-servers", "a:1", "--broker-name", "b"],
                "not allowed with",
            ),
            (["topics", "produce"], "NAME"),
        ],
    )
    def test_bad_usage(
        self, argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args(argv)
        assert exited.value.code == 2
        assert complaint in capsys.readouterr().err


class TestWithoutABroker:
    @pytest.fixture(autouse=True)
    def nowhere(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
        monkeypatch.delenv("KGROUP_STATE_DIR", raising=False)
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
        monkeypatch.chdir(tmp_path)

    @pytest.mark.parametrize("command", ["create", "produce"])
    def test_no_broker_known(self, command: str, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["topics", command, "t"]) == EXIT_FAILED
        assert "kgroup broker up" in capsys.readouterr().err

    @pytest.mark.parametrize("command", ["create", "produce"])
    def test_a_broker_that_does_not_answer(
        self, command: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        # A port nobody listens on: bound, never listening, so connections are refused.
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            where = f"127.0.0.1:{taken.getsockname()[1]}"
            code = main(["topics", command, "t", "--bootstrap-servers", where, "--timeout", "1"])
        assert code == EXIT_UNREACHABLE
        err = capsys.readouterr().err
        assert f"no broker answered at {where} within 1 s" in err
        assert err.count("\n") == 1, err  # librdkafka's own complaints stay out (see -v)
