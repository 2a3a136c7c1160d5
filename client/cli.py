"""The ``kgroup`` command.

Subcommands so far::

    kgroup broker up [--nodes N] [--override key=value ...] [--version V]
    kgroup broker status
    kgroup broker down
    kgroup groups list | describe GROUP | lag GROUP
    kgroup migrate check GROUP | plan GROUP

``broker up`` starts a Kafka broker (or cluster) from :mod:`kgroup.testing`
in the background, detached from this process, and prints only its bootstrap
servers on stdout (progress goes to stderr), so ``export
KAFKA_BOOTSTRAP_SERVERS=$(kgroup broker up)`` works. Its pids, ports and
directories are recorded in ``broker.json`` in the state directory
(``$KGROUP_STATE_DIR``, else ``$XDG_STATE_HOME/kgroup``, else
``~/.local/state/kgroup``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kgroup.cli_groups import add_group_commands, add_migrate_commands
from kgroup.demo import DemoFailedError, run_demo
from kgroup.errors import HarnessError, KgroupError

__all__ = ["BrokerRecord", "NodeRecord", "build_parser", "main", "state_dir"]

_log = logging.getLogger("kgroup.cli")

_STATE_FILE = "broker.json"
_DATA_DIR = "broker"

# Exit codes.
_OK = 0
_NOT_RUNNING = 1
_FAILED = 2


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return the directory of the CLI's state (not created)."""
    env = os.environ if environ is None else environ
    if env.get("KGROUP_STATE_DIR"):
        return Path(env["KGROUP_STATE_DIR"])
    if env.get("XDG_STATE_HOME"):
        return Path(env["XDG_STATE_HOME"]) / "kgroup"
    return Path.home() / ".local" / "state" / "kgroup"


@dataclass(frozen=True)
class NodeRecord:
    """One broker JVM started by ``kgroup broker up``."""

    node_id: int
    pid: int
    client_port: int
    controller_port: int
    log_path: str


@dataclass(frozen=True)
class BrokerRecord:
    """What ``kgroup broker up`` leaves behind for ``status`` and ``down``."""

    version: str
    bootstrap_servers: str
    work_dir: str
    nodes: tuple[NodeRecord, ...]

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


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) Kafka broker JVM."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc") / str(pid)
    if not proc.exists():
        return True  # no procfs to ask; trust kill(0)
    try:
        # The state letter follows the parenthesised command name.
        stat = (proc / "stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}:
            return False
        # After a reboot or a long time the pid may belong to someone else.
        return b"kafka.Kafka" in (proc / "cmdline").read_bytes()
    except (OSError, IndexError):
        return False


def _signal_and_wait(pids: Sequence[int], timeout: float) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_pid_alive(pid) for pid in pids):
            return
        time.sleep(0.1)
    for pid in pids:
        if _pid_alive(pid):
            _log.warning("pid %d did not stop within %.0f s; killing it", pid, timeout)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _parse_override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


def _broker_up(args: argparse.Namespace) -> int:
    from kgroup.testing import KafkaBroker, KafkaCluster  # noqa: PLC0415 - keep `kgroup --help` fast

    state = state_dir()
    state_file = state / _STATE_FILE
    record = _read_record(state_file)
    if record is not None:
        if any(_pid_alive(node.pid) for node in record.nodes):
            print(f"a broker is already up at {record.bootstrap_servers}", file=sys.stderr)
            print(record.bootstrap_servers)
            return _OK
        _log.info("removing the state of a broker that is no longer running")
        shutil.rmtree(record.work_dir, ignore_errors=True)
        state_file.unlink(missing_ok=True)
    work = state / _DATA_DIR
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
            )
            for node in nodes
        ),
    )
    _write_record(state_file, record)
    _log.info(
        "Kafka %s up in %.1f s; pids %s; stop it with `kgroup broker down`",
        version,
        time.monotonic() - started,
        " ".join(str(n.pid) for n in record.nodes),
    )
    if secured is not None:
        from kgroup.testing.security import print_client_config  # noqa: PLC0415

        print_client_config(secured, args.security, work)
        return _OK
    print(record.bootstrap_servers)
    return _OK


def _broker_status(args: argparse.Namespace) -> int:
    record = _read_record(state_dir() / _STATE_FILE)
    if record is None:
        print("not running")
        return _NOT_RUNNING
    alive = {node.node_id: _pid_alive(node.pid) for node in record.nodes}
    if all(alive.values()):
        status = "running"
    elif any(alive.values()):
        status = "degraded"
    else:
        status = "not running"
    print(status)
    print(f"bootstrap: {record.bootstrap_servers}")
    print(f"version: {record.version}")
    for node in record.nodes:
        state = "up" if alive[node.node_id] else "down"
        print(
            f"node {node.node_id}: pid {node.pid} {state} "
            f"port {node.client_port} log {node.log_path}"
        )
    return _OK if status == "running" else _NOT_RUNNING


def _broker_down(args: argparse.Namespace) -> int:
    state_file = state_dir() / _STATE_FILE
    record = _read_record(state_file)
    if record is None:
        print("kgroup: no broker is up", file=sys.stderr)
        return _OK
    pids = [node.pid for node in record.nodes if _pid_alive(node.pid)]
    if pids:
        _log.info("stopping pids %s", " ".join(map(str, pids)))
        _signal_and_wait(pids, args.timeout)
    shutil.rmtree(record.work_dir, ignore_errors=True)
    state_file.unlink(missing_ok=True)
    print(f"kgroup: stopped the broker at {record.bootstrap_servers}", file=sys.stderr)
    return _OK


def _add_broker_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    broker = subparsers.add_parser("broker", help="run a local Kafka broker for development")
    commands = broker.add_subparsers(dest="broker_command", metavar="COMMAND", required=True)

    up = commands.add_parser(
        "up",
        help="start a broker in the background and print its bootstrap servers",
        description="Start a Kafka broker (or cluster) detached from this shell. "
        "Only the bootstrap servers are printed on stdout.",
    )
    up.add_argument("--nodes", type=int, default=1, help="cluster size (default 1)")
    up.add_argument(
        "--override",
        action="append",
        type=_parse_override,
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
    status.set_defaults(func=_broker_status)

    down = commands.add_parser("down", help="stop the broker and delete its data")
    down.add_argument(
        "--timeout", type=float, default=30.0, help="seconds before SIGKILL (default 30)"
    )
    down.set_defaults(func=_broker_down)


def _demo(args: argparse.Namespace) -> int:
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


def build_parser() -> argparse.ArgumentParser:
    """Return the parser of the ``kgroup`` command; each subcommand sets ``func``."""
    parser = argparse.ArgumentParser(prog="kgroup", description="kgroup command-line tools")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_broker_commands(subparsers)
    _add_demo_command(subparsers)
    add_group_commands(subparsers)
    add_migrate_commands(subparsers)
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
