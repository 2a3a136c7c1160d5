"""Committed offsets of a new-protocol member: OffsetFetch and OffsetCommit v9+.

Both requests carry the member id and the member epoch, so the broker can
refuse a member that is behind (STALE_MEMBER_EPOCH) or gone. This module
retries what can succeed later and filters what must never be sent:

- a commit only ever covers partitions the member owns *at send time*
  (``owned()`` is asked before every attempt), so partitions revoked or lost
  while a commit waits are dropped from it, never committed;
- a commit failing with STALE_MEMBER_EPOCH is retried with the member's
  current epoch (the epoch moved on while the request was in flight), for the
  partitions still owned, until its deadline;
- OffsetFetch (require_stable) retries STALE_MEMBER_EPOCH,
  UNSTABLE_OFFSET_COMMIT and coordinator errors while the caller still wants
  the answer.

v10 of both APIs names topics by id; the version negotiated with the
coordinator decides which naming is sent. An answer of UNKNOWN_TOPIC_ID or
UNKNOWN_TOPIC_OR_PARTITION (the topic was deleted, perhaps created again with
a new id, since the client last described it) has the topic described again
before the next attempt: a topic that no longer exists is left out of a
commit (logged) and has no committed offset. A position read before its
topic was created again is never committed (:attr:`MemberView.fetched_topic_id`).

Offsets carry leader epochs (KIP-320, :class:`EpochBook`), and
:func:`check_truncation` asks partition leaders whether a committed offset
still stands in their log before a member resumes from it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Final

import anyio
from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup.error_codes import ErrorCode, Trait, codes_with
from kgroup.errors import (
    BrokerError,
    CoordinatorNotAvailableError,
    KgroupError,
    NotCoordinatorError,
    RequestTimeoutError,
    RetriableBrokerError,
    StaleMemberEpochError,
    TransportError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    broker_error,
)
from kgroup.protocol.apis import ApiKey
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests import offset_commit, offset_fetch, offset_for_leader_epoch
from kgroup.protocol.requests.offset_for_leader_epoch import EpochEnd, EpochQuery
from kgroup.transport.interface import ClusterClient
from kgroup.types import Backoff, TopicPartition, Truncation

__all__ = [
    "TRUNCATION_CHECK_TIMEOUT",
    "CommitAnswer",
    "CommitIdentity",
    "CommittedBook",
    "EpochBook",
    "MemberView",
    "OffsetManager",
    "Truncation",
    "check_truncation",
    "commit_identity",
    "fetch_error_retried",
    "judge_commit_errors",
    "recreated_partitions",
    "truncations",
    "unowned",
]

log = logging.getLogger("kgroup.offsets")

_COORDINATOR_ERRORS = (
    NotCoordinatorError,
    CoordinatorNotAvailableError,
)
# Answers after which a commit's topics are described again: a topic deleted (and
# perhaps created again under the same name, with a new id) since the client
# described it is described again before the next attempt, and left out if gone.
_UNKNOWN = codes_with(Trait.UNKNOWN_TOPIC)
# Per-partition (OffsetCommit) and per-group (OffsetFetch) codes worth another
# attempt: those of every group API (the coordinator moved or is busy), the
# unknown topics, and the offsets APIs' own.
_RETRY_CODES = (
    codes_with(Trait.COORDINATOR_MOVED)
    | codes_with(Trait.TRANSIENT)
    | _UNKNOWN
    | {
        ErrorCode.STALE_MEMBER_EPOCH,  # retried with the member's newest epoch
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.REBALANCE_IN_PROGRESS,
    }
)
# Fenced, but a rejoin gives the member a new epoch or generation. ILLEGAL_GENERATION
# is among them for a classic member of a converted group fetching at a generation
# the group just left (its member epoch moved on between the SyncGroup and the
# fetch): the consumer members' STALE_MEMBER_EPOCH, retried at the next generation.
_FENCED_CODES = codes_with(Trait.FENCED, without=Trait.FATAL)


@dataclass(frozen=True, slots=True)
class MemberView:
    """How the offset manager reads the member's current identity and ownership.

    Each is called before every attempt, so a retry uses the newest epoch and
    the newest owned set.
    """

    member_id: Callable[[], str]
    member_epoch: Callable[[], int]
    owned: Callable[[], Collection[TopicPartition]]
    instance_id: str | None = None
    tenure: Callable[[TopicPartition], int] = lambda _partition: 0
    """How many times the partition has left the member's assignment so far.

    A commit remembers each partition's tenure when it starts and drops the
    partitions whose tenure changed before a retry: a partition lost and then
    assigned again in between is owned again, but its offsets date from before
    the loss, and another member may have committed past them meanwhile.
    """
    fetched_topic_id: Callable[[TopicPartition], uuid.UUID | None] = lambda _partition: None
    """The id the partition's topic had when the member started fetching it (None: unknown).

    A topic deleted and created again under the same name has a new id, and a
    position read since comes from the old topic or is wrong for the new one:
    librdkafka's batched consume never moves a position back, so after its
    offset reset into the new, shorter log the position stays past the records
    it hands out (committed, a restart would skip them). A commit leaves such
    partitions out and reports them through :attr:`topic_recreated`.
    """
    topic_recreated: Callable[[frozenset[TopicPartition]], None] = lambda _partitions: None
    """Told of the partitions a commit left out because their topic was created again."""
    topics_deleted: Callable[[frozenset[str]], None] = lambda _topics: None
    """Told of topics a commit found deleted (once per deletion): the member still owns
    partitions of them, which a classic group's leader can hand out again at once."""
    beyond_log_end: Callable[[Mapping[TopicPartition, int]], Collection[str]] = lambda _o: ()
    """Topics of offsets past the end of the log the data plane last fetched.

    A position past the log's end is impossible but after a truncation or in
    a topic created again: a commit describes these topics first, so that
    :attr:`fetched_topic_id` can tell a new topic even where the broker takes
    commits by name (OffsetCommit v9, Kafka 4.0 and 4.1).
    """
    simple: Callable[[], bool] = lambda: False
    """True while the consumer is no group member (manual assignment).

    Its commits are a simple consumer's, as librdkafka's and Java's: member
    id "", generation / epoch -1, no instance id. The broker accepts them
    while the group has no members.
    """


class EpochBook:
    """The leader epoch of the record before an offset, per partition, where known.

    KIP-320: an offset committed with that epoch lets whoever starts from it
    check it against the partition leader's log (OffsetsForLeaderEpoch) and
    detect a truncation (an unclean leader election) instead of falling back to
    ``auto.offset.reset``, which skips records (latest) or replays the whole
    partition (earliest). An epoch belongs to one offset: asked about another
    offset of the partition, the book knows nothing (-1 goes on the wire).

    Two sources: offsets :meth:`note` d with their epochs (committed offsets as
    OffsetFetch returns them, positions captured when a partition stops), and
    ``live``, which answers for the partitions being fetched (the data plane's
    positions carry the epoch of the last record handed out).
    """

    __slots__ = ("_known", "live")

    def __init__(
        self,
        live: Callable[[Mapping[TopicPartition, int]], Mapping[TopicPartition, int]] | None = None,
    ) -> None:
        self._known: dict[TopicPartition, tuple[int, int]] = {}
        self.live = live

    def note(
        self, offsets: Mapping[TopicPartition, int], epochs: Mapping[TopicPartition, int]
    ) -> None:
        """Remember ``epochs[tp]`` as the epoch of ``offsets[tp]`` (one offset per partition)."""
        for tp, epoch in epochs.items():
            if tp in offsets and epoch >= 0:
                self._known[tp] = (offsets[tp], epoch)

    def of(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The known epoch of each offset in ``offsets``; partitions not known are left out."""
        result: dict[TopicPartition, int] = {}
        for tp, offset in offsets.items():
            known = self._known.get(tp)
            if known is not None and known[0] == offset:
                result[tp] = known[1]
        if self.live is not None:
            result.update(self.live(offsets))
        return result


class CommittedBook:
    """The offset the group has committed for each partition, where this member knows it.

    Learnt from this member's own successful commits and from the committed
    offsets it fetched, each with the partition's tenure at the time
    (:attr:`MemberView.tenure`, which moves on whenever the partition leaves
    the assignment or its topic is created again): an entry counts only while
    the tenure is unchanged, since another member may have committed the
    partition in between. While a member owns a partition nobody else commits
    it, so an offset equal to the known one is already on the broker.

    Commits of positions that the consumer makes by itself (the auto-commit
    interval, the commit before a revocation or at close) leave such offsets
    out, as librdkafka does: an idle member no longer writes the same offsets to
    ``__consumer_offsets`` every interval, a revocation of partitions nothing was
    read from since their last commit needs no round trip, and the metadata an
    application committed with an offset is not replaced by none (the Java
    client's auto-commit commits every position every time).
    """

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[TopicPartition, tuple[int, int]] = {}

    def note(
        self, offsets: Mapping[TopicPartition, int], tenures: Mapping[TopicPartition, int]
    ) -> None:
        """``offsets[tp]`` is committed, learnt while the partition had ``tenures[tp]``."""
        for tp, offset in offsets.items():
            tenure = tenures.get(tp)
            if tenure is not None:
                self._known[tp] = (offset, tenure)

    def changed(
        self, offsets: Mapping[TopicPartition, int], tenure: Callable[[TopicPartition], int]
    ) -> dict[TopicPartition, int]:
        """``offsets`` without those known to be committed already (in the current tenure)."""
        known = self._known
        return {tp: o for tp, o in offsets.items() if known.get(tp) != (o, tenure(tp))}

    def forget(self, keep: Collection[TopicPartition]) -> None:
        """Drop what is known of partitions not in ``keep`` (they left the assignment)."""
        for tp in [tp for tp in self._known if tp not in keep]:
            del self._known[tp]


def truncations(
    starts: Mapping[TopicPartition, int],
    epochs: Mapping[TopicPartition, int],
    answers: Mapping[TopicPartition, EpochEnd],
) -> list[Truncation]:
    """The partitions whose start offset lies past the end of its epoch on the leader.

    An answer with an error or an undefined epoch or offset decides nothing (the
    partition starts where it would have; the data plane's own range checks apply).
    """
    found: list[Truncation] = []
    for tp in sorted(answers):
        answer = answers[tp]
        if tp not in starts or tp not in epochs or answer.error_code != 0:
            continue
        if answer.end_offset < 0 or answer.leader_epoch < 0:
            continue
        if answer.end_offset < starts[tp]:
            found.append(
                Truncation(tp, starts[tp], epochs[tp], answer.end_offset, answer.leader_epoch)
            )
    return found


TRUNCATION_CHECK_TIMEOUT: Final = 5.0
"""Seconds :func:`check_truncation` waits for the leaders at most (``request.timeout.ms``
if shorter): the partitions of one rebalance start together, so a leader that cannot
answer must not hold up the others for long."""


async def check_truncation(
    client: ClusterClient,
    starts: Mapping[TopicPartition, int],
    leader_epochs: EpochBook,
    *,
    timeout: float,
    max_age: float | None = None,
) -> list[Truncation]:
    """Ask the partitions' leaders whether ``starts`` still stand (KIP-320).

    Only offsets whose leader epoch is known and older than the partition's
    current leader epoch are asked about (as the Java client: a log is truncated
    only by a leader change), so a member of a calm cluster sends nothing. The
    leaders are asked at once; one that has not answered within ``timeout`` (at
    most :data:`TRUNCATION_CHECK_TIMEOUT`), fails, or does not speak
    OffsetForLeaderEpoch leaves its partitions unchecked: they start at their
    committed offsets, as without the check.

    "Current" is what ``client.cluster`` says. With ``max_age``, the topics of
    those offsets whose metadata is older than that many seconds are described
    again first (within the same time limit): metadata learned before an
    unclean election shows the old leader epoch and would hide the truncation
    (the Java client's view is at most ``metadata.max.age.ms`` old too).
    """
    epochs = leader_epochs.of(starts)
    wait = min(timeout, TRUNCATION_CHECK_TIMEOUT)
    deadline = anyio.current_time() + wait
    if max_age is not None and epochs:
        await _describe_if_older(client, {tp.topic for tp in epochs}, max_age, wait)
    by_leader: dict[int, dict[TopicPartition, EpochQuery]] = {}
    for tp, epoch in epochs.items():
        topic = client.cluster.topics.get(tp.topic)
        info = None if topic is None else topic.partitions.get(tp.partition)
        if info is None or info.leader < 0 or info.leader_epoch <= epoch:
            continue
        by_leader.setdefault(info.leader, {})[tp] = EpochQuery(epoch, info.leader_epoch)
    if not by_leader:
        return []
    answers: dict[TopicPartition, EpochEnd] = {}
    wait = max(0.0, deadline - anyio.current_time())

    async def ask(leader: int, queries: dict[TopicPartition, EpochQuery]) -> None:
        try:
            connection = await client.connection(leader)
            if ApiKey.OFFSET_FOR_LEADER_EPOCH not in connection.versions.chosen:
                return
            response = await connection.request(
                offset_for_leader_epoch.build(connection.versions, queries), timeout=wait
            )
            answers.update(offset_for_leader_epoch.parse(offset_for_leader_epoch.narrow(response)))
        except KgroupError as exc:
            log.info("could not check %s for truncation: %s", sorted(queries), exc)

    with anyio.move_on_at(deadline) as scope:
        async with anyio.create_task_group() as tasks:
            for leader, queries in sorted(by_leader.items()):
                tasks.start_soon(ask, leader, queries)
    if scope.cancelled_caught:
        unanswered = sorted(tp for q in by_leader.values() for tp in q if tp not in answers)
        log.info("no truncation check for %s: no answer within %.1f s", unanswered, wait)
    return truncations(starts, epochs, answers)


async def _describe_if_older(
    client: ClusterClient, topics: set[str], max_age: float, timeout: float
) -> None:
    """Describe those of ``topics`` whose metadata is older than ``max_age`` seconds."""
    now = anyio.current_time()
    stale = sorted(
        t for t in topics if (at := client.described_at(t)) is None or now - at > max_age
    )
    if not stale:
        return
    try:
        await client.metadata(stale, timeout=timeout)
    except KgroupError as exc:
        log.info("metadata for %s failed (%s): checking truncation with what is known", stale, exc)


def recreated_partitions(
    partitions: Collection[TopicPartition],
    fetched_id: Callable[[TopicPartition], uuid.UUID | None],
    current_id: Callable[[str], uuid.UUID | None],
) -> frozenset[TopicPartition]:
    """Those of ``partitions`` whose topic's id (``current_id``) is not the one they
    were fetched from (``fetched_id``): the topic was deleted and created again.

    A nil id is no id (metadata from a broker that sends none).
    """
    recreated = set()
    for tp in partitions:
        fetched = fetched_id(tp)
        current = current_id(tp.topic)
        known = fetched is not None and fetched.int and current is not None and current.int
        if known and current != fetched:
            recreated.add(tp)
    return frozenset(recreated)


@dataclass(frozen=True, slots=True)
class CommitIdentity:
    """Who a commit is sent as: a member (id, epoch, instance id), or a simple consumer."""

    member_id: str
    epoch: int
    instance_id: str | None
    simple: bool = False

    @property
    def may_send(self) -> bool:
        """A member with no epoch yet (joining) cannot commit; a simple consumer can."""
        return self.epoch > 0 or self.simple


def commit_identity(view: MemberView) -> CommitIdentity:
    """Who the member of ``view`` commits as right now.

    A consumer with no group membership (manual assignment) commits as a simple
    consumer, as librdkafka and Java do: member id "", generation -1, no
    instance id. The broker accepts that while the group has no members.
    """
    if view.simple():
        return CommitIdentity("", -1, None, simple=True)
    return CommitIdentity(view.member_id(), view.member_epoch(), view.instance_id)


def unowned(
    offsets: Collection[TopicPartition],
    owned: Collection[TopicPartition],
    tenure: Callable[[TopicPartition], int],
    started: Mapping[TopicPartition, int],
) -> list[TopicPartition]:
    """Those of a commit's ``offsets`` it must drop: no longer owned, or owned again
    since (a tenure changed from ``started``: the offsets date from before a loss)."""
    return [tp for tp in offsets if tp not in owned or tenure(tp) != started[tp]]


@dataclass(frozen=True, slots=True)
class CommitAnswer:
    """What a commit makes of the partitions an OffsetCommit answer failed."""

    fatal: BrokerError | None
    """The error to raise (no retry makes it), or None: retry the failed partitions."""
    describe: frozenset[str]
    """Topics to describe again before the retry (not known by the id or name sent)."""
    stale: bool
    """The member's epoch moved on while the request was in flight."""


def judge_commit_errors(
    errors: Mapping[TopicPartition, BrokerError], *, retry_rebalance_in_progress: bool
) -> CommitAnswer:
    """Decide a commit's next step from an answer's per-partition ``errors`` (not empty).

    Retried: :data:`_RETRY_CODES` (REBALANCE_IN_PROGRESS only when
    ``retry_rebalance_in_progress``: an application's classic commit is not
    retried, the generation it carries is about to end); anything else is raised.
    """
    fatal = [
        e
        for e in errors.values()
        if e.code not in _RETRY_CODES
        or (e.code == ErrorCode.REBALANCE_IN_PROGRESS and not retry_rebalance_in_progress)
    ]
    return CommitAnswer(
        fatal[0] if fatal else None,
        frozenset(tp.topic for tp, e in errors.items() if e.code in _UNKNOWN),
        any(isinstance(e, StaleMemberEpochError) for e in errors.values()),
    )


def fetch_error_retried(error: BrokerError, *, as_member: bool) -> bool:
    """Whether an OffsetFetch failing with ``error`` is tried again.

    A fenced member's fetch fails until it rejoins; by then the caller no longer
    wants it or the new epoch works, so fencing is retried for a member's fetch.
    """
    fenced = error.code in _FENCED_CODES and as_member
    return error.code in _RETRY_CODES or error.retriable or fenced


@dataclass(eq=False, slots=True)
class OffsetManager:
    """Fetches and commits a group's offsets for one member, through ``client``."""

    client: ClusterClient
    group_id: str
    member: MemberView
    _: KW_ONLY
    backoff: Backoff
    request_timeout: float
    leader_epochs: EpochBook = field(default_factory=EpochBook)
    """Where commits find the leader epoch of each offset, and fetches leave it."""
    committed: CommittedBook = field(default_factory=CommittedBook)
    """Where commits and fetches of owned partitions leave the offsets now committed."""
    fetched_metadata: dict[TopicPartition, str] = field(default_factory=dict, init=False)
    """The metadata committed with each offset the latest fetch of its partition found."""
    _told_deleted: set[str] = field(default_factory=set, init=False, repr=False)
    """Deleted topics a commit has warned of (until seen again)."""

    # ------------------------------------------------------------------ commit

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        deadline: float,
        retry_rebalance_in_progress: bool = True,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> dict[TopicPartition, int]:
        """Commit ``offsets`` (next offset to read, per partition) with the member epoch.

        ``metadata``: the application's string stored with an offset (the others
        are committed with none, as the Java client's empty metadata).

        Returns the offsets committed: those of partitions still owned when
        they were sent. Partitions not owned (never, or no longer) and those of
        topics that no longer exist (deleted) are left out and logged, never
        committed.

        Raises:
            BrokerError: a partition failed with an error that retrying cannot fix
                (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, authorization ...), and
                REBALANCE_IN_PROGRESS unless ``retry_rebalance_in_progress`` (an
                application's commit on the classic protocol is not retried: the
                generation it carries is about to end).
            RequestTimeoutError: ``deadline`` passed before every owned partition
                was committed (the last retriable error is its ``__cause__``).
        """
        remaining = dict(offsets)
        tenure = {tp: self.member.tenure(tp) for tp in remaining}
        done: dict[TopicPartition, int] = {}
        retry = self._retry(deadline)
        # Topics described again before the next attempt: those an answer did
        # not know (UNKNOWN_TOPIC_ID by the id sent, UNKNOWN_TOPIC_OR_PARTITION
        # by name), and those whose offsets lie past the log the data plane
        # last fetched (a topic created again has a new, shorter log; Kafka 4.0
        # and 4.1 take commits by name, so no answer would tell).
        describe = set(self.member.beyond_log_end(remaining))
        while True:
            if describe:
                try:
                    await self._describe_again(describe, deadline)
                except (TransportError, RetriableBrokerError) as exc:
                    retry.failed(exc)
                    await retry.wait(f"commit of {sorted(remaining)}")
                    continue
                described, describe = describe, set()
                self._check_partitions_exist(tp for tp in remaining if tp.topic in described)
                deleted = sorted(self._missing(tp for tp in remaining if tp.topic in described))
                gone = {tp.topic for tp in deleted}
                self._told_deleted -= described - gone  # there again: a new deletion is news
                if deleted:
                    # A WARNING once per deletion: the member keeps a deleted topic's
                    # partitions until a rebalance, and every auto-commit would say
                    # it again.
                    news = frozenset(gone - self._told_deleted)
                    log.log(
                        logging.WARNING if news else logging.DEBUG,
                        "group %s: not committing %s: the topic no longer exists (deleted)",
                        self.group_id,
                        deleted,
                    )
                    self._told_deleted |= gone
                    if news:
                        self.member.topics_deleted(news)
                    for tp in deleted:
                        del remaining[tp]
            who = commit_identity(self.member)
            dropped = unowned(remaining, set(self.member.owned()), self.member.tenure, tenure)
            if dropped:
                log.info(
                    "group %s: not committing %s: no longer owned by this member",
                    self.group_id,
                    sorted(dropped),
                )
                for tp in dropped:
                    del remaining[tp]
            recreated = self.recreated(remaining)
            if recreated:
                log.warning(
                    "group %s: not committing %s: the topic was deleted and created again "
                    "since this consumer started fetching it; fetching it again from where "
                    "auto.offset.reset says",
                    self.group_id,
                    sorted(recreated),
                )
                for tp in recreated:
                    del remaining[tp]
                self.member.topic_recreated(recreated)
            if not remaining:
                return done
            if who.may_send:
                try:
                    errors = await self._commit_once(remaining, who.epoch, deadline, metadata)
                except (TransportError, RetriableBrokerError) as exc:
                    retry.failed(exc)
                else:
                    acked = {tp: remaining.pop(tp) for tp in list(remaining) if tp not in errors}
                    done.update(acked)
                    self.committed.note(acked, tenure)
                    if not remaining:
                        return done
                    answer = judge_commit_errors(
                        errors, retry_rebalance_in_progress=retry_rebalance_in_progress
                    )
                    if answer.fatal is not None:
                        raise answer.fatal
                    retry.failed(*errors.values())
                    describe.update(answer.describe)
                    if answer.stale:
                        log.info(
                            "group %s: commit with epoch %d was stale; retrying with the "
                            "member's new epoch for partitions still owned",
                            self.group_id,
                            who.epoch,
                        )
            await retry.wait(f"commit of {sorted(remaining)}")

    async def _commit_once(
        self,
        offsets: Mapping[TopicPartition, int],
        epoch: int,
        deadline: float,
        metadata: Mapping[TopicPartition, str] | None,
    ) -> dict[TopicPartition, BrokerError]:
        who = commit_identity(self.member)
        response, names = await self._coordinator_call(
            offsets,
            deadline,
            lambda versions, ids: offset_commit.build(
                versions,
                group_id=self.group_id,
                member_id=who.member_id,
                member_epoch=epoch,
                instance_id=who.instance_id,
                offsets=offsets,
                topic_ids=ids,
                leader_epochs=self.leader_epochs.of(offsets),
                metadata=metadata,
            ),
        )
        return offset_commit.parse(offset_commit.narrow(response), names)

    # ------------------------------------------------------------------- fetch

    async def fetch(
        self,
        partitions: Collection[TopicPartition],
        *,
        deadline: float,
        as_member: bool = True,
        wanted: Callable[[], bool] = lambda: True,
    ) -> dict[TopicPartition, int | None]:
        """The committed offset of each partition (None: nothing committed).

        With ``as_member`` the request carries the member id and epoch (the
        broker then answers STALE_MEMBER_EPOCH to an outdated epoch, retried
        with the newest one); without, it is a plain read. Retries
        STALE_MEMBER_EPOCH, UNSTABLE_OFFSET_COMMIT, coordinator and transport
        errors with backoff while ``wanted()`` and until ``deadline``. A topic
        the broker does not know by the id sent is described again; one that no
        longer exists has no committed offset (None).

        Raises:
            BrokerError: an error retrying cannot fix (authorization ...).
            RequestTimeoutError: ``deadline`` passed.
            anyio.get_cancelled_exc_class(): never; an unwanted fetch returns {}.
        """
        retry = self._retry(deadline)
        asked = partitions
        describe_again = False
        while wanted():
            epoch = self.member.member_epoch() if as_member else -1
            if not as_member or epoch > 0:
                try:
                    if describe_again:
                        # A v10 answer did not know a topic by the id sent: its id
                        # changed (deleted and created again) or it is gone, and a
                        # deleted topic's offsets are deleted with it.
                        await self._describe_again({tp.topic for tp in asked}, deadline)
                        describe_again = False
                        missing = self._missing(asked)
                        asked = [tp for tp in asked if tp not in missing]
                        if not asked:
                            return dict.fromkeys(partitions)
                    result = await self._fetch_once(asked, epoch, as_member, deadline)
                    return {tp: result.get(tp) for tp in partitions}
                except (UnknownTopicIdError, UnknownTopicOrPartitionError) as exc:
                    describe_again = True
                    retry.failed(exc)
                except BrokerError as exc:
                    if not fetch_error_retried(exc, as_member=as_member):
                        raise
                    retry.failed(exc)
                except TransportError as exc:
                    retry.failed(exc)
            await retry.wait(f"fetching committed offsets of {sorted(partitions)}")
        return {}

    async def _fetch_once(
        self,
        partitions: Collection[TopicPartition],
        epoch: int,
        as_member: bool,
        deadline: float,
    ) -> dict[TopicPartition, int | None]:
        member_id = self.member.member_id() if as_member else None
        owned = self.member.owned()
        tenure = {tp: self.member.tenure(tp) for tp in partitions if tp in owned}
        response, names = await self._coordinator_call(
            partitions,
            deadline,
            lambda versions, ids: offset_fetch.build(
                versions,
                group_id=self.group_id,
                member_id=member_id,
                member_epoch=epoch,
                partitions=partitions,
                topic_ids=ids,
            ),
        )
        narrowed = offset_fetch.narrow(response)
        result = offset_fetch.parse(narrowed, names)
        committed = {tp: o for tp, o in result.items() if o is not None}
        self.leader_epochs.note(committed, offset_fetch.committed_leader_epochs(narrowed, names))
        self.fetched_metadata.update(offset_fetch.committed_metadata(narrowed, names))
        self.committed.note(committed, tenure)
        for tp in partitions:
            result.setdefault(tp, None)
        return result

    # ----------------------------------------------------------------- helpers

    def recreated(self, partitions: Collection[TopicPartition]) -> frozenset[TopicPartition]:
        """Those of ``partitions`` whose topic's id is no longer the one they were fetched from."""
        topics = self.client.cluster.topics

        def current(topic: str) -> uuid.UUID | None:
            info = topics.get(topic)
            return None if info is None else info.topic_id

        return recreated_partitions(partitions, self.member.fetched_topic_id, current)

    async def _describe_again(self, topics: Collection[str], deadline: float) -> None:
        """Describe ``topics`` anew: they may be gone, or have a new id."""
        await self.client.metadata(sorted(topics), timeout=self._budget(deadline))

    def _check_partitions_exist(self, partitions: Iterable[TopicPartition]) -> None:
        """Raise if a partition's topic exists but has no such partition: no retry makes it.

        Raises:
            UnknownTopicOrPartitionError: naming the partition and the topic's count.
        """
        topics = self.client.cluster.topics
        for tp in partitions:
            info = topics.get(tp.topic)
            if info is not None and info.partitions and tp.partition not in info.partitions:
                raise broker_error(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"{tp} does not exist: topic {tp.topic!r} has {info.partition_count} "
                    "partitions; commit only partitions of the topic",
                )

    def _missing(self, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Those of ``partitions`` the latest metadata does not have (deleted topics)."""
        topics = self.client.cluster.topics
        return {tp for tp in partitions if tp.topic not in topics}

    async def _coordinator_call(
        self,
        partitions: Collection[TopicPartition],
        deadline: float,
        build: Callable[[NegotiatedVersions, dict[str, uuid.UUID]], RequestPayload],
    ) -> tuple[ResponsePayload, dict[uuid.UUID, str]]:
        """One attempt of an offsets request to the group's coordinator, within the
        time left before ``deadline``; its response, and topic names by id to parse it.

        ``build`` gets the topic ids of ``partitions``: v10 of both APIs names
        topics by id, and the version negotiated with the coordinator decides.
        """
        topics = {tp.topic for tp in partitions}
        cluster = self.client.cluster
        missing = [t for t in topics if t not in cluster.topics]
        if missing:
            cluster = await self.client.metadata(missing)
        # A topic still unknown (deleted) keeps a nil id: v10 then fails it per
        # partition, v9 does not need it.
        ids = {
            t: cluster.topics[t].topic_id if t in cluster.topics else uuid.UUID(int=0)
            for t in topics
        }
        response = await self.client.coordinator_request(
            self.group_id,
            lambda versions: build(versions, ids),
            timeout=self._budget(deadline),
        )
        return response, {v: k for k, v in ids.items()}

    def _budget(self, deadline: float) -> float:
        return max(0.001, min(self.request_timeout, deadline - anyio.current_time()))

    def _retry(self, deadline: float) -> _Retry:
        return _Retry(self.client, self.group_id, self.backoff, deadline)


@dataclass(slots=True)
class _Retry:
    """The retry policy both offset requests follow, one per commit or fetch call.

    Between attempts it backs off (Kafka's exponential backoff, capped by the
    deadline); it remembers the last retriable failure, raised as the
    ``__cause__`` of the :class:`~kgroup.errors.RequestTimeoutError` once
    ``deadline`` has passed; and a failure saying the coordinator moved has the
    client look it up again before the next attempt.
    """

    client: ClusterClient
    group_id: str
    backoff: Backoff
    deadline: float
    attempt: int = 0
    last_error: KgroupError | None = None

    def failed(self, *errors: KgroupError) -> None:
        """An attempt failed with ``errors`` (retriable; the first is kept as the cause)."""
        self.last_error = errors[0]
        if any(isinstance(e, _COORDINATOR_ERRORS) for e in errors):
            self.client.mark_coordinator_stale(self.group_id)

    async def wait(self, what: str) -> None:
        """Back off before the next attempt at ``what``, or raise if the deadline has passed."""
        if anyio.current_time() >= self.deadline:
            raise RequestTimeoutError(f"{what} did not complete in time") from self.last_error
        delay = self.backoff.delay(self.attempt)
        self.attempt += 1
        await anyio.sleep(max(0.0, min(delay, self.deadline - anyio.current_time())))
