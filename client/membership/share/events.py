"""Events only the share member takes, and the union of all it takes.

:class:`~kgroup.membership.share.ShareMember` also takes the shared events of
:mod:`kgroup.membership.common.events` and the new protocol's
:class:`~kgroup.membership.consumer.MetadataUpdated` (topic ids to names).
Heartbeat outcomes echo the ``seq`` of the
:class:`~kgroup.membership.share.SendShareHeartbeat` they answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from kgroup.membership.common.events import CommonEvent, ResponseReceived
from kgroup.membership.consumer.events import MetadataUpdated

__all__ = [
    "AcknowledgementsFlushed",
    "ShareHeartbeatResponse",
    "ShareHeartbeatResponseReceived",
    "ShareMemberEvent",
]


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResponse:
    """The fields of a ShareGroupHeartbeat response the member needs.

    ``assignment`` is None when the response carries none (no change);
    otherwise it is the member's whole assignment, topic id -> partitions.
    """

    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 5000
    assignment: Mapping[uuid.UUID, Collection[int]] | None = None


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResponseReceived(ResponseReceived[ShareHeartbeatResponse]):
    """A response arrived for the heartbeat sent with ``seq``."""


@dataclass(frozen=True, slots=True)
class AcknowledgementsFlushed:
    """The runtime sent what a FlushAcknowledgements with ``token`` asked for (or gave up)."""

    token: int


ShareMemberEvent = (
    CommonEvent | ShareHeartbeatResponseReceived | AcknowledgementsFlushed | MetadataUpdated
)
"""Every event :meth:`~kgroup.membership.share.ShareMember.handle` takes."""
