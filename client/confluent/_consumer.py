"""A drop-in for ``confluent_kafka.Consumer``: change the import, keep the application.

``from kgroup.confluent import Consumer`` takes confluent-kafka's config dict,
method signatures and callbacks, and returns confluent-kafka's own types
(``confluent_kafka.Message``, lists of ``confluent_kafka.TopicPartition``);
errors are ``confluent_kafka.KafkaException(KafkaError(code))`` with
confluent-kafka's codes. Underneath is the blocking :class:`kgroup.Consumer`:
this module only translates arguments, results, errors and the rebalance
callbacks. ``group.protocol`` defaults to ``classic``, as confluent-kafka's.
What differs is in ``docs/porting-confluent.md``.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, Self

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from kgroup import errors as kerrors
from kgroup._settings import bool_setting
from kgroup.sync import Consumer as NativeConsumer
from kgroup.types import TopicPartition as KTopicPartition

__all__ = ["Consumer", "KafkaError", "KafkaException", "Message", "TopicPartition"]

Callback = Callable[["Consumer", list[TopicPartition]], Any]

# Config values confluent-kafka hands over as Python objects rather than strings.
_OBJECT_KEYS: Final = frozenset(
    {"on_commit", "error_cb", "stats_cb", "throttle_cb", "logger", "oauth_cb"}
)

# Offsets a callback's assign() may carry that mean "start here" (the rest: committed).
_START_OFFSETS: Final = frozenset({confluent_kafka.OFFSET_BEGINNING, confluent_kafka.OFFSET_END})

_CLOSED_MESSAGE: Final = "Consumer closed"

_COMMITTED_WAIT: Final = 10.0
"""Seconds ``committed()`` waits when confluent-kafka would wait without limit."""


def _wait(timeout: float | None) -> float | None:
    """confluent-kafka's timeout (None or negative: no limit) as kgroup's (None: its default)."""
    return None if timeout is None or timeout < 0 else timeout


def _config_value(key: str, value: object) -> object:
    """A config value as confluent-kafka passes it to librdkafka: a string, but for callbacks."""
    if key in _OBJECT_KEYS or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_EOF_KEY: Final = "enable.partition.eof"

_EOF_SLICE: Final = 0.1
"""Seconds one record wait lasts before looking for partitions at their end again."""


def wants_eof(config: dict[str, Any]) -> bool:
    """Take ``enable.partition.eof`` out of the config: the facade reports EOF itself.

    kgroup's data plane keeps librdkafka's own EOF events off (kgroup manages
    that key), so the facade compares positions with the high watermarks.
    """
    try:
        return bool_setting({_EOF_KEY: config.pop(_EOF_KEY, "false")}, _EOF_KEY, False)
    except kerrors.ConfigError as exc:
        raise KafkaException(KafkaError(KafkaError._INVALID_ARG, str(exc))) from exc


def build_config(config: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """confluent-kafka's constructor arguments as kgroup's config.

    As confluent-kafka: one dict and/or keyword arguments (keywords win), a
    non-string value converted with ``str()``, ``group.protocol`` classic
    unless set.
    """
    merged: dict[str, Any] = dict(config or {})
    merged.update(kwargs)
    topic_level = merged.pop("default.topic.config", None)
    if topic_level is not None:
        # Deprecated in confluent-kafka but still accepted: its topic-level keys
        # (auto.offset.reset above all) as if set at the top; a top-level key wins.
        if not isinstance(topic_level, Mapping):
            raise KafkaException(
                KafkaError(
                    KafkaError._INVALID_ARG,
                    f"default.topic.config must be a dict, got {type(topic_level).__name__}",
                )
            )
        merged = {**topic_level, **merged}
    # confluent-kafka accepts it and librdkafka ignores it outside share consumers:
    # an application that sets it keeps working, as there (kgroup.Consumer refuses it).
    merged.pop("max.poll.records", None)
    result = {key: _config_value(key, value) for key, value in merged.items()}
    result.setdefault("group.protocol", "classic")
    return result


def _code(exc: kerrors.KgroupError) -> int:
    """confluent-kafka's error code for a kgroup error."""
    if isinstance(exc, kerrors.BrokerError):
        return int(exc.code)
    if isinstance(exc, kerrors.CommitFailedError) and isinstance(
        exc.__cause__, kerrors.BrokerError
    ):
        # librdkafka reports the broker's refusal (ILLEGAL_GENERATION,
        # REBALANCE_IN_PROGRESS, ...), and ported code tests for those codes.
        return int(exc.__cause__.code)
    if isinstance(exc, kerrors.DataPlaneError) and exc.code is not None:
        return exc.code  # librdkafka's own code, as confluent-kafka raises it
    if isinstance(exc, kerrors.NothingToCommitError):
        return KafkaError._NO_OFFSET
    if isinstance(
        exc, kerrors.ConfigError | kerrors.InvalidSubscriptionError | kerrors.NotAssignedError
    ):
        return KafkaError._INVALID_ARG
    if isinstance(exc, kerrors.AlreadyAssignedError):
        return KafkaError._CONFLICT
    if isinstance(exc, kerrors.MixedAssignmentError):
        return KafkaError._STATE
    if isinstance(exc, kerrors.RequestTimeoutError):
        return KafkaError._TIMED_OUT
    if isinstance(exc, kerrors.TransportError):
        return KafkaError._TRANSPORT
    if isinstance(exc, kerrors.AuthenticationError):
        return KafkaError._AUTHENTICATION
    return KafkaError._FAIL


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """kgroup's errors as confluent-kafka raises them.

    A closed consumer is confluent-kafka's ``RuntimeError``; argument errors
    (``TypeError``/``ValueError`` that are not kgroup's) pass through, as there.
    """
    try:
        yield
    except kerrors.ConsumerClosedError as exc:
        raise RuntimeError(_CLOSED_MESSAGE) from exc
    except kerrors.KgroupError as exc:
        raise KafkaException(KafkaError(_code(exc), str(exc))) from exc


def _peer(tp: KTopicPartition, offset: int = confluent_kafka.OFFSET_INVALID) -> TopicPartition:
    return TopicPartition(tp.topic, tp.partition, offset)


def _peers(partitions: Iterable[KTopicPartition]) -> list[TopicPartition]:
    return [_peer(tp) for tp in sorted(partitions)]


def _key(tp: TopicPartition) -> KTopicPartition:
    return KTopicPartition(tp.topic, tp.partition)


class _Callbacks:
    """confluent-kafka's ``on_assign``/``on_revoke``/``on_lost`` as a kgroup listener.

    kgroup tells deltas; that is confluent-kafka's rule on cooperative groups
    and the consumer protocol, and on classic eager groups kgroup revokes and
    assigns the whole assignment at each rebalance, so the deltas are the full
    sets confluent-kafka gives there. Without ``on_lost``, lost partitions go
    to ``on_revoke``, as confluent-kafka does.
    """

    def __init__(
        self,
        facade: Consumer,
        on_assign: Callback | None,
        on_revoke: Callback | None,
        on_lost: Callback | None,
    ) -> None:
        self._facade = facade
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._on_lost = on_lost if on_lost is not None else on_revoke

    def on_partitions_assigned(self, partitions: frozenset[KTopicPartition]) -> None:
        self._run(self._on_assign, partitions, assigning=True)

    def on_partitions_revoked(self, partitions: frozenset[KTopicPartition]) -> None:
        self._run(self._on_revoke, partitions, assigning=False)

    def on_partitions_lost(self, partitions: frozenset[KTopicPartition]) -> None:
        self._run(self._on_lost, partitions, assigning=False)

    def _run(
        self, callback: Callback | None, partitions: frozenset[KTopicPartition], *, assigning: bool
    ) -> None:
        if callback is None:
            return
        facade = self._facade
        facade._in_callback = "assign" if assigning else "revoke"
        try:
            callback(facade, _peers(partitions))
        finally:
            facade._in_callback = None


class Consumer:
    """confluent-kafka's ``Consumer`` on kgroup's consumer (classic or KIP-848 protocol).

    ``Consumer(config_dict, **more)``: confluent-kafka's keys, values converted
    with ``str()``; ``group.protocol`` classic unless set. Invalid config is
    ``KafkaException`` with ``_INVALID_ARG``.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        self._in_callback: str | None = None
        settings = build_config(config, kwargs)
        self._eof = wants_eof(settings)
        # Partitions whose end was reported and that handed out nothing since.
        self._at_end: set[KTopicPartition] = set()
        # When the last poll returned, while subscribed (None: not subscribed).
        self._polled: float | None = None
        with _translated():
            self._native = NativeConsumer(settings)
        self._max_poll_interval = self._native.config.max_poll_interval_ms / 1000

    # ---------------------------------------------------------- subscription

    def subscribe(
        self,
        topics: list[str],
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
    ) -> None:
        """Join the group for ``topics`` (names, or one regex starting with ``^``)."""
        if not isinstance(topics, list):
            raise TypeError("expected list of topic unicode strings")
        for name, callback in (("on_assign", on_assign), ("on_revoke", on_revoke)):
            if callback is not None and not callable(callback):
                raise TypeError(f"{name} expects a callable")
        if on_lost is not None and not callable(on_lost):
            raise TypeError("on_lost expects a callable")
        callbacks = _Callbacks(self, on_assign, on_revoke, on_lost)
        with _translated():
            self._native.subscribe(topics, callbacks)
        if self._polled is None:
            self._polled = time.monotonic()

    def unsubscribe(self) -> None:
        with _translated():
            self._native.unsubscribe()
        self._polled = None

    # ------------------------------------------------------------ assignment

    def _start_at(self, partitions: list[TopicPartition]) -> None:
        """``assign()`` inside ``on_assign``: the group assigned them; set where each starts."""
        for tp in partitions:
            if tp.offset >= 0 or tp.offset in _START_OFFSETS:
                self._native.seek(tp)

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Fetch exactly these partitions; inside ``on_assign``: start them at their offsets."""
        with _translated():
            if self._in_callback == "assign":
                self._start_at(partitions)
            elif self._in_callback is None:
                self._native.assign(partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        with _translated():
            if self._in_callback == "assign":
                self._start_at(partitions)
            elif self._in_callback is None:
                self._native.incremental_assign(partitions)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        # Inside on_revoke/on_lost the group takes the partitions away itself.
        if self._in_callback is not None:
            return
        with _translated():
            self._native.incremental_unassign(partitions)

    def unassign(self) -> None:
        if self._in_callback is not None:
            return
        with _translated():
            self._native.unassign()

    def assignment(self) -> list[TopicPartition]:
        with _translated():
            self._check_open()
            return _peers(self._native.assignment())

    def _check_open(self) -> None:
        self._native._core.check_open()

    def memberid(self) -> str | None:
        """The group member id (None before the member has one, as confluent-kafka)."""
        with _translated():
            self._check_open()
            return self._native.member_id or None

    # --------------------------------------------------------------- records

    def poll(self, timeout: float | None = None) -> Message | None:
        """One message, or None after ``timeout`` seconds (None or negative: wait).

        With ``enable.partition.eof=true``, a partition reaching its end is an
        error message (``_PARTITION_EOF``), once each time it gets there.
        """
        batch = self._consume(1, -1 if timeout is None else timeout)
        return batch[0] if batch else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        if num_messages < 0 or num_messages > 1_000_000:
            raise ValueError("num_messages must be between 0 and 1000000 (1M)")
        if num_messages == 0:
            return []
        return self._consume(num_messages, timeout)

    def _consume(self, num_messages: int, timeout: float) -> list[Message]:
        with _translated():
            expired = self._poll_interval_exceeded()
            if expired is not None:
                return [expired]
            try:
                if not self._eof:
                    batch: list[Message] = self._native.consume(num_messages, timeout)
                    return batch
                return self._consume_or_eof(num_messages, timeout)
            finally:
                if self._polled is not None:
                    self._polled = time.monotonic()

    def _poll_interval_exceeded(self) -> Message | None:
        """confluent-kafka's ``_MAX_POLL_EXCEEDED`` message, from the first poll after the expiry.

        kgroup's member acts on the expiry itself (the partitions go to
        ``on_lost`` and it rejoins); this tells the application as librdkafka does.
        """
        if self._polled is None:
            return None
        late = time.monotonic() - self._polled - self._max_poll_interval
        if late <= 0:
            return None
        self._polled = time.monotonic()
        text = (
            f"Application maximum poll interval ({round(self._max_poll_interval * 1000)}ms) "
            f"exceeded by {round(late * 1000)}ms"
        )
        return Message(error=KafkaError(KafkaError._MAX_POLL_EXCEEDED, text))

    def _consume_or_eof(self, num_messages: int, timeout: float) -> list[Message]:
        deadline = math.inf if timeout < 0 else time.monotonic() + timeout
        while True:
            ends = self._ends()
            if ends:
                return ends[:num_messages]
            wait = max(0.0, min(deadline - time.monotonic(), _EOF_SLICE))
            batch = self._native.consume(num_messages, wait)
            if batch:
                for message in batch:
                    topic, partition = message.topic(), message.partition()
                    if topic is not None and partition is not None:
                        self._at_end.discard(KTopicPartition(topic, partition))
                return list(batch)
            if time.monotonic() >= deadline:
                return []

    def _ends(self) -> list[Message]:
        """EOF messages of fetching partitions whose position reached the high watermark."""
        owned = self._native.assignment()
        self._at_end &= owned
        candidates = sorted(owned - self._at_end)
        if not candidates:
            return []
        positions = self._native.position(candidates)
        ends = []
        for tp in candidates:
            position = positions.get(tp)
            try:
                low, high = self._native.get_watermark_offsets(tp, cached=True)
            except kerrors.KgroupError:  # not fetched yet: no high watermark known
                continue
            if position is None and 0 <= low == high:
                position = high  # an empty partition is at its end from the start
            if position is None or high < 0 or position < high:
                continue
            self._at_end.add(tp)
            eof = KafkaError(KafkaError._PARTITION_EOF, f"Fetch from broker reached end of {tp}")
            ends.append(Message(topic=tp.topic, partition=tp.partition, offset=high, error=eof))
        return ends

    # --------------------------------------------------------------- offsets

    def commit(
        self,
        message: Message | None = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[TopicPartition] | None:
        """Commit a message's offset, explicit offsets, or the consumed positions.

        As confluent-kafka, asynchronous by default (returns None); synchronous
        returns the committed offsets, and ``_NO_OFFSET`` when there was none.
        """
        if message is not None and offsets is not None:
            raise ValueError("message and offsets are mutually exclusive")
        given = offsets
        if offsets:
            # As librdkafka: entries without a real offset (OFFSET_INVALID from
            # position() of a partition with no record yet, logical offsets) are
            # skipped, and the rest committed; none left is _NO_OFFSET.
            offsets = [tp for tp in offsets if tp.offset >= 0]
            if not offsets:
                if asynchronous:
                    return None
                raise KafkaException(KafkaError(KafkaError._NO_OFFSET))
        with _translated():
            if asynchronous:
                self._native.commit_async(offsets, message=message)
                return None
            done = self._native.commit(offsets, message=message)
        if not done:
            raise KafkaException(KafkaError(KafkaError._NO_OFFSET))
        metadata = {_key(tp): tp.metadata for tp in offsets or ()}
        result = []
        for tp, offset in sorted(done.items()):
            peer = _peer(tp, offset)
            if metadata.get(tp) is not None:
                peer = TopicPartition(tp.topic, tp.partition, offset, metadata=metadata[tp])
            result.append(peer)
        # The skipped entries come back as given, as librdkafka returns them.
        result.extend(
            TopicPartition(tp.topic, tp.partition, tp.offset) for tp in given or () if tp.offset < 0
        )
        return result

    def committed(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """The group's committed offsets (``OFFSET_INVALID``: none) with their metadata."""
        with _translated():
            found = self._native.committed_with_metadata(
                [_key(tp) for tp in partitions],
                _COMMITTED_WAIT if timeout is None or timeout < 0 else timeout,
            )
        result = []
        for tp in partitions:
            entry = found.get(_key(tp))
            if entry is None:
                result.append(
                    TopicPartition(tp.topic, tp.partition, confluent_kafka.OFFSET_INVALID)
                )
            else:
                result.append(
                    TopicPartition(tp.topic, tp.partition, entry.offset, metadata=entry.metadata)
                )
        return result

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The next offset to consume per partition (``OFFSET_INVALID``: none yet)."""
        with _translated():
            self._check_open()
            known = self._native.position([_key(tp) for tp in partitions])
        return [
            _peer(_key(tp), known.get(_key(tp), confluent_kafka.OFFSET_INVALID))
            for tp in partitions
        ]

    def store_offsets(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None
    ) -> None:
        with _translated():
            self._native.store_offsets(message, offsets)

    def seek(self, partition: TopicPartition) -> None:
        with _translated():
            self._native.seek(partition)

    def pause(self, partitions: list[TopicPartition]) -> None:
        with _translated():
            self._native.pause(partitions)

    def resume(self, partitions: list[TopicPartition]) -> None:
        with _translated():
            self._native.resume(partitions)

    # ------------------------------------------------------- cluster lookups

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        with _translated():
            return self._native.get_watermark_offsets(partition, _wait(timeout), cached)

    def offsets_for_times(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """Per partition, the earliest offset at or after its timestamp (``OFFSET_END``: none)."""
        with _translated():
            found = self._native.offsets_for_times(partitions, _wait(timeout))
        result = []
        for tp in partitions:
            offset = found.get(_key(tp))
            result.append(_peer(_key(tp), confluent_kafka.OFFSET_END if offset is None else offset))
        return result

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        with _translated():
            return self._native.list_topics(topic, None if timeout < 0 else timeout)

    def consumer_group_metadata(self) -> bytes:
        with _translated():
            return self._native.consumer_group_metadata()

    # --------------------------------------------------------------- closing

    def close(self) -> None:
        """Leave the group and release everything (confluent-kafka: idempotent)."""
        with _translated():
            self._native.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
