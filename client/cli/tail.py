"""``kgroup consume`` and ``kgroup produce``: a tail of a topic, and lines into one
(kcat ``-C`` / ``-P``, in ``kafka-console-consumer.sh``'s option names).

::

    kgroup consume TOPIC [--from-beginning | --offset N] [--partition P ...] [--count N]
                   [--exit-at-end] [--group G] [--format FMT | --json]
    kgroup produce TOPIC [--key-separator SEP] [--partition P] [--header K=V ...]

Both take ``--bootstrap-servers`` (else the ``bootstrap.servers`` of
``--command-config FILE``, else ``$KAFKA_BOOTSTRAP_SERVERS``, else the broker
``kgroup broker up`` started) and ``--command-config FILE``, the properties file
``kgroup groups`` and ``kgroup topics`` take, rendered for librdkafka as a
consumer's data plane renders it. Exit codes: 0 done (also when a reader of the
output went away: ``| head``); 1 the topic or a partition does not exist; 2 any
other failure, a delivery that failed included; 3 no broker answered within
``--timeout``; 130 interrupted (Ctrl-C), after committing what was printed.

Without ``--group`` the tail is librdkafka alone in assign mode: no group is
joined and nothing is committed. With ``--group`` it is a kgroup consumer of
that group (subscribed, committing the offsets of the records it printed).
"""

from __future__ import annotations

import argparse
import base64
import errno
import json
import logging
import os
import select
import stat
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Final, Protocol

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

from kgroup.cli.common import (
    EXIT_OK,
    load_command_config,
    not_a_broker,
    parse_key_value,
    pause_before_retry,
    resolve_bootstrap_servers,
)
from kgroup.config_security import SecurityConfig
from kgroup.errors import (
    AuthenticationError,
    ConfigError,
    DataPlaneError,
    NoBrokersAvailableError,
    ProduceFailedError,
    SecurityError,
    TlsError,
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:
    from kgroup.sync import Consumer

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_NO_TOPIC",
    "EXIT_UNREACHABLE",
    "TailRecord",
    "add_tail_commands",
    "json_line",
    "parse_format",
    "parse_line",
    "render",
    "start_offset",
]

EXIT_NO_TOPIC: Final = 1
"""The topic, or a ``--partition`` of it, does not exist."""
EXIT_UNREACHABLE: Final = 3
"""No broker answered within ``--timeout``."""
EXIT_INTERRUPTED: Final = 130
"""Ctrl-C (128 + SIGINT, as a shell reports it)."""

DEFAULT_FORMAT: Final = "%s\\n"
"""The value of each record on a line of its own, as kcat prints by default."""

_log = logging.getLogger("kgroup.cli.tail")
# librdkafka's connection chatter: with -v only (the error message sums it up).
_librdkafka_log = logging.getLogger("kgroup.cli.librdkafka")

_BATCH: Final = 500
_WAIT: Final = 0.2
"""Seconds of one record wait: the output is flushed between waits."""

# librdkafka's own codes for "nobody answered".
_UNREACHABLE: Final = frozenset(
    {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT}
)


# ------------------------------------------------------------------- records


@dataclass(frozen=True)
class TailRecord:
    """What ``kgroup consume`` prints of a record (a copy of the message's parts)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    """Milliseconds since the epoch; None when the record has none."""
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @classmethod
    def of(cls, message: confluent_kafka.Message) -> TailRecord:
        kind, stamp = message.timestamp()
        raw = message.headers() or []
        # A list of pairs from librdkafka (names may repeat); the stubs also allow a dict.
        pairs = list(raw.items()) if isinstance(raw, dict) else raw
        return cls(
            topic=message.topic() or "",
            partition=message.partition() or 0,
            offset=message.offset() or 0,
            timestamp=None if kind == confluent_kafka.TIMESTAMP_NOT_AVAILABLE else stamp,
            key=_as_bytes(message.key()),
            value=_as_bytes(message.value()),
            headers=tuple((name, _as_bytes(value)) for name, value in pairs),
        )


def _as_bytes(data: str | bytes | None) -> bytes | None:
    # No deserializer is configured, so librdkafka hands out bytes; the str case
    # is only there because its stubs allow it.
    return data.encode() if isinstance(data, str) else data


# ------------------------------------------------------------ --format strings

_TOKENS: Final[Mapping[str, Callable[[TailRecord], bytes]]] = {
    "t": lambda r: r.topic.encode(),
    "p": lambda r: str(r.partition).encode(),
    "o": lambda r: str(r.offset).encode(),
    "k": lambda r: r.key or b"",
    "s": lambda r: r.value or b"",
    "K": lambda r: str(-1 if r.key is None else len(r.key)).encode(),
    "S": lambda r: str(-1 if r.value is None else len(r.value)).encode(),
    "T": lambda r: str(-1 if r.timestamp is None else r.timestamp).encode(),
    "h": lambda r: b",".join(name.encode() + b"=" + (value or b"") for name, value in r.headers),
}
"""kcat's ``-f`` tokens that kgroup implements (``%%`` is a literal ``%``)."""

_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}

Part = str | Callable[[TailRecord], bytes]
"""A piece of a parsed format: literal text, or a token's renderer."""


def parse_format(text: str) -> tuple[Part, ...]:
    """``--format`` parsed once: literal text and the renderers of its ``%`` tokens.

    Tokens (kcat's): ``%t`` topic, ``%p`` partition, ``%o`` offset, ``%k`` key,
    ``%s`` value, ``%h`` headers (``name=value`` joined by ``,``), ``%T``
    timestamp in ms (-1: none), ``%K`` / ``%S`` key / value size in bytes
    (-1: null), ``%%`` a ``%``. Escapes: ``\\n``, ``\\t``, ``\\r``, ``\\\\``.
    No newline is added: end the format with ``\\n`` for one record a line.

    Raises:
        ConfigError: an unknown token or escape, or ``%`` / ``\\`` at the end.
    """
    parts: list[Part] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char not in "%\\":
            literal.append(char)
            i += 1
            continue
        if i + 1 == len(text):
            raise ConfigError(f"--format {text!r}: ends with a lone {char!r}")
        code = text[i + 1]
        if char == "\\":
            if code not in _ESCAPES:
                raise ConfigError(
                    f"--format {text!r}: unknown escape \\{code} (known: \\n \\t \\r \\\\)"
                )
            literal.append(_ESCAPES[code])
        elif code == "%":
            literal.append("%")
        elif code in _TOKENS:
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append(_TOKENS[code])
        else:
            known = " ".join(f"%{t}" for t in _TOKENS)
            raise ConfigError(f"--format {text!r}: unknown token %{code} (known: {known} %%)")
        i += 2
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


def render(parts: Sequence[Part], record: TailRecord) -> bytes:
    """``record`` as the parsed format prints it: raw bytes, as the record holds them."""
    return b"".join(p.encode() if isinstance(p, str) else p(record) for p in parts)


def _text_or_base64(data: bytes | None) -> tuple[str | None, bool]:
    """``data`` as text when it is UTF-8, else as base64 (and True)."""
    if data is None:
        return None, False
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), True


def json_line(record: TailRecord) -> str:
    """``record`` as one line of ``--json`` output (no newline).

    ``key``, ``value`` and each header's ``value`` are text when their bytes
    are UTF-8, else base64 with ``key_base64`` / ``value_base64`` true; null
    when the record has none. ``timestamp`` is milliseconds since the epoch.
    """
    key, key_b64 = _text_or_base64(record.key)
    value, value_b64 = _text_or_base64(record.value)
    headers = []
    for name, raw in record.headers:
        text, b64 = _text_or_base64(raw)
        headers.append({"key": name, "value": text, "value_base64": b64})
    return json.dumps(
        {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": key,
            "key_base64": key_b64,
            "value": value,
            "value_base64": value_b64,
            "headers": headers,
        },
        ensure_ascii=False,
    )


# -------------------------------------------------------------- connecting


@dataclass(frozen=True)
class _Target:
    bootstrap: str
    timeout: float
    settings: Mapping[str, str]
    """Security settings for librdkafka (secrets revealed: never log them) and client.id."""
    consumer_settings: Mapping[str, str]
    """The same, as the file says them: what a kgroup consumer takes."""

    def librdkafka(self) -> dict[str, Any]:
        return {
            **self.settings,
            "bootstrap.servers": self.bootstrap,
            # librdkafka refuses less than a second here.
            "socket.connection.setup.timeout.ms": max(1000, int(self.timeout * 1000)),
            "logger": _librdkafka_log,
        }


def _target(args: argparse.Namespace) -> _Target:
    """Where to connect and how, from ``--bootstrap-servers`` and ``--command-config``."""
    file = load_command_config(args.command_config) if args.command_config else {}
    bootstrap = resolve_bootstrap_servers(args.bootstrap_servers or file.get("bootstrap.servers"))
    # The same validation and rendering as a consumer's data plane: one file
    # means the same to `kgroup groups`, `kgroup topics` and these commands.
    security = SecurityConfig.from_config(file)
    settings = {key: str(value) for key, value in security.librdkafka_config().items()}
    if "client.id" in file:
        settings["client.id"] = file["client.id"]
    _log.debug("connecting to %s with %s", bootstrap, security.describe())
    chosen = {k: v for k, v in file.items() if k != "bootstrap.servers"}
    return _Target(bootstrap, args.timeout, settings, chosen)


class _Reports:
    """librdkafka's error reports (``error_cb``): a refused TLS handshake or SASL login.

    librdkafka retries those as if the broker were down, and a metadata request
    then fails with a bare timeout; the report says what happened.
    """

    def __init__(self, target: _Target) -> None:
        self._target = target
        self.last: str | None = None
        self.security: SecurityError | None = None

    def __call__(self, error: KafkaError) -> None:
        self.last = error.str()
        if self.security is not None:
            return
        # "sasl_ssl://host:port/bootstrap: SASL authentication error: ..."
        where, _, reason = error.str().partition(": ")
        if "://" not in where or not reason:
            where, reason = "", error.str()
        broker = where.partition("://")[2].partition("/")[0] or self._target.bootstrap
        if error.code() == KafkaError._AUTHENTICATION:
            mechanism = self._target.settings.get("sasl.mechanism", "?")
            self.security = AuthenticationError(mechanism, broker, reason)
        elif error.code() == KafkaError._SSL:
            self.security = TlsError(broker, reason)


_ATTEMPT: Final = 1.0
"""Seconds of one metadata attempt: between attempts a refused login is noticed."""


def _partitions(target: _Target, topic: str, reports: _Reports) -> list[int]:
    """The partitions of ``topic``, asked without creating it.

    Raises:
        SecurityError: the broker refused the TLS handshake or the SASL login
            (as soon as librdkafka reports it: the same credentials would be
            refused again).
        NoBrokersAvailableError: nobody answered within ``--timeout``.
        UnknownTopicOrPartitionError: the broker has no such topic.
    """
    probe = confluent_kafka.Producer({**target.librdkafka(), "error_cb": reports})
    deadline = time.monotonic() + target.timeout
    while True:
        try:
            # All topics, not this one: a metadata request naming a topic creates
            # it on a broker with auto.create.topics.enable.
            attempt = max(0.0, min(_ATTEMPT, deadline - time.monotonic()))
            metadata = probe.list_topics(timeout=attempt)
            break
        except KafkaException as exc:
            probe.poll(0)  # serves error_cb
            if reports.security is not None:
                raise reports.security from None
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError._UNSUPPORTED_FEATURE:
                raise not_a_broker(target.bootstrap) from None
            if time.monotonic() < deadline:
                pause_before_retry(deadline)
                continue
            detail = reports.last or (error.str() if isinstance(error, KafkaError) else str(exc))
            raise NoBrokersAvailableError(
                f"no broker answered at {target.bootstrap} within {target.timeout:g} s "
                f"({detail}); is it running? (--timeout waits longer)"
            ) from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        raise UnknownTopicOrPartitionError(
            3,
            "UNKNOWN_TOPIC_OR_PARTITION",
            True,
            f"topic {topic!r} does not exist at {target.bootstrap}; "
            f"create it with `kgroup topics create {topic}` (`kgroup topics list` shows "
            "those that do)",
        )
    return sorted(found.partitions)


def _chosen_partitions(
    topic: str, existing: Sequence[int], wanted: Sequence[int] | None
) -> list[int]:
    if not wanted:
        return list(existing)
    missing = sorted(set(wanted) - set(existing))
    if missing:
        raise UnknownTopicOrPartitionError(
            3,
            "UNKNOWN_TOPIC_OR_PARTITION",
            True,
            f"topic {topic!r} has partitions {_ranges(existing)}; "
            f"no partition {', '.join(map(str, missing))}",
        )
    return sorted(set(wanted))


def _ranges(numbers: Sequence[int]) -> str:
    return f"0-{max(numbers)}" if list(numbers) == list(range(len(numbers))) else str(numbers)


# ---------------------------------------------------------------- consuming


def start_offset(offset: int | None, from_beginning: bool, low: int, high: int) -> int:
    """Where assign mode starts a partition whose log spans ``[low, high)``.

    ``--from-beginning``: ``low``. ``--offset N``: N clamped to ``[low, high]``;
    a negative N is the last ``-N`` records (kcat's ``-o -N``). Neither: ``high``,
    only records produced from now on (as ``kafka-console-consumer.sh``).
    """
    if from_beginning:
        return low
    if offset is None:
        return high
    if offset < 0:
        return max(low, high + offset)
    return min(max(offset, low), high)


class _Output:
    """Standard output as bytes, flushed once per batch."""

    def __init__(self, stream: IO[bytes], line: Callable[[TailRecord], bytes]) -> None:
        self._stream = stream
        self._line = line

    def write(self, records: Iterable[TailRecord]) -> None:
        """Raises BrokenPipeError when the reader went away."""
        self._stream.write(b"".join(self._line(r) for r in records))
        self._stream.flush()

    def check_reader(self) -> None:
        """Raise BrokenPipeError if standard output is a pipe nobody reads any more.

        A write says so too, but a tail waiting for new records writes nothing:
        ``kgroup consume T | head -3`` would wait forever once ``head`` had its lines.
        """
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):
            return  # not a file (a test's buffer): nothing to watch
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
        watch = select.poll()
        watch.register(fd, select.POLLOUT)
        # The write end of a pipe reports POLLERR once its read end is closed.
        if any(events & select.POLLERR for _, events in watch.poll(0)):
            raise BrokenPipeError(errno.EPIPE, "the reader of standard output went away")


@dataclass
class _Progress:
    """How far the tail is: records printed, and the partitions at their end."""

    count: int | None
    ends: dict[int, int]
    """Per partition, the end offset to reach (``--exit-at-end``), or empty."""
    printed: int = 0

    def reached(self, partition: int, next_offset: int) -> None:
        end = self.ends.get(partition)
        if end is not None and next_offset >= end:
            del self.ends[partition]

    def wanted(self) -> int:
        return _BATCH if self.count is None else min(_BATCH, self.count - self.printed)


class _Source(Protocol):
    """Where the tail's records come from: librdkafka alone, or a kgroup group member."""

    def consume(self, num_messages: int, timeout: float) -> list[confluent_kafka.Message]: ...

    def printed(self, messages: Sequence[confluent_kafka.Message]) -> None:
        """These records reached the output."""

    def at_end(self, progress: _Progress) -> bool:
        """``--exit-at-end``: every partition of this tail reached its end."""

    def close(self) -> None: ...


class _Assigned:
    """librdkafka in assign mode: no group, nothing committed, EOF events on."""

    def __init__(self, consumer: confluent_kafka.Consumer) -> None:
        self._consumer = consumer

    def consume(self, num_messages: int, timeout: float) -> list[confluent_kafka.Message]:
        return list(self._consumer.consume(num_messages, timeout))

    def printed(self, messages: Sequence[confluent_kafka.Message]) -> None:
        pass

    def at_end(self, progress: _Progress) -> bool:
        return not progress.ends

    def close(self) -> None:
        self._consumer.close()


class _Member:
    """A kgroup consumer of ``--group``: it commits the offsets of what was printed.

    The offsets are stored once printed and committed by auto-commit (every
    second, before a partition is revoked, and on close), so a record counts as
    consumed by the group exactly when the tail showed it.
    """

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    def consume(self, num_messages: int, timeout: float) -> list[confluent_kafka.Message]:
        return list(self._consumer.consume(num_messages, timeout))

    def printed(self, messages: Sequence[confluent_kafka.Message]) -> None:
        for message in messages:
            self._consumer.store_offsets(message)

    def at_end(self, progress: _Progress) -> bool:
        # The partitions the group gave this member: another member's are its own.
        mine = {tp.partition for tp in self._consumer.assignment()}
        return bool(mine) and not (mine & set(progress.ends))

    def close(self) -> None:
        self._consumer.close()


def _open_assigned(
    args: argparse.Namespace, target: _Target, reports: _Reports
) -> tuple[_Source, _Progress]:
    consumer = confluent_kafka.Consumer(
        {
            **target.librdkafka(),
            # librdkafka insists on a group id; this one is never joined or committed to.
            "group.id": f"kgroup-consume-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "error_cb": reports,
        }
    )
    try:
        partitions = _chosen_partitions(
            args.topic, _partitions(target, args.topic, reports), args.partition
        )
        starts: list[confluent_kafka.TopicPartition] = []
        ends: dict[int, int] = {}
        for partition in partitions:
            low, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(args.topic, partition), timeout=target.timeout
            )
            start = start_offset(args.offset, args.from_beginning, low, high)
            starts.append(confluent_kafka.TopicPartition(args.topic, partition, start))
            if args.exit_at_end and start < high:
                ends[partition] = high
        consumer.assign(starts)
    except BaseException:
        consumer.close()
        raise
    return _Assigned(consumer), _Progress(args.count, ends)


def _open_member(
    args: argparse.Namespace, target: _Target, reports: _Reports
) -> tuple[_Source, _Progress]:
    # The consumer and its runtime (anyio, kio) load only for --group.
    from kgroup.sync import Consumer  # noqa: PLC0415

    partitions = _partitions(target, args.topic, reports)
    consumer = Consumer(
        {
            **target.consumer_settings,
            "bootstrap.servers": target.bootstrap,
            "group.id": args.group,
            "auto.offset.reset": "earliest" if args.from_beginning else "latest",
            "enable.auto.commit": True,
            "enable.auto.offset.store": False,
            "auto.commit.interval.ms": 1000,
        }
    )
    try:
        ends: dict[int, int] = {}
        if args.exit_at_end:
            ends = _group_ends(consumer, args, partitions, target.timeout)
        consumer.subscribe([args.topic])
    except BaseException:
        consumer.close()
        raise
    return _Member(consumer), _Progress(args.count, ends)


def _group_ends(
    consumer: Consumer, args: argparse.Namespace, partitions: Sequence[int], timeout: float
) -> dict[int, int]:
    """The end offsets to reach, of the partitions where the group is not there yet."""
    from kgroup.types import TopicPartition  # noqa: PLC0415

    tps = [TopicPartition(args.topic, p) for p in partitions]
    committed = consumer.committed(tps, timeout=timeout)
    ends: dict[int, int] = {}
    for tp in tps:
        low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
        start = committed.get(tp)
        if start is None:
            start = low if args.from_beginning else high
        if start < high:
            ends[tp.partition] = high
    return ends


def _check(message: confluent_kafka.Message, progress: _Progress) -> bool:
    """True for a record; False for an event (an end of partition, a passing error).

    Raises:
        DataPlaneError: an error that ends the tail (fatal, or the topic is gone).
    """
    error = message.error()
    if error is None:
        return True
    if error.code() == KafkaError._PARTITION_EOF:
        progress.reached(message.partition() or 0, message.offset() or 0)
        return False
    if error.fatal() or error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
        raise DataPlaneError(f"{error.name()}: {error.str()}", error.code())
    # librdkafka retries the rest (a broker restarting, say): say so and go on.
    _log.warning("%s", error.str())
    return False


def _tail(source: _Source, progress: _Progress, output: _Output, exit_at_end: bool) -> None:
    while progress.count is None or progress.printed < progress.count:
        if exit_at_end and source.at_end(progress):
            return
        batch = source.consume(progress.wanted(), _WAIT)
        messages = [m for m in batch if _check(m, progress)]
        if not messages:
            output.check_reader()
            continue
        output.write(TailRecord.of(m) for m in messages)
        source.printed(messages)
        progress.printed += len(messages)
        for message in messages:
            progress.reached(message.partition() or 0, (message.offset() or 0) + 1)


def _consume(args: argparse.Namespace) -> int:
    if args.json:
        line: Callable[[TailRecord], bytes] = lambda r: json_line(r).encode() + b"\n"  # noqa: E731
    else:
        parts = parse_format(args.format)
        line = lambda r: render(parts, r)  # noqa: E731
    target = _target(args)
    reports = _Reports(target)
    opened = _open_member if args.group else _open_assigned
    source, progress = opened(args, target, reports)
    output = _Output(sys.stdout.buffer, line)
    code = EXIT_OK
    try:
        _tail(source, progress, output, args.exit_at_end)
    except BrokenPipeError:
        # `| head` closed the pipe: the reader has what it wanted. Standard output
        # goes to /dev/null so that the interpreter's last flush finds no pipe.
        _quiet_stdout()
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    finally:
        # With --group this commits what was printed.
        source.close()
    plural = "s" if progress.printed != 1 else ""
    _log.debug("%d record%s from %s", progress.printed, plural, args.topic)
    return code


def _quiet_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


# ---------------------------------------------------------------- producing


def parse_line(line: bytes, separator: bytes | None) -> tuple[bytes | None, bytes]:
    """``(key, value)`` of one input line (without its newline).

    With a separator the key is what comes before its first occurrence; a line
    without it has no key (null) and is all value. Without one, no key.
    """
    if separator is None:
        return None, line
    key, found, value = line.partition(separator)
    return (key, value) if found else (None, line)


@dataclass
class _Deliveries:
    acknowledged: int = 0
    failed: int = 0
    first_error: str | None = None

    def report(self, error: KafkaError | None, message: confluent_kafka.Message) -> None:
        if error is None:
            self.acknowledged += 1
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = error.str()


def _lines(stream: IO[bytes]) -> Iterable[bytes]:
    for raw in stream:
        yield raw[:-2] if raw.endswith(b"\r\n") else raw.removesuffix(b"\n")


def _produce(args: argparse.Namespace) -> int:
    target = _target(args)
    reports = _Reports(target)
    deliveries = _Deliveries()
    producer = confluent_kafka.Producer(
        {
            **target.librdkafka(),
            "error_cb": reports,
            "linger.ms": 5,
            # A record the broker has not taken within the timeout is reported
            # failed rather than retried for librdkafka's five minutes.
            "message.timeout.ms": max(1, int(args.timeout * 1000)),
        }
    )
    partitions = _partitions(target, args.topic, reports)
    if args.partition is not None:
        _chosen_partitions(args.topic, partitions, [args.partition])
    separator = args.key_separator.encode() if args.key_separator else None
    headers = [(name, value.encode()) for name, value in args.header or ()]
    extra: dict[str, Any] = {} if args.partition is None else {"partition": args.partition}
    sent = 0
    for line in _lines(sys.stdin.buffer):
        key, value = parse_line(line, separator)
        while True:
            try:
                producer.produce(
                    args.topic,
                    value=value,
                    key=key,
                    headers=headers or None,
                    on_delivery=deliveries.report,
                    **extra,
                )
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain it
        sent += 1
        producer.poll(0)
    left = producer.flush(args.timeout)
    if deliveries.failed or left:
        raise ProduceFailedError(
            f"{deliveries.acknowledged} of {sent} records reached {args.topic} at "
            f"{target.bootstrap}; {deliveries.failed} failed "
            f"({deliveries.first_error or reports.last or 'no error reported'}) and {left} "
            f"were not acknowledged within {args.timeout:g} s"
        )
    print(
        f"kgroup: produced {sent} record{'s' if sent != 1 else ''} to {args.topic}", file=sys.stderr
    )
    return EXIT_OK


# ------------------------------------------------------------------ parsers


def _run(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Exit codes of their own for a missing topic and an unreachable broker."""

    def run(args: argparse.Namespace) -> int:
        if not args.verbose:
            _librdkafka_log.setLevel(logging.CRITICAL)
            # The consumer runtime's connection progress is not output either.
            logging.getLogger("kgroup").setLevel(logging.WARNING)
        try:
            return command(args)
        except UnknownTopicOrPartitionError as exc:
            print(f"kgroup: {exc.message or exc}", file=sys.stderr)
            return EXIT_NO_TOPIC
        except NoBrokersAvailableError as exc:
            print(f"kgroup: {exc}", file=sys.stderr)
            return EXIT_UNREACHABLE

    return run


def _number(minimum: int | None) -> Callable[[str], int]:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {text}")
        return value

    return convert


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _format(text: str) -> str:
    try:
        parse_format(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", metavar="TOPIC", help="the topic")
    parser.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT",
        help="the broker (default: --command-config's bootstrap.servers, "
        "$KAFKA_BOOTSTRAP_SERVERS, the broker `kgroup broker up` started)",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="properties file with security.protocol, ssl.*, sasl.* (and optionally "
        "bootstrap.servers, client.id), as `kgroup groups` takes",
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=10.0,
        help="seconds to wait for the broker's answers (default 10)",
    )


def add_tail_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``consume`` and ``produce`` to the ``kgroup`` parser."""
    consume = subparsers.add_parser(
        "consume",
        help="print a topic's records (kcat -C)",
        description="Print the records of a topic, one format string or JSON line each. "
        "Without --group: no group, nothing committed. Exit codes: 0 done, 1 no such topic "
        "or partition, 2 other failures, 3 no broker answered, 130 interrupted.",
    )
    _connection_options(consume)
    start = consume.add_mutually_exclusive_group()
    start.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at each partition's first record (default: only new records; with "
        "--group: where the group committed, else the first record)",
    )
    start.add_argument(
        "--offset",
        type=_number(None),
        metavar="N",
        help="start at offset N of each partition; a negative N: the last -N records",
    )
    consume.add_argument(
        "--partition",
        type=_number(0),
        action="append",
        metavar="P",
        help="only partition P (repeatable; default every partition)",
    )
    consume.add_argument("--count", type=_number(1), metavar="N", help="stop after N records")
    consume.add_argument(
        "--exit-at-end",
        action="store_true",
        help="stop once every partition reached the end it had at the start",
    )
    consume.add_argument(
        "--group",
        metavar="GROUP",
        help="consume as a member of GROUP, committing the offsets of the records printed",
    )
    shape = consume.add_mutually_exclusive_group()
    shape.add_argument(
        "--format",
        type=_format,
        default=DEFAULT_FORMAT,
        metavar="FMT",
        help="kcat's tokens: %%t topic, %%p partition, %%o offset, %%k key, %%s value, "
        "%%h headers, %%T timestamp (ms), %%K/%%S key/value size, %%%% a %%; escapes \\n "
        "\\t \\r \\\\ (default '%%s\\n')",
    )
    shape.add_argument(
        "--json",
        action="store_true",
        help="one JSON object a line: topic, partition, offset, timestamp, key, value, "
        "headers (bytes that are not UTF-8 in base64, flagged *_base64)",
    )
    consume.set_defaults(func=_run(_check_group_options(consume)))

    produce = subparsers.add_parser(
        "produce",
        help="produce standard input's lines to a topic (kcat -P)",
        description="Produce each line of standard input as a record, then wait until the "
        "broker acknowledged every one. Exit codes: 0 done, 1 no such topic or partition, "
        "2 other failures (a failed delivery included), 3 no broker answered.",
    )
    _connection_options(produce)
    produce.add_argument(
        "--key-separator",
        metavar="SEP",
        help="the key is what comes before the first SEP of a line (a line without SEP has no key)",
    )
    produce.add_argument(
        "--partition",
        type=_number(0),
        metavar="P",
        help="every record to partition P (default: the producer's partitioner)",
    )
    produce.add_argument(
        "--header",
        action="append",
        type=parse_key_value,
        metavar="KEY=VALUE",
        help="a header on every record (repeatable)",
    )
    produce.set_defaults(func=_run(_produce))


def _check_group_options(
    parser: argparse.ArgumentParser,
) -> Callable[[argparse.Namespace], int]:
    def checked(args: argparse.Namespace) -> int:
        if args.group and (args.partition or args.offset is not None):
            # The group decides the partitions and where they start.
            parser.error("--group takes neither --partition nor --offset")
        return _consume(args)

    return checked
