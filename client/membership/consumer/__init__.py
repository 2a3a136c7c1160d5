"""The new-protocol (KIP-848) member: :class:`ConsumerMember`, its events and actions.

``member`` (the machine), ``heartbeat`` (which fields a heartbeat carries),
``reconcile`` (assignment arithmetic), ``states`` (the transition table) and
``reactions`` (the table of error-code reactions).
"""

from kgroup.membership.consumer import actions, client_assignment, events
from kgroup.membership.consumer.actions import *  # noqa: F403
from kgroup.membership.consumer.client_assignment import *  # noqa: F403
from kgroup.membership.consumer.events import *  # noqa: F403
from kgroup.membership.consumer.member import ConsumerMember, MemberConfig
from kgroup.membership.consumer.states import TRANSITIONS, MemberState, Trigger, render_mermaid

__all__ = [
    "TRANSITIONS",
    "ConsumerMember",
    "MemberConfig",
    "MemberState",
    "Trigger",
    "render_mermaid",
]
__all__ += actions.__all__
__all__ += client_assignment.__all__
__all__ += events.__all__
