"""What every broker handle and every cluster of them share, whatever runs the nodes."""

from __future__ import annotations

import enum
from collections.abc import Callable
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

from kgroup.errors import BrokerStartError
from kgroup.testing.readiness import wait_until_answers

__all__ = ["NodeCluster", "NodeState", "StartsOnEnter"]


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


class StartsOnEnter:
    """``with handle:`` starts the handle and closes it on the way out, error or not."""

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Node(Protocol):
    """What a cluster needs of its nodes (KafkaBroker and ContainerBroker both are)."""

    _state: NodeState

    @property
    def node_id(self) -> int: ...

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def state(self) -> NodeState: ...

    def log_tail(self, lines: int = ...) -> str: ...

    def kill(self) -> None: ...

    def _launch(self) -> None: ...

    def _check_alive(self) -> None: ...

    def _await_ready(
        self, deadline: float, peers_alive: Callable[[], None] | None = None
    ) -> None: ...


_N = TypeVar("_N", bound=_Node)


class NodeCluster(StartsOnEnter, Generic[_N]):
    """The operations a cluster of nodes offers whatever runs them."""

    nodes: tuple[_N, ...]

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

    def stop(self, timeout: float | None = None) -> None:
        raise NotImplementedError

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
