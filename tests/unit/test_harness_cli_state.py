"""The ``kgroup`` CLI without a broker: parsing, state records, stale state."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kgroup.cli import BrokerRecord, NodeRecord, build_parser, main, state_dir


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "state"
    monkeypatch.setenv("KGROUP_STATE_DIR", str(directory))
    return directory


def a_record(work_dir: Path, pid: int) -> BrokerRecord:
    return BrokerRecord(
        version="4.4.0",
        bootstrap_servers="127.0.0.1:1",
        work_dir=str(work_dir),
        nodes=(NodeRecord(node_id=1, pid=pid, client_port=1, controller_port=2, log_path="x"),),
    )


def dead_pid() -> int:
    # Pid numbers wrap far above this on Linux, and 2**22 + 1 exceeds pid_max.
    return 4_194_305


class TestParser:
    def test_up_options(self) -> None:
        args = build_parser().parse_args(
            ["broker", "up", "--nodes", "3", "--override", "a.b=1", "--override", "c=x=y"]
        )
        assert args.nodes == 3
        assert args.override == [("a.b", "1"), ("c", "x=y")]
        assert args.version is None

    def test_bad_override(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit):
            build_parser().parse_args(["broker", "up", "--override", "novalue"])
        assert "key=value" in capsys.readouterr().err

    def test_a_command_is_required(self) -> None:
        with pytest.raises(SystemExit):
            build_parser().parse_args([])


class TestStateDir:
    def test_locations(self, tmp_path: Path) -> None:
        assert state_dir({"KGROUP_STATE_DIR": str(tmp_path)}) == tmp_path
        assert state_dir({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "kgroup"
        assert state_dir({}) == Path.home() / ".local" / "state" / "kgroup"


class TestRecord:
    def test_json_round_trip(self, tmp_path: Path) -> None:
        record = a_record(tmp_path, 123)
        assert BrokerRecord.from_json(record.to_json()) == record


class TestCommandsWithoutBroker:
    def test_status_when_nothing_is_up(
        self, state: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["broker", "status"]) == 1
        assert capsys.readouterr().out == "not running\n"

    def test_down_when_nothing_is_up(self, state: Path) -> None:
        assert main(["broker", "down"]) == 0

    def test_stale_state(self, state: Path, capsys: pytest.CaptureFixture[str]) -> None:
        work = state / "broker"
        work.mkdir(parents=True)
        (state / "broker.json").write_text(a_record(work, dead_pid()).to_json())
        assert main(["broker", "status"]) == 1
        assert capsys.readouterr().out.startswith("not running\n")
        assert main(["broker", "down"]) == 0
        assert not (state / "broker.json").exists()
        assert not work.exists()

    def test_a_live_pid_of_another_program_is_not_a_broker(
        self, state: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        state.mkdir(parents=True)
        (state / "broker.json").write_text(a_record(state / "broker", os.getpid()).to_json())
        assert main(["broker", "status"]) == 1
        assert capsys.readouterr().out.startswith("not running\n")

    def test_unreadable_state_counts_as_none(
        self, state: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        state.mkdir(parents=True)
        (state / "broker.json").write_text("{not json")
        assert main(["broker", "status"]) == 1
