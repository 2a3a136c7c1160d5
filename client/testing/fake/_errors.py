"""Error responses of the right shape for every API the fake broker answers.

An interception handler may answer with just an error code; the model answers
errors too (NOT_COORDINATOR, UNSUPPORTED_VERSION ...). Each API carries its
error in a different place (top level, per group, per partition), and the
response must be of the request's version: these builders put the code
wherever the API has room for it.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kgroup.errors import KafkaProtocolError
from kgroup.protocol import ApiKey, response_module
from kgroup.testing.fake._kio import SeenRequest, make, respond, timedelta_ms

__all__ = ["described_error", "error_response"]


def error_response(seen: SeenRequest, code: ErrorCode, message: str | None = None) -> Any:
    """A response of ``seen``'s API and version carrying ``code`` wherever it has room."""
    m = response_module(seen.api_key, seen.version)
    request = seen.request
    api = seen.api_key
    if api == ApiKey.API_VERSIONS:
        return respond(m, "ApiVersionsResponse", error_code=code, api_keys=())
    if api == ApiKey.METADATA:
        return respond(
            m,
            "MetadataResponse",
            brokers=(),
            cluster_id=None,
            controller_id=-1,
            topics=(),
            error_code=code,
        )
    if api == ApiKey.FIND_COORDINATOR:
        return respond(
            m,
            "FindCoordinatorResponse",
            coordinators=tuple(
                make(
                    m,
                    "Coordinator",
                    key=key,
                    node_id=-1,
                    host="",
                    port=-1,
                    error_code=code,
                    error_message=message,
                )
                for key in request.coordinator_keys
            ),
        )
    if api == ApiKey.CONSUMER_GROUP_HEARTBEAT:
        return respond(
            m,
            "ConsumerGroupHeartbeatResponse",
            error_code=code,
            error_message=message,
            member_id=request.member_id,
            member_epoch=-1,
            heartbeat_interval=timedelta_ms(0),
            assignment=None,
        )
    if api == ApiKey.CONSUMER_GROUP_DESCRIBE:
        return respond(
            m,
            "ConsumerGroupDescribeResponse",
            groups=tuple(described_error(m, g, code) for g in request.group_ids),
        )
    if api == ApiKey.JOIN_GROUP:
        return respond(
            m,
            "JoinGroupResponse",
            error_code=code,
            generation_id=-1,
            protocol_type=None,
            protocol_name=None,
            leader="",
            skip_assignment=False,
            member_id=request.member_id,
            members=(),
        )
    if api == ApiKey.SYNC_GROUP:
        return respond(
            m,
            "SyncGroupResponse",
            error_code=code,
            protocol_type=None,
            protocol_name=None,
            assignment=b"",
        )
    if api == ApiKey.HEARTBEAT:
        return respond(m, "HeartbeatResponse", error_code=code)
    if api == ApiKey.LEAVE_GROUP:
        return respond(m, "LeaveGroupResponse", error_code=code, members=())
    if api == ApiKey.OFFSET_COMMIT:
        return respond(
            m,
            "OffsetCommitResponse",
            topics=tuple(
                make(
                    m,
                    "OffsetCommitResponseTopic",
                    name=getattr(t, "name", None),
                    topic_id=getattr(t, "topic_id", None),
                    partitions=tuple(
                        make(
                            m,
                            "OffsetCommitResponsePartition",
                            partition_index=p.partition_index,
                            error_code=code,
                        )
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            ),
        )
    if api == ApiKey.OFFSET_FETCH:
        return respond(
            m,
            "OffsetFetchResponse",
            groups=tuple(
                make(
                    m,
                    "OffsetFetchResponseGroup",
                    group_id=g.group_id,
                    topics=(),
                    error_code=code,
                )
                for g in request.groups
            ),
        )
    if api == ApiKey.OFFSET_FOR_LEADER_EPOCH:
        return respond(
            m,
            "OffsetForLeaderEpochResponse",
            topics=tuple(
                m.OffsetForLeaderTopicResult(
                    topic=t.topic,
                    partitions=tuple(
                        m.EpochEndOffset(error_code=code, partition=p.partition)
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            ),
        )
    if api == ApiKey.SHARE_GROUP_HEARTBEAT:
        return respond(
            m,
            "ShareGroupHeartbeatResponse",
            error_code=code,
            error_message=message,
            member_id=request.member_id or None,
            member_epoch=-1,
            heartbeat_interval=timedelta_ms(0),
            assignment=None,
        )
    if api == ApiKey.SHARE_GROUP_DESCRIBE:
        return respond(
            m,
            "ShareGroupDescribeResponse",
            groups=tuple(described_error(m, g, code) for g in request.group_ids),
        )
    if api in (ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE):
        # The share session's error: top level, no partitions.
        name = "ShareFetchResponse" if api == ApiKey.SHARE_FETCH else "ShareAcknowledgeResponse"
        return respond(
            m,
            name,
            error_code=code,
            error_message=message,
            acquisition_lock_timeout=timedelta_ms(0),
            responses=(),
            node_endpoints=(),
        )
    if api == ApiKey.INCREMENTAL_ALTER_CONFIGS:
        return respond(
            m,
            "IncrementalAlterConfigsResponse",
            responses=tuple(
                m.AlterConfigsResourceResponse(
                    error_code=code,
                    error_message=message,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r in request.resources
            ),
        )
    raise KafkaProtocolError(f"the fake broker cannot answer API key {api}")


def described_error(m: Any, group_id: str, code: ErrorCode) -> Any:
    """A ConsumerGroupDescribe (or ShareGroupDescribe) group entry carrying only an error."""
    return make(
        m,
        "DescribedGroup",
        error_code=code,
        error_message=None,
        group_id=group_id,
        group_state="",
        group_epoch=-1,
        assignment_epoch=-1,
        assignor_name="",
        members=(),
        authorized_operations=-(2**31),
    )
