"""The consumer config keys kgroup reads: each one's name, type, default, check and doc, once.

:class:`~kgroup.config.ConsumerConfig` parses and validates its attributes
through these definitions, and every other place that needs a key's default
(the sessions building their members, the front end, the simulator, the docs
table in ``docs/configuration.md``) reads it from here, so a key is added or
changed in one place (``tests/unit/test_config_keys.py`` holds the rest to it).

A leaf module (stdlib, :mod:`kgroup.errors` and :mod:`kgroup._settings`): the
config, the front end, the runtime and the test harness all import it without
pulling anything else in.

Adding a key: one :class:`ConfigKey` below (and in :data:`KEYS`), a row in the
configuration table of ``docs/configuration.md``, and, for a key of
:class:`~kgroup.config.ConsumerConfig`, its attribute and one ``read`` in
:meth:`~kgroup.config.ConsumerConfig.from_dict`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeAlias, TypeVar

from kgroup._settings import bool_setting, text_setting
from kgroup.errors import ConfigError

__all__ = [
    "KEYS",
    "AutoOffsetReset",
    "ConfigKey",
    "Deserializer",
    "GroupProtocol",
    "Owner",
    "key",
]

T = TypeVar("T")
_E = TypeVar("_E", bound=enum.Enum)


class GroupProtocol(enum.Enum):
    """Which group membership protocol the consumer speaks."""

    CONSUMER = "consumer"
    """The next-generation protocol (KIP-848): the broker assigns partitions."""
    CLASSIC = "classic"
    """JoinGroup/SyncGroup: a member of the group (the leader) assigns partitions."""
    AUTO = "auto"
    """The new protocol when the broker supports it, otherwise classic."""


class AutoOffsetReset(enum.Enum):
    """Where to start a partition that has no committed offset."""

    EARLIEST = "earliest"
    LATEST = "latest"
    ERROR = "error"


class Owner(enum.Enum):
    """Who reads a key, which decides whether librdkafka sees it."""

    CONFIG = "config"
    """An attribute of ConsumerConfig; librdkafka never sees it (its group machinery
    stays idle, so its keys of the same names must not reach it)."""
    FRONTEND = "frontend"
    """The front end's; taken out of the dict before ConsumerConfig is built."""
    DATA_PLANE = "data plane"
    """librdkafka's, handed to it unchanged; kgroup reads the value too."""


Reader = Callable[[Mapping[str, Any], "ConfigKey[T]"], T]

Deserializer: TypeAlias = Callable[[bytes | None, Any], Any]
"""What ``key.deserializer`` / ``value.deserializer`` take: a
``confluent_kafka.serialization.Deserializer`` or any callable, called as
``d(data, ctx)`` with the record's bytes (or None) and a
``confluent_kafka.serialization.SerializationContext``."""


# No slots: a slotted frozen generic dataclass cannot be called subscripted
# (``ConfigKey[int](...)``: typing's __orig_class__ assignment fails).
@dataclass(frozen=True)
class ConfigKey(Generic[T]):
    """One config key.

    Attributes:
        name: the dotted Kafka name, as confluent-kafka and the Java client spell it.
        default: the value when the key is absent (for a required key: never used).
        doc: one line saying what it does (the docs table says more).
        reader: parses and checks the user's value; raises ConfigError naming the key.
        owner: who reads it (see :class:`Owner`).
        attr: the :class:`~kgroup.config.ConsumerConfig` attribute holding it, if any.
        only: the one group protocol the key makes sense for (an error with the other).
        why_only: why, for that error: where the setting lives with the other protocol.
        shown: the default as the docs table shows it, when it is not simply the value.
        required: the config cannot be built without it.
        minimum: an integer key's lowest accepted value.
    """

    name: str
    default: T
    doc: str
    reader: Reader[T]
    owner: Owner = Owner.CONFIG
    attr: str | None = None
    only: GroupProtocol | None = None
    why_only: str = ""
    shown: str | None = None
    required: bool = False
    minimum: int = 0

    def read(self, conf: Mapping[str, Any]) -> T:
        """The key's value in ``conf``, checked, or its default.

        Raises:
            ConfigError: naming the key and what is wrong with the value.
        """
        return self.reader(conf, self)

    @property
    def shown_default(self) -> str:
        """The default as the docs table shows it."""
        if self.shown is not None:
            return self.shown
        if self.required:
            return "required"
        value: object = self.default
        if value is None:
            return "none"
        if isinstance(value, bool):
            return f"`{str(value).lower()}`"
        if isinstance(value, enum.Enum):
            return f"`{value.value}`"
        if isinstance(value, str):
            return f"`{value}`"
        return str(value)


# ---------------------------------------------------------------- readers


def _int(conf: Mapping[str, Any], k: ConfigKey[int]) -> int:
    value = conf.get(k.name, k.default)
    if isinstance(value, bool):
        raise ConfigError(f"{k.name} must be an integer, got {value!r}")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ConfigError(f"{k.name} must be an integer, got {value!r}") from None
    if not isinstance(value, int):
        raise ConfigError(f"{k.name} must be an integer, got {value!r}")
    if value < k.minimum:
        raise ConfigError(f"{k.name} must be >= {k.minimum}, got {value}")
    return value


def _data_plane_int(conf: Mapping[str, Any], k: ConfigKey[int]) -> int:
    # librdkafka checks the value itself (the passthrough probe); kgroup's own
    # reading falls back to the default rather than refuse what librdkafka took.
    value = conf.get(k.name)
    text = str(value).strip() if value is not None else ""
    return int(text) if text.isdigit() else k.default


def _bool(conf: Mapping[str, Any], k: ConfigKey[bool]) -> bool:
    return bool_setting(conf, k.name, k.default)


def _optional_text(conf: Mapping[str, Any], k: ConfigKey[str | None]) -> str | None:
    return text_setting(conf, k.name)


def _required_text(conf: Mapping[str, Any], k: ConfigKey[str]) -> str:
    value = text_setting(conf, k.name)
    if value is None:
        raise ConfigError(f"{k.name} is required: set it in the consumer config")
    return value


def _text_or_default(conf: Mapping[str, Any], k: ConfigKey[str]) -> str:
    return text_setting(conf, k.name) or k.default


def _deserializer(
    conf: Mapping[str, Any], k: ConfigKey[Deserializer | None]
) -> Deserializer | None:
    value: object = conf.get(k.name)
    if value is None:
        return None
    # A class is callable too, but calling it builds a deserializer instead of
    # deserializing: StringDeserializer where StringDeserializer() was meant.
    if isinstance(value, type) or not callable(value):
        raise ConfigError(
            f"{k.name} must be a deserializer instance (confluent_kafka.serialization's "
            "StringDeserializer('utf_8'), JSONDeserializer(...) ...) or a callable "
            f"(data: bytes | None, ctx: SerializationContext) -> object, got {value!r}"
        )
    deserializer: Deserializer = value
    return deserializer


def _servers(conf: Mapping[str, Any], k: ConfigKey[tuple[str, ...]]) -> tuple[str, ...]:
    text = text_setting(conf, k.name)
    if text is None:
        raise ConfigError(f"{k.name} is required: set it in the consumer config")
    servers = tuple(s.strip() for s in text.split(","))
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(
                f"{k.name} entry {server!r} must look like host:port (comma-separated for several)"
            )
    return servers


def _names(conf: Mapping[str, Any], k: ConfigKey[tuple[object, ...]]) -> tuple[object, ...]:
    value = conf.get(k.name, k.default)
    if isinstance(value, str):
        return tuple(s.strip() for s in value.split(",") if s.strip())
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def _assignor_names(conf: Mapping[str, Any], k: ConfigKey[tuple[str, ...]]) -> tuple[str, ...]:
    value = conf.get(k.name, k.default)
    if isinstance(value, str):
        value = tuple(s.strip() for s in value.split(",") if s.strip())
    if not isinstance(value, (list, tuple)) or not all(isinstance(n, str) and n for n in value):
        raise ConfigError(
            f"{k.name} must be assignor names (a comma-separated string or a list), got {value!r}"
        )
    return tuple(value)


def _enum_reader(enum_type: type[_E]) -> Reader[_E]:
    def read(conf: Mapping[str, Any], k: ConfigKey[_E]) -> _E:
        value = conf.get(k.name, k.default.value)
        if isinstance(value, enum_type):
            return value
        try:
            return enum_type(str(value).strip().lower())
        except ValueError:
            valid = ", ".join(str(m.value) for m in enum_type)
            raise ConfigError(f"{k.name} must be one of {valid}; got {value!r}") from None

    return read


# librdkafka's aliases for auto.offset.reset, accepted so configs move over unchanged.
_OFFSET_RESET_ALIASES: Final = {
    "earliest": AutoOffsetReset.EARLIEST,
    "smallest": AutoOffsetReset.EARLIEST,
    "beginning": AutoOffsetReset.EARLIEST,
    "latest": AutoOffsetReset.LATEST,
    "largest": AutoOffsetReset.LATEST,
    "end": AutoOffsetReset.LATEST,
    "error": AutoOffsetReset.ERROR,
}


def _offset_reset(conf: Mapping[str, Any], k: ConfigKey[AutoOffsetReset]) -> AutoOffsetReset:
    value = conf.get(k.name, k.default.value)
    if isinstance(value, AutoOffsetReset):
        return value
    try:
        return _OFFSET_RESET_ALIASES[str(value).strip().lower()]
    except KeyError:
        raise ConfigError(f"{k.name} must be earliest, latest or error; got {value!r}") from None


def _ms(
    name: str,
    default: int,
    doc: str,
    *,
    attr: str | None = None,
    only: GroupProtocol | None = None,
    why_only: str = "",
) -> ConfigKey[int]:
    return ConfigKey(name, default, doc, _int, attr=attr, only=only, why_only=why_only, minimum=1)


# ------------------------------------------------------------------- keys

BOOTSTRAP_SERVERS: Final = ConfigKey[tuple[str, ...]](
    "bootstrap.servers",
    (),
    "host:port[,host:port...] of brokers to bootstrap from",
    _servers,
    attr="bootstrap_servers",
    required=True,
)
GROUP_ID: Final = ConfigKey[str](
    "group.id", "", "the group", _required_text, attr="group_id", required=True
)
GROUP_PROTOCOL: Final = ConfigKey[GroupProtocol](
    "group.protocol",
    GroupProtocol.CONSUMER,
    "consumer (KIP-848), classic (JoinGroup / SyncGroup) or auto",
    _enum_reader(GroupProtocol),
    attr="group_protocol",
)
GROUP_INSTANCE_ID: Final = ConfigKey[str | None](
    "group.instance.id",
    None,
    "static membership",
    _optional_text,
    attr="group_instance_id",
)
GROUP_REMOTE_ASSIGNOR: Final = ConfigKey[str | None](
    "group.remote.assignor",
    None,
    "the broker-side assignor of the new protocol (None: the broker's default)",
    _optional_text,
    attr="group_remote_assignor",
    only=GroupProtocol.CONSUMER,
    why_only=(
        "it names a broker-side assignor of the new protocol; with group.protocol=classic "
        "use partition.assignment.strategy"
    ),
    shown="broker's default",
)
DEFAULT_ASSIGNMENT_STRATEGY: Final = "range,cooperative-sticky"
"""``partition.assignment.strategy`` when not set: the Java client's default since 3.0."""
PARTITION_ASSIGNMENT_STRATEGY: Final = ConfigKey[tuple[object, ...]](
    "partition.assignment.strategy",
    (),
    "classic protocol: assignor names, instances or classes, in preference order "
    f"(empty: {DEFAULT_ASSIGNMENT_STRATEGY})",
    _names,
    attr="partition_assignment_strategy",
    only=GroupProtocol.CLASSIC,
    why_only=(
        "with group.protocol=consumer the broker assigns partitions; choose its "
        "assignor with group.remote.assignor (uniform or range)"
    ),
    shown=f"`{DEFAULT_ASSIGNMENT_STRATEGY}`",
)
SESSION_TIMEOUT_MS: Final = _ms(
    "session.timeout.ms",
    45_000,
    "classic protocol: the member's session timeout, sent in JoinGroup",
    attr="session_timeout_ms",
    only=GroupProtocol.CLASSIC,
    why_only=(
        "with group.protocol=consumer the session timeout is set on the broker "
        "(group.consumer.session.timeout.ms, or the group config consumer.session.timeout.ms)"
    ),
)
CONSUMER_SESSION_TIMEOUT_MS: Final = _ms(
    "group.consumer.session.timeout.ms",
    45_000,
    "consumer protocol: the broker's session timeout (the broker does not tell the client)",
    attr="consumer_session_timeout_ms",
    only=GroupProtocol.CONSUMER,
    why_only=(
        "it tells a consumer-protocol member the broker's session timeout; with "
        "group.protocol=classic use session.timeout.ms"
    ),
)
HEARTBEAT_INTERVAL_MS: Final = _ms(
    "heartbeat.interval.ms",
    3_000,
    "classic protocol: time between heartbeats",
    attr="heartbeat_interval_ms",
    only=GroupProtocol.CLASSIC,
    why_only=(
        "with group.protocol=consumer the broker sets the heartbeat interval "
        "(group.consumer.heartbeat.interval.ms, or the group config "
        "consumer.heartbeat.interval.ms)"
    ),
)
ENABLE_AUTO_COMMIT: Final = ConfigKey[bool](
    "enable.auto.commit",
    True,
    "commit positions periodically, before a revocation and on close",
    _bool,
    attr="enable_auto_commit",
)
AUTO_COMMIT_INTERVAL_MS: Final = _ms(
    "auto.commit.interval.ms", 5_000, "time between auto commits", attr="auto_commit_interval_ms"
)
AUTO_OFFSET_RESET: Final = ConfigKey[AutoOffsetReset](
    "auto.offset.reset",
    AutoOffsetReset.LATEST,
    "where a partition without a committed offset starts",
    _offset_reset,
    attr="auto_offset_reset",
)
MAX_POLL_INTERVAL_MS: Final = _ms(
    "max.poll.interval.ms",
    300_000,
    "longest time between polls; also the rebalance timeout",
    attr="max_poll_interval_ms",
)
CLIENT_RACK: Final = ConfigKey[str | None](
    "client.rack", None, "rack id for rack-aware assignors", _optional_text, attr="client_rack"
)
CLIENT_ID: Final = ConfigKey[str](
    "client.id", "kgroup", "the client id sent with requests", _text_or_default, attr="client_id"
)
RETRY_BACKOFF_MS: Final = _ms(
    "retry.backoff.ms", 100, "first retry backoff, doubling", attr="retry_backoff_ms"
)
RETRY_BACKOFF_MAX_MS: Final = _ms(
    "retry.backoff.max.ms", 1_000, "longest retry backoff", attr="retry_backoff_max_ms"
)
REQUEST_TIMEOUT_MS: Final = _ms(
    "request.timeout.ms", 30_000, "per request timeout", attr="request_timeout_ms"
)
CLIENT_ASSIGNORS: Final = ConfigKey[tuple[str, ...]](
    "group.client.assignors",
    (),
    "the KIP-848 draft's client-side assignors: refused, except in the simulator",
    _assignor_names,
    attr="group_client_assignors",
    shown="—",
)
ENABLE_AUTO_OFFSET_STORE: Final = ConfigKey[bool](
    "enable.auto.offset.store",
    True,
    "false: commits cover what store_offsets() stored",
    _bool,
    owner=Owner.FRONTEND,
)
KEY_DESERIALIZER: Final = ConfigKey["Deserializer | None"](
    "key.deserializer",
    None,
    "turns each record's key bytes into the key poll() returns",
    _deserializer,
    owner=Owner.FRONTEND,
)
VALUE_DESERIALIZER: Final = ConfigKey["Deserializer | None"](
    "value.deserializer",
    None,
    "turns each record's value bytes into the value poll() returns",
    _deserializer,
    owner=Owner.FRONTEND,
)
METADATA_MAX_AGE_MS: Final = ConfigKey[int](
    "metadata.max.age.ms",
    300_000,
    "how old metadata may be (the classic leader's watch, truncation checks)",
    _data_plane_int,
    owner=Owner.DATA_PLANE,
)
SOCKET_CONNECTION_SETUP_TIMEOUT_MS: Final = ConfigKey[int](
    "socket.connection.setup.timeout.ms",
    10_000,
    "opening a connection, never longer than request.timeout.ms",
    _data_plane_int,
    owner=Owner.DATA_PLANE,
)
FETCH_WAIT_MAX_MS: Final = ConfigKey[int](
    "fetch.wait.max.ms",
    500,
    "librdkafka's longest fetch wait at the broker; socket.timeout.ms stays above it",
    _data_plane_int,
    owner=Owner.DATA_PLANE,
)

KEYS: Final[tuple[ConfigKey[Any], ...]] = (
    BOOTSTRAP_SERVERS,
    GROUP_ID,
    GROUP_PROTOCOL,
    GROUP_INSTANCE_ID,
    GROUP_REMOTE_ASSIGNOR,
    CLIENT_ASSIGNORS,
    PARTITION_ASSIGNMENT_STRATEGY,
    SESSION_TIMEOUT_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    HEARTBEAT_INTERVAL_MS,
    ENABLE_AUTO_COMMIT,
    AUTO_COMMIT_INTERVAL_MS,
    AUTO_OFFSET_RESET,
    MAX_POLL_INTERVAL_MS,
    CLIENT_RACK,
    CLIENT_ID,
    REQUEST_TIMEOUT_MS,
    RETRY_BACKOFF_MS,
    RETRY_BACKOFF_MAX_MS,
    ENABLE_AUTO_OFFSET_STORE,
    KEY_DESERIALIZER,
    VALUE_DESERIALIZER,
    METADATA_MAX_AGE_MS,
    SOCKET_CONNECTION_SETUP_TIMEOUT_MS,
    FETCH_WAIT_MAX_MS,
)
"""Every key kgroup reads, in the order of the docs table."""

_BY_NAME: Final = {k.name: k for k in KEYS}


def key(name: str) -> ConfigKey[Any]:
    """The definition of the key ``name``.

    Raises:
        KeyError: kgroup reads no key of that name.
    """
    return _BY_NAME[name]
