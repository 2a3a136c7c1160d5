"""The chaos roll of ``tests/integration/test_chaos_roll.py``, longer and random (issue 29).

Run by hand (not in CI)::

    python tests/benchmarks/soak_chaos_roll.py --minutes 10 --seed 7

against ``$KAFKA_BOOTSTRAP_SERVERS`` when set (its consumer-protocol session
timeout must be 6 s, as ``kgroup broker up`` and the test brokers set it), else a
broker it starts with ``kgroup.testing``. Each run (``--variant``: cooperative,
eager or both, one after the other) is the CI test's group (kgroup members of
both protocols, static and dynamic, and a librdkafka member) under a random
schedule drawn from ``--seed``: one change every 3.5 s (restart, sometimes onto
the other protocol; SIGKILL and replacement; SIGSTOP for 2.5 s or 8.5 s) for
``--minutes``, then the same checks as the test. It prints, per run: changes
made, records produced and consumed, duplicates, and the time from the last
change until every partition was consumed again; then PASS or the failure
(ownership timeline and unconsumed partitions). Exit status 1 if any run failed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[0] / "integration"))

from process_helpers import SteadyProducer  # noqa: E402
from test_chaos_roll import (  # noqa: E402
    CADENCE_S,
    PARTITIONS,
    PRODUCE_INTERVAL_S,
    VARIANTS,
    Chaos,
    finish,
    start_group,
)

from kgroup.testing import KafkaBroker  # noqa: E402
from kgroup.testing.topics import create_topic  # noqa: E402


def soak(bootstrap: str, variant: str, minutes: float, seed: int, log_dir: Path) -> bool:
    tag = uuid.uuid4().hex[:8]
    topic = f"soak-chaos-{variant}-{tag}"
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    producer = SteadyProducer(bootstrap, topic, PARTITIONS, PRODUCE_INTERVAL_S)
    run_dir = log_dir / f"{variant}-{tag}"
    run_dir.mkdir(parents=True)
    chaos = Chaos(bootstrap, topic, f"soak-chaos-{tag}", variant, run_dir, producer)
    steps = max(1, int(minutes * 60 / CADENCE_S))
    started = time.monotonic()
    ok = True
    try:
        start_group(chaos)
        chaos.run(chaos.random_plan(random.Random(seed)), steps)
        outcome = finish(chaos)
        done = [w for _, w in chaos.actions if not w.startswith(("start", "skip"))]
        print(
            f"{variant} seed {seed}: PASS in {time.monotonic() - started:.0f} s; "
            f"{len(done)} changes ({sum(w.startswith('SIGKILL') for w in done)} kills, "
            f"{sum(w.startswith('SIGSTOP') for w in done)} stops, "
            f"{sum(w.startswith('close') for w in done)} restarts); "
            f"{outcome.produced} produced, {outcome.consumed} consumed, "
            f"{outcome.duplicates} duplicates; every partition consumed again "
            f"{outcome.recovery_s:.1f} s after the last change ({chaos.actions[-1][1]})"
        )
        for line in outcome.stale:
            print(f"  fenced member's first batch after SIGCONT, handed on: {line}")
    except AssertionError as exc:
        ok = False
        print(f"{variant} seed {seed}: FAIL after {time.monotonic() - started:.0f} s\n{exc}")
        print(f"member logs: {run_dir}")
    finally:
        chaos.cleanup()
        with contextlib.suppress(AssertionError):
            producer.stop()
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="chaos time per run")
    parser.add_argument("--seed", type=int, default=None, help="schedule seed (random if unset)")
    parser.add_argument("--variant", choices=[*VARIANTS, "both"], default="both")
    parser.add_argument("--logs", type=Path, default=None, help="member logs (default: a temp dir)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    variants = list(VARIANTS) if args.variant == "both" else [args.variant]
    log_dir = args.logs or Path(tempfile.mkdtemp(prefix="soak-chaos-"))
    print(f"seed {seed}; {args.minutes} min per variant; member logs under {log_dir}")
    with contextlib.ExitStack() as stack:
        bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
        if not bootstrap:
            broker = stack.enter_context(KafkaBroker())
            bootstrap = broker.bootstrap_servers
        print(f"broker {bootstrap}")
        results = [soak(bootstrap, v, args.minutes, seed, log_dir) for v in variants]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
