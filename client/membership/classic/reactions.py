"""How the classic member reacts to JoinGroup / SyncGroup / Heartbeat error codes.

The codes are :class:`~kgroup.membership.common.errors.ErrorCode`, shared with
the new-protocol member; this is the classic protocol's one table of reactions
to them. Which API an error came from still matters (see
:class:`~kgroup.membership.classic.ClassicMember`): REBALANCE_IN_PROGRESS is
a retry for JoinGroup, a rejoin for SyncGroup and a rejoin for a stable
member's Heartbeat.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from kgroup.membership.common.errors import ErrorCode, coordinator_reactions, reaction_in

__all__ = ["CLASSIC_REACTIONS", "ClassicReaction", "classic_reaction_for"]


class ClassicReaction(enum.Enum):
    """What the classic member does about an error code."""

    REDISCOVER = "rediscover the coordinator, then retry"
    RETRY_WITH_BACKOFF = "retry with backoff"
    REBALANCING = "the group is rebalancing: rejoin (JoinGroup: retry at once)"
    RESET_GENERATION = "lost callback, generation reset (member id kept), rejoin"
    RESET_MEMBER = "lost callback, generation and member id reset, rejoin"
    MEMBER_ID_REQUIRED = "join again at once with the member id of the response"
    FATAL = "fatal: lost callback, typed error from poll"


_C = ErrorCode
CLASSIC_REACTIONS: Mapping[int, ClassicReaction] = MappingProxyType(
    {
        **coordinator_reactions(
            rediscover=ClassicReaction.REDISCOVER, retry=ClassicReaction.RETRY_WITH_BACKOFF
        ),
        _C.REBALANCE_IN_PROGRESS: ClassicReaction.REBALANCING,
        _C.ILLEGAL_GENERATION: ClassicReaction.RESET_GENERATION,
        _C.UNKNOWN_MEMBER_ID: ClassicReaction.RESET_MEMBER,
        _C.MEMBER_ID_REQUIRED: ClassicReaction.MEMBER_ID_REQUIRED,
        _C.FENCED_INSTANCE_ID: ClassicReaction.FATAL,
        _C.INCONSISTENT_GROUP_PROTOCOL: ClassicReaction.FATAL,
        _C.GROUP_MAX_SIZE_REACHED: ClassicReaction.FATAL,
        _C.GROUP_AUTHORIZATION_FAILED: ClassicReaction.FATAL,
        _C.INVALID_SESSION_TIMEOUT: ClassicReaction.FATAL,
        _C.INVALID_GROUP_ID: ClassicReaction.FATAL,
        _C.UNSUPPORTED_VERSION: ClassicReaction.FATAL,
    }
)


def classic_reaction_for(code: int) -> ClassicReaction:
    """The reaction to a non-zero error code; codes not in the table are fatal."""
    return reaction_in(CLASSIC_REACTIONS, code, ClassicReaction.FATAL)
