"""The object a consumer's runtime emits telemetry through.

The runtime holds one :class:`TelemetryEmitter` per consumer (or ``None``
when telemetry is off) and calls :meth:`TelemetryEmitter.emit` with event
bodies; the emitter stamps the header (clocks, sequence number, identity) and
hands the event to the sink. Nothing here blocks or raises into the runtime.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import time
from collections.abc import Callable

from kgroup.telemetry.events import EventBody, EventHeader, TelemetryEvent, TelemetryProtocol
from kgroup.telemetry.sinks import SinkStats, TelemetrySink

__all__ = ["TelemetryEmitter"]

_log = logging.getLogger("kgroup.telemetry")


class TelemetryEmitter:
    """Stamps event bodies with a header and sends them to a sink.

    ``member_id`` and ``protocol`` are plain attributes: the runtime updates
    them when the member gets its id or falls back to the classic protocol,
    and later events carry the new values.
    """

    def __init__(
        self,
        sink: TelemetrySink,
        *,
        group: str,
        client_id: str,
        protocol: TelemetryProtocol,
        instance_id: str | None = None,
        member_id: str = "",
        host: str | None = None,
        pid: int | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sink = sink
        self.group = group
        self.client_id = client_id
        self.protocol = protocol
        self.instance_id = instance_id
        self.member_id = member_id
        self.host = host if host is not None else socket.gethostname()
        self.pid = pid if pid is not None else os.getpid()
        self._clock = clock
        self._monotonic = monotonic
        # itertools.count: next() is atomic under the GIL, so threads share it safely.
        self._seq = itertools.count()

    def stamp(self) -> tuple[float, float]:
        """The time now on both clocks (wall, monotonic), for an event sent later."""
        return self._clock(), self._monotonic()

    def emit(self, body: EventBody, *, at: tuple[float, float] | None = None) -> None:
        """Send ``body`` with a fresh header (dated ``at``, a :meth:`stamp`, if given).

        Never raises.
        """
        try:
            ts, mono = self.stamp() if at is None else at
            header = EventHeader(
                ts=ts,
                mono=mono,
                seq=next(self._seq),
                group=self.group,
                member_id=self.member_id,
                instance_id=self.instance_id,
                client_id=self.client_id,
                host=self.host,
                pid=self.pid,
                protocol=self.protocol,
            )
            self.sink.emit(TelemetryEvent(header, body))
        except Exception:  # an observer must never break the observed
            _log.warning("could not emit a telemetry event", exc_info=True)

    @property
    def stats(self) -> SinkStats:
        """The sink's counters."""
        return self.sink.stats

    def close(self, timeout: float = 5.0) -> None:
        """Close the sink, delivering what it can within ``timeout`` seconds."""
        try:
            self.sink.close(timeout)
        except Exception:
            _log.warning("closing the telemetry sink failed", exc_info=True)
