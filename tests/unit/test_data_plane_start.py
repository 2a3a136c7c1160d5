"""What the driver does so that newly assigned partitions start fetching at once.

The data plane connects to the subscribed topics' leaders while the member
joins (one partition per leader is enough), and a request whose answer may
bring work (a heartbeat, the committed offsets a start of fetching needs)
counts as awaited from the moment it is decided, so the application's thread
keeps its record waits short until the answer is handled.
"""

from __future__ import annotations

import uuid

import anyio
import pytest

from kgroup.config import ConsumerConfig
from kgroup.runtime import Driver
from kgroup.runtime.group_io import one_per_leader
from kgroup.testing.fake import FakeDataPlane, RecordLog
from kgroup.transport import ClusterMetadata, PartitionInfo, TopicInfo
from kgroup.types import TopicPartition


def _topic(name: str, leaders: list[int]) -> TopicInfo:
    return TopicInfo(
        name,
        uuid.uuid4(),
        {i: PartitionInfo(i, leader, 0, (leader,), (leader,)) for i, leader in enumerate(leaders)},
    )


def test_one_partition_per_leader_of_each_known_topic() -> None:
    cluster = ClusterMetadata(
        topics={
            "a": _topic("a", [1, 2, 1, 2, 3]),
            "b": _topic("b", [-1, 2, 2]),  # partition 0 has no leader now
        }
    )
    chosen = one_per_leader(cluster, frozenset({"a", "b", "missing"}))
    assert chosen == [
        TopicPartition("a", 0),
        TopicPartition("a", 1),
        TopicPartition("a", 4),
        TopicPartition("b", 1),
    ]


def _driver() -> Driver:
    config = ConsumerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9", "group.id": "g"})
    return Driver(config, FakeDataPlane(RecordLog()), wakeup=lambda: None)


def test_a_start_of_fetching_counts_as_awaited_before_its_task_first_runs() -> None:
    async def main() -> tuple[list[int], int]:
        driver = _driver()
        release = anyio.Event()
        seen: list[int] = []

        async def fetch_then_assign() -> None:
            seen.append(driver.answers_pending)
            await release.wait()

        async with anyio.create_task_group() as tg:
            driver._tg = tg  # connected, as far as spawning goes
            driver.spawn_answer(fetch_then_assign, timed=False)
            # Counted at once: the application's thread may read it before the task runs.
            assert driver.answers_pending == 1
            assert seen == []
            while not seen:
                await anyio.sleep(0)
            release.set()
        return seen, driver.answers_pending

    seen, after = anyio.run(main)
    assert seen == [1]
    assert after == 0


def test_a_failed_start_of_fetching_is_no_longer_awaited() -> None:
    async def main() -> tuple[int, BaseException | None]:
        driver = _driver()

        async def fails() -> None:
            raise RuntimeError("offset fetch failed")

        async with anyio.create_task_group() as tg:
            driver._tg = tg
            driver.spawn_answer(fails, timed=False)
        return driver.answers_pending, driver.fatal

    pending, fatal = anyio.run(main)
    assert pending == 0
    assert isinstance(fatal, RuntimeError)


@pytest.mark.parametrize("count", [1, 3])
def test_starts_decided_before_connecting_are_counted_at_once(count: int) -> None:
    driver = _driver()
    for _ in range(count):
        driver.spawn_answer(anyio.sleep, 0)
    assert driver.answers_pending == count
