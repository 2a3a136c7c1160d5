"""What every broker handle and every cluster of them share, whatever runs the nodes."""

from __future__ import annotations

import enum
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import ClassVar, Generic, Self, TypeVar

from kgroup.errors import BrokerStartError, HarnessError
from kgroup.testing.readiness import wait_until_answers

__all__ = [
    "BrokerNode",
    "NodeCluster",
    "NodeState",
    "StartsOnEnter",
    "StopHow",
    "StopOutcome",
    "failure_summary",
]


class NodeState(enum.Enum):
    """Lifecycle of a broker node (a JVM process or a container)."""

    NEW = "new"
    """Not started yet; no storage, no ports."""
    RUNNING = "running"
    """The node runs and answered the readiness check."""
    STOPPED = "stopped"
    """Stopped or killed; storage and ports are kept for a restart."""
    CLOSED = "closed"
    """Stopped for good; its resources are released."""


class StopHow(enum.Enum):
    """How a broker process ended when it was asked to."""

    CLEAN = "clean"
    """It exited after SIGTERM (a controlled shutdown) within the time allowed."""
    FORCED = "forced"
    """It still ran when the time allowed after SIGTERM was up, and was killed."""
    KILLED = "killed"
    """It was killed on purpose (SIGKILL), without a controlled shutdown."""
    GONE = "gone"
    """It had exited already; there was nothing to stop."""


@dataclass(frozen=True)
class StopOutcome:
    """What stopping one broker process did, and the sentence that says so.

    A stop is reported whichever way it went, so that a clean shutdown never
    reads like a crash and a forced one never passes unnoticed.
    """

    what: str
    """Who was stopped, for the message: ``"broker"``, ``"Kafka node 2"``."""
    pid: int
    how: StopHow
    seconds: float
    """From the signal to the process's exit."""
    timeout: float
    """The time a controlled shutdown was allowed before SIGKILL."""

    def describe(self) -> str:
        """One line for a person: what happened and how long it took."""
        if self.how is StopHow.CLEAN:
            return f"stopped {self.what} pid {self.pid} (clean shutdown in {self.seconds:.1f} s)"
        if self.how is StopHow.FORCED:
            return (
                f"{self.what} pid {self.pid} did not shut down within {self.timeout:g} s "
                "of SIGTERM; killed it (SIGKILL)"
            )
        if self.how is StopHow.KILLED:
            return f"killed {self.what} pid {self.pid} (SIGKILL, no controlled shutdown)"
        return f"{self.what} pid {self.pid} had already exited"


class StartsOnEnter(ABC):
    """``with handle:`` starts the handle and closes it on the way out, error or not."""

    @abstractmethod
    def start(self) -> Self:
        """Start the handle (if it runs already, nothing changes) and return it."""

    @abstractmethod
    def close(self) -> None:
        """Release the handle for good; closing twice does nothing."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def failure_summary(lines: Sequence[str]) -> str:
    """``cause:`` and the lines of a broker's output that say why it failed, or ``""``.

    The tail of a Java stack trace often hides the message that matters, so
    the first ERROR (or uncaught exception) line, the line it logs, and the
    root cause are quoted on their own.
    """
    picked: list[str] = []
    for i, line in enumerate(lines):
        if " ERROR " in line or line.startswith("Exception in thread"):
            picked.append(line)
            # An ERROR line is often followed by the exception it logs.
            following = lines[i + 1] if i + 1 < len(lines) else ""
            if following and not following.startswith(("[", "\t", " ")):
                picked.append(following)
            break
    picked += [ln for ln in reversed(lines) if ln.startswith("Caused by:")][:1]
    summary = "".join(f"\n  {ln.strip()}" for ln in picked)
    return f"cause:{summary}\n" if summary else ""


class BrokerNode(StartsOnEnter):
    """One Kafka node, whatever runs it: the lifecycle both backends share.

    The guards of :meth:`start` and :meth:`restart`, and the wait until a
    launched node answers, live here; a backend supplies the mechanics (the
    abstract methods below), optionally ``_wait_started`` (what to see before
    asking for metadata).
    """

    _cluster_kind: ClassVar[str]
    """The cluster class that first starts a node belonging to it."""
    _logger: ClassVar[logging.Logger]

    def __init__(
        self,
        overrides: Mapping[str, str] | None,
        *,
        node_id: int,
        startup_timeout: float,
        stop_timeout: float,
    ) -> None:
        self._overrides: dict[str, str] = {str(k): str(v) for k, v in (overrides or {}).items()}
        self._node_id = node_id
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self._state = NodeState.NEW
        self._cluster_member = False  # set by the cluster, which does the first start
        self._launched_at = 0.0
        self._lock = threading.RLock()

    # -- public view -------------------------------------------------------------

    @property
    def node_id(self) -> int:
        """The broker's ``node.id``."""
        return self._node_id

    @property
    @abstractmethod
    def state(self) -> NodeState:
        """Where the node is in its lifecycle (one that exited by itself is ``STOPPED``)."""

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:<port>`` of the client listener (known after the first start)."""
        return f"127.0.0.1:{self._client_port()}"

    @abstractmethod
    def log_tail(self, lines: int = 40) -> str:
        """Return the last ``lines`` lines of the node's output."""

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> Self:
        """Start the broker and return once it answers metadata requests.

        A later start (after :meth:`stop` or :meth:`kill`) brings the same node
        back on its storage and ports; starting a running broker does nothing.

        Raises:
            HarnessError: the broker is closed, or belongs to a cluster that
                has not started it yet; and what the backend's first start
                raises (see the class).
            BrokerStartError: the node exited or did not answer within
                ``startup_timeout``; the message has the tail of its log.
        """
        with self._lock:
            state = self.state
            if state is NodeState.CLOSED:
                raise HarnessError("the broker is closed; create a new one")
            if state is NodeState.RUNNING:
                return self
            if state is NodeState.STOPPED:
                self._launch_and_wait()
            elif self._cluster_member:
                raise HarnessError(f"a cluster node is first started by its {self._cluster_kind}")
            else:
                self._first_start()
            return self

    @abstractmethod
    def stop(self, timeout: float | None = None) -> None:
        """Stop the node gracefully, forcibly once ``timeout`` (default ``stop_timeout``) is up."""

    @abstractmethod
    def kill(self) -> None:
        """Kill the node at once, without a controlled shutdown (like a crash)."""

    def restart(self, *, kill: bool = False) -> None:
        """Stop (or with ``kill=True``, kill) the broker if it runs, then start it again.

        Same storage, same ports, same node id; returns once it answers.
        """
        with self._lock:
            if self._state is NodeState.NEW:
                raise HarnessError("the broker was never started; call start() first")
            if self._state is NodeState.CLOSED:
                raise HarnessError("the broker is closed; create a new one")
            if kill:
                self.kill()
            else:
                self.stop()
            self._launch_and_wait()

    # -- steps, also driven by the clusters ----------------------------------------

    @abstractmethod
    def _client_port(self) -> int:
        """The host port of the client listener; HarnessError before the first start."""

    @abstractmethod
    def _first_start(self) -> None:
        """Everything a node's first start does, up to its answering metadata requests."""

    @abstractmethod
    def _launch(self) -> None:
        """Run the node again on its kept storage and ports (without waiting)."""

    @abstractmethod
    def _check_alive(self) -> None:
        """Raise BrokerStartError if the launched node exited."""

    @abstractmethod
    def _abandon_start(self) -> None:
        """Stop a node that did not become ready."""

    @abstractmethod
    def _failure_report(self) -> str:
        """Why the node failed, and the last lines of its output, for an error message."""

    @abstractmethod
    def _describe(self) -> str:
        """The node in words, for messages: ``"Kafka node 2"``."""

    def _wait_started(self, deadline: float, check: Callable[[], None]) -> None:
        """Wait for what precedes a metadata check; ``check()`` raises if the node died."""

    def _launch_and_wait(self) -> None:
        self._launch()
        self._await_ready(time.monotonic() + self.startup_timeout)

    def _await_ready(self, deadline: float, peers_alive: Callable[[], None] | None = None) -> None:
        # peers_alive: a cluster's check that no other node died meanwhile,
        # which would leave this one waiting for a quorum until the deadline.
        def check() -> None:
            self._check_alive()
            if peers_alive is not None:
                peers_alive()

        try:
            self._wait_started(deadline, check)
            wait_until_answers(
                self.bootstrap_servers,
                deadline=deadline,
                expected_broker_ids=(self._node_id,),
                check_alive=check,
            )
        except TimeoutError as exc:
            report = self._failure_report()
            self._abandon_start()
            raise BrokerStartError(
                f"{self._describe()} was not ready within {self.startup_timeout:.0f} s "
                f"({exc}); {report}"
            ) from None
        self._logger.info(
            "%s ready at %s, %.1f s after launch",
            self._describe(),
            self.bootstrap_servers,
            time.monotonic() - self._launched_at,
        )


_N = TypeVar("_N", bound=BrokerNode)


class NodeCluster(StartsOnEnter, Generic[_N]):
    """The operations a cluster of nodes offers whatever runs them."""

    def __init__(self, count: int, startup_timeout: float, make_node: Callable[[int], _N]) -> None:
        # make_node(node_id) builds one node; the ids are 1..count.
        if count < 1:
            raise ValueError(f"a cluster needs at least one node, not {count}")
        self.startup_timeout = startup_timeout
        self._closed = False
        self.nodes: tuple[_N, ...] = tuple(make_node(node_id) for node_id in range(1, count + 1))
        """The nodes, in node id order (``nodes[0]`` is node 1)."""
        for node in self.nodes:
            node._cluster_member = True  # the cluster does their first start

    @property
    def bootstrap_servers(self) -> str:
        """Every node's ``127.0.0.1:<port>``, comma-joined (known after start)."""
        return ",".join(node.bootstrap_servers for node in self.nodes)

    def node(self, node_id: int) -> _N:
        """Return the node whose ``node.id`` is ``node_id``."""
        for candidate in self.nodes:
            if candidate.node_id == node_id:
                return candidate
        raise KeyError(f"no node {node_id} in this cluster (ids 1..{len(self.nodes)})")

    @abstractmethod
    def stop(self, timeout: float | None = None) -> None:
        """Stop every node gracefully (storage kept)."""

    def _check_open(self) -> None:
        if self._closed:
            raise HarnessError("the cluster is closed; create a new one")

    def kill(self) -> None:
        """Kill every node at once."""
        for node in self.nodes:
            node.kill()

    def restart(self) -> None:
        """Stop every node, then start them all again (same storage, same ports)."""
        self.stop()
        self.start()

    def _node_label(self, node: _N) -> str:
        return f"node {node.node_id}"

    def _check_all_alive(self) -> None:
        for node in self.nodes:
            # The raw state: the property would quietly mark a dead node
            # stopped, and its exit would go unreported.
            if node._state is NodeState.RUNNING:
                node._check_alive()

    def _start_stopped_nodes(self, deadline: float) -> None:
        # Launch all before waiting for any: a node cannot finish starting
        # until a majority of the quorum runs.
        stopped = [node for node in self.nodes if node.state is NodeState.STOPPED]
        for node in stopped:
            node._launch()
        for node in stopped:
            node._await_ready(deadline, self._check_all_alive)
        self._await_membership(deadline)

    def _await_membership(self, deadline: float) -> None:
        try:
            wait_until_answers(
                self.bootstrap_servers,
                deadline=deadline,
                expected_broker_ids=[node.node_id for node in self.nodes],
            )
        except TimeoutError as exc:
            tails = "\n".join(
                f"--- {self._node_label(node)}:\n{node.log_tail(15)}" for node in self.nodes
            )
            raise BrokerStartError(f"the cluster did not form: {exc}\n{tails}") from None
