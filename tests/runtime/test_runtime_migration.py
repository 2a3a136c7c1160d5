"""Migration between protocols as the runtime sees it, through the fake broker (asyncio and trio).

The fake broker does not convert groups; what it checks here is what the
runtime makes of the coordinator's answers during a migration.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from kgroup import AsyncConsumer
from kgroup.errors import GroupIdNotFoundError, UpgradeRefusedError
from kgroup.protocol import ApiKey
from kgroup.testing.fake import FakeBroker, SeenRequest
from kgroup.testing.fake._errors import error_response

from .helpers import consumer_config, drive

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
