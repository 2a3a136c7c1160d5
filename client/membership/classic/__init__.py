"""The classic-protocol member: :class:`ClassicMember`, its events, actions and values.

``member`` (the machine), ``types`` (the embedded subscription and assignment),
``states`` (the transition table) and ``reactions`` (the table of error-code
reactions).
"""

from kgroup.membership.classic import actions, events, types
from kgroup.membership.classic.actions import *  # noqa: F403
from kgroup.membership.classic.events import *  # noqa: F403
from kgroup.membership.classic.member import NO_GENERATION, ClassicMember, ClassicMemberConfig
from kgroup.membership.classic.states import (
    CLASSIC_TRANSITIONS,
    ClassicState,
    ClassicTrigger,
    render_classic_mermaid,
)
from kgroup.membership.classic.types import *  # noqa: F403

__all__ = [
    "CLASSIC_TRANSITIONS",
    "NO_GENERATION",
    "ClassicMember",
    "ClassicMemberConfig",
    "ClassicState",
    "ClassicTrigger",
    "render_classic_mermaid",
]
__all__ += actions.__all__
__all__ += events.__all__
__all__ += types.__all__
