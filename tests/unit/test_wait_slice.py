"""How long the application's thread waits in the data plane at a time (FrontEndCore.wait_slice).

librdkafka's consume cannot be cut short from the loop's thread, so a rebalance
callback the loop queues waits for the slice to end: the slice must be short
exactly while a group answer is awaited or being handled, and long otherwise.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from kgroup._frontend import ANSWER_SLICE, ANSWER_SLICE_MAX, SERVICE_SLICE, FrontEndCore
from kgroup.config import ConsumerConfig

if TYPE_CHECKING:
    from kgroup.runtime import Driver


@dataclass
class _Driver:
    """The two fields wait_slice reads of a driver (and a data plane, which it does not use)."""

    answers_pending: int = 0
    quiet_until: float = math.inf
    dataplane: object = None


def _core(driver: _Driver) -> FrontEndCore:
    config = ConsumerConfig.from_dict({"bootstrap.servers": "localhost:9092", "group.id": "g"})
    return FrontEndCore(config, cast("Driver", driver), time.monotonic)


def test_an_idle_member_waits_a_whole_slice() -> None:
    assert _core(_Driver()).wait_slice() == SERVICE_SLICE


def test_waits_are_short_while_an_answer_is_awaited_and_grow_to_a_cap() -> None:
    driver = _Driver(answers_pending=1)
    core = _core(driver)
    waits = [core.wait_slice() for _ in range(5)]
    assert waits == [
        ANSWER_SLICE,
        2 * ANSWER_SLICE,
        ANSWER_SLICE_MAX,
        ANSWER_SLICE_MAX,
        ANSWER_SLICE_MAX,
    ]
    driver.answers_pending = 0
    assert core.wait_slice() == SERVICE_SLICE
    driver.answers_pending = 1
    assert core.wait_slice() == ANSWER_SLICE  # the next answer starts short again


def test_a_wait_ends_when_the_member_sends_its_next_request() -> None:
    driver = _Driver(quiet_until=time.monotonic() + 0.03)
    wait = _core(driver).wait_slice()
    assert 0.02 < wait <= 0.032


def test_a_busy_loop_means_short_waits() -> None:
    # quiet_until is -inf from a session's event until the loop waits again.
    assert _core(_Driver(quiet_until=-math.inf)).wait_slice() == ANSWER_SLICE
