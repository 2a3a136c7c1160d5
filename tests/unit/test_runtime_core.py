"""The runtime's sans-IO core: every decision above the member, without I/O.

No broker, no anyio: a session is a plain object with the member's state, the
data plane a dict of positions, time a number.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kgroup.config import ConsumerConfig, GroupProtocol
from kgroup.errors import CommitFailedError, KgroupError, LogTruncationError
from kgroup.membership import (
    CallbackCompleted,
    CallbackKind,
    Closed,
    CommitCompleted,
    CommitOffsets,
    LeaveComplete,
    PollCalled,
    RaiseCallbackError,
    RediscoverCoordinator,
    RejoinRequested,
    ReportError,
    ReportFatalError,
    RunCallback,
    StartFetching,
    StopFetching,
    SubscriptionChanged,
    Unsubscribe,
)
from kgroup.protocol import broker_error
from kgroup.runtime import NotAssignedError
from kgroup.runtime import core as c
from kgroup.runtime.driver import AlreadyAssignedError, MixedAssignmentError
from kgroup.runtime.fetch_state import Assign, Pause, Seek, Unassign
from kgroup.runtime.interfaces import DriverAction
from kgroup.runtime.liveness import Look
from kgroup.runtime.session import FinishedCommit
from kgroup.runtime.work import (
    CallbackWork,
    CommitResultWork,
    ErrorWork,
    RevocationCommitWork,
)
from kgroup.types import TopicPartition, Truncation

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
B0 = TopicPartition("b", 0)
SUB = SubscriptionChanged(frozenset({"a"}), None)


@dataclass
class FakeSession:
    """A session as the core reads it."""

    group_protocol: GroupProtocol = GroupProtocol.CONSUMER
    member_id: str = "m1"
    generation_or_epoch: int = 3
    assignment: frozenset[TopicPartition] = frozenset()
    settled: bool = True
    state_name: str = "STABLE"
    may_fall_back: bool = False
    poll_at: float | None = None
    expiry: float | None = None

    def poll_deadline(self) -> float | None:
        return self.poll_at

    def session_expiry(self) -> float | None:
        return self.expiry


@dataclass
class FakeDataPlane:
    """Positions the data plane would report, and what it has assigned."""

    at: dict[TopicPartition, int] = field(default_factory=dict)
    assigned: frozenset[TopicPartition] = frozenset()

    def positions(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.at[tp] for tp in partitions if tp in self.at}

    def leader_epochs(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return {}


def _config(**extra: Any) -> ConsumerConfig:
    return ConsumerConfig.from_dict(
        {"bootstrap.servers": "localhost:9092", "group.id": "g", **extra}
    )


def _core(
    session: FakeSession | None = None,
    dataplane: FakeDataPlane | None = None,
    *,
    auto_offset_store: bool = True,
    on_commit: Any = None,
    conf: dict[str, str] | None = None,
    topic_ids: dict[str, uuid.UUID] | None = None,
    log_ends: dict[TopicPartition, int] | None = None,
) -> c.RuntimeCore[FakeSession]:
    ids = {} if topic_ids is None else topic_ids
    ends = log_ends
    return c.RuntimeCore(
        _config(**(conf or {})),
        session or FakeSession(),
        dataplane or FakeDataPlane(),
        auto_offset_store=auto_offset_store,
        commit_callback=on_commit,
        topic_id=ids.get,
        log_ends=None if ends is None else lambda tps: {tp: ends[tp] for tp in tps if tp in ends},
    )


def _fetching(
    core: c.RuntimeCore[FakeSession], committed: dict[TopicPartition, int | None]
) -> None:
    """The member owns and fetches ``committed``'s partitions."""
    core.session.assignment = frozenset(committed)
    (fetch,) = core.perform(StartFetching(frozenset(committed)), 0.0)
    assert isinstance(fetch, c.FetchCommitted)
    core.fetch.offsets_fetched(fetch.ticket, committed, core.owned())


Mistake = Callable[["c.RuntimeCore[FakeSession]"], object]


class Listener:
    def on_partitions_revoked(self, partitions: object) -> None: ...


# ------------------------------------------------------ the member's actions

BOOM = RuntimeError("callback failed")

PERFORM_CASES: list[tuple[str, DriverAction, object | None, list[type]]] = [
    ("rediscover", RediscoverCoordinator(), None, [c.Rediscover]),
    (
        "callback with a method",
        RunCallback(CallbackKind.REVOKED, 1, frozenset()),
        Listener(),
        [c.QueueWork],
    ),
    (
        "callback without a listener",
        RunCallback(CallbackKind.ASSIGNED, 1, frozenset()),
        None,
        [c.Post],
    ),
    ("callback error", RaiseCallbackError(CallbackKind.REVOKED, BOOM), None, [c.QueueWork]),
    ("report error", ReportError(ErrorCode.unknown_server_error, "X", "x"), None, [c.QueueWork]),
    (
        "report denial",
        ReportError(ErrorCode.group_authorization_failed, "G", "no"),
        None,
        [c.Fatal],
    ),
    ("fatal", ReportFatalError(ErrorCode.unknown_server_error, "X", "x"), None, [c.Fatal]),
    ("leave complete", LeaveComplete(), None, []),
    ("closed", Closed(timed_out=True), None, []),
]


@pytest.mark.parametrize(
    ("action", "listener", "kinds"),
    [case[1:] for case in PERFORM_CASES],
    ids=[case[0] for case in PERFORM_CASES],
)
def test_each_member_action_becomes_its_effects(
    action: DriverAction, listener: object | None, kinds: list[type]
) -> None:
    core = _core()
    core.listener = listener
    assert [type(e) for e in core.perform(action, 0.0)] == kinds


def test_a_stop_captures_positions_and_unassigns() -> None:
    core = _core(dataplane=FakeDataPlane({A0: 42, A1: 7}))
    _fetching(core, {A0: 1, A1: 2})
    (ops,) = core.perform(StopFetching(frozenset({A0})), 0.0)
    assert ops == c.DataPlaneOps((Unassign(frozenset({A0})),))
    assert core.fetch.stopped_positions([A0, A1]) == {A0: 42}


def test_a_start_asks_for_the_committed_offsets_as_the_member() -> None:
    core = _core()
    (fetch,) = core.perform(StartFetching(frozenset({A0, A1})), 0.0)
    assert isinstance(fetch, c.FetchCommitted)
    assert not fetch.manual
    assert core.fetch.wanted(fetch.ticket) == {A0, A1}


def test_a_callback_error_already_raised_is_not_raised_again() -> None:
    core = _core()
    item = CallbackWork(CallbackKind.REVOKED, 4, frozenset())
    assert core.callback_done(item, BOOM, raised=True, now=0.0) == [
        c.Post(CallbackCompleted(CallbackKind.REVOKED, 4, BOOM)),
        c.HandOver(),
    ]
    assert core.perform(RaiseCallbackError(CallbackKind.REVOKED, BOOM), 0.0) == []
    # Once only: the same error reported again is raised.
    assert core.perform(RaiseCallbackError(CallbackKind.REVOKED, BOOM), 0.0) == [
        c.QueueWork(ErrorWork(BOOM))
    ]


def test_auto_falls_back_to_classic_when_the_first_heartbeat_is_refused() -> None:
    core = _core(FakeSession(may_fall_back=True), conf={"group.protocol": "auto"})
    refused = ReportFatalError(ErrorCode.unsupported_version, "U", "no", protocol_unsupported=True)
    assert core.perform(refused, 0.0) == [c.SwitchSession(GroupProtocol.CLASSIC)]
    fixed = _core(FakeSession(may_fall_back=True))  # group.protocol=consumer: fatal
    assert [type(e) for e in fixed.perform(refused, 0.0)] == [c.Fatal]


# ------------------------------------------------ callbacks and async commits


def test_a_revocation_waits_for_asynchronous_commits_in_flight() -> None:
    core = _core()
    core.background_commit_started()
    item = CallbackWork(CallbackKind.REVOKED, 9, frozenset({A0}))
    assert core.callback_done(item, None, raised=False, now=10.0) == []
    assert core.held_until() == 10.0 + 30.0  # request.timeout.ms
    assert core.background_commit_ended() == [c.Post(CallbackCompleted(CallbackKind.REVOKED, 9))]
    assert core.held_until() is None


def test_a_held_revocation_is_let_go_after_the_request_timeout() -> None:
    core = _core(conf={"request.timeout.ms": "1000"})
    core.background_commit_started()
    assert core.perform(RunCallback(CallbackKind.REVOKED, 2, frozenset()), 5.0) == []
    assert core.next_deadline() == 6.0
    assert core.timers(5.9, 0.0) == []
    assert core.timers(6.0, 0.0) == [c.Post(CallbackCompleted(CallbackKind.REVOKED, 2))]
    assert core.background_commit_ended() == []  # already let go


def test_an_assigned_callback_never_waits_for_commits() -> None:
    core = _core()
    core.background_commit_started()
    item = CallbackWork(CallbackKind.ASSIGNED, 1, frozenset())
    assert core.callback_done(item, None, raised=False, now=0.0) == [
        c.Post(CallbackCompleted(CallbackKind.ASSIGNED, 1)),
        c.HandOver(),
    ]


def test_a_finished_callback_is_handed_to_the_member_inside_the_poll() -> None:
    # The member's next step (the assign callback after a revoke) must be queued
    # before the poll that ran the callback looks at its work again.
    core = _core()
    item = CallbackWork(CallbackKind.REVOKED, 3, frozenset({A0}))
    effects = core.callback_done(item, None, raised=False, now=0.0)
    assert effects == [c.Post(CallbackCompleted(CallbackKind.REVOKED, 3)), c.HandOver()]
    # Let go later (asynchronous commits ended): the poll is long over, nothing to hand over.
    core.background_commit_started()
    assert core.callback_done(item, None, raised=False, now=0.0) == []
    assert core.background_commit_ended() == [c.Post(CallbackCompleted(CallbackKind.REVOKED, 3))]


# ------------------------------------------------------------------ commits


def _commit_action(token: int, partitions: set[TopicPartition], **kw: Any) -> CommitOffsets:
    return CommitOffsets(token, frozenset(partitions), member_epoch=3, deadline=99.0, **kw)


def test_a_revocation_commit_waits_for_the_application_then_sends() -> None:
    core = _core(dataplane=FakeDataPlane({A0: 42}))
    _fetching(core, {A0: 1})
    core.perform(StopFetching(frozenset({A0})), 0.0)
    assert core.perform(_commit_action(5, {A0}), 0.0) == [c.QueueWork(RevocationCommitWork(5))]
    assert core.release_revocation_commit(5) == [c.SendMemberCommit(5, {A0: 42}, 99.0)]
    assert core.release_revocation_commit(5) == []  # released once


def test_the_poll_waits_for_a_released_revocation_commit_until_the_member_heard() -> None:
    core = _core(dataplane=FakeDataPlane({A0: 42}))
    _fetching(core, {A0: 1})
    core.perform(StopFetching(frozenset({A0})), 0.0)
    core.perform(_commit_action(5, {A0}), 0.0)
    assert not core.revocation_commit_waits(5)  # not released: no poll waits for it
    core.release_revocation_commit(5)
    assert core.revocation_commit_waits(5)
    effects = core.member_commit_done(5, {A0: 42}, None, 3)
    # The member hears the answer at once; the wait ends once it has.
    assert effects[-2:] == [c.FinishCommit(FinishedCommit(5, {A0: 42}, None, 3)), c.HandOver(5)]
    assert core.revocation_commit_waits(5)
    core.handed_over(5)
    assert not core.revocation_commit_waits(5)
    # A commit nobody waits for (an auto-commit's, a retried one) hands nothing over.
    assert c.HandOver(9) not in core.member_commit_done(9, {A0: 42}, None, 3)


def test_a_revocation_commit_of_offsets_committed_already_completes_at_once() -> None:
    core = _core(dataplane=FakeDataPlane({A0: 42}))
    _fetching(core, {A0: 1})
    core.committed.note({A0: 42}, {A0: core.fetch.tenure(A0)})
    assert core.perform(_commit_action(5, {A0}), 0.0) == [c.Post(CommitCompleted(5))]


def test_a_retried_commit_sends_its_own_offsets_at_once() -> None:
    core = _core(dataplane=FakeDataPlane({A0: 42, A1: 8}))
    _fetching(core, {A0: 1, A1: 2})
    action = _commit_action(6, {A0, A1}, offsets={A0: 40, B0: 3})
    # B0 is not in the commit's partitions; A1's position fills in.
    assert core.perform(action, 0.0) == [c.SendMemberCommit(6, {A0: 40, A1: 8}, 99.0)]


def test_stored_offsets_are_read_when_the_revocation_commit_is_released() -> None:
    core = _core(dataplane=FakeDataPlane({A0: 42}), auto_offset_store=False)
    _fetching(core, {A0: 1})
    assert core.perform(_commit_action(7, {A0}), 0.0) == [c.QueueWork(RevocationCommitWork(7))]
    core.store_offsets({A0: 30})  # the application stores until its next poll
    assert core.release_revocation_commit(7) == [c.SendMemberCommit(7, {A0: 30}, 99.0)]


def test_nothing_stored_completes_the_revocation_commit_without_a_request() -> None:
    core = _core(auto_offset_store=False)
    _fetching(core, {A0: 1})
    core.perform(_commit_action(7, {A0}), 0.0)
    assert core.release_revocation_commit(7) == [c.Post(CommitCompleted(7)), c.HandOver()]
    assert not core.revocation_commit_waits(7)


def test_storing_offsets_of_a_partition_not_owned_is_refused() -> None:
    core = _core(auto_offset_store=False)
    _fetching(core, {A0: 1})
    with pytest.raises(NotAssignedError):
        core.store_offsets({B0: 1})


def test_stored_offsets_of_a_partition_that_left_are_forgotten() -> None:
    core = _core(auto_offset_store=False)
    _fetching(core, {A0: 1, A1: 1})
    core.store_offsets({A0: 5, A1: 6})
    core.session.assignment = frozenset({A1})
    core.stepped(0.0, 0.0)
    core.session.assignment = frozenset({A0, A1})
    assert core.current_offsets() == {A1: 6}


def test_a_finished_member_commit_is_reported_to_on_commit_and_the_session() -> None:
    seen: list[object] = []
    core = _core(on_commit=lambda offsets, error: seen.append(offsets))
    effects = core.member_commit_done(3, {A0: 1}, None, 4)
    assert [type(e) for e in effects] == [c.QueueWork, c.FinishCommit]
    report, finish = effects
    assert isinstance(report, c.QueueWork)
    assert isinstance(report.item, CommitResultWork)
    assert report.item.offsets == {A0: 1}
    assert isinstance(finish, c.FinishCommit)
    assert (finish.finished.token, finish.finished.generation) == (3, 4)
    assert _core().member_commit_done(3, {A0: 1}, None, 4) == [
        c.FinishCommit(FinishedCommit(3, {A0: 1}, None, 4))
    ]


def test_auto_commit_covers_changed_positions_of_a_member_with_an_epoch() -> None:
    core = _core(dataplane=FakeDataPlane({A0: 42, A1: 8}))
    _fetching(core, {A0: 1, A1: 2})
    assert core.auto_commit_offsets() == {A0: 42, A1: 8}
    core.committed.note({A0: 42}, {A0: core.fetch.tenure(A0), A1: core.fetch.tenure(A1)})
    assert core.auto_commit_offsets() == {A1: 8}
    core.session.generation_or_epoch = 0  # not in the group (yet): no auto-commit
    assert core.auto_commit_offsets() == {}


def test_close_commits_a_manual_assignment_only() -> None:
    core = _core(dataplane=FakeDataPlane({A0: 42}))
    assert core.close_commit_offsets() is None
    core.session.assignment = frozenset()
    core.latest_subscription = None
    core.assign({A0: 5}, incremental=False)
    assert core.close_commit_offsets() == {A0: 42}
    off = _core(dataplane=FakeDataPlane({A0: 42}), conf={"enable.auto.commit": "false"})
    off.assign({A0: 5}, incremental=False)
    assert off.close_commit_offsets() is None


REFUSALS: list[tuple[GroupProtocol, KgroupError, bool]] = [
    (GroupProtocol.CLASSIC, broker_error(22), True),
    (GroupProtocol.CLASSIC, broker_error(25), True),
    (GroupProtocol.CLASSIC, broker_error(27), True),
    (GroupProtocol.CLASSIC, broker_error(110), False),
    (GroupProtocol.CONSUMER, broker_error(25), True),
    (GroupProtocol.CONSUMER, broker_error(110), True),
    (GroupProtocol.CONSUMER, broker_error(27), False),
    (GroupProtocol.CONSUMER, broker_error(113), False),
]


@pytest.mark.parametrize(("protocol", "error", "refused"), REFUSALS)
def test_a_commit_refused_for_a_finished_membership_is_a_commit_failed_error(
    protocol: GroupProtocol, error: KgroupError, refused: bool
) -> None:
    result = c.refused_commit(protocol, [A0], error)
    assert isinstance(result, CommitFailedError) is refused


def test_a_topic_created_again_is_committed_once_more_and_fetched_anew() -> None:
    ids = {"a": uuid.uuid4()}
    core = _core(dataplane=FakeDataPlane({A0: 42}), topic_ids=ids)
    _fetching(core, {A0: 1})
    core.fetch_started({A0: 1})  # the data plane took it: its topic's id is noted
    core.committed.note({A0: 42}, {A0: core.fetch.tenure(A0)})
    assert core.auto_commit_offsets() == {}  # unchanged since committed
    ids["a"] = uuid.uuid4()  # deleted and created again
    assert core.recreated([A0]) == {A0}
    # Sent anyway: the commit is where the new topic is noticed (and left out).
    assert core.auto_commit_offsets() == {A0: 42}
    assert core.topic_recreated(frozenset({A0, B0})) == [
        c.DataPlaneOps((Unassign(frozenset({A0})), Assign({A0: None})))
    ]


def test_an_offset_past_the_log_end_goes_to_the_commit_even_if_unchanged() -> None:
    core = _core(dataplane=FakeDataPlane({A0: 42, A1: 5}), log_ends={A0: 10, A1: 5})
    _fetching(core, {A0: 1, A1: 1})
    tenure = {A0: core.fetch.tenure(A0), A1: core.fetch.tenure(A1)}
    core.committed.note({A0: 42, A1: 5}, tenure)
    assert core.beyond_log_end({A0: 42, A1: 5}) == {"a"}
    assert core.uncommitted({A0: 42, A1: 5}) == {A0: 42, A1: 5}  # the whole topic


# --------------------------------------------------------------- truncation


def test_committed_offsets_without_a_start_need_no_check() -> None:
    core = _core()
    core.session.assignment = frozenset({A0})
    (fetch,) = core.perform(StartFetching(frozenset({A0})), 0.0)
    assert isinstance(fetch, c.FetchCommitted)
    assert core.offsets_fetched(fetch.ticket, {A0: None}) == [
        c.DataPlaneOps((Assign({A0: None}),), announce=True)
    ]


def _checked(auto_offset_reset: str) -> tuple[c.RuntimeCore[FakeSession], list[c.Effect]]:
    core = _core(conf={"auto.offset.reset": auto_offset_reset})
    core.session.assignment = frozenset({A0, A1})
    (fetch,) = core.perform(StartFetching(frozenset({A0, A1})), 0.0)
    assert isinstance(fetch, c.FetchCommitted)
    (check,) = core.offsets_fetched(fetch.ticket, {A0: 100, A1: 50})
    assert isinstance(check, c.CheckTruncation)
    assert dict(check.starts) == {A0: 100, A1: 50}
    cut = Truncation(A0, 100, 4, 80, 5)
    return core, core.truncation_checked(check.ticket, check.committed, [cut])


def test_a_truncated_offset_moves_to_where_the_log_diverges() -> None:
    core, effects = _checked("earliest")
    assert effects == [c.DataPlaneOps((Assign({A0: 80, A1: 50}),), announce=True)]
    assert core.truncation is None


def test_with_reset_error_a_truncated_partition_waits_for_a_seek() -> None:
    core, effects = _checked("error")
    assert effects == [
        c.TruncationChanged(),
        c.DataPlaneOps((Assign({A1: 50}),), announce=True),
    ]
    assert isinstance(core.truncation, LogTruncationError)
    assert core.fetch.awaiting_seek == {A0}
    assert core.seek(A0, 90) == [c.DataPlaneOps((Assign({A0: 90}),))]
    core.ops_done()
    assert core.truncation is None


def test_a_refused_assignment_goes_to_the_application() -> None:
    core = _core()
    core.session.assignment = frozenset({A0})
    boom = KgroupError("refused")
    effects = core.assign_failed(Assign({A0: 1}), boom)
    assert effects == [c.QueueWork(ErrorWork(boom))]


def test_a_failed_offset_fetch_is_fatal_for_a_member_and_raised_once_for_assign() -> None:
    boom = KgroupError("no")
    assert core_types(_core().offset_fetch_failed(False, boom)) == [c.Fatal]
    assert core_types(_core().offset_fetch_failed(True, boom)) == [c.QueueWork]


def core_types(effects: list[c.Effect]) -> list[type]:
    return [type(e) for e in effects]


# -------------------------------------------------------- manual assignment


def test_assign_starts_with_a_plain_offset_fetch_and_seeks_given_offsets() -> None:
    core = _core()
    effects = core.assign({A0: 5, A1: None}, incremental=False)
    fetch = effects[-1]
    assert isinstance(fetch, c.FetchCommitted)
    assert fetch.manual
    assert core.manual
    assert core.owned() == {A0, A1}
    assert core.manual_fetch_needs(fetch.ticket) == [A1]  # A0 starts where it was seeked


def _subscribed() -> c.RuntimeCore[FakeSession]:
    core = _core()
    core.subscribe(SUB, None)
    return core


def _assigned() -> c.RuntimeCore[FakeSession]:
    core = _core()
    core.assign({A0: None}, incremental=False)
    return core


MANUAL_ERRORS: list[tuple[str, Callable[[], c.RuntimeCore[FakeSession]], Mistake, type]] = [
    (
        "assign while subscribed",
        _subscribed,
        lambda k: k.assign({A0: None}, False),
        MixedAssignmentError,
    ),
    ("unassign while subscribed", _subscribed, lambda k: k.unassign(None), MixedAssignmentError),
    (
        "incremental assign again",
        _assigned,
        lambda k: k.assign({A0: 3}, True),
        AlreadyAssignedError,
    ),
    ("unassign a foreign partition", _assigned, lambda k: k.unassign([B0]), NotAssignedError),
    ("subscribe while assigned", _assigned, lambda k: k.subscribe(SUB, None), MixedAssignmentError),
    ("seek a foreign partition", _assigned, lambda k: k.seek(B0, 1), NotAssignedError),
]


@pytest.mark.parametrize(
    ("make", "mistake", "error"), [m[1:] for m in MANUAL_ERRORS], ids=[m[0] for m in MANUAL_ERRORS]
)
def test_manual_assignment_mistakes_are_refused(
    make: Callable[[], c.RuntimeCore[FakeSession]], mistake: Mistake, error: type[Exception]
) -> None:
    core = make()
    with pytest.raises(error):
        mistake(core)


def test_unassign_stops_the_partitions_and_forgets_them() -> None:
    core = _core(dataplane=FakeDataPlane({A0: 9}))
    (fetch,) = core.assign({A0: None, A1: None}, incremental=True)
    assert isinstance(fetch, c.FetchCommitted)
    core.fetch.offsets_fetched(fetch.ticket, {A0: 1, A1: 1}, core.owned())
    assert core.unassign([A0]) == [c.DataPlaneOps((Unassign(frozenset({A0})),))]
    assert core.owned() == {A1}
    assert core.fetch.stopped_positions([A0]) == {}  # left the assignment


def test_pause_and_seek_of_fetching_partitions_act_at_once() -> None:
    core = _core()
    _fetching(core, {A0: 1})
    assert core.pause([A0]) == [c.DataPlaneOps((Pause(frozenset({A0})),))]
    assert core.seek(A0, 3) == [c.DataPlaneOps((Seek(A0, 3),))]
    assert core.paused() == {A0}


# ------------------------------------------------------------ settled rules


def test_the_data_plane_hears_settled_once_the_assignment_is_all_fetching() -> None:
    dataplane = FakeDataPlane()
    core = _core(dataplane=dataplane)
    _fetching(core, {A0: 1})
    assert core.ops_done() == []  # the data plane has not assigned it yet
    dataplane.assigned = frozenset({A0})
    assert core.ops_done() == [c.SettledChanged(True)]
    assert core.ops_done() == []  # told once
    core.session.settled = False  # a rebalance step under way
    assert core.stepped(0.0, 0.0) == [c.SettledChanged(False)]


def test_a_member_owning_nothing_is_not_settled() -> None:
    core = _core()
    assert core.ops_done() == []
    assert core.poll_events_wanted


def test_a_step_notes_when_the_session_lapses_on_the_front_ends_clock() -> None:
    core = _core(FakeSession(assignment=frozenset({A0}), expiry=105.0, settled=False))
    core.stepped(100.0, 5000.0)
    assert core.session_lapses_at == 5005.0
    assert core.poll_events_wanted
    core.session.assignment = frozenset()
    core.stepped(101.0, 5001.0)
    assert core.session_lapses_at is None


# --------------------------------------------------------------- poll timer


def test_polls_are_passed_on_shortly_before_the_poll_timer_expires() -> None:
    core = _core(FakeSession(poll_at=100.0))  # max.poll.interval.ms 300 s: 1 s slack
    assert core.pass_on_polls(10.0, 1010.0) == ([], 99.0)
    assert core.timers(10.0, 1010.0) == []
    assert core.next_deadline() == 99.0
    core.app_polled = 1050.0  # noted at 50.0 on the loop's clock
    effects, again = core.pass_on_polls(99.0, 1099.0)
    assert effects == [c.Post(PollCalled(at=50.0))]
    assert again is None
    # No poll noted since: look again halfway to the expiry.
    assert core.pass_on_polls(99.0, 1099.0) == ([], 99.5)
    assert core.pass_on_polls(99.995, 1099.995) == ([], None)


def test_a_poll_the_member_hears_of_at_once_is_not_passed_on_again() -> None:
    core = _core(FakeSession(poll_at=100.0))
    assert core.poll_called(1050.0) == [c.Post(PollCalled())]
    assert core.pass_on_polls(99.0, 1099.0) == ([], 99.5)


# ----------------------------------------------------------------- liveness


def test_an_idle_settled_member_looks_at_the_group_and_repairs_it() -> None:
    core = _core(FakeSession(assignment=frozenset()))
    core.subscribe(SubscriptionChanged(frozenset({"a"}), None), None)
    core.stepped(0.0, 0.0)
    assert core.look_at_group(0.0) == []
    assert core.next_deadline() == 5.0
    assert core.look_at_group(5.0) == [c.LookAtGroup()]
    assert core.next_deadline() is None  # a look under way
    stuck = Look(frozenset({A0}))
    assert core.group_looked(5.0, stuck, current=True) == []  # seen once
    assert core.look_at_group(10.0) == [c.LookAtGroup()]
    (rejoin,) = core.group_looked(10.0, stuck, current=True)
    assert isinstance(rejoin, c.Post)
    assert isinstance(rejoin.event, RejoinRequested)
    assert rejoin.event.as_new


def test_a_look_is_dropped_when_the_session_changed_or_looking_is_off() -> None:
    core = _core()
    core.subscribe(SubscriptionChanged(frozenset({"a"}), None), None)
    core.stepped(0.0, 0.0)
    core.look_at_group(5.0)
    core.group_looked(5.0, Look(frozenset({A0})), current=False)
    core.look_at_group(10.0)
    assert core.group_looked(10.0, Look(frozenset({A0})), current=False) == []
    core.liveness_on = False
    assert core.look_at_group(100.0) == []
    assert core.next_deadline() is None


# ---------------------------------------------------------- protocol switch


def test_a_switch_leaves_then_joins_on_the_other_protocol() -> None:
    core = _core()
    core.subscribe(SUB, None)
    assert core.switch_protocol(GroupProtocol.CLASSIC) == [c.Subscribe(Unsubscribe())]
    assert core.perform(LeaveComplete(), 0.0) == [c.SwitchSession(GroupProtocol.CLASSIC)]
    assert core.latest_subscription == SUB
    assert core.session_switched(FakeSession(GroupProtocol.CLASSIC)) == [c.Subscribe(SUB)]


def test_a_switch_back_before_the_leave_ended_rejoins_the_same_protocol() -> None:
    core = _core()
    core.subscribe(SUB, None)
    core.switch_protocol(GroupProtocol.CLASSIC)
    assert core.switch_protocol(GroupProtocol.CONSUMER) == []  # retargets
    assert core.perform(LeaveComplete(), 0.0) == [c.Subscribe(SUB)]


def test_a_subscription_change_during_a_switch_is_the_one_joined() -> None:
    core = _core()
    core.subscribe(SUB, None)
    core.switch_protocol(GroupProtocol.CLASSIC)
    other = SubscriptionChanged(frozenset({"b"}), None)
    core.subscribe(other, None)
    assert core.perform(LeaveComplete(), 0.0) == [c.SwitchSession(GroupProtocol.CLASSIC)]
    assert core.latest_subscription == other


def test_an_unsubscribe_during_a_switch_cancels_the_rejoin() -> None:
    core = _core()
    core.subscribe(SUB, None)
    core.switch_protocol(GroupProtocol.CLASSIC)
    core.change_subscription(Unsubscribe())
    assert core.perform(LeaveComplete(), 0.0) == []


@pytest.mark.parametrize(
    ("subscribed", "protocol", "outcome"),
    [
        (True, GroupProtocol.AUTO, ValueError),
        (False, GroupProtocol.CLASSIC, RuntimeError),
        (True, GroupProtocol.CONSUMER, None),  # the protocol in use: nothing to do
    ],
)
def test_switch_protocol_refuses_what_it_cannot_do(
    subscribed: bool, protocol: GroupProtocol, outcome: type[Exception] | None
) -> None:
    core = _core()
    if subscribed:
        core.subscribe(SUB, None)
    if outcome is None:
        assert core.switch_protocol(protocol) == []
    else:
        with pytest.raises(outcome):
            core.switch_protocol(protocol)


# ------------------------------------------------------ what the app's thread reads


def test_the_snapshot_changes_only_with_the_assignment_or_the_paused_set() -> None:
    core = _core()
    empty = c.Snapshot(frozenset(), frozenset())
    assert core.snapshot(empty) is empty
    _fetching(core, {A0: 1, A1: 2})
    owned = core.snapshot(empty)
    assert owned == c.Snapshot(frozenset({A0, A1}), frozenset())
    assert core.snapshot(owned) is owned
    core.pause([A0])
    paused = core.snapshot(owned)
    assert paused == c.Snapshot(frozenset({A0, A1}), frozenset({A0}))
