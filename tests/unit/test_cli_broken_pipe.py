"""A `kgroup` command whose reader goes away (`| head`) ends quietly with exit 0."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# The child runs kgroup's main() with a command that prints far more than a
# pipe holds; the parent closes its end of the pipe before reading anything.
CHILD = textwrap.dedent(
    """
    import argparse, sys
    import kgroup.cli as cli

    def flood(args):
        for i in range(200_000):
            print(f"line {i} of a long listing")
        return 0

    def parser():
        p = argparse.ArgumentParser()
        p.add_argument("-v", "--verbose", action="store_true")
        p.set_defaults(func=flood)
        return p

    cli.build_parser = parser
    sys.exit(cli.main([]))
    """
)


def test_a_closed_pipe_is_exit_0_without_a_traceback() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    assert child.stderr is not None
    child.stdout.close()
    error = child.stderr.read().decode()
    assert child.wait(timeout=60) == 0, error
    assert "Traceback" not in error
    assert "BrokenPipeError" not in error
