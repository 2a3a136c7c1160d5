"""The invariants the simulator checks after every step, and the fetch ledger behind two of them."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kgroup.types import TopicPartition

__all__ = ["Clash", "EpochLedger", "Invariant", "Span", "Violation"]


class Invariant(enum.Enum):
    """A property every run must keep; the value says it in one sentence."""

    DOUBLE_FETCH = (
        "no partition is fetched by two members in overlapping epochs (from the members' own "
        "StartFetching / StopFetching), nor by a member whose session the coordinator "
        "expired while another starts it"
    )
    FETCH_NOT_OWNED = (
        "a member the coordinator still counts in the group fetches only partitions the "
        "coordinator says it owns"
    )
    COMMIT_NOT_OWNED = "no commit is accepted for a partition the member does not own"
    EPOCH_BACKWARDS = "a member's epoch never goes backwards (per member incarnation)"
    CONVERGENCE = (
        "once faults stop, every subscribed partition is assigned to exactly one member and "
        "fetched by it, within the stated bound of virtual time"
    )
    LIVENESS = (
        "after the last membership change and the end of faults, within the stated bound of "
        "virtual time, every subscribed partition is owned (fetched) by exactly one live "
        "member, on either protocol and in converted groups"
    )
    HEARTBEAT_IN_FLIGHT = "a member has at most one heartbeat in flight (the leave excepted)"
    INVALID_REQUEST = "a member never sends a heartbeat the coordinator rejects as malformed"
    FETCH_AFTER_CLOSE = "a member that reported Closed fetches nothing"
    BUSY_LOOP = "a member never asks to be woken again and again at the same instant"
    FENCE_LOOP = (
        "a member is not fenced again and again: at most 8 heartbeats answered "
        "FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID within one session timeout (a broker before "
        "KAFKA-19233 refuses a rejoin at epoch 0 until the held member times out)"
    )
    UNEXPECTED_FATAL = "a member never fails with a fatal error the injected faults do not explain"
    ILLEGAL_ASSIGNMENT = (
        "the server assignor gives every subscribed partition to exactly one member subscribed "
        "to its topic"
    )
    MEMBER_RAISED = "the member machine never raises from handle()"
    SIMULATOR_CONSISTENT = (
        "the simulator's own bookkeeping stays consistent (a failure here is a simulator bug)"
    )
    CALLBACK_WHILE_FETCHING = (
        "a revoke or lost callback names no partition the member still fetches (design.md: "
        "revoked partitions stop fetching before the revoke callback)"
    )
    START_BEFORE_ASSIGNED = (
        "a partition starts fetching only after the assigned callback naming it completed "
        "(the application may seek or pause in it first)"
    )
    SESSION_LOST_FETCH = (
        "a member that has had no successful heartbeat for a session timeout fetches nothing, "
        "and nothing once the coordinator expired its session "
        "(design.md's reliability rule; SimulationConfig.check_session_loss=False turns it off)"
    )


@dataclass(frozen=True, slots=True)
class Violation:
    """An invariant broken at virtual time ``time``; ``member`` names the member involved."""

    invariant: Invariant
    time: float
    message: str
    member: str | None = None

    def __str__(self) -> str:
        who = f" [{self.member}]" if self.member else ""
        return f"{self.invariant.name} at {self.time:.3f}s{who}: {self.message}"


class Span:
    """Epochs over which one owner fetched one partition: [lo, hi]; ``open`` while fetching."""

    __slots__ = ("hi", "lo", "open", "owner")

    def __init__(self, owner: str, epoch: int) -> None:
        self.owner = owner
        self.lo = epoch
        self.hi = epoch
        self.open = True


Clash = tuple[str, int, int]


class EpochLedger:
    """Per partition, the epoch spans over which each owner fetched it (DOUBLE_FETCH).

    An owner is a member incarnation, or a static member's instance id (a new
    process of the same instance inherits its partitions at the same epoch,
    which is no overlap). A span starts at the member's epoch when it starts
    fetching and grows with the epochs the member learns while it fetches.
    Spans of different owners must not share an epoch. A member cut off from
    the coordinator keeps fetching at its old epoch (it cannot know better) and
    its span does not grow, so a zombie the coordinator has fenced does not
    count here, as Kafka itself tolerates it (its commits are refused); see
    :attr:`Invariant.SESSION_LOST_FETCH` for the stricter rule.
    """

    __slots__ = ("_spans",)

    def __init__(self) -> None:
        self._spans: dict[TopicPartition, list[Span]] = {}

    def start(self, owner: str, tp: TopicPartition, epoch: int) -> tuple[Span, Clash | None]:
        """``owner`` starts fetching ``tp`` at ``epoch``: its new span and a clash, if any."""
        span = Span(owner, epoch)
        spans = self._spans.get(tp)
        if spans is None:
            self._spans[tp] = [span]
            return span, None
        clash = None
        for other in spans:
            if other.owner != owner and other.lo <= epoch <= other.hi:
                clash = (other.owner, other.lo, other.hi)
                break
        spans.append(span)
        return span, clash

    def advance(self, span: Span, tp: TopicPartition, epoch: int) -> Clash | None:
        """The owner of ``span``, still fetching ``tp``, learned ``epoch``: a clash, if any."""
        if epoch <= span.hi:
            return None
        clash = None
        for other in self._spans.get(tp, ()):
            if other.owner != span.owner and span.hi < other.lo <= epoch:
                clash = (other.owner, other.lo, other.hi)
                break
        span.hi = epoch
        return clash

    @staticmethod
    def stop(span: Span) -> None:
        """The owner of ``span`` stopped fetching."""
        span.open = False
