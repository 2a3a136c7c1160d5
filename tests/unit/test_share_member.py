"""The share-group member: joining, the assignment, fencing, errors, leaving, the table."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgroup.error_codes import ErrorCode
from kgroup.membership import (
    Closed,
    CloseRequested,
    CoordinatorRediscovered,
    FailureKind,
    LeaveComplete,
    MetadataUpdated,
    PollCalled,
    RediscoverCoordinator,
    ReportError,
    ReportFatalError,
    RequestFailed,
    RequestMetadata,
    StartFetching,
    StopFetching,
    SubscriptionChanged,
    TimerTick,
    Unsubscribe,
)
from kgroup.membership.common.transitions import IllegalTransitionError
from kgroup.membership.share import (
    MACHINE,
    AcknowledgementsFlushed,
    FlushAcknowledgements,
    SendShareHeartbeat,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
    ShareHeartbeatResponseReceived,
    ShareMember,
    ShareMemberConfig,
    ShareMemberState,
    ShareReaction,
    ShareTrigger,
    new_member_id,
    share_reaction_for,
)
from kgroup.membership.share.actions import ShareMemberAction
from kgroup.types import TopicPartition

S = ShareMemberState
ORDERS = uuid.UUID(int=1)
AUDIT = uuid.UUID(int=2)
NAMES = {ORDERS: "orders", AUDIT: "audit"}
CONFIG = ShareMemberConfig(group_id="queue", rack_id="rack-a", max_poll_interval_ms=60_000)


@dataclass
class Transitions:
    seen: list[tuple[ShareMemberState, ShareMemberState]] = field(default_factory=list)

    def started(self, state: ShareMemberState, now: float) -> None:
        pass

    def state_changed(self, old: ShareMemberState, new: ShareMemberState, now: float) -> None:
        self.seen.append((old, new))


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


class Harness:
    """A share member, its clock, and what it asked for."""

    def __init__(self, config: ShareMemberConfig = CONFIG) -> None:
        self.listener = Transitions()
        self.member = ShareMember(
            config, member_id="m-1", random=lambda: 0.5, listener=self.listener
        )
        self.now = 0.0

    def do(self, event: object, at: float | None = None) -> list[ShareMemberAction]:
        if at is not None:
            self.now = at
        return self.member.handle(event, self.now)  # type: ignore[arg-type]

    def heartbeat(self, acts: list[ShareMemberAction]) -> SendShareHeartbeat:
        (sent,) = [a for a in acts if isinstance(a, SendShareHeartbeat)]
        return sent

    def answer(self, sent: SendShareHeartbeat, **fields: object) -> list[ShareMemberAction]:
        response = ShareHeartbeatResponse(member_id="m-1", **fields)  # type: ignore[arg-type]
        return self.do(ShareHeartbeatResponseReceived(sent.seq, response))

    def joined(self, assignment: dict[uuid.UUID, list[int]] | None = None) -> SendShareHeartbeat:
        """Subscribed to orders and audit, joined at epoch 1 with ``assignment``, names known."""
        self.do(MetadataUpdated(NAMES))
        self.do(PollCalled())
        sent = self.heartbeat(self.do(SubscriptionChanged(frozenset({"orders", "audit"}))))
        self.answer(sent, member_epoch=1, assignment=assignment or {ORDERS: [0, 1]})
        assert self.member.state is S.STABLE
        return sent


def test_a_subscription_joins_with_epoch_0_and_every_field() -> None:
    h = Harness()
    acts = h.do(SubscriptionChanged(frozenset({"orders", "audit"})))
    assert h.member.state is S.JOINING
    assert h.heartbeat(acts).request == ShareHeartbeatRequest(
        group_id="queue",
        member_id="m-1",
        member_epoch=0,
        rack_id="rack-a",
        subscribed_topic_names=("audit", "orders"),
    )


def test_the_assignment_is_fetched_at_once_once_its_topics_are_named() -> None:
    h = Harness()
    sent = h.heartbeat(h.do(SubscriptionChanged(frozenset({"orders"}))))
    acts = h.answer(sent, member_epoch=3, assignment={ORDERS: [0, 1]})
    # No revocation, no callback: the member is in, and asks what the topic is called.
    assert h.member.state is S.STABLE
    assert h.member.member_epoch == 3
    assert acts == [RequestMetadata(frozenset({ORDERS}))]
    assert h.member.assignment == frozenset()
    assert h.do(MetadataUpdated({ORDERS: "orders"})) == [
        StartFetching(frozenset({tp("orders", 0), tp("orders", 1)}))
    ]
    assert h.member.assignment == {tp("orders", 0), tp("orders", 1)}


def test_a_new_assignment_stops_and_starts_only_what_changed_in_one_step() -> None:
    h = Harness()
    first = h.joined({ORDERS: [0, 1]})
    h.now = 5.0
    sent = h.heartbeat(h.do(TimerTick()))
    assert sent.seq != first.seq
    acts = h.answer(sent, member_epoch=2, assignment={ORDERS: [1], AUDIT: [0]})
    assert acts == [
        StopFetching(frozenset({tp("orders", 0)})),
        StartFetching(frozenset({tp("audit", 0)})),
    ]
    assert h.member.state is S.STABLE
    # An answer without an assignment changes nothing.
    h.now = 10.0
    assert h.answer(h.heartbeat(h.do(TimerTick())), member_epoch=2) == []
    assert h.member.assignment == {tp("orders", 1), tp("audit", 0)}


def test_heartbeats_follow_the_brokers_interval_and_elide_unchanged_fields() -> None:
    h = Harness()
    sent = h.heartbeat(h.do(SubscriptionChanged(frozenset({"orders"}))))
    h.answer(sent, member_epoch=1, heartbeat_interval_ms=2000)
    assert h.member.next_deadline() == 2.0
    assert h.do(TimerTick(), at=1.9) == []
    steady = h.heartbeat(h.do(TimerTick(), at=2.0))
    fields = (steady.request.member_epoch, steady.request.rack_id)
    assert (*fields, steady.request.subscribed_topic_names) == (1, None, None)
    h.answer(steady, member_epoch=1, heartbeat_interval_ms=2000)
    # A changed subscription goes out at once, the rest still elided.
    changed = h.heartbeat(h.do(SubscriptionChanged(frozenset({"orders", "audit"})), at=2.5))
    assert (changed.request.rack_id, changed.request.subscribed_topic_names) == (
        None,
        ("audit", "orders"),
    )
    # The same subscription again is no change: nothing is sent before the interval.
    h.answer(changed, member_epoch=1, heartbeat_interval_ms=2000)
    assert h.do(SubscriptionChanged(frozenset({"orders", "audit"})), at=3.0) == []


@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_a_fenced_member_stops_fetching_and_rejoins_at_once_with_its_own_id(
    code: ErrorCode,
) -> None:
    h = Harness()
    h.joined({ORDERS: [0, 1]})
    sent = h.heartbeat(h.do(TimerTick(), at=5.0))
    acts = h.answer(sent, error_code=code.value)
    assert acts[0] == StopFetching(frozenset({tp("orders", 0), tp("orders", 1)}))
    rejoin = h.heartbeat(acts).request
    assert (rejoin.member_id, rejoin.member_epoch) == ("m-1", 0)
    assert rejoin.subscribed_topic_names == ("audit", "orders")
    assert h.member.state is S.JOINING
    assert h.listener.seen[-2:] == [(S.STABLE, S.FENCED), (S.FENCED, S.JOINING)]


def test_an_answer_to_a_heartbeat_sent_before_the_fence_is_ignored() -> None:
    h = Harness()
    h.joined()
    old = h.heartbeat(h.do(TimerTick(), at=5.0))
    # The heartbeat in flight failed: the member retries after a backoff...
    h.do(RequestFailed(old.seq, FailureKind.TIMEOUT))
    retry = h.heartbeat(h.do(TimerTick(), at=6.0))
    h.answer(retry, error_code=ErrorCode.FENCED_MEMBER_EPOCH.value)
    # ...and a late answer to the old one changes nothing.
    assert h.answer(old, member_epoch=7, assignment={AUDIT: [0]}) == []
    assert h.member.member_epoch == 0


def test_a_retriable_error_backs_off_and_the_next_heartbeat_is_full() -> None:
    h = Harness()
    h.joined()
    sent = h.heartbeat(h.do(TimerTick(), at=5.0))
    assert h.answer(sent, error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS.value) == []
    assert h.member.state is S.STABLE
    assert h.do(TimerTick(), at=5.01) == []
    due = h.member.next_deadline()
    assert due is not None
    assert 5.0 < due <= 6.0
    again = h.heartbeat(h.do(TimerTick(), at=due)).request
    assert again.subscribed_topic_names == ("audit", "orders")
    assert again.rack_id == "rack-a"


def test_a_moved_coordinator_is_looked_up_before_the_next_heartbeat() -> None:
    h = Harness()
    h.joined()
    sent = h.heartbeat(h.do(TimerTick(), at=5.0))
    assert h.answer(sent, error_code=ErrorCode.NOT_COORDINATOR.value) == [RediscoverCoordinator()]
    assert h.do(TimerTick(), at=9.0) == []
    assert h.heartbeat(h.do(CoordinatorRediscovered(), at=9.5)).request.member_epoch == 1


def test_topic_authorization_is_reported_and_retried() -> None:
    h = Harness()
    h.joined()
    sent = h.heartbeat(h.do(TimerTick(), at=5.0))
    acts = h.answer(sent, error_code=29, error_message="not allowed: audit")
    assert acts == [ReportError(29, "TOPIC_AUTHORIZATION_FAILED", "not allowed: audit")]
    assert h.member.state is S.STABLE


def test_a_group_id_of_another_type_is_fatal_with_the_brokers_words() -> None:
    h = Harness()
    h.joined()
    sent = h.heartbeat(h.do(TimerTick(), at=5.0))
    message = "Group queue is not a share group."
    acts = h.answer(sent, error_code=ErrorCode.GROUP_ID_NOT_FOUND.value, error_message=message)
    assert acts == [
        StopFetching(frozenset({tp("orders", 0), tp("orders", 1)})),
        ReportFatalError(69, "GROUP_ID_NOT_FOUND", message),
    ]
    assert h.member.state is S.FATAL
    assert h.member.next_deadline() is None
    assert h.do(TimerTick(), at=60.0) == []


def test_a_broker_without_share_groups_is_fatal_naming_what_to_enable() -> None:
    h = Harness()
    sent = h.heartbeat(h.do(SubscriptionChanged(frozenset({"orders"}))))
    acts = h.do(RequestFailed(sent.seq, FailureKind.UNSUPPORTED_VERSION))
    (fatal,) = acts
    assert isinstance(fatal, ReportFatalError)
    assert fatal.name == "UNSUPPORTED_VERSION"
    assert fatal.message is not None
    assert "share.version" in fatal.message
    assert h.member.state is S.FATAL


def test_close_stops_fetching_flushes_acknowledgements_then_leaves() -> None:
    h = Harness()
    h.joined({ORDERS: [0]})
    acts = h.do(CloseRequested(deadline=30.0), at=5.0)
    assert acts[0] == StopFetching(frozenset({tp("orders", 0)}))
    (flush,) = [a for a in acts if isinstance(a, FlushAcknowledgements)]
    assert h.member.state is S.PREPARE_LEAVING
    # A heartbeat answer while flushing changes nothing.
    assert h.do(TimerTick(), at=6.0) == []
    leave = h.heartbeat(h.do(AcknowledgementsFlushed(flush.token), at=6.5))
    assert leave.leave
    assert leave.request == ShareHeartbeatRequest(
        group_id="queue", member_id="m-1", member_epoch=-1
    )
    assert h.answer(leave, member_epoch=-1) == [Closed(timed_out=False)]
    assert h.member.closed


def test_a_close_whose_flush_outlives_its_deadline_still_leaves() -> None:
    h = Harness()
    h.joined({ORDERS: [0]})
    h.do(CloseRequested(deadline=30.0), at=5.0)
    acts = h.do(TimerTick(), at=30.0)
    leave = h.heartbeat(acts)
    assert leave.request.member_epoch == -1
    assert acts[-1] == Closed(timed_out=True)


def test_a_close_while_the_join_is_in_flight_still_tells_the_broker() -> None:
    h = Harness()
    h.do(SubscriptionChanged(frozenset({"orders"})))
    # The broker may have made it a member already: it leaves, then closes.
    leave = h.heartbeat(h.do(CloseRequested(deadline=30.0), at=1.0))
    assert leave.leave
    assert leave.request.member_epoch == -1
    assert h.answer(leave, error_code=ErrorCode.UNKNOWN_MEMBER_ID.value) == [Closed()]


def test_a_close_before_any_heartbeat_went_out_sends_nothing() -> None:
    h = Harness()
    assert h.do(CloseRequested(deadline=30.0), at=1.0) == [Closed()]


def test_unsubscribe_leaves_and_a_subscribe_meanwhile_rejoins_after() -> None:
    h = Harness()
    h.joined({ORDERS: [0]})
    acts = h.do(Unsubscribe(), at=5.0)
    (flush,) = [a for a in acts if isinstance(a, FlushAcknowledgements)]
    h.do(SubscriptionChanged(frozenset({"audit"})))
    leave = h.heartbeat(h.do(AcknowledgementsFlushed(flush.token)))
    acts = h.answer(leave, member_epoch=-1)
    assert acts[0] == LeaveComplete()
    rejoin = h.heartbeat(acts).request
    assert (rejoin.member_epoch, rejoin.subscribed_topic_names) == (0, ("audit",))


def test_poll_expiry_leaves_then_a_poll_rejoins() -> None:
    h = Harness(ShareMemberConfig(group_id="queue", max_poll_interval_ms=10_000))
    h.joined({ORDERS: [0]})
    late = h.heartbeat(h.do(TimerTick(), at=9.0))  # in flight when the poll timer expires
    acts = h.do(TimerTick(), at=10.0)
    assert acts[0] == StopFetching(frozenset({tp("orders", 0)}))
    assert h.heartbeat(acts).request.member_epoch == -1
    assert h.member.state is S.STALE
    # One heartbeat at a time: the rejoin waits for the late answer, which it ignores.
    assert h.do(PollCalled(), at=11.0) == []
    rejoin = h.heartbeat(h.answer(late, member_epoch=1, assignment={AUDIT: [0]})).request
    assert rejoin.member_epoch == 0
    assert h.listener.seen[-1] == (S.STALE, S.JOINING)


def test_a_pattern_or_an_empty_member_id_is_refused_with_what_to_do() -> None:
    h = Harness()
    with pytest.raises(ValueError, match="topic names only"):
        h.do(SubscriptionChanged(frozenset(), pattern="orders-.*"))
    with pytest.raises(ValueError, match="own non-empty member id"):
        ShareMember(CONFIG, member_id="")
    with pytest.raises(ValueError, match="group_id"):
        ShareMemberConfig(group_id="")


def test_new_member_ids_are_distinct_uuids() -> None:
    first, second = new_member_id(), new_member_id()
    assert first != second
    assert uuid.UUID(first).version == 4


@pytest.mark.parametrize(
    ("code", "reaction"),
    [
        (ErrorCode.FENCED_MEMBER_EPOCH, ShareReaction.FENCED),
        (ErrorCode.UNKNOWN_MEMBER_ID, ShareReaction.FENCED),
        (ErrorCode.NOT_COORDINATOR, ShareReaction.REDISCOVER),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, ShareReaction.REDISCOVER),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ShareReaction.RETRY_WITH_BACKOFF),
        (ErrorCode.GROUP_ID_NOT_FOUND, ShareReaction.FATAL),
        (ErrorCode.GROUP_MAX_SIZE_REACHED, ShareReaction.FATAL),
        (ErrorCode.INVALID_REQUEST, ShareReaction.FATAL),
    ],
)
def test_the_reaction_table(code: ErrorCode, reaction: ShareReaction) -> None:
    assert share_reaction_for(code.value) is reaction


def test_an_unknown_code_is_fatal() -> None:
    assert share_reaction_for(9999) is ShareReaction.FATAL


def test_the_table_refuses_what_it_does_not_list_and_its_diagram_names_every_state() -> None:
    with pytest.raises(IllegalTransitionError):
        MACHINE.next(S.UNSUBSCRIBED, ShareTrigger.JOINED)
    diagram = MACHINE.render_mermaid()
    for state in ShareMemberState:
        assert state.name in diagram
    reached = {MACHINE.initial} | set(MACHINE.table.values())
    assert reached == set(ShareMemberState)


# --------------------------------------------------------------------- properties

_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("subscribe"), st.sampled_from([("orders",), ("orders", "audit")])),
        st.tuples(st.just("unsubscribe"), st.none()),
        st.tuples(st.just("poll"), st.none()),
        st.tuples(st.just("tick"), st.floats(0.0, 20.0)),
        st.tuples(
            st.just("answer"),
            st.one_of(
                st.sampled_from([0, 0, 0, 14, 15, 16, 25, 29, 69, 110]),
                st.dictionaries(st.sampled_from([ORDERS, AUDIT]), st.lists(st.integers(0, 3))),
            ),
        ),
        st.tuples(st.just("fail"), st.sampled_from(list(FailureKind))),
        st.tuples(st.just("flushed"), st.none()),
        st.tuples(st.just("names"), st.none()),
        st.tuples(st.just("rediscovered"), st.none()),
        st.tuples(st.just("close"), st.floats(0.0, 30.0)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_STEPS)
def test_random_event_sequences_keep_the_members_promises(steps: list[tuple[str, Any]]) -> None:
    """Whatever happens: only table transitions, fetching exactly what is applied, one
    heartbeat in flight at most, nothing after Closed, no heartbeat after FATAL."""
    h = Harness()
    fetching: set[TopicPartition] = set()
    in_flight: SendShareHeartbeat | None = None
    flush: FlushAcknowledgements | None = None
    closed = False
    epoch = 1
    for kind, arg in steps:
        if kind == "subscribe":
            event: object = SubscriptionChanged(frozenset(arg))
        elif kind == "unsubscribe":
            event = Unsubscribe()
        elif kind == "poll":
            event = PollCalled()
        elif kind == "tick":
            h.now += arg
            event = TimerTick()
        elif kind == "answer" and in_flight is not None:
            epoch += 1
            if isinstance(arg, int) and arg:
                response = ShareHeartbeatResponse(error_code=arg)
            else:
                assignment = arg if isinstance(arg, dict) else None
                response = ShareHeartbeatResponse(member_epoch=epoch, assignment=assignment)
            event = ShareHeartbeatResponseReceived(in_flight.seq, response)
            in_flight = None
        elif kind == "fail" and in_flight is not None:
            event = RequestFailed(in_flight.seq, arg)
            in_flight = None
        elif kind == "flushed" and flush is not None:
            event = AcknowledgementsFlushed(flush.token)
            flush = None
        elif kind == "names":
            event = MetadataUpdated(NAMES)
        elif kind == "rediscovered":
            event = CoordinatorRediscovered()
        elif kind == "close":
            event = CloseRequested(deadline=h.now + arg)
        else:
            continue
        state_before = h.member.state
        acts = h.do(event)
        if closed:
            assert acts == []
        for act in acts:
            match act:
                case StopFetching():
                    assert act.partitions <= fetching
                    fetching -= act.partitions
                case StartFetching():
                    assert not act.partitions & fetching
                    fetching |= act.partitions
                case SendShareHeartbeat() if not act.leave:
                    assert in_flight is None, "two heartbeats in flight"
                    assert state_before is not S.FATAL
                    in_flight = act
                case FlushAcknowledgements():
                    flush = act
                case Closed():
                    closed = True
        assert fetching == h.member.assignment
        if h.member.state in (S.FATAL, S.STALE, S.UNSUBSCRIBED):
            assert fetching == set()
        for old, new in h.listener.seen:
            assert new in MACHINE.table.values() or new is MACHINE.initial, (old, new)


def test_the_docs_diagram_matches_the_table() -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "share-member.md"
    text = doc.read_text()
    assert MACHINE.begin in text
    assert MACHINE.end in text
    assert MACHINE.replace_diagram(text) == text, (
        "docs/share-member.md is out of date with kgroup.membership.share.states.MACHINE; "
        "regenerate it with the command given in the doc"
    )
