"""``kgroup report``'s command line: argument checks (no Spark needed) and the import rule."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from kgroup.cli import report_main as main
from kgroup.cli.report import add_report_command


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--out", "o"], "give the telemetry: --input PATH"),
        (["--input", "a", "--topic", "t", "--bootstrap-servers", "b", "--out", "o"], "not both"),
        (["--topic", "t", "--out", "o"], "--topic needs --bootstrap-servers"),
        (["--input", "a", "--bootstrap-servers", "b", "--out", "o"], "only used with --topic"),
        (["--input", "a", "--kafka-option", "x=y", "--out", "o"], "only used with --topic"),
        (["--input", "a", "--clock-skew", "-1", "--out", "o"], "must not be negative"),
    ],
)
def test_bad_arguments_are_named(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_missing_input_is_a_clear_error(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--input", "/nonexistent/telemetry", "--out", "/tmp/unused-report"]) == 2
    assert "/nonexistent/telemetry does not exist" in capsys.readouterr().err


def test_subcommand_hooks_into_a_parent_parser() -> None:
    parser = argparse.ArgumentParser(prog="kgroup")
    add_report_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["report", "--input", "x", "--out", "o", "--master", "local[1]"])
    assert (args.command, args.input, args.master, args.func.__name__) == (
        "report",
        ["x"],
        "local[1]",
        "run",
    )


def test_importing_kgroup_never_imports_pyspark() -> None:
    code = (
        "import sys, kgroup, kgroup.cli, kgroup.telemetry, kgroup.report, kgroup.cli.report,"
        " kgroup.report.synth;"
        "print(','.join(m for m in ('pyspark', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == ""
