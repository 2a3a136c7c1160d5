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
  fatal error or the log truncation waiting for a seek) and the close loop —
  as generators that yield the :data:`Step` s only a shell can take (call on
  the loop, run a listener method in the application's context and await it
  if it is async, wait for work). A shell runs a generator by taking each step
  in its own colour and sending back the listener's exception (or None).
"""

from __future__ import annotations

import functools
import logging
import math
import re
import struct
import time
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

import confluent_kafka
from confluent_kafka.serialization import MessageField, SerializationContext

from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.config_keys import (
    ENABLE_AUTO_OFFSET_STORE,
    KEY_DESERIALIZER,
    VALUE_DESERIALIZER,
    Deserializer,
    Owner,
)
from kgroup.config_keys import KEYS as CONFIG_KEYS
from kgroup.dataplane import DataPlane, Record, validate_passthrough
from kgroup.dataplane._in_hand import first_offsets
from kgroup.errors import (
    ConfigError,
    ConsumerClosedError,
    DeserializationError,
    InvalidSubscriptionError,
    KeyDeserializationError,
    KgroupError,
    NothingToCommitError,
    ValueDeserializationError,
    WakeupError,
)
from kgroup.listener import RebalanceListener, check_listener, listener_method
from kgroup.membership import CallbackKind
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
from kgroup.runtime.interfaces import HoldsTakenRecords, TransportFactory
from kgroup.telemetry.metrics import ConsumerMetrics
from kgroup.telemetry.recorder import open_telemetry
from kgroup.types import OffsetAndMetadata, TopicPartition

__all__ = [
    "ANSWER_SLICE",
    "ANSWER_SLICE_MAX",
    "MIN_WAIT",
    "POLL_EVENT_INTERVAL",
    "SERVICE_SLICE",
    "CommitOffsets",
    "ConsumerBase",
    "Finished",
    "FrontEndCore",
    "Offsets",
    "OnLoop",
    "Partitions",
    "RunListener",
    "Step",
    "Steps",
    "Topics",
    "WaitForWork",
    "advance",
    "as_assignment",
    "as_offsets",
    "as_partition",
    "as_partitions",
    "as_seek",
    "auto_offset_store",
    "build_config",
    "check_regex",
    "commit_offsets_arg",
    "parse_subscription",
]

log = logging.getLogger("kgroup.consumer")

T = TypeVar("T")

SERVICE_SLICE: Final = 0.1
"""Longest wait for records (seconds) before the front end looks at its rebalance work again."""

ANSWER_SLICE: Final = 0.005
"""First wait for records while a group answer that may bring a rebalance callback is
awaited; each further one doubles, up to :data:`ANSWER_SLICE_MAX` (see
:meth:`FrontEndCore.wait_slice`)."""

ANSWER_SLICE_MAX: Final = 0.02
"""Longest wait for records while a group answer is awaited: a broker slow to answer
(hundreds of ms while many members join) costs a few wakes, not one every 5 ms."""

MIN_WAIT: Final = 0.001
"""Shortest wait (seconds) worth asking the data plane for: librdkafka counts in whole ms."""

LAPSED_WAIT: Final = 0.005
"""How long a poll waits at a time, taking no records, while the member's session has
lapsed and the loop has not acted on it yet (see :meth:`FrontEndCore.session_lapsed`)."""

POLL_EVENT_INTERVAL: Final = 1.0
"""Polls closer together than this (seconds) tell the member only once.

Telling the member crosses to the driver's loop (a thread hop for the blocking
consumer): at ten a second it was most of an idle member's CPU. The member
needs the poll only for its ``max.poll.interval.ms`` timer, so the interval is
also at most a tenth of that (see :class:`FrontEndCore`). A settled member is
not told at all: the poll is noted, and the driver passes the latest on before
the timer expires (once a second, the hops were still a fifth of an idle
member's CPU)."""

Topics = str | re.Pattern[str] | Iterable[str | re.Pattern[str]]
"""What ``subscribe()`` takes: topic names, or one regex (a ``re.Pattern`` or a string
starting with ``^``)."""


AUTO_OFFSET_STORE: Final = ENABLE_AUTO_OFFSET_STORE.name

FRONTEND_KEYS: Final = frozenset(k.name for k in CONFIG_KEYS if k.owner is Owner.FRONTEND)
"""The keys the front end reads itself, kept out of :class:`ConsumerConfig` and librdkafka."""


def auto_offset_store(conf: Mapping[str, Any]) -> bool:
    """``enable.auto.offset.store`` (default true), which the front end implements.

    librdkafka's own offset store stays off (the data plane refuses the key):
    with false, ``store_offsets()`` decides what commits cover.

    Raises:
        ConfigError: the value is not a boolean.
    """
    return ENABLE_AUTO_OFFSET_STORE.read(conf)


def build_config(conf: Mapping[str, Any]) -> ConsumerConfig:
    """Validate the user's dict for a consumer.

    With ``group.protocol`` classic or auto, ``partition.assignment.strategy``
    is resolved here too, so an unknown assignor fails at construction.

    Raises:
        ConfigError: naming the key.
    """
    auto_offset_store(conf)  # checked here; not a key for librdkafka
    Deserializers.of(conf)
    rest = {key: value for key, value in conf.items() if key not in FRONTEND_KEYS}
    config = ConsumerConfig.from_dict(rest, validate_passthrough=validate_passthrough)
    check_protocol_config(config)
    return config


@dataclass(frozen=True, slots=True)
class Deserializers:
    """``key.deserializer`` and ``value.deserializer`` (None: the bytes as fetched)."""

    key: Deserializer | None = None
    value: Deserializer | None = None

    @classmethod
    def of(cls, conf: Mapping[str, Any]) -> Deserializers:
        """Read both keys.

        Raises:
            ConfigError: a value is neither a deserializer nor a callable, naming the key.
        """
        return cls(KEY_DESERIALIZER.read(conf), VALUE_DESERIALIZER.read(conf))

    def __bool__(self) -> bool:
        return self.key is not None or self.value is not None


def parse_subscription(
    topics: Topics | None, pattern: str | re.Pattern[str] | None
) -> tuple[frozenset[str], str | None]:
    """Topic names and regex of a subscription.

    A regex is given as ``pattern=``, as a compiled ``re.Pattern`` in place of
    the topics, or (as with confluent-kafka) as a topic string starting with
    ``^``. The broker evaluates it (RE2J syntax, full match on topic names);
    :func:`check_regex` checks it for the protocol.
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


def check_regex(regex: str, protocol: GroupProtocol) -> None:
    """Refuse a subscription regex the engine that will read it cannot compile.

    Under the consumer protocol the broker reads it with RE2/J (checked here
    with RE2: no lookaround, no backreferences); under the classic protocol
    (and ``auto``, which may fall back to it) the member resolves it with
    Python's ``re``, as Java's and librdkafka's classic members use their own
    engines. Caught here, the error is typed and the previous subscription
    stays; past here it was fatal (the broker's INVALID_REGULAR_EXPRESSION) or
    escaped poll() (``re.error``).

    Raises:
        InvalidSubscriptionError: naming the pattern and the engine's reason.
    """
    if protocol is GroupProtocol.CONSUMER:
        # Imported here: RE2 is loaded only by consumers that subscribe to a regex.
        from kgroup.admin.regex import re2_error  # noqa: PLC0415

        error = re2_error(regex)
        if error is not None:
            raise InvalidSubscriptionError(
                f"the regex {regex!r} is not valid RE2 syntax ({error}); the broker "
                "reads subscription regexes as RE2/J does (no lookaround or "
                "backreferences): fix the pattern, or subscribe to topic names"
            )
        return
    try:
        re.compile(regex)
    except re.error as exc:
        raise InvalidSubscriptionError(
            f"the regex {regex!r} is not valid ({exc}); fix the pattern, or subscribe "
            "to topic names"
        ) from None


# ------------------------------------------------------------ argument coercion
#
# kgroup's own TopicPartition is a frozen value; confluent-kafka's is a mutable
# C object that also carries an offset. Users port confluent-kafka code, so every
# call taking partitions or offsets accepts both, with confluent-kafka's
# meanings, and turns them into kgroup's here, once.

_CK_PARTITION: Final = confluent_kafka.TopicPartition
_CK_MESSAGE: Final = confluent_kafka.Message
_LOGICAL_START: Final = frozenset({confluent_kafka.OFFSET_BEGINNING, confluent_kafka.OFFSET_END})
"""Logical offsets a fetch may start at (``seek``, ``assign``): the beginning or the end."""
_USE_COMMITTED: Final = frozenset({confluent_kafka.OFFSET_INVALID, confluent_kafka.OFFSET_STORED})
"""confluent-kafka's "no offset given" values: start at the committed offset."""

_PARTITION_TYPES = "kgroup.TopicPartition or confluent_kafka.TopicPartition"

Partitions = (
    TopicPartition
    | confluent_kafka.TopicPartition
    | Iterable[TopicPartition | confluent_kafka.TopicPartition]
)
"""What calls taking partitions accept: one partition or an iterable of them, of either type."""

# Mapping keys are invariant: Any admits dicts keyed by either kind (checked at run time).
Offsets = Mapping[Any, int] | Iterable[confluent_kafka.TopicPartition]
"""What calls taking offsets accept: ``{partition: offset}``, or confluent-kafka
``TopicPartition(topic, partition, offset)`` objects (a list, as confluent-kafka takes them)."""

CommitOffsets = (
    Mapping[Any, int]
    | Mapping[Any, OffsetAndMetadata]
    | Mapping[Any, int | OffsetAndMetadata]
    | Iterable[confluent_kafka.TopicPartition]
)
"""What ``commit()`` accepts: :data:`Offsets`, or ``{partition: OffsetAndMetadata}``
(the metadata is committed with the offset; so is a confluent-kafka TopicPartition's)."""


def _describe(value: object) -> str:
    return f"{type(value).__name__} {value!r}"


def as_partition(value: object, what: str) -> TopicPartition:
    """``value`` as a kgroup TopicPartition (a confluent-kafka one's offset is ignored).

    Raises:
        TypeError: ``value`` is neither kind of TopicPartition.
    """
    if isinstance(value, TopicPartition):
        return value
    if isinstance(value, _CK_PARTITION):
        return TopicPartition(value.topic, value.partition)
    raise TypeError(f"{what}: expected a {_PARTITION_TYPES}, got {_describe(value)}")


def _items(value: object, what: str) -> list[object]:
    """The items of a partitions argument: one partition, or an iterable (not a string)."""
    if isinstance(value, TopicPartition | _CK_PARTITION):
        return [value]
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(
            f"{what}: expected a {_PARTITION_TYPES} or a list of them, got {_describe(value)}"
        )
    return list(value)


def as_partitions(value: object, what: str) -> list[TopicPartition]:
    """One partition or an iterable of them (of either type), as kgroup TopicPartitions.

    Raises:
        TypeError: naming what is expected, for a string or anything else.
    """
    return [as_partition(item, what) for item in _items(value, what)]


def _offset_value(value: object, tp: TopicPartition, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what}: the offset of {tp} must be an int, got {_describe(value)}")
    return value


def _offset_and_metadata(value: object, tp: TopicPartition, what: str) -> tuple[int, str]:
    if not isinstance(value, OffsetAndMetadata):
        return _offset_value(value, tp, what), ""
    if not isinstance(value.metadata, str):
        raise TypeError(
            f"{what}: the metadata of {tp} must be a str, got {_describe(value.metadata)}"
        )
    return _offset_value(value.offset, tp, what), value.metadata


def as_commit_offsets(
    value: object, what: str
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
    """Offsets to commit, and the metadata to commit with them (non-empty strings only).

    ``{partition: offset}``, ``{partition: OffsetAndMetadata(offset, metadata)}``,
    or confluent-kafka TopicPartitions (their ``metadata``). Each offset is the
    next offset to read (>= 0), as in confluent-kafka.

    Raises:
        TypeError: a wrong type, or a kgroup TopicPartition in a list (it has no offset).
        ValueError: a negative offset (a confluent-kafka TopicPartition made without one).
    """
    triples: list[tuple[TopicPartition, int, str]] = []
    if isinstance(value, Mapping):
        for key, given in value.items():
            tp = as_partition(key, what)
            triples.append((tp, *_offset_and_metadata(given, tp, what)))
    elif isinstance(value, _CK_PARTITION):
        triples.append((as_partition(value, what), value.offset, value.metadata or ""))
    elif isinstance(value, Iterable) and not isinstance(value, str | bytes):
        for item in value:
            if isinstance(item, TopicPartition):
                raise TypeError(
                    f"{what}: kgroup.TopicPartition {item} carries no offset; pass "
                    "{TopicPartition: offset} or confluent_kafka.TopicPartition(topic, "
                    "partition, offset)"
                )
            if not isinstance(item, _CK_PARTITION):
                raise TypeError(
                    f"{what}: expected confluent_kafka.TopicPartition(topic, partition, offset) "
                    f"items, got {_describe(item)}"
                )
            triples.append((as_partition(item, what), item.offset, item.metadata or ""))
    else:
        raise TypeError(
            f"{what}: expected {{TopicPartition: offset}} or a list of "
            f"confluent_kafka.TopicPartition(topic, partition, offset), got {_describe(value)}"
        )
    result: dict[TopicPartition, int] = {}
    metadata: dict[TopicPartition, str] = {}
    for tp, offset, text in triples:
        if offset < 0:
            raise ValueError(
                f"{what}: offset of {tp} must be >= 0 (the next offset to read), got {offset}"
            )
        result[tp] = offset
        if text:
            metadata[tp] = text
        else:
            metadata.pop(tp, None)
    return result, metadata


def as_offsets(value: object, what: str, *, offsets: bool = True) -> dict[TopicPartition, int]:
    """Offsets to store (or timestamps): as :func:`as_commit_offsets`, without metadata.

    ``offsets=False``: the numbers are not offsets (``offsets_for_times``'
    timestamps), and metadata on them is moot.

    Raises:
        TypeError, ValueError: as :func:`as_commit_offsets`; ValueError also for
            offset metadata (only ``commit()`` commits it).
    """
    result, metadata = as_commit_offsets(value, what)
    if metadata and offsets:
        raise _metadata_refused(what, metadata)
    return result


def _metadata_refused(what: str, metadata: Mapping[TopicPartition, str]) -> ValueError:
    # Committed silently without it once: the application's metadata (a
    # checkpoint, a source position) was lost without a word.
    tp, text = next(iter(metadata.items()))
    return ValueError(
        f"{what}: {tp} carries offset metadata {text!r}, which would be lost here: "
        "only commit(offsets=...) and commit_async(offsets=...) commit metadata"
    )


def as_assignment(value: object, what: str) -> dict[TopicPartition, int | None]:
    """Partitions to assign manually, each with where it starts (None: the committed offset).

    kgroup TopicPartitions and confluent-kafka ones without an offset start at
    the committed offset (else where ``auto.offset.reset`` says); a confluent-kafka
    offset >= 0, ``OFFSET_BEGINNING`` or ``OFFSET_END`` starts there. A dict maps
    partitions to such offsets (None: committed).

    Raises:
        TypeError / ValueError: naming the partition and what is expected.
    """
    items: list[tuple[TopicPartition, int | None]] = []
    if isinstance(value, Mapping):
        for key, offset in value.items():
            tp = as_partition(key, what)
            items.append((tp, None if offset is None else _offset_value(offset, tp, what)))
    else:
        for item in _items(value, what):
            tp = as_partition(item, what)
            items.append((tp, item.offset if isinstance(item, _CK_PARTITION) else None))
    result: dict[TopicPartition, int | None] = {}
    for tp, offset in items:
        if offset is None or offset in _USE_COMMITTED:
            result[tp] = None
        elif offset >= 0 or offset in _LOGICAL_START:
            result[tp] = offset
        else:
            raise ValueError(
                f"{what}: {tp} cannot start at offset {offset} (use an offset >= 0, "
                "OFFSET_BEGINNING or OFFSET_END, or none for the committed offset)"
            )
    return result


def as_seek(partition: object, offset: object) -> tuple[TopicPartition, int]:
    """``seek(tp, offset)`` or confluent-kafka's ``seek(TopicPartition(topic, partition, offset))``.

    The offset is >= 0, ``OFFSET_BEGINNING`` or ``OFFSET_END``.

    Raises:
        TypeError / ValueError: naming what is expected.
    """
    tp = as_partition(partition, "seek()")
    if offset is None:
        if not isinstance(partition, _CK_PARTITION):
            raise TypeError(
                "seek(): pass seek(partition, offset), or a confluent_kafka.TopicPartition "
                "carrying the offset"
            )
        chosen = partition.offset
    else:
        chosen = _offset_value(offset, tp, "seek()")
    if chosen < 0 and chosen not in _LOGICAL_START:
        raise ValueError(
            f"seek(): offset of {tp} must be >= 0, OFFSET_BEGINNING or OFFSET_END, got {chosen}"
        )
    return tp, chosen


def commit_offsets_arg(offsets: object, message: object) -> dict[TopicPartition, int] | None:
    """The offsets a commit call asks for; ``message`` commits just past that record.

    As confluent-kafka, a message may also come as the first positional argument
    (``commit(msg)``), and offsets as a list of confluent-kafka TopicPartitions.

    Raises:
        ValueError: offset metadata (see :func:`commit_args` for a commit that keeps it).
    """
    chosen, metadata = commit_args(offsets, message)
    if metadata:
        raise _metadata_refused("commit(offsets=...)", metadata)
    return chosen


def commit_args(
    offsets: object, message: object
) -> tuple[dict[TopicPartition, int] | None, dict[TopicPartition, str]]:
    """:func:`commit_offsets_arg`, and the metadata to commit with the offsets."""
    if isinstance(offsets, _CK_MESSAGE):
        if message is not None:
            raise ValueError("pass offsets or message, not both")
        offsets, message = None, offsets
    if message is not None:
        if offsets is not None:
            raise ValueError("pass offsets or message, not both")
        if not isinstance(message, _CK_MESSAGE):
            raise TypeError(
                f"commit(message=...): expected a confluent_kafka.Message (a record from "
                f"poll/consume), got {_describe(message)}"
            )
        return {_message_partition(message, "commit()"): _message_offset(message) + 1}, {}
    if offsets is None:
        return None, {}
    return as_commit_offsets(offsets, "commit(offsets=...)")


def _message_partition(message: Record, what: str) -> TopicPartition:
    topic, partition = message.topic(), message.partition()
    if topic is None or partition is None or message.offset() is None:
        raise ValueError(f"{what}: the message has no topic, partition or offset")
    return TopicPartition(topic, partition)


def _message_offset(message: Record) -> int:
    offset = message.offset()
    assert offset is not None  # checked by _message_partition
    return int(offset)


def encode_group_metadata(
    group_id: str, generation: int, member_id: str, instance_id: str | None
) -> bytes:
    """librdkafka's serialized consumer group metadata (``CGMDv2``).

    confluent-kafka's ``consumer_group_metadata()`` returns these bytes and its
    ``send_offsets_to_transaction`` reads them back
    (``rd_kafka_consumer_group_metadata_read``): a magic, the generation as a
    native-endian int32, NUL-terminated group and member ids, then a byte
    saying whether a NUL-terminated group instance id follows (0: it does).
    """
    out = b"CGMDv2:" + struct.pack("=i", generation)
    out += group_id.encode() + b"\0" + member_id.encode() + b"\0"
    if instance_id is None:
        return out + b"\x01"
    return out + b"\x00" + instance_id.encode() + b"\0"


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

    def __init__(
        self,
        config: ConsumerConfig,
        driver: Driver,
        clock: Callable[[], float],
        deserializers: Deserializers | None = None,
    ) -> None:
        self.config = config
        self.driver = driver
        self._deserializers = deserializers or None
        dataplane = driver.dataplane
        self._deliver: Callable[[list[Record], int], list[Record]] | None = None
        self._hold: Callable[[object, list[Record]], None] | None = None
        self._withhold: Callable[[Iterable[TopicPartition]], None] | None = None
        self._abandon_take: Callable[[], None] | None = None
        if isinstance(dataplane, HoldsTakenRecords):
            self._deliver, self._hold = dataplane.deliver, dataplane.hold
            self._withhold, self._abandon_take = dataplane.withhold, dataplane.abandon_take
        self.closed = False
        self.closing = False
        """True while ``close()`` runs: the revoke callback it runs may still commit."""
        self._clock = clock
        self._last_poll_event = -math.inf
        self._poll_event_interval = min(POLL_EVENT_INTERVAL, config.max_poll_interval_ms / 10_000)
        self._auto_commit_interval = config.auto_commit_interval_ms / 1000
        self._next_auto_commit = -math.inf
        self._wakeup_pending = False
        self._answer_wait = ANSWER_SLICE  # see wait_slice
        # What the listener was told this member holds (assigned minus revoked
        # and lost): a close that ends before the member handed these back must
        # still tell the listener they are gone (see close()).
        self._told: set[TopicPartition] = set()
        self.interrupted: BaseException | None = None
        """A BaseException (not an Exception) a listener method raised during the close."""

    def wakeup(self) -> None:
        """Make the current (or next) poll raise :class:`WakeupError`; any thread."""
        self._wakeup_pending = True

    def check_wakeup(self) -> None:
        """Raise :class:`WakeupError` once per :meth:`wakeup`."""
        if self._wakeup_pending:
            self._wakeup_pending = False
            raise WakeupError("wakeup() interrupted the poll")

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

    def session_lapsed(self) -> bool:
        """Whether the member's session has surely run out while it owns partitions.

        The loop has not acted on it yet (it stops fetching and reports the
        partitions lost, or a late heartbeat answer keeps them): records of
        those partitions may be another member's already. The shells take none
        from the data plane meanwhile (they stay there: a session that turns out
        alive loses nothing), waiting :data:`LAPSED_WAIT` at a time. A process
        stopped past its session and resumed runs the application's thread and
        the loop's at once; without this its next poll handed out a batch that
        another member was processing too.
        """
        at = self.driver.core.session_lapses_at
        return at is not None and time.monotonic() >= at

    def give_back(self, batch: Sequence[Record]) -> None:
        """Put back records the application has not seen, taken from the data plane earlier.

        For records already settled (see :meth:`hand_out`): the aiokafka
        facade's, which it holds for a later call. Each partition's next record
        is its first one in ``batch`` again; a partition no longer fetching is
        left alone (it starts from its committed offset when it comes back).
        """
        dataplane = self.driver.dataplane
        for tp, offset in first_offsets(batch).items():
            if tp not in dataplane.assigned:
                continue  # already stopped by the loop: nothing to put back
            try:
                dataplane.seek(tp, offset)
            except (KgroupError, confluent_kafka.KafkaException) as exc:
                # Being unassigned meanwhile: it starts from its committed offset.
                log.debug("could not put %s back at %d: %s", tp, offset, exc)

    def settle(self, batch: list[Record], count: int) -> list[Record]:
        """Settle ``batch``, a list the data plane's ``consume`` returned: its first
        ``count`` records go to the application (returned), the rest go back.

        Every batch taken is settled exactly once, whatever happens after the
        take: until then the data plane counts it as not handed out, so a commit
        the loop makes meanwhile (a revocation's) does not pass it (see
        :class:`~kgroup.runtime.interfaces.HoldsTakenRecords`). Records of
        partitions stopped or seeked since the take are not returned.
        """
        deliver = self._deliver
        if deliver is not None:
            return deliver(batch, count)
        if count < len(batch):
            self.give_back(batch[count:])
        return batch[:count] if count < len(batch) else batch

    def abandon_take(self) -> None:
        """An exception ended a poll: put back the batch this thread took and did not
        settle (Ctrl-C between the take and the settle), or its partitions'
        positions would stop at it for good."""
        abandon = self._abandon_take
        if abandon is not None:
            abandon()

    def withhold_assigned(self) -> None:
        """The data plane hands out no record of its partitions until they stop
        (``unsubscribe()``); without a data plane that can, nothing."""
        withhold = self._withhold
        if withhold is not None:
            withhold(self.driver.dataplane.assigned)

    def hold(self, owner: object, records: list[Record]) -> None:
        """``records`` are settled but ``owner`` keeps them from the application for
        now (the aiokafka facade's records of partitions it was not asked for):
        positions do not count them until ``owner`` holds other records or none.
        Without a data plane that can (see :meth:`settle`), nothing."""
        hold = self._hold
        if hold is not None:
            hold(owner, records)

    def hand_out(self, batch: list[Record]) -> list[Record]:
        """What of a freshly taken ``batch`` reaches the application; the rest goes back.

        Nothing while the session lapsed during the record wait (see
        :meth:`session_lapsed`). With deserializers (as confluent-kafka's
        ``DeserializingConsumer``) keys and values are deserialized in place; a
        failing record is never lost (the Java client's
        ``RecordDeserializationException``): it and the records after it go
        back, so the consumer's position stays at it and no commit passes it.
        With records before it those are returned, and the next poll fetches it
        again; otherwise this raises, and so does every poll that reaches it
        until the application seeks past it. Whatever ends this call early
        (Ctrl-C in a deserializer) puts the whole batch back first.

        Raises:
            KeyDeserializationError, ValueDeserializationError: the first record
                of ``batch`` failed, naming its partition and offset.
        """
        if self.session_lapsed():
            self.settle(batch, 0)  # the lapse came during the record wait
            return []
        if self._deserializers is None:
            return self.settle(batch, len(batch))
        try:
            count, error = self._deserialize(batch)
        except BaseException:
            self.settle(batch, 0)
            raise
        records = self.settle(batch, count)
        if error is not None and not count:
            raise error
        return records

    def _deserialize(self, batch: list[Record]) -> tuple[int, DeserializationError | None]:
        """Deserialize ``batch`` in place up to its first failing record: how many
        succeeded, and the error of the one that failed (None: all did)."""
        deserializers = self._deserializers
        assert deserializers is not None
        key_of, value_of = deserializers.key, deserializers.value
        for index, record in enumerate(batch):
            topic, headers = record.topic(), record.headers()
            failed: type[DeserializationError] = KeyDeserializationError
            try:
                key = record.key()
                if key_of is not None:
                    key = key_of(key, SerializationContext(topic or "", MessageField.KEY, headers))
                failed = ValueDeserializationError
                value = record.value()
                if value_of is not None:
                    value = value_of(
                        value, SerializationContext(topic or "", MessageField.VALUE, headers)
                    )
            except Exception as exc:
                error = failed(
                    TopicPartition(topic or "", record.partition() or 0),
                    record.offset() or 0,
                    record,
                    exc,
                )
                error.__cause__ = exc
                return index, error
            # Both set only once both succeeded: a record that failed keeps its bytes.
            record.set_key(key)
            record.set_value(value)
        return len(batch), None

    def service_due(self) -> bool:
        """Whether :meth:`service` has anything to do now (the shells skip it if not).

        Nothing, at most poll slices of an idle member: building and running
        the generator for nothing was a fair part of such a poll's CPU.
        """
        driver = self.driver
        now = self._clock()
        return (
            self.closed
            or bool(driver.app_work)
            or driver.fatal is not None
            or driver.core.truncation is not None
            or now - self._last_poll_event >= self._poll_event_interval
            or (self.config.enable_auto_commit and now >= self._next_auto_commit)
        )

    def wait_slice(self) -> float:
        """How long the application's thread may wait in the data plane at a time.

        No call from the loop's thread cuts a librdkafka wait short, so work the
        loop queues (a rebalance callback) would wait for the slice to end: up to
        :data:`SERVICE_SLICE`, once per rebalance step and member, which made a
        rebalance of ten members take 1.6x librdkafka's time. Work comes from
        group answers, so the slice ends when the answer to the member's next
        request is usually in (``Driver.quiet_until``), and is short
        (:data:`ANSWER_SLICE`, doubling up to :data:`ANSWER_SLICE_MAX`) while an
        answer is awaited or being handled: about one more wake per heartbeat,
        none in between.
        """
        driver = self.driver
        if driver.answers_pending:
            wait = self._answer_wait
            self._answer_wait = min(wait * 2, ANSWER_SLICE_MAX)
            return wait
        self._answer_wait = ANSWER_SLICE
        left = driver.quiet_until - time.monotonic() + MIN_WAIT
        return SERVICE_SLICE if left >= SERVICE_SLICE else max(ANSWER_SLICE, left)

    def service(self, wait: float = 0.0) -> Steps[None]:
        """A point where the application holds no unprocessed record: do the rebalance work.

        ``wait``: how long the poll may still wait (seconds). A commit before a
        revocation that this call releases is waited for up to that long, so the
        revoke callback runs in this poll rather than the next one.
        """
        self.check_open()
        driver = self.driver
        now = self._clock()
        if now - self._last_poll_event >= self._poll_event_interval:
            self._last_poll_event = now
            if driver.core.poll_events_wanted:
                yield OnLoop(driver.poll_called)
            else:
                # A settled member: noted without a hop, passed on by the driver
                # before the poll timer expires (RuntimeCore.poll_events_wanted).
                driver.note_poll()
        if self.config.enable_auto_commit and now >= self._next_auto_commit:
            self._next_auto_commit = now + self._auto_commit_interval
            yield OnLoop(driver.auto_commit)
        if driver.app_work:
            # The member may wait for the poll after a rebalance step (a retry
            # after a listener raised): the next poll tells it at once.
            self._last_poll_event = -math.inf
            yield from self.drain(closing=False, wait=wait)
        if driver.fatal is not None:
            raise driver.fatal
        truncation = driver.core.truncation
        if truncation is not None:
            # Until the application seeks them (Java's LogTruncationException, raised
            # again while the partitions wait): they must not start unnoticed.
            raise truncation

    def drain(self, *, closing: bool, wait: float = 0.0) -> Steps[None]:
        """Carry out the queued application work, oldest first.

        Raises the first listener exception or error (after reporting it), except
        while ``closing``: then they are logged and the close goes on. ``wait``:
        how long a commit before a revocation released here is waited for.
        """
        driver = self.driver
        work = driver.app_work
        app_code_ran = False
        while work:
            item = work.popleft()
            if app_code_ran and not closing and isinstance(item, CallbackWork | CommitResultWork):
                # The application is still inside poll(): work queued while its
                # previous callback ran (a new target during a slow revoke) runs now,
                # but the poll timer restarts first, as Java's poll loop sends a
                # PollEvent before each batch of callbacks. Without it a chain of
                # callbacks, each well within max.poll.interval.ms, added up past it:
                # the member left, rejoined into the same chain and never settled.
                self._last_poll_event = self._clock()
                yield OnLoop(driver.poll_called)
            app_code_ran = isinstance(item, CallbackWork | CommitResultWork)
            if isinstance(item, CallbackWork):
                if item.kind is CallbackKind.ASSIGNED:
                    self._told |= item.partitions
                else:
                    self._told -= item.partitions
                method = listener_method(driver.core.listener, item.kind)
                started = self._clock()
                error = None if method is None else (yield RunListener(method, item.partitions))
                if method is not None:
                    driver.telemetry.callback_done(
                        item.kind, item.partitions, self._clock() - started, error
                    )
                if error is not None and closing:
                    if isinstance(error, Exception):
                        log.error(
                            "rebalance callback %s failed during close: %r", item.kind.value, error
                        )
                    else:
                        # Ctrl-C (or a cancellation) inside a revoke callback of the
                        # close: the close still commits and leaves (else the group
                        # waits a session timeout for this member), then raises it.
                        self.interrupted = self.interrupted or error
                    error = None
                yield OnLoop(driver.callback_done, (item, error, error is not None))
                if error is not None:
                    raise error
            elif isinstance(item, RevocationCommitWork):
                yield OnLoop(driver.release_revocation_commit, (item.token,))
                # The revoke callback follows the commit's answer: waiting for it
                # here (a round trip) runs the callback in this poll, as the Java
                # client's poll does. Not waiting cost a whole poll interval per
                # revocation; with slow polls and callbacks the step then overran
                # the rebalance timeout, and the member was removed round after
                # round (simulator seed 254489).
                # Never past the commit's own request timeout (a poll without
                # one included): a runtime that ends meanwhile answers no more.
                until = self._clock() + min(wait, self.config.request_timeout_ms / 1000)
                while not work and driver.core.revocation_commit_waits(item.token):
                    left = until - self._clock()
                    if (
                        left <= 0
                        or self._wakeup_pending
                        or driver.fatal is not None
                        or driver.is_closed()
                    ):
                        break
                    yield WaitForWork(min(SERVICE_SLICE, left))
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

    def raise_interrupted(self) -> None:
        """Re-raise a KeyboardInterrupt, SystemExit or cancellation a listener method
        raised during the close, now that the close is done."""
        interrupted, self.interrupted = self.interrupted, None
        if interrupted is not None:
            raise interrupted

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
        # The runtime waits for asynchronous commits in flight as it stops, so
        # a result may be queued just before it ended, unseen by the loop:
        # its callback is still the application's to hear (the rest of the
        # work left is moot once the runtime ended).
        while driver.is_closed() and driver.app_work:
            item = driver.app_work.popleft()
            if isinstance(item, CommitResultWork):
                item.callback(item.offsets, item.error)
        yield from self._tell_lost_on_close()

    def _tell_lost_on_close(self) -> Steps[None]:
        """The close ended (in time or not) with partitions the listener still thinks it
        holds: tell it they are lost, as the Java client's close runs the callbacks
        whatever the coordinator answered.

        It happens when the close deadline passes before the member handed them
        back, typically while the commit before the revocation waits for a
        coordinator that does not answer (measured: a broker down during
        ``close(5)`` left the listener told of nothing, under both protocols).
        Lost, not revoked: the member can no longer commit for them.
        """
        # Handed back without a callback (the listener has no method for it): not lost.
        left = frozenset(self._told) - frozenset(self.driver.core.released_unheard)
        self._told = set()
        if not left:
            return
        method = listener_method(self.driver.core.listener, CallbackKind.LOST)
        log.warning(
            "group %s: close ended before %s were handed back (the coordinator did not "
            "answer in time); telling the rebalance listener they are lost",
            self.config.group_id,
            sorted(left),
        )
        if method is not None:
            error = yield RunListener(method, left)
            if isinstance(error, Exception):
                log.error("rebalance callback on_partitions_lost failed during close: %r", error)
            elif error is not None:
                self.interrupted = self.interrupted or error

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
        self._auto_offset_store = auto_offset_store(config)
        deserializers = Deserializers.of(config)
        self._dataplane = DataPlane(self._config) if dataplane is None else dataplane
        self._telemetry = open_telemetry(self._config)
        self._driver = Driver(
            self._config,
            self._dataplane,
            wakeup=wakeup,
            transport=transport,
            auto_offset_store=self._auto_offset_store,
            telemetry=self._telemetry,
        )
        self._core = FrontEndCore(self._config, self._driver, clock, deserializers)
        self._subscription: list[str] = []

    def _on_loop(self, fn: Callable[..., T], *args: object) -> T:
        raise NotImplementedError

    # ------------------------------------------------------------------ views

    @property
    def group_protocol(self) -> GroupProtocol:
        """The group protocol in use: CONSUMER or CLASSIC (``auto`` is resolved before joining).

        With the classic protocol ``member_epoch`` is the generation of the
        assignment held (the last SyncGroup heard).
        """
        return self._driver.session.group_protocol

    @property
    def member_id(self) -> str:
        """The member id: consumer protocol, generated by the client and kept for the
        consumer's life; classic, assigned by the broker at the first JoinGroup
        ("" before it, and again after the broker forgets the member)."""
        return self._driver.session.member_id

    @property
    def member_epoch(self) -> int:
        """The member epoch (consumer protocol): 0 while joining, > 0 in the group,
        < 0 after leaving. Classic: the generation, -1 before the first."""
        return self._driver.session.generation_or_epoch

    @property
    def group_instance_id(self) -> str | None:
        """``group.instance.id`` (static membership), or None."""
        return self._config.group_instance_id

    @property
    def config(self) -> ConsumerConfig:
        """The validated configuration."""
        return self._config

    def metrics(self) -> ConsumerMetrics:
        """A snapshot of the consumer's counters and latency histograms.

        Always available (telemetry events need not be on). Lag per partition
        and fetched bytes come from librdkafka's statistics: set
        ``statistics.interval.ms`` to have them. See ``docs/telemetry.md``.
        """
        statistics = getattr(self._dataplane, "statistics", None)
        return self._telemetry.snapshot(statistics() if callable(statistics) else None)

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
            InvalidSubscriptionError: names mixed with a regex, several regexes, a
                regex the protocol's engine cannot compile (:func:`check_regex`), or
                an empty or non-string topic name.
            MixedAssignmentError: partitions were assigned with ``assign()``
                (call ``unassign()`` first).
            TypeError: ``listener`` has none of the listener methods.
        """
        self._core.check_open()
        check_listener(listener)
        names, regex = parse_subscription(topics, pattern)
        if regex is not None:
            check_regex(regex, self._config.group_protocol)
        self._on_loop(self._driver.subscribe, names, regex, listener)
        self._subscription = [regex] if regex is not None else sorted(names)

    def unsubscribe(self) -> None:
        """Leave the group; the listener's revoke callback runs in a later poll.

        No poll returns a record of the old subscription after this: the member
        stops its partitions on the event loop moments later, and until then
        the data plane withholds their records (as the Java client and
        librdkafka, whose ``unsubscribe()`` drops them at once).
        """
        self._core.check_open()
        self._on_loop(self._driver.unsubscribe)
        if self._subscription:
            self._core.withhold_assigned()
        self._subscription = []

    def subscription(self) -> list[str]:
        """The subscribed topic names, or ``[regex]`` (empty: not subscribed)."""
        self._core.check_open()
        return list(self._subscription)

    # ------------------------------------------------------ manual assignment

    def assign(self, partitions: Partitions | Mapping[Any, int | None]) -> None:
        """Fetch exactly these partitions, without group membership (replaces a previous assign).

        As confluent-kafka's ``assign()``: a partition starts at the offset its
        confluent-kafka ``TopicPartition`` carries (>= 0, ``OFFSET_BEGINNING``,
        ``OFFSET_END``), else at the group's committed offset, else where
        ``auto.offset.reset`` says. A dict ``{partition: offset or None}`` works
        too. Commits go to the group as a simple consumer's (generation -1, no
        member id); the broker accepts them while the group has no members.

        Raises:
            MixedAssignmentError: the consumer is subscribed.
        """
        self._core.check_open()
        self._on_loop(
            self._driver.assign,
            as_assignment(partitions, "assign()"),
            False,  # not incremental
        )

    def incremental_assign(self, partitions: Partitions | Mapping[Any, int | None]) -> None:
        """Add partitions to the manual assignment; as :meth:`assign` otherwise.

        Raises:
            MixedAssignmentError: the consumer is subscribed.
            AlreadyAssignedError: a partition is assigned already.
        """
        self._core.check_open()
        self._on_loop(self._driver.assign, as_assignment(partitions, "incremental_assign()"), True)

    def incremental_unassign(self, partitions: Partitions) -> None:
        """Stop fetching these manually assigned partitions.

        Raises:
            MixedAssignmentError: the consumer is subscribed.
            NotAssignedError: a partition is not assigned.
        """
        self._core.check_open()
        self._on_loop(self._driver.unassign, as_partitions(partitions, "incremental_unassign()"))

    def unassign(self) -> None:
        """Stop fetching every manually assigned partition.

        Raises:
            MixedAssignmentError: the consumer is subscribed (the group assigns its partitions).
        """
        self._core.check_open()
        self._on_loop(self._driver.unassign, None)

    def paused(self) -> frozenset[TopicPartition]:
        """The partitions paused with :meth:`pause` and not resumed (as Java's ``paused()``)."""
        self._core.check_open()
        return self._on_loop(self._driver.paused)

    # ---------------------------------------------------- exactly-once, wakeup

    def consumer_group_metadata(self) -> bytes:
        """The group metadata for ``Producer.send_offsets_to_transaction`` (confluent-kafka).

        The same serialized form confluent-kafka's own ``consumer_group_metadata()``
        returns (librdkafka's ``CGMDv2``), carrying this member's id, its member
        epoch (classic: generation) and ``group.instance.id``: the broker fences
        the transaction's offset commit if the member is no longer current.
        With manual assignment: generation -1 and no member id.
        """
        self._core.check_open()
        driver = self._driver
        manual = self._on_loop(lambda: driver.manual)
        member_id = "" if manual else driver.session.member_id
        generation = -1 if manual else driver.session.generation_or_epoch
        return encode_group_metadata(
            self._config.group_id,
            generation,
            member_id,
            None if manual else self._config.group_instance_id,
        )

    def wakeup(self) -> None:
        """Interrupt a blocked poll, consume or iteration: it raises :class:`WakeupError`.

        Safe from any thread (or another task). If none is blocked, the next
        one raises instead (once), as Java's ``wakeup()``.
        """
        # Only a flag: polls look at it every slice (at most 100 ms), and setting
        # it is safe from any thread, unlike the async shell's anyio.Event.
        self._core.wakeup()

    def switch_protocol(self, protocol: GroupProtocol | str) -> None:
        """Move this live member to the other group protocol: ``"consumer"`` or ``"classic"``.

        The member leaves on the protocol in use exactly as :meth:`unsubscribe`
        does (the listener's revoke callback runs in a later poll; commits made
        there count), then joins again on ``protocol`` with the same
        subscription, listener and ``group.instance.id``. The broker hands its
        partitions over through its conversion of the group (docs/migration.md),
        so a fleet can migrate by a configuration push instead of a redeploy.
        Returns at once; :attr:`group_protocol` tells the protocol in use, and
        keeps telling the old one until the leave is done. Asking for the
        protocol in use does nothing.

        Settings of the other protocol come from the configuration when given
        (``partition.assignment.strategy``, ``session.timeout.ms`` ... for
        classic) and are defaults otherwise.

        Raises:
            ConfigError: ``protocol`` is not ``consumer`` or ``classic``.
            RuntimeError: not subscribed.
        """
        self._core.check_open()
        try:
            target = GroupProtocol(protocol)
        except ValueError:
            target = GroupProtocol.AUTO
        if target is GroupProtocol.AUTO:
            raise ConfigError(f"switch_protocol takes 'consumer' or 'classic', got {protocol!r}")
        self._on_loop(self._driver.switch_protocol, target)

    # --------------------------------------------------------------- offsets

    def commit_async(
        self,
        offsets: CommitOffsets | Record | None = None,
        *,
        message: Record | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """Start a commit and return at once; ``callback(offsets, error)`` runs in a later poll."""
        chosen, metadata = self._commit_args(offsets, message)
        self._on_loop(self._driver.commit_in_background, chosen, callback, metadata)

    def _commit_args(
        self, offsets: object, message: object
    ) -> tuple[dict[TopicPartition, int] | None, dict[TopicPartition, str]]:
        """The offsets a commit asks for (None: the positions) and their metadata;
        raises when closed.

        Allowed while ``close()`` runs (from the revoke callback it runs).
        """
        self._core.check_may_commit()
        chosen, metadata = commit_args(offsets, message)
        if chosen:
            self._check_committable(chosen)
        return chosen, metadata

    def _check_committable(self, chosen: Mapping[TopicPartition, int]) -> None:
        """Refuse explicit offsets none of which this consumer may commit.

        The driver leaves out partitions the member does not own; with none
        left the commit would return ``{}`` and the application would believe
        its progress saved.

        Raises:
            NothingToCommitError: naming why (not subscribed nor assigned, or none owned).
        """
        driver = self._driver
        owned: frozenset[TopicPartition] = self._on_loop(driver.owned)
        if not owned.isdisjoint(chosen):
            return
        asked = ", ".join(str(tp) for tp in sorted(chosen, key=str))
        if not self._subscription and not self._on_loop(lambda: driver.manual):
            raise NothingToCommitError(
                f"commit of {asked}: this consumer is neither subscribed nor assigned, so it "
                "can commit nothing (subscribe() or assign() first)"
            )
        held = ", ".join(str(tp) for tp in sorted(owned, key=str)) or "none"
        raise NothingToCommitError(
            f"commit of {asked}: this consumer owns none of these partitions (it owns: {held}); "
            "a commit covers only partitions assigned to it. If they were assigned before, "
            "they were revoked or lost (a rebalance, or this member left the group after "
            "max.poll.interval.ms without a poll): another member owns them now, and this "
            "member's work on them will be redone there"
        )

    def store_offsets(self, message: Record | None = None, offsets: Offsets | None = None) -> None:
        """Mark progress for the next commit (``enable.auto.offset.store=false``).

        ``message``: just past that record; ``offsets``: the next offset to read
        per partition. Commits without explicit offsets (``commit()``,
        auto-commit, the commit before a revocation and on close) then cover
        only what was stored, not every record handed out.

        Raises:
            ConfigError: ``enable.auto.offset.store`` is not false.
            NotAssignedError: a partition is not assigned to this consumer.
        """
        self._core.check_may_commit()
        if self._auto_offset_store:
            raise ConfigError(
                "store_offsets() needs enable.auto.offset.store=false in the config "
                "(with the default true, every record handed out counts as processed)"
            )
        if (message is None) == (offsets is None):
            raise TypeError("store_offsets(): pass a message or offsets (exactly one)")
        if message is not None:
            chosen = commit_offsets_arg(None, message)
        else:
            chosen = as_offsets(offsets, "store_offsets(offsets=...)")
        assert chosen is not None
        self._on_loop(self._driver.store_offsets, chosen)

    def position(self, partitions: Partitions) -> dict[TopicPartition, int]:
        """Offset of the next record to hand out, per fetching partition that has one."""
        return self._dataplane.positions(as_partitions(partitions, "position()"))

    def seek(
        self,
        partition: TopicPartition | confluent_kafka.TopicPartition,
        offset: int | None = None,
    ) -> None:
        """Make ``offset`` the next record of an assigned ``partition``.

        ``seek(tp, offset)``, or as confluent-kafka ``seek(TopicPartition(topic,
        partition, offset))``; the offset may also be ``OFFSET_BEGINNING`` or
        ``OFFSET_END``. Works from ``on_partitions_assigned`` too: the partition
        then starts there.

        Raises:
            NotAssignedError: the partition is not assigned to this consumer.
        """
        self._core.check_open()
        tp, chosen = as_seek(partition, offset)
        self._on_loop(self._driver.seek, tp, chosen)

    def pause(self, partitions: Partitions) -> None:
        """Stop handing out records of these partitions until resumed.

        Works from ``on_partitions_assigned`` too: the partitions start paused.
        """
        self._core.check_open()
        self._on_loop(self._driver.pause, as_partitions(partitions, "pause()"))

    def resume(self, partitions: Partitions) -> None:
        """Resume partitions paused with :meth:`pause`."""
        self._core.check_open()
        self._on_loop(self._driver.resume, as_partitions(partitions, "resume()"))

    # -------------------------------------------------- offsets and lookups
    # Each returns the work ready to run, so that the shells differ only in how
    # they run it: the blocking consumer calls it (the group's committed offsets
    # through its portal), the async one awaits it (librdkafka's blocking
    # lookups in a worker thread, off the event loop).

    def _committed_fetch(
        self, partitions: Partitions, timeout: float
    ) -> Callable[[], Awaitable[dict[TopicPartition, int | None]]]:
        """``committed(partitions)``: the driver's fetch of the group's committed offsets."""
        self._core.check_open()
        wanted = as_partitions(partitions, "committed()")
        driver = self._driver

        async def fetch() -> dict[TopicPartition, int | None]:
            return await driver.committed(wanted, timeout=timeout)

        return fetch

    def _committed_with_metadata_fetch(
        self, partitions: Partitions, timeout: float
    ) -> Callable[[], Awaitable[dict[TopicPartition, OffsetAndMetadata | None]]]:
        """``committed_with_metadata(partitions)``: as :meth:`_committed_fetch`."""
        self._core.check_open()
        return functools.partial(
            self._driver.committed_with_metadata,
            as_partitions(partitions, "committed_with_metadata()"),
            timeout=timeout,
        )

    def _watermarks_lookup(
        self,
        partition: TopicPartition | confluent_kafka.TopicPartition,
        timeout: float | None,
        cached: bool,
    ) -> Callable[[], tuple[int, int]]:
        """``get_watermark_offsets(partition)``: the data plane's lookup."""
        tp = as_partition(partition, "get_watermark_offsets()")
        lookups, wait = self._lookups(), self._lookup_timeout(timeout)

        def lookup() -> tuple[int, int]:
            result: tuple[int, int] = lookups.watermarks(tp, cached=cached, timeout=wait)
            return result

        return lookup

    def _offsets_for_times_lookup(
        self, partitions: Offsets, timeout: float | None
    ) -> Callable[[], dict[TopicPartition, int | None]]:
        """``offsets_for_times(partitions)``: the data plane's lookup."""
        query = as_offsets(partitions, "offsets_for_times()", offsets=False)
        lookups, wait = self._lookups(), self._lookup_timeout(timeout)

        def lookup() -> dict[TopicPartition, int | None]:
            result: dict[TopicPartition, int | None] = lookups.offsets_for_times(
                query, timeout=wait
            )
            return result

        return lookup

    def _list_topics_lookup(self, topic: str | None, timeout: float | None) -> Callable[[], Any]:
        """``list_topics(topic)``: the data plane's lookup (confluent-kafka's metadata)."""
        lookups, wait = self._lookups(), self._lookup_timeout(timeout)
        return lambda: lookups.list_topics(topic, timeout=wait)

    def _lookups(self) -> Any:
        """The data plane, if it can answer cluster lookups (librdkafka's can)."""
        self._core.check_open()
        if not hasattr(self._dataplane, "watermarks"):
            raise KgroupError(
                f"this data plane ({type(self._dataplane).__name__}) cannot look up offsets "
                "or topics; the default librdkafka data plane can"
            )
        return self._dataplane

    def _lookup_timeout(self, timeout: float | None) -> float:
        """A lookup's timeout in seconds: None (or < 0) is ``request.timeout.ms``."""
        if timeout is None or timeout < 0:
            return self._config.request_timeout_ms / 1000
        return float(timeout)
