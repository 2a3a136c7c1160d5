"""The seams of the runtime, as typing protocols.

- :class:`TransportInterface`: the part of :class:`~kgroup.transport.KafkaClient`
  the runtime uses (metadata, coordinator lookup, coordinator requests). The
  driver opens one per run through a :data:`TransportFactory`.
- :class:`DataPlaneInterface`: the part of :class:`kgroup.dataplane.DataPlane`
  the runtime and the consumer front ends use. Tests inject an in-memory one
  (``kgroup.testing.fake``) through the consumers' ``dataplane=`` argument.
- :class:`Host`, :data:`DriverEvent` and :data:`DriverAction`: the seam
  between the protocol-neutral driver and the one session per protocol that
  drives a member (:mod:`kgroup.runtime.session`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

from kgroup import membership as m
from kgroup.config import ConsumerConfig
from kgroup.dataplane.librdkafka import Record
from kgroup.membership.common import CommonAction, CommonEvent
from kgroup.transport.interface import ClusterClient, NodeConnection
from kgroup.types import Backoff, TopicPartition

__all__ = [
    "DRIVER_ACTIONS",
    "CoordinatorConnection",
    "DataPlaneInterface",
    "DriverAction",
    "DriverEvent",
    "HoldsTakenRecords",
    "Host",
    "KnowsLogEnds",
    "SubscriptionChange",
    "TransportFactory",
    "TransportInterface",
    "WaitsInChunks",
]


TransportInterface = ClusterClient
"""What the runtime asks of the cluster client (:class:`~kgroup.transport.KafkaClient`)."""

CoordinatorConnection = NodeConnection
"""A connection to one broker, as :meth:`TransportInterface.connection` returns it."""

TransportFactory = Callable[[ConsumerConfig], AbstractAsyncContextManager[TransportInterface]]
"""Opens the cluster client for one run of the driver (bootstraps on entry)."""


@runtime_checkable
class KnowsLogEnds(Protocol):
    """A data plane that can tell where a partition's log ended at its last fetch (optional).

    The driver uses it to notice a topic deleted and created again when no
    broker says so (OffsetCommit v9 names topics; see
    :attr:`kgroup.offsets.MemberView.beyond_log_end`).
    """

    def cached_log_ends(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark the last fetch of each partition saw (those fetched)."""
        ...


@runtime_checkable
class HoldsTakenRecords(Protocol):
    """A data plane that counts a taken batch as not handed out until it is settled (optional).

    The front end takes a batch, then deserializes it and may yield to the
    event loop before it hands it to the application; it may put the batch
    back instead (a deserializer failed, the session lapsed, the call was
    cancelled). The loop reads positions for commits meanwhile: with this, a
    position is never past a batch not settled yet, and putting records back
    is one step for the loop's readers (see :mod:`kgroup.dataplane._in_hand`).
    Without it the front end seeks back; a commit made between the take and
    the seek may pass the records put back.
    """

    def deliver(self, batch: list[Record], count: int) -> list[Record]:
        """Settle ``batch`` (a list ``consume`` returned): its first ``count`` records
        go to the application (returned, without those of partitions stopped or
        seeked since the take), the rest back to the fetcher."""
        ...

    def abandon_take(self) -> None:
        """Put back the batch this thread's last ``consume`` returned if it was not
        settled (an exception came between the two)."""

    def withhold(self, partitions: Iterable[TopicPartition]) -> None:
        """Hand out no record of ``partitions`` (taken ones go back) until they are
        unassigned: ``unsubscribe()`` says so before the member stops them."""

    def hold(self, owner: object, records: list[Record]) -> None:
        """``records``, settled, are still not the application's (``owner`` keeps
        them for a later call): count them as not handed out until ``owner``
        holds other records, or none."""


@runtime_checkable
class OpensConnections(Protocol):
    """A data plane that can connect to partitions' leaders ahead of fetching (optional).

    A new member's data plane has no connection yet when its first assignment
    comes, and connecting then delayed its first records by tens of ms: the
    driver has it connect while the member joins.
    """

    def warm(self, partitions: Iterable[TopicPartition]) -> None:
        """Connect to the leaders of ``partitions`` (best effort; blocks, so called
        from a worker thread)."""
        ...


@runtime_checkable
class WaitsInChunks(Protocol):
    """A data plane whose record waits hold off the driver's calls (optional).

    librdkafka's handle takes one call at a time, so the driver's calls wait
    for a record wait in progress: the data plane waits in short chunks while
    the driver may call soon, and may wait longer once the group is settled.
    """

    def group_settled(self, settled: bool) -> None:
        """Whether the member holds its assignment, started, with no rebalance step under way."""
        ...


class DataPlaneInterface(Protocol):
    """The record fetcher in assign mode (:class:`kgroup.dataplane.DataPlane`).

    The runtime decides what it fetches; it never joins a group itself.
    """

    @property
    def assigned(self) -> frozenset[TopicPartition]:
        """Partitions currently fetching (or paused)."""
        ...

    def assign(
        self,
        offsets: Mapping[TopicPartition, int | None],
        leader_epochs: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Start fetching at these offsets (None: where ``auto.offset.reset`` says).

        ``leader_epochs``: the leader epoch of the record before an offset, where
        known (KIP-320): the fetcher may validate the offset against the leader's
        log before it fetches from it.
        """

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

    def leader_epochs(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The leader epoch of the record before each offset, for fetching partitions
        whose position is that offset and whose epoch is known (else left out)."""
        ...

    def consume(self, max_records: int, timeout: float) -> list[Record]:
        """Up to ``max_records`` records, waiting at most ``timeout`` seconds for the first."""
        ...

    def close(self) -> None:
        """Release resources. Idempotent."""


SubscriptionChange = m.SubscriptionChanged | m.Unsubscribe
"""What the application's ``subscribe()`` / ``unsubscribe()`` become."""

DriverEvent = CommonEvent
"""Events the driver feeds to whichever member runs (both members take them)."""

DRIVER_ACTIONS = (
    m.StopFetching,
    m.StartFetching,
    m.CommitOffsets,
    m.RunCallback,
    m.RaiseCallbackError,
    m.RediscoverCoordinator,
    m.ReportError,
    m.ReportFatalError,
    m.LeaveComplete,
    m.Closed,
)
"""The actions of either member that the driver performs; the rest are the session's."""

DriverAction = CommonAction | m.ReportError
"""An action of :data:`DRIVER_ACTIONS`."""


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

    def spawn_answer(
        self, fn: Callable[..., Awaitable[None]], *args: object, timed: bool = True
    ) -> None:
        """:meth:`spawn` a group request whose answer may bring the application
        work (a heartbeat, a SyncGroup): the application's thread waits in
        shorter slices from now until the task ends, so a rebalance callback
        runs as soon as it is queued. ``timed``: the answer's time feeds the
        driver's estimate of when the member's next answer is in."""
        ...

    def expect_answer(self) -> float:
        """As :meth:`spawn_answer` for a request sent without a task: the short
        waits start now; returns the token for :meth:`answered`."""
        ...

    def answered(self, sent: float, *, timed: bool = True) -> None:
        """The answer :meth:`expect_answer` announced reached the member (call once)."""
