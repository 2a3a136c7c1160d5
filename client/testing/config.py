"""Broker configuration for tests: defaults, rendering, cluster ids, free ports.

Everything here is pure (apart from :func:`pick_free_ports`, which asks the
kernel for ports), so it is unit-tested without a JVM.
"""

from __future__ import annotations

import base64
import socket
import uuid
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

__all__ = [
    "FAST_TEST_DEFAULTS",
    "NodePorts",
    "QuorumNode",
    "generate_cluster_id",
    "internal_topic_settings",
    "node_properties",
    "pick_free_ports",
    "render_properties",
]

FAST_TEST_DEFAULTS: Mapping[str, str] = MappingProxyType(
    {
        # KIP-848 (consumer protocol): each min must move with its value or the
        # broker refuses to start; the heartbeat stays below the session timeout.
        "group.consumer.heartbeat.interval.ms": "500",
        "group.consumer.min.heartbeat.interval.ms": "500",
        "group.consumer.session.timeout.ms": "6000",
        "group.consumer.min.session.timeout.ms": "6000",
        # 4.3+ batches assignments for 1 s by default; tests want them at once.
        "group.consumer.assignment.interval.ms": "0",
        "group.consumer.min.assignment.interval.ms": "0",
        # Share groups (KIP-932): the same fast heartbeats and sessions, and a
        # record lock that a group may shorten to 1 s (the broker's floor is
        # 15 s by default), so that lock-expiry tests take seconds.
        "group.share.heartbeat.interval.ms": "500",
        "group.share.min.heartbeat.interval.ms": "500",
        "group.share.session.timeout.ms": "6000",
        "group.share.min.session.timeout.ms": "6000",
        "group.share.min.record.lock.duration.ms": "1000",
        # Classic protocol.
        "group.min.session.timeout.ms": "1000",
        "group.initial.rebalance.delay.ms": "0",
        # Internal topics: few partitions, single replica (a cluster raises these).
        "offsets.topic.num.partitions": "5",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.num.partitions": "5",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "5",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        # A SIGKILLed broker's registration (and, in a cluster, its leadership)
        # lingers for the broker session timeout (9 s by default): a restarted
        # node cannot register before that.
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
        # The cleaner allocates a 128 MiB dedupe buffer by default; the heap is 512 MiB.
        "log.cleaner.dedupe.buffer.size": "2097152",
    }
)
"""Broker settings applied to every harness broker unless overridden.

They make group protocol tests fast (sub-second heartbeats, no rebalance
delay, no assignment batching) and keep the JVM small. Any key can be
replaced through the ``overrides`` argument of the harness.
"""

_LISTENER_PROTOCOLS = (
    "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
    "SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL"
)


@dataclass(frozen=True)
class NodePorts:
    """The two ports of one node: clients connect to ``client``; Raft uses ``controller``."""

    client: int
    controller: int


@dataclass(frozen=True)
class QuorumNode:
    """One voter of a static controller quorum."""

    node_id: int
    ports: NodePorts


def generate_cluster_id() -> str:
    """Return a fresh Kafka cluster id: a random UUID, base64url without padding (22 chars).

    This is the format ``kafka-storage random-uuid`` prints; generating it here
    saves a JVM start. Like Kafka's own generator it never returns an id that
    starts with ``-``: the storage tool's argument parser would take it for an
    option (one id in 64 would otherwise fail to format).
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def pick_free_ports(count: int, host: str = "127.0.0.1") -> tuple[int, ...]:
    """Return ``count`` distinct TCP ports that were free on ``host`` a moment ago.

    Each port comes from binding to port 0; all sockets stay open until every
    port is chosen, so the ports are distinct. Another process may still take
    one before the broker binds it; the harness retries with new ports then.
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, not {count}")
    with ExitStack() as stack:
        ports: list[int] = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return tuple(ports)


def internal_topic_settings(nodes: int) -> dict[str, str]:
    """The internal topics' replication in a cluster of ``nodes`` nodes.

    Replication factor ``min(3, nodes)``, min ISR ``min(2, nodes)``; for one
    node these are the values of :data:`FAST_TEST_DEFAULTS`.
    """
    replicas = str(min(3, nodes))
    min_isr = str(min(2, nodes))
    return {
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
    }


def node_properties(
    *,
    node_id: int,
    ports: NodePorts,
    data_dir: Path,
    voters: Iterable[QuorumNode] | None = None,
    overrides: Mapping[str, str] | None = None,
    host: str = "127.0.0.1",
    extra_listeners: Mapping[str, tuple[str, int]] | None = None,
) -> dict[str, str]:
    """Return the full ``server.properties`` of one KRaft combined-mode node.

    With ``voters=None`` the node is a standalone cluster of one (its storage
    is formatted with ``--standalone`` and it finds the quorum through
    ``controller.quorum.bootstrap.servers``). With voters it belongs to a
    static quorum (``controller.quorum.voters``), and the internal topics get
    replication factor ``min(3, nodes)`` and min ISR ``min(2, nodes)``.
    Layers, later winning: listeners and ids, :data:`FAST_TEST_DEFAULTS`, the
    cluster settings, ``overrides``. ``extra_listeners`` (name -> advertised
    host and port) adds client listeners bound on ``host``; their security
    protocol comes from ``listener.security.protocol.map`` (secured brokers,
    :mod:`kgroup.testing.security`).
    """
    client = f"PLAINTEXT://{host}:{ports.client}"
    controller = f"CONTROLLER://{host}:{ports.controller}"
    bound = [client]
    advertised = [client]
    for name, (advertised_host, port) in (extra_listeners or {}).items():
        bound.append(f"{name}://{host}:{port}")
        advertised.append(f"{name}://{advertised_host}:{port}")
    props: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "listeners": ",".join([*bound, controller]),
        "advertised.listeners": ",".join([*advertised, controller]),
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": _LISTENER_PROTOCOLS,
        "log.dirs": str(data_dir),
    }
    props.update(FAST_TEST_DEFAULTS)
    voter_list = list(voters) if voters is not None else None
    if voter_list is None:
        props["controller.quorum.bootstrap.servers"] = f"{host}:{ports.controller}"
    else:
        if node_id not in {v.node_id for v in voter_list}:
            raise ValueError(f"node {node_id} is not among the voters")
        props["controller.quorum.voters"] = ",".join(
            f"{v.node_id}@{host}:{v.ports.controller}" for v in voter_list
        )
        props.update(internal_topic_settings(len(voter_list)))
    if overrides:
        props.update({str(k): str(v) for k, v in overrides.items()})
    return props


def _escape(text: str, *, key: bool) -> str:
    # java.util.Properties syntax: backslash escapes; in keys also the separators.
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif key and ch in "=: #!":
            out.append("\\" + ch)
        elif not key and i == 0 and ch in " #!":
            # Leading blanks would be stripped, and a leading # or ! is harmless
            # in a value, but escaping keeps the round-trip obvious.
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def render_properties(props: Mapping[str, str]) -> str:
    """Render ``props`` in ``java.util.Properties`` syntax, one ``key=value`` per line, sorted."""
    lines = [f"{_escape(k, key=True)}={_escape(v, key=False)}" for k, v in sorted(props.items())]
    return "\n".join(lines) + "\n"
