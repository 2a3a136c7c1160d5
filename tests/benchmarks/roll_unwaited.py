"""Issue 29's roll: members restarted on a fixed cadence, never waiting for the group to settle.

Four kgroup members (each a process of its own, `tests/integration/member_process.py`),
classic protocol with `cooperative-sticky` and the client defaults (3 s heartbeats,
45 s sessions), 12 partitions, a producer writing about 2,000 records/s. Every 4 s
one member is closed (`close()`) and a new process takes its place (with the same
`group.instance.id` when static): first on `group.protocol=consumer`, then back on
`classic`. Each member commits after every batch and in its revoke callback. After
`--seconds` the producer stops; the run passes when every record produced was
consumed. Prints one JSON line per run and, for a failed run, every member's
listener timeline.

    python tests/benchmarks/roll_unwaited.py --runs 10 --members static
    python tests/benchmarks/roll_unwaited.py --runs 10 --members dynamic

Against `KAFKA_BOOTSTRAP_SERVERS` when set, else a broker it starts (kgroup.testing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from process_helpers import MemberProcess, SteadyProducer

from kgroup.testing import KafkaBroker
from kgroup.testing.topics import create_topic

PARTITIONS = 12
MEMBERS = 4
CADENCE_S = 4.0


@contextlib.contextmanager
def bootstrap_servers() -> Iterator[str]:
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        yield given
        return
    with KafkaBroker() as broker:
        yield broker.bootstrap_servers


def member_conf(bootstrap: str, group: str, protocol: str, instance: str | None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "group.protocol": protocol,
    }
    if instance is not None:
        conf["group.instance.id"] = instance
    if protocol == "classic":
        conf["partition.assignment.strategy"] = "cooperative-sticky"
    else:
        conf["group.remote.assignor"] = "uniform"
    return conf


def one_run(bootstrap: str, static: bool, seconds: float, logs: Path) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"roll-{tag}", f"roll-{tag}"
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    producer = SteadyProducer(bootstrap, topic, PARTITIONS, PARTITIONS / 2000)
    started: list[MemberProcess] = []
    live: dict[int, MemberProcess] = {}
    t0 = time.monotonic()

    def start(slot: int, protocol: str, step: int) -> None:
        instance = f"inst-{slot}" if static else None
        member = MemberProcess(
            f"{tag}-{slot}-{step}-{protocol}",
            member_conf(bootstrap, group, protocol, instance),
            [topic],
            logs,
            commit_each_batch=True,
            commit_on_revoke=True,
        )
        live[slot] = member
        started.append(member)

    try:
        for slot in range(MEMBERS):
            start(slot, "classic", 0)
        time.sleep(CADENCE_S)  # the deployment tool's cadence, not a synchronisation
        step = 0
        for protocol in ("consumer", "classic"):
            for slot in range(MEMBERS):
                if live[slot].proc.poll() is None:  # else it failed: reported below
                    live[slot].close(60)
                step += 1
                start(slot, protocol, step)
                time.sleep(CADENCE_S)
        time.sleep(max(0.0, seconds - (time.monotonic() - t0)))
        delivered = producer.stop()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            consumed = set().union(*(m.records for m in started))
            if delivered <= consumed:
                break
            time.sleep(0.5)
        missing = delivered - set().union(*(m.records for m in started))
        result: dict[str, Any] = {
            "members": "static" if static else "dynamic",
            "produced": len(delivered),
            "missing": len(missing),
            "missing_partitions": sorted({p for _, p, _ in missing}),
            "errors": [f"{m.name}: {e.data}" for m in started for e in m.of("error")],
        }
        if missing or result["errors"]:
            result["timeline"] = {
                m.name: [
                    (round(e.t - t0, 1), e.kind, sorted(tp.partition for tp in e.partitions))
                    for e in m.of("assigned", "revoked", "lost")
                ]
                for m in started
            }
        return result
    finally:
        for m in live.values():
            if m.proc.poll() is None:
                with contextlib.suppress(AssertionError):
                    m.close(30)
        for m in started:
            m.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--members", choices=("static", "dynamic"), default="static")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of one run")
    parser.add_argument("--logs", type=Path, help="keep the members' logs here")
    args = parser.parse_args()
    failed = 0
    with bootstrap_servers() as bootstrap, tempfile.TemporaryDirectory() as scratch:
        logs = args.logs or Path(scratch)
        logs.mkdir(parents=True, exist_ok=True)
        for run in range(args.runs):
            result = one_run(bootstrap, args.members == "static", args.seconds, logs)
            print(json.dumps({"run": run + 1, **result}), flush=True)
            failed += bool(result["missing"] or result["errors"])
    print(f"{args.runs - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
