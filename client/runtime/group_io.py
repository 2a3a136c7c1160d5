"""The group requests the runtime core asks for, carried out with anyio.

Looking at the group (the liveness check), looking up a moved coordinator
again, and checking each new subscription's topics (authorization, then a
warning while one is missing) before the session sends it. The decisions are
the :class:`~kgroup.runtime.core.RuntimeCore`'s; the driver runs these as its
background tasks, as it runs :mod:`kgroup.runtime.offset_io`'s.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import anyio

from kgroup.errors import KgroupError
from kgroup.membership import CoordinatorRediscovered, SubscriptionChanged
from kgroup.runtime import core, topic_watch
from kgroup.runtime._log import log
from kgroup.runtime.group_look import look_at_group
from kgroup.runtime.interfaces import OpensConnections, SubscriptionChange
from kgroup.types import TopicPartition

if TYPE_CHECKING:
    from kgroup.protocol.cluster import ClusterMetadata
    from kgroup.runtime.choice import Session
    from kgroup.runtime.driver import Driver

__all__ = ["GroupIO"]


class GroupIO:
    """The group requests of one :class:`~kgroup.runtime.driver.Driver`."""

    def __init__(self, driver: Driver, runtime_core: core.RuntimeCore[Session]) -> None:
        self._driver = driver
        self._core = runtime_core
        # Subscription changes go through the session (metadata, regex) in the
        # order the application made them.
        self._sub_send, self._sub_recv = anyio.create_memory_object_stream[SubscriptionChange](
            math.inf
        )

    def subscribe(self, change: SubscriptionChange) -> None:
        """Queue ``change`` for :meth:`subscriptions`, after those made before it."""
        self._sub_send.send_nowait(change)

    async def look_at_group(self, session: Session) -> None:
        """Describe the group; the core decides whether the member must rejoin."""
        driver = self._driver
        look, again = await look_at_group(
            driver.client, driver.group_id, session.member_id, driver.request_timeout
        )
        self._core.liveness_on = self._core.liveness_on and again
        if look is None:
            return
        now = anyio.current_time()
        driver.execute(self._core.group_looked(now, look, current=session is driver.session))
        driver.wake()

    async def rediscover(self) -> None:
        """Look the coordinator up again (after the session's delay), then tell the member."""
        driver = self._driver
        delay = driver.session.rediscovery_delay()
        if delay:
            await anyio.sleep(delay)
        try:
            await driver.client.coordinator(driver.group_id, refresh=True)
        except KgroupError as exc:
            # The next request looks it up again and reports what fails.
            log.info("group %s: coordinator lookup failed: %s", driver.group_id, exc)
        driver.session.post(CoordinatorRediscovered())

    async def subscriptions(self) -> None:
        """Hand the queued subscription changes to the session, checking new topics first."""
        driver = self._driver
        watch: anyio.CancelScope | None = None
        async for change in self._sub_recv:
            if watch is not None:
                watch.cancel()  # the subscription it watched is gone
                watch = None
            if isinstance(change, SubscriptionChanged) and change.topics:
                self._core.topics = change.topics  # named in authorization errors
                error = await topic_watch.denied(
                    driver.client, driver.config, change.topics, driver.request_timeout
                )
                if error is not None:
                    driver.set_fatal(error)
                    return
                watch = anyio.CancelScope()
                driver.spawn(self._warn_while_missing, change.topics, watch)
                self._warm_data_plane(change.topics)
            await driver.session.subscribe(change)

    def _warm_data_plane(self, topics: frozenset[str]) -> None:
        """Have the data plane connect to the topics' leaders while the member joins."""
        dataplane = self._driver.dataplane
        if not isinstance(dataplane, OpensConnections):
            return
        partitions = one_per_leader(self._driver.client.cluster, topics)
        if partitions:
            # A worker thread: librdkafka's call blocks until the leaders answer.
            self._driver.spawn(anyio.to_thread.run_sync, dataplane.warm, partitions)

    async def _warn_while_missing(self, topics: frozenset[str], scope: anyio.CancelScope) -> None:
        driver = self._driver
        with scope:
            if await topic_watch.warn_while_missing(
                driver.client, driver.config, topics, driver.request_timeout
            ):
                driver.session.topics_appeared(topics)


def one_per_leader(cluster: ClusterMetadata, topics: frozenset[str]) -> list[TopicPartition]:
    """A partition of each of ``topics`` per leader: asking for their offsets reaches
    every broker the topics' partitions are fetched from."""
    chosen = []
    for topic in sorted(topics):
        info = cluster.topics.get(topic)
        if info is None:
            continue  # not there yet: warned about, and warmed when assigned
        seen: set[int] = set()
        for index, partition in sorted(info.partitions.items()):
            if partition.leader >= 0 and partition.leader not in seen:
                seen.add(partition.leader)
                chosen.append(TopicPartition(topic, index))
    return chosen
