"""Backoff arithmetic: Kafka's retry.backoff.ms / retry.backoff.max.ms semantics."""

from __future__ import annotations

import importlib.util
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kgroup.transport.backoff
import kgroup.types
from kgroup.errors import ConfigError
from kgroup.membership import (
    ConsumerMember,
    FailureKind,
    HeartbeatFailed,
    MemberConfig,
    SubscriptionChanged,
    TimerTick,
)
from kgroup.transport import Backoff


def test_defaults_are_kafkas() -> None:
    assert Backoff() == Backoff(initial=0.1, maximum=1.0, multiplier=2.0, jitter=0.2)
    assert Backoff.from_config({}) == Backoff()


def test_doubles_from_initial_to_maximum_without_jitter() -> None:
    backoff = Backoff()
    middle = lambda: 0.5  # noqa: E731 - a random source that yields no jitter
    delays = [backoff.delay(n, middle) for n in range(7)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0])


def test_jitter_spans_plus_minus_twenty_percent_capped_at_maximum() -> None:
    backoff = Backoff()
    assert backoff.delay(0, lambda: 0.0) == pytest.approx(0.08)
    assert backoff.delay(0, lambda: 0.999999) == pytest.approx(0.12, rel=1e-5)
    assert backoff.delay(2, lambda: 0.0) == pytest.approx(0.32)
    # Above the maximum, jitter can only pull the delay down.
    assert backoff.delay(10, lambda: 0.999999) == pytest.approx(1.0)
    assert backoff.delay(10, lambda: 0.0) == pytest.approx(0.8)


def test_huge_attempt_numbers_do_not_overflow() -> None:
    assert Backoff().delay(10**9, lambda: 0.5) == pytest.approx(1.0)


def test_maximum_not_above_initial_is_constant() -> None:
    backoff = Backoff(initial=0.5, maximum=0.2)
    assert {backoff.delay(n, random.random) for n in range(5)} == {0.5}


def test_from_config_reads_kafka_keys() -> None:
    backoff = Backoff.from_config({"retry.backoff.ms": 50, "retry.backoff.max.ms": 400})
    assert (backoff.initial, backoff.maximum) == (0.05, 0.4)
    with pytest.raises(ConfigError, match=r"retry\.backoff\.ms"):
        Backoff.from_config({"retry.backoff.ms": -1})
    with pytest.raises(ConfigError, match=r"retry\.backoff\.max\.ms"):
        Backoff.from_config({"retry.backoff.max.ms": "1s"})


def test_invalid_values_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        Backoff(jitter=1.5)
    with pytest.raises(ConfigError):
        Backoff(multiplier=0.5)
    with pytest.raises(ValueError, match="attempt"):
        Backoff().delay(-1)


@given(
    attempt=st.integers(0, 200),
    initial=st.floats(0.001, 10),
    ratio=st.floats(1.01, 1000),
    multiplier=st.floats(1.1, 10),
    jitter=st.floats(0, 0.99),
    seed=st.integers(),
)
def test_delay_stays_within_jittered_exponential_bounds(  # noqa: PLR0917 - hypothesis args
    attempt: int, initial: float, ratio: float, multiplier: float, jitter: float, seed: int
) -> None:
    backoff = Backoff(
        initial=initial, maximum=initial * ratio, multiplier=multiplier, jitter=jitter
    )
    delay = backoff.delay(attempt, random.Random(seed).random)
    term = min(initial * multiplier**attempt, backoff.maximum)
    assert term * (1 - jitter) * (1 - 1e-9) <= delay <= backoff.maximum * (1 + 1e-9)
    assert delay <= term * (1 + jitter) * (1 + 1e-9)


@given(seed=st.integers())
def test_same_random_source_same_delays(seed: int) -> None:
    first = [Backoff().delay(n, random.Random(seed).random) for n in range(6)]
    second = [Backoff().delay(n, random.Random(seed).random) for n in range(6)]
    assert first == second


def test_one_backoff_shared_by_every_layer() -> None:
    assert Backoff is kgroup.types.Backoff
    assert kgroup.transport.backoff.Backoff is kgroup.types.Backoff
    assert importlib.util.find_spec("kgroup.membership.backoff") is None


def test_membership_machines_back_off_with_it() -> None:
    # random() == 0.0: the lowest factor (0.8), also at the cap, as Kafka's ExponentialBackoff.
    member = ConsumerMember(MemberConfig(group_id="g", member_id="m"), random=lambda: 0.0)
    member.handle(SubscriptionChanged(frozenset({"t"})), 0.0)  # heartbeat 1 in flight
    now, waits = 0.0, []
    for seq in range(1, 8):
        member.handle(HeartbeatFailed(seq, FailureKind.TIMEOUT), now)
        due = member.next_deadline()
        assert due is not None
        waits.append(round(due - now, 6))
        now = due
        member.handle(TimerTick(), now)  # sends heartbeat seq + 1
    assert waits == pytest.approx([Backoff().delay(n, lambda: 0.0) for n in range(7)])
    assert waits == pytest.approx([0.08, 0.16, 0.32, 0.64, 0.8, 0.8, 0.8])
