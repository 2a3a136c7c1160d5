"""Where ``kgroup broker up`` records its brokers, and whether a recorded broker still runs.

The lowest layer of the CLI: the broker commands write and read these
records, and the other commands find "the broker ``kgroup broker up``
started" through them when no ``--bootstrap-servers`` is given.
"""

from __future__ import annotations

import argparse
import enum
import hashlib
import json
import logging
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from kgroup.errors import ConfigError

__all__ = [
    "DATA_DIR",
    "STATE_FILE",
    "BrokerRecord",
    "NodeRecord",
    "PidState",
    "broker_name",
    "broker_state_dir",
    "command_line",
    "process_of",
    "read_record",
    "recorded_bootstrap_servers",
    "state_dir",
    "write_record",
]

_log = logging.getLogger("kgroup.cli")

STATE_FILE = "broker.json"
"""The record's file name in a broker's state directory."""
DATA_DIR = "broker"
"""The broker's data (logs, config) in its state directory."""


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return the root of the CLI's state (not created).

    ``$KGROUP_STATE_DIR`` if set, else ``$XDG_STATE_HOME/kgroup``, else
    ``~/.local/state/kgroup``. :func:`broker_state_dir` picks one broker's
    directory from it.
    """
    env = os.environ if environ is None else environ
    if env.get("KGROUP_STATE_DIR"):
        return Path(env["KGROUP_STATE_DIR"])
    if env.get("XDG_STATE_HOME"):
        return Path(env["XDG_STATE_HOME"]) / "kgroup"
    return Path.home() / ".local" / "state" / "kgroup"


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def broker_name(text: str) -> str:
    """Check a ``--name``: it becomes a directory name, so letters, digits, ``._-`` only."""
    if not _NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a broker name: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return text


def broker_state_dir(
    name: str | None = None,
    *,
    cwd: Path | str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """Return the state directory of the broker ``kgroup broker up`` starts (not created).

    Each working directory gets its own broker, so two projects on one machine
    never stop each other's: ``<root>/dirs/<basename>-<hash of the path>``,
    where ``<root>`` is :func:`state_dir`. ``name`` (``--name``) picks
    ``<root>/names/<name>`` instead, shared by every directory that names it.
    ``$KGROUP_STATE_DIR`` pins the state to exactly that directory, for
    scripts and CI that manage one broker themselves.

    Raises:
        ConfigError: both ``name`` and ``$KGROUP_STATE_DIR`` are given.
    """
    env = os.environ if environ is None else environ
    if env.get("KGROUP_STATE_DIR"):
        if name is not None:
            raise ConfigError(
                f"--name {name} and KGROUP_STATE_DIR={env['KGROUP_STATE_DIR']} both choose the "
                "state directory; unset KGROUP_STATE_DIR or drop --name"
            )
        return Path(env["KGROUP_STATE_DIR"])
    root = state_dir(env)
    if name is not None:
        return root / "names" / broker_name(name)
    here = Path(os.getcwd() if cwd is None else cwd).absolute()
    digest = hashlib.sha256(str(here).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    # The base name keeps the directory recognisable to a person listing it.
    label = re.sub(r"[^A-Za-z0-9._-]", "_", here.name)[:40] or "root"
    return root / "dirs" / f"{label}-{digest}"


@dataclass(frozen=True)
class NodeRecord:
    """One broker JVM started by ``kgroup broker up``."""

    node_id: int
    pid: int
    client_port: int
    controller_port: int
    log_path: str
    config_path: str = ""
    """Its ``server.properties``, which is on its command line: how ``down``
    tells the broker it started from another process that got its pid."""

    @property
    def command_marker(self) -> str:
        """A string only this broker's command line contains."""
        # Records written before config_path existed: the config sits by the log.
        return self.config_path or str(Path(self.log_path).parent / "server.properties")


@dataclass(frozen=True)
class BrokerRecord:
    """What ``kgroup broker up`` leaves behind for ``status`` and ``down``."""

    version: str
    bootstrap_servers: str
    work_dir: str
    nodes: tuple[NodeRecord, ...]
    started_for: str = ""
    """The working directory or ``--name`` the broker belongs to, for messages."""

    def to_json(self) -> str:
        """Serialize to JSON."""
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> BrokerRecord:
        """Parse what :meth:`to_json` wrote."""
        raw = json.loads(text)
        return cls(
            version=str(raw["version"]),
            bootstrap_servers=str(raw["bootstrap_servers"]),
            work_dir=str(raw["work_dir"]),
            nodes=tuple(NodeRecord(**node) for node in raw["nodes"]),
            started_for=str(raw.get("started_for", "")),
        )


def read_record(path: Path) -> BrokerRecord | None:
    try:
        return BrokerRecord.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _log.warning("ignoring unreadable state file %s: %s", path, exc)
        return None


def write_record(path: Path, record: BrokerRecord) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(record.to_json(), encoding="utf-8")
    tmp.replace(path)


def recorded_bootstrap_servers(name: str | None = None) -> str | None:
    """The bootstrap servers of the broker ``kgroup broker up`` started here, if it runs.

    "Here" is the working directory, or ``name`` (``--name``), as
    :func:`broker_state_dir` decides.
    """
    record = read_record(broker_state_dir(name) / STATE_FILE)
    if record is None:
        return None
    if any(process_of(node) is PidState.OURS for node in record.nodes):
        return record.bootstrap_servers
    return None


class PidState(enum.Enum):
    """What a recorded pid is now."""

    GONE = "gone"
    """No process (or a zombie nobody reaped yet)."""
    OURS = "ours"
    """The broker that was recorded."""
    FOREIGN = "foreign"
    """A live process that is not that broker: the pid was reused."""


def command_line(pid: int) -> str | None:
    """``pid``'s command line, or None if it has none we can read (or is a zombie)."""
    proc = Path("/proc") / str(pid)
    if proc.is_dir():
        try:
            # The state letter follows the parenthesised command name.
            stat = (proc / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}:
                return None
            raw = (proc / "cmdline").read_bytes()
        except (OSError, IndexError):
            return None
        return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    # No procfs (macOS, BSD): ps says the same.
    try:
        out = subprocess.run(
            ["ps", "-ww", "-o", "stat=", "-o", "command=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    state, _, command = out.stdout.strip().partition(" ")
    if out.returncode != 0 or not state or state.startswith("Z"):
        return None
    return command.strip()


def process_of(node: NodeRecord) -> PidState:
    """Whether ``node.pid`` is still the broker JVM that ``up`` recorded."""
    try:
        os.kill(node.pid, 0)
    except ProcessLookupError:
        return PidState.GONE
    except PermissionError:
        return PidState.FOREIGN  # another user's process: never the broker we started
    command = command_line(node.pid)
    if command is None:
        return PidState.GONE
    # After a reboot or a long time the pid may belong to someone else; only
    # the broker started here has this node's config file on its command line.
    if "kafka.Kafka" in command and node.command_marker in command:
        return PidState.OURS
    return PidState.FOREIGN
