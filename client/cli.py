"""The ``kgroup`` command.

Subcommands so far::

    kgroup --version
    kgroup broker up [--name NAME] [--nodes N] [--override key=value ...] [--version V]
    kgroup broker status [--name NAME]
    kgroup broker down [--name NAME] [--timeout S]
    kgroup topics create|produce NAME ...    (see kgroup.cli_topics)
    kgroup groups list | describe GROUP | lag GROUP
    kgroup migrate check GROUP | plan GROUP
    kgroup demo

``broker up`` starts a Kafka broker (or cluster) from :mod:`kgroup.testing`
in the background, detached from this process, and prints only its bootstrap
servers on stdout (progress goes to stderr), so ``export
KAFKA_BOOTSTRAP_SERVERS=$(kgroup broker up)`` works. Its pids, ports and
directories are recorded in ``broker.json`` in a state directory of the
working directory's own, or of ``--name`` (see :func:`broker_state_dir`), so
brokers of two projects never meet; ``down`` stops it with a controlled
shutdown and only if its pids still run that broker.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import hashlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kgroup.cli_groups import add_group_commands, add_migrate_commands
from kgroup.cli_topics import add_topics_commands, parse_key_value
from kgroup.errors import ConfigError, HarnessError, KgroupError
from kgroup.report.cli import add_report_command
from kgroup.testing._lifecycle import StopHow, StopOutcome

__all__ = [
    "BrokerRecord",
    "NodeRecord",
    "broker_name",
    "broker_state_dir",
    "build_parser",
    "distribution_version",
    "main",
    "recorded_bootstrap_servers",
    "state_dir",
]

_log = logging.getLogger("kgroup.cli")

_STATE_FILE = "broker.json"
_DATA_DIR = "broker"

# Exit codes.
_OK = 0
_NOT_RUNNING = 1
_FAILED = 2


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


def _read_record(path: Path) -> BrokerRecord | None:
    try:
        return BrokerRecord.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _log.warning("ignoring unreadable state file %s: %s", path, exc)
        return None


def _write_record(path: Path, record: BrokerRecord) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(record.to_json(), encoding="utf-8")
    tmp.replace(path)


def recorded_bootstrap_servers(name: str | None = None) -> str | None:
    """The bootstrap servers of the broker ``kgroup broker up`` started here, if it runs.

    "Here" is the working directory, or ``name`` (``--name``), as
    :func:`broker_state_dir` decides.
    """
    record = _read_record(broker_state_dir(name) / _STATE_FILE)
    if record is None:
        return None
    if any(_process_of(node) is _Pid.OURS for node in record.nodes):
        return record.bootstrap_servers
    return None


class _Pid(enum.Enum):
    """What a recorded pid is now."""

    GONE = "gone"
    """No process (or a zombie nobody reaped yet)."""
    OURS = "ours"
    """The broker that was recorded."""
    FOREIGN = "foreign"
    """A live process that is not that broker: the pid was reused."""


def _command_line(pid: int) -> str | None:
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


def _process_of(node: NodeRecord) -> _Pid:
    """Whether ``node.pid`` is still the broker JVM that ``up`` recorded."""
    try:
        os.kill(node.pid, 0)
    except ProcessLookupError:
        return _Pid.GONE
    except PermissionError:
        return _Pid.FOREIGN  # another user's process: never the broker we started
    command = _command_line(node.pid)
    if command is None:
        return _Pid.GONE
    # After a reboot or a long time the pid may belong to someone else; only
    # the broker started here has this node's config file on its command line.
    if "kafka.Kafka" in command and node.command_marker in command:
        return _Pid.OURS
    return _Pid.FOREIGN


def _stop_brokers(nodes: Sequence[NodeRecord], timeout: float) -> list[StopOutcome]:
    """SIGTERM each broker, wait up to ``timeout`` for a controlled shutdown, SIGKILL after.

    A pid is signalled only while it is still the recorded broker: if it
    exits and the number is reused meanwhile, the new process is left alone.
    """
    signalled = time.monotonic()
    for node in nodes:
        with contextlib.suppress(ProcessLookupError):
            os.kill(node.pid, signal.SIGTERM)
    exited: dict[int, float] = {}
    deadline = signalled + timeout
    while True:
        now = time.monotonic()
        for node in nodes:
            if node.pid not in exited and _process_of(node) is not _Pid.OURS:
                exited[node.pid] = now - signalled
        if len(exited) == len(nodes) or now >= deadline:
            break
        time.sleep(0.05)
    outcomes: list[StopOutcome] = []
    for node in nodes:
        what = f"broker node {node.node_id}" if len(nodes) > 1 else "broker"
        if node.pid in exited:
            outcomes.append(StopOutcome(what, node.pid, StopHow.CLEAN, exited[node.pid], timeout))
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(node.pid, signal.SIGKILL)
        outcomes.append(
            StopOutcome(what, node.pid, StopHow.FORCED, time.monotonic() - signalled, timeout)
        )
    return outcomes


def _broker_up(args: argparse.Namespace) -> int:
    from kgroup.testing import KafkaBroker, KafkaCluster  # noqa: PLC0415 - keep `kgroup --help` fast

    state = broker_state_dir(args.name)
    state_file = state / _STATE_FILE
    work = state / _DATA_DIR
    record = _read_record(state_file)
    if record is not None:
        if any(_process_of(node) is _Pid.OURS for node in record.nodes):
            print(
                f"kgroup: a broker is already up for {_owner(args.name)} at "
                f"{record.bootstrap_servers}",
                file=sys.stderr,
            )
            print(record.bootstrap_servers)
            return _OK
        _log.info("removing the state of a broker that is no longer running")
        _forget(state_file, work)
    shutil.rmtree(work, ignore_errors=True)
    overrides = dict(args.override or [])
    broker: KafkaBroker | KafkaCluster
    secured = None
    if getattr(args, "security", None):
        from kgroup.testing.security import SecuredKafkaBroker  # noqa: PLC0415

        if args.nodes != 1:
            print("kgroup: --security starts a single node; drop --nodes", file=sys.stderr)
            return _FAILED
        work.mkdir(parents=True, exist_ok=True)
        secured = SecuredKafkaBroker(
            ("alice",),
            overrides=overrides,
            work_dir=work,
            version=args.version,
            detach=True,
            startup_timeout=args.timeout,
        )
        broker = secured.broker
        nodes: tuple[KafkaBroker, ...] = (broker,)
        version = broker.version
    elif args.nodes == 1:
        broker = KafkaBroker(
            overrides,
            version=args.version,
            work_dir=work / "node-1",
            detach=True,
            startup_timeout=args.timeout,
        )
        nodes = (broker,)
        version = broker.version
    else:
        broker = KafkaCluster(
            args.nodes,
            overrides,
            version=args.version,
            work_dir=work,
            detach=True,
            startup_timeout=args.timeout,
        )
        nodes = broker.nodes
        version = broker.nodes[0].version
    started = time.monotonic()
    try:
        broker.start()
    except HarnessError as exc:
        print(f"kgroup: the broker did not start: {exc}", file=sys.stderr)
        print(f"kgroup: its files are kept in {work}", file=sys.stderr)
        return _FAILED
    except BaseException:
        # Interrupted: a detached JVM without a state file would be orphaned.
        broker.kill()
        raise
    record = BrokerRecord(
        version=version,
        bootstrap_servers=broker.bootstrap_servers,
        work_dir=str(work),
        nodes=tuple(
            NodeRecord(
                node_id=node.node_id,
                pid=node.pid or 0,
                client_port=node.ports.client,
                controller_port=node.ports.controller,
                log_path=str(node.log_path),
                config_path=str(node.config_path),
            )
            for node in nodes
        ),
        started_for=_owner(args.name),
    )
    _write_record(state_file, record)
    down = "kgroup broker down" + (f" --name {args.name}" if args.name else "")
    _log.info(
        "Kafka %s up in %.1f s for %s; pids %s; stop it with `%s`",
        version,
        time.monotonic() - started,
        record.started_for,
        " ".join(str(n.pid) for n in record.nodes),
        down,
    )
    if secured is not None:
        from kgroup.testing.security import print_client_config  # noqa: PLC0415

        print_client_config(secured, args.security, work)
        return _OK
    print(record.bootstrap_servers)
    return _OK


def _owner(name: str | None) -> str:
    """Whom a broker belongs to, for messages: this directory, or a --name."""
    if os.environ.get("KGROUP_STATE_DIR"):
        return f"KGROUP_STATE_DIR={os.environ['KGROUP_STATE_DIR']}"
    return f"name {name!r}" if name is not None else f"directory {os.getcwd()}"


def _forget(state_file: Path, work: Path) -> None:
    """Delete a broker's state file and data directory."""
    # Only ever the data directory inside this state directory: the path in
    # the file is not trusted enough to delete whatever it names.
    shutil.rmtree(work, ignore_errors=True)
    state_file.unlink(missing_ok=True)
    if not os.environ.get("KGROUP_STATE_DIR"):
        # A per-directory or named state directory is ours; an empty one is litter.
        with contextlib.suppress(OSError):
            state_file.parent.rmdir()


def _broker_status(args: argparse.Namespace) -> int:
    state = broker_state_dir(args.name)
    record = _read_record(state / _STATE_FILE)
    if record is None:
        print("not running")
        print(f"no broker was started for {_owner(args.name)}", file=sys.stderr)
        return _NOT_RUNNING
    processes = {node.node_id: _process_of(node) for node in record.nodes}
    ours = [p is _Pid.OURS for p in processes.values()]
    if all(ours):
        status = "running"
    elif any(ours):
        status = "degraded"
    else:
        status = "not running"
    print(status)
    print(f"bootstrap: {record.bootstrap_servers}")
    print(f"version: {record.version}")
    print(f"for: {record.started_for or _owner(args.name)}")
    print(f"state: {state}")
    for node in record.nodes:
        process = processes[node.node_id]
        if process is _Pid.OURS:
            where = "up"
        elif process is _Pid.FOREIGN:
            where = "down (the pid now belongs to another program)"
        else:
            where = "down"
        print(
            f"node {node.node_id}: pid {node.pid} {where} "
            f"port {node.client_port} log {node.log_path}"
        )
    return _OK if status == "running" else _NOT_RUNNING


def _broker_down(args: argparse.Namespace) -> int:
    state = broker_state_dir(args.name)
    state_file = state / _STATE_FILE
    record = _read_record(state_file)
    if record is None:
        print(f"kgroup: no broker is up for {_owner(args.name)}", file=sys.stderr)
        return _OK
    running: list[NodeRecord] = []
    for node in record.nodes:
        process = _process_of(node)
        if process is _Pid.OURS:
            running.append(node)
        elif process is _Pid.FOREIGN:
            command = _command_line(node.pid) or "?"
            print(
                f"kgroup: pid {node.pid} is not the broker node {node.node_id} started here "
                f"any more (it runs `{command[:120]}`); leaving it alone",
                file=sys.stderr,
            )
    outcomes = _stop_brokers(running, args.timeout) if running else []
    for outcome in outcomes:
        print(f"kgroup: {outcome.describe()}", file=sys.stderr)
    _forget(state_file, state / _DATA_DIR)
    if not running:
        print(
            f"kgroup: the broker at {record.bootstrap_servers} was not running; removed its state",
            file=sys.stderr,
        )
    else:
        print(
            f"kgroup: the broker at {record.bootstrap_servers} is down; its data is deleted",
            file=sys.stderr,
        )
    return _OK


def _add_name_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--name",
        type=broker_name,
        help="the broker of this name instead of this directory's own (see `broker up -h`)",
    )


def _add_broker_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    broker = subparsers.add_parser("broker", help="run a local Kafka broker for development")
    commands = broker.add_subparsers(dest="broker_command", metavar="COMMAND", required=True)

    up = commands.add_parser(
        "up",
        help="start a broker in the background and print its bootstrap servers",
        description="Start a Kafka broker (or cluster) detached from this shell. "
        "Only the bootstrap servers are printed on stdout. Each working directory has a "
        "broker of its own (`status` and `down` in the same directory act on it); "
        "--name NAME shares one broker between directories.",
    )
    _add_name_option(up)
    up.add_argument("--nodes", type=int, default=1, help="cluster size (default 1)")
    up.add_argument(
        "--override",
        action="append",
        type=parse_key_value,
        metavar="KEY=VALUE",
        help="broker setting replacing the harness default (repeatable)",
    )
    up.add_argument("--version", help="Kafka release (default $KGROUP_KAFKA_VERSION or pinned)")
    up.add_argument(
        "--security",
        choices=("sasl-scram", "sasl-plain", "tls", "mtls"),
        help="also open secured listeners (test CA, SASL users, ACLs) and print the client "
        "config for this set-up instead of the bootstrap servers; secrets are masked on "
        "screen and written to a private file",
    )
    up.add_argument(
        "--timeout", type=float, default=180.0, help="seconds to wait for readiness (default 180)"
    )
    up.set_defaults(func=_broker_up)

    status = commands.add_parser("status", help="say whether the broker runs (exit 1 if not)")
    _add_name_option(status)
    status.set_defaults(func=_broker_status)

    down = commands.add_parser(
        "down",
        help="stop the broker (controlled shutdown) and delete its data",
        description="Stop the broker `up` started for this directory (or --name): SIGTERM "
        "for a controlled shutdown, SIGKILL only if it has not exited within --timeout. "
        "A recorded pid that now belongs to another program is left alone.",
    )
    _add_name_option(down)
    down.add_argument(
        "--timeout", type=float, default=30.0, help="seconds before SIGKILL (default 30)"
    )
    down.set_defaults(func=_broker_down)


def _demo(args: argparse.Namespace) -> int:
    # The consumer stack takes most of a second to import; other commands skip it.
    from kgroup.demo import DemoFailedError, run_demo  # noqa: PLC0415

    if not args.verbose:
        # The demo narrates the rebalance itself; the members' own INFO logs
        # (every epoch and assignment change) are there with --verbose. The
        # broker's start-up progress stays.
        logging.getLogger("kgroup").setLevel(logging.WARNING)
        logging.getLogger("kgroup.testing").setLevel(logging.INFO)

    def say(line: str) -> None:
        print(f"[demo] {line}", flush=True)

    try:
        run_demo(
            args.bootstrap_servers,
            partitions=args.partitions,
            records=args.records,
            say=say,
        )
    except DemoFailedError as exc:
        say(f"FAILED: {exc}")
        return _FAILED
    say("done")
    return 0


def _add_demo_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = subparsers.add_parser(
        "demo",
        help="three consumers share a topic on the new protocol; one leaves; nothing is lost",
        description=(
            "Start an embedded broker (unless --bootstrap-servers is given), create a topic, "
            "produce records, run three kgroup consumers on the new protocol (KIP-848), close "
            "one of them, and check that every record was consumed."
        ),
    )
    demo.add_argument("--bootstrap-servers", help="use this broker instead of an embedded one")
    demo.add_argument("--partitions", type=int, default=12, help="partitions of the demo topic")
    demo.add_argument("--records", type=int, default=1200, help="records to produce in all")
    demo.set_defaults(func=_demo)


def distribution_version() -> str:
    """The installed kgroup distribution's version, or a note that it is not installed."""
    try:
        return importlib.metadata.version("kgroup")
    except importlib.metadata.PackageNotFoundError:
        # Run from a source tree without `pip install`: there is no metadata to read.
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """Return the parser of the ``kgroup`` command; each subcommand sets ``func``."""
    parser = argparse.ArgumentParser(prog="kgroup", description="kgroup command-line tools")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    parser.add_argument("--version", action="version", version=f"%(prog)s {distribution_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_broker_commands(subparsers)
    add_topics_commands(subparsers, recorded_bootstrap_servers, broker_name)
    _add_demo_command(subparsers)
    add_group_commands(subparsers)
    add_migrate_commands(subparsers)
    add_report_command(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``kgroup`` command with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="kgroup: %(message)s",
    )
    if not args.verbose:
        # librdkafka's connection chatter during readiness checks is not progress.
        logging.getLogger("kgroup.testing.readiness").setLevel(logging.WARNING)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except KgroupError as exc:
        print(f"kgroup: {exc}", file=sys.stderr)
        return _FAILED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
