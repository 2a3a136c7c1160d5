"""The colour-free core of the consumer front ends.

:class:`~kgroup.Consumer` (blocking) and :class:`~kgroup.AsyncConsumer`
(anyio) are thin shells around what is written here once:

- input checks (config, subscriptions, commit arguments);
- :class:`ConsumerBase`: the methods that only forward to the driver
  (subscribe, seek, pause, ...) through the shell's one way of reaching the
  driver's event loop (:meth:`ConsumerBase._on_loop`: a portal call or a
  plain call), and the read-only views;
- :class:`FrontEndCore`: the code that enforces the listener contract — the
  service step at the start of every poll slice (tell the member the
  application polled, auto-commit, run the queued application work, raise the
  fatal error) and the close loop — as generators that yield the
  :data:`Step` s only a shell can take (call on the loop, run a listener
  method in the application's context and await it if it is async, wait for
  work). A shell runs a generator by taking each step in its own colour and
  sending back the listener's exception (or None).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Collection, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.dataplane import DataPlane, Record, validate_passthrough
from kgroup.errors import KgroupError
from kgroup.listener import RebalanceListener, listener_method
from kgroup.runtime import (
    CallbackWork,
    CommitCallback,
    CommitResultWork,
    DataPlaneInterface,
    Driver,
    ErrorWork,
    RevocationCommitWork,
)
from kgroup.runtime.choice import check_protocol_config
from kgroup.runtime.interfaces import TransportFactory
from kgroup.types import TopicPartition

__all__ = [
    "MIN_WAIT",
    "POLL_EVENT_INTERVAL",
    "SERVICE_SLICE",
    "ConsumerBase",
    "ConsumerClosedError",
    "Finished",
    "FrontEndCore",
    "InvalidSubscriptionError",
    "OnLoop",
    "RunListener",
    "Step",
    "Steps",
    "Topics",
    "WaitForWork",
    "advance",
    "build_config",
    "commit_offsets_arg",
    "parse_subscription",
]

log = logging.getLogger("kgroup.consumer")

T = TypeVar("T")

SERVICE_SLICE: Final = 0.1
"""Longest wait for records (seconds) before the front end looks at its rebalance work again."""

MIN_WAIT: Final = 0.001
"""Shortest wait (seconds) worth asking the data plane for: librdkafka counts in whole ms."""

POLL_EVENT_INTERVAL: Final = 1.0
"""Polls closer together than this (seconds) tell the member only once.

Telling the member crosses to the driver's loop (a thread hop for the blocking
consumer): at ten a second it was most of an idle member's CPU. The member
needs the poll only for its ``max.poll.interval.ms`` timer, so the interval is
also at most a tenth of that (see :class:`FrontEndCore`)."""

Topics = str | re.Pattern[str] | Iterable[str | re.Pattern[str]]
"""What ``subscribe()`` takes: topic names, or one regex (a ``re.Pattern`` or a string
starting with ``^``)."""


class InvalidSubscriptionError(KgroupError, ValueError):
    """The subscription mixes a regex with names, or has more than one regex."""


class ConsumerClosedError(KgroupError):
    """The consumer was closed; it cannot be used any more."""


def build_config(conf: Mapping[str, Any]) -> ConsumerConfig:
    """Validate the user's dict for a consumer.

    With ``group.protocol`` classic or auto, ``partition.assignment.strategy``
    is resolved here too, so an unknown assignor fails at construction.

    Raises:
        ConfigError: naming the key.
    """
    config = ConsumerConfig.from_dict(conf, validate_passthrough=validate_passthrough)
    check_protocol_config(config)
    return config


def parse_subscription(
    topics: Topics | None, pattern: str | re.Pattern[str] | None
) -> tuple[frozenset[str], str | None]:
    """Topic names and regex of a subscription.

    A regex is given as ``pattern=``, as a compiled ``re.Pattern`` in place of
    the topics, or (as with confluent-kafka) as a topic string starting with
    ``^``. The broker evaluates it (RE2J syntax, full match on topic names).
    """
    names: set[str] = set()
    regexes: list[str] = []
    if pattern is not None:
        regexes.append(pattern.pattern if isinstance(pattern, re.Pattern) else pattern)
    if isinstance(topics, re.Pattern):
        regexes.append(topics.pattern)
    elif topics is not None:
        items = [topics] if isinstance(topics, str) else list(topics)
        for item in items:
            if isinstance(item, re.Pattern):
                regexes.append(item.pattern)
            elif not isinstance(item, str) or not item:
                raise InvalidSubscriptionError(f"topics must be non-empty strings, got {item!r}")
            elif item.startswith("^"):
                regexes.append(item)
            else:
                names.add(item)
    if len(regexes) > 1:
        raise InvalidSubscriptionError(
            f"subscribe to at most one regex (combine them with |), got {regexes}"
        )
    if regexes and names:
        raise InvalidSubscriptionError(
            f"subscribe to topic names or to a regex, not both: {sorted(names)} and {regexes[0]!r}"
        )
    return frozenset(names), (regexes[0] if regexes else None)


def commit_offsets_arg(
    offsets: Mapping[TopicPartition, int] | None, message: Record | None
) -> dict[TopicPartition, int] | None:
    """The offsets a commit call asks for; ``message`` commits just past that record."""
    if message is not None:
        if offsets is not None:
            raise ValueError("pass offsets or message, not both")
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        if topic is None or partition is None or offset is None:
            raise ValueError("message has no topic, partition or offset")
        return {TopicPartition(topic, partition): offset + 1}
    if offsets is None:
        return None
    result = {}
    for tp, offset in offsets.items():
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"offsets keys must be kgroup.TopicPartition, got {tp!r}")
        if offset < 0:
            raise ValueError(f"offset of {tp} must be >= 0, got {offset}")
        result[tp] = int(offset)
    return result


# ----------------------------------------------------------------------- steps


@dataclass(frozen=True, slots=True)
class OnLoop:
    """Call ``fn(*args)`` on the driver's event loop (the blocking shell: through its portal)."""

    fn: Callable[..., object]
    args: tuple[object, ...] = ()


@dataclass(frozen=True, slots=True)
class RunListener:
    """Call a listener method with ``partitions`` here, in the application's context.

    If it returns an awaitable, await it (the blocking shell: on the loop). Send
    back the exception it raised, or None.
    """

    method: Callable[[frozenset[TopicPartition]], object] = field(compare=False)
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class WaitForWork:
    """Wait until the driver queues work or stops, at most ``timeout`` seconds.

    A wake-up that came since the previous wait ends the wait at once, so none
    is lost while the core was busy.
    """

    timeout: float


Step = OnLoop | RunListener | WaitForWork
"""What a core generator asks its shell to do."""

Steps = Generator[Step, BaseException | None, T]
"""A core generator: yields steps, is sent each listener's exception (or None)."""


@dataclass(frozen=True, slots=True)
class Finished(Generic[T]):
    """A core generator returned ``value``."""

    value: T


def advance(steps: Steps[T], sent: BaseException | None) -> Step | Finished[T]:
    """Send ``sent`` (the last step's outcome; None to start) and get the next step."""
    try:
        return steps.send(sent)
    except StopIteration as stop:
        return Finished(stop.value)


class FrontEndCore:
    """The listener contract, written once for both shells (see the module).

    ``clock`` is the shell's clock (``time.monotonic`` or ``anyio.current_time``).
    """

    def __init__(self, config: ConsumerConfig, driver: Driver, clock: Callable[[], float]) -> None:
        self.config = config
        self.driver = driver
        self.closed = False
        self.closing = False
        """True while ``close()`` runs: the revoke callback it runs may still commit."""
        self._clock = clock
        self._last_poll_event = -math.inf
        self._poll_event_interval = min(POLL_EVENT_INTERVAL, config.max_poll_interval_ms / 10_000)
        self._auto_commit_interval = config.auto_commit_interval_ms / 1000
        self._next_auto_commit = -math.inf

    def started(self) -> None:
        """The driver runs: the first interval auto-commit is one interval away."""
        self._next_auto_commit = self._clock() + self._auto_commit_interval

    def check_open(self) -> None:
        """Raises ConsumerClosedError once closed."""
        if self.closed:
            raise ConsumerClosedError("the consumer is closed")

    def check_may_commit(self) -> None:
        """Raises ConsumerClosedError once closed, but not while ``close()`` runs.

        The member still owns its partitions while close runs the revoke
        callback (it leaves only after the callback returned), so a commit made
        there is the application's last chance to record its progress and the
        broker accepts it.
        """
        if self.closed and not self.closing:
            raise ConsumerClosedError("the consumer is closed")

    def service(self) -> Steps[None]:
        """A point where the application holds no unprocessed record: do the rebalance work."""
        self.check_open()
        driver = self.driver
        now = self._clock()
        if now - self._last_poll_event >= self._poll_event_interval:
            self._last_poll_event = now
            yield OnLoop(driver.poll_called)
        if self.config.enable_auto_commit and now >= self._next_auto_commit:
            self._next_auto_commit = now + self._auto_commit_interval
            yield OnLoop(driver.auto_commit)
        if driver.app_work:
            # The member may wait for the poll after a rebalance step (a retry
            # after a listener raised): the next poll tells it at once.
            self._last_poll_event = -math.inf
            yield from self.drain(closing=False)
        if driver.fatal is not None:
            raise driver.fatal

    def drain(self, *, closing: bool) -> Steps[None]:
        """Carry out the queued application work, oldest first.

        Raises the first listener exception or error (after reporting it), except
        while ``closing``: then they are logged and the close goes on.
        """
        driver = self.driver
        work = driver.app_work
        while work:
            item = work.popleft()
            if isinstance(item, CallbackWork):
                method = listener_method(driver.listener, item.kind)
                error = None if method is None else (yield RunListener(method, item.partitions))
                if error is not None and closing:
                    log.error(
                        "rebalance callback %s failed during close: %r", item.kind.value, error
                    )
                    error = None
                yield OnLoop(driver.callback_done, (item, error, error is not None))
                if error is not None:
                    raise error
            elif isinstance(item, RevocationCommitWork):
                yield OnLoop(driver.release_revocation_commit, (item.token,))
            elif isinstance(item, CommitResultWork):
                item.callback(item.offsets, item.error)
            elif isinstance(item, ErrorWork):
                if closing:
                    log.warning("error during close: %r", item.error)
                else:
                    raise item.error

    def begin_close(self) -> bool:
        """Mark the consumer closed; False if it already was (close is idempotent)."""
        if self.closed:
            return False
        self.closed = self.closing = True
        return True

    def end_close(self) -> None:
        """The close is over (finished, timed out or failed): commits are refused from now on."""
        self.closing = False

    def close(self, timeout: float) -> Steps[None]:
        """Leave the group, running the revoke callbacks here, for about ``timeout`` seconds.

        The shell aborts the driver afterwards if :meth:`overdue`.
        """
        driver = self.driver
        yield OnLoop(driver.request_close, (timeout,))
        end = self._clock() + timeout + 1.0
        while not driver.is_closed() and self._clock() < end:
            yield from self.drain(closing=True)
            if driver.is_closed():
                break
            yield WaitForWork(max(0.0, min(SERVICE_SLICE, end - self._clock())))

    def overdue(self) -> bool:
        """After :meth:`close`: the driver has not finished (logged); abort it."""
        if self.driver.is_closed():
            return False
        log.warning("group %s: close did not finish in time", self.config.group_id)
        return True


class ConsumerBase:
    """What ``Consumer`` and ``AsyncConsumer`` share: construction, views, forwarding methods.

    A shell provides :meth:`_on_loop` (how it calls the driver on its event
    loop), the ``wakeup`` the driver calls when it queued work or stopped, and
    its clock.

    Raises:
        ConfigError: naming the key.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        dataplane: DataPlaneInterface | None,
        transport: TransportFactory,
        *,
        wakeup: Callable[[], None],
        clock: Callable[[], float],
    ) -> None:
        self._config = build_config(config)
        self._dataplane = DataPlane(self._config) if dataplane is None else dataplane
        self._driver = Driver(self._config, self._dataplane, wakeup=wakeup, transport=transport)
        self._core = FrontEndCore(self._config, self._driver, clock)

    def _on_loop(self, fn: Callable[..., T], *args: object) -> T:
        raise NotImplementedError

    # ------------------------------------------------------------------ views

    @property
    def group_protocol(self) -> GroupProtocol:
        """The group protocol in use: CONSUMER or CLASSIC (``auto`` is resolved before joining).

        With the classic protocol ``member_epoch`` is the generation id.
        """
        return self._driver.session.group_protocol

    @property
    def member_id(self) -> str:
        """The member id (chosen by the client, kept for the consumer's life)."""
        return self._driver.session.member_id

    @property
    def member_epoch(self) -> int:
        """The member epoch: 0 while joining, > 0 in the group, < 0 after leaving."""
        return self._driver.session.generation_or_epoch

    @property
    def group_instance_id(self) -> str | None:
        """``group.instance.id`` (static membership), or None."""
        return self._config.group_instance_id

    @property
    def config(self) -> ConsumerConfig:
        """The validated configuration."""
        return self._config

    # --------------------------------------------------------- subscription

    def subscribe(
        self,
        topics: Topics | None = None,
        listener: RebalanceListener | object | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Join the group subscribed to ``topics`` (names) or a regex.

        A regex is ``pattern=``, a ``re.Pattern``, or a string starting with
        ``^``; the broker evaluates it (RE2J, full match) and assigns matching
        topics as they appear. Calling again replaces the subscription and the
        listener. ``listener`` is a :class:`~kgroup.RebalanceListener`, or any
        object with some of its methods (missing ones do nothing).

        Raises:
            InvalidSubscriptionError: names mixed with a regex, or several regexes.
        """
        self._core.check_open()
        names, regex = parse_subscription(topics, pattern)
        self._on_loop(self._driver.subscribe, names, regex, listener)

    def unsubscribe(self) -> None:
        """Leave the group; the listener's revoke callback runs in a later poll."""
        self._core.check_open()
        self._on_loop(self._driver.unsubscribe)

    # --------------------------------------------------------------- offsets

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        *,
        message: Record | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Start a commit and return at once; ``callback(offsets, error)`` runs in a later poll."""
        chosen = self._commit_args(offsets, message)
        self._on_loop(self._driver.commit_in_background, chosen, callback)

    def _commit_args(
        self, offsets: Mapping[TopicPartition, int] | None, message: Record | None
    ) -> dict[TopicPartition, int] | None:
        """The offsets a commit asks for (None: the positions); raises when closed.

        Allowed while ``close()`` runs (from the revoke callback it runs).
        """
        self._core.check_may_commit()
        return commit_offsets_arg(offsets, message)

    def position(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """Offset of the next record to hand out, per fetching partition that has one."""
        return self._dataplane.positions(partitions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next record of an assigned ``partition``.

        Works from ``on_partitions_assigned`` too: the partition then starts there.

        Raises:
            NotAssignedError: the partition is not assigned to this consumer.
        """
        self._core.check_open()
        self._on_loop(self._driver.seek, partition, offset)

    def pause(self, partitions: Collection[TopicPartition]) -> None:
        """Stop handing out records of these partitions until resumed.

        Works from ``on_partitions_assigned`` too: the partitions start paused.
        """
        self._core.check_open()
        self._on_loop(self._driver.pause, list(partitions))

    def resume(self, partitions: Collection[TopicPartition]) -> None:
        """Resume partitions paused with :meth:`pause`."""
        self._core.check_open()
        self._on_loop(self._driver.resume, list(partitions))
