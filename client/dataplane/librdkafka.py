"""confluent-kafka consumer in assign mode, as kgroup's fetcher.

It also carries confluent-kafka's callback settings (:class:`kgroup.config.Callbacks`)
to librdkafka, and adapts kgroup's commit outcomes to ``on_commit``'s signature.
librdkafka's log lines always go to Python logging (the ``logger`` setting,
or :data:`LIBRDKAFKA_LOGGER`), never raw to stderr: a library does not print.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, TypeAlias

import confluent_kafka
from kio.schema.errors import ErrorCode

from kgroup.config import AutoOffsetReset, Callbacks, ConsumerConfig
from kgroup.config_keys import FETCH_WAIT_MAX_MS
from kgroup.config_security import SECRET_KEYS, explain_denial, is_security_key
from kgroup.dataplane._in_hand import InHand, first_offsets
from kgroup.dataplane._repeats import RepeatedLines
from kgroup.dataplane._young_pass import young_pass_before_take
from kgroup.errors import (
    BrokerError,
    CommitFailedError,
    ConfigError,
    DataPlaneError,
    RequestTimeoutError,
    broker_error,
)
from kgroup.telemetry.metrics import DataPlaneStatistics, parse_librdkafka_statistics
from kgroup.types import TopicPartition

__all__ = [
    "DATAPLANE_DEFAULTS",
    "LIBRDKAFKA_LOGGER",
    "DataPlane",
    "DataPlaneError",
    "Record",
    "commit_reporter",
    "socket_timeout_ms",
    "validate_passthrough",
]

log = logging.getLogger("kgroup.dataplane")

LIBRDKAFKA_LOGGER: Final = logging.getLogger("kgroup.dataplane.librdkafka")
"""Where librdkafka's own log lines go unless the config's ``logger`` says otherwise.

Repeated lines are held back (:class:`~kgroup.dataplane._repeats.RepeatedLines`):
librdkafka logs a failed connection about twenty times a second while a broker is down."""
LIBRDKAFKA_LOGGER.addFilter(RepeatedLines())

Record: TypeAlias = confluent_kafka.Message
"""Records are handed out as librdkafka's own message objects: no per-record copy."""

# librdkafka keys that would switch its group machinery on or duplicate kgroup's
# work; kgroup sets them itself and refuses them from the user.
_FORCED: Final[Mapping[str, str]] = {
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "enable.partition.eof": "false",
}

_MESSAGE_ERROR: Final = confluent_kafka.Message.error
"""A record's error (None for a record): the unbound method, for the scan of each batch."""

_LOGICAL: Final = frozenset({confluent_kafka.OFFSET_BEGINNING, confluent_kafka.OFFSET_END})

# kgroup's own defaults for librdkafka's fetcher, chosen with the throughput
# benchmark (docs/performance.md, "Data-plane defaults" explains each with its
# measured effect and memory cost). A key the user sets always wins.
DATAPLANE_DEFAULTS: Final[Mapping[str, str]] = {
    # librdkafka's 1,000 ms default stalls a partition for a whole second each
    # time its local queue reaches queued.min.messages / queued.max.messages.kbytes:
    # a fast application then waits on the fetcher most of the time (0.2M
    # records/s instead of 1M+ for 100 B records). 0 would re-check a full
    # queue in a busy loop (a third of a core while the application is slow);
    # 10 ms costs under 1% of a core then.
    "fetch.queue.backoff.ms": "10",
    # The prefetch buffer, in payload bytes for all partitions together
    # (librdkafka: 64 MiB). Once the fetcher no longer stalls, 32 MiB keeps it
    # ahead of any Python loop and bounds the resident memory of large records
    # at half of librdkafka's.
    "queued.max.messages.kbytes": "32768",
}

_RESET = {
    AutoOffsetReset.EARLIEST: "earliest",
    AutoOffsetReset.LATEST: "latest",
    AutoOffsetReset.ERROR: "error",
}
_START = {
    AutoOffsetReset.EARLIEST: confluent_kafka.OFFSET_BEGINNING,
    AutoOffsetReset.LATEST: confluent_kafka.OFFSET_END,
}


WAIT_CHUNK: Final = 0.03
"""Longest single wait (seconds) in librdkafka while records are awaited.

confluent-kafka serialises calls on one consumer: while a thread waits in
``consume()``, an ``incremental_assign()`` or ``position()`` from the driver's
thread waits for it, and its lock is not fair, so an application polling in a
loop could hold the driver (and with it the heartbeats) off for a second and
more. The data plane therefore waits in chunks and lets the driver's calls in
between (see :class:`_Gate`); a chunk costs one C call (60-90 microseconds of
CPU measured here, so the chunks are not shorter than they need to be)."""

IDLE_CHUNK: Final = 0.1
"""Longest single record wait (seconds) while the group is settled and the handle quiet.

The driver's calls come in bursts (a rebalance: positions, stop, commit,
start; an auto-commit: positions, epochs, log ends) with long quiet spells
between them, in which the 30 ms chunks were an idle member's largest CPU
cost (about 40 C calls a second for a poll loop of 100 ms waits); at 100 ms a
poll slice is one call. Used only once the driver said the group is settled
(:meth:`DataPlane.group_settled`: joining, reconciling and leaving keep the
short chunks) and no control call came for :data:`QUIET_AFTER`. The price: a
rebalance another member starts finds this member in a longer wait, so its
first call waits up to this long (its later calls do not)."""

QUIET_AFTER: Final = 1.0
"""Seconds after a control call during which record waits keep the short chunks."""

LOOKUP_QUIET_AFTER: Final = 0.1
"""The same after a lookup (:meth:`_Gate.lookup`): long enough for the rest of its burst."""

_GRACE: Final = 0.005


_WARM_TIMEOUT: Final = 1.0
"""Longest wait (seconds) for the offset query that opens a topic's leader connections."""
_LATEST_TIMESTAMP: Final = -1
"""ListOffsets' timestamp for a partition's end offset."""


class _Gate:
    """Turns on the librdkafka handle: control calls (the driver's) go before record waits.

    After a control call, record waits hold off for :data:`_GRACE` so that the
    driver's next call of the same batch (metadata, then assign; unassign, then
    pause ...) does not wait for a whole chunk again; and for :data:`QUIET_AFTER`
    they wait in short chunks (:meth:`chunk`), as the next burst of calls may follow.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        # A plain lock under the condition: ``with lock`` is a C call, where the
        # condition's own ``with`` is two Python calls, twice on every poll.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._busy = False
        self._control_waiting = 0
        self._fetch_waiting = 0
        self._grace_until = 0.0
        self._clock = clock
        self._short_until = -math.inf
        self.settled = False
        """Set by the driver's thread (see :data:`IDLE_CHUNK`); until then short chunks."""

    def chunk(self) -> float:
        """Longest wait (seconds) the next record wait may hold the handle for."""
        # Read without the lock: a bool's and a float's assignment are atomic,
        # and a stale read only picks the other chunk length once.
        if not self.settled or self._clock() < self._short_until:
            return WAIT_CHUNK
        return IDLE_CHUNK

    def control(self) -> contextlib.AbstractContextManager[None]:
        """A driver's call: goes before any record wait that has not started."""
        return self._turn(self._await_control, _GRACE)

    def lookup(self) -> contextlib.AbstractContextManager[None]:
        """A driver's read of librdkafka's state (positions ...): as :meth:`control`,
        but short chunks follow for :data:`LOOKUP_QUIET_AFTER` only.

        A lookup changes nothing librdkafka fetches, and the lookups a settled
        member makes on its own (an auto-commit's positions, log ends and leader
        epochs, every ``auto.commit.interval.ms``) come within milliseconds of
        each other: a second of short chunks after each auto-commit cost an idle
        member a fifth of its polls in extra librdkafka calls.
        """
        return self._turn(self._await_control, _GRACE, quiet_for=LOOKUP_QUIET_AFTER)

    def fetch(self) -> contextlib.AbstractContextManager[None]:
        """A record wait: after every waiting control call and its grace period."""
        return self._turn(self._await_fetch, 0.0)

    def begin_fetch(self, deadline: float = math.inf) -> bool:
        """:meth:`fetch` without the context manager; :meth:`end_fetch` must follow
        if it returns True. False: the handle was not free by ``deadline`` (a
        :func:`time.monotonic` time), and the record wait should not happen.

        For the record wait of every poll: a generator-based context manager
        around confluent-kafka's blocking ``consume`` measured 40 us more CPU per
        call (80 -> 120 us), a try/finally nothing (``/tmp/explore/dploop6.py``).
        """
        with self._lock:
            # The usual case first, without a call: nothing holds or wants the handle.
            if not (self._busy or self._control_waiting) and self._grace_until <= self._clock():
                self._busy = True
                return True
            if not self._await_fetch(deadline):
                return False
            self._busy = True
            return True

    def end_fetch(self) -> None:
        """The record wait :meth:`begin_fetch` started is over: wake the waiters."""
        with self._lock:
            self._busy = False
            # Most record waits end with nobody waiting: Condition.notify_all is
            # a few Python calls even then, on every poll of an idle member.
            if self._control_waiting or self._fetch_waiting:
                self._cond.notify_all()

    @contextlib.contextmanager
    def _turn(
        self, wait: Callable[[], object], grace: float, *, quiet_for: float = QUIET_AFTER
    ) -> Iterator[None]:
        """Hold the handle once ``wait`` (run under the lock) returns; on leaving, free
        it, hold record waits off for ``grace`` seconds and wake every waiter.
        A turn with a grace period keeps the chunks short for ``quiet_for`` seconds."""
        with self._lock:
            wait()
            self._busy = True
        try:
            yield
        finally:
            with self._lock:
                self._busy = False
                if grace:
                    now = self._clock()
                    self._grace_until = now + grace
                    self._short_until = max(self._short_until, now + quiet_for)
                self._cond.notify_all()

    def _await_control(self) -> None:
        self._control_waiting += 1
        try:
            while self._busy:
                self._cond.wait()
        finally:
            self._control_waiting -= 1

    def _await_fetch(self, deadline: float = math.inf) -> bool:
        while True:
            now = self._clock()
            if self._busy or self._control_waiting:
                left = deadline - now
            else:
                grace = self._grace_until - now
                if grace <= 0:
                    return True
                left = min(grace, deadline - now)
            if left <= 0:
                return False
            self._fetch_waiting += 1
            try:
                self._cond.wait(None if left == math.inf else left)
            finally:
                self._fetch_waiting -= 1


def validate_passthrough(keys: Mapping[str, str]) -> None:
    """Ask librdkafka whether it knows each key and accepts its value.

    librdkafka checks properties while building its configuration, before it
    starts any thread or connection, so this costs well under a millisecond.

    Raises:
        ConfigError: naming the first key librdkafka refuses.
    """
    for key in keys:
        if key in _FORCED:
            raise ConfigError(
                f"{key} is managed by kgroup and cannot be set: kgroup commits offsets itself "
                "(use enable.auto.commit, which kgroup implements)"
            )
    # The probe's own log lines (with ``debug`` set, say) are not the user's client's.
    probe: dict[str, Any] = {**keys, "group.id": "kgroup-config-probe", "logger": _SILENT}
    try:
        confluent_kafka.Consumer(probe).close()
    except confluent_kafka.KafkaException as exc:
        error = exc.args[0]
        raise ConfigError(
            f"invalid config: {_redact(error.str(), keys)} (neither kgroup nor librdkafka "
            "accepts it; check the key's spelling and value)"
        ) from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"invalid config for the data plane: {_redact(str(exc), keys)}") from None


class _Silent:
    def log(self, *_args: object) -> None:
        pass


_SILENT: Final = _Silent()


def _redact(text: str, keys: Mapping[str, str]) -> str:
    # librdkafka quotes offending values in its messages; a secret must not
    # reach an exception that ends up in logs.
    for key in SECRET_KEYS:
        value = keys.get(key)
        if value:
            text = text.replace(value, "***")
    return text


def _guard(name: str, callback: Callable[..., object]) -> Callable[..., None]:
    """``callback`` as librdkafka calls it, with its exceptions logged, not raised.

    confluent-kafka re-raises a callback's exception from the ``consume()`` that
    served it and drops the records of that call; here that would skip records
    (their positions already moved on), so the error is logged instead.
    """

    @functools.wraps(callback)
    def guarded(*args: object) -> None:
        try:
            callback(*args)
        except Exception:
            log.exception("the %s callback raised; kgroup carries on", name)

    return guarded


def _callback_config(callbacks: Callbacks) -> dict[str, Any]:
    conf: dict[str, Any] = {
        # Given to confluent-kafka as-is: it calls logger.log(level, fmt, ...)
        # while consume() serves librdkafka's queue, on the polling thread.
        "logger": callbacks.logger if callbacks.logger is not None else LIBRDKAFKA_LOGGER,
    }
    for name in ("error_cb", "stats_cb", "throttle_cb"):
        callback = getattr(callbacks, name)
        if callback is not None:
            conf[name] = _guard(name, callback)
    return conf


def _kafka_error(error: BaseException) -> confluent_kafka.KafkaError:
    if isinstance(error, BrokerError):
        code = error.code
    elif isinstance(error, CommitFailedError) and isinstance(error.__cause__, BrokerError):
        # As librdkafka's offset_commit_cb: the broker's refusal, not a generic failure.
        code = error.__cause__.code
    elif isinstance(error, RequestTimeoutError):
        code = confluent_kafka.KafkaError._TIMED_OUT
    else:
        code = confluent_kafka.KafkaError._FAIL
    return confluent_kafka.KafkaError(code, str(error))


def commit_reporter(
    on_commit: Callable[[Any, list[Any]], object],
) -> Callable[[Mapping[TopicPartition, int], BaseException | None], None]:
    """Adapt kgroup's commit outcome to confluent-kafka's ``on_commit(err, partitions)``.

    ``err`` is None on success, else a ``confluent_kafka.KafkaError`` (the
    broker's error code, ``_TIMED_OUT``, or ``_FAIL`` with kgroup's message);
    ``partitions`` are ``confluent_kafka.TopicPartition`` with the offsets
    committed (or asked for, on failure).
    """

    def report(offsets: Mapping[TopicPartition, int], error: BaseException | None) -> None:
        partitions = [_to_ck(tp, offset) for tp, offset in sorted(offsets.items())]
        on_commit(None if error is None else _kafka_error(error), partitions)

    return report


def socket_timeout_ms(config: ConsumerConfig) -> int:
    """librdkafka's ``socket.timeout.ms`` for kgroup's ``request.timeout.ms``.

    librdkafka times a request out (and then drops its connection) after its
    own ``socket.timeout.ms``, 60 s by default, not after ``request.timeout.ms``.
    A fetch stuck on a half-open connection after a network partition healed
    would hold a rejoined member's consumption up for a minute while its group
    requests, on kgroup's connections, gave up after ``request.timeout.ms``.
    Deriving the one from the other gives the data plane the same patience as
    the control plane (and as the Java client, whose fetches obey
    ``request.timeout.ms``). An explicit ``socket.timeout.ms`` wins.

    Never shorter than ``fetch.wait.max.ms`` + 1 s: a fetch the broker may
    legitimately hold for ``fetch.wait.max.ms`` must not time out (librdkafka
    warns about such a setting).
    """
    fetch_wait = FETCH_WAIT_MAX_MS.read(config.passthrough)
    return max(config.request_timeout_ms, fetch_wait + 1000)


def _to_ck(
    tp: TopicPartition, offset: int | None = None, leader_epoch: int | None = None
) -> confluent_kafka.TopicPartition:
    if offset is None:
        return confluent_kafka.TopicPartition(tp.topic, tp.partition)
    if leader_epoch is None:
        return confluent_kafka.TopicPartition(tp.topic, tp.partition, offset)
    return confluent_kafka.TopicPartition(tp.topic, tp.partition, offset, leader_epoch=leader_epoch)


class DataPlane:
    """One librdkafka consumer in assign mode.

    The application's thread consumes while the driver's thread assigns,
    pauses and reads positions: a gate (see :data:`WAIT_CHUNK`) takes their
    calls on the one librdkafka handle in turn, the driver's first.
    librdkafka's calls release the GIL while they wait, so a blocking
    ``consume`` does not stall other Python threads.
    """

    _statistics: DataPlaneStatistics | None = None
    """librdkafka's latest statistics (a class default: test doubles have none)."""

    def __init__(
        self, config: ConsumerConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        # Security settings come from the one validated SecurityConfig kgroup's
        # own connections use, never from the passthrough copy, so both agree.
        conf: dict[str, Any] = dict(DATAPLANE_DEFAULTS)
        conf.update(
            (key, value) for key, value in config.passthrough.items() if not is_security_key(key)
        )
        conf.update(config.security.librdkafka_config())
        conf.update(_FORCED)
        conf["bootstrap.servers"] = ",".join(config.bootstrap_servers)
        # librdkafka insists on a group.id even in assign mode; it never joins
        # (no subscribe), so the user's id is safe and keeps broker logs legible.
        conf["group.id"] = config.group_id
        conf["client.id"] = config.client_id
        conf["auto.offset.reset"] = _RESET[config.auto_offset_reset]
        if config.client_rack is not None:
            conf["client.rack"] = config.client_rack
        conf.update(_callback_config(config.callbacks))
        conf.setdefault("socket.timeout.ms", str(socket_timeout_ms(config)))
        self._reset = config.auto_offset_reset
        self._user_stats_cb: Callable[[str], None] | None = conf.get("stats_cb")
        if str(conf.get("statistics.interval.ms", "0")).strip() not in ("", "0"):
            # For consumer.metrics() (lag, bytes); librdkafka calls it from consume().
            # The application's own stats_cb (already guarded) still gets every report.
            conf["stats_cb"] = self._on_statistics
        self._consumer = confluent_kafka.Consumer(conf)
        self._clock = clock
        self._gate = _Gate(clock)
        self._warmed: set[str] = set()
        self._drained = False
        # The size of the last take: the next is expected to be at most twice it.
        self._last_take_size = 0
        self._assigned: set[TopicPartition] = set()
        self._assigned_view: frozenset[TopicPartition] | None = None
        # librdkafka's position of a partition is invalid from a seek until it
        # hands out the next record; the Java client's (and kgroup's) position
        # is the seek offset meanwhile, so a commit made then covers it.
        self._seeked: dict[TopicPartition, int] = {}
        # Batches taken and not settled yet: positions are never past them (see InHand).
        self._in_hand = InHand()
        # Per thread, the id of the batch its last consume() added and it has not
        # settled yet (see abandon_take).
        self._last_take = threading.local()
        # Partitions whose records are not handed out until they stop (see withhold).
        self._withheld: set[TopicPartition] = set()
        self._pending_error: DataPlaneError | None = None
        self._denied: BrokerError | None = None
        self._closed = False

    def _on_statistics(self, text: str) -> None:
        parsed = parse_librdkafka_statistics(text)
        if parsed is not None:
            self._statistics = parsed  # one reference swap: readers on other threads are safe
        if self._user_stats_cb is not None:
            self._user_stats_cb(text)

    def group_settled(self, settled: bool) -> None:
        """The driver's word: no rebalance step under way (record waits may be longer)."""
        self._gate.settled = settled

    def statistics(self) -> DataPlaneStatistics | None:
        """Lag and bytes from librdkafka's latest statistics (``statistics.interval.ms``)."""
        return self._statistics

    @property
    def assigned(self) -> frozenset[TopicPartition]:
        """Partitions currently fetching (or paused)."""
        view = self._assigned_view
        if view is None:
            # The same set until the assignment changes: the runtime compares it
            # with the member's after every step, and equal sets of distinct
            # TopicPartition objects compare element by element in Python.
            view = self._assigned_view = frozenset(self._assigned)
        return view

    def assign(
        self,
        offsets: Mapping[TopicPartition, int | None],
        leader_epochs: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Start fetching ``offsets``' partitions at the given offsets.

        ``None`` means no committed offset: start where ``auto.offset.reset`` says.
        With ``auto.offset.reset=error`` a partition without an offset is an error.
        ``leader_epochs``: the leader epoch of each offset, where known (KIP-320),
        handed to librdkafka with it (librdkafka 2.16 does not validate an
        assigned offset; the runtime checks for truncation before, see
        :func:`kgroup.offsets.check_truncation`).
        """
        epochs = leader_epochs or {}
        fresh = {tp: off for tp, off in offsets.items() if tp not in self._assigned}
        if not fresh:
            return
        self.warm(fresh)
        assignment = []
        for tp, offset in sorted(fresh.items()):
            if offset in _LOGICAL:  # asked for explicitly: assign() / seek() to an end
                assignment.append(_to_ck(tp, offset))
            elif offset is None or offset < 0:
                if self._reset is AutoOffsetReset.ERROR:
                    raise DataPlaneError(
                        f"{tp} has no committed offset and auto.offset.reset=error; "
                        "commit or seek an offset for it, or choose earliest/latest"
                    )
                assignment.append(_to_ck(tp, _START[self._reset]))
            else:
                assignment.append(_to_ck(tp, offset, epochs.get(tp)))
        with self._gate.control():
            self._consumer.incremental_assign(assignment)
        self._assigned.update(fresh)
        self._assigned_view = None
        for tp in fresh:
            self._seeked.pop(tp, None)
        log.debug("data plane fetching %s", sorted(fresh))

    def warm(self, partitions: Iterable[TopicPartition]) -> None:
        """Open librdkafka's connections to these partitions' leaders before they start.

        Blocks up to :data:`_WARM_TIMEOUT`, once per topic (later calls for a
        topic return at once): the driver calls it from a worker thread when a
        subscription names the topics, and :meth:`assign` for a topic not warmed yet.

        librdkafka connects to a partition's leader only when it first needs
        it, and an offset query (where auto.offset.reset sends a partition)
        that finds no connection yet is retried 500 ms later: a new member's
        first partitions started 0.3-0.5 s late, with committed offsets too.
        Asking each leader for an offset first opens the connections (tens of
        ms, once per topic per consumer; measured: first record 20-35 ms
        after the assigned callback instead of 280-620 ms). An offset query
        rather than ``list_topics``: confluent-kafka builds list_topics' answer
        from ``confluent_kafka.admin``, whose import grew every member by
        0.4 MiB for one call.
        """
        cold = sorted(tp for tp in partitions if tp.topic not in self._warmed)
        if not cold:
            return
        self._warmed.update(tp.topic for tp in cold)
        try:
            with self._gate.control():
                if self._closed:
                    return  # the consumer closed while a worker thread was on its way here
                # The offset of a timestamp of -1 is the partition's end: a
                # ListOffsets request to each leader, answer unused.
                self._consumer.offsets_for_times(
                    [_to_ck(tp, _LATEST_TIMESTAMP) for tp in cold], timeout=_WARM_TIMEOUT
                )
        except confluent_kafka.KafkaException as exc:
            # Only the start is slower: librdkafka retries by itself.
            log.debug("data plane: leaders of %s not reached: %s", cold, exc)

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching ``partitions`` and drop their buffered records."""
        gone = sorted(set(partitions) & self._assigned)
        if not gone:
            return
        with self._gate.control():
            self._consumer.incremental_unassign([_to_ck(tp) for tp in gone])
            self._in_hand.moved(gone)
            self._withheld.difference_update(gone)
        self._assigned.difference_update(gone)
        self._assigned_view = None
        for tp in gone:
            self._seeked.pop(tp, None)
        log.debug("data plane stopped %s", gone)

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop handing out records of ``partitions`` until resumed."""
        with self._gate.control():
            self._consumer.pause([_to_ck(tp) for tp in partitions])

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Resume partitions paused with :meth:`pause`."""
        with self._gate.control():
            self._consumer.resume([_to_ck(tp) for tp in partitions])

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Make the next record of ``partition`` the one at ``offset``."""
        with self._gate.control():
            self._consumer.seek(_to_ck(partition, offset))
            self._in_hand.moved((partition,))
        if offset >= 0:
            self._seeked[partition] = offset
        else:
            # A logical offset (beginning, end) is no position until librdkafka
            # resolves it: an earlier seek's offset must not stand in for it, or
            # a commit would move the group back to it.
            self._seeked.pop(partition, None)

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The offset of the next record the application will be handed, per partition.

        Partitions from which nothing has been handed out yet (and that were not
        seeked) are left out: there is nothing to commit for them. A batch
        taken and not settled yet (:meth:`deliver`) counts as not handed out.
        """
        wanted = [_to_ck(tp) for tp in partitions if tp in self._assigned]
        if not wanted:
            return {}
        result: dict[TopicPartition, int] = {}
        with self._gate.lookup():
            located = self._consumer.position(wanted)
            # In the same turn: no batch is taken between the two reads.
            held = self._in_hand.starts() if self._in_hand else {}
        for ck in located:
            tp = TopicPartition(ck.topic, ck.partition)
            if ck.offset >= 0:
                result[tp] = ck.offset
            elif tp in self._seeked:
                result[tp] = self._seeked[tp]
            start = held.get(tp)
            if start is not None and start < result.get(tp, math.inf):
                result[tp] = start
        return result

    def withhold(self, partitions: Iterable[TopicPartition]) -> None:
        """Hand out no record of ``partitions`` until they stop fetching (:meth:`unassign`).

        For ``unsubscribe()``: the member stops the partitions on the event loop
        moments later, and a poll in between must not return records of the
        subscription the application ended (the Java client and librdkafka
        return none). A record of theirs taken meanwhile goes back (its
        partition's next record is it again, so the revocation's commit does
        not pass it).
        """
        with self._gate.control():
            self._withheld |= set(partitions) & self._assigned

    def _without_withheld(self, batch: list[Record]) -> list[Record]:
        """``batch`` without records of withheld partitions, which go back (in the
        caller's turn of the handle)."""
        withheld = self._withheld
        kept: list[Record] = []
        back: list[Record] = []
        for record in batch:
            tp = TopicPartition(record.topic() or "", record.partition() or 0)
            (back if tp in withheld else kept).append(record)
        self._seek_back(first_offsets(back))
        return kept if back else batch

    def _seek_back(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Make each partition's next record the one at its offset again (in the
        caller's turn of the handle).

        A failed seek is logged, not raised: the caller's records that do reach
        the application would be lost with the exception.
        """
        for tp, offset in sorted(offsets.items()):
            try:
                self._consumer.seek(_to_ck(tp, offset))
            except confluent_kafka.KafkaException as exc:
                log.warning("could not put %s back at offset %d: %s", tp, offset, exc)
                continue
            self._seeked[tp] = offset

    def _took(self, batch: list[Record]) -> None:
        if batch:
            self._in_hand.add(batch)
            self._last_take.key = id(batch)

    def abandon_take(self) -> None:
        """Put back the batch this thread's last :meth:`consume` returned, if it is
        still in hand: an exception (Ctrl-C) came between the take and the settle.

        Without it the batch would stay in hand for good, and every position of
        its partitions (every commit) would stop at it. Nothing if the thread
        settled it (or never took one).
        """
        key = getattr(self._last_take, "key", None)
        if key is None:
            return
        self._last_take.key = None
        if not self._in_hand.holds(key):
            return
        with self._gate.control():
            back = self._in_hand.abandon(key)
            self._seek_back({tp: o for tp, o in back.items() if tp in self._assigned})

    def hold(self, owner: object, records: list[Record]) -> None:
        """Count ``records`` (settled, not given to the application yet) as not handed
        out until ``owner`` holds other records or none (see :class:`InHand`)."""
        self._in_hand.hold(owner, records)

    def deliver(self, batch: list[Record], count: int) -> list[Record]:
        """Settle ``batch``, a list :meth:`consume` returned: its first ``count`` records
        go to the application (returned), the rest back to the fetcher.

        Each partition's next record is then its first one not handed out, so
        no commit passes it. Records of partitions that stopped fetching or
        were seeked since the take are neither returned nor put back: a
        position read meanwhile did not count them (see
        :class:`~kgroup.dataplane._in_hand.InHand`), so they are read again
        from the committed offset, by whichever member owns the partition.
        """
        self._last_take.key = None
        if count >= len(batch):
            # Nothing goes back: no turn of the handle. A position read before
            # this counted the batch as not handed out: only earlier, never past.
            return self._in_hand.settle(batch, count)[0]
        with self._gate.control():
            # The settle and the seeks in one turn: no position is read between
            # them, so none is past the records that go back.
            records, back = self._in_hand.settle(batch, count)
            self._seek_back({tp: o for tp, o in back.items() if tp in self._assigned})
        return records

    def leader_epochs(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The leader epoch of the record before each offset, where librdkafka knows it.

        Only for fetching partitions whose position is that very offset: the
        epoch of the last record handed out (librdkafka tracks it with the position).
        """
        wanted = [_to_ck(tp) for tp in offsets if tp in self._assigned]
        if not wanted:
            return {}
        with self._gate.lookup():
            located = self._consumer.position(wanted)
        result: dict[TopicPartition, int] = {}
        for ck in located:
            tp = TopicPartition(ck.topic, ck.partition)
            epoch = ck.leader_epoch
            if epoch is not None and epoch >= 0 and ck.offset == offsets[tp]:
                result[tp] = epoch
        return result

    # Cluster lookups the application asks for (confluent-kafka's calls of the
    # same names, through librdkafka's own connections; they block the caller).

    def watermarks(
        self, partition: TopicPartition, *, cached: bool, timeout: float
    ) -> tuple[int, int]:
        """``(low, high)`` offsets of ``partition``; ``cached``: from the last fetch response.

        Raises:
            DataPlaneError: the lookup failed (or, cached, nothing is known yet).
        """
        try:
            result = self._consumer.get_watermark_offsets(
                _to_ck(partition), timeout=timeout, cached=cached
            )
        except confluent_kafka.KafkaException as exc:
            raise DataPlaneError(
                f"watermark offsets of {partition}: {exc.args[0].str()}", exc.args[0].code()
            ) from None
        if result is None:
            raise DataPlaneError(
                f"watermark offsets of {partition}: not known yet (cached=True needs a fetch "
                "of that partition first)"
            )
        low, high = result
        return int(low), int(high)

    def cached_log_ends(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark librdkafka's last fetch of each partition saw (where it fetched).

        Local lookups (no request), in one turn of the handle. Under
        ``isolation.level=read_committed`` it is the last stable offset: a
        position never lies past it either.
        """
        ends: dict[TopicPartition, int] = {}
        wanted = [tp for tp in partitions if tp in self._assigned]
        if not wanted:
            return ends
        lookup = self._consumer.get_watermark_offsets
        with self._gate.lookup():
            for tp in wanted:
                try:
                    result = lookup(_to_ck(tp), timeout=0, cached=True)
                except confluent_kafka.KafkaException:
                    continue
                if result is not None and result[1] >= 0:
                    ends[tp] = int(result[1])
        return ends

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], *, timeout: float
    ) -> dict[TopicPartition, int | None]:
        """Earliest offset whose timestamp (ms) is >= the given one; None: no such record."""
        query = [_to_ck(tp, ts) for tp, ts in sorted(timestamps.items())]
        try:
            answer = self._consumer.offsets_for_times(query, timeout=timeout)
        except confluent_kafka.KafkaException as exc:
            raise DataPlaneError(
                f"offsets_for_times: {exc.args[0].str()}", exc.args[0].code()
            ) from None
        result: dict[TopicPartition, int | None] = {}
        for ck in answer:
            tp = TopicPartition(ck.topic, ck.partition)
            if ck.error is not None:
                raise DataPlaneError(
                    f"offsets_for_times of {tp}: {ck.error.str()}", ck.error.code()
                )
            result[tp] = ck.offset if ck.offset >= 0 else None
        return result

    def list_topics(self, topic: str | None, *, timeout: float) -> Any:
        """librdkafka's ``ClusterMetadata`` (all topics, or only ``topic``)."""
        try:
            return self._consumer.list_topics(topic, timeout=timeout)
        except confluent_kafka.KafkaException as exc:
            raise DataPlaneError(f"list_topics: {exc.args[0].str()}", exc.args[0].code()) from None

    def consume(self, max_records: int, timeout: float) -> list[Record]:
        """Up to ``max_records`` records, waiting at most ``timeout`` seconds for the first.

        Returns as soon as a record is there (librdkafka's own batch call waits
        to fill the batch). The batch stays in hand until :meth:`deliver`
        settles it: until then :meth:`positions` count it as not handed out, so
        every caller settles each batch it gets.

        Raises:
            DataPlaneError: when librdkafka reported an error that is not transient
                (for example offset out of range with ``auto.offset.reset=error``).
                Records fetched before the error are returned first; the error is
                raised by the next call, so no record is skipped.
        """
        if self._denied is not None:
            raise self._denied
        if self._pending_error is not None:
            error, self._pending_error = self._pending_error, None
            raise error
        # Before the take, not during it: see _young_pass. Expected: up to twice
        # the last take, so a loop asking for 10,000 records at a trickle does
        # not run a middle pass on every call.
        young_pass_before_take(min(max_records, 2 * self._last_take_size + 1))
        consume, gate = self._consumer.consume, self._gate
        # librdkafka's consume(n, timeout) waits until it has n records or the
        # timeout passed: with records trickling in, the first would wait the
        # whole timeout. So: take what is queued; if nothing is, wait for one
        # (in chunks, see WAIT_CHUNK and IDLE_CHUNK) and add what came with it. Each call
        # into confluent-kafka costs tens of microseconds even when it returns
        # at once, so an idle consumer (the last call found nothing) goes
        # straight to the wait.
        batch: list[Record] = []
        # The handle may be held by a driver's call that takes long (the
        # connections a subscription opens ahead, see warm): the wait for it ends
        # with the call's own timeout (at least a grace period), so the
        # application's thread gets back to its rebalance callbacks in time.
        deadline = self._clock() + max(timeout, _GRACE)
        if not self._drained or timeout <= 0:
            if not gate.begin_fetch(deadline):
                return batch
            try:
                batch = consume(max_records, 0)
                if self._withheld and batch:
                    batch = self._without_withheld(batch)
                self._took(batch)
            finally:
                gate.end_fetch()
        if not batch and timeout > 0:
            deadline = self._clock() + timeout
            wait = timeout
            while True:
                if not gate.begin_fetch(deadline):
                    break
                try:
                    # The wait for the handle used some of the time.
                    wait = deadline - self._clock()
                    batch = consume(1, max(0.0, min(wait, gate.chunk())))
                    if batch and max_records > 1:
                        batch += consume(max_records - 1, 0)
                    if self._withheld and batch:
                        batch = self._without_withheld(batch)
                    self._took(batch)
                finally:
                    gate.end_fetch()
                wait = deadline - self._clock()
                if batch or wait < 0.001:  # librdkafka waits in whole ms
                    break
        self._drained = not batch
        self._last_take_size = len(batch)
        # Errors arrive in-band as messages; scanning for them is one method
        # call per record, the largest part of this layer's cost per batch.
        # map() makes the calls from C: 10.7 us per 1,000 records against 13 us
        # for a Python loop (warm, CPython 3.11). A KafkaError is always true.
        if any(map(_MESSAGE_ERROR, batch)):
            records = self._without_errors(batch)
            self._in_hand.swap(batch, records)
            self._last_take.key = id(records)
            return records
        return batch

    def _without_errors(self, batch: list[Record]) -> list[Record]:
        records = []
        for message in batch:
            error = message.error()
            if error is None:
                records.append(message)
            elif message.topic() is None and not error.fatal():
                # Not about a partition: librdkafka's own client-level chatter.
                # It keeps a group.id (it refuses to start without one) and so
                # looks the coordinator up by itself; group errors from that
                # lookup are kgroup's business, reported typed by the membership
                # layer, and must not surface here untyped.
                log.debug("ignored librdkafka client-level error: %s", error.str())
            elif error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED:
                # An ACL denies READ: no retry will succeed. Typed, naming the
                # topic, and raised by every later consume (fatal to the consumer).
                if self._denied is None:
                    self._denied = explain_denial(
                        broker_error(ErrorCode.topic_authorization_failed),
                        topics=[message.topic() or "?"],
                        operation="READ (fetch)",
                    )
            elif error.fatal() or not error.retriable():
                if self._pending_error is None:
                    where = (
                        f" on {message.topic()}-{message.partition()}" if message.topic() else ""
                    )
                    self._pending_error = DataPlaneError(
                        f"fetch failed{where}: {error.str()} ({error.name()})", error.code()
                    )
            else:
                log.warning("transient fetch error: %s", error.str())
        return records

    def close(self) -> None:
        """Release librdkafka's resources. Idempotent."""
        if not self._closed:
            self._closed = True
            with self._gate.control():
                self._consumer.close()
