"""What the CLI and the harness tell a person: stop outcomes, Maven's progress line, --version."""

from __future__ import annotations

import importlib.metadata
import io
import re
import stat
import textwrap
from pathlib import Path

import pytest

from kgroup.cli import main
from kgroup.errors import JarResolutionError
from kgroup.testing._lifecycle import StopHow, StopOutcome
from kgroup.testing.jvm import resolve_kafka_libs


class TestStopOutcome:
    @pytest.mark.parametrize(
        ("how", "seconds", "timeout", "expected"),
        [
            (StopHow.CLEAN, 1.23, 30.0, "stopped broker pid 42 (clean shutdown in 1.2 s)"),
            (
                StopHow.FORCED,
                30.4,
                30.0,
                "broker pid 42 did not shut down within 30 s of SIGTERM; killed it (SIGKILL)",
            ),
            (
                StopHow.FORCED,
                0.6,
                0.5,
                "broker pid 42 did not shut down within 0.5 s of SIGTERM; killed it (SIGKILL)",
            ),
            (StopHow.KILLED, 0.01, 30.0, "killed broker pid 42 (SIGKILL, no controlled shutdown)"),
            (StopHow.GONE, 0.0, 30.0, "broker pid 42 had already exited"),
        ],
    )
    def test_each_way_a_stop_can_go_is_said_plainly(
        self, how: StopHow, seconds: float, timeout: float, expected: str
    ) -> None:
        assert StopOutcome("broker", 42, how, seconds, timeout).describe() == expected

    def test_only_a_forced_or_deliberate_kill_mentions_sigkill(self) -> None:
        for how in StopHow:
            text = StopOutcome("Kafka node 1", 7, how, 1.0, 30.0).describe()
            assert ("SIGKILL" in text) == (how in {StopHow.FORCED, StopHow.KILLED}), text


# ------------------------------------------------------------------ Maven's progress


_DOWNLOADS = 250


def fake_maven(bin_dir: Path, *, fail: bool = False) -> None:
    """An ``mvn`` that talks like Maven in batch mode and copies two jars (or fails)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    if fail:
        body = """
            echo "[INFO] Scanning for projects..."
            echo "[ERROR] Failed to execute goal: Could not resolve dependencies"
            echo "[ERROR] -> [Help 1]"
            exit 1
        """
    else:
        body = f"""
            out=""
            for arg in "$@"; do
              case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";; esac
            done
            echo "[INFO] Scanning for projects..."
            i=0
            while [ $i -lt {_DOWNLOADS} ]; do
              echo "[INFO] Downloading from central: https://repo/a$i.jar"
              echo "[INFO] Downloaded from central: https://repo/a$i.jar (1 kB at 9 kB/s)"
              i=$((i + 1))
            done
            mkdir -p "$out"
            : > "$out/kafka_2.13-9.9.9.jar"
            : > "$out/kafka-clients-9.9.9.jar"
            echo "[INFO] BUILD SUCCESS"
        """
    script = bin_dir / "mvn"
    script.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def maven_env(bin_dir: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class TestMavenProgress:
    def test_one_line_instead_of_mavens_output(self, tmp_path: Path) -> None:
        fake_maven(tmp_path / "bin")
        progress = io.StringIO()
        libs = resolve_kafka_libs(
            "9.9.9",
            cache_dir=tmp_path / "cache",
            progress=progress,
            environ=maven_env(tmp_path / "bin"),
        )
        assert sorted(p.name for p in libs.iterdir()) == [
            "kafka-clients-9.9.9.jar",
            "kafka_2.13-9.9.9.jar",
        ]
        assert re.fullmatch(
            r"kgroup: fetching Apache Kafka 9\.9\.9 jars from Maven Central \.\.\. "
            r"done in \d+\.\d s \(2 jars\)\n",
            progress.getvalue(),
        ), progress.getvalue()
        # Maven's own lines are kept, in a file, for whoever needs them.
        log = (tmp_path / "cache" / "kafka-9.9.9" / "maven.log").read_text()
        assert log.count("Downloaded from central") == _DOWNLOADS

    def test_a_second_call_says_nothing(self, tmp_path: Path) -> None:
        fake_maven(tmp_path / "bin")
        env = maven_env(tmp_path / "bin")
        resolve_kafka_libs("9.9.9", cache_dir=tmp_path, progress=io.StringIO(), environ=env)
        again = io.StringIO()
        resolve_kafka_libs("9.9.9", cache_dir=tmp_path, progress=again, environ=env)
        assert again.getvalue() == ""

    def test_a_terminal_sees_the_same_line_rewritten(self, tmp_path: Path) -> None:
        fake_maven(tmp_path / "bin")
        terminal = _Terminal()
        resolve_kafka_libs(
            "9.9.9", cache_dir=tmp_path, progress=terminal, environ=maven_env(tmp_path / "bin")
        )
        text = terminal.getvalue()
        assert text.count("\n") == 1
        assert text.endswith(" jars)\n")
        # Every rewrite starts over at the beginning of the line.
        assert all(
            part.startswith("kgroup: fetching Apache Kafka 9.9.9") for part in text.split("\r")[1:]
        )

    def test_a_failure_ends_the_line_and_quotes_mavens_errors(self, tmp_path: Path) -> None:
        fake_maven(tmp_path / "bin", fail=True)
        progress = io.StringIO()
        with pytest.raises(JarResolutionError) as raised:
            resolve_kafka_libs(
                "9.9.9", cache_dir=tmp_path, progress=progress, environ=maven_env(tmp_path / "bin")
            )
        # The line ends in the failure, then the end of Maven's output is shown.
        first, *rest = progress.getvalue().splitlines()
        assert re.fullmatch(
            r"kgroup: fetching Apache Kafka 9\.9\.9 jars from Maven Central \.\.\. "
            r"failed after \d+\.\d s",
            first,
        ), first
        assert rest[0].startswith("kgroup: the last 3 lines of Maven's output (")
        assert rest[1:] == [
            "  [INFO] Scanning for projects...",
            "  [ERROR] Failed to execute goal: Could not resolve dependencies",
            "  [ERROR] -> [Help 1]",
        ]
        message = str(raised.value)
        assert "[ERROR] Failed to execute goal: Could not resolve dependencies" in message
        assert "Scanning for projects" not in message  # the errors, not the chatter
        assert str(tmp_path / "kafka-9.9.9" / "maven.log") in message
        assert not (tmp_path / "kafka-9.9.9" / "complete").exists()


# ------------------------------------------------------------------------ --version


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"kgroup {importlib.metadata.version('kgroup')}\n"
