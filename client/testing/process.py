"""Apache Kafka brokers as local JVM processes (the ``process`` backend).

A :class:`KafkaBroker` is one KRaft node in combined mode (broker and
controller in one JVM). On its own it is a single-node cluster; a
:class:`KafkaCluster` runs several with a static controller quorum and drives
each through the same :class:`KafkaBroker` operations.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from kgroup.errors import BrokerStartError, HarnessError
from kgroup.testing._lifecycle import (
    BrokerNode,
    NodeCluster,
    NodeState,
    StopHow,
    StopOutcome,
    failure_summary,
)
from kgroup.testing.config import (
    NodePorts,
    QuorumNode,
    generate_cluster_id,
    node_properties,
    pick_free_ports,
    render_properties,
)
from kgroup.testing.jvm import (
    JavaRuntime,
    find_java,
    kafka_version,
    read_resource,
    resolve_kafka_libs,
)

__all__ = [
    "DEFAULT_JVM_OPTIONS",
    "KafkaBroker",
    "KafkaCluster",
    "NodeState",
]

_log = logging.getLogger("kgroup.testing.process")

DEFAULT_JVM_OPTIONS: tuple[str, ...] = (
    "-Xms256m",
    "-Xmx512m",
    # One GC thread and no concurrent phases: the quickest start on two cores.
    "-XX:+UseSerialGC",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
"""JVM options of every broker; ``$KGROUP_BROKER_JVM_OPTS`` is appended to them."""

_FORMAT_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
_STARTED_LINE = b"Kafka Server started"
_PORT_IN_USE = b"Address already in use"
_TAIL_LINES = 40
_PORT_ATTEMPTS = 3
_POLL = 0.05


class _PortConflictError(BrokerStartError):
    """The broker exited because a chosen port was taken in the meantime."""


# Brokers of this interpreter that must not outlive it (non-detached ones).
_live: set[subprocess.Popen[bytes]] = set()
_live_lock = threading.Lock()


@atexit.register
def _kill_leftovers() -> None:
    with _live_lock:
        procs = list(_live)
        _live.clear()
    for proc in procs:
        with contextlib.suppress(OSError):
            proc.kill()


def _log_tail(path: Path, lines: int = _TAIL_LINES) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 256 * 1024))
            data = handle.read()
    except OSError:
        return "(no log)"
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _jvm_options(explicit: Sequence[str] | None) -> list[str]:
    options = list(DEFAULT_JVM_OPTIONS if explicit is None else explicit)
    options += shlex.split(os.environ.get("KGROUP_BROKER_JVM_OPTS", ""))
    return options


class _WorkDir:
    """Where a broker or a cluster keeps its files: a directory given by the
    caller, or a temporary one created on first use (so that a handle that
    never starts leaves nothing behind) and removed on close unless kept.
    """

    def __init__(
        self, given: Path | str | None, *, keep: bool, make: Callable[[], Path], owner: str
    ) -> None:
        self._path = Path(given) if given is not None else None
        self._make = make
        self._owner = owner  # "broker" or "cluster", for the error message
        self.removes = given is None and not keep
        """Whether :meth:`remove` deletes it (made here and not kept)."""

    def path(self, *, closed: bool) -> Path:
        if self._path is None:
            if closed:
                raise HarnessError(f"the {self._owner} is closed and never had a work directory")
            self._path = self._make()
        return self._path

    def halt(self, *, stop: Callable[[], None], discard: Callable[[], None]) -> None:
        """Before close: ``discard`` (kill) what uses the directory when it is removed
        anyway, else ``stop`` it gracefully.

        Nothing on disk needs to be consistent when the directory goes, and a
        controlled shutdown costs seconds per test.
        """
        if self.removes:
            discard()
        else:
            stop()

    def remove(self) -> None:
        if self.removes and self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)


def _temporary_dir(prefix: str) -> Callable[[], Path]:
    return lambda: Path(tempfile.mkdtemp(prefix=prefix))


@dataclass(frozen=True)
class _Quorum:
    cluster_id: str
    voters: tuple[QuorumNode, ...] | None  # None: standalone (single node)


class KafkaBroker(BrokerNode):
    """One Apache Kafka node (KRaft, broker and controller) run as a local JVM.

    Use it as a context manager, or call :meth:`start` and :meth:`close`::

        with KafkaBroker(overrides={"num.partitions": "3"}) as broker:
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers})

    Its ports are chosen free on 127.0.0.1 at the first start and kept for its
    life, so :meth:`restart` brings the same broker back at the same address
    with the same storage. Broker settings are :data:`FAST_TEST_DEFAULTS`
    updated with ``overrides``. The JVM's output goes to :attr:`log_path`.

    Args:
        overrides: broker settings replacing the defaults (``key -> value``).
        version: Kafka release; default ``$KGROUP_KAFKA_VERSION`` or
            :data:`~kgroup.testing.DEFAULT_KAFKA_VERSION`.
        node_id: the ``node.id``.
        startup_timeout: seconds a start may take until the broker answers
            (not counting a first-time jar download).
        stop_timeout: seconds :meth:`stop` waits after SIGTERM before SIGKILL.
        work_dir: directory for config, data and log; default a fresh temporary
            directory, removed by :meth:`close`.
        keep_work_dir: do not remove the work directory on :meth:`close`.
        detach: run the JVM in its own session and do not kill it when this
            interpreter exits (for ``kgroup broker up``).
        jvm_options: replaces :data:`DEFAULT_JVM_OPTIONS`.

    The first :meth:`start` resolves the jars (see
    :func:`~kgroup.testing.resolve_kafka_libs`), picks ports, formats storage
    and launches the JVM; if a port was taken in between, it retries with new
    ports. It raises :class:`~kgroup.errors.JavaNotFoundError` without a usable
    Java and :class:`~kgroup.errors.JarResolutionError` when the jars cannot be
    resolved.
    """

    _cluster_kind = "KafkaCluster"
    _logger = _log

    def __init__(
        self,
        overrides: Mapping[str, str] | None = None,
        *,
        version: str | None = None,
        node_id: int = 1,
        startup_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        work_dir: Path | str | None = None,
        keep_work_dir: bool = False,
        detach: bool = False,
        jvm_options: Sequence[str] | None = None,
        extra_listeners: Mapping[str, tuple[str, int]] | None = None,
        format_args: Sequence[str] = (),
    ) -> None:
        super().__init__(
            overrides,
            node_id=node_id,
            startup_timeout=startup_timeout,
            stop_timeout=stop_timeout,
        )
        # Hooks for secured brokers (kgroup.testing.security): more listeners,
        # and storage-format arguments such as --add-scram.
        self._extra_listeners = dict(extra_listeners or {})
        self._format_args = tuple(format_args)
        self._version = kafka_version(version)
        self._dir = _WorkDir(
            work_dir,
            keep=keep_work_dir,
            make=_temporary_dir(f"kgroup-kafka-{node_id}-"),
            owner="broker",
        )
        self._detach = detach
        self._jvm_options = _jvm_options(jvm_options)
        self._ports: NodePorts | None = None
        self._quorum: _Quorum | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._libs: Path | None = None
        self._java: JavaRuntime | None = None
        self._run_offset = 0  # where the current JVM run's output starts in the log
        self._scan_offset = 0  # how far the log was searched for the started line
        self._last_stop: StopOutcome | None = None

    # -- public view -----------------------------------------------------------------

    @property
    def version(self) -> str:
        """The Kafka release this broker runs."""
        return self._version

    @property
    def state(self) -> NodeState:
        """Where the broker is in its lifecycle (a JVM that died on its own is ``STOPPED``)."""
        self._refresh()
        return self._state

    def _refresh(self) -> None:
        # A JVM may die on its own (a crash, an OOM kill, a test killing the pid).
        proc = self._proc
        if self._state is NodeState.RUNNING and proc is not None and proc.poll() is not None:
            _log.warning("node %d exited by itself with code %d", self._node_id, proc.returncode)
            self._forget_process()
            self._proc = None
            self._state = NodeState.STOPPED

    @property
    def ports(self) -> NodePorts:
        """Client and controller ports (known after the first start)."""
        if self._ports is None:
            raise HarnessError("the broker has no ports before its first start")
        return self._ports

    @property
    def work_dir(self) -> Path:
        """The directory holding ``server.properties``, ``data/`` and ``broker.log``."""
        return self._dir.path(closed=self._state is NodeState.CLOSED)

    @property
    def log_path(self) -> Path:
        """The file that receives the JVM's stdout and stderr (appended across restarts)."""
        return self.work_dir / "broker.log"

    @property
    def config_path(self) -> Path:
        """The rendered ``server.properties``."""
        return self.work_dir / "server.properties"

    @property
    def data_dir(self) -> Path:
        """The broker's ``log.dirs``."""
        return self.work_dir / "data"

    @property
    def pid(self) -> int | None:
        """The JVM's process id while it runs, else ``None``."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def cluster_id(self) -> str | None:
        """The KRaft cluster id (known after the first start)."""
        return self._quorum.cluster_id if self._quorum is not None else None

    @property
    def last_stop(self) -> StopOutcome | None:
        """How the JVM ended the last time it was stopped or killed (None: it never was).

        ``last_stop.describe()`` says it in words, e.g. ``stopped Kafka node 1
        pid 4242 (clean shutdown in 1.2 s)``; the same line is logged at INFO.
        """
        return self._last_stop

    def log_tail(self, lines: int = _TAIL_LINES) -> str:
        """Return the last ``lines`` lines of :attr:`log_path`."""
        return _log_tail(self.log_path, lines)

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self._ports is not None else "no ports yet"
        return f"<KafkaBroker node {self._node_id} {self._state.value} {where}>"

    # -- lifecycle -------------------------------------------------------------------

    def _first_start(self) -> None:
        # Jars and Java first: a missing one is reported before any port is taken.
        self._prepare_runtime()
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            client, controller = pick_free_ports(2)
            self._configure(NodePorts(client, controller), _Quorum(generate_cluster_id(), None))
            self._format()
            try:
                self._launch_and_wait()
            except _PortConflictError:
                if attempt == _PORT_ATTEMPTS:
                    raise
                _log.warning("node %d: a port was taken; retrying with new ports", self._node_id)
                continue
            return

    def stop(self, timeout: float | None = None) -> None:
        """Stop the JVM gracefully (SIGTERM: controlled shutdown), SIGKILL after ``timeout``.

        ``timeout`` defaults to ``stop_timeout``. Storage and ports are kept;
        :meth:`restart` or :meth:`start` brings the broker back. Stopping a
        broker that does not run does nothing.
        """
        with self._lock:
            self._terminate(signal.SIGTERM, self.stop_timeout if timeout is None else timeout)

    def kill(self) -> None:
        """Kill the JVM at once (SIGKILL): no controlled shutdown, like a crash."""
        with self._lock:
            self._terminate(signal.SIGKILL, self.stop_timeout)

    def _discard(self) -> None:
        # close() of a broker whose storage is deleted: a kill is the plan.
        with self._lock:
            self._terminate(signal.SIGKILL, self.stop_timeout, quiet=True)

    def close(self) -> None:
        """Stop the broker for good and remove its work directory (unless kept or given).

        When the directory is removed anyway the JVM is killed rather than
        stopped: nothing on disk needs to be consistent, and a controlled
        shutdown costs seconds per test.
        """
        with self._lock:
            if self._state is NodeState.CLOSED:
                return
            try:
                self._dir.halt(stop=self.stop, discard=self._discard)
            finally:
                self._state = NodeState.CLOSED
                self._dir.remove()

    # -- steps, also driven by KafkaCluster ------------------------------------------

    def _client_port(self) -> int:
        return self.ports.client  # the PLAINTEXT listener

    def _prepare_runtime(self, libs: Path | None = None, java: JavaRuntime | None = None) -> None:
        self._java = java if java is not None else find_java()
        self._libs = libs if libs is not None else resolve_kafka_libs(self._version)

    def _configure(self, ports: NodePorts, quorum: _Quorum) -> None:
        self._ports = ports
        self._quorum = quorum
        work = self.work_dir
        work.mkdir(parents=True, exist_ok=True)
        # A retry after a port conflict starts from empty storage: the format
        # recorded the old controller endpoint.
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.data_dir.mkdir()
        props = node_properties(
            node_id=self._node_id,
            ports=ports,
            data_dir=self.data_dir,
            voters=quorum.voters,
            overrides=self._overrides,
            extra_listeners=self._extra_listeners,
        )
        self.config_path.write_text(render_properties(props), encoding="utf-8")
        (work / "log4j2.properties").write_text(read_resource("log4j2.properties"), "utf-8")

    def _java_prefix(self, options: Sequence[str]) -> list[str]:
        assert self._java is not None
        assert self._libs is not None
        return [
            str(self._java.executable),
            *options,
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.work_dir}",
            "-cp",
            f"{self._libs}{os.sep}*",
        ]

    def _format_command(self) -> list[str]:
        assert self._quorum is not None
        cmd = [
            *self._java_prefix(_FORMAT_JVM_OPTIONS),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self._quorum.cluster_id,
            "-c",
            str(self.config_path),
        ]
        if self._quorum.voters is None:
            cmd.append("--standalone")
        cmd.extend(self._format_args)
        return cmd

    def _spawn_format(self) -> subprocess.Popen[bytes]:
        with self.log_path.open("ab") as log:
            log.write(f"=== kgroup: formatting storage of node {self._node_id}\n".encode())
            log.flush()
            self._run_offset = log.tell()
            return subprocess.Popen(
                self._format_command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
            )

    def _finish_format(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        try:
            code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise BrokerStartError(
                f"formatting the storage of node {self._node_id} timed out; "
                + self._failure_report()
            ) from None
        if code != 0:
            raise BrokerStartError(
                f"formatting the storage of node {self._node_id} failed (exit {code}); "
                + self._failure_report()
            )

    def _log_since(self, offset: int) -> bytes | None:
        """The log from byte ``offset`` on; None if it cannot be read."""
        try:
            with self.log_path.open("rb") as handle:
                handle.seek(offset)
                return handle.read()
        except OSError:
            return None

    def _run_output(self) -> str:
        return (self._log_since(self._run_offset) or b"").decode("utf-8", "replace")

    def _failure_report(self) -> str:
        summary = failure_summary(self._run_output().splitlines())
        return f"{summary}last lines of {self.log_path}:\n{self.log_tail()}"

    def _describe(self) -> str:
        return f"Kafka node {self._node_id}"

    def _format(self) -> None:
        self._finish_format(self._spawn_format(), time.monotonic() + self.startup_timeout)

    def _launch(self) -> None:
        cmd = [*self._java_prefix(self._jvm_options), "kafka.Kafka", str(self.config_path)]
        with self.log_path.open("ab") as log:
            log.write(f"=== kgroup: starting node {self._node_id}: {shlex.join(cmd)}\n".encode())
            log.flush()
            self._run_offset = self._scan_offset = log.tell()
            self._launched_at = time.monotonic()
            _log.info("starting Kafka %s node %d on %s", self._version, self._node_id, self.ports)
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                # A detached broker must survive the CLI that started it (and
                # its terminal's SIGINT/SIGHUP).
                start_new_session=self._detach,
            )
        if not self._detach:
            with _live_lock:
                _live.add(self._proc)
        self._state = NodeState.RUNNING

    def _check_alive(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is None:
            return
        self._forget_process()
        self._state = NodeState.STOPPED
        conflict = _PORT_IN_USE.decode() in self._run_output()
        cls = _PortConflictError if conflict else BrokerStartError
        raise cls(
            f"{self._describe()} exited with code {proc.returncode} during start-up; "
            + self._failure_report()
        )

    def _started_line_seen(self) -> bool:
        chunk = self._log_since(self._scan_offset)
        if chunk is None:
            return False
        if _STARTED_LINE in chunk:
            return True
        # Only lines not yet complete need reading again next time.
        self._scan_offset += max(0, chunk.rfind(b"\n") + 1)
        return False

    def _wait_started(self, deadline: float, check: Callable[[], None]) -> None:
        # The log says when the broker is up; asking for metadata earlier only
        # costs connection attempts.
        while not self._started_line_seen():
            check()
            if time.monotonic() >= deadline:
                raise TimeoutError("no 'Kafka Server started' in its log")
            time.sleep(_POLL)

    def _abandon_start(self) -> None:
        # The start failed and the error says so; the kill is not news.
        self._terminate(signal.SIGKILL, self.stop_timeout, quiet=True)

    def _forget_process(self) -> None:
        proc = self._proc
        if proc is not None:
            with _live_lock:
                _live.discard(proc)

    def _terminate(
        self, sig: signal.Signals, timeout: float, *, quiet: bool = False
    ) -> StopOutcome | None:
        """Signal the JVM and wait for its exit; SIGKILL once ``timeout`` has passed.

        ``quiet`` logs the outcome at DEBUG only: for a JVM discarded together
        with its storage, where a kill is the plan and not news.
        """
        proc = self._proc
        if proc is None:
            return None
        outcome: StopOutcome | None = None
        if proc.poll() is None:
            how = StopHow.CLEAN if sig is signal.SIGTERM else StopHow.KILLED
            signalled = time.monotonic()
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                how = StopHow.FORCED
                proc.kill()
                proc.wait()
            outcome = StopOutcome(
                what=self._describe(),
                pid=proc.pid,
                how=how,
                seconds=time.monotonic() - signalled,
                timeout=timeout,
            )
            if quiet:
                level = logging.DEBUG
            elif how is StopHow.FORCED:
                level = logging.WARNING
            else:
                level = logging.INFO
            _log.log(level, "%s", outcome.describe())
        self._last_stop = outcome
        self._forget_process()
        self._proc = None
        self._state = NodeState.STOPPED
        return outcome


class KafkaCluster(NodeCluster[KafkaBroker]):
    """Several :class:`KafkaBroker` nodes forming one cluster with a static controller quorum.

    Every node runs broker and controller; node ids are ``1..nodes``. The
    internal topics get replication factor ``min(3, nodes)`` and min ISR
    ``min(2, nodes)``; a killed node is fenced after 3 s
    (``broker.session.timeout.ms``). The nodes start concurrently.
    Drive single nodes through :attr:`nodes` or :meth:`node`::

        with KafkaCluster(nodes=3) as cluster:
            cluster.node(2).kill()
            cluster.node(2).restart()

    Args: as for :class:`KafkaBroker`; ``work_dir`` gets one ``node-<id>``
    subdirectory per node.
    """

    def __init__(
        self,
        nodes: int = 3,
        overrides: Mapping[str, str] | None = None,
        *,
        version: str | None = None,
        startup_timeout: float = 180.0,
        stop_timeout: float = 30.0,
        work_dir: Path | str | None = None,
        keep_work_dir: bool = False,
        detach: bool = False,
        jvm_options: Sequence[str] | None = None,
    ) -> None:
        self._dir = _WorkDir(
            work_dir,
            keep=keep_work_dir,
            make=_temporary_dir("kgroup-kafka-cluster-"),
            owner="cluster",
        )
        self._cluster_id: str | None = None

        def make_node(node_id: int) -> KafkaBroker:
            node = KafkaBroker(
                overrides,
                version=version,
                node_id=node_id,
                startup_timeout=startup_timeout,
                stop_timeout=stop_timeout,
                detach=detach,
                jvm_options=jvm_options,
            )
            # A node's directory is made inside the cluster's, which close()
            # removes as a whole: the node itself removes nothing.
            node._dir = _WorkDir(
                None,
                keep=True,
                make=functools.partial(self._node_dir, node_id),
                owner="broker",
            )
            return node

        super().__init__(nodes, startup_timeout, make_node)

    @property
    def cluster_id(self) -> str | None:
        """The KRaft cluster id (known after start)."""
        return self._cluster_id

    @property
    def work_dir(self) -> Path:
        """The directory holding one ``node-<id>`` directory per node (created on first use)."""
        return self._dir.path(closed=self._closed)

    def _node_dir(self, node_id: int) -> Path:
        return self.work_dir / f"node-{node_id}"

    def start(self) -> Self:
        """Start every node concurrently; return once all answer and see each other.

        Nodes that already run are left alone; stopped ones are restarted.

        Raises:
            JavaNotFoundError, JarResolutionError, BrokerStartError: as
                :meth:`KafkaBroker.start`; on failure every node is killed.
        """
        self._check_open()
        if self._cluster_id is not None:
            self._start_stopped_nodes(time.monotonic() + self.startup_timeout)
            return self
        java = find_java()
        libs = resolve_kafka_libs(self.nodes[0].version)
        for node in self.nodes:
            node._prepare_runtime(libs, java)
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                self._first_start()
            except _PortConflictError:
                self._discard()
                if attempt == _PORT_ATTEMPTS:
                    raise
                _log.warning("cluster: a port was taken; retrying with new ports")
                continue
            except BaseException:
                self._discard()
                raise
            return self
        raise AssertionError("unreachable")  # pragma: no cover

    def _first_start(self) -> None:
        ports = pick_free_ports(2 * len(self.nodes))
        voters = tuple(
            QuorumNode(node.node_id, NodePorts(ports[2 * i], ports[2 * i + 1]))
            for i, node in enumerate(self.nodes)
        )
        quorum = _Quorum(generate_cluster_id(), voters)
        self._cluster_id = quorum.cluster_id
        deadline = time.monotonic() + self.startup_timeout
        for node, voter in zip(self.nodes, voters, strict=True):
            node._configure(voter.ports, quorum)
        # Each format is a short JVM run; running them side by side halves the wait.
        formats = [(node, node._spawn_format()) for node in self.nodes]
        for node, proc in formats:
            node._finish_format(proc, deadline)
        for node in self.nodes:
            node._launch()
        for node in self.nodes:
            node._await_ready(deadline, self._check_all_alive)
        self._await_membership(deadline)

    def _node_label(self, node: KafkaBroker) -> str:
        return f"node {node.node_id} ({node.log_path})"

    def stop(self, timeout: float | None = None) -> None:
        """Stop every node gracefully (SIGTERM to all at once, then wait)."""
        for node in self.nodes:
            proc = node._proc
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop(timeout)

    def _discard(self) -> None:
        # Killing nodes whose storage goes anyway (or whose start failed, which
        # the raised error reports) is the plan, not news: no INFO lines.
        for node in self.nodes:
            node._discard()

    def close(self) -> None:
        """Stop every node for good and remove the work directory (unless kept or given).

        As with :meth:`KafkaBroker.close`, the nodes are killed when the
        directory is removed anyway, else stopped gracefully.
        """
        if self._closed:
            return
        try:
            self._dir.halt(stop=self.stop, discard=self._discard)
        finally:
            self._closed = True
            for node in self.nodes:
                node.close()
            self._dir.remove()

    @property
    def pids(self) -> tuple[int | None, ...]:
        """Each node's JVM process id, or ``None`` where it does not run."""
        return tuple(node.pid for node in self.nodes)

    def __repr__(self) -> str:
        return f"<KafkaCluster {len(self.nodes)} nodes {[n.state.value for n in self.nodes]}>"
