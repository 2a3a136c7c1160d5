"""The share consumer's telemetry: membership and acknowledgement events.

Off unless the config has ``telemetry.*`` keys (as for :class:`kgroup.Consumer`,
see ``docs/telemetry.md``). The events are the consumer's own kinds:
``member_joined`` (the first epoch), ``partitions_assigned`` /
``partitions_revoked`` (the assignment changed), ``member_left`` (closed), and
``commit`` for each answered acknowledgement request, whose ``offsets`` name
per partition the offset after the last one acknowledged. The header's
``protocol`` reads ``consumer``: the telemetry schema has no share value yet.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping

from kgroup.dataplane.share.acknowledgements import AcknowledgementOutcome
from kgroup.errors import ConfigError
from kgroup.share.config import ShareConsumerConfig
from kgroup.telemetry import events as ev
from kgroup.telemetry.emitter import TelemetryEmitter
from kgroup.types import TopicPartition

__all__ = ["ShareTelemetry"]


class ShareTelemetry:
    """Watches a share runtime and emits what changed (nothing when telemetry is off)."""

    def __init__(self, config: ShareConsumerConfig, member_id: str) -> None:
        settings = config.connection.telemetry
        self.emitter: TelemetryEmitter | None = None
        if settings is not None:
            try:
                sink = settings.open_sink()
            except OSError as exc:
                raise ConfigError(f"telemetry sink cannot be opened: {exc}") from exc
            self.emitter = TelemetryEmitter(
                sink,
                group=config.group_id,
                client_id=config.connection.client_id,
                protocol=ev.TelemetryProtocol.CONSUMER,
                member_id=member_id,
            )
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._epoch = 0
        self._joined = False
        self._left = False

    def observe(self, epoch: int, assignment: frozenset[TopicPartition]) -> None:
        """After a step of the runtime: emit the join and assignment changes."""
        emitter = self.emitter
        if emitter is None:
            return
        if epoch > 0 and not self._joined:
            self._joined = True
            emitter.emit(ev.MemberJoined(epoch=epoch))
        if epoch > 0:
            self._epoch = epoch
        added = assignment - self._assignment
        removed = self._assignment - assignment
        if added:
            emitter.emit(ev.PartitionsAssigned(partitions=tuple(sorted(added)), epoch=self._epoch))
        if removed:
            emitter.emit(ev.PartitionsRevoked(partitions=tuple(sorted(removed)), epoch=self._epoch))
        self._assignment = assignment

    def acknowledged(
        self,
        results: Iterable[AcknowledgementOutcome],
        names: Mapping[uuid.UUID, str],
        sent_at: float,
    ) -> None:
        """One acknowledgement request was answered (sent at ``sent_at``, monotonic)."""
        if self.emitter is None:
            return
        offsets: list[ev.CommittedOffset] = []
        errors: list[str] = []
        for result in results:
            name = names.get(result.partition.topic_id, str(result.partition.topic_id))
            if result.offsets:
                offsets.append(
                    ev.CommittedOffset(name, result.partition.partition, max(result.offsets) + 1)
                )
            error = result.error()
            if error is not None:
                errors.append(getattr(error, "name", type(error).__name__))
        if not offsets:
            return
        self.emitter.emit(
            ev.CommitCompleted(
                offsets=tuple(offsets),
                epoch=self._epoch,
                latency_s=max(0.0, time.monotonic() - sent_at),
                error=", ".join(sorted(set(errors))) or None,
            )
        )

    def left(self) -> None:
        """The member closed."""
        if self.emitter is None or self._left:
            return
        self._left = True
        if self._joined:
            self.emitter.emit(ev.MemberLeft(reason=ev.LeaveReason.CLOSED, epoch=self._epoch))

    def close(self, timeout: float = 5.0) -> None:
        """Flush and close the sink (blocks: not on the event loop)."""
        if self.emitter is not None:
            self.emitter.close(timeout)
