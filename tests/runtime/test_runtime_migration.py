"""Migration between protocols as the runtime sees it, through the fake broker (asyncio and trio).

The fake broker does not convert groups; what it checks here is what the
runtime makes of the coordinator's answers during a migration.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from kgroup import AsyncConsumer
from kgroup.config import GroupProtocol
from kgroup.dataplane import Record
from kgroup.errors import ConfigError, GroupIdNotFoundError, UpgradeRefusedError
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker, SeenRequest
from kgroup.testing.fake._errors import error_response

from .helpers import Recorder, consumer_config, drive, tps

pytestmark = pytest.mark.anyio

_DISABLED = "Cannot upgrade classic group {} to consumer group because online upgrade is disabled."
_CUSTOM = (
    "Cannot upgrade classic group {} to consumer group because an unsupported custom assignor "
    "is in use. Please refer to the documentation or switch to a default assignor before "
    "re-attempting the upgrade."
)


@pytest.mark.parametrize(
    ("said", "fix"),
    [(_DISABLED, "group.consumer.migration.policy"), (_CUSTOM, "user data")],
    ids=["policy", "custom-assignor"],
)
async def test_refused_upgrade_is_a_typed_error_naming_the_cause_and_the_fix(
    broker: FakeBroker, group_id: str, said: str, fix: str
) -> None:
    def refuse(seen: SeenRequest) -> object:
        return error_response(seen, ErrorCode.group_id_not_found, said.format(group_id))

    broker.intercept(ApiKey.CONSUMER_GROUP_HEARTBEAT, refuse, times=None)
    broker.create_topic("orders", 1)
    config = consumer_config(broker, group_id, **{"group.protocol": "consumer"})
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        with pytest.raises(UpgradeRefusedError) as info:
            await drive(consumer, until=lambda: False)
    error = info.value
    assert isinstance(error, GroupIdNotFoundError)  # what older code caught still catches it
    assert error.code == ErrorCode.group_id_not_found
    text = str(error)
    assert said.format(group_id).rstrip(".") in text  # the broker's reason
    assert fix in text  # and what to do
    assert "docs/migration.md" in text


async def test_group_id_not_found_that_is_no_refused_upgrade_stays_as_it_was(
    broker: FakeBroker, group_id: str
) -> None:
    def refuse(seen: SeenRequest) -> object:
        return error_response(seen, ErrorCode.group_id_not_found, "something else")

    broker.intercept(ApiKey.CONSUMER_GROUP_HEARTBEAT, refuse, times=None)
    broker.create_topic("orders", 1)
    config = consumer_config(broker, group_id, **{"group.protocol": "consumer"})
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"])
        with pytest.raises(GroupIdNotFoundError) as info:
            await drive(consumer, until=lambda: False)
    assert type(info.value) is GroupIdNotFoundError
    assert "something else" in str(info.value)


def _members(broker: FakeBroker, group_id: str) -> tuple[list[str], list[str]]:
    """Member ids of the fake's consumer-protocol group and of its classic group."""
    consumer = broker.consumer_group(group_id)
    classic = broker.classic_group(group_id)
    return (
        [] if consumer is None else [m for m in consumer.members],
        [] if classic is None else list(classic.members),
    )


@pytest.mark.parametrize(("start", "other"), [("consumer", "classic"), ("classic", "consumer")])
async def test_switch_protocol_releases_everything_then_joins_on_the_other_protocol(
    broker: FakeBroker, group_id: str, start: str, other: str
) -> None:
    broker.create_topic("orders", 2)
    for i in range(4):
        broker.produce("orders", i % 2, f"v{i}".encode())
    listener = Recorder()
    got: list[Record] = []
    config = consumer_config(broker, group_id, **{"group.protocol": start})
    async with AsyncConsumer(config, dataplane=broker.dataplane()) as consumer:
        consumer.subscribe(["orders"], listener=listener)
        await drive(consumer, until=lambda: len(got) == 4, sink={consumer: got})
        await consumer.commit()
        first_id = consumer.member_id
        assert consumer.group_protocol is GroupProtocol(start)

        consumer.switch_protocol(other)
        await drive(
            consumer,
            until=lambda: (
                consumer.group_protocol is GroupProtocol(other)
                and consumer.assignment() == tps("orders", 0, 1)
            ),
        )
        # Released on the old protocol (revoked, never lost), then assigned anew.
        assert listener.events == [
            ("assigned", tps("orders", 0, 1)),
            ("revoked", tps("orders", 0, 1)),
            ("assigned", tps("orders", 0, 1)),
        ]
        assert consumer.member_id != first_id
        by_protocol = dict(zip(("consumer", "classic"), _members(broker, group_id), strict=True))
        assert first_id not in by_protocol[start]  # the old member left
        assert by_protocol[other] == [consumer.member_id]
        # It goes on from the committed offsets: new records only, none again.
        for i in range(4, 6):
            broker.produce("orders", i % 2, f"v{i}".encode())
        await drive(consumer, until=lambda: len(got) == 6, sink={consumer: got})
        assert sorted(r.value() or b"" for r in got) == [f"v{i}".encode() for i in range(6)]

        # Switching to the protocol in use does nothing.
        consumer.switch_protocol(other)
        await drive(consumer, until=lambda: True)
        assert len(listener.events) == 3


async def test_switch_protocol_takes_only_consumer_or_classic(
    broker: FakeBroker, group_id: str
) -> None:
    broker.create_topic("orders", 1)
    async with AsyncConsumer(
        consumer_config(broker, group_id), dataplane=broker.dataplane()
    ) as consumer:
        with pytest.raises(RuntimeError, match="subscribe"):
            consumer.switch_protocol("classic")
        consumer.subscribe(["orders"])
        for bad in ("auto", "kip848"):
            with pytest.raises(ConfigError, match="'consumer' or 'classic'"):
                consumer.switch_protocol(bad)
