"""kgroup.membership: sans-IO group membership state machines.

Standard library and :mod:`kgroup.types` only: no I/O, no clock reads. The
new-protocol (KIP-848) member is :class:`ConsumerMember`; feed it
:mod:`~kgroup.membership.events` with the time, perform the
:mod:`~kgroup.membership.actions` it returns.
"""

from kgroup.membership.actions import (
    Action,
    AssignorOnAssignment,
    Closed,
    CommitOffsets,
    HeartbeatRequest,
    LeaveComplete,
    RaiseCallbackError,
    RediscoverCoordinator,
    ReportError,
    ReportFatalError,
    RequestMetadata,
    RunCallback,
    SendHeartbeat,
    StartFetching,
    StopFetching,
)
from kgroup.membership.consumer import ConsumerMember, MemberConfig
from kgroup.membership.events import (
    CallbackCompleted,
    CallbackKind,
    CloseRequested,
    CommitCompleted,
    CoordinatorRediscovered,
    Event,
    FailureKind,
    HeartbeatFailed,
    HeartbeatResponse,
    HeartbeatResponseReceived,
    MetadataUpdated,
    PollCalled,
    SubscriptionChanged,
    TimerTick,
    Unsubscribe,
)
from kgroup.membership.states import (
    TRANSITIONS,
    IllegalTransitionError,
    MemberState,
    Trigger,
    render_mermaid,
)

__all__ = [
    "TRANSITIONS",
    "Action",
    "AssignorOnAssignment",
    "CallbackCompleted",
    "CallbackKind",
    "CloseRequested",
    "Closed",
    "CommitCompleted",
    "CommitOffsets",
    "ConsumerMember",
    "CoordinatorRediscovered",
    "Event",
    "FailureKind",
    "HeartbeatFailed",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "HeartbeatResponseReceived",
    "IllegalTransitionError",
    "LeaveComplete",
    "MemberConfig",
    "MemberState",
    "MetadataUpdated",
    "PollCalled",
    "RaiseCallbackError",
    "RediscoverCoordinator",
    "ReportError",
    "ReportFatalError",
    "RequestMetadata",
    "RunCallback",
    "SendHeartbeat",
    "StartFetching",
    "StopFetching",
    "SubscriptionChanged",
    "TimerTick",
    "Trigger",
    "Unsubscribe",
    "render_mermaid",
]
