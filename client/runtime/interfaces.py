"""The seams of the runtime, as typing protocols.

- :class:`TransportInterface`: the part of :class:`~kgroup.transport.KafkaClient`
  the runtime uses (metadata, coordinator lookup, coordinator requests). The
  driver opens one per run through a :data:`TransportFactory`.
- :class:`DataPlaneInterface`: the part of :class:`kgroup.dataplane.DataPlane`
  the runtime and the consumer front ends use. Tests inject an in-memory one
  (``kgroup.testing.fake``) through the consumers' ``dataplane=`` argument.
- :class:`Host` and :class:`Session`: the seam between the protocol-neutral
  driver and the one session per protocol that drives a member.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.dataplane.librdkafka import Record
from kgroup.membership import (
    CallbackCompleted,
    Closed,
    CloseRequested,
    CommitCompleted,
    CommitOffsets,
    CoordinatorRediscovered,
    LeaveComplete,
    PollCalled,
    RaiseCallbackError,
    RediscoverCoordinator,
    ReportError,
    ReportFatalError,
    RunCallback,
    StartFetching,
    StopFetching,
    SubscriptionChanged,
    TimerTick,
    Unsubscribe,
)
from kgroup.offsets import CoordinatorClient
from kgroup.protocol import NegotiatedVersions
from kgroup.transport import BrokerAddress
from kgroup.types import Backoff, TopicPartition

__all__ = [
    "DRIVER_ACTIONS",
    "CoordinatorConnection",
    "DataPlaneInterface",
    "DriverAction",
    "DriverEvent",
    "Host",
    "Session",
    "SubscriptionChange",
    "TransportFactory",
    "TransportInterface",
]


class CoordinatorConnection(Protocol):
    """A connection to one broker (:class:`~kgroup.transport.BrokerConnection`)."""

    @property
    def versions(self) -> NegotiatedVersions: ...

    async def request(
        self, request: RequestPayload, *, timeout: float | None = None
    ) -> ResponsePayload: ...


class TransportInterface(CoordinatorClient, Protocol):
    """What the runtime asks of the cluster client (:class:`~kgroup.transport.KafkaClient`).

    The offset manager's part (:class:`~kgroup.offsets.CoordinatorClient`:
    metadata, coordinator requests) plus the coordinator lookup and a
    connection to it.
    """

    async def coordinator(
        self, group_id: str, *, refresh: bool = False, timeout: float | None = None
    ) -> BrokerAddress: ...

    async def connection(self, node_id: int) -> CoordinatorConnection: ...


TransportFactory = Callable[[ConsumerConfig], AbstractAsyncContextManager[TransportInterface]]
"""Opens the cluster client for one run of the driver (bootstraps on entry)."""


class DataPlaneInterface(Protocol):
    """The record fetcher in assign mode (:class:`kgroup.dataplane.DataPlane`).

    The runtime decides what it fetches; it never joins a group itself.
    """

    @property
    def assigned(self) -> frozenset[TopicPartition]:
        """Partitions currently fetching (or paused)."""
        ...

    def assign(self, offsets: Mapping[TopicPartition, int | None]) -> None:
        """Start fetching at these offsets (None: where ``auto.offset.reset`` says)."""

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching ``partitions`` and drop their buffered records."""

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop handing out records of ``partitions`` until resumed."""

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Resume partitions paused with :meth:`pause`."""

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Make the next record of ``partition`` the one at ``offset``."""

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Offset of the next record to hand out, per fetching partition that has one."""
        ...

    def consume(self, max_records: int, timeout: float) -> list[Record]:
        """Up to ``max_records`` records, waiting at most ``timeout`` seconds for the first."""
        ...

    def close(self) -> None:
        """Release resources. Idempotent."""


SubscriptionChange = SubscriptionChanged | Unsubscribe
"""What the application's ``subscribe()`` / ``unsubscribe()`` become."""

DriverEvent = (
    SubscriptionChanged
    | Unsubscribe
    | PollCalled
    | CallbackCompleted
    | CommitCompleted
    | CloseRequested
    | TimerTick
    | CoordinatorRediscovered
)
"""Events the driver feeds to whichever member runs (both members take them)."""

DriverAction = (
    StopFetching
    | StartFetching
    | CommitOffsets
    | RunCallback
    | RaiseCallbackError
    | RediscoverCoordinator
    | ReportError
    | ReportFatalError
    | LeaveComplete
    | Closed
)
"""Actions of either member that the driver performs; the rest are the session's."""

DRIVER_ACTIONS = (
    StopFetching,
    StartFetching,
    CommitOffsets,
    RunCallback,
    RaiseCallbackError,
    RediscoverCoordinator,
    ReportError,
    ReportFatalError,
    LeaveComplete,
    Closed,
)
"""The classes of :data:`DriverAction`, for ``isinstance``."""


class Host(Protocol):
    """What a session may use of the driver that runs it."""

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def client(self) -> TransportInterface:
        """The connected cluster client (only while the driver runs)."""
        ...

    @property
    def request_timeout(self) -> float: ...

    @property
    def backoff(self) -> Backoff: ...

    def spawn(self, fn: Callable[..., Awaitable[None]], *args: object) -> None:
        """Run ``fn(*args)`` as a guarded background task of the driver."""

    def set_fatal(self, error: BaseException) -> None:
        """The consumer failed for good: ``error`` is raised from every poll."""

    def wake(self) -> None:
        """A session queued an event for its member: let the driver loop run."""


class Session(Protocol):
    """One protocol's member and the requests it needs, driven by the driver.

    The session owns its member and its member's event queue; the driver feeds
    it the events every member takes (:data:`DriverEvent`) and performs the
    actions every member returns (:data:`DriverAction`), while the session
    performs its own protocol's actions (group requests, assignors) and queues
    their outcomes as events for its member.
    """

    @property
    def group_protocol(self) -> GroupProtocol: ...

    @property
    def member_id(self) -> str: ...

    @property
    def generation_or_epoch(self) -> int:
        """What commits carry and ``member_epoch`` shows: member epoch or generation id."""
        ...

    @property
    def assignment(self) -> frozenset[TopicPartition]: ...

    @property
    def closed(self) -> bool: ...

    @property
    def state_name(self) -> str: ...

    @property
    def may_fall_back(self) -> bool:
        """True while a refusal of the protocol may still switch to another one."""
        ...

    def start(self) -> None:
        """The driver is connected: start the session's own background work."""

    def post(self, event: DriverEvent) -> None:
        """Queue ``event`` for the member."""

    def has_events(self) -> bool: ...

    def handle_next(self, now: float) -> Sequence[DriverAction]:
        """Feed the oldest queued event to the member (``TimerTick`` if none)."""
        ...

    def next_deadline(self) -> float | None: ...

    async def subscribe(self, change: SubscriptionChange) -> None:
        """Prepare a subscription change for the member (metadata, regex) and queue it."""

    def rediscovery_delay(self) -> float:
        """Seconds to wait before looking the coordinator up again."""
        ...

    def commit_done(
        self,
        token: int,
        offsets: Mapping[TopicPartition, int],
        error: BaseException | None,
        generation: int,
    ) -> None:
        """A commit the member asked for (``CommitOffsets``) ended; ``generation`` at its start."""
