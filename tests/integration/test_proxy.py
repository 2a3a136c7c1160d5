"""kgroup.testing.proxy in front of a real broker: a consumer's connections all go
through it, and a blackhole makes the member's heartbeats time out.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest
from helpers import consumer_conf, drain, produce, wait_until

from kgroup import Consumer
from kgroup.protocol import ApiKey
from kgroup.testing import KafkaBroker
from kgroup.testing.proxy import FaultProxy
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = pytest.mark.integration

_ESTABLISHED = "01"


def _tcp_connections() -> set[tuple[int, int]]:
    """(local port, remote port) of this process's established TCP connections (Linux)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state == _ESTABLISHED and inode in inodes:
                found.add((int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16)))
    return found


def _direct(broker_port: int, proxy: FaultProxy) -> set[int]:
    """Local ports of connections from this process to the broker that are not the proxy's."""
    before = {c.upstream_port for c in proxy.connections()}
    to_broker = {local for local, remote in _tcp_connections() if remote == broker_port}
    after = {c.upstream_port for c in proxy.connections()}
    return to_broker - before - after


def test_a_consumer_goes_only_through_the_proxy_and_a_blackhole_times_its_heartbeats_out(
    kafka_broker: KafkaBroker,
    make_topic: MakeTopic,
    make_group_id: MakeGroupId,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    broker_port = int(bootstrap.rsplit(":", 1)[1])
    topic = make_topic(partitions=3)
    group = make_group_id()
    values = produce(bootstrap, topic, 3, 30)
    # Connections other tests' clients may still hold to the session broker.
    earlier = {local for local, remote in _tcp_connections() if remote == broker_port}
    caplog.set_level(logging.INFO, logger="kgroup")

    with FaultProxy(bootstrap).running_in_thread() as proxy:
        conf = consumer_conf(proxy.bootstrap_servers, group, request_timeout_ms=1500)
        with Consumer(conf) as consumer:
            consumer.subscribe([topic])
            assert set(drain(consumer, len(values), 60)) == values
            assert consumer.commit() is not None

            # Every connection the consumer made — kgroup's group and offset
            # requests, the data plane's fetches — is a connection to the proxy.
            assert _direct(broker_port, proxy) - earlier == set()
            assert proxy.errors == []
            forwarded = proxy.stats().forwarded
            for api in (
                ApiKey.METADATA,
                ApiKey.FIND_COORDINATOR,
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                ApiKey.OFFSET_FETCH,
                ApiKey.OFFSET_COMMIT,
            ):
                assert forwarded.get(api, 0) > 0, api.api_name
            assert forwarded.get(1, 0) > 0  # Fetch, from librdkafka
            assert {c.node_id for c in proxy.connections()} == {kafka_broker.node_id}

            proxy.blackhole()
            timed_out = re.compile(r"heartbeat failed \(timeout\)")

            def heartbeat_timed_out() -> bool:
                consumer.poll(0.1)
                return any(timed_out.search(r.getMessage()) for r in caplog.records)

            wait_until(heartbeat_timed_out, 20, "a heartbeat timing out in the blackhole")
            assert proxy.stats().dropped.get(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0) > 0

            # The network heals but the blackhole's connections stay half-open: the
            # member's heartbeats get through again, over new connections.
            answered = proxy.stats().answered.get(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0)
            proxy.half_open()

            def heartbeats_answered() -> bool:
                consumer.poll(0.1)
                now = proxy.stats().answered.get(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0)
                return now > answered

            wait_until(heartbeats_answered, 20, "a heartbeat answered after the heal")
            # Close with every connection healthy: the data plane's half-open
            # connections would otherwise hold its shutdown up.
            proxy.heal()
