"""What both members share: events, actions, error codes, transitions, lifecycle.

:mod:`~kgroup.membership.common.member` holds the skeleton both members
compose their protocol into; the names below are the shared vocabulary.
"""

from kgroup.membership.common import actions, events
from kgroup.membership.common.actions import *  # noqa: F403
from kgroup.membership.common.errors import ERROR_CODES, ErrorCode, error_name
from kgroup.membership.common.events import *  # noqa: F403
from kgroup.membership.common.transitions import IllegalTransitionError

__all__ = ["ERROR_CODES", "ErrorCode", "IllegalTransitionError", "error_name"]
__all__ += actions.__all__
__all__ += events.__all__
