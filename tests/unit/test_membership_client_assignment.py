"""The new-protocol member's client-side assignor duty (the KIP-848 draft's client-side mode)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, TypeVar

import pytest

from kgroup.error_codes import ErrorCode
from kgroup.errors import InvalidAssignmentError
from kgroup.membership import (
    CallbackCompleted,
    CallbackKind,
    FailureKind,
    HeartbeatResponse,
    HeartbeatResponseReceived,
    IllegalTransitionError,
    MemberConfig,
    MemberState,
    MetadataUpdated,
    RequestFailed,
    RunCallback,
    SendHeartbeat,
    SubscriptionChanged,
    TimerTick,
)
from kgroup.membership.consumer import (
    DUTY,
    ClientAssignmentComputed,
    ClientAssignor,
    ComputeAssignment,
    ConsumerMember,
    DutyState,
    DutyTrigger,
    InstallAssignmentResponseReceived,
    PrepareAssignmentResponse,
    PrepareAssignmentResponseReceived,
    PreparedMember,
    PreparedTopic,
    ReportClientAssignorError,
    SendInstallAssignment,
    SendPrepareAssignment,
    check_client_assignment,
)
from kgroup.testing.sim.engine import client_assignor_error
from kgroup.types import TopicIdPartition

T = uuid.UUID(int=0xA)
U = uuid.UUID(int=0xB)
ME = "member-1"
OTHER = "member-2"
ASSIGNOR = ClientAssignor("py-sticky", min_version=1, max_version=3, metadata_version=3)
_A = TypeVar("_A")


def tip(topic: uuid.UUID, p: int) -> TopicIdPartition:
    return TopicIdPartition(topic, p)


def only(acts: list[Any], cls: type[_A]) -> list[_A]:
    return [a for a in acts if isinstance(a, cls)]


STATE = PrepareAssignmentResponse(
    group_epoch=7,
    assignor_name="py-sticky",
    members=(
        PreparedMember(ME, 5, frozenset({T}), metadata_version=3),
        PreparedMember(OTHER, 5, frozenset({T, U}), metadata_version=2),
    ),
    topics=(PreparedTopic(T, "t", 2), PreparedTopic(U, "u", 1)),
)
GOOD = {ME: frozenset({tip(T, 0)}), OTHER: frozenset({tip(T, 1), tip(U, 0)})}


def duty(h: Harness) -> DutyState:
    # A call, so that mypy does not narrow the property across events.
    return h.m.duty


class Harness:
    """A member in the group at epoch 5, with a client assignor configured."""

    def __init__(self, **config: Any) -> None:
        config.setdefault("client_assignors", (ASSIGNOR,))
        self.m = ConsumerMember(
            MemberConfig(group_id="g", member_id=ME, session_timeout_ms=3_600_000, **config),
            random=lambda: 0.5,
        )
        self.now = 0.0
        self.log: list[Any] = []
        self.hb: SendHeartbeat | None = None
        self.first: SendHeartbeat | None = None
        self.do(MetadataUpdated({T: "t", U: "u"}))
        self.do(SubscriptionChanged(frozenset({"t"})))
        self.respond(5, {T: [0]})
        cb = next(a for a in self.log if isinstance(a, RunCallback))
        self.do(CallbackCompleted(CallbackKind.ASSIGNED, cb.token))
        self.respond(5)
        assert self.m.state is MemberState.STABLE

    def tick(self) -> list[Any]:
        deadline = self.m.next_deadline()
        assert deadline is not None
        self.now = max(self.now, deadline)
        return self.do(TimerTick())

    def do(self, event: Any) -> list[Any]:
        acts = self.m.handle(event, self.now)
        self.log = [*self.log, *acts]
        for a in acts:
            if isinstance(a, SendHeartbeat):
                self.first = self.first or a
                self.hb = a
        return acts

    def respond(
        self, epoch: int, assignment: Mapping[uuid.UUID, list[int]] | None = None, **kw: Any
    ) -> list[Any]:
        if self.hb is None:
            self.tick()
        hb = self.hb
        assert hb is not None
        self.hb = None
        resp = HeartbeatResponse(member_id=ME, member_epoch=epoch, assignment=assignment, **kw)
        return self.do(HeartbeatResponseReceived(hb.seq, resp))

    def asked(self, epoch: int = 5) -> SendPrepareAssignment:
        [prep] = only(self.respond(epoch, should_compute_assignment=True), SendPrepareAssignment)
        return prep

    def computing(self) -> ComputeAssignment:
        prep = self.asked()
        [compute] = only(
            self.do(PrepareAssignmentResponseReceived(prep.seq, STATE)), ComputeAssignment
        )
        return compute


def test_client_assignors_go_out_in_full_heartbeats_only() -> None:
    h = Harness()
    assert h.first is not None
    assert h.first.request.client_assignors == (ASSIGNOR,)
    [hb] = only(h.tick(), SendHeartbeat)
    assert hb.request.client_assignors is None


def test_asked_to_compute_the_member_prepares_with_its_epoch_once() -> None:
    h = Harness()
    prep = h.asked()
    assert (prep.request.group_id, prep.request.member_id, prep.request.member_epoch) == (
        "g",
        ME,
        5,
    )
    assert duty(h) is DutyState.PREPARING
    # Still flagged while the computation runs: no second PrepareAssignment.
    assert only(h.respond(5, should_compute_assignment=True), SendPrepareAssignment) == []


def test_a_member_without_client_assignors_ignores_the_flag() -> None:
    h = Harness(client_assignors=())
    assert only(h.respond(5, should_compute_assignment=True), SendPrepareAssignment) == []
    assert duty(h) is DutyState.IDLE


def test_prepared_state_is_computed_then_installed_for_its_group_epoch() -> None:
    h = Harness()
    compute = h.computing()
    assert compute.state == STATE
    assert duty(h) is DutyState.COMPUTING
    [install] = only(h.do(ClientAssignmentComputed(compute.token, GOOD)), SendInstallAssignment)
    req = install.request
    assert (req.member_epoch, req.group_epoch, req.error) == (5, 7, 0)
    assert dict(req.members) == GOOD
    h.do(InstallAssignmentResponseReceived(install.seq))
    assert duty(h) is DutyState.IDLE


def test_an_assignor_error_installs_the_error_and_keeps_the_previous_target() -> None:
    h = Harness()
    compute = h.computing()
    acts = h.do(ClientAssignmentComputed(compute.token, None, "topologies differ"))
    [install] = only(acts, SendInstallAssignment)
    assert install.request.error != 0
    assert install.request.members == ()
    assert only(acts, ReportClientAssignorError) == []


@pytest.mark.parametrize(
    ("assignment", "violation"),
    [
        ({**GOOD, "ghost": frozenset()}, "UNKNOWN_MEMBER"),
        ({ME: frozenset({tip(T, 0), tip(T, 9)}), OTHER: GOOD[OTHER]}, "UNKNOWN_PARTITION"),
        (
            {ME: frozenset({tip(T, 0), tip(U, 0)}), OTHER: frozenset({tip(T, 1)})},
            "UNSUBSCRIBED_TOPIC",
        ),
        (
            {ME: frozenset({tip(T, 0)}), OTHER: frozenset({tip(T, 0), tip(T, 1), tip(U, 0)})},
            "DUPLICATE_PARTITION",
        ),
        ({ME: frozenset({tip(T, 0)}), OTHER: frozenset({tip(T, 1)})}, "MISSING_PARTITION"),
    ],
)
def test_invalid_assignor_output_is_reported_and_never_installed(
    assignment: dict[str, frozenset[TopicIdPartition]], violation: str
) -> None:
    assert check_client_assignment(STATE, assignment) is not None
    h = Harness()
    compute = h.computing()
    acts = h.do(ClientAssignmentComputed(compute.token, assignment))
    [report] = only(acts, ReportClientAssignorError)
    assert (report.assignor_name, report.violation) == ("py-sticky", violation)
    [install] = only(acts, SendInstallAssignment)
    assert install.request.error != 0
    assert install.request.members == ()
    assert h.m.state is MemberState.STABLE  # not fatal
    # What the runtime raises from poll: the typed error naming the broken rule.
    error = client_assignor_error(report)
    assert isinstance(error, InvalidAssignmentError)
    assert error.violation.name == violation
    assert error.assignor == "py-sticky"


def test_a_failed_prepare_is_abandoned_and_asked_again_on_the_next_heartbeat() -> None:
    h = Harness()
    prep = h.asked()
    stale = PrepareAssignmentResponse(error_code=ErrorCode.STALE_MEMBER_EPOCH)
    assert h.do(PrepareAssignmentResponseReceived(prep.seq, stale)) == []
    assert duty(h) is DutyState.IDLE
    again = h.asked(6)
    assert again.request.member_epoch == 6


def test_a_prepare_lost_on_the_network_is_abandoned() -> None:
    h = Harness()
    prep = h.asked()
    h.do(RequestFailed(prep.seq, FailureKind.TIMEOUT))
    assert duty(h) is DutyState.IDLE
    assert h.hb is None or h.hb.seq != prep.seq  # the heartbeat flow is untouched


def test_a_stale_install_is_resent_with_the_new_epoch_after_the_next_heartbeat() -> None:
    h = Harness()
    compute = h.computing()
    [install] = only(h.do(ClientAssignmentComputed(compute.token, GOOD)), SendInstallAssignment)
    h.do(InstallAssignmentResponseReceived(install.seq, ErrorCode.STALE_MEMBER_EPOCH))
    assert duty(h) is DutyState.INSTALL_STALE
    [again] = only(h.respond(6), SendInstallAssignment)
    assert again.request.member_epoch == 6
    assert again.request.group_epoch == 7  # computed for epoch 7, installed as such
    assert again.request.members == install.request.members


def test_a_fence_abandons_the_computation_and_its_late_result_is_dropped() -> None:
    h = Harness()
    compute = h.computing()
    h.respond(5, error_code=ErrorCode.FENCED_MEMBER_EPOCH)
    assert duty(h) is DutyState.IDLE
    assert only(h.do(ClientAssignmentComputed(compute.token, GOOD)), SendInstallAssignment) == []


def test_a_duplicated_prepare_answer_starts_one_computation() -> None:
    h = Harness()
    prep = h.asked()
    assert (
        len(only(h.do(PrepareAssignmentResponseReceived(prep.seq, STATE)), ComputeAssignment)) == 1
    )
    assert only(h.do(PrepareAssignmentResponseReceived(prep.seq, STATE)), ComputeAssignment) == []


def test_a_join_answered_at_epoch_zero_heartbeats_on_the_interval_not_at_once() -> None:
    # Client-side mode: the coordinator has no assignment for a new member
    # until one is computed and installed, and answers its join at epoch 0.
    m = ConsumerMember(MemberConfig(group_id="g", member_id=ME), random=lambda: 0.5)
    [join] = only(m.handle(SubscriptionChanged(frozenset({"t"})), 0.0), SendHeartbeat)
    resp = HeartbeatResponse(member_id=ME, member_epoch=0, heartbeat_interval_ms=1000)
    assert only(m.handle(HeartbeatResponseReceived(join.seq, resp), 0.01), SendHeartbeat) == []
    assert m.state is MemberState.JOINING
    assert m.next_deadline() == pytest.approx(1.0)
    [again] = only(m.handle(TimerTick(), 1.0), SendHeartbeat)
    assert again.request.member_epoch == 0
    assert again.request.rebalance_timeout_ms is not None  # still a full join heartbeat


def test_the_duty_table_refuses_an_illegal_step() -> None:
    with pytest.raises(IllegalTransitionError):
        DUTY.next(DutyState.IDLE, DutyTrigger.COMPUTED)


def test_client_assignor_values_are_checked() -> None:
    with pytest.raises(ValueError, match="metadata_version"):
        ClientAssignor("x", min_version=2, max_version=3, metadata_version=1)
    with pytest.raises(ValueError, match="unique"):
        MemberConfig(group_id="g", member_id=ME, client_assignors=(ASSIGNOR, ASSIGNOR))


def test_every_heartbeat_at_epoch_zero_carries_the_join_fields() -> None:
    # Found by the simulator: a member that took an (empty) assignment at epoch 0
    # then sent a heartbeat without the join fields, which the broker refuses
    # with INVALID_REQUEST (fatal).
    m = ConsumerMember(MemberConfig(group_id="g", member_id=ME), random=lambda: 0.5)
    [join] = only(m.handle(SubscriptionChanged(frozenset({"t"})), 0.0), SendHeartbeat)
    resp = HeartbeatResponse(
        member_id=ME, member_epoch=0, heartbeat_interval_ms=1000, assignment={}
    )
    acts = m.handle(HeartbeatResponseReceived(join.seq, resp), 0.01)
    [cb] = only(acts, RunCallback)
    sent = only(m.handle(CallbackCompleted(CallbackKind.ASSIGNED, cb.token), 0.02), SendHeartbeat)
    sent += only(m.handle(TimerTick(), 2.0), SendHeartbeat)
    assert sent
    for hb in sent:
        assert hb.request.member_epoch == 0
        assert hb.request.rebalance_timeout_ms is not None
        assert hb.request.subscribed_topic_names == ("t",)
        assert hb.request.topic_partitions == frozenset()
