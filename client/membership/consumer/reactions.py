"""How the new-protocol member reacts to each ConsumerGroupHeartbeat error code.

The codes are :class:`kgroup.error_codes.ErrorCode`, shared with the classic
member; this is the new protocol's one table of reactions to them. The rows
every group API shares (coordinator moved, transient, fatal) come from the
codes' traits (:func:`~kgroup.membership.common.errors.shared_reactions`); the
rows below are this protocol's own.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from kgroup.error_codes import ErrorCode
from kgroup.membership.common.errors import reaction_in, shared_reactions

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
        **shared_reactions(
            rediscover=Reaction.REDISCOVER,
            retry=Reaction.RETRY_WITH_BACKOFF,
            fatal=Reaction.FATAL,
        ),
        # Both, when they refuse a join (epoch 0) of a member id the broker still
        # holds, are a refused rejoin instead: ConsumerMember._rejoin_refused (and
        # so is the fatal UNRELEASED_INSTANCE_ID).
        _C.FENCED_MEMBER_EPOCH: Reaction.FENCED,
        _C.UNKNOWN_MEMBER_ID: Reaction.FENCED,
        _C.TOPIC_AUTHORIZATION_FAILED: Reaction.REPORT_AND_RETRY,
        _C.UNSUPPORTED_VERSION: Reaction.FATAL_UNSUPPORTED_VERSION,
    }
)


def reaction_for(code: int) -> Reaction:
    """The reaction to a non-zero heartbeat error code; unknown codes are fatal."""
    return reaction_in(REACTIONS, code, Reaction.FATAL)
