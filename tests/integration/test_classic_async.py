"""kgroup.AsyncConsumer on the classic protocol, asyncio and trio (real broker)."""

from __future__ import annotations

import anyio
import pytest
from helpers import AsyncRecorder, EventLog, classic_conf, partitions_of, produce, text

from kgroup import AsyncConsumer, GroupProtocol
from kgroup.testing import KafkaBroker
from kgroup.testing.pytest_plugin import MakeGroupId, MakeTopic

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


async def test_two_async_classic_members_split_and_commit(
    anyio_backend: str, kafka_broker: KafkaBroker, make_topic: MakeTopic, make_group_id: MakeGroupId
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = make_topic(partitions=4)
    values = produce(bootstrap, topic, 4, 200)
    log = EventLog()
    conf = classic_conf(bootstrap, make_group_id(), "cooperative-sticky")
    got: list[str] = []
    async with AsyncConsumer(conf) as a, AsyncConsumer(conf) as b:
        assert a.group_protocol is GroupProtocol.CLASSIC
        a.subscribe([topic], AsyncRecorder(log, "a"))
        b.subscribe([topic], AsyncRecorder(log, "b"))
        with anyio.fail_after(30):
            while not (
                len(a.assignment()) == 2
                and len(b.assignment()) == 2
                and a.assignment() | b.assignment() == partitions_of(topic, 4)
                and set(got) >= values
            ):
                got.extend(text(m) for m in await a.consume(100, 0.1))
                got.extend(text(m) for m in await b.consume(100, 0.1))
        await a.commit()
        await b.commit()
        # Every partition committed at its end: by its owner now, or at the
        # revocation that moved it. (Each member's own commit covers only the
        # partitions it read from: a member whose first JoinGroup was put off
        # (COORDINATOR_LOAD_IN_PROGRESS) joins after the other read everything,
        # and the two partitions it is then given have nothing left to read.)
        committed = await a.committed(partitions_of(topic, 4))
        assert committed == dict.fromkeys(partitions_of(topic, 4), 50)
    log.check_handover_order()
