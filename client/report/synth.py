"""Synthetic fleet telemetry: a consumer group on the new protocol, with a day of churn.

``python -m kgroup.report.synth --members 1000 --partitions 100000 --hours 24 --out DIR``
writes ``DIR/telemetry/*.jsonl`` (the events, in the exact form the JSON
Lines sink writes) and ``DIR/injected.json`` (the double ownership it injected
on purpose, if asked to: the ground truth a report must find).

It is a generator of events, not a model of a group: who owns what is
computed by arithmetic (even shares at the start, a joiner takes from the most
loaded, a leaver's partitions go to the least loaded), every change is the
next epoch, and no coordinator rule runs (no reconciliation, no heartbeat
answers). The protocol itself is modelled once, in ``kgroup.testing.groups``
and the simulator over it; the shipped report does not import the test
harness. The schedule exercises every table of the report:

- all members join at the start and get their share in one rebalance;
- churn arrives as a Poisson process (``--churn-per-hour``): a member joins
  (partitions move to it from the most loaded), leaves gracefully (its
  partitions go to the least loaded once it released them), is killed
  (SIGKILL: its telemetry stops; the coordinator reassigns after the session
  timeout), bounces as a static member (it leaves, a new process with the
  same ``group.instance.id`` takes the same partitions back a few seconds
  later, nobody else rebalances), or is cut off and fenced (it stops fetching
  at its own session deadline, as kgroup does, and rejoins);
- partitions move on a member's next heartbeat, after the previous owner
  revoked them (stop fetching, callback, commit), so hand-overs leave small
  unowned gaps and never overlap;
- every member commits every ``--commit-interval`` seconds, and now and then
  a heartbeat fails with a retriable error;
- ``--inject-double-ownership N``: N fencing episodes in which the member
  misbehaves (a test-only fault): it keeps fetching past its session
  deadline until it hears it was fenced, while the new owners already fetch.

Everything is drawn from one seeded generator: the same arguments give the
same files.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import random
import sys
import time
import uuid
from collections.abc import Sequence
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
    owned: dict[TopicPartition, None] = field(default_factory=dict)
    """Partitions the member fetches (a dict: ordered, so runs are reproducible)."""
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
        for tp in partitions:
            member.owned.pop(tp, None)
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
        member.owned.update(dict.fromkeys(partitions))
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

    def move(
        self,
        moves: dict[tuple[int, int], list[TopicPartition]],
        t: float,
        *,
        released: dict[int, float] | None = None,
        trigger: str = "assignment_changed",
        joiner: _Member | None = None,
        arrivals: dict[TopicPartition, tuple[int, float]] | None = None,
    ) -> float:
        """Move partitions between members; returns when the last one fetches."""
        released = dict(released or {})
        losers: dict[int, list[TopicPartition]] = {}
        for (src, _dst), tps in moves.items():
            losers.setdefault(src, []).extend(tps)
        done = t
        for src, tps in losers.items():
            if src in released:
                continue  # gone already (killed, fenced, closed): nothing to revoke
            member = self.members[src]
            start = t + self.heartbeat_delay()
            self.emit(member, start, ev.RebalanceStarted(trigger=trigger, epoch=member.epoch))
            end = self.revoke(member, tps, start, ev.StopReason.REVOKED)
            old = member.epoch
            member.epoch = self.group_epoch
            self.emit(member, end, ev.EpochChanged(old_epoch=old, new_epoch=member.epoch))
            self.emit(member, end, ev.RebalanceEnded(epoch=member.epoch, duration_s=end - start))
            released[src] = end
            done = max(done, end)
        gainers: dict[int, list[tuple[float, list[TopicPartition]]]] = {}
        for (src, dst), tps in moves.items():
            arrival = released[src] + self.heartbeat_delay()
            gainers.setdefault(dst, []).append((arrival, tps))
        for dst, batches in gainers.items():
            member = self.members[dst]
            batches.sort(key=lambda b: b[0])
            if member is joiner:
                start = t
            else:
                start = min(t + self.heartbeat_delay(), batches[0][0])
                self.emit(member, start, ev.RebalanceStarted(trigger=trigger, epoch=member.epoch))
                old = member.epoch
                member.epoch = self.group_epoch
                self.emit(
                    member, start + 0.0001, ev.EpochChanged(old_epoch=old, new_epoch=member.epoch)
                )
            end = start
            for arrival, tps in batches:
                at = max(arrival, start + 0.0002)
                end = self.assign(member, tps, at)
                if arrivals is not None:
                    for tp in tps:
                        arrivals[tp] = (dst, at + 0.0005)
            self.emit(member, end, ev.RebalanceEnded(epoch=member.epoch, duration_s=end - start))
            member.busy_until = max(member.busy_until, end)
            done = max(done, end)
        return done

    def spread(
        self, partitions: list[TopicPartition], src: int, exclude: set[int]
    ) -> dict[tuple[int, int], list[TopicPartition]]:
        """Give ``partitions`` (owned by ``src``) to the least loaded live members."""
        heap = [(len(m.owned), m.index) for m in self.alive() if m.index not in exclude]
        heapq.heapify(heap)
        moves: dict[tuple[int, int], list[TopicPartition]] = {}
        if not heap:
            return moves
        for tp in partitions:
            load, index = heapq.heappop(heap)
            moves.setdefault((src, index), []).append(tp)
            heapq.heappush(heap, (load + 1, index))
        return moves

    def take_for(self, joiner: _Member) -> dict[tuple[int, int], list[TopicPartition]]:
        """Partitions for a member owning nothing, from the most loaded members."""
        others = [m for m in self.alive() if m is not joiner]
        if not others:
            return {}
        target = len(self.partitions) // (len(others) + 1)
        heap = [(-len(m.owned), m.index) for m in others if m.owned]
        heapq.heapify(heap)
        taken: dict[int, set[TopicPartition]] = {}
        moves: dict[tuple[int, int], list[TopicPartition]] = {}
        for _ in range(target):
            if not heap:
                break
            negative, index = heapq.heappop(heap)
            owner = self.members[index]
            already = taken.setdefault(index, set())
            tp = next((p for p in owner.owned if p not in already), None)
            if tp is None:
                continue
            taken[index].add(tp)
            moves.setdefault((index, joiner.index), []).append(tp)
            if -negative - 1 > 0:
                heapq.heappush(heap, (negative + 1, index))
        return moves

    # --- scenarios -------------------------------------------------------------------------

    def start(self, t: float) -> None:
        joiners = [self.new_member() for _ in range(self.config.members)]
        self.group_epoch = 1
        last_join = t
        for member in joiners:
            tj = t + self.rng.uniform(0, 3.0)
            last_join = max(last_join, tj)
            self.join_events(member, tj, trigger="join")
        share: dict[int, list[TopicPartition]] = {}
        for i, tp in enumerate(self.partitions):
            share.setdefault(joiners[i % len(joiners)].index, []).append(tp)
        for member in joiners:
            arrival = last_join + self.heartbeat_delay()
            old = member.epoch
            member.epoch = self.group_epoch
            self.emit(member, arrival, ev.EpochChanged(old_epoch=old, new_epoch=member.epoch))
            end = self.assign(member, share.get(member.index, []), arrival + 0.0001)
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

    def join(self, t: float, instance_id: str | None = None) -> float:
        member = self.new_member(instance_id)
        self.group_epoch += 1
        self.join_events(member, t, trigger="join")
        member.epoch = self.group_epoch
        moves = self.take_for(member)
        self.bump_epoch(t, skip={member.index} | {src for src, _ in moves})
        done = self.move(moves, t, joiner=member)
        if not moves:
            self.emit(member, t + _RTT_S, ev.RebalanceEnded(epoch=member.epoch, duration_s=_RTT_S))
        return done

    def leave(
        self, member: _Member, t: float, reason: ev.LeaveReason = ev.LeaveReason.CLOSED
    ) -> float:
        """Graceful close: revoke everything, leave; others take over."""
        self.emit(
            member,
            t,
            ev.StateChanged(old_state="STABLE", new_state="PREPARE_LEAVING", trigger="LEAVE"),
        )
        tps = sorted(member.owned)
        end = self.revoke(member, tps, t + 0.0002, ev.StopReason.CLOSED) if tps else t + _RTT_S
        self.emit(member, end, ev.MemberLeft(reason=reason, epoch=-1))
        self.emit(
            member, end + 0.0001, ev.StateChanged(old_state="LEAVING", new_state="UNSUBSCRIBED")
        )
        member.alive = False
        self.group_epoch += 1
        moves = self.spread(tps, member.index, exclude={member.index})
        self.bump_epoch(end, skip={dst for _, dst in moves})
        return self.move(moves, end, released={member.index: end})

    def kill(self, member: _Member, t: float) -> float:
        """SIGKILL: no more telemetry; the coordinator reassigns after the session timeout."""
        member.alive = False
        tps = list(member.owned)
        member.owned.clear()
        expired = t + self.config.session_timeout_s + self.heartbeat_delay()
        self.group_epoch += 1
        moves = self.spread(tps, member.index, exclude={member.index})
        self.bump_epoch(expired, skip={dst for _, dst in moves})
        done = self.move(moves, expired, released={member.index: expired})
        # The process restarts (a new member: a killed process has a new id).
        return max(done, self.join(expired + self.rng.uniform(5.0, 30.0)))

    def bounce(self, member: _Member, t: float) -> float:
        """A static member restarts: same instance id, same partitions, nobody else moves."""
        self.emit(
            member,
            t,
            ev.StateChanged(old_state="STABLE", new_state="PREPARE_LEAVING", trigger="LEAVE"),
        )
        tps = sorted(member.owned)
        end = self.revoke(member, tps, t + 0.0002, ev.StopReason.CLOSED) if tps else t + _RTT_S
        self.emit(member, end, ev.MemberLeft(reason=ev.LeaveReason.CLOSED, epoch=-2))
        member.alive = False
        member.owned.clear()
        back = end + self.rng.uniform(3.0, 20.0)
        successor = self.new_member(member.instance_id)
        successor.epoch = self.group_epoch
        self.join_events(successor, back, trigger="join")
        done = self.assign(successor, tps, back + _RTT_S + 0.001) if tps else back + _RTT_S
        self.emit(successor, done, ev.StateChanged(old_state="RECONCILING", new_state="STABLE"))
        self.emit(successor, done, ev.RebalanceEnded(epoch=successor.epoch, duration_s=done - back))
        successor.busy_until = done
        return done

    def fence(self, member: _Member, t: float, *, misbehave: bool) -> float:
        """Cut off from the coordinator for longer than the session timeout, then fenced."""
        config = self.config
        tps = sorted(member.owned)
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
        moves = self.spread(tps, member.index, exclude={member.index})
        member.owned.clear()
        self.bump_epoch(expired, skip={member.index} | {dst for _, dst in moves})
        arrivals: dict[TopicPartition, tuple[int, float]] = {}
        done = self.move(moves, expired, released={member.index: expired}, arrivals=arrivals)
        back = expired + self.rng.uniform(5.0, 30.0)
        back = max(back, done + 0.5)
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
        # Rejoin with epoch 0, as a new member would.
        member.epoch = 0
        self.emit(member, back + 0.01, ev.RebalanceStarted(trigger="fenced", epoch=0))
        self.group_epoch += 1
        member.epoch = self.group_epoch
        self.emit(member, back + 0.012, ev.MemberJoined(epoch=member.epoch))
        moves = self.take_for(member)
        self.bump_epoch(back, skip={member.index} | {src for src, _ in moves})
        done = self.move(moves, back + 0.012, joiner=member)
        if not moves:
            self.emit(member, back + 0.02, ev.RebalanceEnded(epoch=member.epoch, duration_s=0.01))
        return done

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
        live = [m for m in self.alive() if m.busy_until <= t and m.owned]
        if not live:
            self.join(t)
            self.churn["join"] = self.churn.get("join", 0) + 1
            return
        rng = self.rng
        member = rng.choice(live)
        target = self.config.members
        kinds = ["leave", "kill", "fence"]
        if member.instance_id is not None:
            kinds.append("bounce")
        if len(self.alive()) < target * 1.2:
            kinds.append("join")
        injected_so_far = len({o.faulty_member for o in self.injected})
        if injected_so_far < self.config.inject_double_ownership:
            kind = "inject"
        else:
            kind = rng.choice(kinds)
        self.churn[kind] = self.churn.get(kind, 0) + 1
        if kind == "join":
            done = self.join(t)
        elif kind == "leave":
            done = self.leave(member, t)
            done = max(done, self.join(done + rng.uniform(10.0, 120.0)))
        elif kind == "kill":
            done = self.kill(member, t)
        elif kind == "bounce":
            done = self.bounce(member, t)
        else:
            done = self.fence(member, t, misbehave=kind == "inject")
        # Let a scenario finish before the next touches the same partitions, so
        # the injected overlaps are exactly what the ground truth says.
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
            for member in self.alive():
                at = window_start + member.commit_phase
                if at < member.busy_until or not member.owned:
                    continue
                self.emit(
                    member,
                    at,
                    ev.CommitCompleted(
                        offsets=self.offsets(list(member.owned), at),
                        epoch=member.epoch,
                        latency_s=self.commit_latency(),
                    ),
                )
                self.maybe_heartbeat_error(member, at + 0.5)
            self.flush(tick - _HORIZON_S)
            tick += config.commit_interval_s
        if config.close_at_end:
            for member in self.alive():
                self.leave_quietly(member, end)
        self.flush(math.inf)

    def leave_quietly(self, member: _Member, t: float) -> None:
        """Close at the end of the run: everyone leaves, nobody takes over."""
        tps = sorted(member.owned)
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
