"""Command line of the simulator.

    python -m kgroup.testing.sim --seeds 1000000 [--start 0]   # soak
    python -m kgroup.testing.sim --replay 1234 [--shrink]      # one seed, with its trace

``--inject-bug NAME`` turns on a test-only bug (see ``InjectedBug``). Exit
status: 0 when every seed passed, 1 when one failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from kgroup.testing.sim.engine import InjectedBug
from kgroup.testing.sim.scenario import (
    Result,
    replay_command,
    run,
    run_scenario,
    shrink,
    soak,
)

__all__ = ["main"]


def _bug(name: str) -> InjectedBug:
    key = name.upper().replace("-", "_")
    try:
        return InjectedBug[key]
    except KeyError:
        choices = ", ".join(b.name.lower().replace("_", "-") for b in InjectedBug)
        raise argparse.ArgumentTypeError(f"unknown bug {name!r}; choose from {choices}") from None


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m kgroup.testing.sim",
        description="Deterministic simulation of kgroup members against a KIP-848 coordinator.",
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--seeds", type=int, metavar="N", help="run N seeded scenarios (soak)")
    mode.add_argument("--replay", type=int, metavar="SEED", help="replay one seed with its trace")
    p.add_argument("--start", type=int, default=0, help="first seed of a soak (default 0)")
    p.add_argument("--inject-bug", type=_bug, default=None, metavar="NAME", help="test only")
    p.add_argument("--shrink", action="store_true", help="with --replay: shrink a failing seed")
    p.add_argument(
        "--stop-after", type=int, default=None, metavar="K", help="stop a soak after K failures"
    )
    p.add_argument(
        "--trace-lines", type=int, default=400, metavar="N", help="trace lines shown (default 400)"
    )
    return p


def _replay(seed: int, bug: InjectedBug | None, do_shrink: bool, lines: int) -> int:
    result = run_scenario(seed, bug=bug, trace=True)
    if result.ok or not do_shrink:
        print(result.report(trace_lines=lines))
        return 0 if result.ok else 1
    assert result.violation is not None
    assert result.scenario is not None
    small = shrink(result.scenario, result.violation.invariant, bug=bug)
    shrunk = run(small, bug=bug, trace=True)
    print(
        f"shrunk from {len(result.scenario.faults)} faults and {len(result.scenario.members)} "
        f"members to {len(small.faults)} faults and {len(small.members)} members"
    )
    print(
        shrunk.report(trace_lines=lines).replace(
            replay_command(seed, bug), replay_command(seed, bug) + " --shrink"
        )
    )
    return 1


def _soak(
    start: int, count: int, bug: InjectedBug | None, stop_after: int | None, lines: int
) -> int:
    began = time.perf_counter()

    def progress(seed: int, result: Result) -> None:
        done = seed - start + 1
        if done % 10_000 == 0:
            print(f"... {done} scenarios, {time.perf_counter() - began:.0f} s", flush=True)

    report = soak(range(start, start + count), bug=bug, stop_after=stop_after, progress=progress)
    elapsed = time.perf_counter() - began
    for failure in report.failures:
        print(failure.report(trace_lines=lines))
        print()
    print(
        f"{report.count} scenarios, seeds {start}..{start + report.count - 1}, "
        f"{elapsed:.1f} s, {report.steps} steps, {len(report.failures)} failed"
        + ("" if report.ok else ": " + ", ".join(str(f.seed) for f in report.failures))
    )
    return 0 if report.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the exit status."""
    args = _parser().parse_args(argv)
    if args.replay is not None:
        return _replay(args.replay, args.inject_bug, args.shrink, args.trace_lines)
    if args.seeds < 1:
        print("--seeds needs a positive count", file=sys.stderr)
        return 2
    return _soak(args.start, args.seeds, args.inject_bug, args.stop_after, args.trace_lines)


if __name__ == "__main__":
    sys.exit(main())
