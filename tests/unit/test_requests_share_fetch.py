"""ShareFetch and ShareAcknowledge: the share session's plans on the wire, responses parsed.

Plans come from a real :class:`~kgroup.dataplane.share.session.ShareSession`;
each built request goes through a whole frame encode / decode.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from request_helpers import at, highest, lowest, wire

from kgroup.admin.share import auto_offset_reset_value
from kgroup.dataplane.share.acknowledgements import (
    AcknowledgeType,
    PendingAcknowledgements,
    outcomes,
)
from kgroup.dataplane.share.inflight import AcquiredRange
from kgroup.dataplane.share.session import AcquireMode, FetchLimits, ShareSession
from kgroup.errors import UnsupportedVersionError
from kgroup.protocol import ApiKey, response_module
from kgroup.protocol.cluster import BrokerAddress
from kgroup.protocol.requests import incremental_alter_configs, share_acknowledge, share_fetch
from kgroup.types import TopicIdPartition

T1 = uuid.UUID("00000000-0000-4000-8000-000000000001")
T2 = uuid.UUID("00000000-0000-4000-8000-000000000002")
A0, A1, B0 = TopicIdPartition(T1, 0), TopicIdPartition(T1, 1), TopicIdPartition(T2, 0)
NO_TIME = datetime.timedelta(0)
LIMITS = FetchLimits(max_wait_ms=250, min_bytes=2, max_bytes=4096, max_records=7, batch_size=3)


def _open_session() -> ShareSession:
    session = ShareSession(node=1, member_id="m")
    session.set_partitions({A0, A1})
    session.fetch(LIMITS)
    session.on_response(0, fetch=True)
    return session


def _acks(*pairs: tuple[int, AcknowledgeType]) -> Any:
    pending = PendingAcknowledgements()
    for offset, kind in pairs:
        pending.add(1, A0, offset, kind)
    return pending.take_all(1)


@pytest.mark.parametrize("versions", [lowest, highest])
def test_an_opening_fetch_names_every_partition_by_topic_id(versions: Any) -> None:
    session = ShareSession(node=1, member_id="m")
    session.set_partitions({A0, A1, B0})
    plan = session.fetch(LIMITS)
    sent = wire(share_fetch.build(versions(ApiKey.SHARE_FETCH), plan, "queue"))
    assert (sent.group_id, sent.member_id, sent.share_session_epoch) == ("queue", "m", 0)
    assert sent.max_wait == datetime.timedelta(milliseconds=250)
    assert (sent.min_bytes, sent.max_bytes, sent.max_records, sent.batch_size) == (2, 4096, 7, 3)
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in sent.topics] == [
        (T1, [0, 1]),
        (T2, [0]),
    ]
    assert all(p.acknowledgement_batches == () for t in sent.topics for p in t.partitions)
    assert sent.forgotten_topics_data == ()


@pytest.mark.parametrize("versions", [lowest, highest])
def test_an_incremental_fetch_carries_acknowledgements_and_forgotten_partitions(
    versions: Any,
) -> None:
    session = _open_session()
    session.set_partitions({A0})
    acks = _acks(
        (5, AcknowledgeType.ACCEPT),
        (6, AcknowledgeType.ACCEPT),
        (8, AcknowledgeType.RELEASE),
        (9, AcknowledgeType.REJECT),
    )
    plan = session.fetch(LIMITS, acks)
    sent = wire(share_fetch.build(versions(ApiKey.SHARE_FETCH), plan, "queue"))
    assert sent.share_session_epoch == 1
    (topic,) = sent.topics
    (partition,) = topic.partitions
    assert (topic.topic_id, partition.partition_index) == (T1, 0)
    assert [
        (b.first_offset, b.last_offset, b.acknowledge_types)
        for b in partition.acknowledgement_batches
    ] == [(5, 6, (1,)), (8, 9, (2, 3))]
    (forgotten,) = sent.forgotten_topics_data
    assert (forgotten.topic_id, forgotten.partitions) == (T1, (1,))


def test_v2_carries_the_acquire_mode_and_the_renew_flag() -> None:
    session = _open_session()
    limits = FetchLimits(max_records=10, acquire_mode=AcquireMode.RECORD_LIMIT)
    plan = session.fetch(limits, _acks((3, AcknowledgeType.RENEW)))
    sent = wire(share_fetch.build(at(ApiKey.SHARE_FETCH, 2), plan, "queue"))
    assert (sent.share_acquire_mode, sent.is_renew_ack) == (1, True)
    plain = ShareSession(node=1, member_id="m")
    plain.set_partitions({A0})
    sent = wire(share_fetch.build(at(ApiKey.SHARE_FETCH, 2), plain.fetch(LIMITS), "queue"))
    assert (sent.share_acquire_mode, sent.is_renew_ack) == (0, False)


def test_v1_refuses_what_only_v2_can_say() -> None:
    renewing = _open_session().fetch(LIMITS, _acks((3, AcknowledgeType.RENEW)))
    with pytest.raises(UnsupportedVersionError, match="KIP-1222"):
        share_fetch.build(at(ApiKey.SHARE_FETCH, 1), renewing, "queue")
    strict = FetchLimits(acquire_mode=AcquireMode.RECORD_LIMIT)
    with pytest.raises(UnsupportedVersionError, match="KIP-1206"):
        share_fetch.build(at(ApiKey.SHARE_FETCH, 1), _open_session().fetch(strict), "queue")
    ack_plan = _open_session().acknowledge(_acks((3, AcknowledgeType.RENEW)))
    assert ack_plan is not None
    with pytest.raises(UnsupportedVersionError, match="KIP-1222"):
        share_acknowledge.build(at(ApiKey.SHARE_ACKNOWLEDGE, 1), ack_plan, "queue")


def _fetch_response(version: int, **overrides: Any) -> Any:
    module = response_module(ApiKey.SHARE_FETCH, version)
    leader = module.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    fields: dict[str, Any] = {
        "throttle_time": datetime.timedelta(milliseconds=5),
        "error_code": ErrorCode.none,
        "acquisition_lock_timeout": datetime.timedelta(seconds=30),
        "responses": (
            module.ShareFetchableTopicResponse(
                topic_id=T1,
                partitions=(
                    module.PartitionData(
                        partition_index=0,
                        error_code=ErrorCode.none,
                        acknowledge_error_code=int(ErrorCode.invalid_record_state),
                        acknowledge_error_message="lock expired",
                        current_leader=leader,
                        records=b"\x00batches",
                        acquired_records=(
                            module.AcquiredRecords(
                                first_offset=10, last_offset=12, delivery_count=1
                            ),
                            module.AcquiredRecords(
                                first_offset=14, last_offset=14, delivery_count=3
                            ),
                        ),
                    ),
                    module.PartitionData(
                        partition_index=1,
                        error_code=ErrorCode.not_leader_or_follower,
                        error_message="moved",
                        acknowledge_error_code=0,
                        current_leader=module.LeaderIdAndEpoch(leader_id=2, leader_epoch=7),
                        records=None,
                        acquired_records=(),
                    ),
                ),
            ),
        ),
        "node_endpoints": (module.NodeEndpoint(node_id=2, host="b2", port=9093, rack="r1"),),
    }
    fields.update(overrides)
    return module.ShareFetchResponse(**fields)


@pytest.mark.parametrize("version", [1, 2])
def test_a_fetch_response_gives_records_acquired_ranges_errors_and_the_new_leader(
    version: int,
) -> None:
    result = share_fetch.parse(share_fetch.narrow(_fetch_response(version)))
    assert (result.error_code, result.error_message) == (0, None)
    assert (result.acquisition_lock_timeout_ms, result.throttle_time_ms) == (30_000, 5)
    fetched, moved = result.partitions
    assert fetched == share_fetch.ShareFetchPartition(
        partition=A0,
        error_code=0,
        error_message=None,
        acknowledge_error_code=int(ErrorCode.invalid_record_state),
        acknowledge_error_message="lock expired",
        current_leader=share_fetch.CurrentLeader(-1, -1),
        records=b"\x00batches",
        acquired=(
            share_fetch.AcquiredRecords(10, 12, 1),
            share_fetch.AcquiredRecords(14, 14, 3),
        ),
    )
    # The data path's own range type takes the parsed fields as they are.
    assert [
        AcquiredRange(a.first_offset, a.last_offset, a.delivery_count) for a in fetched.acquired
    ] == [AcquiredRange(10, 12, 1), AcquiredRange(14, 14, 3)]
    assert (moved.partition, moved.error_code, moved.error_message, moved.records) == (
        A1,
        int(ErrorCode.not_leader_or_follower),
        "moved",
        b"",
    )
    assert moved.current_leader == share_fetch.CurrentLeader(2, 7)
    assert result.node_endpoints == {2: BrokerAddress(2, "b2", 9093, "r1")}
    assert result.acknowledge_error_codes() == {A0: int(ErrorCode.invalid_record_state), A1: 0}


def test_a_fetch_responses_session_error_is_the_top_level_code() -> None:
    response = _fetch_response(
        2,
        error_code=ErrorCode.invalid_share_session_epoch,
        error_message="bad epoch",
        responses=(),
        node_endpoints=(),
    )
    result = share_fetch.parse(share_fetch.narrow(response))
    assert (result.error_code, result.error_message) == (
        int(ErrorCode.invalid_share_session_epoch),
        "bad epoch",
    )
    assert (result.partitions, dict(result.node_endpoints)) == ((), {})


@pytest.mark.parametrize("versions", [lowest, highest])
def test_an_acknowledge_carries_every_partition_owed_and_closes_at_epoch_minus_one(
    versions: Any,
) -> None:
    session = _open_session()
    pending = PendingAcknowledgements()
    pending.add(1, B0, 0, AcknowledgeType.ACCEPT)
    pending.add(1, A1, 4, AcknowledgeType.REJECT)
    pending.add(1, A0, 2, AcknowledgeType.GAP)
    plan = session.acknowledge(pending.take_all(1))
    assert plan is not None
    sent = wire(share_acknowledge.build(versions(ApiKey.SHARE_ACKNOWLEDGE), plan, "queue"))
    assert (sent.group_id, sent.member_id, sent.share_session_epoch) == ("queue", "m", 1)
    assert [
        (
            t.topic_id,
            [
                (
                    p.partition_index,
                    [
                        (b.first_offset, b.last_offset, b.acknowledge_types)
                        for b in p.acknowledgement_batches
                    ],
                )
                for p in t.partitions
            ],
        )
        for t in sent.topics
    ] == [(T1, [(0, [(2, 2, (0,))]), (1, [(4, 4, (3,))])]), (T2, [(0, [(0, 0, (1,))])])]
    session.on_response(0, fetch=False)
    closing = session.close()
    assert closing is not None
    sent = wire(share_acknowledge.build(versions(ApiKey.SHARE_ACKNOWLEDGE), closing, "queue"))
    assert (sent.share_session_epoch, sent.topics) == (-1, ())


@pytest.mark.parametrize("version", [1, 2])
def test_an_acknowledge_response_pairs_with_what_was_sent(version: int) -> None:
    module = response_module(ApiKey.SHARE_ACKNOWLEDGE, version)
    leader = module.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    fields: dict[str, Any] = {
        "throttle_time": NO_TIME,
        "error_code": ErrorCode.none,
        "responses": (
            module.ShareAcknowledgeTopicResponse(
                topic_id=T1,
                partitions=(
                    module.PartitionData(
                        partition_index=0, error_code=ErrorCode.none, current_leader=leader
                    ),
                    module.PartitionData(
                        partition_index=1,
                        error_code=ErrorCode.invalid_record_state,
                        error_message="not acquired",
                        current_leader=leader,
                    ),
                ),
            ),
        ),
        "node_endpoints": (),
    }
    if version >= 2:
        fields["acquisition_lock_timeout"] = datetime.timedelta(seconds=15)
    result = share_acknowledge.parse(
        share_acknowledge.narrow(module.ShareAcknowledgeResponse(**fields))
    )
    assert result.error_code == 0
    assert result.acquisition_lock_timeout_ms == (15_000 if version >= 2 else None)
    ok, bad = result.partitions
    assert (ok.partition, ok.error_code) == (A0, 0)
    assert (bad.partition, bad.error_code, bad.error_message) == (
        A1,
        int(ErrorCode.invalid_record_state),
        "not acquired",
    )
    sent = {A0: _acks((1, AcknowledgeType.ACCEPT))[A0], A1: _acks((2, AcknowledgeType.ACCEPT))[A0]}
    paired = outcomes(sent, result.acknowledge_error_codes())
    assert [(o.partition, o.succeeded) for o in paired] == [(A0, True), (A1, False)]


# ------------------------------------------------------- share group configs


@pytest.mark.parametrize("versions", [lowest, highest])
def test_incremental_alter_configs_groups_keys_by_resource(versions: Any) -> None:
    group = incremental_alter_configs.ConfigResourceType.GROUP
    alterations = [
        incremental_alter_configs.ConfigAlteration(
            group, "q", "share.auto.offset.reset", "earliest"
        ),
        incremental_alter_configs.ConfigAlteration(
            group,
            "q",
            "share.record.lock.duration.ms",
            None,
            incremental_alter_configs.AlterConfigOp.DELETE,
        ),
        incremental_alter_configs.ConfigAlteration(group, "r", "share.auto.offset.reset", "latest"),
    ]
    built = incremental_alter_configs.build(versions(ApiKey.INCREMENTAL_ALTER_CONFIGS), alterations)
    sent = wire(built)
    assert sent.validate_only is False
    assert [
        (
            r.resource_type,
            r.resource_name,
            [(c.name, c.config_operation, c.value) for c in r.configs],
        )
        for r in sent.resources
    ] == [
        (
            32,
            "q",
            [
                ("share.auto.offset.reset", 0, "earliest"),
                ("share.record.lock.duration.ms", 1, None),
            ],
        ),
        (32, "r", [("share.auto.offset.reset", 0, "latest")]),
    ]


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs_returns_each_resources_error(version: int) -> None:
    module = response_module(ApiKey.INCREMENTAL_ALTER_CONFIGS, version)
    response = module.IncrementalAlterConfigsResponse(
        throttle_time=NO_TIME,
        responses=(
            module.AlterConfigsResourceResponse(
                error_code=ErrorCode.none, error_message=None, resource_type=32, resource_name="q"
            ),
            module.AlterConfigsResourceResponse(
                error_code=ErrorCode.invalid_config,
                error_message="must be in the range 15000 to 60000 inclusive.",
                resource_type=32,
                resource_name="r",
            ),
        ),
    )
    ok, refused = incremental_alter_configs.parse(incremental_alter_configs.narrow(response))
    group = incremental_alter_configs.ConfigResourceType.GROUP
    assert ok == incremental_alter_configs.AlterResult(group, "q", 0, None)
    assert refused == incremental_alter_configs.AlterResult(
        group, "r", int(ErrorCode.invalid_config), "must be in the range 15000 to 60000 inclusive."
    )


@pytest.mark.parametrize(
    ("reset", "text"),
    [
        ("earliest", "earliest"),
        ("latest", "latest"),
        (datetime.timedelta(hours=1), "by_duration:PT3600S"),
        (datetime.timedelta(seconds=1, milliseconds=5), "by_duration:PT1.005S"),
    ],
)
def test_share_auto_offset_reset_is_written_as_the_broker_reads_it(reset: Any, text: str) -> None:
    assert auto_offset_reset_value(reset) == text


def test_a_negative_reset_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="not negative"):
        auto_offset_reset_value(datetime.timedelta(seconds=-1))
