"""One look at the group for the liveness watch (:mod:`kgroup.runtime.liveness`)."""

from __future__ import annotations

import anyio

# Imported with the runtime, not at the first look: that look comes 30 s after
# the member settled, and loading the describe code and kio's
# ConsumerGroupDescribe schemas then held the event loop (and, through the
# GIL, the application's thread) for 12-20 ms in the middle of a running
# member. At start-up it is about 8 ms more of the consumer's import.
from kgroup.admin import _consumer_group
from kgroup.errors import AuthorizationError, KgroupError
from kgroup.protocol import apis
from kgroup.runtime._log import log
from kgroup.runtime.interfaces import TransportInterface
from kgroup.runtime.liveness import NOTHING_SEEN, Look

__all__ = ["look_at_group"]

_DESCRIBE = apis.ApiKey.CONSUMER_GROUP_DESCRIBE
# The newest version is what a Kafka 4 broker negotiates; an older one loads
# its own modules at its first look.
apis.request_module(_DESCRIBE, apis.SUPPORTED_VERSIONS[_DESCRIBE].max)
apis.response_module(_DESCRIBE, apis.SUPPORTED_VERSIONS[_DESCRIBE].max)


async def look_at_group(
    client: TransportInterface, group_id: str, member_id: str, timeout: float
) -> tuple[Look | None, bool]:
    """Describe the group and its topics: what the look saw, and whether to look again.

    The look is None when ``client`` cannot describe groups (a test transport);
    a failed look counts as :data:`~kgroup.runtime.liveness.NOTHING_SEEN` (the
    next comes after the quiet wait).
    """
    from kgroup.transport import KafkaClient  # noqa: PLC0415

    if not isinstance(client, KafkaClient):
        return None, False
    try:
        with anyio.fail_after(2 * timeout):
            # A consumer group first: the classic and share describes (and every
            # other group tool) are imported only for a group that is not one.
            consumer = await _consumer_group.describe_consumer(client, group_id)
            if consumer is not None:
                group = _consumer_group.consumer_description(*consumer)
            else:
                from kgroup.admin.groups import describe_other_group_once  # noqa: PLC0415

                group = await describe_other_group_once(client, group_id)
            topics = sorted({t for m in group.members for t in m.subscribed_topics})
            meta = await client.metadata(topics, timeout=timeout)
    except AuthorizationError as exc:
        # Describing the group needs DESCRIBE on it, which a consumer's
        # principal may lack: this member stops looking, it still consumes.
        log.info("group %s: not looking at the group's assignment: %s", group_id, exc)
        return NOTHING_SEEN, False
    except (KgroupError, TimeoutError) as exc:
        log.info("group %s: could not look at the group's assignment: %s", group_id, exc)
        return NOTHING_SEEN, True
    counts = {name: t.partition_count for name, t in meta.topics.items()}
    return Look.of(group, counts, member_id), True
