"""ConsumerGroupHeartbeat: the member's heartbeat values to kio's messages and back."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kgroup.membership import HeartbeatRequest
from kgroup.protocol import (
    ApiKey,
    VersionRange,
    decode_request,
    encode_request,
    negotiate,
    response_class,
)
from kgroup.protocol.requests.consumer_group_heartbeat import build as _heartbeat_request
from kgroup.protocol.requests.consumer_group_heartbeat import parse as _heartbeat_response
from kgroup.types import TopicIdPartition

TOPIC = uuid.UUID("3f1e7d0a-0000-4000-8000-000000000001")


def _versions(heartbeat_max: int) -> Any:
    return negotiate({ApiKey.CONSUMER_GROUP_HEARTBEAT: VersionRange(0, heartbeat_max)})


def _join(regex: str | None) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id="g",
        member_id="m",
        member_epoch=0,
        rebalance_timeout_ms=3000,
        subscribed_topic_names=() if regex else ("t",),
        subscribed_topic_regex=regex,
        topic_partitions=frozenset(),
    )


def test_join_request_v1_carries_every_field_and_survives_the_wire() -> None:
    request = _heartbeat_request(_versions(1), _join("t-.*"))
    sent: Any = decode_request(encode_request(request, 7, "kgroup")).request
    assert sent.__version__ == 1
    assert sent.subscribed_topic_regex == "t-.*"
    assert sent.rebalance_timeout == datetime.timedelta(seconds=3)
    assert sent.topic_partitions == ()


def test_v0_has_no_regex_field() -> None:
    request: Any = _heartbeat_request(_versions(0), _join(None))
    assert request.__version__ == 0
    assert not hasattr(request, "subscribed_topic_regex")


def test_unchanged_fields_are_null_and_owned_partitions_go_by_topic_id() -> None:
    owned = frozenset({TopicIdPartition(TOPIC, 1), TopicIdPartition(TOPIC, 0)})
    request: Any = _heartbeat_request(
        _versions(1),
        HeartbeatRequest(group_id="g", member_id="m", member_epoch=4, topic_partitions=owned),
    )
    assert request.subscribed_topic_names is None
    assert request.subscribed_topic_regex is None
    assert request.rebalance_timeout == datetime.timedelta(milliseconds=-1)
    assert [(tp.topic_id, tp.partitions) for tp in request.topic_partitions] == [(TOPIC, (0, 1))]


def test_response_conversion() -> None:
    module: Any = __import__(
        response_class(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1).__module__, fromlist=["_"]
    )
    response = module.ConsumerGroupHeartbeatResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        member_id="m",
        member_epoch=5,
        heartbeat_interval=datetime.timedelta(milliseconds=500),
        assignment=module.Assignment(
            topic_partitions=(module.TopicPartitions(topic_id=TOPIC, partitions=(2, 3)),)
        ),
    )
    converted = _heartbeat_response(response)
    assert converted.member_epoch == 5
    assert converted.heartbeat_interval_ms == 500
    assert converted.assignment == {TOPIC: (2, 3)}
    assert _heartbeat_response(
        module.ConsumerGroupHeartbeatResponse(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.fenced_member_epoch,
            member_epoch=0,
            heartbeat_interval=datetime.timedelta(0),
        )
    ).error_code == int(ErrorCode.fenced_member_epoch)
