"""How the new-protocol member reacts to each ConsumerGroupHeartbeat error code.

The codes are :class:`~kgroup.membership.common.errors.ErrorCode`, shared with
the classic member; this is the new protocol's one table of reactions to them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from kgroup.membership.common.errors import ErrorCode, coordinator_reactions, reaction_in

__all__ = ["REACTIONS", "Reaction", "reaction_for"]


class Reaction(enum.Enum):
    """What the member does when a heartbeat response carries an error code."""

    REDISCOVER = "rediscover coordinator, retry without backoff"
    RETRY_WITH_BACKOFF = "retry with backoff, keep state, next heartbeat full"
    FENCED = "lost callback, epoch 0, same member id, rejoin"
    REPORT_AND_RETRY = "report to the application (not fatal), retry with backoff"
    FATAL = "fatal: lost callback unless leaving, typed error from poll"
    FATAL_UNSUPPORTED_VERSION = "fatal; the marker for the classic fallback of group.protocol=auto"


_C = ErrorCode
REACTIONS: Mapping[int, Reaction] = MappingProxyType(
    {
        **coordinator_reactions(rediscover=Reaction.REDISCOVER, retry=Reaction.RETRY_WITH_BACKOFF),
        # Both, when they refuse a join (epoch 0) of a member id the broker still
        # holds, are a refused rejoin instead: ConsumerMember._rejoin_refused.
        _C.FENCED_MEMBER_EPOCH: Reaction.FENCED,
        _C.UNKNOWN_MEMBER_ID: Reaction.FENCED,
        _C.TOPIC_AUTHORIZATION_FAILED: Reaction.REPORT_AND_RETRY,
        _C.GROUP_AUTHORIZATION_FAILED: Reaction.FATAL,
        _C.INVALID_REQUEST: Reaction.FATAL,
        _C.GROUP_MAX_SIZE_REACHED: Reaction.FATAL,
        _C.UNSUPPORTED_ASSIGNOR: Reaction.FATAL,
        _C.INVALID_REGULAR_EXPRESSION: Reaction.FATAL,
        _C.UNRELEASED_INSTANCE_ID: Reaction.FATAL,  # see FENCED_MEMBER_EPOCH
        _C.FENCED_INSTANCE_ID: Reaction.FATAL,
        _C.GROUP_ID_NOT_FOUND: Reaction.FATAL,
        _C.UNSUPPORTED_VERSION: Reaction.FATAL_UNSUPPORTED_VERSION,
    }
)


def reaction_for(code: int) -> Reaction:
    """The reaction to a non-zero heartbeat error code; unknown codes are fatal."""
    return reaction_in(REACTIONS, code, Reaction.FATAL)
