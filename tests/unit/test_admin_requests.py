"""The request modules the group tooling adds: each built at its lowest and highest
version through a whole frame, each parser on hand-built responses."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from request_helpers import assert_narrows_exactly_the_negotiated_versions
from request_helpers import highest as _highest
from request_helpers import lowest as _lowest
from request_helpers import wire as _wire

from kgroup.errors import BrokerError, CoordinatorLoadInProgressError
from kgroup.membership import ClassicAssignment, MemberSubscription
from kgroup.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    VersionRange,
    response_module,
)
from kgroup.protocol.classic_payload import encode_assignment, encode_subscription
from kgroup.protocol.requests import (
    broker_features,
    consumer_group_members,
    describe_configs,
    describe_groups,
    group_offsets,
    list_groups,
    list_offsets,
)
from kgroup.protocol.requests.consumer_group_members import MemberType
from kgroup.protocol.requests.describe_configs import (
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
)
from kgroup.types import TopicPartition

NO_TIME = datetime.timedelta(0)
TOPIC_ID = uuid.UUID("3f1e7d0a-0000-4000-8000-000000000009")


# ------------------------------------------------------------------ ListGroups


def test_list_groups_filters_by_type_only_from_v5() -> None:
    low = _wire(list_groups.build(_lowest(ApiKey.LIST_GROUPS), states=["Stable"], types=["x"]))
    assert low.__version__ == 4
    assert low.states_filter == ("Stable",)
    assert not hasattr(low, "types_filter")
    high = _wire(list_groups.build(_highest(ApiKey.LIST_GROUPS), types=["consumer"]))
    assert (high.states_filter, high.types_filter) == ((), ("consumer",))


def test_list_groups_parse_reads_the_type_from_v5_and_raises_the_top_error() -> None:
    v5 = response_module(ApiKey.LIST_GROUPS, 5)
    answer = v5.ListGroupsResponse(
        throttle_time=NO_TIME,
        error_code=ErrorCode.none,
        groups=(
            v5.ListedGroup(
                group_id="g", protocol_type="consumer", group_state="Stable", group_type="Consumer"
            ),
        ),
    )
    assert list_groups.parse(answer) == (
        list_groups.ListedGroup("g", "consumer", "Stable", "Consumer"),
    )
    v4 = response_module(ApiKey.LIST_GROUPS, 4)
    old = v4.ListGroupsResponse(
        throttle_time=NO_TIME,
        error_code=ErrorCode.none,
        groups=(v4.ListedGroup(group_id="g", protocol_type="", group_state="Empty"),),
    )
    assert list_groups.parse(old)[0].group_type is None
    loading = v4.ListGroupsResponse(
        throttle_time=NO_TIME, error_code=ErrorCode.coordinator_load_in_progress, groups=()
    )
    with pytest.raises(CoordinatorLoadInProgressError):
        list_groups.parse(loading)


# -------------------------------------------------------------- DescribeGroups


@pytest.mark.parametrize("versions", [_lowest, _highest])
def test_describe_groups_asks_without_authorized_operations(versions: Any) -> None:
    sent = _wire(describe_groups.build(versions(ApiKey.DESCRIBE_GROUPS), ["g"]))
    assert sent.groups == ("g",)
    assert sent.include_authorized_operations is False


A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def _classic_group(protocol_type: str, members: list[tuple[bytes, bytes]], version: int = 6) -> Any:
    module = response_module(ApiKey.DESCRIBE_GROUPS, version)
    fields: dict[str, Any] = {}
    if version >= 6:
        fields["error_message"] = None
    return module.DescribeGroupsResponse(
        throttle_time=NO_TIME,
        groups=(
            module.DescribedGroup(
                error_code=ErrorCode.none,
                group_id="g",
                group_state="Stable",
                protocol_type=protocol_type,
                protocol_data="range",
                members=tuple(
                    module.DescribedGroupMember(
                        member_id=f"m{i}",
                        group_instance_id="i0" if i == 0 else None,
                        client_id="c",
                        client_host="/h",
                        member_metadata=metadata,
                        member_assignment=assignment,
                    )
                    for i, (metadata, assignment) in enumerate(members)
                ),
                authorized_operations=-2147483648,
                **fields,
            ),
        ),
    )


def test_describe_groups_decodes_consumer_members_payloads() -> None:
    sub = MemberSubscription(topics=frozenset({"a"}), owned_partitions=frozenset({A0}))
    assignment = ClassicAssignment(partitions=frozenset({A0, A1}), user_data=b"\x01")
    answer = _classic_group(
        "consumer",
        [(encode_subscription(sub, 1), encode_assignment(assignment)), (b"", b"")],
        version=4,
    )
    (group,) = describe_groups.parse(answer)
    assert (group.state, group.protocol_type, group.protocol) == ("Stable", "consumer", "range")
    first, second = group.members
    assert first.instance_id == "i0"
    assert first.subscription == sub
    assert first.subscription_version == 1
    assert first.decoded_assignment == assignment
    assert first.payload_error is None
    # A member between JoinGroup and SyncGroup has no assignment yet: nothing to decode.
    assert (second.subscription, second.decoded_assignment, second.payload_error) == (
        None,
        None,
        None,
    )


def test_describe_groups_keeps_other_protocols_raw_and_names_undecodable_payloads() -> None:
    (connect,) = describe_groups.parse(_classic_group("connect", [(b"\x00\x01junk", b"x")]))
    assert connect.members[0].subscription is None
    assert connect.members[0].payload_error is None
    assert connect.members[0].metadata == b"\x00\x01junk"
    (broken,) = describe_groups.parse(_classic_group("consumer", [(b"\x00\x01\xff", b"")]))
    assert broken.members[0].payload_error is not None
    assert "subscription" in broken.members[0].payload_error


# -------------------------------------------------- ConsumerGroupDescribe (full)


def _consumer_group(version: int) -> Any:
    module = response_module(ApiKey.CONSUMER_GROUP_DESCRIBE, version)

    def assignment(*parts: int) -> Any:
        return module.Assignment(
            topic_partitions=(
                module.TopicPartitions(topic_id=TOPIC_ID, topic_name="a", partitions=parts),
            )
        )

    extra: dict[str, Any] = {"member_type": 0} if version >= 1 else {}
    return module.ConsumerGroupDescribeResponse(
        throttle_time=NO_TIME,
        groups=(
            module.DescribedGroup(
                error_code=ErrorCode.none,
                group_id="g",
                group_state="Reconciling",
                group_epoch=5,
                assignment_epoch=5,
                assignor_name="uniform",
                members=(
                    module.Member(
                        member_id="m",
                        instance_id=None,
                        rack_id="r1",
                        member_epoch=4,
                        client_id="c",
                        client_host="/h",
                        subscribed_topic_names=("a",),
                        subscribed_topic_regex="",
                        assignment=assignment(0),
                        target_assignment=assignment(0, 1),
                        **extra,
                    ),
                ),
            ),
        ),
    )


def test_consumer_group_members_reads_epochs_assignments_and_member_type() -> None:
    (group,) = consumer_group_members.parse(_consumer_group(1))
    assert (group.state, group.group_epoch, group.assignment_epoch, group.assignor) == (
        "Reconciling",
        5,
        5,
        "uniform",
    )
    (member,) = group.members
    assert member.member_type is MemberType.CLASSIC
    assert member.assignment == frozenset({A0})
    assert member.target_assignment == frozenset({A0, A1})
    assert member.subscribed_topics == frozenset({"a"})
    # An empty regex is no regex.
    assert member.subscribed_regex is None
    assert member.rack_id == "r1"
    (old,) = consumer_group_members.parse(_consumer_group(0))
    assert old.members[0].member_type is MemberType.UNKNOWN


# ------------------------------------------------------------------ ListOffsets


def test_list_offsets_asks_leaders_as_a_consumer_with_a_timeout_from_v10() -> None:
    parts = [A1, A0, TopicPartition("b", 2)]
    low = _wire(list_offsets.build(_lowest(ApiKey.LIST_OFFSETS), parts))
    assert low.replica_id == -1
    assert low.isolation_level == 0
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in low.topics] == [
        ("a", [0, 1]),
        ("b", [2]),
    ]
    assert all(p.timestamp == list_offsets.LATEST for t in low.topics for p in t.partitions)
    assert not hasattr(low, "timeout")
    high = _wire(
        list_offsets.build(
            _highest(ApiKey.LIST_OFFSETS),
            [A0],
            timestamp=list_offsets.EARLIEST,
            isolation=list_offsets.IsolationLevel.READ_COMMITTED,
            timeout=5,
        )
    )
    assert high.isolation_level == 1
    assert high.timeout == datetime.timedelta(seconds=5)
    assert high.topics[0].partitions[0].timestamp == list_offsets.EARLIEST


def test_list_offsets_parse_returns_offsets_and_per_partition_errors() -> None:
    module = response_module(ApiKey.LIST_OFFSETS, 11)
    answer = module.ListOffsetsResponse(
        throttle_time=NO_TIME,
        topics=(
            module.ListOffsetsTopicResponse(
                name="a",
                partitions=(
                    module.ListOffsetsPartitionResponse(
                        partition_index=0, error_code=ErrorCode.none, offset=42, leader_epoch=3
                    ),
                    module.ListOffsetsPartitionResponse(
                        partition_index=1, error_code=ErrorCode.not_leader_or_follower
                    ),
                ),
            ),
        ),
    )
    parsed = list_offsets.parse(answer)
    assert parsed[A0] == list_offsets.ListedOffset(42, -1, 3, 0)
    assert parsed[A1].error_code == ErrorCode.not_leader_or_follower


# -------------------------------------------------------------- DescribeConfigs


@pytest.mark.parametrize("versions", [_lowest, _highest])
def test_describe_configs_names_resources_and_keys(versions: Any) -> None:
    sent = _wire(
        describe_configs.build(
            versions(ApiKey.DESCRIBE_CONFIGS),
            [
                ConfigResource(ConfigResourceType.BROKER, "1", ("group.consumer.max.size",)),
                ConfigResource(ConfigResourceType.GROUP, "g"),
            ],
        )
    )
    broker, group = sent.resources
    assert (broker.resource_type, broker.resource_name) == (4, "1")
    assert broker.configuration_keys == ("group.consumer.max.size",)
    assert (group.resource_type, group.resource_name, group.configuration_keys) == (32, "g", None)
    assert sent.include_synonyms is False


def test_describe_configs_parse_types_sources_and_keeps_errors() -> None:
    module = response_module(ApiKey.DESCRIBE_CONFIGS, 4)

    def entry(name: str, value: str | None, source: int) -> Any:
        return module.DescribeConfigsResourceResult(
            name=name,
            value=value,
            read_only=True,
            config_source=source,
            is_sensitive=value is None,
            synonyms=(),
            config_type=0,
            documentation=None,
        )

    answer = module.DescribeConfigsResponse(
        throttle_time=NO_TIME,
        results=(
            module.DescribeConfigsResult(
                error_code=ErrorCode.none,
                error_message=None,
                resource_type=4,
                resource_name="1",
                configs=(
                    entry("group.consumer.migration.policy", "upgrade", 4),
                    entry("secret", None, 99),
                ),
            ),
            module.DescribeConfigsResult(
                error_code=ErrorCode.cluster_authorization_failed,
                error_message="denied",
                resource_type=77,
                resource_name="x",
                configs=(),
            ),
        ),
    )
    ok, denied = describe_configs.parse(answer)
    assert ok.resource == ConfigResource(ConfigResourceType.BROKER, "1")
    policy = ok.entries["group.consumer.migration.policy"]
    assert (policy.value, policy.source) == ("upgrade", ConfigSource.STATIC_BROKER_CONFIG)
    # A source a newer broker invents reads as UNKNOWN rather than failing.
    assert ok.entries["secret"].source is ConfigSource.UNKNOWN
    assert ok.entries["secret"].sensitive
    assert denied.error_code == ErrorCode.cluster_authorization_failed
    assert denied.resource.type is ConfigResourceType.UNKNOWN


# ------------------------------------------------------------- broker features


def test_broker_features_asks_api_versions_at_the_negotiated_version() -> None:
    sent = _wire(broker_features.build(_highest(ApiKey.API_VERSIONS)))
    assert sent.__version__ == SUPPORTED_VERSIONS[ApiKey.API_VERSIONS].max
    assert sent.client_software_name == "kgroup"


def test_broker_features_reads_supported_and_finalized_levels() -> None:
    module = response_module(ApiKey.API_VERSIONS, 4)
    answer = module.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(module.ApiVersion(api_key=68, min_version=0, max_version=1),),
        throttle_time=NO_TIME,
        supported_features=(
            module.SupportedFeatureKey(name="group.version", min_version=0, max_version=1),
        ),
        finalized_features_epoch=12,
        finalized_features=(
            module.FinalizedFeatureKey(
                name="group.version", max_version_level=1, min_version_level=1
            ),
        ),
        zk_migration_ready=False,
    )
    features = broker_features.parse(answer)
    assert features.api_range(ApiKey.CONSUMER_GROUP_HEARTBEAT) == VersionRange(0, 1)
    assert features.api_range(ApiKey.CONSUMER_GROUP_DESCRIBE) is None
    assert features.supported["group.version"] == VersionRange(0, 1)
    assert features.level("group.version") == 1
    assert features.level("share.version") == 0
    assert features.finalized_epoch == 12
    # Before v3 there are no features: every level reads 0.
    old = response_module(ApiKey.API_VERSIONS, 2).ApiVersionsResponse(
        error_code=ErrorCode.none, api_keys=(), throttle_time=NO_TIME
    )
    assert broker_features.parse(old).level("group.version") == 0
    failed = response_module(ApiKey.API_VERSIONS, 0).ApiVersionsResponse(
        error_code=ErrorCode.cluster_authorization_failed, api_keys=()
    )
    with pytest.raises(BrokerError, match="CLUSTER_AUTHORIZATION_FAILED"):
        broker_features.parse(failed)


# ---------------------------------------------------------------- group offsets


@pytest.mark.parametrize("versions", [_lowest, _highest])
def test_group_offsets_asks_for_every_topic_as_a_non_member(versions: Any) -> None:
    sent = _wire(group_offsets.build(versions(ApiKey.OFFSET_FETCH), "g"))
    (group,) = sent.groups
    assert (group.group_id, group.topics) == ("g", None)
    assert sent.require_stable is True
    if sent.__version__ >= 9:
        assert (group.member_id, group.member_epoch) == (None, -1)


# ------------------------------------------------------------------ narrowing


@pytest.mark.parametrize(
    "module",
    [
        broker_features,
        consumer_group_members,
        describe_configs,
        describe_groups,
        group_offsets,
        list_groups,
        list_offsets,
    ],
)
def test_each_new_module_accepts_exactly_the_versions_kgroup_negotiates(module: Any) -> None:
    assert_narrows_exactly_the_negotiated_versions(module)
