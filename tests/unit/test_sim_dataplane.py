"""The simulator's members are built as the runtime builds them, and its data
plane stops fetching the way the real one does: after the record wait in progress.
"""

from __future__ import annotations

import contextlib
import dataclasses

import pytest

from kgroup.config import ConsumerConfig
from kgroup.dataplane.librdkafka import IDLE_CHUNK
from kgroup.runtime.classic_session import classic_member_config
from kgroup.runtime.consumer_session import consumer_member_config
from kgroup.runtime.session import SESSION_MARGIN_MS
from kgroup.testing.sim import (
    InjectedBug,
    Invariant,
    InvariantViolationError,
    Simulation,
    SimulationConfig,
)
from kgroup.testing.sim.invariants import Violation

_CONFIG = ConsumerConfig(
    bootstrap_servers=("k:9092",),
    group_id="g",
    group_instance_id="i-1",
    client_rack="r1",
    session_timeout_ms=7000,
    consumer_session_timeout_ms=8000,
    heartbeat_interval_ms=700,
    max_poll_interval_ms=9000,
    enable_auto_commit=False,
    retry_backoff_ms=50,
    retry_backoff_max_ms=500,
)


def test_the_consumer_member_config_is_the_consumers_with_the_session_margin() -> None:
    config = consumer_member_config(_CONFIG, "member-1")
    assert (
        config.group_id,
        config.member_id,
        config.instance_id,
        config.rack_id,
        config.session_timeout_ms,
        config.session_margin_ms,
        config.max_poll_interval_ms,
        config.auto_commit,
        config.retry_backoff_ms,
        config.retry_backoff_max_ms,
    ) == ("g", "member-1", "i-1", "r1", 8000, SESSION_MARGIN_MS, 9000, False, 50, 500)


def test_the_classic_member_config_is_the_consumers_with_the_session_margin() -> None:
    config = classic_member_config(_CONFIG)
    assert (
        config.group_id,
        config.instance_id,
        config.rack_id,
        config.session_timeout_ms,
        config.session_margin_ms,
        config.heartbeat_interval_ms,
        config.max_poll_interval_ms,
        config.auto_commit,
        config.retry_backoff_ms,
        config.retry_backoff_max_ms,
    ) == ("g", "i-1", "r1", 7000, SESSION_MARGIN_MS, 700, 9000, False, 50, 500)


def _cut_off(
    seed: int,
    protocol: str,
    *,
    bug: InjectedBug | None = None,
    check_session_loss: bool = True,
    heartbeat_interval_ms: int = 1000,
) -> Simulation:
    """m0, settled and quiet (no auto-commit), is cut off past its session; m1 takes over."""
    base = SimulationConfig()
    config = dataclasses.replace(
        base,
        check_session_loss=check_session_loss,
        coordinator=dataclasses.replace(
            base.coordinator, heartbeat_interval_ms=heartbeat_interval_ms
        ),
    )
    sim = Simulation(seed=seed, topics={"t": 4}, config=config, bug=bug, trace=True)
    sim.add_member("m0", topics={"t"}, protocol=protocol, auto_commit=False)
    sim.add_member("m1", topics={"t"}, protocol=protocol, start_at=0.5, has_listener=False)
    sim.partition("m0", at=5.0, duration=15.0)
    return sim


def _violation(sim: Simulation) -> Violation | None:
    """Run ``sim`` well past the cut; the violation it stopped at, if any."""
    with contextlib.suppress(InvariantViolationError):
        sim.run(30.0)
    return sim.violation


def _at(line: str) -> float:
    return float(line.split(maxsplit=1)[0])


def _give_up_and_expiry(sim: Simulation) -> tuple[float, float]:
    """When m0 stopped fetching at its session loss, and when the coordinator expired it."""
    trace = sim.trace
    expired = next(
        _at(line)
        for line in trace
        if " m0#1 " in line and "removed by the coordinator: session timeout" in line
    )
    stop = max(_at(line) for line in trace if " m0#1 " in line and "-> stop fetching" in line)
    assert stop < expired
    return stop, expired


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_cut_off_member_gives_its_session_up_the_runtimes_margin_before_the_coordinator(
    protocol: str,
) -> None:
    # The coordinator counts from when it heard the last heartbeat, the member
    # from when it sent it: the member is early by the margin and the latency.
    sim = _cut_off(1, protocol)
    sim.run_until_converged(faults_end=20.0)
    stop, expired = _give_up_and_expiry(sim)
    assert SESSION_MARGIN_MS / 1000 <= expired - stop <= SESSION_MARGIN_MS / 1000 + 0.05
    bare = _cut_off(1, protocol, bug=InjectedBug.NO_SESSION_MARGIN, check_session_loss=False)
    bare.run_until_converged(faults_end=20.0)
    stop, expired = _give_up_and_expiry(bare)
    assert expired - stop < 0.05


def test_a_stop_takes_effect_when_the_record_wait_in_progress_ends() -> None:
    waits = []
    for seed in range(6):
        sim = _cut_off(seed, "consumer")
        sim.run_until_converged(faults_end=20.0)
        lines = [line for line in sim.trace if " m0#1 " in line]
        asked = max(i for i, line in enumerate(lines) if "-> stop fetching" in line)
        waiting = next(line for line in lines[asked:] if "data plane stops" in line)
        assert "after the record wait in progress" in waiting
        done = next(line for line in lines[asked:] if "data plane stopped" in line)
        waits.append(_at(done) - _at(lines[asked]))
    # A settled, quiet member waits in long chunks; where the stop falls in one varies.
    assert all(0.0 <= wait <= IDLE_CHUNK for wait in waits)
    # Not one fixed delay: spread over the chunk (two seeds may still land alike).
    assert len({round(wait, 4) for wait in waits}) >= len(waits) // 2
    assert max(waits) - min(waits) > 0.02


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_without_the_margin_a_lapsed_member_still_fetches_when_the_coordinator_expires_it(
    protocol: str,
) -> None:
    bare = [_cut_off(seed, protocol, bug=InjectedBug.NO_SESSION_MARGIN) for seed in range(10)]
    caught = [v.invariant for v in map(_violation, bare) if v is not None]
    assert caught
    assert set(caught) == {Invariant.SESSION_LOST_FETCH}
    for seed in range(10):
        sim = _cut_off(seed, protocol)
        sim.run_until_converged(faults_end=20.0)
        assert sim.violation is None


def test_without_the_margin_the_member_taking_over_fetches_alongside_the_lapsed_one() -> None:
    # The session-loss check off: the new owner starts while the lapsed member's
    # stop still waits (m1 heartbeats often, so it hears of its partitions at once).
    def run(seed: int, bug: InjectedBug | None) -> Violation | None:
        return _violation(
            _cut_off(seed, "consumer", bug=bug, check_session_loss=False, heartbeat_interval_ms=50)
        )

    caught = [v for v in (run(seed, InjectedBug.NO_SESSION_MARGIN) for seed in range(20)) if v]
    assert caught
    assert {v.invariant for v in caught} == {Invariant.DOUBLE_FETCH}
    assert all("whose session the coordinator expired" in v.message for v in caught)
    assert all(run(seed, None) is None for seed in range(20))
