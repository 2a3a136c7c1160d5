"""The share-group (KIP-932) member: :class:`ShareMember`, its events and actions.

``member`` (the machine), ``states`` (the transition table) and ``reactions``
(the table of error-code reactions).
"""

from kgroup.membership.share import actions, events
from kgroup.membership.share.actions import *  # noqa: F403
from kgroup.membership.share.events import *  # noqa: F403
from kgroup.membership.share.member import (
    LEAVE_EPOCH,
    ShareMember,
    ShareMemberConfig,
    new_member_id,
)
from kgroup.membership.share.reactions import REACTIONS, ShareReaction, share_reaction_for
from kgroup.membership.share.states import MACHINE, ShareMemberState, ShareTrigger

__all__ = [
    "LEAVE_EPOCH",
    "MACHINE",
    "REACTIONS",
    "ShareMember",
    "ShareMemberConfig",
    "ShareMemberState",
    "ShareReaction",
    "ShareTrigger",
    "new_member_id",
    "share_reaction_for",
]
__all__ += actions.__all__
__all__ += events.__all__
