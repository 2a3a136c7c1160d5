"""kgroup.runtime: where the membership machines meet the network and the data plane.

- :mod:`~kgroup.runtime.driver`: the protocol-neutral :class:`Driver` (event
  loop, timers, application work queue, data plane, offsets, background
  tasks, the fatal error);
- :mod:`~kgroup.runtime.consumer_session` and
  :mod:`~kgroup.runtime.classic_session`: one session per protocol, which
  creates its member, performs that protocol's actions and turns the
  responses into the member's events;
- :mod:`~kgroup.runtime.coordinator`: the one call to the group coordinator,
  mapping transport failures to the members' failure kinds;
- :mod:`~kgroup.runtime.fetch_state`: the sans-IO record of what each
  partition may do on the data plane;
- :mod:`~kgroup.runtime.choice`: ``group.protocol`` and its ``auto``
  (including the fallback when the first heartbeat is refused);
- :mod:`~kgroup.runtime.interfaces`: the transport, data-plane and session
  seams as typing protocols;
- :mod:`~kgroup.runtime.work`: the work queued for the application's context.
"""

from kgroup.runtime.driver import Driver
from kgroup.runtime.interfaces import DataPlaneInterface, TransportInterface
from kgroup.runtime.work import (
    AppWork,
    CallbackWork,
    CommitCallback,
    CommitResultWork,
    ErrorWork,
    NotAssignedError,
    RevocationCommitWork,
)

__all__ = [
    "AppWork",
    "CallbackWork",
    "CommitCallback",
    "CommitResultWork",
    "DataPlaneInterface",
    "Driver",
    "ErrorWork",
    "NotAssignedError",
    "RevocationCommitWork",
    "TransportInterface",
]
