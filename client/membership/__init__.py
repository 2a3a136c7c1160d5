"""kgroup.membership: sans-IO group membership state machines.

Standard library and :mod:`kgroup.types` only: no I/O, no clock reads (a unit
test enforces it). Four subpackages, one home each:

- :mod:`~kgroup.membership.common`: the events and actions both members use,
  the error codes, the transition-table machinery and the lifecycle skeleton
  (poll timer, close deadline, leave and stale bookkeeping, retry delay) both
  members compose;
- :mod:`~kgroup.membership.consumer`: the new-protocol (KIP-848) member,
  :class:`ConsumerMember`: feed it :data:`ConsumerMemberEvent` with the time,
  perform the :data:`ConsumerMemberAction` it returns;
- :mod:`~kgroup.membership.classic`: the classic-protocol member,
  :class:`ClassicMember`, with :data:`ClassicMemberEvent` and
  :data:`ClassicMemberAction`;
- :mod:`~kgroup.membership.share`: the share-group (KIP-932) member,
  :class:`~kgroup.membership.share.ShareMember`, with its events and actions
  (imported from there, not from here).

Every name of the first three is importable from here.
"""

# The leaf modules are star-imported too: mypy follows one level of star
# import inside the package, not a subpackage's own star imports.
from kgroup.membership import classic, common, consumer
from kgroup.membership.classic import *  # noqa: F403
from kgroup.membership.classic.actions import *  # noqa: F403
from kgroup.membership.classic.events import *  # noqa: F403
from kgroup.membership.classic.types import *  # noqa: F403
from kgroup.membership.classic.types import ClassicAssignment
from kgroup.membership.common import *  # noqa: F403
from kgroup.membership.common.actions import *  # noqa: F403
from kgroup.membership.common.events import *  # noqa: F403
from kgroup.membership.consumer import *  # noqa: F403
from kgroup.membership.consumer.actions import *  # noqa: F403
from kgroup.membership.consumer.events import *  # noqa: F403
from kgroup.types import RebalanceProtocol

MemberAssignment = ClassicAssignment
"""The earlier name of :class:`ClassicAssignment` (not the new protocol's
:class:`kgroup.assignors.modern.MemberAssignment`), kept while callers move."""

__all__ = ["MemberAssignment", "RebalanceProtocol"]
__all__ += common.__all__
__all__ += consumer.__all__
__all__ += classic.__all__
