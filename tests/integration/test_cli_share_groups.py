"""``kgroup groups`` on share groups (KIP-932) against a real broker.

Live share members (:class:`share_helpers.ShareDriver`) hold the assignment and
acknowledge part of what they fetched, so the start offset and the lag the
commands show are not trivial. The CLI runs in a subprocess, from a worker
thread, so that the members keep heartbeating on the event loop meanwhile.

The broker is shared with other tests: the assertions look at this test's own
groups inside a listing, never at its length.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from helpers import run_python
from share_helpers import ShareDriver, produce_records

from kgroup.admin import group_configs
from kgroup.dataplane.share.acknowledgements import AcknowledgeType
from kgroup.dataplane.share.records import ShareRecord
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic
from kgroup.transport.client import KafkaClient
from kgroup.types import TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

# Joining takes two heartbeats (the broker assigns between them, 5 s apart by default).
WAIT = 60.0
PRODUCED = 10
ACCEPTED = 6


@pytest.fixture
def anyio_backend() -> str:
    # What is tested is the command (a subprocess); the members' loop is scaffolding.
    return "asyncio"


def kgroup_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    return run_python("-m", "kgroup.cli", *args, env=env, timeout=120)


async def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command, run from a worker thread: the members' heartbeats go on meanwhile."""
    return await anyio.to_thread.run_sync(functools.partial(kgroup_cli, bootstrap, *args))


async def cli_json(bootstrap: str, *args: str) -> Any:
    done = await cli(bootstrap, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def until(condition: Callable[[], Any], what: str, seen: list[Any] | None = None) -> None:
    """Poll the async ``condition`` (a coroutine factory) until it is true, or fail."""
    with anyio.move_on_after(WAIT):
        while not await condition():
            await anyio.sleep(0.5)  # the interval between two looks, not a synchronisation
        return
    pytest.fail(f"not within {WAIT} s: {what}; last seen: {(seen or [])[-2:]}")


async def test_describe_and_lag_show_members_start_offset_and_lag(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=1), make_group_id("share")
    produce_records(bootstrap, topic, [(None, f"r{i}".encode(), None) for i in range(PRODUCED)])
    done = await cli(
        bootstrap,
        "groups",
        "configure",
        group,
        "--set",
        "share.auto.offset.reset=earliest",
        # The longest lock the broker allows: the commands below take a while.
        "--set",
        "share.record.lock.duration.ms=60000",
    )
    assert done.returncode == 0, done.stderr
    assert f"Group {group}: set share.auto.offset.reset=earliest" in done.stdout

    async with KafkaClient(bootstrap) as client, anyio.create_task_group() as tasks:
        driver = ShareDriver(client, group)
        tasks.start_soon(driver.run, [topic])
        with anyio.fail_after(WAIT):
            await driver.wait_until(lambda: TopicPartition(topic, 0) in driver.fetching)
            got: list[ShareRecord] = []
            while len(got) < PRODUCED:
                got += await driver.fetch()
        # The first records accepted, the rest still acquired (in flight): they alone
        # count as lag.
        driver.acknowledge(sorted(got, key=lambda r: r.offset())[:ACCEPTED], AcknowledgeType.ACCEPT)
        outcome = await driver.commit()
        assert outcome
        assert all(o.succeeded for o in outcome), outcome

        described: dict[str, Any] = {}
        looks: list[Any] = []

        async def settled() -> bool:
            described.update(await cli_json(bootstrap, "groups", "describe", group))
            parts = described["partitions"]
            looks.append(parts)
            return bool(parts) and parts[0]["lag"] == PRODUCED - ACCEPTED

        # The broker counts acknowledged records out of the lag at once, but persists
        # the start offset past them lazily (with a later state write): the start
        # offset is 0 or 6 here, whichever write the coordinator has seen.
        await until(settled, "the accepted records out of the lag", looks)
        assert described["group_type"] == "share"
        assert described["state"] == "Stable"
        assert described["group_epoch"] >= 1
        assert described["assignment_epoch"] >= 1
        (member,) = described["members"]
        assert member["member_id"] == driver.member.member_id
        assert member["protocol"] == "share"
        assert member["member_epoch"] >= 1
        assert member["subscribed_topics"] == [topic]
        assert member["assignment"] == [{"topic": topic, "partition": 0}]
        assert member["client_host"]
        (part,) = described["partitions"]
        assert part["partition"] == {"topic": topic, "partition": 0}
        assert part["start_offset"] in (0, ACCEPTED)
        assert part["log_end"] == PRODUCED
        assert part["lag"] == PRODUCED - ACCEPTED
        assert described["total_lag"] == PRODUCED - ACCEPTED

        text = (await cli(bootstrap, "groups", "describe", group)).stdout
        assert f"Group {group}: share group, state Stable" in text
        assert f"1 member(s), total lag {PRODUCED - ACCEPTED}" in text
        assert driver.member.member_id in text
        assert f"{topic}:0" in text
        assert "START-OFFSET" in text

        lag = await cli_json(bootstrap, "groups", "lag", group)
        assert lag["group"]["group_id"] == group
        assert [(p["log_end"], p["lag"]) for p in lag["partitions"]] == [
            (PRODUCED, PRODUCED - ACCEPTED)
        ]
        assert lag["total"] == PRODUCED - ACCEPTED
        text = (await cli(bootstrap, "groups", "lag", group)).stdout
        summary = f"Group {group}: share group, state Stable, 1 member(s), total lag"
        assert f"{summary} {PRODUCED - ACCEPTED}" in text

        listed = {g["group_id"]: g for g in await cli_json(bootstrap, "groups", "list")}
        assert listed[group]["group_type"] == "share"
        assert listed[group]["state"] == "Stable"
        only_share = await cli_json(bootstrap, "groups", "list", "--type", "share")
        assert group in {g["group_id"] for g in only_share}
        assert {g["group_type"] for g in only_share} == {"share"}

        every = {
            g["group_id"]: g
            for g in await cli_json(bootstrap, "groups", "describe", "--all-groups")
        }
        assert every[group]["group_type"] == "share"
        assert every[group]["partitions"][0]["lag"] == PRODUCED - ACCEPTED
        lags = {
            g["group"]["group_id"]: g
            for g in await cli_json(bootstrap, "groups", "lag", "--all-groups")
        }
        assert lags[group]["total"] == PRODUCED - ACCEPTED

        # The rest accepted too: nothing left. The commands above may have outlasted
        # the records' locks: records released meanwhile come back and are accepted.
        driver.acknowledge(sorted(got, key=lambda r: r.offset())[ACCEPTED:], AcknowledgeType.ACCEPT)
        await driver.commit()

        seen: list[Any] = []

        async def drained() -> bool:
            driver.acknowledge(await driver.fetch(), AcknowledgeType.ACCEPT)
            seen.append(await driver.commit())
            lag = await cli_json(bootstrap, "groups", "lag", group)
            seen.append(lag["partitions"])
            # The start offset lags the acknowledgements (see above): only the lag is exact.
            (part,) = lag["partitions"]
            return bool(lag["total"] == 0 and part["lag"] == 0)

        await until(drained, "no lag once every record is accepted", seen)
        with anyio.fail_after(WAIT):
            await driver.close()
        tasks.cancel_scope.cancel()
    assert driver.fatal == []


async def test_configure_sets_and_deletes_share_configs_and_reports_refusals(
    kafka_broker: KafkaBroker, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    group = make_group_id("share-config")
    done = await cli(
        bootstrap,
        "groups",
        "configure",
        group,
        "--set",
        "share.auto.offset.reset=earliest",
        "--set",
        "share.record.lock.duration.ms=20000",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "group_id": group,
        "changes": {
            "share.auto.offset.reset": "earliest",
            "share.record.lock.duration.ms": "20000",
        },
    }
    async with KafkaClient(bootstrap) as client:
        configs = await group_configs(client, group)
        assert configs["share.auto.offset.reset"].value == "earliest"
        assert configs["share.record.lock.duration.ms"].value == "20000"

        done = await cli(
            bootstrap, "groups", "configure", group, "--delete", "share.auto.offset.reset"
        )
        assert done.returncode == 0, done.stderr
        assert "deleted share.auto.offset.reset" in done.stdout
        configs = await group_configs(client, group)
        assert configs["share.auto.offset.reset"].value == "latest"  # the broker's default
        assert configs["share.record.lock.duration.ms"].value == "20000"

        # Refusals: the broker's reason, exit 2, and nothing applied.
        for setting, named in (
            ("share.no.such.key=1", "share.no.such.key"),
            ("share.record.lock.duration.ms=500", "share.record.lock.duration.ms"),  # < any floor
            ("share.auto.offset.reset=sometimes", "share.auto.offset.reset"),
        ):
            done = await cli(bootstrap, "groups", "configure", group, "--set", setting)
            assert done.returncode == 2, (setting, done.stdout, done.stderr)
            assert "the broker refused" in done.stderr
            assert named in done.stderr
            assert "Traceback" not in done.stderr
        configs = await group_configs(client, group)
        assert configs["share.record.lock.duration.ms"].value == "20000"
        assert configs["share.auto.offset.reset"].value == "latest"

    for args in (("--set", "no-equals-sign"), ()):
        done = await cli(bootstrap, "groups", "configure", group, *args)
        assert done.returncode == 2
        assert "KEY=VALUE" in done.stderr or "nothing to change" in done.stderr


async def test_describe_shows_members_sharing_one_partition(
    kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = make_topic(partitions=1), make_group_id("share-two")
    async with KafkaClient(bootstrap) as client, anyio.create_task_group() as tasks:
        drivers = [ShareDriver(client, group) for _ in range(2)]
        for driver in drivers:
            tasks.start_soon(driver.run, [topic])
        with anyio.fail_after(WAIT):
            for driver in drivers:
                await driver.wait_until(
                    lambda d=driver: TopicPartition(topic, 0) in d.fetching  # type: ignore[misc]
                )
        described = await cli_json(bootstrap, "groups", "describe", group)
        # More members than partitions: both hold the one partition (a share group's
        # assignment is not exclusive).
        assert {m["member_id"] for m in described["members"]} == {
            d.member.member_id for d in drivers
        }
        for member in described["members"]:
            assert member["assignment"] == [{"topic": topic, "partition": 0}]
        text = (await cli(bootstrap, "groups", "describe", group)).stdout
        assert "2 member(s)" in text
        assert text.count(f"{topic}:0") == 2
        with anyio.fail_after(WAIT):
            for driver in drivers:
                await driver.close()
        tasks.cancel_scope.cancel()
    for driver in drivers:
        assert driver.fatal == []
