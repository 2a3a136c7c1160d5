"""The full fault matrix of issue 10: scenario x protocol, written to docs/reliability.md.

Run by hand (not in CI; a few minutes): ``python tests/benchmarks/reliability_matrix.py``
(``--only partition_long`` to run some scenarios). Each row starts its own
broker, two kgroup members as child processes (``tests/integration/member_process.py``),
each behind a FaultProxy of its own, and a producer writing to every partition
every 50 ms, then injects the fault. Columns: records produced, consumed
(distinct), missing (produced, consumed by nobody), overlaps (a partition
assigned to a member while another live member held it, from listener events),
convergence (seconds from the end of the fault until the members' assignments
partition the topic again), errors the members reported, and for malformed
frames how many the proxies injected and how many the members recovered from.
A row that fails says FAIL and why; nothing is hidden.

``coordinator_failover`` runs on a 3-node cluster (topic and offsets replicated
3 times) instead of one broker.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[0] / "integration"))

from confluent_kafka.admin import AdminClient  # noqa: E402
from process_helpers import MemberProcess, SteadyProducer, assignments_converged  # noqa: E402

from kgroup import TopicPartition  # noqa: E402
from kgroup.protocol import ApiKey  # noqa: E402
from kgroup.testing import KafkaBroker, KafkaCluster  # noqa: E402
from kgroup.testing.proxy import FaultProxy  # noqa: E402
from kgroup.testing.topics import create_topic  # noqa: E402

DOC = HERE.parents[1] / "docs" / "reliability.md"
PARTITIONS = 4
SESSION_S = 6.0


MAX_POLL_S = 10.0


@dataclass
class Run:
    broker: KafkaBroker | KafkaCluster
    proxies: dict[str, FaultProxy]
    members: dict[str, MemberProcess]
    protocol: str
    not_live: dict[str, list[tuple[float, float]]]
    group: str
    join: Callable[[str], MemberProcess]
    """Start one more member (straight to the broker, no proxy) and add it to ``members``."""
    malformed: tuple[int, int] | None = None
    """Malformed responses the proxies injected, and the members recovered from."""


@dataclass(frozen=True)
class Row:
    scenario: str
    protocol: str
    produced: int
    consumed: int
    missing: int
    overlaps: int
    convergence: float | None
    errors: str
    verdict: str
    malformed: str = "-"


def conf(protocol: str, bootstrap: str, group: str) -> dict[str, object]:
    base: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "auto.commit.interval.ms": 500,
        # Fail a request stuck on a dead connection in 2 s (the data plane's
        # fetches too: kgroup derives librdkafka's socket.timeout.ms from it).
        "request.timeout.ms": 2000,
        "max.poll.interval.ms": int(MAX_POLL_S * 1000),
    }
    if protocol == "classic":
        base.update(
            {
                "group.protocol": "classic",
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": int(SESSION_S * 1000),
                "heartbeat.interval.ms": 500,
            }
        )
    else:
        base["group.consumer.session.timeout.ms"] = int(SESSION_S * 1000)
    return base


def overlaps(run: Run) -> int:
    events = sorted(
        (e.t, name, e.kind, e.partitions)
        for name, m in run.members.items()
        for e in m.of("assigned", "revoked", "lost")
    )

    def live(name: str, t: float) -> bool:
        return not any(a <= t <= b for a, b in run.not_live.get(name, []))

    holders: dict[TopicPartition, set[str]] = {}
    found = 0
    for t, name, kind, partitions in events:
        for tp in partitions:
            owners = holders.setdefault(tp, set())
            if kind == "assigned":
                found += sum(1 for o in owners - {name} if live(o, t) and live(name, t))
                owners.add(name)
            else:
                owners.discard(name)
    return found


# ---------------------------------------------------------------- scenarios
# Each returns when the fault is over (the moment convergence is measured from).


def broker_restart(run: Run) -> None:
    run.broker.stop()
    time.sleep(5)
    run.broker.restart()


def broker_kill(run: Run) -> None:
    run.broker.kill()
    time.sleep(5)
    run.broker.restart()


def member_kill(run: Run) -> None:
    run.members["b"].signal(signal.SIGKILL)
    run.not_live["b"] = [(time.monotonic(), float("inf"))]


def member_stop(run: Run) -> None:
    start = time.monotonic()
    run.members["b"].signal(signal.SIGSTOP)
    time.sleep(SESSION_S + 3)
    run.members["b"].signal(signal.SIGCONT)
    run.not_live["b"] = [(start, time.monotonic())]


def _partition(run: Run, seconds: float) -> None:
    start = time.monotonic()
    run.proxies["b"].blackhole()
    time.sleep(seconds)
    run.proxies["b"].half_open()
    run.not_live["b"] = [(start, time.monotonic())]


def partition_short(run: Run) -> None:
    _partition(run, SESSION_S / 3)


def partition_long(run: Run) -> None:
    _partition(run, SESSION_S + 4)


def _corrupted(proxy: FaultProxy) -> int:
    return sum(proxy.stats().corrupted.values())


def malformed_frames(run: Run) -> None:
    # Only APIs that kgroup's own connections send (librdkafka joins no group
    # and commits nothing), one frame at a time: each injected frame must be
    # seen by its member (a MalformedResponseError, the connection closed and
    # the request retried) before the next, so the two counts prove delivery.
    # Two at once could share a connection, the second dying unread with it.
    api = ApiKey.HEARTBEAT if run.protocol == "classic" else ApiKey.CONSUMER_GROUP_HEARTBEAT
    for name, proxy in run.proxies.items():
        member = run.members[name]
        for target in (api, ApiKey.OFFSET_COMMIT, api, ApiKey.OFFSET_COMMIT, api):
            before, seen = _corrupted(proxy), len(member.of("malformed"))
            proxy.corrupt(target, count=1)

            def was_injected(p: FaultProxy = proxy, b: int = before) -> bool:
                return _corrupted(p) > b

            def was_recovered(m: MemberProcess = member, n: int = seen) -> bool:
                return len(m.of("malformed")) > n

            try:
                member.wait_for(was_injected, 20, f"a malformed {target.name} response injected")
                member.wait_for(was_recovered, 10, "the member to recover from it")
            except AssertionError as exc:
                print(f"  {name}: {str(exc).splitlines()[0]}")
                break
        proxy.heal()  # nothing left armed
    injected = sum(_corrupted(proxy) for proxy in run.proxies.values())
    recovered = sum(len(m.of("malformed")) for m in run.members.values())
    run.malformed = (injected, recovered)


def slow_callback(run: Run) -> None:
    # b's next rebalance callback takes longer than max.poll.interval.ms; two
    # members joining make the rebalance (with 4 partitions and 4 members each
    # of a and b gives one up, whatever the assignor: one joining member could
    # take its partition from a alone, and b would get no callback). b's poll
    # timer expires inside the callback: it leaves, its partitions move on, and
    # once the callback returned it gets on_partitions_lost and rejoins. b is
    # not live while its application is stuck in the callback.
    b = run.members["b"]
    b.send(f"slow_callback {MAX_POLL_S + 4}")
    time.sleep(0.5)  # the command is read between polls
    run.join("c")
    run.join("d")
    b.wait_for(lambda: bool(b.of("slow_start")), 30, "b's slow callback to start")
    b.wait_for(lambda: bool(b.of("slow_end")), MAX_POLL_S + 30, "b's slow callback to end")
    start, end = b.of("slow_start")[0].t, b.of("slow_end")[0].t
    run.not_live["b"] = [(start, end)]
    # The scenario is what it claims only if b's poll timer did expire.
    b.wait_for(
        lambda: any(e.t >= end for e in b.of("lost")),
        10,
        "b's on_partitions_lost after its poll timer expired in the callback",
    )


def _coordinator(bootstrap: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(timeout=30)
    node: int = description.coordinator.id
    return node


def coordinator_failover(run: Run) -> None:
    # SIGKILL the group's coordinator in a 3-node cluster: the members find
    # the new coordinator of the group's offsets partition and carry on.
    cluster = run.broker
    assert isinstance(cluster, KafkaCluster)
    victim = _coordinator(cluster.bootstrap_servers, run.group)
    cluster.node(victim).kill()
    print(f"  killed node {victim}, the coordinator of {run.group}")


SCENARIOS: dict[str, Callable[[Run], None]] = {
    "broker_restart": broker_restart,
    "broker_kill": broker_kill,
    "member_kill": member_kill,
    "member_stop": member_stop,
    "partition_short": partition_short,
    "partition_long": partition_long,
    "malformed_frames": malformed_frames,
    "slow_callback": slow_callback,
    "coordinator_failover": coordinator_failover,
}
CLUSTER = frozenset({"coordinator_failover"})
"""Scenarios that run on a 3-node cluster."""
NOT_RUN: dict[str, str] = {}


def run_one(scenario: str, protocol: str, log_dir: Path) -> Row:
    topic = f"rm-{scenario}-{protocol}"
    group = f"g-{topic}"
    cluster = scenario in CLUSTER
    with KafkaCluster(nodes=3) if cluster else KafkaBroker() as broker:
        create_topic(
            broker.bootstrap_servers,
            topic,
            partitions=PARTITIONS,
            replication_factor=3 if cluster else 1,
        )
        expected = frozenset(TopicPartition(topic, p) for p in range(PARTITIONS))
        stack = contextlib.ExitStack()
        proxies = {
            n: stack.enter_context(FaultProxy(broker.bootstrap_servers).running_in_thread())
            for n in ("a", "b")
        }
        members: dict[str, MemberProcess] = {}
        producer: SteadyProducer | None = None
        try:
            for n in ("a", "b"):
                members[n] = MemberProcess(
                    n, conf(protocol, proxies[n].bootstrap_servers, group), [topic], log_dir
                )

            def join(name: str) -> MemberProcess:
                member = MemberProcess(
                    name, conf(protocol, broker.bootstrap_servers, group), [topic], log_dir
                )
                members[name] = member
                return member

            run = Run(broker, proxies, members, protocol, {}, group, join)
            members["a"].wait_for(
                lambda: assignments_converged(members.values(), expected), 60, "converged"
            )
            producer = SteadyProducer(broker.bootstrap_servers, topic, PARTITIONS, 0.05)
            time.sleep(2)  # records flowing before the fault
            SCENARIOS[scenario](run)
            end = time.monotonic()
            live = [m for n, m in members.items() if run.not_live.get(n, [(0, 0)])[-1][1] < 1e18]
            convergence: float | None = None
            try:
                at = members["a"].wait_for(
                    lambda: assignments_converged(live, expected), 60, "converged after the fault"
                )
                convergence = at - end
            except AssertionError:
                convergence = None
            time.sleep(2)
            produced = producer.stop()
            producer = None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                seen = set().union(*(m.records for m in members.values()))
                if produced <= seen:
                    break
                time.sleep(0.2)
            seen = set().union(*(m.records for m in members.values()))
            missing = len(produced - seen)
            overlap = overlaps(run)
            errors = sorted(
                {
                    f"{n}: {e.data.get('type')}"
                    for n, m in members.items()
                    for e in m.of("error")
                    if scenario != "member_kill" or n != "b"
                }
            )
            reasons = []
            if missing:
                reasons.append(f"{missing} missing")
            if overlap:
                reasons.append(f"{overlap} overlaps")
            if convergence is None:
                reasons.append("no convergence within 60 s")
            if errors:
                reasons.append("errors")
            malformed = "-"
            if run.malformed is not None:
                injected, recovered = run.malformed
                malformed = f"{injected} / {recovered}"
                if not injected:
                    reasons.append("no malformed frame was injected")
                elif recovered != injected:
                    reasons.append(f"{injected} injected but {recovered} recovered from")
            return Row(
                scenario,
                protocol,
                len(produced),
                len(seen & produced),
                missing,
                overlap,
                convergence,
                ", ".join(errors) or "none",
                "FAIL: " + "; ".join(reasons) if reasons else "pass",
                malformed,
            )
        finally:
            if producer is not None:
                producer.stop()
            for proxy in proxies.values():
                proxy.heal()
            for m in members.values():
                m.cleanup()
            stack.close()


def write_doc(rows: list[Row], command: str) -> None:
    lines = [
        "# Reliability matrix",
        "",
        "What happens to your records and partitions when a broker, the network or a",
        "member fails: each row below is a fault, run on a real broker, with what the",
        "members did and whether any record was lost or read by two members at once.",
        "The command below reruns the matrix and rewrites this page.",
        "",
        "The fault matrix: each scenario on both protocols, a fresh broker per row,",
        "two kgroup members as child processes each behind a `FaultProxy` of its own",
        f"(session timeout {SESSION_S:.0f} s, `max.poll.interval.ms` {MAX_POLL_S:.0f} s,",
        "`request.timeout.ms` 2 s, from which the data plane derives librdkafka's",
        "`socket.timeout.ms`; no data-plane override), a producer writing one record to",
        "each of the 4 partitions every 50 ms. `coordinator_failover` runs on a 3-node",
        "cluster (replication factor 3) and SIGKILLs the group's coordinator;",
        "`slow_callback` makes member b's next rebalance callback outlast",
        "`max.poll.interval.ms` by 4 s while two members join; `malformed_frames`",
        "has each proxy corrupt 3 heartbeat and 2 OffsetCommit responses. The quick",
        "subset (network partitions) runs in CI as `tests/integration/test_faults.py`.",
        "",
        f"- command: `{command}`",
        f"- date: {datetime.date.today().isoformat()}",
        f"- machine: `{platform.machine()}`, {len(os.sched_getaffinity(0))} CPUs, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}",
        "",
        "Columns: produced records; consumed (distinct, of those produced); missing;",
        "overlaps (a partition assigned to a member while another *live* member held it,",
        "from listener events; a cut-off or stopped member is not live); convergence",
        "(seconds from the end of the fault to assignments partitioning the topic again);",
        "errors the members' applications saw; malformed: responses the proxies replaced",
        "by malformed ones / connections the members closed on a `MalformedResponseError`",
        "and recovered from (the two must match: every injected frame reached a member).",
        "",
        "| scenario | protocol | produced | consumed | missing | overlaps | convergence (s) "
        "| errors | malformed | result |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in rows:
        conv = "-" if r.convergence is None else f"{r.convergence:.1f}"
        lines.append(
            f"| {r.scenario} | {r.protocol} | {r.produced} | {r.consumed} | {r.missing} "
            f"| {r.overlaps} | {conv} | {r.errors} | {r.malformed} | {r.verdict} |"
        )
    lines += [
        "",
        "## What the matrix shows",
        "",
        "- A close during a classic join round finishes the round before the member",
        '  releases its partitions (`docs/classic-protocol.md`, "Static membership and',
        '  closing"), so its revocation commit is not refused; a close-time commit that',
        "  times out or loses its connection is retried on a fresh connection until the",
        "  close deadline.",
        "- The data plane's fetches time out with `request.timeout.ms` (librdkafka's",
        "  `socket.timeout.ms` is derived from it: at least `fetch.wait.max.ms` + 1 s; an",
        "  explicit value wins), so a member whose connection was left half-open by a",
        "  healed partition resumes fetching as soon as a group request would give up.",
        "- A cut-off member reports `lost` at its application's next poll, so its listener",
        "  may still show a partition for a few ms after the broker handed it on. Its data",
        "  plane stopped at the session deadline (no record of such a partition reached it).",
        "",
    ]
    DOC.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="scenario names")
    parser.add_argument("--protocols", nargs="*", default=["consumer", "classic"])
    args = parser.parse_args()
    names = args.only or [*SCENARIOS, *NOT_RUN]
    rows: list[Row] = []
    command = "python " + " ".join(["tests/benchmarks/reliability_matrix.py", *sys.argv[1:]])
    with tempfile.TemporaryDirectory(prefix="kgroup-matrix-") as tmp:
        for name in names:
            for protocol in args.protocols:
                if name in NOT_RUN:
                    rows.append(Row(name, protocol, 0, 0, 0, 0, None, "-", NOT_RUN[name]))
                    write_doc(rows, command)
                    continue
                started = time.monotonic()
                try:
                    row = run_one(name, protocol, Path(tmp))
                except Exception as exc:  # a crashed row is reported, not hidden
                    row = Row(name, protocol, 0, 0, 0, 0, None, "-", f"FAIL: {exc!r}"[:200])
                rows.append(row)
                print(f"{name} {protocol}: {row.verdict} ({time.monotonic() - started:.0f} s)")
                write_doc(rows, command)


if __name__ == "__main__":
    main()
