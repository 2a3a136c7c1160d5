"""Typed, validated consumer configuration, built once from the user's dict.

Users configure kgroup the way they configure confluent-kafka and the Java
client: a dict of Kafka's dotted keys. :meth:`ConsumerConfig.from_dict` turns
it into a frozen value, rejecting what cannot work with a :class:`ConfigError`
that names the key and says what to do:

- keys kgroup owns are parsed and checked here, each through its one
  definition in :mod:`kgroup.config_keys` (name, type, default, check, doc);
- keys kgroup does not own are handed to the data plane (librdkafka), which is
  asked whether it knows them, so a typo is an error naming the key instead of
  a setting silently ignored;
- keys that make no sense for the chosen ``group.protocol`` are errors that say
  why, as the Java client does;
- security keys (``security.protocol``, ``ssl.*``, ``sasl.*``, ``oauth_cb``)
  become one :class:`~kgroup.config_security.SecurityConfig`, used by
  kgroup's own connections and rendered back for the data plane, so both
  connect the same way. Secrets live only in it, wrapped in
  :class:`~kgroup.config_security.Secret`, never in :attr:`ConsumerConfig.passthrough`;
- confluent-kafka's callbacks (``error_cb``, ``stats_cb``, ``throttle_cb``,
  ``on_commit``) and ``logger`` become :class:`Callbacks`: callables cannot go
  through librdkafka's string config, and ``on_commit`` is kgroup's to call
  (kgroup commits, not librdkafka).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, Final

from kgroup import config_keys as keys
from kgroup.config_keys import AutoOffsetReset, GroupProtocol
from kgroup.errors import ConfigError
from kgroup.telemetry.config import TelemetryConfig, is_telemetry_key, parse_telemetry_config

if TYPE_CHECKING:
    from kgroup.config_security import SecurityConfig

__all__ = [
    "AutoOffsetReset",
    "Callbacks",
    "ConsumerConfig",
    "GroupProtocol",
    "PassthroughValidator",
]


_PROTOCOL_ONLY_KEYS = {
    protocol: {k.name: k.why_only for k in keys.KEYS if k.only is protocol}
    for protocol in (GroupProtocol.CLASSIC, GroupProtocol.CONSUMER)
}
"""Keys that make no sense with the other protocol, with why (as the Java client says)."""

# The KIP-848 draft's client-side assignors (the draft called the key
# group.local.assignors). No Apache Kafka broker offers the mode, so outside the
# simulator both names are refused at construction with what to use instead.
CLIENT_ASSIGNORS_KEY = keys.CLIENT_ASSIGNORS.name
DEFAULT_METADATA_MAX_AGE_MS = keys.METADATA_MAX_AGE_MS.default
"""``metadata.max.age.ms`` when not set (the Java client's default)."""
_CLIENT_ASSIGNOR_KEYS = (CLIENT_ASSIGNORS_KEY, "group.local.assignors")
_CLIENT_SIDE_MODE_UNAVAILABLE = (
    "Apache Kafka brokers do not offer the client-side assignor mode of the KIP-848 draft "
    "(ConsumerGroupPrepareAssignment / ConsumerGroupInstallAssignment were removed before "
    "release), so no broker would ever ask this consumer to compute an assignment. Use a "
    "broker-side assignor with group.remote.assignor (uniform or range), or "
    "group.protocol=classic with partition.assignment.strategy to run a Python assignor; "
    "the simulator (kgroup.testing.sim) runs the client-side mode for tests"
)

# Keys kgroup itself implements. librdkafka has keys of the same names but must
# not see them: its own group machinery stays idle (design: assign mode).
_OWNED_KEYS = frozenset(
    {*(k.name for k in keys.KEYS if k.owner is keys.Owner.CONFIG), *_CLIENT_ASSIGNOR_KEYS}
)

# confluent-kafka's callback keys, with the signature each is called with (for errors).
_CALLBACK_KEYS = {
    "error_cb": "error_cb(err: confluent_kafka.KafkaError)",
    "stats_cb": "stats_cb(stats_json: str) (set statistics.interval.ms too)",
    "throttle_cb": "throttle_cb(event: confluent_kafka.ThrottleEvent)",
    "on_commit": (
        "on_commit(err: confluent_kafka.KafkaError | None, "
        "partitions: list[confluent_kafka.TopicPartition])"
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Callbacks:
    """confluent-kafka's callback settings, with confluent-kafka's signatures.

    ``error_cb``, ``stats_cb``, ``throttle_cb`` and ``logger`` are librdkafka's
    (the data plane's) and are called from inside ``poll()``/``consume()``;
    ``on_commit`` is called for kgroup's own commits (sync, asynchronous, auto
    and the commit before a revocation) at the application's next poll.
    """

    error_cb: Callable[[Any], object] | None = None
    stats_cb: Callable[[str], object] | None = None
    throttle_cb: Callable[[Any], object] | None = None
    on_commit: Callable[[Any, list[Any]], object] | None = None
    logger: logging.Logger | logging.LoggerAdapter[Any] | None = None
    """Where librdkafka's log lines go; None: the ``kgroup.dataplane.librdkafka`` logger."""


def _callbacks(conf: Mapping[str, Any]) -> Callbacks:
    found: dict[str, Any] = {}
    for key, signature in _CALLBACK_KEYS.items():
        value = conf.get(key)
        if value is None:
            continue
        if not callable(value):
            raise ConfigError(f"{key} must be a callable {signature}, got {value!r}")
        found[key] = value
    logger = conf.get("logger")
    if logger is not None and not callable(getattr(logger, "log", None)):
        # librdkafka's lines reach it as logger.log(level, "%s [%s] %s", facility, name, text).
        raise ConfigError(
            f"logger must be a logging.Logger (anything with a log(level, msg, *args) "
            f"method), got {logger!r}"
        )
    return Callbacks(logger=logger, **found)


PassthroughValidator = Callable[[Mapping[str, str]], None]
"""Checks the keys kgroup hands to the data plane; raises ConfigError on the first bad one."""


_SHARE_ONLY_KEY: Final = "max.poll.records"
"""Java's and librdkafka's key for records per poll, which librdkafka reads only for
share consumers (kgroup's :class:`~kgroup.ShareConsumer` takes it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig:
    """A validated consumer configuration. Build it with :meth:`from_dict`."""

    bootstrap_servers: tuple[str, ...]
    group_id: str
    group_protocol: GroupProtocol = keys.GROUP_PROTOCOL.default
    group_instance_id: str | None = keys.GROUP_INSTANCE_ID.default
    group_remote_assignor: str | None = keys.GROUP_REMOTE_ASSIGNOR.default
    partition_assignment_strategy: tuple[object, ...] = keys.PARTITION_ASSIGNMENT_STRATEGY.default
    """Classic protocol: assignor names, instances or classes, in preference order."""
    session_timeout_ms: int = keys.SESSION_TIMEOUT_MS.default
    consumer_session_timeout_ms: int = keys.CONSUMER_SESSION_TIMEOUT_MS.default
    """Consumer protocol: the broker's ``group.consumer.session.timeout.ms`` (the
    client is not told it); a member with no successful heartbeat for this long
    treats its partitions as lost."""
    heartbeat_interval_ms: int = keys.HEARTBEAT_INTERVAL_MS.default
    enable_auto_commit: bool = keys.ENABLE_AUTO_COMMIT.default
    auto_commit_interval_ms: int = keys.AUTO_COMMIT_INTERVAL_MS.default
    auto_offset_reset: AutoOffsetReset = keys.AUTO_OFFSET_RESET.default
    max_poll_interval_ms: int = keys.MAX_POLL_INTERVAL_MS.default
    client_rack: str | None = keys.CLIENT_RACK.default
    client_id: str = keys.CLIENT_ID.default
    retry_backoff_ms: int = keys.RETRY_BACKOFF_MS.default
    retry_backoff_max_ms: int = keys.RETRY_BACKOFF_MAX_MS.default
    request_timeout_ms: int = keys.REQUEST_TIMEOUT_MS.default
    group_client_assignors: tuple[str, ...] = keys.CLIENT_ASSIGNORS.default
    """The draft's client-side assignor names; only ever set through the test-only
    ``client_side_mode`` of :meth:`from_dict` (no broker offers the mode)."""
    passthrough: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Keys kgroup does not implement itself, for the data plane (librdkafka).

    Security keys appear here as the user wrote them, except secrets and
    ``oauth_cb``; the data plane takes its security settings from :attr:`security`.
    """
    security: SecurityConfig = field(default_factory=lambda: _security_module().SecurityConfig())
    """How kgroup's connections and the data plane's are secured (TLS, SASL)."""
    callbacks: Callbacks = field(default_factory=Callbacks)
    """confluent-kafka's callbacks and ``logger`` (never in :attr:`passthrough`)."""
    telemetry: TelemetryConfig | None = None
    """Where telemetry events go (``telemetry.*`` keys); None: off (the default)."""

    @classmethod
    def from_dict(
        cls,
        conf: Mapping[str, Any],
        *,
        validate_passthrough: PassthroughValidator | None = None,
        client_side_mode: bool = False,
    ) -> ConsumerConfig:
        """Validate ``conf`` and build the config.

        Args:
            conf: Kafka's dotted keys, as confluent-kafka and the Java client take them.
            validate_passthrough: called with the keys kgroup does not own; the data
                plane passes a function that asks librdkafka, so unknown keys fail here.
            client_side_mode: test-only: accept ``group.client.assignors`` (for a
                simulated coordinator that offers the KIP-848 draft's client-side mode).

        Raises:
            ConfigError: naming the offending key and what to do about it.
        """
        for key in conf:
            if not isinstance(key, str):
                raise ConfigError(f"config keys must be strings, got {key!r}")
        if _SHARE_ONLY_KEY in conf:
            # librdkafka accepts it and ignores it outside share consumers: a Java
            # application's setting would do nothing, with nothing saying so.
            raise ConfigError(
                f"{_SHARE_ONLY_KEY} is a share consumer's setting (kgroup.ShareConsumer); a "
                "consumer group member's poll() returns one record and consume(num_messages) "
                "up to num_messages: pass the batch size there, and drop the key"
            )

        protocol = keys.GROUP_PROTOCOL.read(conf)
        for key in _CLIENT_ASSIGNOR_KEYS:
            if key in conf and not (client_side_mode and key == CLIENT_ASSIGNORS_KEY):
                raise ConfigError(f"{key} cannot be used: {_CLIENT_SIDE_MODE_UNAVAILABLE}")
        client_assignors = keys.CLIENT_ASSIGNORS.read(conf)
        for only, refused in _PROTOCOL_ONLY_KEYS.items():
            if protocol is only or protocol is GroupProtocol.AUTO:
                continue
            for key, why in refused.items():
                if key in conf:
                    raise ConfigError(
                        f"{key} cannot be used with group.protocol={protocol.value}: {why}"
                    )

        servers = keys.BOOTSTRAP_SERVERS.read(conf)
        strategy = keys.PARTITION_ASSIGNMENT_STRATEGY.read(conf)
        session_timeout = keys.SESSION_TIMEOUT_MS.read(conf)
        heartbeat_interval = keys.HEARTBEAT_INTERVAL_MS.read(conf)
        if heartbeat_interval >= session_timeout:
            raise ConfigError(
                f"heartbeat.interval.ms ({heartbeat_interval}) must be lower than "
                f"session.timeout.ms ({session_timeout})"
            )
        backoff = keys.RETRY_BACKOFF_MS.read(conf)
        backoff_max = keys.RETRY_BACKOFF_MAX_MS.read(conf)
        if backoff_max < backoff:
            raise ConfigError(
                f"retry.backoff.max.ms ({backoff_max}) must be >= retry.backoff.ms ({backoff})"
            )

        sec = _security_module()
        security = sec.SecurityConfig.from_config(conf)
        callbacks = _callbacks(conf)
        passthrough: dict[str, str] = {}
        telemetry = _telemetry(conf, security, sec.is_security_key)
        for key, value in conf.items():
            if (
                key in _OWNED_KEYS
                or key in sec.SECRET_KEYS
                or key in _CALLBACK_KEYS
                or key in ("oauth_cb", "logger")
            ):
                continue
            if is_telemetry_key(key):
                continue  # kgroup's own; librdkafka would reject them
            passthrough[key] = value if isinstance(value, str) else str(value)
        if validate_passthrough is not None and passthrough:
            # librdkafka checks the security settings as a whole (PLAIN needs its
            # password ...), so it sees them exactly as the data plane will get them:
            # rendered from the SecurityConfig, secrets included. The user's own
            # security keys stay out: they would bring back the token source the
            # probe config leaves out (sasl.oauthbearer.method=oidc without its
            # client secret, which librdkafka refuses).
            probe = dict(passthrough)
            if security.sasl is not None or security.tls is not None:
                probe = {k: v for k, v in passthrough.items() if not sec.is_security_key(k)}
                probe.update(security.librdkafka_probe_config())
            validate_passthrough(MappingProxyType(probe))

        return cls(
            bootstrap_servers=servers,
            group_id=keys.GROUP_ID.read(conf),
            group_protocol=protocol,
            group_instance_id=keys.GROUP_INSTANCE_ID.read(conf),
            group_remote_assignor=keys.GROUP_REMOTE_ASSIGNOR.read(conf),
            partition_assignment_strategy=strategy,
            session_timeout_ms=session_timeout,
            consumer_session_timeout_ms=keys.CONSUMER_SESSION_TIMEOUT_MS.read(conf),
            heartbeat_interval_ms=heartbeat_interval,
            enable_auto_commit=keys.ENABLE_AUTO_COMMIT.read(conf),
            auto_commit_interval_ms=keys.AUTO_COMMIT_INTERVAL_MS.read(conf),
            auto_offset_reset=keys.AUTO_OFFSET_RESET.read(conf),
            max_poll_interval_ms=keys.MAX_POLL_INTERVAL_MS.read(conf),
            client_rack=keys.CLIENT_RACK.read(conf),
            client_id=keys.CLIENT_ID.read(conf),
            retry_backoff_ms=backoff,
            retry_backoff_max_ms=backoff_max,
            request_timeout_ms=keys.REQUEST_TIMEOUT_MS.read(conf),
            group_client_assignors=client_assignors,
            passthrough=MappingProxyType(passthrough),
            security=security,
            callbacks=callbacks,
            telemetry=telemetry,
        )

    @property
    def metadata_max_age(self) -> float:
        """``metadata.max.age.ms`` in seconds (Java's key and default, 5 minutes).

        A data-plane key that kgroup reads too: the classic leader's metadata
        watch (and a classic regex's re-resolution), and how old the metadata a
        truncation check relies on may be. librdkafka's own refresh interval,
        ``topic.metadata.refresh.interval.ms``, shortens it when set lower: a
        confluent-kafka application sets that key to see new topics sooner.
        """
        age = keys.METADATA_MAX_AGE_MS.read(self.passthrough)
        refresh = self.passthrough.get("topic.metadata.refresh.interval.ms")
        with contextlib.suppress(TypeError, ValueError):  # librdkafka itself refuses it
            if refresh is not None and 0 < int(refresh) < age:
                age = int(refresh)
        return age / 1000

    @property
    def security_protocol(self) -> str:
        """The security protocol both kgroup's connections and the data plane use."""
        return self.security.protocol.value

    def security_settings(self) -> Mapping[str, str]:
        """The non-secret security keys as the user gave them (secrets are in :attr:`security`)."""
        is_security_key = _security_module().is_security_key
        return MappingProxyType({k: v for k, v in self.passthrough.items() if is_security_key(k)})


TELEMETRY_DIR_ENV = "KGROUP_TELEMETRY_DIR"
"""Environment variable: a directory that consumers with no ``telemetry.*`` key write
JSON Lines telemetry to (a test suite's switch; an explicit ``telemetry.sink`` wins)."""


_SPELLINGS: Final = frozenset({"sasl.mechanism", "sasl.mechanisms"})
"""One librdkafka setting under two names."""


def _telemetry(
    conf: Mapping[str, Any], security: SecurityConfig, is_security_key: Callable[[str], bool]
) -> TelemetryConfig | None:
    if not any(is_telemetry_key(key) for key in conf):
        directory = os.environ.get(TELEMETRY_DIR_ENV, "").strip()
        if directory:
            # Whole test suites (and their member processes) turn telemetry on
            # without touching each consumer's config.
            return parse_telemetry_config({"telemetry.sink": f"jsonl:{directory.rstrip('/')}/"})
    telemetry = parse_telemetry_config(conf)
    if telemetry is None or not telemetry.producer_config:
        return telemetry
    # The Kafka sink's producer connects as the consumer does: its security
    # settings are the validated SecurityConfig's, rendered as for the data
    # plane (every accepted key, oauth_cb included), not the raw keys with a
    # few prefixes. telemetry.kafka.* settings still win, for another cluster.
    overrides = {
        key.removeprefix("telemetry.kafka.") for key in conf if key.startswith("telemetry.kafka.")
    }
    producer = {
        key: value
        for key, value in telemetry.producer_config.items()
        if key in overrides or not is_security_key(key)
    }
    rendered = security.librdkafka_config()
    oauth_cb = rendered.pop("oauth_cb", None)
    for key, value in rendered.items():
        # librdkafka reads both spellings as one setting, the last one given
        # winning: an override under either keeps the consumer's out.
        if key in _SPELLINGS and any(k in producer for k in _SPELLINGS):
            continue
        producer.setdefault(key, str(value))
    return replace(
        telemetry,
        producer_config=MappingProxyType(producer),
        oauth_cb=oauth_cb if callable(oauth_cb) else None,
    )


def _security_module() -> ModuleType:
    # Imported on use: the security config loads ssl, which importing kgroup
    # for a config-free use (its protocol layer, say) does not need.
    from kgroup import config_security  # noqa: PLC0415

    return config_security
