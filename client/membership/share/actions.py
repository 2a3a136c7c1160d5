"""Actions only the share member returns, and the union of all it returns."""

from __future__ import annotations

from dataclasses import dataclass

from kgroup.membership.common.actions import (
    CommonAction,
    SendRequest,
)
from kgroup.membership.consumer.actions import ReportError, RequestMetadata

__all__ = [
    "FlushAcknowledgements",
    "SendShareHeartbeat",
    "ShareHeartbeatRequest",
    "ShareMemberAction",
]


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    """The fields of a ShareGroupHeartbeat request.

    ``rack_id`` and ``subscribed_topic_names`` are None when unchanged since
    the last heartbeat that carried them (a full heartbeat carries both).
    ``member_epoch`` is 0 to join, -1 to leave; ``member_id`` is the client's
    own, the same for the life of the consumer.
    """

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class SendShareHeartbeat(SendRequest[ShareHeartbeatRequest]):
    """Send ``request``; answer with ShareHeartbeatResponseReceived or RequestFailed
    carrying ``seq``. ``leave``: the leave heartbeat (sent once, not retried)."""

    leave: bool = False


@dataclass(frozen=True, slots=True)
class FlushAcknowledgements:
    """Before the leave: send every pending acknowledgement (ShareAcknowledge, or on the
    session's closing fetch), then answer AcknowledgementsFlushed with ``token``."""

    token: int


ShareMemberAction = (
    CommonAction | SendShareHeartbeat | FlushAcknowledgements | RequestMetadata | ReportError
)
"""Every action :meth:`~kgroup.membership.share.ShareMember.handle` returns."""
