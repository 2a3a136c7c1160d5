"""A representative subset of the integration tests, against a containerized broker.

These tests exercise the ``testcontainers`` backend of ``kgroup.testing``: the
session broker (``kafka_broker``) is then a :class:`ContainerBroker` in the
``apache/kafka`` image, and the kill-and-recover test starts its own. They
carry the ``containers`` marker; the kgroup pytest plugin deselects them
unless ``KGROUP_BROKER_BACKEND=testcontainers`` (or ``-m`` names the marker),
so the default run on the process broker reports them as deselected, never
as skipped. Run them with::

    eval "$(.ci/container-engine)"   # where no Docker engine runs; root
    KGROUP_BROKER_BACKEND=testcontainers python -m pytest -m containers

The group tests drive ``ConsumerGroupHeartbeat`` by hand through
``kgroup.transport`` (as ``test_wire.py`` does), so they test the broker and
the wire layer, not the consumer being built on top.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from helpers import coordinator_moved
from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload

from kgroup.errors import BrokerStartError, HarnessError, KafkaConnectionError
from kgroup.protocol import ApiKey, NegotiatedVersions
from kgroup.testing import Broker, BrokerBackend, backend_from_env, broker_from_env
from kgroup.testing.containers import ContainerBroker, ContainerCluster
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic, create_topic
from kgroup.transport import KafkaClient, connect, parse_bootstrap_servers

pytestmark = [pytest.mark.containers, pytest.mark.integration, pytest.mark.anyio]

Owned = dict[uuid.UUID, tuple[int, ...]]


@pytest.fixture
def anyio_backend() -> str:
    # The wire layer is tested on trio elsewhere; here the broker is the subject.
    return "asyncio"


# Session scope: autouse fixtures come first within a scope, so this fails
# before the session broker of another backend is started for nothing.
@pytest.fixture(scope="session", autouse=True)
def _container_backend() -> None:
    # Run on another backend, these tests would pass without testing containers.
    if backend_from_env() is not BrokerBackend.TESTCONTAINERS:
        pytest.fail(
            "the `containers` tests need KGROUP_BROKER_BACKEND=testcontainers "
            "(and a container engine: see docs/testing.md)"
        )


class Member:
    """One consumer group member driven by raw ConsumerGroupHeartbeat requests.

    It reconciles at once: whatever the broker assigns it owns from the next
    heartbeat on, and every heartbeat reports what it owns (so revocations
    are acknowledged without delay).
    """

    def __init__(self, group_id: str, topic: str, *, instance_id: str | None = None) -> None:
        self.group_id = group_id
        self.topic = topic
        self.instance_id = instance_id
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: Owned = {}
        self.interval = 0.5

    def _request(self, versions: NegotiatedVersions) -> RequestPayload:
        module = versions.request_module(ApiKey.CONSUMER_GROUP_HEARTBEAT)
        fields: dict[str, Any] = {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "instance_id": self.instance_id,
        }
        if self.epoch == 0:
            fields |= {
                "rebalance_timeout": datetime.timedelta(seconds=30),
                "subscribed_topic_names": (self.topic,),
                "topic_partitions": (),
            }
        else:
            fields["topic_partitions"] = tuple(
                module.TopicPartitions(topic_id=tid, partitions=parts)
                for tid, parts in sorted(self.owned.items())
            )
        return versions.new_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, **fields)

    async def heartbeat(self, client: KafkaClient) -> Any:
        response: Any = await client.coordinator_request(self.group_id, self._request)
        with anyio.fail_after(30):
            # A fresh broker loads the offsets topic on the group's first request;
            # clients retry this error, and nothing was changed by the request.
            while response.error_code == ErrorCode.coordinator_load_in_progress:
                await anyio.sleep(0.2)
                response = await client.coordinator_request(self.group_id, self._request)
        assert response.error_code == ErrorCode.none, (
            ErrorCode(response.error_code).name,
            response.error_message,
        )
        self.epoch = int(response.member_epoch)
        self.interval = response.heartbeat_interval.total_seconds()
        if response.assignment is not None:
            self.owned = {
                tp.topic_id: tuple(sorted(tp.partitions))
                for tp in response.assignment.topic_partitions
                if tp.partitions
            }
        return response

    async def leave(self, client: KafkaClient, epoch: int) -> Any:
        """Leave the group: -1 for good, -2 (static members) for a bounce."""
        self.epoch = epoch
        response: Any = await client.coordinator_request(self.group_id, self._request)
        assert response.error_code == ErrorCode.none, response.error_message
        assert response.member_epoch == epoch
        self.owned = {}
        return response

    def partitions(self, topic_id: uuid.UUID) -> tuple[int, ...]:
        return self.owned.get(topic_id, ())


async def _heartbeat_until(
    client: KafkaClient, members: list[Member], done: Any, *, timeout: float = 60.0
) -> None:
    """Heartbeat every member at the broker's pace until ``done()`` holds."""
    with anyio.fail_after(timeout):
        while True:
            for member in members:
                await member.heartbeat(client)
            if done():
                return
            # The heartbeat interval is the broker's pacing, not a wait for an event.
            await anyio.sleep(min(m.interval for m in members))


def test_the_session_broker_is_a_container(kafka_broker: Broker) -> None:
    assert isinstance(kafka_broker, ContainerBroker)
    assert kafka_broker.bootstrap_servers.startswith("127.0.0.1:")


async def test_api_versions_and_join_gets_an_epoch_and_an_assignment(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    # ApiVersions through the advertised (host-mapped) address.
    host, port = parse_bootstrap_servers(kafka_bootstrap_servers)[0]
    async with connect(host, port) as conn:
        assert 1 in conn.versions.broker[ApiKey.CONSUMER_GROUP_HEARTBEAT]

    topic = make_topic(partitions=3)
    async with KafkaClient(kafka_bootstrap_servers) as client:
        topic_id = (await client.metadata([topic])).topic_id(topic)
        member = Member(make_group_id(), topic)
        joined = await member.heartbeat(client)
        assert joined.member_epoch > 0
        await _heartbeat_until(client, [member], lambda: member.partitions(topic_id) == (0, 1, 2))
        await member.leave(client, -1)


async def test_three_members_converge_to_disjoint_complete_assignments(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic = make_topic(partitions=6)
    group_id = make_group_id()
    async with KafkaClient(kafka_bootstrap_servers) as client:
        topic_id = (await client.metadata([topic])).topic_id(topic)
        first = Member(group_id, topic)
        await _heartbeat_until(client, [first], lambda: len(first.partitions(topic_id)) == 6)

        # Two more join: the first must give up partitions before they get them.
        members = [first, Member(group_id, topic), Member(group_id, topic)]

        def converged() -> bool:
            shares = [set(m.partitions(topic_id)) for m in members]
            union = set().union(*shares)
            disjoint = sum(len(s) for s in shares) == len(union)
            return disjoint and union == set(range(6)) and all(len(s) == 2 for s in shares)

        await _heartbeat_until(client, members, converged)
        epochs = {m.epoch for m in members}
        assert len(epochs) == 1, f"members on different epochs after convergence: {epochs}"
        for member in members:
            await member.leave(client, -1)


async def test_static_member_bounce_gets_its_partitions_back(
    kafka_bootstrap_servers: str, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    topic = make_topic(partitions=4)
    group_id = make_group_id()
    async with KafkaClient(kafka_bootstrap_servers) as client:
        topic_id = (await client.metadata([topic])).topic_id(topic)
        static = Member(group_id, topic, instance_id="static-1")
        other = Member(group_id, topic)
        members = [static, other]

        def split() -> bool:
            mine, theirs = static.partitions(topic_id), other.partitions(topic_id)
            return len(mine) == 2 and len(theirs) == 2 and not set(mine) & set(theirs)

        await _heartbeat_until(client, members, split)
        before = static.partitions(topic_id)
        theirs = other.partitions(topic_id)

        # The bounce: leave temporarily (-2), then a new process (a new member
        # id) rejoins with the same instance id well within the session timeout
        # (6 s), while the other member keeps heartbeating.
        await static.leave(client, -2)
        for _ in range(3):
            # The broker holds the static member's partitions: none move to the other.
            await anyio.sleep(other.interval)
            await other.heartbeat(client)
            assert other.partitions(topic_id) == theirs
        rejoined = Member(group_id, topic, instance_id="static-1")
        response = await rejoined.heartbeat(client)
        assert response.member_epoch > 0
        await _heartbeat_until(
            client, [rejoined, other], lambda: len(rejoined.partitions(topic_id)) == 2
        )
        assert rejoined.partitions(topic_id) == before
        # Nothing moved: the other member kept its partitions throughout.
        assert other.partitions(topic_id) == theirs
        for member in (rejoined, other):
            await member.leave(client, -1)


@pytest.fixture(scope="module")
def own_broker() -> Iterator[ContainerBroker]:
    """A container broker of this module only: the test kills it."""
    broker = broker_from_env()
    assert isinstance(broker, ContainerBroker)
    with broker:
        yield broker


async def test_kill_and_recover_keeps_the_topic(own_broker: ContainerBroker) -> None:
    topic = f"t-kill-{uuid.uuid4().hex[:8]}"
    create_topic(own_broker.bootstrap_servers, topic, partitions=3)
    address = own_broker.bootstrap_servers

    own_broker.kill()
    host, port = parse_bootstrap_servers(address)[0]
    with pytest.raises(KafkaConnectionError):
        # Nothing answers while the container is down.
        async with connect(host, port, connect_timeout=2):
            pass

    started = time.monotonic()
    own_broker.start()
    assert own_broker.bootstrap_servers == address, "the host port must survive a restart"
    async with KafkaClient(address) as client:
        meta = await client.metadata([topic])
        assert meta.partition_count(topic) == 3
    print(f"container broker recovered from SIGKILL in {time.monotonic() - started:.1f} s")


def test_a_container_exiting_during_start_up_reports_its_log() -> None:
    # The broker refuses a heartbeat interval above its maximum (15 s).
    broker = broker_from_env({"group.consumer.heartbeat.interval.ms": "60000"})
    with pytest.raises(BrokerStartError, match="exited with code") as info:
        broker.start()
    broker.close()
    assert "group.consumer.heartbeat.interval.ms must be less than" in str(info.value)


def test_a_missing_image_is_a_clear_error() -> None:
    broker = ContainerBroker(image="apache/kafka:0.0.0-no-such-tag")
    with pytest.raises(HarnessError, match="is not present and pulling it failed"):
        broker.start()
    broker.close()


async def test_a_three_node_cluster_survives_its_coordinator_being_killed(
    make_group_id: MakeGroupId,
) -> None:
    cluster = broker_from_env(nodes=3)
    assert isinstance(cluster, ContainerCluster)
    with cluster:
        topic = f"t-cluster-{uuid.uuid4().hex[:8]}"
        create_topic(cluster.bootstrap_servers, topic, partitions=3, replication_factor=3)
        group_id = make_group_id()
        async with KafkaClient(cluster.bootstrap_servers, request_timeout=10) as client:
            first = await client.coordinator(group_id, timeout=60)
            cluster.node(first.node_id).kill()
            await coordinator_moved(client, group_id, first.node_id)
            topic_id = (await client.metadata([topic])).topic_id(topic)
            member = Member(group_id, topic)
            await _heartbeat_until(client, [member], lambda: len(member.partitions(topic_id)) == 3)
        cluster.node(first.node_id).start()
        # Every node answers again, the killed one included.
        cluster.start()
