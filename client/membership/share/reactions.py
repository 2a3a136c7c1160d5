"""How the share member reacts to each ShareGroupHeartbeat error code.

The codes are :class:`kgroup.error_codes.ErrorCode`, shared with the other
members; this is the share protocol's one table of reactions to them. The rows
every group API shares (coordinator moved, transient, fatal) come from the
codes' traits; the rows below are this protocol's own.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from kgroup.error_codes import ErrorCode
from kgroup.membership.common.errors import reaction_in, shared_reactions

__all__ = ["REACTIONS", "ShareReaction", "share_reaction_for"]


class ShareReaction(enum.Enum):
    """What the share member does when a heartbeat response carries an error code."""

    REDISCOVER = "rediscover coordinator, retry without backoff"
    RETRY_WITH_BACKOFF = "retry with backoff, keep state, next heartbeat full"
    FENCED = "stop fetching, epoch 0, same member id, rejoin"
    REPORT_AND_RETRY = "report to the application (not fatal), retry with backoff"
    FATAL = "fatal: stop fetching, typed error from poll"


_C = ErrorCode
REACTIONS: Mapping[int, ShareReaction] = MappingProxyType(
    {
        **shared_reactions(
            rediscover=ShareReaction.REDISCOVER,
            retry=ShareReaction.RETRY_WITH_BACKOFF,
            fatal=ShareReaction.FATAL,
        ),
        _C.FENCED_MEMBER_EPOCH: ShareReaction.FENCED,
        _C.UNKNOWN_MEMBER_ID: ShareReaction.FENCED,
        _C.TOPIC_AUTHORIZATION_FAILED: ShareReaction.REPORT_AND_RETRY,
        # GROUP_ID_NOT_FOUND here means the id belongs to a group of another
        # type (consumer or classic): group ids share one namespace (KIP-1043).
        # It stays fatal, from the shared rows, with the broker's message.
    }
)


def share_reaction_for(code: int) -> ShareReaction:
    """The reaction to a non-zero heartbeat error code; unknown codes are fatal."""
    return reaction_in(REACTIONS, code, ShareReaction.FATAL)
