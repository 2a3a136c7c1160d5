"""The ``kgroup report`` subcommand (also ``python -m kgroup.report``).

The report's command line belongs to the CLI package, so that the shipped
report (:mod:`kgroup.report`) stays importable without the CLI.

::

    kgroup report --input PATH [PATH ...] --out DIR [--master M]
    kgroup report --topic T --bootstrap-servers B --out DIR [--master M]

This module does not import pyspark: ``kgroup --help`` stays fast and works
without the ``report`` extra; the job is imported when the command runs.

:mod:`kgroup.cli` hooks the subcommand in with :func:`add_report_command`.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
from pathlib import Path

from kgroup.cli.common import parse_key_value
from kgroup.errors import SparkMissingError

__all__ = ["EXIT_DOUBLE_OWNERSHIP", "add_report_command", "run"]

_log = logging.getLogger("kgroup.report")

EXIT_DOUBLE_OWNERSHIP = 3
"""Exit code of ``--fail-on-double-ownership`` when the report found double ownership."""
_FAILED = 2


def _configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("input (one of)")
    source.add_argument(
        "--input",
        nargs="+",
        metavar="PATH",
        help="JSON Lines telemetry: files, directories (read recursively) or globs",
    )
    source.add_argument("--topic", help="read the telemetry topic of the Kafka sink instead")
    source.add_argument("--bootstrap-servers", help="the Kafka cluster of --topic")
    source.add_argument(
        "--kafka-option",
        action="append",
        type=parse_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="consumer setting for Spark's Kafka source, e.g. security.protocol=SSL (repeatable)",
    )
    parser.add_argument("--out", required=True, help="directory for tables/ and report.html")
    parser.add_argument(
        "--master", default="local[*]", help="Spark master URL (default local[*]: this machine)"
    )
    parser.add_argument(
        "--driver-memory", default="2g", help="Spark driver memory, e.g. 4g (default 2g)"
    )
    parser.add_argument(
        "--conf",
        action="append",
        type=parse_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="any Spark setting (repeatable)",
    )
    parser.add_argument(
        "--clock-skew",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="overlaps no longer than this are reported but not counted as double ownership "
        "(members on different hosts compare wall clocks; default 0)",
    )
    parser.add_argument("--no-html", action="store_true", help="write the tables only")
    parser.add_argument(
        "--fail-on-double-ownership",
        action="store_true",
        help=f"exit {EXIT_DOUBLE_OWNERSHIP} if any partition was fetched by two members at once",
    )
    parser.set_defaults(func=run)


def add_report_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``report`` to the ``kgroup`` command's subcommands."""
    parser = subparsers.add_parser(
        "report",
        help="the fleet report: ownership timelines, double ownership, gaps, rebalances (Spark)",
        description=(
            "Run a Spark job over kgroup telemetry (JSON Lines files or the Kafka sink's topic) "
            "and write Parquet tables and a self-contained HTML report. Needs the report extra: "
            "pip install 'kgroup[report]'."
        ),
    )
    _configure(parser)


def _check_args(args: argparse.Namespace) -> str | None:
    if args.input and args.topic:
        return "give either --input or --topic, not both"
    if not args.input and not args.topic:
        return "give the telemetry: --input PATH ... or --topic T --bootstrap-servers B"
    if args.topic and not args.bootstrap_servers:
        return "--topic needs --bootstrap-servers"
    if args.bootstrap_servers and not args.topic:
        return "--bootstrap-servers is only used with --topic"
    if args.kafka_option and not args.topic:
        return "--kafka-option is only used with --topic"
    if args.clock_skew < 0:
        return "--clock-skew must not be negative"
    for path in args.input or ():
        # Globs and remote file systems (s3a://, hdfs://) are Spark's to resolve.
        if not any(ch in path for ch in "*?[") and "://" not in path and not Path(path).exists():
            return f"input {path} does not exist"
    return None


def run(args: argparse.Namespace) -> int:
    """Run the report for parsed arguments; return the exit code."""
    problem = _check_args(args)
    if problem:
        print(f"kgroup report: {problem}", file=sys.stderr)
        return _FAILED
    for module in ("pyspark", "matplotlib"):
        if importlib.util.find_spec(module) is None:
            raise SparkMissingError(
                f"{module} is not installed; kgroup report needs the report extra: "
                "pip install 'kgroup[report]'"
            )
    # py4j logs every exchange with the JVM at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # The job imports pyspark, which is optional (the report extra): it loads
    # only when the command runs, so `kgroup --help` works without the extra.
    from kgroup.report.job import run_report_in_session, summaries_text  # noqa: PLC0415
    from kgroup.report.source import FileSource, KafkaSource  # noqa: PLC0415

    source: FileSource | KafkaSource
    if args.topic:
        source = KafkaSource(args.bootstrap_servers, args.topic, dict(args.kafka_option))
    else:
        source = FileSource(tuple(args.input))
    result = run_report_in_session(
        source,
        args.out,
        master=args.master,
        driver_memory=args.driver_memory,
        conf=dict(args.conf),
        clock_skew_s=args.clock_skew,
        html=not args.no_html,
    )
    for line in summaries_text(result.groups):
        print(line)
    if result.malformed:
        print(f"{result.malformed} input lines were not telemetry events")
    print(f"tables: {result.out_dir / 'tables'}")
    if result.html is not None:
        print(f"report: {result.html}")
    if args.fail_on_double_ownership and result.double_ownership:
        print(
            f"kgroup report: {result.double_ownership} double-ownership intervals",
            file=sys.stderr,
        )
        return EXIT_DOUBLE_OWNERSHIP
    return 0
