"""Chaos roll (issue 29, point 3): restarts, SIGKILLs and SIGSTOPs of a mixed group, never waiting.

A group mixes kgroup members of both protocols (classic and consumer), static
and dynamic, each in a process of its own (``member_process.py``), and a
librdkafka (confluent-kafka) consumer-protocol member, while a producer writes
to every partition throughout. Every ``CADENCE_S`` seconds one member is
restarted (closed, then a new process with the same instance id, sometimes on
the other protocol), SIGKILLed (then replaced), or SIGSTOPped (then resumed a
few seconds later, sometimes past its session timeout): the schedule never
waits for the group to settle. The members commit after every batch and in
their revoke callback.

Checks:

- at-least-once: every record the broker acknowledged is consumed by some
  member (duplicates allowed);
- no partition held by two *live* members at once, from the members'
  listener calls and record batches in time order (see :func:`overlaps` for
  when a killed or frozen member stops counting as live);
- after the last change, every partition is consumed again (a record
  produced after it is consumed, on every partition) within
  ``RECOVERY_BOUND_S``; the time it took is printed (docs/reliability.md,
  "Chaos roll", has the figures);
- no member's application loop saw an exception.

The same machinery runs longer, with a random schedule, from
``tests/benchmarks/soak_chaos_roll.py``.
"""

from __future__ import annotations

import heapq
import math
import random
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import classic_conf, consumer_conf
from process_helpers import Event, MemberProcess, SteadyProducer
from test_migration_roll import ConfluentMember

from kgroup import TopicPartition
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration

PARTITIONS = 8
SESSION_S = 6.0
"""Classic members' session.timeout.ms (classic_conf), and the test brokers'
group.consumer.session.timeout.ms (kgroup.testing.config)."""
HEARTBEAT_S = 0.5
CADENCE_S = 3.5
"""One chaos action this often (the schedule's own clock, not a synchronisation)."""
SHORT_STOP_S = 2.5
"""A SIGSTOP the member's session survives."""
LONG_STOP_S = SESSION_S + 2.5
"""A SIGSTOP past the session: the broker fences the member and hands its partitions on."""
STATIC_REPLACE_DELAY_S = SESSION_S + 1.0
"""A SIGKILLed static member's replacement waits for the old session to expire,
as a supervisor's restart back-off would: in a consumer group the broker refuses
a held instance id to a new member (UNRELEASED_INSTANCE_ID, fatal in every
client), and the group may be of either type at that moment. (A closed static
member's replacement starts at once: restarts cover static replacement.)"""
CLOSE_TIMEOUT_S = 30.0
RECOVERY_BOUND_S = 40.0
"""After the last change every partition is consumed again within this (measured:
docs/reliability.md, "Chaos roll"; expected about a session timeout, a rebalance
and the liveness watch's two looks 5 s apart)."""
DRAIN_S = 60.0
PRODUCE_INTERVAL_S = 0.05

_REMOTE = {"cooperative-sticky": "uniform", "range": "range"}


@dataclass(frozen=True)
class Slot:
    """One place in the group: which client, its first protocol, static or not."""

    kind: str  # "kgroup" | "confluent"
    protocol: str  # "classic" | "consumer"
    static: bool


VARIANTS: dict[str, tuple[str, tuple[Slot, ...]]] = {
    # A classic group's members share one protocol: cooperative-sticky here
    # (the consumer-protocol members use the broker's "uniform" assignor).
    "cooperative": (
        "cooperative-sticky",
        (
            Slot("kgroup", "classic", True),
            Slot("kgroup", "consumer", True),
            Slot("kgroup", "classic", False),
            Slot("kgroup", "consumer", False),
            Slot("confluent", "consumer", False),
        ),
    ),
    # Eager: classic range members (the consumer-protocol ones on "range").
    "eager": (
        "range",
        (
            Slot("kgroup", "classic", True),
            Slot("kgroup", "consumer", True),
            Slot("kgroup", "classic", False),
            Slot("kgroup", "consumer", False),
            Slot("confluent", "consumer", True),
        ),
    ),
}
"""The librdkafka member runs the consumer protocol: as a classic leader it
copies subscription user data into the assignments, and the broker then
refuses to convert the group (test_migration_refused.py)."""


@dataclass(frozen=True)
class Action:
    """``restart`` (close, start again; ``to`` protocol), ``kill`` (SIGKILL, replace on
    ``to``) or ``stop`` (SIGSTOP, SIGCONT after ``seconds``)."""

    kind: str
    slot: int
    to: str | None = None
    seconds: float = 0.0


Member = MemberProcess | ConfluentMember


@dataclass
class Chaos:
    """A mixed group under a chaos schedule, and everything each member ever was."""

    bootstrap: str
    topic: str
    group: str
    variant: str
    log_dir: Path
    producer: SteadyProducer
    live: dict[int, Member] = field(default_factory=dict)
    protocol: dict[int, str] = field(default_factory=dict)
    stopped: set[int] = field(default_factory=set)
    waiting: set[int] = field(default_factory=set)
    """Slots whose member was killed and whose replacement is not started yet."""
    everyone: list[Member] = field(default_factory=list)
    not_live: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """Per member: the windows in which it is not live (see :func:`overlaps`)."""
    resumed: dict[str, list[float]] = field(default_factory=dict)
    actions: list[tuple[float, str]] = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)
    last_change: float = 0.0

    @property
    def strategy(self) -> str:
        return VARIANTS[self.variant][0]

    @property
    def slots(self) -> tuple[Slot, ...]:
        return VARIANTS[self.variant][1]

    def note(self, what: str) -> None:
        now = time.monotonic()
        self.actions.append((now, what))
        self.last_change = now

    # ------------------------------------------------------------- members

    def start(self, slot: int, protocol: str) -> Member:
        spec = self.slots[slot]
        instance = f"{self.group}-i{slot}" if spec.static else None
        how = "static" if spec.static else "dynamic"
        name = f"{slot}-{spec.kind}-{protocol}-{how}-{len(self.everyone)}"
        member: Member
        if spec.kind == "confluent":
            conf: dict[str, Any] = {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "group.protocol": protocol,
                "group.remote.assignor": _REMOTE[self.strategy],
            }
            if instance is not None:
                conf["group.instance.id"] = instance
            member = ConfluentMember(name, conf, self.topic)
        else:
            extra: dict[str, Any] = {}
            if instance is not None:
                extra["group_instance_id"] = instance
            if protocol == "classic":
                conf = classic_conf(self.bootstrap, self.group, self.strategy, **extra)
            else:
                conf = consumer_conf(
                    self.bootstrap,
                    self.group,
                    group_protocol="consumer",
                    group_remote_assignor=_REMOTE[self.strategy],
                    # The broker does not tell its session timeout: set as docs/consumer.md
                    # says, so a member frozen past it knows its partitions are gone.
                    group_consumer_session_timeout_ms=int(SESSION_S * 1000),
                    **extra,
                )
            member = MemberProcess(
                name,
                conf,
                [self.topic],
                self.log_dir,
                commit_each_batch=True,
                commit_on_revoke=True,
            )
        self.live[slot] = member
        self.protocol[slot] = protocol
        self.everyone.append(member)
        self.note(f"start {name}")
        return member

    def _gone(self, member: Member, at: float) -> None:
        """A process that exited owns nothing from then on, whatever its listener last said."""
        self.not_live.setdefault(member.name, []).append((at, float("inf")))

    def _running(self, member: Member) -> None:
        """Fails, with the story, if the member's process ended on its own (an error)."""
        if isinstance(member, MemberProcess) and member.proc.poll() is not None:
            raise AssertionError(
                f"{member.name} exited {member.proc.returncode} on its own: "
                f"{[e.data for e in member.of('error')]}\n{self.story()}"
            )

    def restart(self, slot: int, to: str) -> None:
        member = self.live.pop(slot)
        self._running(member)
        self.note(f"close {member.name}")
        code = member.close(CLOSE_TIMEOUT_S)
        if code != 0:
            raise AssertionError(f"{member.name} exited {code} on close\n{self.story()}")
        self._gone(member, time.monotonic())
        self.start(slot, to)

    def kill(self, slot: int) -> float:
        member = self.live.pop(slot)
        assert isinstance(member, MemberProcess)
        self._running(member)
        killed = time.monotonic()
        member.signal(signal.SIGKILL)
        member.wait_exit(10)
        # A killed process processes and commits nothing: not live from the kill.
        self._gone(member, killed)
        self.note(f"SIGKILL {member.name}")
        return killed

    def stop(self, slot: int) -> None:
        member = self.live[slot]
        assert isinstance(member, MemberProcess)
        self._running(member)
        member.signal(signal.SIGSTOP)
        self.stopped.add(slot)
        stopped_at = time.monotonic()
        # Not live from when the broker may have expired its session (its last
        # heartbeat may be up to a heartbeat interval, plus slack, before the
        # stop) until its first listener call after SIGCONT (see overlaps()).
        self.not_live.setdefault(member.name, []).append(
            (stopped_at + SESSION_S - 2 * HEARTBEAT_S, float("nan"))
        )
        self.note(f"SIGSTOP {member.name}")

    def resume(self, slot: int) -> None:
        member = self.live[slot]
        assert isinstance(member, MemberProcess)
        member.signal(signal.SIGCONT)
        self.stopped.discard(slot)
        self.resumed.setdefault(member.name, []).append(time.monotonic())
        self.note(f"SIGCONT {member.name}")

    # ------------------------------------------------------------ schedule

    def eligible(self, slot: int, kind: str) -> bool:
        if slot not in self.live or slot in self.stopped or slot in self.waiting:
            return False
        return kind == "restart" or self.slots[slot].kind == "kgroup"

    def run(self, plan: Iterator[Action | None], steps: int) -> None:
        """``steps`` actions from ``plan``, one every ``CADENCE_S`` s, then their follow-ups.

        ``plan`` yields None to skip a step (nothing eligible). Follow-ups
        (SIGCONT of a stopped member, a delayed replacement) run when due.
        """
        queue: list[tuple[float, int, str, Action | None]] = []
        begin = time.monotonic()
        for i in range(steps):
            heapq.heappush(queue, (begin + CADENCE_S * (i + 1), i, "step", None))
        seq = steps
        while queue:
            due, _, what, action = heapq.heappop(queue)
            # The chaos schedule's cadence: waiting for the next action's time.
            time.sleep(max(0.0, due - time.monotonic()))
            if what == "step":
                action = next(plan)
                if action is None or not self.eligible(action.slot, action.kind):
                    self.actions.append((time.monotonic(), f"skip {action}"))
                    continue
                followup = self.act(action)
                if followup is not None:
                    seq += 1
                    heapq.heappush(
                        queue, (time.monotonic() + followup[0], seq, followup[1], action)
                    )
            elif what == "resume":
                assert action is not None
                self.resume(action.slot)
            elif what == "replace":
                assert action is not None
                self.waiting.discard(action.slot)
                self.start(action.slot, action.to or self.protocol[action.slot])

    def act(self, action: Action) -> tuple[float, str] | None:
        slot = action.slot
        if action.kind == "restart":
            self.restart(slot, action.to or self.protocol[slot])
            return None
        if action.kind == "kill":
            to = action.to or self.protocol[slot]
            self.kill(slot)
            if self.slots[slot].static:
                self.waiting.add(slot)
                return STATIC_REPLACE_DELAY_S, "replace"
            self.start(slot, to)
            return None
        if action.kind == "stop":
            self.stop(slot)
            return action.seconds, "resume"
        raise ValueError(action.kind)

    def random_plan(self, rng: random.Random) -> Iterator[Action | None]:
        """Random actions on eligible slots (soak): restarts, kills, short and long stops."""
        while True:
            kind = rng.choice(["restart", "restart", "kill", "stop"])
            slots = [s for s in range(len(self.slots)) if self.eligible(s, kind)]
            if not slots:
                yield None
                continue
            slot = rng.choice(slots)
            if kind == "stop":
                seconds = rng.choice([SHORT_STOP_S, LONG_STOP_S])
                yield Action("stop", slot, seconds=seconds)
                continue
            to = self.protocol[slot]
            if self.slots[slot].kind == "kgroup" and rng.random() < 0.5:
                to = "consumer" if to == "classic" else "classic"
            yield Action(kind, slot, to)

    # -------------------------------------------------------------- checks

    def consumed(self) -> set[tuple[str, int, int]]:
        seen: set[tuple[str, int, int]] = set()
        for member in self.everyone:
            with member._cond:
                seen |= member.records
        return seen

    def recovered(self, marks: dict[int, int]) -> dict[int, float]:
        """Per partition: when a record past ``marks`` was first consumed."""
        first: dict[int, float] = {}
        for member in self.everyone:
            for event in member.of("records"):
                for _, p, offset in event.data["records"]:
                    if offset > marks.get(p, -1) and (p not in first or event.t < first[p]):
                        first[p] = event.t
        return first

    def errors(self) -> list[tuple[str, dict[str, Any]]]:
        return [(m.name, e.data) for m in self.everyone for e in m.of("error")]

    def story(self, unconsumed: Sequence[int] = ()) -> str:
        """The ownership timeline per member, the chaos actions, and what is unconsumed."""
        lines = [f"unconsumed partitions: {sorted(unconsumed)}", "chaos actions:"]
        lines += [f"  {t - self.t0:7.2f}s {what}" for t, what in self.actions]
        lines.append("ownership timeline (listener calls; s since start):")
        for member in self.everyone:
            lines.append(f"  {member.name}:")
            for e in member.of("assigned", "revoked", "lost", "error", "closed"):
                parts = sorted(tp.partition for tp in e.partitions)
                extra = f" {e.data}" if e.kind == "error" else ""
                lines.append(f"    {e.t - self.t0:7.2f}s {e.kind} {parts}{extra}")
        for member in self.everyone:
            if isinstance(member, MemberProcess) and member.of("error"):
                lines.append(f"--- {member.name} log ---\n{member.tail(40)}")
        return "\n".join(lines)

    def cleanup(self) -> None:
        for member in self.everyone:
            member.cleanup()


def overlaps(chaos: Chaos, stale: list[str] | None = None) -> list[str]:
    """Moments a partition was held by two live members, from listener calls and records.

    Events of every member in time order; a member holds what its listener was
    assigned and not yet revoked or lost. At each assignment, and at each
    record batch, of a live member, no other live member may hold a partition
    it is given or consumes.

    Live: a process that exited (closed, or SIGKILLed: from the kill, as it can
    neither process nor commit after it) is not live. A SIGSTOPped member is
    not live from when the broker may have expired its session (the stop, plus
    the session timeout, less two heartbeat intervals for the heartbeat that
    may have gone out before the stop and some slack) until its first listener
    call after SIGCONT (``lost`` if it was fenced: the listener lags the broker
    by the time the member takes to run again, as any cut-off member's). In
    between, the record batches it consumes are judged: its first batch after
    SIGCONT may have been in the application's hands at the freeze
    (``consume()`` returned it, the report had not gone out), and no client
    can take back what it returned, so a first batch of partitions handed on
    is listed in ``stale`` (the test prints them); any later batch of such
    partitions, before its listener is told, is an overlap. Before the window
    starts the broker must not hand the member's partitions on (classic: a
    rebalance waits for its rejoin until the session expires; consumer
    protocol: a partition moves only once its owner revoked it).
    """
    events: list[tuple[float, str, Event]] = []
    for member in chaos.everyone:
        for event in member.of("assigned", "revoked", "lost", "records"):
            events.append((event.t, member.name, event))
    events.sort(key=lambda x: x[0])
    # Per member: (start, end, resumed at) of each window in which it is not live.
    windows: dict[str, list[tuple[float, float, float | None]]] = {}
    for name, spans in chaos.not_live.items():
        resumes = iter(sorted(chaos.resumed.get(name, [])))
        for start, span_end in spans:
            if not math.isnan(span_end):
                windows.setdefault(name, []).append((start, span_end, None))
                continue
            # A SIGSTOP: ends at the member's first listener call after SIGCONT.
            resumed = next(resumes, None)
            calls = [
                t
                for t, n, e in events
                if n == name and e.kind != "records" and resumed is not None and t > resumed
            ]
            windows.setdefault(name, []).append(
                (start, calls[0] if calls else float("inf"), resumed)
            )

    def window(name: str, at: float) -> tuple[float, float, float | None] | None:
        return next((w for w in windows.get(name, []) if w[0] <= at < w[1]), None)

    def live(name: str, at: float) -> bool:
        return window(name, at) is None

    batches_after_resume: dict[tuple[str, float], int] = {}
    holders: dict[TopicPartition, set[str]] = {}
    found: list[str] = []
    for t, name, event in events:
        if event.kind in ("revoked", "lost"):
            for tp in event.partitions:
                holders.get(tp, set()).discard(name)
            continue
        if event.kind == "assigned":
            touched = event.partitions
            for tp in touched:
                holders.setdefault(tp, set()).add(name)
        else:
            touched = frozenset(TopicPartition(tp, p) for tp, p, _ in event.data["records"])
            unowned = [tp for tp in touched if name not in holders.get(tp, set())]
            if unowned:
                found.append(f"{t - chaos.t0:.2f}s {name} consumed {sorted(unowned)} unassigned")
        cut = window(name, t)
        if cut is not None:
            resumed = cut[2]
            if event.kind == "records" and resumed is not None and t > resumed:
                others = {
                    tp.partition: sorted(o for o in holders.get(tp, set()) - {name} if live(o, t))
                    for tp in touched
                }
                others = {p: o for p, o in others.items() if o}
                n = batches_after_resume.get((name, resumed), 0)
                batches_after_resume[(name, resumed)] = n + 1
                if others and n == 0 and stale is not None:
                    stale.append(f"{t - chaos.t0:.2f}s {name} first batch after SIGCONT: {others}")
                elif others:
                    found.append(
                        f"{t - chaos.t0:.2f}s {name} consumed {others} (held by them) in its "
                        f"batch {n + 1} after SIGCONT, before its listener was told"
                    )
            continue
        for tp in sorted(touched):
            for other in sorted(holders.get(tp, set()) - {name}):
                if live(other, t):
                    how = "assigned" if event.kind == "assigned" else "consumed"
                    found.append(f"{t - chaos.t0:.2f}s {tp} {how} by {name} while {other} held it")
    return found


@dataclass
class Outcome:
    produced: int
    consumed: int
    duplicates: int
    recovery_s: float
    actions: int
    """Closes (restarts), kills, stops and resumes (not the starts they led to)."""
    stale: list[str]


def finish(chaos: Chaos, bound: float = RECOVERY_BOUND_S) -> Outcome:
    """After the schedule: recovery, at-least-once, no live overlap, no errors; closes members."""
    assert not chaos.stopped
    assert not chaos.waiting
    errors = chaos.errors()
    assert not errors, f"members' applications saw errors: {errors}\n{chaos.story()}"
    last = chaos.last_change
    # A record produced after the last change, per partition: past every offset
    # acknowledged by then (and one more, for a record in flight at that moment).
    with chaos.producer._lock:
        delivered = set(chaos.producer.delivered)
    marks = {p: -1 for p in range(PARTITIONS)}
    for _, p, offset in delivered:
        marks[p] = max(marks[p], offset + 1)
    deadline = last + bound
    while time.monotonic() < deadline and len(chaos.recovered(marks)) < PARTITIONS:
        time.sleep(0.2)  # polling the members' reports, deadline above
    first = chaos.recovered(marks)
    unconsumed = sorted(set(range(PARTITIONS)) - set(first))
    late = {p: round(t - last, 2) for p, t in first.items() if t - last > bound}
    assert not unconsumed, (
        f"not every partition consumed within {bound}s of the last change\n"
        f"{chaos.story(unconsumed)}"
    )
    assert not late, (
        f"not every partition consumed within {bound}s of the last change "
        f"(late: {late})\n{chaos.story(unconsumed)}"
    )
    recovery = max(first.values()) - last

    produced = chaos.producer.stop()
    assert produced
    deadline = time.monotonic() + DRAIN_S
    while time.monotonic() < deadline and not produced <= chaos.consumed():
        time.sleep(0.2)  # polling the members' reports, deadline above
    missing = produced - chaos.consumed()
    if missing:
        parts = sorted({p for _, p, _ in missing})
        raise AssertionError(
            f"{len(missing)} of {len(produced)} records never consumed, e.g. "
            f"{sorted(missing)[:5]}\n{chaos.story(parts)}"
        )
    stale: list[str] = []
    found = overlaps(chaos, stale)
    assert found == [], "\n".join(found[:20]) + "\n" + chaos.story()
    errors = chaos.errors()
    assert not errors, f"members' applications saw errors: {errors}\n{chaos.story()}"
    for slot in sorted(chaos.live):
        member = chaos.live.pop(slot)
        assert member.close(CLOSE_TIMEOUT_S) == 0, chaos.story()
    total = sum(len(e.data["records"]) for m in chaos.everyone for e in m.of("records"))
    return Outcome(
        len(produced),
        len(chaos.consumed()),
        total - len(chaos.consumed()),
        recovery,
        sum(not what.startswith(("start", "skip")) for _, what in chaos.actions),
        stale,
    )


def start_group(chaos: Chaos) -> None:
    # Classic members first: the group starts classic, and the first
    # consumer-protocol member converts it (without waiting for anything).
    order = sorted(range(len(chaos.slots)), key=lambda s: chaos.slots[s].protocol != "classic")
    for slot in order:
        chaos.start(slot, chaos.slots[slot].protocol)


# The CI schedules: every kind of change, on every kind of member, in a fixed
# order (the timing around them is the real broker's).
PLANS: dict[str, list[Action]] = {
    "cooperative": [
        Action("restart", 0, "consumer"),  # static classic -> consumer (issue 29's step)
        Action("stop", 2, seconds=LONG_STOP_S),  # dynamic classic, fenced
        Action("kill", 3, "classic"),  # dynamic consumer, replaced by a classic one
        Action("restart", 4, "consumer"),  # librdkafka
        Action("restart", 1, "classic"),  # static consumer -> classic
        Action("kill", 0, "classic"),  # static consumer: replaced after its session
        Action("stop", 3, seconds=LONG_STOP_S),  # a consumer-protocol member, fenced
        Action("restart", 1, "consumer"),  # static classic -> consumer
        # Last: a dynamic member dies; its partitions wait for its session to expire.
        Action("kill", 2, "consumer"),
    ],
    "eager": [
        Action("restart", 1, "classic"),  # static consumer -> classic
        Action("kill", 2, "consumer"),  # dynamic classic, replaced by a consumer one
        Action("stop", 1, seconds=LONG_STOP_S),  # static classic, fenced
        Action("kill", 0, "consumer"),  # static classic: replaced after its session
        Action("restart", 4, "consumer"),  # librdkafka, static
        Action("restart", 3, "classic"),  # dynamic consumer -> classic
        Action("stop", 2, seconds=SHORT_STOP_S),  # dynamic consumer, survives
        Action("restart", 2, "classic"),
        Action("kill", 3, "consumer"),  # dynamic classic
    ],
}


@pytest.fixture
def make_chaos(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId, tmp_path: Path
) -> Iterator[Callable[[str], Chaos]]:
    made: list[Chaos] = []

    def make(variant: str) -> Chaos:
        bootstrap = kafka_broker.bootstrap_servers
        topic = make_topic(partitions=PARTITIONS)
        producer = SteadyProducer(bootstrap, topic, PARTITIONS, PRODUCE_INTERVAL_S)
        chaos = Chaos(bootstrap, topic, make_group_id(), variant, tmp_path, producer)
        made.append(chaos)
        return chaos

    yield make
    for chaos in made:
        chaos.cleanup()
        chaos.producer.stop()


@pytest.mark.provokes_double_ownership(
    "a member SIGSTOPped past its session fetches, in its own view, until it runs again and "
    "notices it was fenced, while the broker has handed its partitions on (the test checks "
    "ownership from listener calls instead)"
)
@pytest.mark.parametrize("variant", ["cooperative", "eager"])
def test_chaos_roll_loses_nothing_never_double_owns_and_recovers(
    make_chaos: Callable[[str], Chaos], variant: str
) -> None:
    chaos = make_chaos(variant)
    start_group(chaos)
    plan = PLANS[variant]
    chaos.run(iter(plan), len(plan))
    outcome = finish(chaos)
    print(
        f"chaos roll {variant}: {outcome.actions} changes, {outcome.produced} produced, "
        f"{outcome.duplicates} duplicates, every partition consumed again "
        f"{outcome.recovery_s:.1f}s after the last change; first batches of a fenced member "
        f"after SIGCONT, of partitions handed on: {outcome.stale}"
    )
