"""The ``kgroup`` command: one package, one module per command family.

Subcommands::

    kgroup --version
    kgroup broker up [--name NAME] [--nodes N] [--override key=value ...] [--version V]
    kgroup broker status [--name NAME]
    kgroup broker down [--name NAME] [--timeout S]
    kgroup topics create|produce NAME ...    (kgroup.cli.topics)
    kgroup consume TOPIC ... | produce TOPIC ...    (kgroup.cli.tail)
    kgroup groups list | describe GROUP | lag GROUP    (kgroup.cli.groups)
    kgroup migrate check GROUP | plan GROUP    (kgroup.cli.groups)
    kgroup report ...    (kgroup.cli.report)
    kgroup demo    (kgroup.cli.demo)

``broker ...`` is :mod:`kgroup.cli.broker`. The modules import one another
in one direction only (checked by the import contracts in ``pyproject.toml``
and ``tests/unit/test_cli_imports.py``): this package imports the command
modules; they import :mod:`kgroup.cli.common` (shared options, the command
config file, which broker to talk to), which imports :mod:`kgroup.cli.state`
(the records ``kgroup broker up`` leaves).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
from collections.abc import Callable, Sequence

from kgroup.cli.broker import add_broker_commands
from kgroup.cli.common import EXIT_FAILED
from kgroup.cli.demo import add_demo_command
from kgroup.cli.groups import add_group_commands, add_migrate_commands
from kgroup.cli.report import add_report_command
from kgroup.cli.tail import add_tail_commands
from kgroup.cli.topics import add_topics_commands
from kgroup.errors import KgroupError

__all__ = ["build_parser", "distribution_version", "main", "report_main"]


def distribution_version() -> str:
    """The installed kgroup distribution's version, or a note that it is not installed."""
    try:
        return importlib.metadata.version("kgroup")
    except importlib.metadata.PackageNotFoundError:
        # Run from a source tree without `pip install`: there is no metadata to read.
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """Return the parser of the ``kgroup`` command; each subcommand sets ``func``."""
    parser = argparse.ArgumentParser(prog="kgroup", description="kgroup command-line tools")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    parser.add_argument("--version", action="version", version=f"%(prog)s {distribution_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_broker_commands(subparsers)
    add_topics_commands(subparsers)
    add_tail_commands(subparsers)
    add_demo_command(subparsers)
    add_group_commands(subparsers)
    add_migrate_commands(subparsers)
    add_report_command(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``kgroup`` command with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="kgroup: %(message)s",
    )
    if not args.verbose:
        # librdkafka's connection chatter during readiness checks is not progress.
        logging.getLogger("kgroup.testing.readiness").setLevel(logging.WARNING)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except KgroupError as exc:
        print(f"kgroup: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader of the output went away (`kgroup groups lag --all-groups | head`):
        # what it wanted was printed. Python would report the pipe again when it
        # flushes stdout at exit, so stdout goes to /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0


def report_main(argv: Sequence[str] | None = None) -> int:
    """``python -m kgroup.report``: exactly ``kgroup report ARGS``; returns the exit code."""
    return main(["report", *(sys.argv[1:] if argv is None else argv)])
