"""The pieces of kgroup.membership.common both members are built from."""

from __future__ import annotations

import dataclasses
import enum

import pytest

from kgroup.membership import (
    ClassicHeartbeatResponseReceived,
    Closed,
    ErrorCodeReceived,
    HeartbeatResponse,
    HeartbeatResponseReceived,
    InstallAssignmentResponseReceived,
    JoinGroupResponse,
    JoinGroupResponseReceived,
    LeaveGroupResponseReceived,
    ResponseReceived,
    SendHeartbeat,
    SendInstallAssignment,
    SendJoinGroup,
    SendPrepareAssignment,
    SendRequest,
    SendSyncGroup,
    SyncGroupResponseReceived,
)
from kgroup.membership.common.lifecycle import Lifecycle
from kgroup.membership.common.transitions import from_each


class _Light(enum.Enum):
    RED = "red"
    AMBER = "amber"
    GREEN = "green"
    OFF = "off"


class _Switch(enum.Enum):
    CUT = "cut"
    FAULT = "fault"


def test_from_each_gives_every_state_the_same_edges_in_enum_order() -> None:
    table = from_each(
        frozenset({_Light.GREEN, _Light.RED, _Light.AMBER}),
        {_Switch.CUT: _Light.OFF, _Switch.FAULT: _Light.AMBER},
    )
    assert list(table) == [
        (_Light.RED, _Switch.CUT),
        (_Light.RED, _Switch.FAULT),
        (_Light.AMBER, _Switch.CUT),
        (_Light.AMBER, _Switch.FAULT),
        (_Light.GREEN, _Switch.CUT),
        (_Light.GREEN, _Switch.FAULT),
    ]
    assert set(table.values()) == {_Light.OFF, _Light.AMBER}
    assert table[(_Light.GREEN, _Switch.FAULT)] is _Light.AMBER


def test_from_each_of_no_states_is_empty() -> None:
    assert from_each((), {_Switch.CUT: _Light.OFF}) == {}


@pytest.mark.parametrize(
    "cls",
    [SendJoinGroup, SendSyncGroup, SendHeartbeat, SendPrepareAssignment, SendInstallAssignment],
)
def test_every_request_action_is_a_frozen_send_request_with_seq_first(
    cls: type[SendRequest[object]],
) -> None:
    assert issubclass(cls, SendRequest)
    assert [f.name for f in dataclasses.fields(cls)][:2] == ["seq", "request"]
    assert "__dict__" not in dir(cls)  # still slotted


@pytest.mark.parametrize(
    ("cls", "base"),
    [
        (JoinGroupResponseReceived, ResponseReceived),
        (SyncGroupResponseReceived, ResponseReceived),
        (HeartbeatResponseReceived, ResponseReceived),
        (ClassicHeartbeatResponseReceived, ErrorCodeReceived),
        (LeaveGroupResponseReceived, ErrorCodeReceived),
        (InstallAssignmentResponseReceived, ErrorCodeReceived),
    ],
)
def test_every_response_event_echoes_seq_through_its_shared_base(
    cls: type[ResponseReceived[object] | ErrorCodeReceived], base: type
) -> None:
    assert issubclass(cls, base)
    assert dataclasses.fields(cls)[0].name == "seq"


def test_envelopes_compare_by_class_and_stay_frozen() -> None:
    joined = JoinGroupResponseReceived(3, JoinGroupResponse())
    assert joined == JoinGroupResponseReceived(seq=3, response=JoinGroupResponse())
    assert joined != ResponseReceived(3, JoinGroupResponse())
    left: ErrorCodeReceived = LeaveGroupResponseReceived(1)
    assert left != ClassicHeartbeatResponseReceived(1)
    beat = HeartbeatResponseReceived(1, HeartbeatResponse())
    with pytest.raises(dataclasses.FrozenInstanceError):
        beat.seq = 2  # type: ignore[misc]
    assert SendHeartbeat(4, None, leave=True).leave  # type: ignore[arg-type]


def test_finish_close_marks_the_lifecycle_closed_and_returns_the_closed_action() -> None:
    life = Lifecycle(max_poll_interval_ms=1000)
    assert not life.closed
    assert life.begin_close(deadline=5.0)
    assert not life.closed
    assert life.finish_close(timed_out=True) == Closed(True)
    assert life.closed
