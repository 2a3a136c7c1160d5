"""kgroup.offsets against a scripted coordinator: epoch-aware retries and ownership filtering."""

from __future__ import annotations

import datetime
import logging
import pickle
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import pytest
from kio.schema.errors import ErrorCode

from kgroup.errors import (
    FencedMemberEpochError,
    KgroupError,
    LogTruncationError,
    RequestTimeoutError,
    UnknownTopicOrPartitionError,
)
from kgroup.offsets import (
    CommittedBook,
    EpochBook,
    MemberView,
    OffsetManager,
    Truncation,
    check_truncation,
    truncations,
)
from kgroup.protocol import SUPPORTED_VERSIONS, ApiKey, NegotiatedVersions, VersionRange, negotiate
from kgroup.protocol.cluster import PartitionInfo
from kgroup.protocol.requests.offset_for_leader_epoch import EpochEnd
from kgroup.transport import Backoff, ClusterMetadata, TopicInfo
from kgroup.types import TopicPartition

pytestmark = pytest.mark.anyio

TOPIC = "orders"
TOPIC_ID = uuid.UUID("3f1e7d0a-0000-4000-8000-000000000002")
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    backend: str = request.param
    return backend


def _versions(commit: int, fetch: int) -> NegotiatedVersions:
    broker: dict[int, VersionRange] = {int(api): rng for api, rng in SUPPORTED_VERSIONS.items()}
    versions = negotiate(broker)
    chosen = dict(versions.chosen)
    chosen[ApiKey.OFFSET_COMMIT] = commit
    chosen[ApiKey.OFFSET_FETCH] = fetch
    return NegotiatedVersions(broker=versions.broker, chosen=chosen)


class ScriptedCoordinator:
    """Answers OffsetCommit / OffsetFetch with scripted per-partition error codes."""

    def __init__(self, versions: NegotiatedVersions, answers: list[dict[int, int]]) -> None:
        self.versions = versions
        self.answers = answers  # per call: partition -> error code (missing: success)
        self.requests: list[Any] = []
        self.cluster = ClusterMetadata(
            topics={TOPIC: TopicInfo(name=TOPIC, topic_id=TOPIC_ID, partitions={})}
        )
        self.stale_marks = 0
        self.described: list[list[str]] = []
        self.broker_cluster: ClusterMetadata | None = None
        """What a metadata request finds, when it differs from the cached ``cluster``."""

    async def metadata(
        self, topics: Any = None, *, timeout: float | None = None
    ) -> ClusterMetadata:
        self.described.append(list(topics or ()))
        if self.broker_cluster is not None:
            self.cluster = self.broker_cluster
        return self.cluster

    def mark_coordinator_stale(self, group_id: str) -> None:
        self.stale_marks += 1

    async def coordinator_request(
        self, group_id: str, build: Callable[[NegotiatedVersions], Any], *, timeout: float
    ) -> Any:
        request = build(self.versions)
        self.requests.append(request)
        codes = self.answers.pop(0) if self.answers else {}
        api = ApiKey(int(request.__api_key__))
        module: Any = self.versions.response_module(api)
        by_id = request.__version__ >= 10
        if api is ApiKey.OFFSET_COMMIT:
            topics = tuple(
                module.OffsetCommitResponseTopic(
                    **({"topic_id": t.topic_id} if by_id else {"name": t.name}),
                    partitions=tuple(
                        module.OffsetCommitResponsePartition(
                            partition_index=p.partition_index,
                            error_code=ErrorCode(codes.get(p.partition_index, 0)),
                        )
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            )
            return module.OffsetCommitResponse(throttle_time=datetime.timedelta(0), topics=topics)
        group = request.groups[0]
        return module.OffsetFetchResponse(
            throttle_time=datetime.timedelta(0),
            groups=(
                module.OffsetFetchResponseGroup(
                    group_id=group.group_id,
                    error_code=ErrorCode(codes.get(-1, 0)),
                    topics=tuple(
                        module.OffsetFetchResponseTopics(
                            **({"topic_id": t.topic_id} if by_id else {"name": t.name}),
                            partitions=tuple(
                                module.OffsetFetchResponsePartitions(
                                    partition_index=p,
                                    committed_offset=100 + p if p == 0 else -1,
                                    committed_leader_epoch=7 if p == 0 else -1,
                                    metadata=None,
                                    error_code=ErrorCode(codes.get(p, 0)),
                                )
                                for p in t.partition_indexes
                            ),
                        )
                        for t in group.topics
                    ),
                ),
            ),
        )


class Member:
    def __init__(self, epoch: int, owned: set[TopicPartition]) -> None:
        self.epoch = epoch
        self.owned = owned

    def view(self) -> MemberView:
        return MemberView(
            member_id=lambda: "m", member_epoch=lambda: self.epoch, owned=lambda: self.owned
        )


def _manager(coordinator: ScriptedCoordinator, member: Member) -> OffsetManager:
    return manager_for(coordinator, member.view())


def manager_for(coordinator: ScriptedCoordinator, view: MemberView) -> OffsetManager:
    """An offset manager of group ``g`` talking to ``coordinator``, with fast retries."""
    return OffsetManager(
        coordinator,  # type: ignore[arg-type]
        "g",
        view,
        backoff=Backoff(initial=0.001, maximum=0.002),
        request_timeout=1.0,
    )


def _sent_partitions(request: Any) -> set[int]:
    return {p.partition_index for t in request.topics for p in t.partitions}


@pytest.mark.parametrize(("commit_version", "by_id"), [(9, False), (10, True)])
async def test_stale_epoch_commit_is_retried_with_the_new_epoch_for_owned_partitions_only(
    anyio_backend: str, commit_version: int, by_id: bool
) -> None:
    member = Member(epoch=3, owned={P0, P1})
    stale = int(ErrorCode.stale_member_epoch)
    coordinator = ScriptedCoordinator(_versions(commit_version, 10), [{0: stale, 1: stale}])
    manager = _manager(coordinator, member)

    original = coordinator.coordinator_request

    async def bump_then_answer(group_id: str, build: Any, *, timeout: float) -> Any:
        response = await original(group_id, build, timeout=timeout)
        if len(coordinator.requests) == 1:
            # While the first attempt was in flight the epoch moved on and P1 was revoked.
            member.epoch = 4
            member.owned = {P0}
        return response

    coordinator.coordinator_request = bump_then_answer  # type: ignore[method-assign]
    done = await manager.commit({P0: 10, P1: 20}, deadline=anyio.current_time() + 5)
    assert done == {P0: 10}
    first, second = coordinator.requests
    assert (first.generation_id_or_member_epoch, _sent_partitions(first)) == (3, {0, 1})
    assert (second.generation_id_or_member_epoch, _sent_partitions(second)) == (4, {0})
    topic = second.topics[0]
    assert (topic.topic_id if by_id else topic.name) == (TOPIC_ID if by_id else TOPIC)


async def test_commit_of_partitions_not_owned_sends_nothing(anyio_backend: str) -> None:
    coordinator = ScriptedCoordinator(_versions(10, 10), [])
    manager = _manager(coordinator, Member(epoch=3, owned={P0}))
    assert await manager.commit({P1: 5}, deadline=anyio.current_time() + 1) == {}
    assert coordinator.requests == []


async def test_commit_fails_typed_on_a_fencing_error(anyio_backend: str) -> None:
    fenced = int(ErrorCode.fenced_member_epoch)
    coordinator = ScriptedCoordinator(_versions(10, 10), [{0: fenced}])
    manager = _manager(coordinator, Member(epoch=3, owned={P0}))
    with pytest.raises(FencedMemberEpochError):
        await manager.commit({P0: 5}, deadline=anyio.current_time() + 1)


async def test_commit_gives_up_at_its_deadline(anyio_backend: str) -> None:
    load = int(ErrorCode.coordinator_load_in_progress)
    coordinator = ScriptedCoordinator(_versions(10, 10), [{0: load}] * 1000)
    manager = _manager(coordinator, Member(epoch=3, owned={P0}))
    with pytest.raises(RequestTimeoutError):
        await manager.commit({P0: 5}, deadline=anyio.current_time() + 0.2)


@pytest.mark.parametrize("fetch_version", [9, 10])
async def test_fetch_retries_unstable_and_stale_then_reports_offsets(
    anyio_backend: str, fetch_version: int
) -> None:
    answers = [{0: int(ErrorCode.unstable_offset_commit)}, {-1: int(ErrorCode.stale_member_epoch)}]
    coordinator = ScriptedCoordinator(_versions(10, fetch_version), answers)
    manager = _manager(coordinator, Member(epoch=3, owned={P0, P1}))
    result = await manager.fetch([P0, P1], deadline=anyio.current_time() + 5)
    assert result == {P0: 100, P1: None}
    assert len(coordinator.requests) == 3
    request = coordinator.requests[-1]
    assert request.require_stable
    assert (request.groups[0].member_id, request.groups[0].member_epoch) == ("m", 3)


async def test_a_members_fetch_at_a_generation_just_left_is_retried(anyio_backend: str) -> None:
    # A classic member of a converted group: ILLEGAL_GENERATION for a generation the
    # group left between the SyncGroup and the fetch (seen in a CI roll: the
    # member's application died of it); the next attempt carries the new one.
    coordinator = ScriptedCoordinator(_versions(10, 10), [{-1: int(ErrorCode.illegal_generation)}])
    manager = _manager(coordinator, Member(epoch=3, owned={P0, P1}))
    result = await manager.fetch([P0, P1], deadline=anyio.current_time() + 5)
    assert result == {P0: 100, P1: None}
    assert len(coordinator.requests) == 2


async def test_fetch_stops_when_no_longer_wanted(anyio_backend: str) -> None:
    stale = int(ErrorCode.stale_member_epoch)
    coordinator = ScriptedCoordinator(_versions(10, 10), [{-1: stale}] * 1000)
    manager = _manager(coordinator, Member(epoch=3, owned={P0}))
    calls = 0

    def wanted() -> bool:
        nonlocal calls
        calls += 1
        return calls < 3

    assert await manager.fetch([P0], deadline=anyio.current_time() + 5, wanted=wanted) == {}


async def test_retry_drops_a_partition_lost_and_reassigned_since_the_commit_began(
    anyio_backend: str,
) -> None:
    # The member owns P0 and P1; the first attempt is stale. Before the retry
    # P1 is lost (fenced) and assigned back: it is owned again, but the offset
    # in hand predates the loss, and another member may have committed past it.
    member = Member(epoch=3, owned={P0, P1})
    tenure = {P0: 0, P1: 0}
    view = MemberView(
        member_id=lambda: "m",
        member_epoch=lambda: member.epoch,
        owned=lambda: member.owned,
        tenure=lambda tp: tenure.get(tp, 0),
    )
    stale = int(ErrorCode.stale_member_epoch)
    coordinator = ScriptedCoordinator(_versions(10, 10), [{0: stale, 1: stale}])
    manager = manager_for(coordinator, view)
    original = coordinator.coordinator_request

    async def lose_and_regain_p1(group_id: str, build: Any, *, timeout: float) -> Any:
        response = await original(group_id, build, timeout=timeout)
        if len(coordinator.requests) == 1:
            member.epoch = 5
            tenure[P1] += 1  # left the assignment once, and is back
        return response

    coordinator.coordinator_request = lose_and_regain_p1  # type: ignore[method-assign]
    done = await manager.commit({P0: 10, P1: 20}, deadline=anyio.current_time() + 5)
    assert done == {P0: 10}
    first, second = coordinator.requests
    assert _sent_partitions(first) == {0, 1}
    assert (second.generation_id_or_member_epoch, _sent_partitions(second)) == (5, {0})


NEW_TOPIC_ID = uuid.UUID("3f1e7d0a-0000-4000-8000-000000000003")
UNKNOWN_ID = int(ErrorCode.unknown_topic_id)


def _topic_recreated(coordinator: ScriptedCoordinator) -> None:
    """The topic was deleted and created again: the broker knows it by a new id only."""
    coordinator.broker_cluster = ClusterMetadata(
        topics={TOPIC: TopicInfo(name=TOPIC, topic_id=NEW_TOPIC_ID, partitions={})}
    )


def _topic_deleted(coordinator: ScriptedCoordinator) -> None:
    coordinator.broker_cluster = ClusterMetadata(topic_errors={TOPIC: 3})


def _sent_topic_ids(request: Any) -> set[uuid.UUID]:
    topics = request.topics if hasattr(request, "topics") else request.groups[0].topics
    return {t.topic_id for t in topics}


async def test_commit_to_a_recreated_topic_describes_it_again_and_uses_its_new_id(
    anyio_backend: str,
) -> None:
    # Regression: a classic member's cached metadata kept the deleted topic's
    # id, every v10 commit was refused UNKNOWN_TOPIC_ID, and the first refusal
    # was raised as final.
    coordinator = ScriptedCoordinator(_versions(10, 10), [{0: UNKNOWN_ID, 1: UNKNOWN_ID}])
    _topic_recreated(coordinator)
    manager = _manager(coordinator, Member(epoch=3, owned={P0, P1}))
    done = await manager.commit({P0: 10, P1: 20}, deadline=anyio.current_time() + 5)
    assert done == {P0: 10, P1: 20}
    first, second = coordinator.requests
    assert (_sent_topic_ids(first), _sent_topic_ids(second)) == ({TOPIC_ID}, {NEW_TOPIC_ID})
    assert coordinator.described == [[TOPIC]]


def _fetched_from_the_old_topic(told: list[frozenset[TopicPartition]], **extra: Any) -> MemberView:
    """A member owning P0 and P1, which it started fetching under TOPIC_ID."""
    return MemberView(
        member_id=lambda: "m",
        member_epoch=lambda: 3,
        owned=lambda: {P0, P1},
        fetched_topic_id=lambda _tp: TOPIC_ID,
        topic_recreated=told.append,
        **extra,
    )


@pytest.mark.parametrize("cached", ["old id", "new id"])
async def test_commit_of_positions_read_before_the_topic_was_recreated_leaves_them_out(
    anyio_backend: str, cached: str
) -> None:
    # The member started fetching orders under TOPIC_ID. Either its metadata
    # still holds that id (the broker refuses it and the topic is described
    # again) or a refresh since holds the new one: either way the positions
    # are not committed under the new id, and the member is told to fetch the
    # partitions anew.
    answers = [{0: UNKNOWN_ID, 1: UNKNOWN_ID}] if cached == "old id" else []
    coordinator = ScriptedCoordinator(_versions(10, 10), answers)
    _topic_recreated(coordinator)
    if cached == "new id":
        await coordinator.metadata([TOPIC])
    told: list[frozenset[TopicPartition]] = []
    manager = manager_for(coordinator, _fetched_from_the_old_topic(told))
    assert await manager.commit({P0: 10, P1: 20}, deadline=anyio.current_time() + 5) == {}
    assert told == [frozenset({P0, P1})]
    sent = [_sent_topic_ids(r) for r in coordinator.requests]
    assert sent == ([{TOPIC_ID}] if cached == "old id" else [])


async def test_commit_to_a_deleted_topic_leaves_it_out_without_retrying_to_the_deadline(
    anyio_backend: str,
) -> None:
    coordinator = ScriptedCoordinator(_versions(10, 10), [{0: UNKNOWN_ID}] * 1000)
    _topic_deleted(coordinator)
    manager = _manager(coordinator, Member(epoch=3, owned={P0}))
    assert await manager.commit({P0: 10}, deadline=anyio.current_time() + 5) == {}
    assert len(coordinator.requests) == 1
    assert coordinator.described == [[TOPIC]]


async def test_commit_by_name_describes_a_topic_whose_offsets_lie_past_the_fetched_log_first(
    anyio_backend: str,
) -> None:
    # OffsetCommit v9 (Kafka 4.0, 4.1) names topics: the broker would take the
    # old position for the new topic. A position past the end of the log the
    # data plane fetched has the topic described before the first attempt.
    coordinator = ScriptedCoordinator(_versions(9, 9), [])
    _topic_recreated(coordinator)
    told: list[frozenset[TopicPartition]] = []
    view = _fetched_from_the_old_topic(
        told, beyond_log_end=lambda offsets: {tp.topic for tp, o in offsets.items() if o > 3}
    )
    manager = manager_for(coordinator, view)
    assert await manager.commit({P0: 20, P1: 20}, deadline=anyio.current_time() + 5) == {}
    assert (coordinator.described, coordinator.requests) == ([[TOPIC]], [])
    assert told == [frozenset({P0, P1})]


async def test_commit_of_a_partition_the_topic_does_not_have_fails_at_once_naming_it(
    anyio_backend: str,
) -> None:
    # UNKNOWN_TOPIC_OR_PARTITION has the topic described again (it may be
    # gone); a topic that exists without the partition is no case for retrying.
    unknown = int(ErrorCode.unknown_topic_or_partition)
    coordinator = ScriptedCoordinator(_versions(9, 9), [{5: unknown}] * 1000)
    p0 = PartitionInfo(partition=0, leader=1, leader_epoch=0, replicas=(1,), isr=(1,))
    coordinator.broker_cluster = ClusterMetadata(
        topics={TOPIC: TopicInfo(name=TOPIC, topic_id=TOPIC_ID, partitions={0: p0})}
    )
    p5 = TopicPartition(TOPIC, 5)
    manager = _manager(coordinator, Member(epoch=3, owned={p5}))
    with pytest.raises(UnknownTopicOrPartitionError, match="orders-5 does not exist"):
        await manager.commit({p5: 10}, deadline=anyio.current_time() + 5)
    assert len(coordinator.requests) == 1


async def test_a_deleted_topic_is_warned_of_once_while_commits_leave_it_out(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A classic member keeps a deleted topic's partitions until a rebalance
    # (minutes): every auto-commit leaves them out, one WARNING says so.
    unknown = int(ErrorCode.unknown_topic_or_partition)
    coordinator = ScriptedCoordinator(_versions(9, 9), [{0: unknown}] * 2)
    _topic_deleted(coordinator)
    manager = _manager(coordinator, Member(epoch=3, owned={P0}))
    with caplog.at_level(logging.DEBUG, logger="kgroup.offsets"):
        for _ in range(2):
            assert await manager.commit({P0: 10}, deadline=anyio.current_time() + 5) == {}
    said = [r.levelno for r in caplog.records if "no longer exists (deleted)" in r.getMessage()]
    assert said == [logging.WARNING, logging.DEBUG]
    assert len(coordinator.requests) == 2


async def test_fetch_from_a_recreated_topic_describes_it_again_and_uses_its_new_id(
    anyio_backend: str,
) -> None:
    # Regression: committed() of a recreated topic (classic member) retried the
    # old id until its deadline and raised RequestTimeoutError.
    coordinator = ScriptedCoordinator(_versions(10, 10), [{0: UNKNOWN_ID}])
    _topic_recreated(coordinator)
    manager = _manager(coordinator, Member(epoch=3, owned={P0, P1}))
    assert await manager.fetch([P0, P1], deadline=anyio.current_time() + 5) == {P0: 100, P1: None}
    first, second = coordinator.requests
    assert (_sent_topic_ids(first), _sent_topic_ids(second)) == ({TOPIC_ID}, {NEW_TOPIC_ID})


async def test_fetch_from_a_deleted_topic_has_no_committed_offset(anyio_backend: str) -> None:
    coordinator = ScriptedCoordinator(_versions(10, 10), [{0: UNKNOWN_ID}] * 1000)
    _topic_deleted(coordinator)
    manager = _manager(coordinator, Member(epoch=3, owned={P0, P1}))
    assert await manager.fetch([P0, P1], deadline=anyio.current_time() + 5) == {P0: None, P1: None}
    assert len(coordinator.requests) == 1


def test_epoch_book_knows_an_epoch_only_for_the_offset_it_was_noted_with() -> None:
    # KIP-320: an epoch is that of the record before one offset; asked about
    # another offset of the partition (the application committed less than its
    # position, or a seek moved it), the book knows nothing and -1 is sent.
    book = EpochBook()
    book.note({P0: 10, P1: 20}, {P0: 3, P1: -1})
    assert book.of({P0: 10, P1: 20}) == {P0: 3}
    assert book.of({P0: 9}) == {}
    book.note({P0: 12}, {P0: 4})
    assert book.of({P0: 12}) == {P0: 4}
    assert book.of({P0: 10}) == {}


def test_epoch_book_asks_the_live_source_for_fetching_partitions_first_hand() -> None:
    asked: list[dict[TopicPartition, int]] = []

    def live(offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        asked.append(dict(offsets))
        return {P1: 6} if offsets.get(P1) == 21 else {}

    book = EpochBook(live)
    book.note({P0: 10}, {P0: 3})
    assert book.of({P0: 10, P1: 21}) == {P0: 3, P1: 6}
    assert asked == [{P0: 10, P1: 21}]


@pytest.mark.parametrize("version", [9, 10])
async def test_committed_offsets_keep_their_leader_epoch_when_committed_again(
    anyio_backend: str, version: int
) -> None:
    # A member that commits the offset it started from (nothing consumed since)
    # hands the committed leader epoch on instead of dropping it to -1.
    coordinator = ScriptedCoordinator(_versions(version, version), [])
    manager = _manager(coordinator, Member(epoch=3, owned={P0, P1}))
    assert await manager.fetch([P0, P1], deadline=anyio.current_time() + 5) == {
        P0: 100,
        P1: None,
    }
    assert manager.leader_epochs.of({P0: 100, P1: 0}) == {P0: 7}
    await manager.commit({P0: 100, P1: 5}, deadline=anyio.current_time() + 5)
    await manager.commit({P0: 101}, deadline=anyio.current_time() + 5)
    first, second = coordinator.requests[-2:]
    assert {
        p.partition_index: p.committed_leader_epoch for t in first.topics for p in t.partitions
    } == {0: 7, 1: -1}
    assert [p.committed_leader_epoch for t in second.topics for p in t.partitions] == [-1]


def test_committed_book_knows_an_offset_only_in_the_tenure_it_was_learnt_in() -> None:
    tenure = {P0: 0, P1: 0}
    book = CommittedBook()
    book.note({P0: 10, P1: 20}, {P0: 0, P1: 0})
    assert book.changed({P0: 10, P1: 21}, tenure.__getitem__) == {P1: 21}
    # A seek back is a change as well (librdkafka commits forward moves only).
    assert book.changed({P0: 9}, tenure.__getitem__) == {P0: 9}
    # P0 left the assignment and came back: another member may have committed it since.
    tenure[P0] = 1
    assert book.changed({P0: 10, P1: 20}, tenure.__getitem__) == {P0: 10}
    # Partitions not noted with a tenure are not known.
    book.note({P0: 10}, {})
    assert book.changed({P0: 10}, tenure.__getitem__) == {P0: 10}
    book.forget({P0})
    assert book.changed({P1: 20}, tenure.__getitem__) == {P1: 20}


async def test_commits_and_fetches_leave_what_is_committed_for_owned_partitions(
    anyio_backend: str,
) -> None:
    stale = int(ErrorCode.stale_member_epoch)
    # P1's first attempt is stale and its retry succeeds; P2 is not owned.
    coordinator = ScriptedCoordinator(_versions(10, 10), [{1: stale}])
    tenure = {P0: 0, P1: 0}
    owned = {P0, P1}
    view = MemberView(
        member_id=lambda: "m",
        member_epoch=lambda: 3,
        owned=lambda: owned,
        tenure=lambda tp: tenure.get(tp, 0),
    )
    manager = manager_for(coordinator, view)
    p2 = TopicPartition(TOPIC, 2)
    done = await manager.commit({P0: 10, P1: 20, p2: 30}, deadline=anyio.current_time() + 5)
    assert done == {P0: 10, P1: 20}
    lookup = view.tenure
    assert manager.committed.changed({P0: 10, P1: 20, p2: 30}, lookup) == {p2: 30}
    # A fetch finds P0 at 100 (scripted) and nothing for P1: P0's entry is replaced.
    assert await manager.fetch([P0, P1], deadline=anyio.current_time() + 5) == {
        P0: 100,
        P1: None,
    }
    assert manager.committed.changed({P0: 100, P1: 20}, lookup) == {}
    # A fetch of a partition not owned leaves nothing: it may be assigned later,
    # after its owner committed again.
    owned.discard(P0)
    tenure[P0] = 1
    await manager.fetch([P0], deadline=anyio.current_time() + 5)
    assert manager.committed.changed({P0: 100}, lookup) == {P0: 100}


def _end(epoch: int, end: int, code: int = 0) -> EpochEnd:
    return EpochEnd(leader_epoch=epoch, end_offset=end, error_code=code)


def test_truncations_are_starts_past_the_end_of_their_epoch_on_the_leader() -> None:
    starts = {P0: 20, P1: 8}
    epochs = {P0: 0, P1: 0}
    # P0: epoch 0 ends at 10 on the leader, below 20: truncated. P1: ends at 10,
    # above 8: the offset stands.
    assert truncations(starts, epochs, {P0: _end(0, 10), P1: _end(0, 10)}) == [
        Truncation(P0, committed=20, committed_epoch=0, resume_at=10, resume_epoch=0)
    ]
    # An error or an undefined answer decides nothing; nor does a partition
    # whose epoch is not known.
    assert truncations(starts, epochs, {P0: _end(0, 10, code=74)}) == []
    assert truncations(starts, epochs, {P0: _end(-1, -1)}) == []
    assert truncations(starts, {P1: 0}, {P0: _end(0, 10)}) == []


class _EpochLeader:
    """A cluster client whose broker 1 leads ``orders`` at ``leader_epoch`` and
    answers OffsetForLeaderEpoch with ``end`` for every partition (with
    ``silent_p1``, partition 1 is led by broker 2, which never answers)."""

    def __init__(self, leader_epoch: int, end: int, *, silent_p1: bool = False) -> None:
        self.versions = negotiate({int(api): rng for api, rng in SUPPORTED_VERSIONS.items()})
        self.cluster = ClusterMetadata(
            topics={
                TOPIC: TopicInfo(
                    name=TOPIC,
                    topic_id=TOPIC_ID,
                    partitions={
                        p: PartitionInfo(
                            p,
                            leader=2 if silent_p1 and p == 1 else 1,
                            leader_epoch=leader_epoch,
                            replicas=(1,),
                            isr=(1,),
                        )
                        for p in (0, 1)
                    },
                )
            }
        )
        self.end = end
        self.sent: list[Any] = []

    async def connection(self, node_id: int) -> _EpochLeader:
        if node_id == 2:
            await anyio.sleep_forever()  # a broker that cannot be reached
        assert node_id == 1
        return self

    async def request(self, request: Any, *, timeout: float | None = None) -> Any:
        self.sent.append(request)
        module: Any = self.versions.response_module(ApiKey.OFFSET_FOR_LEADER_EPOCH)
        return module.OffsetForLeaderEpochResponse(
            throttle_time=datetime.timedelta(0),
            topics=tuple(
                module.OffsetForLeaderTopicResult(
                    topic=t.topic,
                    partitions=tuple(
                        module.EpochEndOffset(
                            error_code=ErrorCode.none,
                            partition=p.partition,
                            leader_epoch=p.leader_epoch,
                            end_offset=self.end,
                        )
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            ),
        )


async def test_check_truncation_asks_only_about_offsets_from_an_older_leader_epoch(
    anyio_backend: str,
) -> None:
    book = EpochBook()
    book.note({P0: 20, P1: 20}, {P0: 2, P1: 3})
    calm = _EpochLeader(leader_epoch=3, end=10)
    # P1's epoch is the leader's current one: nothing can have truncated it, and
    # nothing is asked; P0's epoch 2 is older: asked, and found truncated at 10.
    cuts = await check_truncation(calm, {P0: 20, P1: 20}, book, timeout=1.0)  # type: ignore[arg-type]
    assert cuts == [Truncation(P0, 20, 2, 10, 2)]
    (request,) = calm.sent
    ((partition,),) = [t.partitions for t in request.topics]
    assert (partition.partition, partition.leader_epoch, partition.current_leader_epoch) == (
        0,
        2,
        3,
    )
    # No known epoch, or a current one: no request at all.
    quiet = _EpochLeader(leader_epoch=3, end=10)
    assert await check_truncation(quiet, {P0: 5, P1: 20}, book, timeout=1.0) == []  # type: ignore[arg-type]
    assert quiet.sent == []


async def test_a_leader_that_does_not_answer_leaves_only_its_partitions_unchecked(
    anyio_backend: str,
) -> None:
    # Partition 1's leader cannot be reached: the check gives up on it after its
    # wait (here request.timeout.ms, shorter than TRUNCATION_CHECK_TIMEOUT) and
    # still reports partition 0, whose leader answered at once.
    book = EpochBook()
    book.note({P0: 20, P1: 20}, {P0: 2, P1: 2})
    client = _EpochLeader(leader_epoch=3, end=10, silent_p1=True)
    with anyio.fail_after(5):
        cuts = await check_truncation(client, {P0: 20, P1: 20}, book, timeout=0.2)  # type: ignore[arg-type]
    assert cuts == [Truncation(P0, 20, 2, 10, 2)]


def test_a_log_truncation_error_names_each_divergence_and_what_to_do() -> None:
    error = LogTruncationError((Truncation(P0, 20, 0, 10, 0), Truncation(P1, 8, 3, 5, 2)))
    assert isinstance(error, KgroupError)
    assert error.divergent_offsets == {P0: 10, P1: 5}
    assert error.partitions == {P0, P1}
    text = str(error)
    assert "auto.offset.reset=error" in text
    assert "orders-1 was committed at offset 8 (leader epoch 3)" in text
    assert "diverges from it at offset 5 (the end of leader epoch 2)" in text
    assert "seek(orders-0, 10), seek(orders-1, 5)" in text
    assert "earliest or latest" in text
    # Raised across threads and processes with its fields.
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.truncations, str(copy)) == (error.truncations, text)
