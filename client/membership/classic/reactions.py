"""How the classic member reacts to JoinGroup / SyncGroup / Heartbeat error codes.

The codes are :class:`kgroup.error_codes.ErrorCode`, shared with the
new-protocol member; this is the classic protocol's one table of reactions to
them. The rows every group API shares (coordinator moved, transient, fatal)
come from the codes' traits
(:func:`~kgroup.membership.common.errors.shared_reactions`); the rows below are
this protocol's own. Which API an error came from still matters (see
:class:`~kgroup.membership.classic.ClassicMember`): REBALANCE_IN_PROGRESS is
a retry for JoinGroup, a rejoin for SyncGroup and a rejoin for a stable
member's Heartbeat.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from kgroup.error_codes import ErrorCode
from kgroup.membership.common.errors import reaction_in, shared_reactions

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
        **shared_reactions(
            rediscover=ClassicReaction.REDISCOVER,
            retry=ClassicReaction.RETRY_WITH_BACKOFF,
            fatal=ClassicReaction.FATAL,
        ),
        _C.REBALANCE_IN_PROGRESS: ClassicReaction.REBALANCING,
        _C.ILLEGAL_GENERATION: ClassicReaction.RESET_GENERATION,
        _C.UNKNOWN_MEMBER_ID: ClassicReaction.RESET_MEMBER,
        _C.MEMBER_ID_REQUIRED: ClassicReaction.MEMBER_ID_REQUIRED,
    }
)


def classic_reaction_for(code: int) -> ClassicReaction:
    """The reaction to a non-zero error code; codes not in the table are fatal."""
    return reaction_in(CLASSIC_REACTIONS, code, ClassicReaction.FATAL)
