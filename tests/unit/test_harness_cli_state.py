"""The ``kgroup`` CLI without a broker: parsing, state records and directories, stopping."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kgroup.cli import build_parser, main
from kgroup.cli.state import BrokerRecord, NodeRecord, broker_name, broker_state_dir, state_dir
from kgroup.errors import ConfigError


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


# ---------------------------------------------------------------- one broker per directory


@pytest.fixture
def state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default layout: no KGROUP_STATE_DIR, the root under XDG_STATE_HOME."""
    monkeypatch.delenv("KGROUP_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "kgroup"


def project(tmp_path: Path, name: str) -> Path:
    directory = tmp_path / "projects" / name
    directory.mkdir(parents=True)
    return directory


class TestBrokerStateDir:
    def test_each_working_directory_has_its_own(self, tmp_path: Path) -> None:
        env = {"XDG_STATE_HOME": str(tmp_path)}
        a = broker_state_dir(cwd=tmp_path / "a" / "app", environ=env)
        b = broker_state_dir(cwd=tmp_path / "b" / "app", environ=env)
        assert a != b
        assert a.parent == b.parent == tmp_path / "kgroup" / "dirs"
        # Recognisable by the directory's base name, told apart by the hash.
        assert a.name.startswith("app-")
        assert b.name.startswith("app-")
        assert broker_state_dir(cwd=tmp_path / "a" / "app", environ=env) == a

    def test_the_process_working_directory_is_the_default(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        env = {"XDG_STATE_HOME": str(tmp_path)}
        here = project(tmp_path, "here")
        monkeypatch.chdir(here)
        assert broker_state_dir(environ=env) == broker_state_dir(cwd=here, environ=env)

    def test_a_name_is_shared_by_every_directory(self, tmp_path: Path) -> None:
        env = {"XDG_STATE_HOME": str(tmp_path)}
        named = broker_state_dir("shared", cwd=tmp_path / "a", environ=env)
        assert named == tmp_path / "kgroup" / "names" / "shared"
        assert broker_state_dir("shared", cwd=tmp_path / "b", environ=env) == named

    def test_kgroup_state_dir_pins_the_directory(self, tmp_path: Path) -> None:
        env = {"KGROUP_STATE_DIR": str(tmp_path / "pinned")}
        assert broker_state_dir(cwd=tmp_path / "a", environ=env) == tmp_path / "pinned"
        assert broker_state_dir(cwd=tmp_path / "b", environ=env) == tmp_path / "pinned"

    def test_a_name_and_kgroup_state_dir_contradict(self, tmp_path: Path) -> None:
        env = {"KGROUP_STATE_DIR": str(tmp_path)}
        with pytest.raises(ConfigError, match="KGROUP_STATE_DIR"):
            broker_state_dir("x", environ=env)

    @pytest.mark.parametrize("bad", ["", "../up", "a/b", "-x", ".hidden", "x" * 65, "sp ace"])
    def test_names_that_are_not_plain_directory_names(self, bad: str) -> None:
        with pytest.raises(argparse.ArgumentTypeError, match="not a broker name"):
            broker_name(bad)

    def test_the_parser_checks_names(self, capsys: pytest.CaptureFixture[str]) -> None:
        for command in ("up", "status", "down"):
            assert build_parser().parse_args(["broker", command, "--name", "ok-1"]).name == "ok-1"
            with pytest.raises(SystemExit):
                build_parser().parse_args(["broker", command, "--name", "../etc"])
        assert "not a broker name" in capsys.readouterr().err


class TestTwoDirectories:
    def test_status_and_down_see_only_this_directory(
        self,
        state_root: Path,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        a, b = project(tmp_path, "a"), project(tmp_path, "b")
        state_a = broker_state_dir(cwd=a)
        (state_a / "broker").mkdir(parents=True)
        (state_a / "broker.json").write_text(a_record(state_a / "broker", dead_pid()).to_json())

        monkeypatch.chdir(b)
        assert main(["broker", "status"]) == 1
        out = capsys.readouterr()
        assert out.out == "not running\n"
        assert f"directory {b}" in out.err
        assert main(["broker", "down"]) == 0
        assert "no broker is up" in capsys.readouterr().err
        assert (state_a / "broker.json").exists(), "down in b removed a's state"

        monkeypatch.chdir(a)
        assert main(["broker", "status"]) == 1
        assert "127.0.0.1:1" in capsys.readouterr().out  # a's record, not b's nothing
        assert main(["broker", "down"]) == 0
        assert not state_a.exists()

    def test_a_named_broker_is_found_from_any_directory(
        self,
        state_root: Path,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        named = broker_state_dir("team")
        named.mkdir(parents=True)
        (named / "broker.json").write_text(a_record(named / "broker", dead_pid()).to_json())
        monkeypatch.chdir(project(tmp_path, "c"))
        assert main(["broker", "status", "--name", "team"]) == 1
        assert "bootstrap: 127.0.0.1:1" in capsys.readouterr().out
        assert main(["broker", "status"]) == 1
        assert capsys.readouterr().out == "not running\n"


# ---------------------------------------------------------------- down stops only its broker


# A stand-in for a broker JVM: its command line carries kafka.Kafka and the
# node's config file, as the real one does. It says when it is ready, then
# exits on SIGTERM after a short "controlled shutdown", or ignores SIGTERM.
_FAKE_BROKER = """
import signal, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, lambda *_: (time.sleep(0.2), sys.exit(0)))
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def fake_broker(config: Path, on_sigterm: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _FAKE_BROKER, on_sigterm, "kafka.Kafka", str(config)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"  # its signal handler is in place
    return proc


def broker_record(state: Path, proc: subprocess.Popen[str], config: Path) -> BrokerRecord:
    node = NodeRecord(
        node_id=1,
        pid=proc.pid,
        client_port=1,
        controller_port=2,
        log_path=str(config.parent / "broker.log"),
        config_path=str(config),
    )
    return BrokerRecord("4.4.0", "127.0.0.1:1", str(state / "broker"), (node,), "test")


class TestDown:
    def test_a_clean_shutdown_is_reported_as_one(
        self, state: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config = state / "broker" / "node-1" / "server.properties"
        config.parent.mkdir(parents=True)
        proc = fake_broker(config, "exit")
        try:
            (state / "broker.json").write_text(broker_record(state, proc, config).to_json())
            assert main(["broker", "status"]) == 0
            capsys.readouterr()
            assert main(["broker", "down", "--timeout", "20"]) == 0
            assert proc.wait(timeout=20) == 0  # it exited by itself: SIGTERM, not SIGKILL
        finally:
            proc.kill()
            proc.wait()
        err = capsys.readouterr().err
        assert re.search(rf"stopped broker pid {proc.pid} \(clean shutdown in \d+\.\d s\)", err)
        assert "SIGKILL" not in err
        assert not (state / "broker.json").exists()

    def test_a_broker_that_ignores_sigterm_is_killed_after_the_timeout(
        self, state: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config = state / "broker" / "node-1" / "server.properties"
        config.parent.mkdir(parents=True)
        proc = fake_broker(config, "ignore")
        try:
            (state / "broker.json").write_text(broker_record(state, proc, config).to_json())
            assert main(["broker", "down", "--timeout", "0.5"]) == 0
            assert proc.wait(timeout=20) == -signal.SIGKILL
        finally:
            proc.kill()
            proc.wait()
        err = capsys.readouterr().err
        assert (
            f"broker pid {proc.pid} did not shut down within 0.5 s of SIGTERM; killed it (SIGKILL)"
            in err
        )

    def test_a_pid_now_running_another_program_is_left_alone(
        self, state: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config = state / "broker" / "node-1" / "server.properties"
        config.parent.mkdir(parents=True)
        # A Kafka broker, but not the one this state started (another config file).
        other = fake_broker(state / "elsewhere" / "server.properties", "exit")
        try:
            (state / "broker.json").write_text(broker_record(state, other, config).to_json())
            assert main(["broker", "down"]) == 0
            err = capsys.readouterr().err
            assert f"pid {other.pid} is not the broker node 1 started here" in err
            assert "leaving it alone" in err
            assert other.poll() is None, "down signalled a process it did not start"
            assert not (state / "broker.json").exists()  # the stale state is gone
        finally:
            other.kill()
            other.wait()

    def test_records_without_a_config_path_use_the_one_beside_the_log(self) -> None:
        node = NodeRecord(node_id=1, pid=1, client_port=1, controller_port=2, log_path="/w/b.log")
        assert node.command_marker == "/w/server.properties"
