"""A bootstrap server that accepts connections and never answers, listed first.

A stopped host behind an address that still accepts (a load balancer with no
backend, a hung broker process) held every consumer start for the whole
connection timeout (``socket.connection.setup.timeout.ms``, capped by
``request.timeout.ms``) before the next server was tried, on every start and
every reconnection round. Now the next server is tried alongside after a
second and the first to connect is used.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from helpers import classic_conf, consumer_conf, drain, produce

from kgroup import Consumer
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic


@pytest.fixture
def silent_server() -> Iterator[str]:
    """host:port of a listener that completes TCP handshakes (the kernel's backlog)
    and never reads or answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=64) as listener:
        host, port = listener.getsockname()[:2]
        yield f"{host}:{port}"


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_silent_first_bootstrap_server_does_not_hold_the_consumer_for_its_timeout(
    kafka_bootstrap_servers: str,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    silent_server: str,
    protocol: str,
) -> None:
    topic = make_topic(partitions=2)
    want = produce(kafka_bootstrap_servers, topic, 2, 20)
    servers = f"{silent_server},{kafka_bootstrap_servers}"
    # A minute to give up on the silent server: the records must come well before.
    patience = {"request.timeout.ms": 60_000, "socket.connection.setup.timeout.ms": 60_000}
    conf = (
        consumer_conf(servers, make_group_id())
        if protocol == "consumer"
        else classic_conf(servers, make_group_id(), "cooperative-sticky")
    )
    conf.update(patience)
    consumer = Consumer(conf)
    try:
        consumer.subscribe([topic])
        got = drain(consumer, len(want), timeout=30)
        assert set(got) == want
    finally:
        consumer.close()
