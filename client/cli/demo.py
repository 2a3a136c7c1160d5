"""``kgroup demo``: three consumers share a topic on the new protocol; one leaves."""

from __future__ import annotations

import argparse
import logging

from kgroup.cli.common import EXIT_FAILED

__all__ = ["add_demo_command"]


def _demo(args: argparse.Namespace) -> int:
    # The consumer stack takes most of a second to import; other commands skip it.
    from kgroup.demo import DemoFailedError, run_demo  # noqa: PLC0415

    if not args.verbose:
        # The demo narrates the rebalance itself; the members' own INFO logs
        # (every epoch and assignment change) are there with --verbose. The
        # broker's start-up progress stays.
        logging.getLogger("kgroup").setLevel(logging.WARNING)
        logging.getLogger("kgroup.testing").setLevel(logging.INFO)

    def say(line: str) -> None:
        print(f"[demo] {line}", flush=True)

    try:
        run_demo(
            args.bootstrap_servers,
            partitions=args.partitions,
            records=args.records,
            say=say,
        )
    except DemoFailedError as exc:
        say(f"FAILED: {exc}")
        return EXIT_FAILED
    say("done")
    return 0


def add_demo_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = subparsers.add_parser(
        "demo",
        help="three consumers share a topic on the new protocol; one leaves; nothing is lost",
        description=(
            "Start an embedded broker (unless --bootstrap-servers is given), create a topic, "
            "produce records, run three kgroup consumers on the new protocol (KIP-848), close "
            "one of them, and check that every record was consumed."
        ),
    )
    demo.add_argument("--bootstrap-servers", help="use this broker instead of an embedded one")
    demo.add_argument("--partitions", type=int, default=12, help="partitions of the demo topic")
    demo.add_argument("--records", type=int, default=1200, help="records to produce in all")
    demo.set_defaults(func=_demo)
