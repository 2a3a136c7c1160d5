"""librdkafka's repeated log lines are held back (kgroup.dataplane._repeats).

Measured before: while a broker was down, two kgroup consumers forwarded 447
ERROR lines in about 10 s ("Connect to ... failed: Connection refused (after 0ms
in state CONNECT)"), librdkafka's retry of its bootstrap connection.
"""

from __future__ import annotations

import logging

import pytest

from kgroup.dataplane._repeats import RepeatedLines
from kgroup.dataplane.librdkafka import LIBRDKAFKA_LOGGER

REFUSED = (
    "FAIL [kgroup#consumer-3] [thrd:127.0.0.1:52263/bootstrap]: 127.0.0.1:52263/bootstrap: "
    "Connect to ipv4#127.0.0.1:52263 failed: Connection refused (after {ms}ms in state CONNECT)"
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _record(message: str, level: int = logging.ERROR, *args: object) -> logging.LogRecord:
    return logging.LogRecord("kgroup.dataplane.librdkafka", level, __file__, 1, message, args, None)


def test_a_line_repeated_within_the_window_is_held_back_and_counted_in_the_next_one() -> None:
    clock = Clock()
    repeats = RepeatedLines(10.0, clock=clock)
    assert repeats.filter(_record(REFUSED.format(ms=0)))
    held = 0
    for step in range(1, 200):
        clock.now = 100.0 + step * 0.05  # librdkafka's pace: every 50 ms
        if clock.now >= 110.0:
            break
        assert not repeats.filter(_record(REFUSED.format(ms=step % 3)))
        held += 1
    clock.now = 110.0
    passed = _record(REFUSED.format(ms=2))
    assert repeats.filter(passed)
    assert passed.getMessage() == (
        REFUSED.format(ms=2) + f" ({held} more like it in the last 10 s held back)"
    )
    # The count starts again after each line let through.
    clock.now = 110.5
    assert not repeats.filter(_record(REFUSED.format(ms=0)))
    clock.now = 120.0
    again = _record(REFUSED.format(ms=0))
    assert repeats.filter(again)
    assert again.getMessage().endswith("(1 more like it in the last 10 s held back)")


def test_a_line_not_repeated_passes_unchanged() -> None:
    clock = Clock()
    repeats = RepeatedLines(10.0, clock=clock)
    first = _record("%s [%s] %s", logging.WARNING, "FAIL", "kgroup#consumer-1", "down")
    assert repeats.filter(first)
    clock.now = 130.0
    later = _record("%s [%s] %s", logging.WARNING, "FAIL", "kgroup#consumer-1", "down")
    assert repeats.filter(later)
    assert later.getMessage() == "FAIL [kgroup#consumer-1] down"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (_record("broker 1 down"), _record("broker 2 down")),
        (_record("down", logging.ERROR), _record("down", logging.WARNING)),
        (_record(REFUSED.format(ms=0)), _record(REFUSED.format(ms=0).replace("-3]", "-4]"))),
    ],
    ids=["other text", "other level", "other consumer"],
)
def test_lines_that_differ_are_not_alike(
    first: logging.LogRecord, second: logging.LogRecord
) -> None:
    repeats = RepeatedLines(10.0, clock=Clock())
    assert repeats.filter(first)
    assert repeats.filter(second)


def test_debug_lines_always_pass() -> None:
    repeats = RepeatedLines(10.0, clock=Clock())
    assert all(repeats.filter(_record("fetch", logging.DEBUG)) for _ in range(5))


def test_only_the_newest_kinds_are_remembered() -> None:
    repeats = RepeatedLines(10.0, kinds=2, clock=Clock())
    for text in ("a", "b", "c"):
        assert repeats.filter(_record(text))
    # "a" was forgotten (the oldest), "c" is remembered.
    assert repeats.filter(_record("a"))
    assert not repeats.filter(_record("c"))


def test_the_librdkafka_logger_holds_repeats_back(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LIBRDKAFKA_LOGGER.name)
    # A message of this test's own: the logger's filter remembers kinds across tests.
    for _ in range(50):
        LIBRDKAFKA_LOGGER.error("%s [%s] %s", "FAIL", "test#consumer-1", "held back?")
    assert [r.getMessage() for r in caplog.records] == ["FAIL [test#consumer-1] held back?"]
