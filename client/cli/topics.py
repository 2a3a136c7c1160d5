"""``kgroup topics create|produce|list``: a topic and records to try a consumer on.

::

    kgroup topics create NAME [--partitions N] [--replication-factor R] [--config k=v ...]
    kgroup topics produce NAME [--count N] [--size B] [--key-prefix P] [--rate R]
    kgroup topics list [--json]

They find the broker in this order: ``--bootstrap-servers``, the broker
``kgroup broker up --name NAME`` started (``--broker-name NAME``), the
``bootstrap.servers`` of ``--command-config FILE``, ``$KAFKA_BOOTSTRAP_SERVERS``,
the broker ``kgroup broker up`` started in this working directory. They talk to
it through confluent-kafka's AdminClient and Producer, secured as
``--command-config FILE`` says (the properties file ``kgroup groups`` takes).
Exit codes: 0 done; 1 the topic exists (``create``) or does not
(``produce``); 2 any other failure or bad usage; 3 no broker answered within
``--timeout``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kgroup.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    load_command_config,
    not_a_broker,
    parse_key_value,
    pause_before_retry,
)
from kgroup.cli.state import broker_name, recorded_bootstrap_servers
from kgroup.config_security import SecurityConfig
from kgroup.errors import (
    AuthenticationError,
    ConfigError,
    KgroupError,
    NoBrokersAvailableError,
    ProduceFailedError,
    SecurityError,
    TlsError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_TOPIC",
    "EXIT_UNREACHABLE",
    "ProduceFailedError",
    "RecordedBootstrap",
    "add_topics_commands",
    "choose_bootstrap_servers",
    "record_value",
]

EXIT_TOPIC = 1
"""``create``: the topic exists already; ``produce``: it does not exist."""
EXIT_UNREACHABLE = 3
"""No broker answered within ``--timeout``."""

RecordedBootstrap = Callable[[str | None], str | None]
"""The bootstrap servers of the broker ``kgroup broker up`` started for this
directory (argument ``None``) or under a name, if it runs."""

_log = logging.getLogger("kgroup.cli.topics")

# librdkafka reports every refused connection; that is what the error message
# sums up, so its own lines are shown with --verbose only.
_librdkafka_log = logging.getLogger("kgroup.cli.librdkafka")

_ATTEMPT = 1.0
"""Seconds of one metadata attempt while connecting (see ``_connect``)."""

# librdkafka's codes for "nobody answered" (its own, negative, not the broker's).
_UNREACHABLE = frozenset(
    {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT}
)


def choose_bootstrap_servers(
    flag: str | None,
    broker_name: str | None,
    recorded: RecordedBootstrap,
    environ: Mapping[str, str] | None = None,
    *,
    from_file: str | None = None,
) -> str:
    """The broker to talk to: the flag, the named broker, the command config's
    ``bootstrap.servers`` (``from_file``), the environment, this directory's.

    Raises:
        ConfigError: none of them names a broker, or the named broker is not running.
    """
    if flag:
        return flag
    if broker_name is not None:
        named = recorded(broker_name)
        if named is None:
            raise ConfigError(
                f"no broker named {broker_name!r} is running; start it with "
                f"`kgroup broker up --name {broker_name}`"
            )
        return named
    if from_file:
        return from_file
    env = os.environ if environ is None else environ
    from_env = env.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if from_env:
        return from_env
    here = recorded(None)
    if here is not None:
        return here
    raise ConfigError(
        "no broker to talk to: pass --bootstrap-servers HOST:PORT, set "
        "KAFKA_BOOTSTRAP_SERVERS, or start one for this directory with `kgroup broker up`"
    )


def record_value(index: int, size: int) -> bytes:
    """The value of record ``index``: ``record <index>`` padded with dots to ``size`` bytes.

    Readable in a console consumer, exactly ``size`` bytes long (cut short if
    ``size`` is below the label's length).
    """
    label = f"record {index} ".encode()
    if size <= len(label):
        return label[:size]
    return label + b"." * (size - len(label))


def _error_text(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


def _unreachable(bootstrap: str, timeout: float, detail: str) -> NoBrokersAvailableError:
    return NoBrokersAvailableError(
        f"no broker answered at {bootstrap} within {timeout:g} s ({detail}); is it running? "
        "(`kgroup broker status`; --timeout waits longer)"
    )


def _typed(exc: KafkaException, bootstrap: str, timeout: float) -> KgroupError:
    """kgroup's exception for what confluent-kafka raised."""
    error = exc.args[0] if exc.args else None
    if not isinstance(error, KafkaError):
        return KgroupError(str(exc))
    if error.code() in _UNREACHABLE:
        return _unreachable(bootstrap, timeout, error.str())
    if error.code() > 0:
        # kio's error table takes half a second to import: only on this path.
        from kgroup.protocol import broker_error  # noqa: PLC0415

        # A broker error code (librdkafka's positive codes are Kafka's).
        return broker_error(error.code(), error.str())
    return KgroupError(f"{error.name()}: {error.str()}")


@dataclass(frozen=True)
class _Target:
    """Where and how to connect: the servers and the librdkafka settings for them."""

    bootstrap: str
    timeout: float
    settings: Mapping[str, str | int | float | bool] = field(repr=False)
    """Security settings rendered for librdkafka (secrets revealed: never log them),
    and ``client.id`` when the command config sets it."""

    def client_config(self) -> dict[str, str | int | float | bool]:
        return {
            **self.settings,
            "bootstrap.servers": self.bootstrap,
            "socket.connection.setup.timeout.ms": max(1, int(self.timeout * 1000)),
        }


def _target(args: argparse.Namespace) -> _Target:
    """The servers and connection settings of a ``topics`` command.

    Raises:
        ConfigError: no broker is known, or ``--command-config`` is unreadable or
            holds a bad key or value (named; never a value).
    """
    file: dict[str, str] = {}
    if args.command_config is not None:
        file = load_command_config(args.command_config)
    recorded: RecordedBootstrap = args.recorded_bootstrap
    bootstrap = choose_bootstrap_servers(
        args.bootstrap_servers, args.broker_name, recorded, from_file=file.get("bootstrap.servers")
    )
    # The same validation and rendering a consumer's data plane gets, so a file
    # that works for `kgroup groups` works here and means the same.
    security = SecurityConfig.from_config(file)
    settings: dict[str, str | int | float | bool] = {}
    for key, value in security.librdkafka_config().items():
        # All text: a properties file holds text, and oauth_cb (the one setting
        # that is not) must be a callable, which from_config checked.
        assert isinstance(value, str), key
        settings[key] = value
    if "client.id" in file:
        settings["client.id"] = file["client.id"]
    # describe() names the protocol, mechanism and user, never a secret (shown with -v).
    _log.debug("connecting to %s with %s", bootstrap, security.describe())
    return _Target(bootstrap, args.timeout, settings)


class _SecurityFailures:
    """librdkafka's reports (``error_cb``) of a refused TLS handshake or SASL login.

    librdkafka retries those as if the broker were down, and ``list_topics``
    then fails with a bare "transport failure"; the report says what happened.
    """

    def __init__(self, target: _Target) -> None:
        self._target = target
        self.error: SecurityError | None = None

    def report(self, error: KafkaError) -> None:
        if self.error is not None:
            return
        # "sasl_ssl://host:port/bootstrap: SASL authentication error: ..."
        where, _, reason = error.str().partition(": ")
        if "://" not in where or not reason:
            where, reason = "", error.str()
        broker = where.partition("://")[2].partition("/")[0] or self._target.bootstrap
        if error.code() == KafkaError._AUTHENTICATION:
            mechanism = str(self._target.settings.get("sasl.mechanism", "?"))
            self.error = AuthenticationError(mechanism, broker, reason)
        elif error.code() == KafkaError._SSL:
            self.error = TlsError(broker, reason)


def _connect(target: _Target) -> tuple[AdminClient, dict[str, int]]:
    """An AdminClient that reached the broker, and the topics the broker has (with
    their partition counts).

    Raises:
        SecurityError: the broker refused the TLS handshake or the SASL login
            (as soon as librdkafka reports it, not after ``--timeout``).
        NoBrokersAvailableError: no broker answered within ``--timeout``.
    """
    bootstrap, timeout = target.bootstrap, target.timeout
    failures = _SecurityFailures(target)
    admin = AdminClient(target.client_config(), logger=_librdkafka_log, error_cb=failures.report)
    deadline = time.monotonic() + timeout
    while True:
        # Short attempts: between them the error reports are served (poll), and
        # a refused login ends the wait at once, as the same credentials would
        # be refused again.
        attempt = max(0.0, min(_ATTEMPT, deadline - time.monotonic()))
        try:
            metadata = admin.list_topics(timeout=attempt)
        except KafkaException as exc:
            admin.poll(0)
            if failures.error is not None:
                raise failures.error from None
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError._UNSUPPORTED_FEATURE:
                raise not_a_broker(bootstrap) from None
            if time.monotonic() >= deadline:
                raise _unreachable(bootstrap, timeout, _error_text(exc)) from None
            pause_before_retry(deadline)
        else:
            return admin, {
                name: len(topic.partitions)
                for name, topic in metadata.topics.items()
                if topic.error is None
            }


def _await_leaders(admin: AdminClient, name: str, partitions: int, timeout: float) -> None:
    # A topic is usable once every partition has a leader; a consumer started
    # before that would log errors for a topic that was just reported created.
    deadline = time.monotonic() + timeout
    problem = "no metadata yet"
    while time.monotonic() < deadline:
        try:
            topic = admin.list_topics(topic=name, timeout=timeout).topics.get(name)
        except KafkaException as exc:
            problem = _error_text(exc)
        else:
            error = topic.error if topic is not None else None
            if topic is not None and error is None:
                leaders = [p.leader for p in topic.partitions.values() if p.error is None]
                if len(leaders) == partitions and all(leader >= 0 for leader in leaders):
                    return
                problem = f"{len(leaders)} of {partitions} partitions have a leader"
            elif error is not None:
                problem = error.str()
        time.sleep(0.05)
    raise KgroupError(
        f"topic {name!r} was created but is not ready within {timeout:g} s: {problem}"
    )


def _create(args: argparse.Namespace) -> int:
    target = _target(args)
    bootstrap = target.bootstrap
    name: str = args.name
    admin, topics = _connect(target)
    if name in topics:
        return _exists(name, bootstrap, args.if_not_exists)
    new = NewTopic(
        name,
        num_partitions=args.partitions,
        replication_factor=args.replication_factor,
        config=dict(args.config or []),
    )
    future = admin.create_topics([new], request_timeout=args.timeout)[name]
    try:
        future.result(timeout=args.timeout)
    except KafkaException as exc:
        typed = _typed(exc, bootstrap, args.timeout)
        if isinstance(typed, TopicAlreadyExistsError):
            # Created by someone else since the metadata above.
            return _exists(name, bootstrap, args.if_not_exists)
        raise typed from None
    _await_leaders(admin, name, args.partitions, args.timeout)
    print(
        f"created topic {name} with {args.partitions} partition"
        f"{'s' if args.partitions != 1 else ''} "
        f"(replication factor {args.replication_factor}) at {bootstrap}"
    )
    return EXIT_OK


def _exists(name: str, bootstrap: str, if_not_exists: bool) -> int:
    if if_not_exists:
        print(f"topic {name} exists already at {bootstrap}; left as it is")
        return EXIT_OK
    raise TopicAlreadyExistsError(
        36,
        "TOPIC_ALREADY_EXISTS",
        False,
        f"topic {name!r} exists already at {bootstrap}; use it, pick another name, "
        "or pass --if-not-exists",
    )


@dataclass
class _Deliveries:
    """What the producer's delivery reports said."""

    acknowledged: int = 0
    failed: int = 0
    first_error: str | None = None
    partitions: set[int] = field(default_factory=set)

    def report(self, error: KafkaError | None, message: object) -> None:
        if error is not None:
            self.failed += 1
            if self.first_error is None:
                self.first_error = error.str()
            return
        self.acknowledged += 1
        self.partitions.add(message.partition())  # type: ignore[attr-defined]


def _produce(args: argparse.Namespace) -> int:
    target = _target(args)
    bootstrap = target.bootstrap
    name: str = args.name
    _, topics = _connect(target)
    if name not in topics:
        # Producing would let a broker with auto.create.topics.enable make a
        # one-partition topic silently; say what to do instead.
        raise UnknownTopicOrPartitionError(
            3,
            "UNKNOWN_TOPIC_OR_PARTITION",
            True,
            f"topic {name!r} does not exist at {bootstrap}; create it with "
            f"`kgroup topics create {name}` (`kgroup topics list` shows those that do)",
        )
    deliveries = _Deliveries()
    producer = Producer(
        {
            **target.client_config(),
            "logger": _librdkafka_log,
            "linger.ms": 5,
            # A record the broker has not taken within the timeout is reported
            # failed rather than retried for the default five minutes.
            "message.timeout.ms": max(1, int(args.timeout * 1000)),
        }
    )
    started = time.monotonic()
    for index in range(args.count):
        if args.rate:
            # Pace against the start, not the previous record, so the rate holds
            # on average however long each produce call took.
            due = started + index / args.rate
            while (wait := due - time.monotonic()) > 0:
                producer.poll(wait)  # returns early for each delivery report
        key = f"{args.key_prefix}{index}".encode() if args.key_prefix else None
        value = record_value(index, args.size)
        while True:
            try:
                producer.produce(name, value=value, key=key, on_delivery=deliveries.report)
                break
            except BufferError:
                # The local queue is full: let deliveries drain it.
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(args.timeout)
    took = time.monotonic() - started
    if deliveries.failed or left:
        raise ProduceFailedError(
            f"{deliveries.acknowledged} of {args.count} records reached {name} at {bootstrap}; "
            f"{deliveries.failed} failed ({deliveries.first_error or 'no error reported'}) and "
            f"{left} were not acknowledged within {args.timeout:g} s"
        )
    rate = args.count / took if took > 0 else float(args.count)
    spread = len(deliveries.partitions)
    print(
        f"produced {args.count} records of {args.size} B to {name} "
        f"({spread} partition{'s' if spread != 1 else ''}) in {took:.1f} s "
        f"({rate:.0f} records/s)"
    )
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    _, topics = _connect(_target(args))
    if args.json:
        print(json.dumps([{"topic": name, "partitions": topics[name]} for name in sorted(topics)]))
        return EXIT_OK
    width = max([len("TOPIC"), *map(len, topics)])
    print(f"{'TOPIC':<{width}}  PARTITIONS")
    for name in sorted(topics):
        print(f"{name:<{width}}  {topics[name]}")
    return EXIT_OK


def _run(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Map the errors that have exit codes of their own; the rest go to ``kgroup.cli.main``."""

    def run(args: argparse.Namespace) -> int:
        if not args.verbose:
            _librdkafka_log.setLevel(logging.CRITICAL)
        try:
            return command(args)
        except (TopicAlreadyExistsError, UnknownTopicOrPartitionError) as exc:
            print(f"kgroup: {exc.message or exc}", file=sys.stderr)
            return EXIT_TOPIC
        except NoBrokersAvailableError as exc:
            print(f"kgroup: {exc}", file=sys.stderr)
            return EXIT_UNREACHABLE

    return run


_N = TypeVar("_N", int, float)


def _number_arg(
    parse: Callable[[str], _N], what: str, ok: Callable[[_N], bool], rule: str
) -> Callable[[str], _N]:
    """An argparse ``type=`` that parses with ``parse`` and rejects values failing ``ok``.

    One home for the numeric options so every one words its errors the same way.
    """

    def convert(text: str) -> _N:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{rule}, got {text}")
        return value

    return convert


_positive_int = _number_arg(int, "a whole number", lambda v: v >= 1, "must be at least 1")
_non_negative_int = _number_arg(int, "a whole number", lambda v: v >= 0, "must not be negative")
_positive_float = _number_arg(float, "a number", lambda v: v > 0, "must be above 0")


def add_topics_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``topics create``, ``topics produce`` and ``topics list`` to the ``kgroup`` parser."""
    recorded_bootstrap: RecordedBootstrap = recorded_bootstrap_servers
    topics = subparsers.add_parser(
        "topics",
        help="create a topic, produce test records, list topics",
        description="Create a topic and produce records to try a consumer on, or list the "
        "cluster's topics. The broker is "
        "--bootstrap-servers, else --broker-name's, else the --command-config file's "
        "bootstrap.servers, else $KAFKA_BOOTSTRAP_SERVERS, else the one `kgroup broker up` "
        "started in this directory; --command-config FILE secures the connection. Exit codes: "
        "0 done, 1 the topic exists (create) or does not (produce), 2 other failures, "
        "3 no broker answered.",
    )
    commands = topics.add_subparsers(dest="topics_command", metavar="COMMAND", required=True)

    def common(parser: argparse.ArgumentParser, *, named: bool = True) -> None:
        if named:
            parser.add_argument("name", metavar="NAME", help="the topic")
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="the broker")
        where.add_argument(
            "--broker-name",
            type=broker_name,
            metavar="NAME",
            help="the broker `kgroup broker up --name NAME` started",
        )
        parser.add_argument(
            "--command-config",
            metavar="FILE",
            help="properties file with security.protocol, ssl.*, sasl.* (and optionally "
            "bootstrap.servers, client.id), as `kgroup groups` and kafka-topics.sh take",
        )
        parser.add_argument(
            "--timeout",
            type=_positive_float,
            default=10.0,
            help="seconds to wait for the broker's answers (default 10)",
        )
        parser.set_defaults(recorded_bootstrap=recorded_bootstrap)

    create = commands.add_parser(
        "create",
        help="create a topic and wait until every partition has a leader",
        description="Create a topic and return once every partition has a leader.",
    )
    common(create)
    create.add_argument(
        "--partitions", type=_positive_int, default=3, help="partitions (default 3)"
    )
    create.add_argument(
        "--replication-factor",
        type=_positive_int,
        default=1,
        help="replicas of each partition (default 1; at most the number of brokers)",
    )
    create.add_argument(
        "--config",
        action="append",
        type=parse_key_value,
        metavar="KEY=VALUE",
        help="topic setting, e.g. retention.ms=60000 (repeatable)",
    )
    create.add_argument(
        "--if-not-exists",
        action="store_true",
        help="succeed (exit 0) if the topic exists already, leaving it as it is",
    )
    create.set_defaults(func=_run(_create))

    produce = commands.add_parser(
        "produce",
        help="produce numbered test records to an existing topic",
        description="Produce records 'record <i> ....' (key <prefix><i>) to an existing topic "
        "and wait until the broker acknowledged every one.",
    )
    common(produce)
    produce.add_argument(
        "--count", type=_non_negative_int, default=100, help="records (default 100)"
    )
    produce.add_argument(
        "--size", type=_non_negative_int, default=64, help="value size in bytes (default 64)"
    )
    produce.add_argument(
        "--key-prefix",
        default="key-",
        help="key of record i is PREFIX<i> (default 'key-'); '' sends records without keys",
    )
    produce.add_argument(
        "--rate",
        type=_positive_float,
        help="records per second at most (default: as fast as possible)",
    )
    produce.set_defaults(func=_run(_produce))

    listing = commands.add_parser(
        "list",
        help="list the cluster's topics with their partition counts",
        description="List the cluster's topics (internal ones such as __consumer_offsets "
        "included, as kafka-topics.sh --list) with their partition counts.",
    )
    common(listing, named=False)
    listing.add_argument(
        "--json", action="store_true", help='print [{"topic": ..., "partitions": N}, ...]'
    )
    listing.set_defaults(func=_run(_list))
