"""The lifecycle both members share: poll timer, leave and close bookkeeping, config checks.

:class:`Lifecycle` is composed into both members (Java's
AbstractMembershipManager keeps the same pieces for both protocols); what each
protocol does at those moments stays in its member.
"""

from __future__ import annotations

import enum
from typing import Protocol

from kgroup.membership.common.actions import Closed

__all__ = [
    "LeaveReason",
    "Lifecycle",
    "MemberSettings",
    "Step",
    "Waiting",
    "check_backoff",
    "check_optional_ids",
    "session_seconds",
]


class MemberSettings(Protocol):
    """The configuration every member has (both members' config classes have it)."""

    @property
    def group_id(self) -> str: ...
    @property
    def max_poll_interval_ms(self) -> int: ...
    @property
    def retry_backoff_ms(self) -> int: ...
    @property
    def retry_backoff_max_ms(self) -> int: ...


class LeaveReason(enum.Enum):
    """Why a member is releasing its assignment and leaving."""

    UNSUBSCRIBE = "unsubscribe"
    CLOSE = "close"
    REPAIR = "leave for good and rejoin: the group is stuck (RejoinRequested)"


class Step(enum.Enum):
    """The outside operation a member's rebalance step waits for."""

    COMMIT = "commit"
    REVOKE = "revoke callback"
    LOST = "lost callback"
    ASSIGN = "assign callback"


class Waiting(Protocol):
    """A step in progress: what it waits for, the token that answers it, and until when."""

    step: Step
    token: int
    deadline: float | None


def session_seconds(session_timeout_ms: int, margin_ms: int) -> float:
    """How long (seconds) after its last successful heartbeat a member gives its
    session up: the session timeout less the margin, which counts up to half of it.

    The margin (a member config's ``session_margin_ms``) is the time the member's
    runtime may need to stop fetching (a data plane waiting for records finishes
    that wait first): the member must have stopped before the broker, which
    counts from when it last heard the member, can hand the partitions on.
    """
    return (session_timeout_ms - min(margin_ms, session_timeout_ms // 2)) / 1000.0


class Lifecycle:
    """Poll timer (max.poll.interval.ms), stale rejoin, leave reason, close deadline and end."""

    def __init__(self, max_poll_interval_ms: int) -> None:
        self._max_poll_interval = max_poll_interval_ms / 1000.0
        self.last_poll: float | None = None
        """When the application last called poll; None before the member first subscribed."""
        self.stale_polled = False
        """A STALE member saw a poll after its poll timer expired (it may rejoin)."""
        self.leave_reason: LeaveReason | None = None
        """Why the leave under way was started, or None."""
        self.rejoin_after_leave = False
        """The application subscribed again while the member was leaving."""
        self.closing = False
        self.close_deadline: float | None = None
        self.closed = False
        """A close finished: the member ignores every event from now on."""

    def rebalance_deadline(self, since: float) -> float:
        """``since`` plus max.poll.interval.ms: the rebalance timeout that bounds a commit."""
        return since + self._max_poll_interval

    def poll_deadline(self) -> float | None:
        """When the poll timer expires, or None before the first poll."""
        last = self.last_poll
        return None if last is None else last + self._max_poll_interval

    def poll_expired(self, now: float) -> bool:
        """Whether poll was not called within max.poll.interval.ms before ``now``."""
        deadline = self.poll_deadline()
        return deadline is not None and now >= deadline

    def begin_close(self, deadline: float) -> bool:
        """Start closing (True), or False when a close is already under way."""
        if self.closing:
            return False
        self.closing = True
        self.close_deadline = deadline
        self.rejoin_after_leave = False
        return True

    def close_deadline_passed(self, now: float) -> bool:
        """Whether a close is under way and its deadline is reached."""
        return self.closing and self.close_deadline is not None and now >= self.close_deadline

    def finish_close(self, timed_out: bool) -> Closed:
        """Record that the close finished; returns the action that reports it."""
        self.closed = True
        return Closed(timed_out)

    def take_leave_reason(self) -> LeaveReason | None:
        """The reason of the leave that just ended (cleared)."""
        reason, self.leave_reason = self.leave_reason, None
        return reason


def check_optional_ids(config: object, names: tuple[str, ...]) -> None:
    """Raise ValueError for an optional id of ``config`` set to "" (None means unset)."""
    for name in names:
        if getattr(config, name) == "":
            raise ValueError(f"{name} must be None or a non-empty string")


def check_backoff(retry_backoff_ms: int, retry_backoff_max_ms: int) -> None:
    """Raise ValueError unless ``0 < retry_backoff_ms <= retry_backoff_max_ms``."""
    if not 0 < retry_backoff_ms <= retry_backoff_max_ms:
        raise ValueError("need 0 < retry_backoff_ms <= retry_backoff_max_ms")
