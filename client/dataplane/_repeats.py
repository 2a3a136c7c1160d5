"""Holding back librdkafka's repeated log lines.

While a broker is down, librdkafka logs a failed connection attempt about
twenty times a second per consumer, at ERROR (measured with confluent-kafka
2.16.1: 193 lines in 10 s for one plain consumer, 447 for two kgroup consumers;
its bootstrap connection is retried on every metadata wish, not only after
``reconnect.backoff.ms``). The Java client logs one WARNING per attempt, about
one a second. The filter here lets the first of a kind of line through and
then one per ``window`` seconds, which says how many like it were held back.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

__all__ = ["RepeatedLines"]

# What changes between two lines that say the same: how long the attempt took.
_VARYING: Final = re.compile(r" \(after \d+ms in state [A-Z_]+\)|\(after \d+ms\)")


class RepeatedLines(logging.Filter):
    """Lets a log line through, then at most one line like it every ``window`` seconds.

    Lines are alike when they have the same level and the same text but for
    the time an attempt took. The line let through after a held-back stretch
    ends with how many were held back. DEBUG lines always pass: whoever turned
    librdkafka's ``debug`` on asked for every one. At most ``kinds`` kinds of
    line are remembered (the oldest is forgotten first).
    """

    def __init__(
        self,
        window: float = 10.0,
        *,
        kinds: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.window = window
        self._kinds = kinds
        self._clock = clock
        self._lock = threading.Lock()
        # kind -> (when its last line was let through, lines held back since)
        self._seen: OrderedDict[tuple[int, str], tuple[float, int]] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG:
            return True
        text = record.getMessage()
        kind = (record.levelno, _VARYING.sub("", text))
        now = self._clock()
        with self._lock:
            last = self._seen.get(kind)
            if last is not None and now - last[0] < self.window:
                self._seen[kind] = (last[0], last[1] + 1)
                return False
            held = 0 if last is None else last[1]
            self._seen[kind] = (now, 0)
            self._seen.move_to_end(kind)
            while len(self._seen) > self._kinds:
                self._seen.popitem(last=False)
        if held:
            record.msg = f"{text} ({held} more like it in the last {self.window:g} s held back)"
            record.args = ()
        return True
