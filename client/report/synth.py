"""Synthetic fleet telemetry: a consumer group on the new protocol, with a day of churn.

``python -m kgroup.report.synth --members 1000 --partitions 100000 --hours 24 --out DIR``
writes ``DIR/telemetry/*.jsonl`` (the events, in the exact form the JSON
Lines sink writes) and ``DIR/injected.json`` (the double ownership it injected
on purpose, if asked to: the ground truth a report must find).

It is a generator of events, not a model of a group: who owns what is
arithmetic. The group has ``--members`` slots, slot ``i`` owns
``partitions[i::members]`` for the whole run, and churn changes only who
occupies a slot; no coordinator rule runs (no reconciliation, no heartbeat
answers, no assignor). The protocol itself is modelled once, in
``kgroup.testing.groups`` and the simulator over it; the shipped report does
not import the test harness. The schedule exercises every table of the
report:

- all members join at the start and get their slot's share in one rebalance;
- churn arrives as a Poisson process (``--churn-per-hour``) and hits one slot
  at a time: its member leaves gracefully, is killed (SIGKILL: its telemetry
  stops; the coordinator reassigns after the session timeout) or is cut off
  and fenced (it stops fetching at its own session deadline, as kgroup does);
  meanwhile up to four other members hold the share, and a process then
  joins (or the fenced one rejoins) and takes it back. Or the member bounces
  as a static member (a new process with the same ``group.instance.id``
  takes the same partitions back a few seconds later, nobody else
  rebalances);
- partitions move on a member's next heartbeat, after the previous owner
  revoked them (stop fetching, callback, commit), so hand-overs leave small
  unowned gaps and never overlap;
- every member commits every ``--commit-interval`` seconds, and now and then
  a heartbeat fails with a retriable error;
- ``--inject-double-ownership N``: N fencing episodes in which the member
  misbehaves (a test-only fault): it keeps fetching past its session
  deadline until it hears it was fenced, while the covering members already
  fetch.

Everything is drawn from one seeded generator: the same arguments give the
same files.
"""

from __future__ import annotations

import argparse
import functools
import heapq
import itertools
import json
import math
import random
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

from kgroup.telemetry import events as ev
from kgroup.telemetry.codec import encode
from kgroup.types import TopicPartition

__all__ = ["InjectedOverlap", "SynthConfig", "SynthResult", "generate", "main"]

START_TS = 1767225600.0
"""2026-01-01T00:00:00Z: synthetic time starts here, so outputs are reproducible."""

# Events are written once the simulation clock is this far past them: no
# scenario emits an event further in the future than this.
_HORIZON_S = 600.0
_RTT_S = 0.002
# A vacant slot's partitions are dealt to this many other members meanwhile.
_COVERS = 4


@dataclass(frozen=True, slots=True)
class SynthConfig:
    """What to simulate."""

    members: int = 20
    partitions: int = 240
    topics: int = 0
    """Topics the partitions spread over; 0: one per 1,000 partitions (at least one)."""
    hours: float = 1.0
    churn_per_hour: float = 30.0
    commit_interval_s: float = 5.0
    commit_partitions: int = 8
    """Offsets per commit: the partitions that received records since the last one."""
    heartbeat_interval_s: float = 5.0
    session_timeout_s: float = 45.0
    static_fraction: float = 0.5
    heartbeat_errors_per_hour: float = 0.2
    """Retriable heartbeat errors per member and hour."""
    inject_double_ownership: int = 0
    close_at_end: bool = True
    files: int = 8
    group: str = "synthetic"
    seed: int = 1

    def __post_init__(self) -> None:
        problems = []
        if self.members < 1:
            problems.append("--members must be >= 1")
        if self.partitions < 1:
            problems.append("--partitions must be >= 1")
        if self.hours <= 0:
            problems.append("--hours must be > 0")
        if self.churn_per_hour < 0:
            problems.append("--churn-per-hour must be >= 0")
        if self.commit_interval_s <= 0:
            problems.append("--commit-interval must be > 0")
        if self.files < 1:
            problems.append("--files must be >= 1")
        if not 0 <= self.static_fraction <= 1:
            problems.append("--static-fraction must be in [0, 1]")
        if self.inject_double_ownership < 0:
            problems.append("--inject-double-ownership must be >= 0")
        if problems:
            from kgroup.errors import ConfigError  # noqa: PLC0415

            raise ConfigError("; ".join(problems))


@dataclass(frozen=True, slots=True)
class InjectedOverlap:
    """A double ownership the generator injected: the report must find exactly this."""

    topic: str
    partition: int
    faulty_member: str
    new_owner: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class SynthResult:
    """What :func:`generate` wrote."""

    events: int
    bytes: int
    files: tuple[Path, ...]
    injected: tuple[InjectedOverlap, ...]
    churn: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass(slots=True, eq=False)
class _Member:
    index: int
    member_id: str
    instance_id: str | None
    host: str
    pid: int
    boot: float
    file: int
    seq: itertools.count[int]
    epoch: int = 0
    alive: bool = True
    joined_at: float = 0.0
    busy_until: float = 0.0
    """A scenario of this member runs until then; no other starts before."""
    commit_phase: float = 0.0


class _Simulation:
    def __init__(self, config: SynthConfig, out: Path) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        topics = config.topics or max(1, math.ceil(config.partitions / 1000))
        per_topic = math.ceil(config.partitions / topics)
        self.partitions = [
            TopicPartition(f"topic-{i // per_topic}", i % per_topic)
            for i in range(config.partitions)
        ]
        # Slot i's share is partitions[i::members]: who fetches what is arithmetic,
        # the slots' occupants change with churn, the shares never do.
        self.shares = [self.partitions[i :: config.members] for i in range(config.members)]
        self.slots: list[_Member | None] = [None] * config.members
        self.members: list[_Member] = []
        self.group_epoch = 0
        self.pending: list[tuple[float, int, int, ev.EventBody]] = []
        self.counter = itertools.count()
        out.mkdir(parents=True, exist_ok=True)
        self.paths = tuple(out / f"synthetic-{i:03d}.jsonl" for i in range(config.files))
        self.handles: list[IO[str]] = [
            p.open("w", encoding="utf-8", buffering=1 << 20) for p in self.paths
        ]
        self.written = 0
        self.injected: list[InjectedOverlap] = []
        self.churn: dict[str, int] = {}
        self.quiet_until = 0.0
        self.instance_counter = itertools.count()

    # --- output ---------------------------------------------------------------------------

    def emit(self, member: _Member, ts: float, body: ev.EventBody) -> None:
        heapq.heappush(self.pending, (ts, next(self.counter), member.index, body))

    def flush(self, watermark: float) -> None:
        pending = self.pending
        while pending and pending[0][0] <= watermark:
            ts, _, index, body = heapq.heappop(pending)
            member = self.members[index]
            header = ev.EventHeader(
                ts=round(ts, 6),
                mono=round(ts - member.boot, 6),
                seq=next(member.seq),
                group=self.config.group,
                member_id=member.member_id,
                instance_id=member.instance_id,
                client_id="synthetic-consumer",
                host=member.host,
                pid=member.pid,
                protocol=ev.TelemetryProtocol.CONSUMER,
            )
            self.handles[member.file].write(encode(ev.TelemetryEvent(header, body)) + "\n")
            self.written += 1

    # --- members ---------------------------------------------------------------------------

    def new_member(self, instance_id: str | None = None) -> _Member:
        index = len(self.members)
        rng = self.rng
        if instance_id is None and rng.random() < self.config.static_fraction:
            instance_id = f"instance-{next(self.instance_counter)}"
        member = _Member(
            index=index,
            member_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            instance_id=instance_id,
            host=f"host-{rng.randrange(max(1, self.config.members // 4) + 1)}",
            pid=rng.randrange(1000, 4_000_000),
            boot=START_TS - rng.uniform(100, 100_000),
            file=index % self.config.files,
            seq=itertools.count(),
            commit_phase=rng.uniform(0, self.config.commit_interval_s),
        )
        self.members.append(member)
        return member

    def alive(self) -> list[_Member]:
        return [m for m in self.members if m.alive]

    def heartbeat_delay(self) -> float:
        return self.rng.uniform(0.003, self.config.heartbeat_interval_s)

    def cb(self) -> float:
        return min(self.rng.lognormvariate(math.log(0.004), 0.8), 2.0)

    def commit_latency(self) -> float:
        return min(self.rng.lognormvariate(math.log(0.005), 0.6), 5.0)

    def offsets(
        self, partitions: Sequence[TopicPartition], t: float
    ) -> tuple[ev.CommittedOffset, ...]:
        if not partitions:
            return ()
        k = min(self.config.commit_partitions, len(partitions))
        # A random run of k partitions (a sample would cost more than the rest
        # of the event; which partitions a commit names matters to nobody).
        first = self.rng.randrange(len(partitions) - k + 1)
        chosen = partitions[first : first + k]
        base = int((t - START_TS) * 100)
        return tuple(
            ev.CommittedOffset(tp.topic, tp.partition, base + tp.partition) for tp in chosen
        )

    def bump_epoch(self, t: float, skip: set[int]) -> None:
        """Every member not in ``skip`` learns the new group epoch at its next heartbeat."""
        for m in self.alive():
            if m.index in skip:
                continue
            old = m.epoch
            m.epoch = self.group_epoch
            self.emit(
                m, t + self.heartbeat_delay(), ev.EpochChanged(old_epoch=old, new_epoch=m.epoch)
            )

    # --- building blocks -------------------------------------------------------------------

    def revoke(
        self, member: _Member, partitions: list[TopicPartition], t: float, reason: ev.StopReason
    ) -> float:
        """Stop, callback, commit, revoked; returns when the partitions are released."""
        tps = tuple(sorted(partitions))
        t += 0.0005
        self.emit(member, t, ev.FetchStopped(partitions=tps, epoch=member.epoch, reason=reason))
        duration = self.cb()
        t += duration
        callback = ev.CallbackKind.LOST if reason is ev.StopReason.LOST else ev.CallbackKind.REVOKED
        self.emit(
            member, t, ev.CallbackCompleted(callback=callback, partitions=tps, duration_s=duration)
        )
        if reason is ev.StopReason.LOST:
            self.emit(
                member,
                t + 0.0001,
                ev.PartitionsLost(partitions=tps, epoch=member.epoch, error="SESSION_TIMED_OUT"),
            )
            return t + _RTT_S
        latency = self.commit_latency()
        t += latency
        self.emit(
            member,
            t,
            ev.CommitCompleted(offsets=self.offsets(tps, t), epoch=member.epoch, latency_s=latency),
        )
        t += 0.0001
        self.emit(member, t, ev.PartitionsRevoked(partitions=tps, epoch=member.epoch))
        return t + _RTT_S

    def assign(self, member: _Member, partitions: list[TopicPartition], t: float) -> float:
        """Assigned, start fetching, callback; returns when done."""
        tps = tuple(sorted(partitions))
        self.emit(member, t, ev.PartitionsAssigned(partitions=tps, epoch=member.epoch))
        t += 0.0005
        self.emit(member, t, ev.FetchStarted(partitions=tps, epoch=member.epoch))
        duration = self.cb()
        t += duration
        self.emit(
            member,
            t,
            ev.CallbackCompleted(
                callback=ev.CallbackKind.ASSIGNED, partitions=tps, duration_s=duration
            ),
        )
        return t

    # --- hand-overs ------------------------------------------------------------------------

    def covers_for(self, slot: int) -> dict[int, list[TopicPartition]]:
        """Who holds slot ``slot``'s partitions while it is vacant: up to four other
        slots, the partitions dealt to them in turn (``share[i::k]``)."""
        others = [i for i, m in enumerate(self.slots) if i != slot and m is not None]
        share = self.shares[slot]
        if not others or not share:
            return {}
        chosen = sorted(self.rng.sample(others, min(_COVERS, len(others))))
        return {c: share[i :: len(chosen)] for i, c in enumerate(chosen)}

    def occupant(self, slot: int) -> _Member:
        member = self.slots[slot]
        assert member is not None, f"slot {slot} is vacant"
        return member

    def rebalance(
        self, member: _Member, start: float, change: Callable[[float], float], *, gains: bool
    ) -> float:
        """One rebalance of ``member`` from ``start``: ``change`` emits what happens
        and returns when it is done. A member that gains partitions learns the new
        epoch with them; one that loses them, once it has released them."""
        self.emit(
            member, start, ev.RebalanceStarted(trigger="assignment_changed", epoch=member.epoch)
        )
        old = member.epoch
        member.epoch = self.group_epoch
        if gains:
            self.emit(
                member, start + 0.0001, ev.EpochChanged(old_epoch=old, new_epoch=member.epoch)
            )
        end = change(start + 0.0002 if gains else start)
        if not gains:
            self.emit(member, end, ev.EpochChanged(old_epoch=old, new_epoch=member.epoch))
        self.emit(member, end, ev.RebalanceEnded(epoch=member.epoch, duration_s=end - start))
        member.busy_until = max(member.busy_until, end)
        return end

    def cover(
        self,
        covers: dict[int, list[TopicPartition]],
        released: float,
        arrivals: dict[TopicPartition, tuple[int, float]] | None = None,
    ) -> float:
        """The covering members take the vacant slot's partitions, released at ``released``."""
        done = released
        for c, tps in covers.items():
            member = self.occupant(c)
            start = released + self.heartbeat_delay()
            if arrivals is not None:
                for tp in tps:
                    arrivals[tp] = (member.index, start + 0.0002 + 0.0005)
            end = self.rebalance(
                member, start, functools.partial(self.assign, member, tps), gains=True
            )
            done = max(done, end)
        return done

    def give_back(
        self, covers: dict[int, list[TopicPartition]], joiner: _Member, slot: int, t: float
    ) -> float:
        """The covering members revoke their part of ``slot``'s partitions; ``joiner``
        gets the whole share once each part is released."""
        share = self.shares[slot]
        released = t
        for c, tps in covers.items():
            member = self.occupant(c)
            end = self.rebalance(
                member,
                t + self.heartbeat_delay(),
                functools.partial(self.revoke, member, tps, reason=ev.StopReason.REVOKED),
                gains=False,
            )
            released = max(released, end)
        if covers:
            end = self.assign(joiner, share, released + self.heartbeat_delay())
        elif share:
            # Nobody held them (a group of one, or a static member's own share).
            end = self.assign(joiner, share, t + _RTT_S)
        else:
            end = t + _RTT_S
        self.emit(joiner, end, ev.StateChanged(old_state="RECONCILING", new_state="STABLE"))
        self.emit(joiner, end, ev.RebalanceEnded(epoch=joiner.epoch, duration_s=end - t))
        joiner.busy_until = max(joiner.busy_until, end)
        return end

    # --- scenarios -------------------------------------------------------------------------

    def start(self, t: float) -> None:
        self.group_epoch = 1
        last_join = t
        for slot in range(self.config.members):
            member = self.new_member()
            self.slots[slot] = member
            tj = t + self.rng.uniform(0, 3.0)
            last_join = max(last_join, tj)
            self.join_events(member, tj, trigger="join")
        for slot in range(self.config.members):
            member = self.occupant(slot)
            arrival = last_join + self.heartbeat_delay()
            old = member.epoch
            member.epoch = self.group_epoch
            self.emit(member, arrival, ev.EpochChanged(old_epoch=old, new_epoch=member.epoch))
            end = self.assign(member, self.shares[slot], arrival + 0.0001)
            member.busy_until = end
            self.emit(member, end, ev.StateChanged(old_state="RECONCILING", new_state="STABLE"))
            self.emit(
                member,
                end,
                ev.RebalanceEnded(epoch=member.epoch, duration_s=end - member.joined_at),
            )

    def join_events(self, member: _Member, t: float, trigger: str) -> None:
        member.joined_at = t
        self.emit(
            member,
            t,
            ev.StateChanged(old_state="UNSUBSCRIBED", new_state="JOINING", trigger="SUBSCRIBE"),
        )
        self.emit(member, t + 0.0001, ev.RebalanceStarted(trigger=trigger, epoch=0))
        self.emit(member, t + _RTT_S, ev.MemberJoined(epoch=self.group_epoch))
        self.emit(
            member,
            t + _RTT_S + 0.0001,
            ev.StateChanged(old_state="JOINING", new_state="RECONCILING", trigger="HEARTBEAT_OK"),
        )

    def vacate(self, slot: int, released: float) -> tuple[dict[int, list[TopicPartition]], float]:
        """Slot ``slot``'s member is gone from ``released`` on: the next epoch hands its
        partitions to covering members. Returns the covers and when they fetch."""
        member = self.occupant(slot)
        member.alive = False
        self.slots[slot] = None
        self.group_epoch += 1
        covers = self.covers_for(slot)
        self.bump_epoch(released, skip=set(covers))
        return covers, self.cover(covers, released)

    def refill(self, slot: int, covers: dict[int, list[TopicPartition]], t: float) -> float:
        """A new process joins and takes slot ``slot``'s partitions back from the covers."""
        member = self.new_member()
        self.slots[slot] = member
        self.group_epoch += 1
        self.join_events(member, t, trigger="join")
        member.epoch = self.group_epoch
        self.bump_epoch(t, skip={member.index} | {self.occupant(c).index for c in covers})
        return self.give_back(covers, member, slot, t + _RTT_S)

    def leave(self, slot: int, t: float) -> float:
        """Graceful close: revoke everything, leave; covers take over; a new process joins."""
        member = self.occupant(slot)
        self.emit(
            member,
            t,
            ev.StateChanged(old_state="STABLE", new_state="PREPARE_LEAVING", trigger="LEAVE"),
        )
        tps = self.shares[slot]
        end = self.revoke(member, tps, t + 0.0002, ev.StopReason.CLOSED) if tps else t + _RTT_S
        self.emit(member, end, ev.MemberLeft(reason=ev.LeaveReason.CLOSED, epoch=-1))
        self.emit(
            member, end + 0.0001, ev.StateChanged(old_state="LEAVING", new_state="UNSUBSCRIBED")
        )
        covers, done = self.vacate(slot, end)
        return self.refill(slot, covers, done + self.rng.uniform(10.0, 120.0))

    def kill(self, slot: int, t: float) -> float:
        """SIGKILL: no more telemetry; the coordinator reassigns after the session timeout;
        the process restarts as a new member (a killed process has a new id)."""
        expired = t + self.config.session_timeout_s + self.heartbeat_delay()
        covers, done = self.vacate(slot, expired)
        return self.refill(slot, covers, max(done, expired + self.rng.uniform(5.0, 30.0)))

    def bounce(self, slot: int, t: float) -> float:
        """A static member restarts: same instance id, same partitions, nobody else moves."""
        member = self.occupant(slot)
        self.emit(
            member,
            t,
            ev.StateChanged(old_state="STABLE", new_state="PREPARE_LEAVING", trigger="LEAVE"),
        )
        tps = self.shares[slot]
        end = self.revoke(member, tps, t + 0.0002, ev.StopReason.CLOSED) if tps else t + _RTT_S
        self.emit(member, end, ev.MemberLeft(reason=ev.LeaveReason.CLOSED, epoch=-2))
        member.alive = False
        back = end + self.rng.uniform(3.0, 20.0)
        successor = self.new_member(member.instance_id)
        self.slots[slot] = successor
        successor.epoch = self.group_epoch
        self.join_events(successor, back, trigger="join")
        return self.give_back({}, successor, slot, back)

    def fence(self, slot: int, t: float, *, misbehave: bool) -> float:
        """Cut off from the coordinator for longer than the session timeout, then fenced;
        ``misbehave``: it keeps fetching until it hears so (the injected fault)."""
        config = self.config
        member = self.occupant(slot)
        tps = self.shares[slot]
        beat = t + config.heartbeat_interval_s
        while beat < t + config.session_timeout_s:
            self.emit(
                member,
                beat,
                ev.HeartbeatFailed(
                    error="REQUEST_TIMED_OUT", error_code=None, retriable=True, epoch=member.epoch
                ),
            )
            beat += config.heartbeat_interval_s
        deadline = t + config.session_timeout_s
        if not misbehave and tps:
            # kgroup's rule: no heartbeat for a session timeout: stop before the broker acts.
            self.revoke(member, tps, deadline - self.rng.uniform(0.05, 0.5), ev.StopReason.LOST)
        expired = deadline + self.heartbeat_delay()
        self.group_epoch += 1
        covers = self.covers_for(slot)
        self.bump_epoch(expired, skip={member.index} | set(covers))
        arrivals: dict[TopicPartition, tuple[int, float]] = {}
        done = self.cover(covers, expired, arrivals)
        back = max(expired + self.rng.uniform(5.0, 30.0), done + 0.5)
        self.emit(
            member, back, ev.Fenced(error="FENCED_MEMBER_EPOCH", error_code=110, epoch=member.epoch)
        )
        if misbehave and tps:
            stop = back + 0.0005
            self.revoke(member, tps, back, ev.StopReason.LOST)
            for tp, (owner, first_fetch) in sorted(arrivals.items()):
                self.injected.append(
                    InjectedOverlap(
                        topic=tp.topic,
                        partition=tp.partition,
                        faulty_member=member.member_id,
                        new_owner=self.members[owner].member_id,
                        start=round(first_fetch, 6),
                        end=round(stop, 6),
                    )
                )
        # Rejoin with epoch 0, as a new member would, and take the share back.
        member.epoch = 0
        self.emit(member, back + 0.01, ev.RebalanceStarted(trigger="fenced", epoch=0))
        self.group_epoch += 1
        member.epoch = self.group_epoch
        self.emit(member, back + 0.012, ev.MemberJoined(epoch=member.epoch))
        self.bump_epoch(back, skip={member.index} | {self.occupant(c).index for c in covers})
        return self.give_back(covers, member, slot, back + 0.012)

    def maybe_heartbeat_error(self, member: _Member, t: float) -> None:
        rate = self.config.heartbeat_errors_per_hour * self.config.commit_interval_s / 3600
        if self.rng.random() < rate:
            error, code = self.rng.choice(
                [
                    ("COORDINATOR_LOAD_IN_PROGRESS", 14),
                    ("COORDINATOR_NOT_AVAILABLE", 15),
                    ("NOT_COORDINATOR", 16),
                ]
            )
            self.emit(
                member,
                t,
                ev.HeartbeatFailed(
                    error=error, error_code=code, retriable=True, epoch=member.epoch
                ),
            )

    def churn_event(self, t: float) -> None:
        candidates = [
            slot
            for slot, m in enumerate(self.slots)
            if m is not None and m.busy_until <= t and self.shares[slot]
        ]
        if not candidates:
            return
        rng = self.rng
        slot = rng.choice(candidates)
        kinds = ["leave", "kill", "fence"]
        if self.occupant(slot).instance_id is not None:
            kinds.append("bounce")
        injected_so_far = len({o.faulty_member for o in self.injected})
        if injected_so_far < self.config.inject_double_ownership:
            kind = "inject"
        else:
            kind = rng.choice(kinds)
        self.churn[kind] = self.churn.get(kind, 0) + 1
        if kind == "leave":
            done = self.leave(slot, t)
        elif kind == "kill":
            done = self.kill(slot, t)
        elif kind == "bounce":
            done = self.bounce(slot, t)
        else:
            done = self.fence(slot, t, misbehave=kind == "inject")
        # Let a scenario finish before the next begins, so every slot is filled
        # when covers are chosen and the injected overlaps are exactly what the
        # ground truth says.
        self.quiet_until = done + self.config.heartbeat_interval_s

    def run(self) -> None:
        config = self.config
        rng = self.rng
        t0 = START_TS
        end = t0 + config.hours * 3600
        self.start(t0)
        churn_times: list[float] = []
        rate = config.churn_per_hour / 3600
        t = t0 + 60.0
        # Injected faults need churn slots even without background churn.
        needed = config.inject_double_ownership
        while True:
            gap = rng.expovariate(rate) if rate > 0 else math.inf
            if math.isinf(gap) and needed > 0:
                gap = 120.0
            t += gap
            if t >= end - 120.0:
                break
            churn_times.append(t)
            needed -= 1
        churn_times.reverse()
        tick = t0 + config.commit_interval_s
        while tick < end:
            while churn_times and churn_times[-1] < tick:
                at = max(churn_times.pop(), self.quiet_until)
                if at < end - 60.0:
                    self.churn_event(at)
            window_start = tick - config.commit_interval_s
            for slot, member in enumerate(self.slots):
                if member is None:
                    continue
                at = window_start + member.commit_phase
                if at < member.busy_until or not self.shares[slot]:
                    continue
                self.emit(
                    member,
                    at,
                    ev.CommitCompleted(
                        offsets=self.offsets(self.shares[slot], at),
                        epoch=member.epoch,
                        latency_s=self.commit_latency(),
                    ),
                )
                self.maybe_heartbeat_error(member, at + 0.5)
            self.flush(tick - _HORIZON_S)
            tick += config.commit_interval_s
        if config.close_at_end:
            for slot, member in enumerate(self.slots):
                if member is not None:
                    self.leave_quietly(member, self.shares[slot], end)
        self.flush(math.inf)

    def leave_quietly(self, member: _Member, tps: list[TopicPartition], t: float) -> None:
        """Close at the end of the run: everyone leaves, nobody takes over."""
        stop = self.revoke(member, tps, t, ev.StopReason.CLOSED) if tps else t
        self.emit(member, stop, ev.MemberLeft(reason=ev.LeaveReason.CLOSED, epoch=-1))
        member.alive = False

    def close(self) -> None:
        for handle in self.handles:
            handle.close()


def generate(config: SynthConfig, out: str | Path) -> SynthResult:
    """Simulate ``config`` and write ``out/telemetry/*.jsonl`` and ``out/injected.json``."""
    started = time.monotonic()
    root = Path(out)
    telemetry = root / "telemetry"
    for old in telemetry.glob("synthetic-*.jsonl") if telemetry.exists() else ():
        old.unlink()
    sim = _Simulation(config, telemetry)
    try:
        sim.run()
    finally:
        sim.close()
    injected = tuple(sim.injected)
    (root / "injected.json").write_text(
        json.dumps([asdict(o) for o in injected], indent=2) + "\n", encoding="utf-8"
    )
    return SynthResult(
        events=sim.written,
        bytes=sum(p.stat().st_size for p in sim.paths),
        files=sim.paths,
        injected=injected,
        churn=dict(sorted(sim.churn.items())),
        seconds=time.monotonic() - started,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kgroup.report.synth``."""
    defaults = SynthConfig()
    parser = argparse.ArgumentParser(
        prog="python -m kgroup.report.synth",
        description="Write synthetic kgroup telemetry (JSON Lines): a consumer group with churn.",
    )
    parser.add_argument("--out", required=True, help="directory: telemetry/*.jsonl, injected.json")
    parser.add_argument("--members", type=int, default=defaults.members)
    parser.add_argument("--partitions", type=int, default=defaults.partitions)
    parser.add_argument(
        "--topics", type=int, default=defaults.topics, help="0: one per 1,000 partitions"
    )
    parser.add_argument("--hours", type=float, default=defaults.hours)
    parser.add_argument("--churn-per-hour", type=float, default=defaults.churn_per_hour)
    parser.add_argument(
        "--commit-interval", type=float, default=defaults.commit_interval_s, help="seconds"
    )
    parser.add_argument("--commit-partitions", type=int, default=defaults.commit_partitions)
    parser.add_argument("--static-fraction", type=float, default=defaults.static_fraction)
    parser.add_argument("--inject-double-ownership", type=int, default=0, metavar="N")
    parser.add_argument("--files", type=int, default=defaults.files)
    parser.add_argument("--group", default=defaults.group)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    args = parser.parse_args(argv)
    from kgroup.errors import ConfigError  # noqa: PLC0415

    try:
        config = SynthConfig(
            members=args.members,
            partitions=args.partitions,
            topics=args.topics,
            hours=args.hours,
            churn_per_hour=args.churn_per_hour,
            commit_interval_s=args.commit_interval,
            commit_partitions=args.commit_partitions,
            static_fraction=args.static_fraction,
            inject_double_ownership=args.inject_double_ownership,
            files=args.files,
            group=args.group,
            seed=args.seed,
        )
    except ConfigError as exc:
        print(f"synth: {exc}", file=sys.stderr)
        return 2
    result = generate(config, args.out)
    churn = ", ".join(f"{k} {v}" for k, v in result.churn.items()) or "none"
    print(
        f"wrote {result.events:,} events ({result.bytes / 1e6:,.1f} MB) in {len(result.files)} "
        f"files under {Path(args.out) / 'telemetry'} in {result.seconds:.1f} s; churn: {churn}; "
        f"injected double ownership: {len(result.injected)} partition intervals"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
