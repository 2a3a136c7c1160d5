"""What both members share: events, actions, error codes, transitions, lifecycle.

:mod:`~kgroup.membership.common.member` holds the skeleton both members
compose their protocol into; the names below are the shared vocabulary.
"""

# The codes live in kgroup.error_codes (a leaf); named here too, where the
# members' vocabulary is (docs/new-protocol.md points users here).
from kgroup.error_codes import ERROR_CODES, ErrorCode, error_name
from kgroup.membership.common import actions, events
from kgroup.membership.common.actions import *  # noqa: F403
from kgroup.membership.common.events import *  # noqa: F403
from kgroup.membership.common.transitions import IllegalTransitionError

__all__ = ["ERROR_CODES", "ErrorCode", "IllegalTransitionError", "error_name"]
__all__ += actions.__all__
__all__ += events.__all__
