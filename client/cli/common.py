"""What several ``kgroup`` commands share: ``KEY=VALUE`` options, the command
config file, which broker to talk to, exit codes.

Above :mod:`kgroup.cli.state` (a recorded broker is one way to find the
servers) and below every command module.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping
from typing import Final

from kgroup.cli.state import STATE_FILE, BrokerRecord, state_dir
from kgroup.config_security import SECURITY_KEYS, is_security_key, unsupported_key_message
from kgroup.errors import ConfigError, NoBrokersAvailableError

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "load_command_config",
    "not_a_broker",
    "parse_key_value",
    "pause_before_retry",
    "resolve_bootstrap_servers",
]

RETRY_PAUSE: Final = 0.2
"""Seconds between metadata attempts that failed: some fail at once (a refused
connection), and retrying those without a pause spins a core until --timeout."""

EXIT_OK = 0
EXIT_FAILED = 2
"""Any failure a command reports as a :class:`kgroup.errors.KgroupError`, or bad usage."""


def parse_key_value(text: str) -> tuple[str, str]:
    """argparse ``type=`` for ``KEY=VALUE`` options (shared with ``kgroup broker up``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


def resolve_bootstrap_servers(given: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The servers to use: ``given``, else ``$KAFKA_BOOTSTRAP_SERVERS``, else the broker
    ``kgroup broker up`` recorded.

    Raises:
        ConfigError: none of the three names a broker.
    """
    if given:
        return given
    env = os.environ if environ is None else environ
    if env.get("KAFKA_BOOTSTRAP_SERVERS"):
        return env["KAFKA_BOOTSTRAP_SERVERS"]
    state = state_dir(env) / STATE_FILE
    try:
        return BrokerRecord.from_json(state.read_text(encoding="utf-8")).bootstrap_servers
    except (OSError, ValueError, KeyError, TypeError):
        pass
    raise ConfigError(
        "no broker to talk to: pass --bootstrap-servers HOST:PORT, set "
        "KAFKA_BOOTSTRAP_SERVERS, or start a local broker with `kgroup broker up`"
    )


_COMMAND_CONFIG_KEYS = ("bootstrap.servers", "client.id")
"""Keys a command config may hold besides the security keys."""


def load_command_config(path: str) -> dict[str, str]:
    """The settings in ``path``: a Java properties file (``key=value`` or ``key: value``
    lines, ``#`` / ``!`` comments), as ``kafka-consumer-groups.sh --command-config`` reads.

    Only connection settings make sense for these commands: ``security.protocol``,
    ``ssl.*``, ``sasl.*`` (as kgroup's consumers take them), ``bootstrap.servers``
    and ``client.id``.

    Raises:
        ConfigError: the file cannot be read, a line is not a setting, or a key is
            not one of those; the message names the file (and the line or key),
            never a value (it may be a password).
    """
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError as exc:
        raise ConfigError(f"--command-config {path}: cannot read it ({exc.strerror})") from None
    settings: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if cut < 0:
            raise ConfigError(
                f"--command-config {path} line {number}: expected key=value, "
                f"got a line without '=' (starting {line[:20]!r})"
            )
        key, value = line[:cut].strip(), line[cut + 1 :].strip()
        if is_security_key(key) and key not in SECURITY_KEYS:
            # A Java client's file (truststore, JAAS) gets the hint a consumer config gets.
            raise ConfigError(
                f"--command-config {path} line {number}: {unsupported_key_message(key)}"
            )
        if key not in SECURITY_KEYS and key not in _COMMAND_CONFIG_KEYS:
            raise ConfigError(
                f"--command-config {path} line {number}: {key!r} is not a setting these "
                "commands use (security.protocol, ssl.*, sasl.*, bootstrap.servers, client.id)"
            )
        settings[key] = value
    return settings


def not_a_broker(bootstrap: str) -> NoBrokersAvailableError:
    """The error for an address that answers but serves no Metadata.

    librdkafka reports it at once as ``_UNSUPPORTED_FEATURE``; every Kafka broker
    listener serves Metadata, so waiting cannot help: this is another port of
    the cluster (a KRaft controller's, say) or not Kafka at all.
    """
    return NoBrokersAvailableError(
        f"{bootstrap} answered but serves no Metadata: it is not a Kafka broker listener "
        "(a KRaft controller's port?); give a broker's bootstrap address "
        "(`kgroup broker status` prints the one it started)"
    )


def pause_before_retry(deadline: float) -> None:
    """Wait :data:`RETRY_PAUSE` before another metadata attempt, not past ``deadline``."""
    time.sleep(max(0.0, min(RETRY_PAUSE, deadline - time.monotonic())))
