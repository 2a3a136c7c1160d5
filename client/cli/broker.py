"""``kgroup broker up | status | down``: a local Kafka broker for development.

``broker up`` starts a Kafka broker (or cluster) from :mod:`kgroup.testing`
in the background, detached from this process, and prints only its bootstrap
servers on stdout (progress goes to stderr), so ``export
KAFKA_BOOTSTRAP_SERVERS=$(kgroup broker up)`` works. Its pids, ports and
directories are recorded in ``broker.json`` in a state directory of the
working directory's own, or of ``--name`` (see
:func:`kgroup.cli.state.broker_state_dir`), so brokers of two projects never
meet; ``down`` stops it with a controlled shutdown and only if its pids still
run that broker.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kgroup.cli.common import EXIT_FAILED, EXIT_OK, parse_key_value
from kgroup.cli.state import (
    DATA_DIR,
    STATE_FILE,
    BrokerRecord,
    NodeRecord,
    PidState,
    broker_name,
    broker_state_dir,
    command_line,
    process_of,
    read_record,
    write_record,
)
from kgroup.errors import HarnessError
from kgroup.testing import KafkaBroker, KafkaCluster
from kgroup.testing._lifecycle import StopHow, StopOutcome

__all__ = ["add_broker_commands"]

_log = logging.getLogger("kgroup.cli")

_NOT_RUNNING = 1
"""``broker status``'s exit code when no broker of this directory runs."""


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
            if node.pid not in exited and process_of(node) is not PidState.OURS:
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
    state = broker_state_dir(args.name)
    state_file = state / STATE_FILE
    work = state / DATA_DIR
    record = read_record(state_file)
    if record is not None:
        if any(process_of(node) is PidState.OURS for node in record.nodes):
            print(
                f"kgroup: a broker is already up for {_owner(args.name)} at "
                f"{record.bootstrap_servers}",
                file=sys.stderr,
            )
            print(record.bootstrap_servers)
            return EXIT_OK
        _log.info("removing the state of a broker that is no longer running")
        _forget(state_file, work)
    shutil.rmtree(work, ignore_errors=True)
    overrides = dict(args.override or [])
    broker: KafkaBroker | KafkaCluster
    secured = None
    if getattr(args, "security", None):
        # The secured set-up (a test CA, SASL users) loads only for --security.
        from kgroup.testing.security import SecuredKafkaBroker  # noqa: PLC0415

        if args.nodes != 1:
            print("kgroup: --security starts a single node; drop --nodes", file=sys.stderr)
            return EXIT_FAILED
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
        return EXIT_FAILED
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
    write_record(state_file, record)
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
        from kgroup.testing.security import print_client_config  # noqa: PLC0415 - as above

        print_client_config(secured, args.security, work)
        return EXIT_OK
    print(record.bootstrap_servers)
    return EXIT_OK


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
    record = read_record(state / STATE_FILE)
    if record is None:
        print("not running")
        print(f"no broker was started for {_owner(args.name)}", file=sys.stderr)
        return _NOT_RUNNING
    processes = {node.node_id: process_of(node) for node in record.nodes}
    ours = [p is PidState.OURS for p in processes.values()]
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
        if process is PidState.OURS:
            where = "up"
        elif process is PidState.FOREIGN:
            where = "down (the pid now belongs to another program)"
        else:
            where = "down"
        print(
            f"node {node.node_id}: pid {node.pid} {where} "
            f"port {node.client_port} log {node.log_path}"
        )
    return EXIT_OK if status == "running" else _NOT_RUNNING


def _broker_down(args: argparse.Namespace) -> int:
    state = broker_state_dir(args.name)
    state_file = state / STATE_FILE
    record = read_record(state_file)
    if record is None:
        print(f"kgroup: no broker is up for {_owner(args.name)}", file=sys.stderr)
        return EXIT_OK
    running: list[NodeRecord] = []
    for node in record.nodes:
        process = process_of(node)
        if process is PidState.OURS:
            running.append(node)
        elif process is PidState.FOREIGN:
            command = command_line(node.pid) or "?"
            print(
                f"kgroup: pid {node.pid} is not the broker node {node.node_id} started here "
                f"any more (it runs `{command[:120]}`); leaving it alone",
                file=sys.stderr,
            )
    outcomes = _stop_brokers(running, args.timeout) if running else []
    for outcome in outcomes:
        print(f"kgroup: {outcome.describe()}", file=sys.stderr)
    _forget(state_file, state / DATA_DIR)
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
    return EXIT_OK


def _add_name_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--name",
        type=broker_name,
        help="the broker of this name instead of this directory's own (see `broker up -h`)",
    )


def add_broker_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
