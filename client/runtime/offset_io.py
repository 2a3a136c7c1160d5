"""The offset requests the runtime core asks for, carried out with anyio.

Commits (the application's, the background ones and the member's), committed
offset fetches before a start of fetching, and truncation checks. The
decisions (what a commit covers, which refusals are CommitFailedError, when a
revocation may go on, where a partition starts) are the
:class:`~kgroup.runtime.core.RuntimeCore`'s.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

import anyio

from kgroup.config import GroupProtocol
from kgroup.errors import BrokerError, KgroupError, RequestTimeoutError
from kgroup.offsets import check_truncation
from kgroup.runtime import core, work
from kgroup.runtime._log import log
from kgroup.types import OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from kgroup.runtime.choice import Session
    from kgroup.runtime.driver import Driver

__all__ = ["OffsetIO"]


class OffsetIO:
    """The offset requests of one :class:`~kgroup.runtime.driver.Driver`."""

    def __init__(self, driver: Driver, runtime_core: core.RuntimeCore[Session]) -> None:
        self._driver = driver
        self._core = runtime_core
        self._background_commits_done: anyio.Event | None = None

    async def fetch_committed(self, effect: core.FetchCommitted) -> None:
        """The committed offsets a start of fetching needs; the core decides the rest."""
        offsets = self._driver.offsets
        assert offsets is not None
        fetch, ticket = self._core.fetch, effect.ticket
        committed: dict[TopicPartition, int | None] = {}
        if effect.manual:
            need = self._core.manual_fetch_needs(ticket)
            if need:
                # The truncation check asks only about offsets whose leader epoch
                # is older than the leader's current one in the metadata; metadata
                # this consumer learned before an unclean election (an earlier
                # assign()) would hide the truncation. One Metadata request per
                # assign(); the offset fetch then finds the topics known.
                await self._refresh_topics({tp.topic for tp in need})
                try:
                    # A plain read: a manual consumer is no member of the group.
                    committed = await offsets.fetch(
                        need,
                        deadline=anyio.current_time() + self._driver.request_timeout,
                        as_member=False,
                        wanted=lambda: bool(fetch.wanted(ticket)),
                    )
                except KgroupError as exc:
                    self._driver.execute(self._core.offset_fetch_failed(True, exc))
                    return
        else:
            while fetch.wanted(ticket):
                try:
                    committed = await offsets.fetch(
                        sorted(fetch.wanted(ticket)),
                        deadline=anyio.current_time() + self._driver.request_timeout,
                        wanted=lambda: bool(fetch.wanted(ticket)),
                    )
                    break
                except RequestTimeoutError as exc:
                    log.info(
                        "group %s: offset fetch timed out (%s); retrying",
                        self._driver.group_id,
                        exc,
                    )
                except BrokerError as exc:
                    self._driver.execute(self._core.offset_fetch_failed(False, exc))
                    return
        # Checked in this task (no other start of fetching overtakes it).
        for effect_ in self._core.offsets_fetched(ticket, committed):
            if isinstance(effect_, core.CheckTruncation):
                await self.check_truncation(effect_)
            else:
                self._driver.execute([effect_])

    async def check_truncation(self, effect: core.CheckTruncation) -> None:
        """Carry out a :class:`~kgroup.runtime.core.CheckTruncation`."""
        cuts = await check_truncation(
            self._driver.client,
            effect.starts,
            self._core.leader_epochs,
            timeout=self._driver.request_timeout,
            max_age=self._driver.config.metadata_max_age,
        )
        self._driver.execute(self._core.truncation_checked(effect.ticket, effect.committed, cuts))

    async def _refresh_topics(self, topics: Collection[str]) -> None:
        """Refresh the metadata of ``topics``; on failure the check uses what is known."""
        try:
            await self._driver.client.metadata(sorted(topics), timeout=self._driver.request_timeout)
        except KgroupError as exc:
            log.info(
                "group %s: metadata for %s failed: %s", self._driver.group_id, sorted(topics), exc
            )

    async def member_commit(self, effect: core.SendMemberCommit) -> None:
        """Carry out a :class:`~kgroup.runtime.core.SendMemberCommit`; tell the core how it went."""
        session = self._driver.session
        generation = session.generation_or_epoch
        error: BaseException | None = None
        started = anyio.current_time()
        offsets = dict(effect.offsets)
        try:
            assert self._driver.offsets is not None
            await self._driver.offsets.commit(offsets, deadline=effect.deadline)
        except KgroupError as exc:
            error = exc
        for done in self._core.member_commit_done(effect.token, offsets, error, generation):
            if isinstance(done, core.FinishCommit):
                self._driver.telemetry.commit_done(
                    offsets, generation, anyio.current_time() - started, error
                )
                session.commit_done(done.finished)  # the member that asked, even if switched
            else:
                self._driver.execute([done])

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int] | None,
        *,
        timeout: float | None = None,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> dict[TopicPartition, int]:
        """Commit ``offsets`` (None: the current positions) and wait for the result.

        ``metadata``: the application's string to store with some of the offsets.
        Returns what was committed (owned partitions only).
        """
        started = anyio.current_time()
        epoch = self._driver.session.generation_or_epoch
        try:
            done = await self._commit(offsets, timeout=timeout, metadata=metadata)
        except KgroupError as exc:
            tried = self._core.current_offsets() if offsets is None else offsets
            self._driver.telemetry.commit_done(tried, epoch, anyio.current_time() - started, exc)
            raise
        if done:
            self._driver.telemetry.commit_done(done, epoch, anyio.current_time() - started, None)
        return done

    async def _commit(
        self,
        offsets: Mapping[TopicPartition, int] | None,
        *,
        timeout: float | None,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> dict[TopicPartition, int]:
        chosen = self._core.current_offsets() if offsets is None else dict(offsets)
        if not chosen:
            return {}
        budget = self._driver.request_timeout if timeout is None else timeout
        deadline = anyio.current_time() + budget
        try:
            manager = await self._driver.connected(deadline)
            protocol = self._driver.session.group_protocol
            try:
                # A classic commit's REBALANCE_IN_PROGRESS is not retried: the
                # generation it carries is about to end.
                done = await manager.commit(
                    chosen,
                    deadline=deadline,
                    retry_rebalance_in_progress=protocol is not GroupProtocol.CLASSIC,
                    metadata=metadata,
                )
            except KgroupError as exc:
                refused = core.refused_commit(protocol, chosen, exc)
                if refused is None:
                    raise
                raise refused from exc
        except KgroupError as exc:
            self._driver.execute(self._core.commit_reported(chosen, exc))
            raise
        self._driver.execute(self._core.commit_reported(done, None))
        return done

    def commit_in_background(
        self,
        offsets: Mapping[TopicPartition, int] | None,
        callback: work.CommitCallback | None,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        """Start a commit; its outcome goes to ``callback`` in the application's next poll."""
        chosen = self._core.current_offsets() if offsets is None else dict(offsets)
        if not chosen:
            if callback is not None:
                self._driver.queue(work.CommitResultWork(callback, {}, None))
            return
        # Counted from here, not from when the task starts: close must wait for it either way.
        self._core.background_commit_started()
        self._driver.spawn(self._background_commit, chosen, callback, metadata)

    async def finish_background_commits(self) -> None:
        """The member closed: let asynchronous commits in flight end (as Java's close).

        An application's ``commit_async`` from the revoke callback that
        ``close()`` runs would otherwise be cancelled with the runtime, and
        everything since the previous commit redelivered. Bounded by
        ``request.timeout.ms`` (each commit is too).
        """
        if self._core.background_commits:
            done = self._background_commits_done
            if done is None or done.is_set():
                # One event per wait for zero: every waiter meanwhile shares it.
                done = self._background_commits_done = anyio.Event()
            with anyio.move_on_after(self._driver.request_timeout):
                await done.wait()

    async def _background_commit(
        self,
        offsets: dict[TopicPartition, int],
        callback: work.CommitCallback | None,
        metadata: Mapping[TopicPartition, str] | None,
    ) -> None:
        try:
            done = await self.commit(offsets, metadata=metadata)
        except KgroupError as exc:
            log.warning("group %s: asynchronous commit failed: %s", self._driver.group_id, exc)
            if callback is not None:
                self._driver.queue(work.CommitResultWork(callback, offsets, exc))
        else:
            if callback is not None:
                self._driver.queue(work.CommitResultWork(callback, done, None))
        finally:
            self._driver.execute(self._core.background_commit_ended())
            if not self._core.background_commits and self._background_commits_done is not None:
                self._background_commits_done.set()

    def auto_commit(self) -> None:
        """Interval auto-commit of the current positions (called at a service point)."""
        offsets = self._core.auto_commit_offsets()
        if offsets:
            self._driver.spawn(self._auto_commit, offsets)

    async def _auto_commit(self, offsets: dict[TopicPartition, int]) -> None:
        try:
            await self.commit(offsets, timeout=self._driver.config.auto_commit_interval_ms / 1000)
        except KgroupError as exc:
            log.warning("group %s: auto-commit failed: %s", self._driver.group_id, exc)

    async def committed(
        self, partitions: Collection[TopicPartition], *, timeout: float
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets of ``partitions`` (None: nothing committed)."""
        if not partitions:
            # Nothing to ask (as Java's committed() of an empty set): no request,
            # so no wait for a coordinator that may not answer.
            return {}
        deadline = anyio.current_time() + timeout
        manager = await self._driver.connected(deadline)
        return await manager.fetch(list(partitions), deadline=deadline, as_member=False)

    async def committed_with_metadata(
        self, partitions: Collection[TopicPartition], *, timeout: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """:meth:`committed` with the metadata committed with each offset."""
        offsets = await self.committed(partitions, timeout=timeout)
        # Noted by that very fetch (no await since): this answer's metadata.
        offsets_manager = self._driver.offsets
        texts = {} if offsets_manager is None else offsets_manager.fetched_metadata
        return {
            tp: None if offset is None else OffsetAndMetadata(offset, texts.get(tp, ""))
            for tp, offset in offsets.items()
        }
