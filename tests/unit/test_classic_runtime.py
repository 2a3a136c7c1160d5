"""Unit tests of the classic session's pure helpers and the choice of protocol."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping

import anyio
import pytest

from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.dataplane import Record
from kgroup.membership import ReportFatalError
from kgroup.runtime import Driver, TransportInterface
from kgroup.runtime.choice import falls_back, session_class
from kgroup.runtime.classic_session import ClassicSession, _cluster
from kgroup.runtime.consumer_session import ConsumerSession
from kgroup.transport import BrokerAddress, ClusterMetadata, PartitionInfo, TopicInfo
from kgroup.types import Backoff, TopicPartition


class _IdleDataPlane:
    """A data plane that is never assigned anything (the driver never gets that far)."""

    assigned: frozenset[TopicPartition] = frozenset()

    def assign(
        self,
        offsets: Mapping[TopicPartition, int | None],
        leader_epochs: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        raise AssertionError("nothing is assigned in these tests")

    def unassign(self, partitions: Iterable[TopicPartition]) -> None:
        pass

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        pass

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        pass

    def seek(self, partition: TopicPartition, offset: int) -> None:
        pass

    def positions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {}

    def leader_epochs(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return {}

    def consume(self, max_records: int, timeout: float) -> list[Record]:
        return []

    def close(self) -> None:
        pass


def test_cluster_has_partition_counts_and_replica_racks_of_known_topics() -> None:
    metadata = ClusterMetadata(
        brokers={
            1: BrokerAddress(1, "h1", 9092, rack="r1"),
            2: BrokerAddress(2, "h2", 9092, rack="r2"),
            3: BrokerAddress(3, "h3", 9092),
        },
        topics={
            "t": TopicInfo(
                "t",
                uuid.uuid4(),
                {
                    0: PartitionInfo(0, 1, 0, (1, 2), (1, 2)),
                    1: PartitionInfo(1, 3, 0, (3,), (3,)),
                },
            )
        },
    )
    cluster = _cluster(metadata, ["t", "missing"])
    assert dict(cluster.partition_counts) == {"t": 2}
    assert cluster.racks_of(TopicPartition("t", 0)) == {"r1", "r2"}
    assert cluster.racks_of(TopicPartition("t", 1)) == frozenset()


def test_session_class_per_protocol() -> None:
    assert session_class(GroupProtocol.CONSUMER) is ConsumerSession
    assert session_class(GroupProtocol.CLASSIC) is ClassicSession
    assert ClassicSession.group_protocol is GroupProtocol.CLASSIC
    with pytest.raises(ValueError, match="resolve"):
        session_class(GroupProtocol.AUTO)


def test_auto_assumes_the_new_protocol_when_the_cluster_is_unreachable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = ConsumerConfig.from_dict(
        {
            "bootstrap.servers": "127.0.0.1:9",
            "group.id": "g",
            "group.protocol": "auto",
            "request.timeout.ms": 1000,
        }
    )

    async def main() -> GroupProtocol:
        # The driver decides auto with its own client; run() reports started once decided.
        driver = Driver(config, _IdleDataPlane(), wakeup=lambda: None)
        async with anyio.create_task_group() as tg:
            await tg.start(driver.run)
            protocol = driver.session.group_protocol
            driver.abort()
        return protocol

    assert anyio.run(main) is GroupProtocol.CONSUMER
    assert any("using the new consumer protocol" in r.message for r in caplog.records)


class _Host:
    """Enough of a driver to construct sessions (nothing runs)."""

    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self.request_timeout = 1.0
        self.backoff = Backoff()

    @property
    def client(self) -> TransportInterface:
        raise AssertionError("not connected in these tests")

    def spawn(self, fn: Callable[..., Awaitable[None]], *args: object) -> None:
        raise AssertionError("nothing runs in these tests")

    def set_fatal(self, error: BaseException) -> None:
        raise AssertionError("nothing fails in these tests")

    def wake(self) -> None:
        pass

    def spawn_answer(
        self, fn: Callable[..., Awaitable[None]], *args: object, timed: bool = True
    ) -> None:
        raise AssertionError("no request is sent in these tests")

    def expect_answer(self) -> float:
        raise AssertionError("no request is sent in these tests")

    def answered(self, sent: float, *, timed: bool = True) -> None:
        raise AssertionError("no request is sent in these tests")


def _config(protocol: str) -> ConsumerConfig:
    return ConsumerConfig.from_dict(
        {"bootstrap.servers": "localhost:9092", "group.id": "g", "group.protocol": protocol}
    )


def test_only_auto_falls_back_and_only_on_a_refusal_of_the_protocol() -> None:
    refused = ReportFatalError(35, "UNSUPPORTED_VERSION", None, protocol_unsupported=True)
    other = ReportFatalError(30, "GROUP_AUTHORIZATION_FAILED", None)
    auto = _config("auto")
    session = ConsumerSession(_Host(auto))
    assert session.may_fall_back  # no heartbeat accepted yet
    assert falls_back(auto, session, refused)
    assert not falls_back(auto, session, other)
    explicit = _config("consumer")
    assert not falls_back(explicit, ConsumerSession(_Host(explicit)), refused)
    assert not falls_back(auto, ClassicSession(_Host(auto)), refused)
