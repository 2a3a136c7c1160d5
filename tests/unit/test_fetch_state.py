"""The runtime's sans-IO fetch state: what each partition may do, as data-plane operations."""

from __future__ import annotations

import pytest

from kgroup.runtime import NotAssignedError
from kgroup.runtime.fetch_state import (
    Assign,
    CapturePositions,
    FetchState,
    Pause,
    Resume,
    Seek,
    Unassign,
)
from kgroup.types import TopicPartition

A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
B0 = TopicPartition("b", 0)


def _fetching(state: FetchState, committed: dict[TopicPartition, int | None]) -> FetchState:
    """``state`` with ``committed``'s partitions started and fetching."""
    ticket = state.start(frozenset(committed))
    state.offsets_fetched(ticket, committed, frozenset(committed))
    return state


def test_a_start_assigns_at_the_committed_offsets_once_they_arrive() -> None:
    state = FetchState()
    ticket = state.start(frozenset({A0, A1}))
    assert state.wanted(ticket) == {A0, A1}
    assert state.fetching == frozenset()
    ops = state.offsets_fetched(ticket, {A0: 7, A1: None}, owned={A0, A1})
    assert ops == [Assign({A0: 7, A1: None})]
    assert state.fetching == {A0, A1}


def test_a_stop_before_the_offsets_arrive_cancels_the_start() -> None:
    state = FetchState()
    ticket = state.start(frozenset({A0, A1}))
    assert state.stop(frozenset({A0})) == []  # not fetching yet: nothing to unassign
    assert state.wanted(ticket) == {A1}
    assert state.offsets_fetched(ticket, {A0: 1, A1: 2}, owned={A0, A1}) == [Assign({A1: 2})]
    assert state.fetching == {A1}


def test_a_start_again_makes_the_older_ticket_stale() -> None:
    state = FetchState()
    old = state.start(frozenset({A0}))
    state.stop(frozenset({A0}))
    new = state.start(frozenset({A0}))
    assert state.wanted(old) == frozenset()
    assert state.offsets_fetched(old, {A0: 1}, owned={A0}) == []
    assert state.offsets_fetched(new, {A0: 5}, owned={A0}) == [Assign({A0: 5})]


def test_partitions_no_longer_owned_do_not_start() -> None:
    state = FetchState()
    ticket = state.start(frozenset({A0, A1}))
    assert state.offsets_fetched(ticket, {A0: 1, A1: 2}, owned={A1}) == [Assign({A1: 2})]
    assert state.offsets_fetched(state.start(frozenset({B0})), {}, owned=set()) == []


def test_a_stop_captures_positions_before_unassigning() -> None:
    state = _fetching(FetchState(), {A0: 0, A1: 0})
    ops = state.stop(frozenset({A0, B0}))
    assert ops == [CapturePositions(frozenset({A0})), Unassign(frozenset({A0}))]
    state.positions_captured({A0: 42})
    assert state.stopped_positions([A0, A1, B0]) == {A0: 42}
    assert state.fetching == {A1}


def test_a_partition_stopped_and_started_again_without_leaving_resumes_where_it_stopped() -> None:
    # A classic member unsure of its membership (an unanswered SyncGroup, a
    # JoinGroup unconfirmed for a session timeout) stops fetching what it owns
    # and starts it again once the round keeps it: the application was handed
    # the records up to the stopped position, not only up to the commit.
    state = _fetching(FetchState(), {A0: 0, A1: 0})
    state.assignment_changed(frozenset({A0, A1}))
    state.stop(frozenset({A0, A1}))
    state.positions_captured({A0: 9, A1: 4})
    ticket = state.start(frozenset({A0, A1}))
    # Until it resumes, a commit still covers the stopped position.
    assert state.stopped_positions([A0, A1]) == {A0: 9, A1: 4}
    assert state.offsets_fetched(ticket, {A0: 3, A1: 2}, owned={A0, A1}) == [Assign({A0: 9, A1: 4})]
    assert state.stopped_positions([A0, A1]) == {}


def test_a_seek_before_resuming_wins_over_the_stopped_position() -> None:
    state = _fetching(FetchState(), {A0: 0})
    state.stop(frozenset({A0}))
    state.positions_captured({A0: 9})
    ticket = state.start(frozenset({A0}))
    state.seek(A0, 100, owned={A0})
    assert state.offsets_fetched(ticket, {A0: 3}, owned={A0}) == [Assign({A0: 100})]


def test_a_partition_that_left_the_assignment_forgets_its_stopped_position() -> None:
    # Regression (issue 12, switch_protocol under load): revoked at 92, owned
    # again later while another member had committed 192, and committed before
    # its fetch started: the stale 92 went out and rewound the group.
    state = _fetching(FetchState(), {A0: 0, A1: 0})
    state.assignment_changed(frozenset({A0, A1}))
    state.stop(frozenset({A0}))
    state.positions_captured({A0: 92})
    # Still owned during the revoke callback: its commit covers the position.
    assert state.stopped_positions([A0]) == {A0: 92}
    state.assignment_changed(frozenset({A1}))  # the revocation completed
    state.assignment_changed(frozenset({A0, A1}))  # owned again, not fetching yet
    assert state.stopped_positions([A0, A1]) == {}
    ticket = state.start(frozenset({A0}))
    assert state.offsets_fetched(ticket, {A0: 192}, owned={A0, A1}) == [Assign({A0: 192})]


def test_seek_of_a_fetching_partition_is_a_data_plane_seek() -> None:
    state = _fetching(FetchState(), {A0: 0})
    assert state.seek(A0, 100, owned={A0}) == [Seek(A0, 100)]


def test_seek_before_fetching_overrides_the_committed_offset() -> None:
    state = FetchState()
    ticket = state.start(frozenset({A0, A1}))
    assert state.seek(A0, 100, owned={A0, A1}) == []
    assert state.seek_override(A0) == 100
    ops = state.offsets_fetched(ticket, {A0: 3, A1: 4}, owned={A0, A1})
    assert ops == [Assign({A0: 100, A1: 4})]
    assert state.seek_override(A0) is None


def test_a_stop_drops_a_seek_override() -> None:
    state = FetchState()
    state.start(frozenset({A0}))
    state.seek(A0, 100, owned={A0})
    state.stop(frozenset({A0}))
    assert state.seek_override(A0) is None


def test_seek_of_a_partition_not_owned_is_a_typed_error() -> None:
    with pytest.raises(NotAssignedError, match="not assigned"):
        FetchState().seek(B0, 1, owned={A0})


def test_pause_and_resume_of_fetching_partitions() -> None:
    state = _fetching(FetchState(), {A0: 0, A1: 0})
    assert state.pause([A0, B0], owned={A0, A1}) == [Pause(frozenset({A0}))]
    assert state.paused == {A0}
    assert state.held == frozenset()  # B0 is not owned: nothing to remember
    assert state.resume([A0]) == [Resume(frozenset({A0}))]
    assert state.paused == frozenset()


def test_pause_from_on_partitions_assigned_holds_the_partition_until_it_starts() -> None:
    # The assigned callback runs before the committed offsets arrive: the
    # partition is owned, not yet fetching. It must start paused, before any
    # of its records can be handed out.
    state = FetchState()
    ticket = state.start(frozenset({A0, A1}))
    assert state.pause([A0], owned={A0, A1}) == []
    assert state.held == {A0}
    ops = state.offsets_fetched(ticket, {A0: 5, A1: 6}, owned={A0, A1})
    assert ops == [Assign({A0: 5, A1: 6}), Pause(frozenset({A0}))]
    assert state.paused == {A0}
    assert state.held == frozenset()
    assert state.resume([A0]) == [Resume(frozenset({A0}))]


def test_resume_before_the_start_releases_the_hold() -> None:
    state = FetchState()
    ticket = state.start(frozenset({A0}))
    state.pause([A0], owned={A0})
    assert state.resume([A0]) == []
    assert state.offsets_fetched(ticket, {A0: 5}, owned={A0}) == [Assign({A0: 5})]


def test_a_stop_forgets_pauses_and_holds() -> None:
    state = _fetching(FetchState(), {A0: 0})
    state.pause([A0], owned={A0})
    state.start(frozenset({A1}))
    state.pause([A1], owned={A0, A1})
    state.stop(frozenset({A0, A1}))
    assert state.paused == frozenset()
    assert state.held == frozenset()


def test_a_refused_assignment_is_not_fetching_and_keeps_its_hold() -> None:
    state = FetchState()
    ticket = state.start(frozenset({A0, A1}))
    state.pause([A0], owned={A0, A1})
    ops = state.offsets_fetched(ticket, {A0: None, A1: None}, owned={A0, A1})
    assign = ops[0]
    assert isinstance(assign, Assign)
    state.assign_failed(assign)
    assert state.fetching == frozenset()
    assert state.paused == frozenset()
    assert state.held == {A0}


def test_tenure_counts_how_often_a_partition_left_the_assignment() -> None:
    state = FetchState()
    state.assignment_changed(frozenset({A0, A1}))
    assert state.tenure(A0) == 0
    state.assignment_changed(frozenset({A1}))
    assert (state.tenure(A0), state.tenure(A1)) == (1, 0)
    state.assignment_changed(frozenset({A0, A1}))
    state.assignment_changed(frozenset({A0, A1}))  # no change: no count
    state.assignment_changed(frozenset())
    assert (state.tenure(A0), state.tenure(A1)) == (2, 1)


# ----------------------------------------------- awaiting a seek (KIP-320, error)


def test_a_diverged_partition_does_not_start_and_awaits_a_seek() -> None:
    # auto.offset.reset=error and A0's log was truncated below its committed
    # offset: A0 is owned but does not fetch; A1 starts as usual.
    state = FetchState()
    ticket = state.start(frozenset({A0, A1}))
    ops = state.offsets_fetched(ticket, {A0: 20, A1: 3}, owned={A0, A1}, diverged={A0})
    assert ops == [Assign({A1: 3})]
    assert state.fetching == {A1}
    assert state.awaiting_seek == {A0}
    # The application's seek starts it exactly there.
    assert state.seek(A0, 10, owned={A0, A1}) == [Assign({A0: 10})]
    assert state.fetching == {A0, A1}
    assert state.awaiting_seek == frozenset()
    # From then on a seek moves the fetching partition.
    assert state.seek(A0, 12, owned={A0, A1}) == [Seek(A0, 12)]


def test_a_diverged_partition_all_alone_starts_nothing() -> None:
    state = FetchState()
    ticket = state.start(frozenset({A0}))
    assert state.offsets_fetched(ticket, {A0: 20}, owned={A0}, diverged={A0}) == []
    assert state.awaiting_seek == {A0}


def test_a_seek_before_the_offsets_arrive_wins_over_the_divergence() -> None:
    # The application chose where A0 starts before the check ended: no wait.
    state = FetchState()
    ticket = state.start(frozenset({A0}))
    state.seek(A0, 4, owned={A0})
    ops = state.offsets_fetched(ticket, {A0: 20}, owned={A0}, diverged={A0})
    assert ops == [Assign({A0: 4})]
    assert state.awaiting_seek == frozenset()


def test_a_partition_paused_while_it_awaits_a_seek_starts_paused() -> None:
    state = FetchState()
    ticket = state.start(frozenset({A0}))
    state.offsets_fetched(ticket, {A0: 20}, owned={A0}, diverged={A0})
    assert state.pause({A0}, owned={A0}) == []
    assert state.seek(A0, 10, owned={A0}) == [Assign({A0: 10}), Pause(frozenset({A0}))]
    assert state.paused == {A0}
    assert state.held == frozenset()


def test_a_partition_awaiting_a_seek_stops_waiting_when_stopped_or_started_again() -> None:
    state = FetchState()
    ticket = state.start(frozenset({A0, A1}))
    state.offsets_fetched(ticket, {A0: 20, A1: 20}, owned={A0, A1}, diverged={A0, A1})
    assert state.awaiting_seek == {A0, A1}
    # Revoked or lost: nothing to unassign (it never fetched), nothing to commit.
    assert state.stop(frozenset({A0})) == []
    assert state.stopped_positions([A0]) == {}
    # Started again (a new committed offset decides again).
    state.start(frozenset({A1}))
    assert state.awaiting_seek == frozenset()
    # A partition left behind is no longer seekable.
    with pytest.raises(NotAssignedError):
        state.seek(A0, 10, owned={A1})


def test_a_partition_awaiting_a_seek_that_leaves_the_assignment_stops_waiting() -> None:
    state = FetchState()
    state.assignment_changed(frozenset({A0}))
    ticket = state.start(frozenset({A0}))
    state.offsets_fetched(ticket, {A0: 20}, owned={A0}, diverged={A0})
    state.assignment_changed(frozenset())
    assert state.awaiting_seek == frozenset()


def test_a_recreated_topic_fetches_anew_from_the_reset_policy_and_counts_a_departure() -> None:
    # Its positions are not to be trusted: unassigned, then assigned at None
    # (auto.offset.reset), paused again if the application had paused it.
    state = _fetching(FetchState(), {A0: 5, A1: 5, B0: 5})
    state.pause(frozenset({A1}), owned={A0, A1, B0})
    tenure = state.tenure(A0)
    ops = state.topic_recreated(frozenset({A0, A1}))
    both = frozenset({A0, A1})
    assert ops == [Unassign(both), Assign({A0: None, A1: None}), Pause(frozenset({A1}))]
    assert state.fetching == {A0, A1, B0}
    assert state.paused == {A1}
    assert (state.tenure(A0), state.tenure(B0)) == (tenure + 1, 0)


def test_a_recreated_topic_forgets_the_stopped_positions_of_the_old_one() -> None:
    # Stopped without leaving the assignment, it would resume at (and a commit
    # would cover) a position in the deleted topic.
    state = _fetching(FetchState(), {A0: 0})
    state.stop(frozenset({A0}))
    state.positions_captured({A0: 9})
    assert state.topic_recreated(frozenset({A0})) == []  # not fetching: nothing to restart
    assert state.stopped_positions([A0]) == {}
    ticket = state.start(frozenset({A0}))
    assert state.offsets_fetched(ticket, {A0: None}, owned={A0}) == [Assign({A0: None})]
