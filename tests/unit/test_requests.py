"""kgroup.protocol.requests: every request at its lowest and highest version, every parser.

Each built request goes through a full frame encode / decode, so a field that
a version lacks (or a value kio cannot encode) fails here rather than on the wire.
"""

from __future__ import annotations

import dataclasses
import datetime
import subprocess
import sys
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from request_helpers import assert_narrows_exactly_the_negotiated_versions
from request_helpers import at as _at
from request_helpers import highest as _highest
from request_helpers import lowest as _lowest
from request_helpers import wire as _wire

from kgroup.errors import (
    BrokerError,
    ClassicPayloadError,
    CoordinatorNotAvailableError,
    KafkaProtocolError,
    NotCoordinatorError,
)
from kgroup.membership import (
    GroupMember,
    JoinGroupRequest,
    JoinProtocol,
    MemberAssignment,
    MemberSubscription,
    SendClassicHeartbeat,
    SendLeaveGroup,
    SyncGroupRequest,
)
from kgroup.membership.share import ShareHeartbeatRequest, ShareHeartbeatResponse
from kgroup.protocol import (
    ApiKey,
    response_module,
)
from kgroup.protocol.classic_payload import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kgroup.protocol.cluster import BrokerAddress
from kgroup.protocol.negotiation import NegotiatedVersions
from kgroup.protocol.requests import (
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    delete_groups,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    join_group,
    leave_group,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    sync_group,
)
from kgroup.protocol.requests.offset_for_leader_epoch import EpochEnd, EpochQuery
from kgroup.types import TopicPartition

TOPIC_ID = uuid.UUID("3f1e7d0a-0000-4000-8000-000000000003")
NO_TIME = datetime.timedelta(0)


def _responses(api: ApiKey, version: int) -> Any:
    return response_module(api, version)


# ------------------------------------------------------------------ narrowing


def test_narrow_refuses_another_apis_response() -> None:
    module = _responses(ApiKey.HEARTBEAT, 4)
    other = module.HeartbeatResponse(throttle_time=NO_TIME, error_code=ErrorCode.none)
    with pytest.raises(KafkaProtocolError, match="ConsumerGroupHeartbeat"):
        consumer_group_heartbeat.narrow(other)
    assert heartbeat.narrow(other) is other


def test_a_request_module_imports_only_the_response_versions_it_meets() -> None:
    # Each module used to import every negotiable version's response classes:
    # about 2 MiB of kio modules in a consumer that negotiates one version per API.
    code = (
        "import sys\n"
        "from kgroup.protocol import ApiKey, response_class\n"
        "from kgroup.protocol.requests import offset_commit\n"
        "cls = response_class(ApiKey.OFFSET_COMMIT, 10)\n"
        "offset_commit.narrow(cls.__new__(cls))\n"
        "print(*sorted(m for m in sys.modules if m.startswith('kio.schema.offset_commit.v')"
        " and m.endswith('.response')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.split() == ["kio.schema.offset_commit.v10.response"]


def test_api_versions_narrow_accepts_every_version_kgroup_tries() -> None:
    for version in range(5):
        module = _responses(ApiKey.API_VERSIONS, version)
        fields: dict[str, Any] = {"error_code": ErrorCode.none, "api_keys": ()}
        if version >= 1:
            fields["throttle_time"] = NO_TIME
        answer = module.ApiVersionsResponse(**fields)
        assert api_versions.parse(api_versions.narrow(answer)) == {}


# ----------------------------------------------------------- group discovery


@pytest.mark.parametrize("versions", [_lowest, _highest])
def test_find_coordinator_asks_for_the_group_key(versions: Any) -> None:
    sent = _wire(find_coordinator.build(versions(ApiKey.FIND_COORDINATOR), "g"))
    assert sent.key_type == 0
    assert sent.coordinator_keys == ("g",)


def _coordinators(*entries: tuple[str, ErrorCode]) -> find_coordinator.Response:
    module = _responses(ApiKey.FIND_COORDINATOR, 6)
    response: find_coordinator.Response = module.FindCoordinatorResponse(
        throttle_time=NO_TIME,
        coordinators=tuple(
            module.Coordinator(
                key=key, node_id=3, host="b3", port=9095, error_code=code, error_message=None
            )
            for key, code in entries
        ),
    )
    return response


def test_find_coordinator_parses_the_groups_coordinator_or_its_typed_error() -> None:
    answer = _coordinators(("other", ErrorCode.not_coordinator), ("g", ErrorCode.none))
    assert find_coordinator.parse(answer, "g") == BrokerAddress(3, "b3", 9095)
    with pytest.raises(NotCoordinatorError):
        find_coordinator.parse(answer, "other")
    with pytest.raises(CoordinatorNotAvailableError) as raised:
        find_coordinator.parse(_coordinators(("g", ErrorCode.coordinator_not_available)), "g")
    assert raised.value.retriable
    with pytest.raises(BrokerError, match="skipped"):
        find_coordinator.parse(answer, "missing")


@pytest.mark.parametrize("versions", [_lowest, _highest])
def test_consumer_group_describe_asks_without_authorized_operations(versions: Any) -> None:
    sent = _wire(consumer_group_describe.build(versions(ApiKey.CONSUMER_GROUP_DESCRIBE), ["g"]))
    assert sent.group_ids == ("g",)
    assert sent.include_authorized_operations is False


def test_consumer_group_describe_parses_error_codes_by_group() -> None:
    module = _responses(ApiKey.CONSUMER_GROUP_DESCRIBE, 1)
    response = module.ConsumerGroupDescribeResponse(
        throttle_time=NO_TIME,
        groups=(
            module.DescribedGroup(
                error_code=ErrorCode.unsupported_version,
                group_id="g",
                group_state="",
                group_epoch=0,
                assignment_epoch=0,
                assignor_name="",
                members=(),
            ),
        ),
    )
    assert consumer_group_describe.parse(response) == {"g": int(ErrorCode.unsupported_version)}


# -------------------------------------------------------------------- metadata


def test_metadata_request_at_v10_and_v13() -> None:
    low = _wire(metadata.build(_lowest(ApiKey.METADATA), ["a", "b"]))
    assert [t.name for t in low.topics] == ["a", "b"]
    assert low.allow_auto_topic_creation is False
    # v10 still has the cluster-wide authorized operations flag; v11 dropped it.
    assert low.include_cluster_authorized_operations is False
    high = _wire(metadata.build(_highest(ApiKey.METADATA), None))
    assert high.__version__ == 13
    assert high.topics is None
    assert not hasattr(high, "include_cluster_authorized_operations")


def test_metadata_parse_keeps_good_topics_and_the_codes_of_failed_ones() -> None:
    module = _responses(ApiKey.METADATA, 13)
    response = module.MetadataResponse(
        throttle_time=NO_TIME,
        brokers=(module.MetadataResponseBroker(node_id=1, host="b1", port=9092, rack="r1"),),
        cluster_id="c",
        controller_id=1,
        topics=(
            module.MetadataResponseTopic(
                error_code=ErrorCode.none,
                name="t",
                topic_id=TOPIC_ID,
                partitions=(
                    module.MetadataResponsePartition(
                        error_code=ErrorCode.none,
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=4,
                        replica_nodes=(1,),
                        isr_nodes=(1,),
                        offline_replicas=(),
                    ),
                ),
            ),
            module.MetadataResponseTopic(
                error_code=ErrorCode.unknown_topic_or_partition,
                name="gone",
                topic_id=None,
                partitions=(),
            ),
        ),
        error_code=ErrorCode.none,
    )
    cluster = metadata.parse(response)
    assert cluster.brokers[1] == BrokerAddress(1, "b1", 9092, "r1")
    assert cluster.topic_id("t") == TOPIC_ID
    assert cluster.topics["t"].partitions[0].leader_epoch == 4
    assert cluster.leader(TopicPartition("t", 0)) == cluster.brokers[1]
    assert cluster.topic_errors == {"gone": int(ErrorCode.unknown_topic_or_partition)}
    assert (cluster.cluster_id, cluster.controller_id) == ("c", 1)
    refused = module.MetadataResponse(
        throttle_time=NO_TIME,
        brokers=(),
        controller_id=-1,
        topics=(),
        error_code=ErrorCode.rebootstrap_required,
    )
    with pytest.raises(BrokerError, match="REBOOTSTRAP_REQUIRED"):
        metadata.parse(refused)


# ------------------------------------------------------------ classic group APIs

SUB = MemberSubscription(
    topics=frozenset({"a"}),
    user_data=b"u",
    owned_partitions=frozenset({TopicPartition("a", 0)}),
    generation_id=2,
    rack_id="r1",
)
JOIN = JoinGroupRequest(
    group_id="g",
    member_id="m",
    instance_id="i",
    session_timeout_ms=45_000,
    rebalance_timeout_ms=300_000,
    protocols=(JoinProtocol("range", SUB), JoinProtocol("cooperative-sticky", SUB)),
    reason="rebalance",
)


def test_join_group_at_v5_has_no_reason() -> None:
    sent = _wire(join_group.build(_lowest(ApiKey.JOIN_GROUP), JOIN))
    assert sent.__version__ == 5
    assert not hasattr(sent, "reason")
    assert sent.group_instance_id == "i"
    assert sent.session_timeout == datetime.timedelta(seconds=45)


def test_join_group_at_v9_carries_the_reason_and_encoded_subscriptions() -> None:
    sent = _wire(join_group.build(_highest(ApiKey.JOIN_GROUP), JOIN))
    assert sent.__version__ == 9
    assert sent.reason == "rebalance"
    assert sent.protocol_type == "consumer"
    assert [p.name for p in sent.protocols] == ["range", "cooperative-sticky"]
    assert decode_subscription(sent.protocols[0].metadata) == SUB


def _join_response(version: int, **fields: Any) -> join_group.Response:
    module = _responses(ApiKey.JOIN_GROUP, version)
    response: join_group.Response = module.JoinGroupResponse(
        throttle_time=NO_TIME,
        error_code=ErrorCode.none,
        generation_id=5,
        protocol_name="range",
        leader="m1",
        member_id="m1",
        members=tuple(
            module.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=data)
            for m, i, data in fields.pop("members", ())
        ),
        **fields,
    )
    return response


def test_join_response_decodes_every_member_subscription() -> None:
    sub = MemberSubscription(
        topics=frozenset({"a", "b"}),
        user_data=b"x",
        owned_partitions=frozenset({TopicPartition("a", 1)}),
        generation_id=4,
        rack_id="r1",
    )
    response = _join_response(
        9,
        protocol_type="consumer",
        members=[
            ("m1", "i1", encode_subscription(sub, 3)),
            ("m2", None, encode_subscription(sub, 0)),
        ],
    )
    decoded = join_group.parse(response)
    assert decoded.generation_id == 5
    assert decoded.leader == "m1"
    first, second = decoded.members
    assert first.subscription == sub
    assert first.instance_id == "i1"
    assert first.protocol_version == 3
    # v0 carries topics and user data only.
    assert second.subscription.topics == sub.topics
    assert second.subscription.owned_partitions == frozenset()
    assert second.protocol_version == 0


def test_join_response_before_v7_has_no_protocol_type() -> None:
    decoded = join_group.parse(_join_response(5))
    assert decoded.protocol_type is None
    assert decoded.protocol_name == "range"
    assert decoded.members == ()
    follower = join_group.parse(_join_response(9, protocol_type="consumer"))
    assert follower.protocol_type == "consumer"
    assert follower.members == ()


def test_join_response_with_an_undecodable_subscription_is_a_typed_error() -> None:
    with pytest.raises(ClassicPayloadError):
        join_group.parse(_join_response(9, members=[("m1", None, b"\x00")]))


def test_group_member_versions_newer_than_known_read_as_the_newest() -> None:
    data = b"\x00\x07" + encode_subscription(SUB, 3)[2:]
    (member,) = join_group.parse(_join_response(9, members=[("m1", None, data)])).members
    assert member == GroupMember("m1", SUB, None, protocol_version=3)


ASSIGNMENT = MemberAssignment(frozenset({TopicPartition("a", 0), TopicPartition("b", 1)}), b"x")
SYNC = SyncGroupRequest(
    group_id="g",
    generation_id=5,
    member_id="m1",
    instance_id=None,
    protocol_name="range",
    assignments=(("m1", ASSIGNMENT), ("m2", MemberAssignment())),
)


def test_sync_group_at_v3_has_no_protocol_fields() -> None:
    sent = _wire(sync_group.build(_lowest(ApiKey.SYNC_GROUP), SYNC))
    assert sent.__version__ == 3
    assert not hasattr(sent, "protocol_name")
    assert [a.member_id for a in sent.assignments] == ["m1", "m2"]
    assert decode_assignment(sent.assignments[0].assignment) == ASSIGNMENT


def test_sync_group_at_v5_names_the_protocol() -> None:
    sent = _wire(sync_group.build(_highest(ApiKey.SYNC_GROUP), SYNC))
    assert (sent.protocol_type, sent.protocol_name) == ("consumer", "range")
    assert sent.generation_id == 5


def _sync_response(version: int, code: ErrorCode, data: bytes) -> sync_group.Response:
    module = _responses(ApiKey.SYNC_GROUP, version)
    fields: dict[str, Any] = {"throttle_time": NO_TIME, "error_code": code, "assignment": data}
    if version >= 5:
        fields.update(protocol_type="consumer", protocol_name="range")
    response: sync_group.Response = module.SyncGroupResponse(**fields)
    return response


def test_sync_response_decodes_the_assignment() -> None:
    parsed = sync_group.parse(_sync_response(5, ErrorCode.none, encode_assignment(ASSIGNMENT)))
    assert parsed.assignment == ASSIGNMENT
    assert (parsed.protocol_type, parsed.protocol_name) == ("consumer", "range")
    empty = sync_group.parse(_sync_response(3, ErrorCode.none, b""))
    assert empty.assignment == MemberAssignment()
    assert empty.protocol_name is None
    failed = sync_group.parse(_sync_response(5, ErrorCode.rebalance_in_progress, b""))
    assert failed.error_code == int(ErrorCode.rebalance_in_progress)
    assert failed.assignment is None
    with pytest.raises(ClassicPayloadError):
        sync_group.parse(_sync_response(5, ErrorCode.none, b"\x00"))


@pytest.mark.parametrize("versions", [_lowest, _highest])
def test_heartbeat_request(versions: Any) -> None:
    sent = _wire(
        heartbeat.build(
            versions(ApiKey.HEARTBEAT),
            SendClassicHeartbeat(
                seq=1, group_id="g", generation_id=5, member_id="m", instance_id="i"
            ),
        )
    )
    assert (sent.group_id, sent.generation_id, sent.member_id) == ("g", 5, "m")
    assert sent.group_instance_id == "i"


def test_heartbeat_response_is_its_error_code() -> None:
    module = _responses(ApiKey.HEARTBEAT, 3)
    response = module.HeartbeatResponse(
        throttle_time=NO_TIME, error_code=ErrorCode.illegal_generation
    )
    assert heartbeat.parse(response) == int(ErrorCode.illegal_generation)


def test_leave_group_reason_only_from_v5() -> None:
    def build(versions: NegotiatedVersions) -> Any:
        return _wire(
            leave_group.build(
                versions,
                SendLeaveGroup(
                    seq=1, group_id="g", member_id="m", instance_id="i", reason="closing"
                ),
            )
        )

    (low,) = build(_lowest(ApiKey.LEAVE_GROUP)).members
    assert (low.member_id, low.group_instance_id) == ("m", "i")
    assert not hasattr(low, "reason")
    (high,) = build(_highest(ApiKey.LEAVE_GROUP)).members
    assert high.reason == "closing"


def test_leave_group_response_reports_the_group_or_member_error() -> None:
    module = _responses(ApiKey.LEAVE_GROUP, 5)

    def response(top: ErrorCode, member: ErrorCode) -> Any:
        return module.LeaveGroupResponse(
            throttle_time=NO_TIME,
            error_code=top,
            members=(
                module.MemberResponse(member_id="m", group_instance_id=None, error_code=member),
            ),
        )

    assert leave_group.parse(response(ErrorCode.none, ErrorCode.none)) == 0
    assert leave_group.parse(response(ErrorCode.none, ErrorCode.unknown_member_id)) == int(
        ErrorCode.unknown_member_id
    )
    assert leave_group.parse(
        response(ErrorCode.coordinator_not_available, ErrorCode.unknown_member_id)
    ) == int(ErrorCode.coordinator_not_available)


# ------------------------------------------------------------------- offsets

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)
IDS = {"a": TOPIC_ID}
NAMES = {TOPIC_ID: "a"}


def _commit(versions: NegotiatedVersions) -> Any:
    return _wire(
        offset_commit.build(
            versions,
            group_id="g",
            member_id="m",
            member_epoch=7,
            instance_id="i",
            offsets={A1: 11, A0: 10},
            topic_ids=IDS,
        )
    )


def test_offset_commit_names_topics_before_v10_and_by_id_from_v10() -> None:
    low = _commit(_lowest(ApiKey.OFFSET_COMMIT))
    assert low.__version__ == 7
    (topic,) = low.topics
    assert topic.name == "a"
    assert [(p.partition_index, p.committed_offset) for p in topic.partitions] == [(0, 10), (1, 11)]
    assert (low.generation_id_or_member_epoch, low.member_id, low.group_instance_id) == (
        7,
        "m",
        "i",
    )
    high = _commit(_highest(ApiKey.OFFSET_COMMIT))
    (topic,) = high.topics
    assert topic.topic_id == TOPIC_ID
    assert not hasattr(topic, "name")


def test_offset_commit_carries_the_leader_epoch_of_each_offset_where_known() -> None:
    # KIP-320: an offset committed with its record's leader epoch can be checked
    # for a log truncation by whoever starts from it; unknown ones send -1.
    for versions in (_lowest(ApiKey.OFFSET_COMMIT), _highest(ApiKey.OFFSET_COMMIT)):
        request = _wire(
            offset_commit.build(
                versions,
                group_id="g",
                member_id="m",
                member_epoch=7,
                instance_id=None,
                offsets={A0: 10, A1: 11},
                topic_ids=IDS,
                leader_epochs={A1: 4},
            )
        )
        (topic,) = request.topics
        assert [(p.partition_index, p.committed_leader_epoch) for p in topic.partitions] == [
            (0, -1),
            (1, 4),
        ]
    (topic,) = _commit(_highest(ApiKey.OFFSET_COMMIT)).topics
    assert {p.committed_leader_epoch for p in topic.partitions} == {-1}


def test_offset_commit_parse_types_the_failed_partitions() -> None:
    module = _responses(ApiKey.OFFSET_COMMIT, 10)
    response = module.OffsetCommitResponse(
        throttle_time=NO_TIME,
        topics=(
            module.OffsetCommitResponseTopic(
                topic_id=TOPIC_ID,
                partitions=(
                    module.OffsetCommitResponsePartition(
                        partition_index=0, error_code=ErrorCode.none
                    ),
                    module.OffsetCommitResponsePartition(
                        partition_index=1, error_code=ErrorCode.stale_member_epoch
                    ),
                ),
            ),
            # A topic id kgroup cannot name is skipped.
            module.OffsetCommitResponseTopic(
                topic_id=uuid.uuid4(),
                partitions=(
                    module.OffsetCommitResponsePartition(
                        partition_index=0, error_code=ErrorCode.unknown_topic_id
                    ),
                ),
            ),
        ),
    )
    errors = offset_commit.parse(response, NAMES)
    assert list(errors) == [A1]
    assert errors[A1].code == int(ErrorCode.stale_member_epoch)


def _fetch(versions: NegotiatedVersions, member_id: str | None, epoch: int) -> Any:
    return _wire(
        offset_fetch.build(
            versions,
            group_id="g",
            member_id=member_id,
            member_epoch=epoch,
            partitions=[A1, A0],
            topic_ids=IDS,
        )
    )


def test_offset_fetch_member_fields_from_v9_topic_ids_from_v10() -> None:
    low = _fetch(_lowest(ApiKey.OFFSET_FETCH), "m", 7)
    assert low.__version__ == 8
    assert low.require_stable is True
    (group,) = low.groups
    assert not hasattr(group, "member_id")
    (topic,) = group.topics
    assert (topic.name, topic.partition_indexes) == ("a", (0, 1))
    (group,) = _fetch(_at(ApiKey.OFFSET_FETCH, 9), "m", 7).groups
    assert (group.member_id, group.member_epoch) == ("m", 7)
    (group,) = _fetch(_highest(ApiKey.OFFSET_FETCH), None, -1).groups
    assert (group.member_id, group.member_epoch) == (None, -1)
    (topic,) = group.topics
    assert topic.topic_id == TOPIC_ID


def _fetched(
    group_code: ErrorCode, partition_code: ErrorCode, metadata: str | None = None
) -> offset_fetch.Response:
    module = _responses(ApiKey.OFFSET_FETCH, 10)
    response: offset_fetch.Response = module.OffsetFetchResponse(
        throttle_time=NO_TIME,
        groups=(
            module.OffsetFetchResponseGroup(
                group_id="g",
                error_code=group_code,
                topics=(
                    module.OffsetFetchResponseTopics(
                        topic_id=TOPIC_ID,
                        partitions=(
                            module.OffsetFetchResponsePartitions(
                                partition_index=0,
                                committed_offset=42,
                                committed_leader_epoch=3,
                                metadata=metadata,
                                error_code=ErrorCode.none,
                            ),
                            module.OffsetFetchResponsePartitions(
                                partition_index=1,
                                committed_offset=-1,
                                metadata=None,
                                error_code=partition_code,
                            ),
                        ),
                    ),
                ),
            ),
        ),
    )
    return response


def test_offset_fetch_parse_reads_offsets_and_raises_errors() -> None:
    assert offset_fetch.parse(_fetched(ErrorCode.none, ErrorCode.none), NAMES) == {
        A0: 42,
        A1: None,
    }
    with pytest.raises(BrokerError, match="UNSTABLE_OFFSET_COMMIT"):
        offset_fetch.parse(_fetched(ErrorCode.none, ErrorCode.unstable_offset_commit), NAMES)
    # The leader epoch committed with an offset (KIP-320); none without an offset.
    assert offset_fetch.committed_leader_epochs(
        _fetched(ErrorCode.none, ErrorCode.none), NAMES
    ) == {A0: 3}
    with pytest.raises(BrokerError, match="STALE_MEMBER_EPOCH"):
        offset_fetch.parse(_fetched(ErrorCode.stale_member_epoch, ErrorCode.none), NAMES)


@pytest.mark.parametrize(
    ("stored", "read"),
    [(None, ""), ("", ""), ("ckpt-7", "ckpt-7"), ("ckpt-7\x00", "ckpt-7"), ("a\x00b", "a\x00b")],
)
def test_offset_fetch_reads_the_metadata_of_committed_offsets(
    stored: str | None, read: str
) -> None:
    # A trailing NUL is confluent-kafka's C terminator (its Python binding commits
    # "x" as "x\0"); one inside the string is the application's.
    response = _fetched(ErrorCode.none, ErrorCode.none, stored)
    assert offset_fetch.committed_metadata(response, NAMES) == {A0: read}


@pytest.mark.parametrize(
    "module",
    [
        api_versions,
        consumer_group_describe,
        consumer_group_heartbeat,
        delete_groups,
        find_coordinator,
        heartbeat,
        incremental_alter_configs,
        join_group,
        leave_group,
        metadata,
        offset_commit,
        offset_delete,
        offset_fetch,
        share_acknowledge,
        share_fetch,
        share_group_describe,
        share_group_heartbeat,
        sync_group,
    ],
)
def test_each_module_accepts_exactly_the_versions_kgroup_negotiates(module: Any) -> None:
    assert_narrows_exactly_the_negotiated_versions(module)


# ---------------------------------------------------------- offset for leader epoch


def test_offset_for_leader_epoch_asks_as_a_consumer_and_reads_each_partitions_end() -> None:
    queries = {A1: EpochQuery(leader_epoch=2, current_leader_epoch=5), A0: EpochQuery(0, 5)}
    for versions in (
        _lowest(ApiKey.OFFSET_FOR_LEADER_EPOCH),
        _highest(ApiKey.OFFSET_FOR_LEADER_EPOCH),
    ):
        request = _wire(offset_for_leader_epoch.build(versions, queries))
        assert request.replica_id == -1
        (topic,) = request.topics
        assert topic.topic == "a"
        assert [
            (p.partition, p.leader_epoch, p.current_leader_epoch) for p in topic.partitions
        ] == [(0, 0, 5), (1, 2, 5)]
    module = _responses(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4)
    response = module.OffsetForLeaderEpochResponse(
        throttle_time=NO_TIME,
        topics=(
            module.OffsetForLeaderTopicResult(
                topic="a",
                partitions=(
                    module.EpochEndOffset(
                        error_code=ErrorCode.none, partition=0, leader_epoch=0, end_offset=10
                    ),
                    module.EpochEndOffset(
                        error_code=ErrorCode.fenced_leader_epoch,
                        partition=1,
                        leader_epoch=-1,
                        end_offset=-1,
                    ),
                ),
            ),
        ),
    )
    assert offset_for_leader_epoch.parse(offset_for_leader_epoch.narrow(response)) == {
        A0: EpochEnd(leader_epoch=0, end_offset=10, error_code=0),
        A1: EpochEnd(leader_epoch=-1, end_offset=-1, error_code=int(ErrorCode.fenced_leader_epoch)),
    }


# ------------------------------------------------------------------ share groups


@pytest.mark.parametrize("versions", [_lowest, _highest])
def test_share_group_heartbeat_carries_the_members_fields(versions: Any) -> None:
    request = ShareHeartbeatRequest(
        group_id="queue", member_id="m", member_epoch=3, subscribed_topic_names=("orders",)
    )
    sent = _wire(share_group_heartbeat.build(versions(ApiKey.SHARE_GROUP_HEARTBEAT), request))
    assert (sent.group_id, sent.member_id, sent.member_epoch) == ("queue", "m", 3)
    assert (sent.rack_id, sent.subscribed_topic_names) == (None, ("orders",))


def test_share_group_heartbeat_response_gives_the_assignment_by_topic_id() -> None:
    module = _responses(ApiKey.SHARE_GROUP_HEARTBEAT, 1)
    response = module.ShareGroupHeartbeatResponse(
        throttle_time=NO_TIME,
        error_code=ErrorCode.none,
        member_id="m",
        member_epoch=4,
        heartbeat_interval=datetime.timedelta(milliseconds=5000),
        assignment=module.Assignment(
            topic_partitions=(module.TopicPartitions(topic_id=TOPIC_ID, partitions=(0, 2)),)
        ),
    )
    assert share_group_heartbeat.parse(response) == ShareHeartbeatResponse(
        member_id="m", member_epoch=4, heartbeat_interval_ms=5000, assignment={TOPIC_ID: (0, 2)}
    )
    empty = dataclasses.replace(response, assignment=None, error_code=ErrorCode.group_id_not_found)
    parsed = share_group_heartbeat.parse(empty)
    assert (parsed.error_code, parsed.assignment) == (69, None)


@pytest.mark.parametrize("versions", [_lowest, _highest])
def test_share_group_describe_asks_without_authorized_operations(versions: Any) -> None:
    built = share_group_describe.build(versions(ApiKey.SHARE_GROUP_DESCRIBE), ["q"])
    sent = _wire(built)
    assert (sent.group_ids, sent.include_authorized_operations) == (("q",), False)


def test_share_group_describe_reads_members_and_their_assignments() -> None:
    module = _responses(ApiKey.SHARE_GROUP_DESCRIBE, 1)
    member = module.Member(
        member_id="m",
        rack_id=None,
        member_epoch=3,
        client_id="c",
        client_host="/10.0.0.1",
        subscribed_topic_names=("orders",),
        assignment=module.Assignment(
            topic_partitions=(
                module.TopicPartitions(topic_id=TOPIC_ID, topic_name="orders", partitions=(0, 1)),
            )
        ),
    )
    response = module.ShareGroupDescribeResponse(
        throttle_time=NO_TIME,
        groups=(
            module.DescribedGroup(
                error_code=ErrorCode.none,
                group_id="q",
                group_state="Stable",
                group_epoch=4,
                assignment_epoch=4,
                assignor_name="simple",
                members=(member,),
            ),
        ),
    )
    (group,) = share_group_describe.parse(response)
    assert (group.group_id, group.state, group.assignor, group.error_code) == (
        "q",
        "Stable",
        "simple",
        0,
    )
    (described,) = group.members
    assert described == share_group_describe.DescribedShareMember(
        member_id="m",
        rack_id=None,
        member_epoch=3,
        client_id="c",
        client_host="/10.0.0.1",
        subscribed_topics=frozenset({"orders"}),
        assignment=frozenset({TopicPartition("orders", 0), TopicPartition("orders", 1)}),
    )


# ---------------------------------------------------------- group tooling: deletes


@pytest.mark.parametrize("versions", [_lowest, _highest])
def test_delete_groups_names_the_groups(versions: Any) -> None:
    sent = _wire(delete_groups.build(versions(ApiKey.DELETE_GROUPS), ["a", "b"]))
    assert tuple(sent.groups_names) == ("a", "b")


def test_delete_groups_parses_the_code_of_each_group() -> None:
    module = _responses(ApiKey.DELETE_GROUPS, 2)
    response = module.DeleteGroupsResponse(
        throttle_time=NO_TIME,
        results=(
            module.DeletableGroupResult(group_id="a", error_code=ErrorCode.none),
            module.DeletableGroupResult(group_id="b", error_code=ErrorCode.non_empty_group),
        ),
    )
    assert delete_groups.parse(response) == {"a": 0, "b": int(ErrorCode.non_empty_group)}


def test_offset_delete_names_the_partitions_by_topic() -> None:
    partitions = [TopicPartition("t", 1), TopicPartition("t", 0), TopicPartition("u", 2)]
    sent = _wire(offset_delete.build(_lowest(ApiKey.OFFSET_DELETE), "g", partitions))
    assert sent.group_id == "g"
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in sent.topics] == [
        ("t", [0, 1]),
        ("u", [2]),
    ]


def test_offset_delete_parses_each_partition_and_raises_the_groups_error() -> None:
    module = _responses(ApiKey.OFFSET_DELETE, 0)

    def response(code: ErrorCode, partition_code: ErrorCode) -> Any:
        return module.OffsetDeleteResponse(
            error_code=code,
            throttle_time=NO_TIME,
            topics=(
                module.OffsetDeleteResponseTopic(
                    name="t",
                    partitions=(
                        module.OffsetDeleteResponsePartition(
                            partition_index=0, error_code=partition_code
                        ),
                    ),
                ),
            ),
        )

    subscribed = ErrorCode.group_subscribed_to_topic
    assert offset_delete.parse(response(ErrorCode.none, subscribed)) == {
        TopicPartition("t", 0): int(subscribed)
    }
    with pytest.raises(BrokerError) as refused:
        offset_delete.parse(response(ErrorCode.group_id_not_found, ErrorCode.none))
    assert refused.value.code == ErrorCode.group_id_not_found
