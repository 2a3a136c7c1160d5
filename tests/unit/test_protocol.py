"""Protocol layer: frames round-trip, headers, negotiation, error mapping."""

from __future__ import annotations

import dataclasses
import datetime
import pickle
import struct
import subprocess
import sys
from typing import Any

import kio.schema.response_header.v0.header as response_header_v0
import kio.schema.response_header.v1.header as response_header_v1
import kio_strategies  # noqa: F401  (registers strategies for kio's Records)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.response import ApiVersion as ApiVersionV3
from kio.schema.api_versions.v3.response import ApiVersionsResponse as ApiVersionsResponseV3
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.primitive import i16, i32Timedelta
from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup import errors
from kgroup.protocol import (
    ERROR_CLASSES,
    SUPPORTED_VERSIONS,
    ApiKey,
    FrameCodec,
    VersionRange,
    api_versions_request,
    api_versions_retry_version,
    broker_error,
    broker_ranges,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    negotiate,
    pick_version,
    request_class,
    request_header_class,
    response_class,
    response_header_class,
)

ALL_VERSIONS = [
    (api, version)
    for api, supported in SUPPORTED_VERSIONS.items()
    for version in range(supported.min, supported.max + 1)
]
IDS = [f"{api.api_name}-v{version}" for api, version in ALL_VERSIONS]

ROUND_TRIP = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
correlation_ids = st.integers(min_value=-(2**31), max_value=2**31 - 1)
client_ids = st.none() | st.text(max_size=20)


@pytest.mark.parametrize(("api", "version"), ALL_VERSIONS, ids=IDS)
def test_kio_has_every_supported_version(api: ApiKey, version: int) -> None:
    assert request_class(api, version).__version__ == version
    assert int(response_class(api, version).__api_key__) == api


@pytest.mark.parametrize(("api", "version"), ALL_VERSIONS, ids=IDS)
def test_request_frame_round_trips(api: ApiKey, version: int) -> None:
    cls = request_class(api, version)

    @ROUND_TRIP
    @given(st.from_type(cls), correlation_ids, client_ids)
    def check(request: RequestPayload, correlation_id: int, client_id: str | None) -> None:
        frame = encode_request(request, correlation_id, client_id)
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        decoded = decode_request(frame)
        assert decoded.request == request
        assert int(decoded.header.request_api_key) == api
        assert decoded.header.request_api_version == version
        assert decoded.header.correlation_id == correlation_id
        assert decoded.header.client_id == client_id

    check()


@pytest.mark.parametrize(("api", "version"), ALL_VERSIONS, ids=IDS)
def test_response_frame_round_trips(api: ApiKey, version: int) -> None:
    cls = response_class(api, version)

    @ROUND_TRIP
    @given(st.from_type(cls), correlation_ids)
    def check(response: ResponsePayload, correlation_id: int) -> None:
        # An ApiVersions error of UNSUPPORTED_VERSION is decoded as v0 on purpose
        # (tested separately), so it cannot round-trip at other versions.
        if api == ApiKey.API_VERSIONS and version > 0:
            response = _replace(response, error_code=ErrorCode.none)
        frame = encode_response(response, correlation_id)
        decoded = decode_response(frame, cls, correlation_id)
        assert decoded.response == response
        assert decoded.header.correlation_id == correlation_id

    check()


@pytest.mark.parametrize(("api", "version"), ALL_VERSIONS, ids=IDS)
def test_a_connections_codec_writes_and_reads_what_the_frame_functions_do(
    api: ApiKey, version: int
) -> None:
    # The codec reuses the last body for an equal request and the last response
    # for the same bytes: repeats and alternations must give the same frames.
    request_cls, response_cls = request_class(api, version), response_class(api, version)

    @ROUND_TRIP
    @given(
        st.lists(st.from_type(request_cls), min_size=1, max_size=3),
        st.lists(st.from_type(response_cls), min_size=1, max_size=3),
        st.lists(correlation_ids, min_size=4, max_size=4),
        client_ids,
    )
    def check(
        requests: list[RequestPayload],
        responses: list[ResponsePayload],
        ids: list[int],
        client_id: str | None,
    ) -> None:
        codec = FrameCodec(client_id)
        for request in requests + requests[::-1]:
            for correlation_id in ids[:2]:
                encoded = codec.encode(request, correlation_id)
                assert encoded == encode_request(request, correlation_id, client_id)
        if api == ApiKey.API_VERSIONS and version > 0:
            responses = [_replace(r, error_code=ErrorCode.none) for r in responses]
        for response in responses + responses[::-1]:
            for correlation_id in ids[2:]:
                payload = encode_response(response, correlation_id)[4:]
                assert codec.decode(payload, response_cls, correlation_id) == response

    check()


def test_a_codec_reuses_a_response_only_for_the_same_bytes_and_correlation_id() -> None:
    codec = FrameCodec("c")
    beat = HeartbeatResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), error_code=ErrorCode.none
    )
    payload = encode_response(beat, 5)[4:]
    first = codec.decode(payload, HeartbeatResponse, 5)
    again = encode_response(beat, 6)[4:]
    assert codec.decode(again, HeartbeatResponse, 6) is first
    # A correlation id that is not the one expected is refused as before.
    with pytest.raises(errors.MalformedResponseError, match="correlation id"):
        codec.decode(again, HeartbeatResponse, 7)
    # Other bytes are decoded anew, and refused when they are no response.
    with pytest.raises(errors.MalformedResponseError):
        codec.decode(again + b"x", HeartbeatResponse, 6)


def _replace(entity: Any, **changes: Any) -> Any:
    return dataclasses.replace(entity, **changes)


@pytest.mark.parametrize(("api", "version"), ALL_VERSIONS, ids=IDS)
def test_header_versions_follow_flexibility(api: ApiKey, version: int) -> None:
    request = request_class(api, version)
    response = response_class(api, version)
    assert request_header_class(request).__version__ == (2 if request.__flexible__ else 1)
    if api == ApiKey.API_VERSIONS:
        assert response_header_class(response) is response_header_v0.ResponseHeader
    elif response.__flexible__:
        assert response_header_class(response) is response_header_v1.ResponseHeader
    else:
        assert response_header_class(response) is response_header_v0.ResponseHeader
    # kio records the same choice on every payload class; both must agree.
    assert request_header_class(request) is request.__header_schema__
    assert response_header_class(response) is response.__header_schema__


def test_api_versions_v3_response_uses_header_v0() -> None:
    response = ApiVersionsResponseV3(
        error_code=ErrorCode.none, api_keys=(), throttle_time=i32Timedelta.parse(_ms(0))
    )
    frame = encode_response(response, 5)
    # header v0 is just the correlation id: no tagged-field byte follows it.
    assert frame[4:8] == struct.pack(">i", 5)
    assert frame[8:10] == b"\0\0"  # the error code comes right after


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


HEARTBEAT = HeartbeatResponse(throttle_time=i32Timedelta.parse(_ms(0)), error_code=ErrorCode.none)


def test_decode_rejects_wrong_correlation_id() -> None:
    frame = encode_response(HEARTBEAT, 41)
    with pytest.raises(errors.MalformedResponseError, match="Heartbeat v4.*correlation id 41"):
        decode_response(frame, HeartbeatResponse, 42)


def test_decode_rejects_trailing_garbage() -> None:
    frame = encode_response(HEARTBEAT, 1)
    body = frame[4:] + b"\x00\x01"
    with pytest.raises(
        errors.MalformedResponseError, match=r"Heartbeat v4 response has 2 trailing"
    ):
        decode_response(struct.pack(">i", len(body)) + body, HeartbeatResponse, 1)


def test_decode_rejects_truncated_bytes() -> None:
    frame = encode_response(HEARTBEAT, 1)
    body = frame[4:-2]
    with pytest.raises(errors.MalformedResponseError, match="Heartbeat v4"):
        decode_response(struct.pack(">i", len(body)) + body, HeartbeatResponse, 1)


def test_decode_rejects_size_prefix_mismatch() -> None:
    frame = encode_response(HEARTBEAT, 1)
    with pytest.raises(errors.MalformedResponseError, match="size prefix"):
        decode_response(frame + b"\0", HeartbeatResponse, 1)


def test_unsupported_api_versions_answer_is_read_as_v0() -> None:
    answer = ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=(ApiVersionV0(api_key=i16(18), min_version=i16(0), max_version=i16(2)),),
    )
    frame = encode_response(answer, 9)
    decoded = decode_response(frame, response_class(ApiKey.API_VERSIONS, 4), 9).response
    assert decoded == answer
    assert api_versions_retry_version(decoded, 4) == 2


def test_api_versions_retry_falls_back_to_v0_without_a_range() -> None:
    answer = ApiVersionsResponseV0(error_code=ErrorCode.unsupported_version, api_keys=())
    assert api_versions_retry_version(answer, 4) == 0
    assert api_versions_retry_version(answer, 0) is None


def test_api_versions_retry_not_needed_on_success() -> None:
    answer = ApiVersionsResponseV0(error_code=ErrorCode.none, api_keys=())
    assert api_versions_retry_version(answer, 4) is None


def test_api_versions_request_carries_software_from_v3() -> None:
    request: Any = api_versions_request(3, "kgroup", "0.1.0")
    assert (request.client_software_name, request.client_software_version) == ("kgroup", "0.1.0")
    assert api_versions_request(2).__version__ == 2
    with pytest.raises(ValueError, match="software"):
        api_versions_request(4, "bad name", "1")


# --- negotiation ----------------------------------------------------------------------


def _broker(**ranges: tuple[int, int]) -> dict[int, VersionRange]:
    return {ApiKey[name]: VersionRange(low, high) for name, (low, high) in ranges.items()}


def test_negotiation_picks_highest_common_version() -> None:
    versions = negotiate(_broker(METADATA=(0, 12), FIND_COORDINATOR=(0, 99)))
    assert versions.version(ApiKey.METADATA) == 12
    assert (
        versions.version(ApiKey.FIND_COORDINATOR) == SUPPORTED_VERSIONS[ApiKey.FIND_COORDINATOR].max
    )
    assert versions.request_class(ApiKey.METADATA) is MetadataRequest
    topic = versions.request_module(ApiKey.METADATA).MetadataRequestTopic
    assert topic.__version__ == 12


def test_negotiation_without_overlap_names_api_and_both_ranges() -> None:
    versions = negotiate(_broker(METADATA=(0, 9)))
    assert not versions.supports(ApiKey.METADATA)
    with pytest.raises(errors.UnsupportedVersionError, match=r"Metadata.*v10-v13.*v0-v9"):
        versions.version(ApiKey.METADATA)


def test_negotiation_with_missing_api() -> None:
    versions = negotiate(_broker(METADATA=(0, 13)))
    assert versions.supports(ApiKey.METADATA)
    with pytest.raises(
        errors.UnsupportedVersionError, match="does not support ConsumerGroupHeartbeat"
    ):
        versions.request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)


def test_pick_version() -> None:
    assert pick_version(3, VersionRange(10, 13), VersionRange(0, 12)) == 12
    with pytest.raises(errors.UnsupportedVersionError):
        pick_version(3, VersionRange(10, 13), VersionRange(14, 15))


def test_check_rejects_version_broker_lacks() -> None:
    versions = negotiate(_broker(METADATA=(0, 11)))
    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    with pytest.raises(errors.UnsupportedVersionError, match="Metadata v12"):
        versions.check(request)


def test_new_request_builds_negotiated_version() -> None:
    versions = negotiate(_broker(HEARTBEAT=(0, 3)))
    request: Any = versions.new_request(
        ApiKey.HEARTBEAT, group_id="g", generation_id=1, member_id="m", group_instance_id=None
    )
    assert request.__version__ == 3


def test_broker_ranges_reads_api_versions_response() -> None:
    response = ApiVersionsResponseV3(
        error_code=ErrorCode.none,
        api_keys=(
            ApiVersionV3(api_key=i16(68), min_version=i16(0), max_version=i16(1)),
            ApiVersionV3(api_key=i16(3), min_version=i16(0), max_version=i16(13)),
        ),
        throttle_time=i32Timedelta.parse(_ms(0)),
    )
    assert broker_ranges(response) == {68: VersionRange(0, 1), 3: VersionRange(0, 13)}


@given(st.integers(0, 20), st.integers(0, 20), st.integers(0, 20), st.integers(0, 20))
def test_intersection_is_the_common_versions(a: int, b: int, c: int, d: int) -> None:
    one, two = VersionRange(min(a, b), max(a, b)), VersionRange(min(c, d), max(c, d))
    common = one.intersect(two)
    expected = {v for v in range(21) if v in one and v in two}
    if common is None:
        assert not expected
    else:
        assert expected == set(range(common.min, common.max + 1))


# --- errors ---------------------------------------------------------------------------

EVERY_ERROR = [code for code in ErrorCode if code != ErrorCode.none]


@pytest.mark.parametrize("code", EVERY_ERROR, ids=[code.name for code in EVERY_ERROR])
def test_every_error_code_maps_to_a_broker_error(code: ErrorCode) -> None:
    error = broker_error(code, "why")
    assert isinstance(error, errors.BrokerError)
    assert isinstance(error, errors.KgroupError)
    assert (error.code, error.name, error.retriable, error.message) == (
        int(code),
        code.name.upper(),
        code.retriable,
        "why",
    )
    assert isinstance(error, errors.RetriableBrokerError) == code.retriable
    assert type(error) is ERROR_CLASSES.get(
        code, errors.RetriableBrokerError if code.retriable else errors.BrokerError
    )


SPECIFIC = {
    16: errors.NotCoordinatorError,
    15: errors.CoordinatorNotAvailableError,
    14: errors.CoordinatorLoadInProgressError,
    25: errors.UnknownMemberIdError,
    110: errors.FencedMemberEpochError,
    113: errors.StaleMemberEpochError,
    111: errors.UnreleasedInstanceIdError,
    82: errors.FencedInstanceIdError,
    81: errors.GroupMaxSizeReachedError,
    112: errors.UnsupportedAssignorError,
    128: errors.InvalidRegularExpressionError,
    69: errors.GroupIdNotFoundError,
    30: errors.GroupAuthorizationFailedError,
    29: errors.TopicAuthorizationFailedError,
    27: errors.RebalanceInProgressError,
    22: errors.IllegalGenerationError,
    79: errors.MemberIdRequiredError,
    23: errors.InconsistentGroupProtocolError,
    42: errors.InvalidRequestError,
    35: errors.BrokerUnsupportedVersionError,
    3: errors.UnknownTopicOrPartitionError,
    100: errors.UnknownTopicIdError,
    26: errors.InvalidSessionTimeoutError,
    24: errors.InvalidGroupIdError,
    7: errors.BrokerRequestTimedOutError,
    6: errors.NotLeaderOrFollowerError,
    1: errors.OffsetOutOfRangeError,
}


@pytest.mark.parametrize(
    ("code", "cls"), SPECIFIC.items(), ids=[c.__name__ for c in SPECIFIC.values()]
)
def test_specific_error_classes(code: int, cls: type[errors.BrokerError]) -> None:
    error = broker_error(code)
    assert type(error) is cls
    assert isinstance(error, errors.RetriableBrokerError) == ErrorCode(code).retriable


def test_broker_unsupported_version_is_also_an_unsupported_version_error() -> None:
    assert isinstance(broker_error(35), errors.UnsupportedVersionError)


def test_unknown_code_gets_generic_error() -> None:
    error = broker_error(30000, "new")
    assert type(error) is errors.BrokerError
    assert (error.code, error.name, error.retriable) == (30000, "UNKNOWN_ERROR_CODE_30000", False)


def test_code_zero_is_not_an_error() -> None:
    with pytest.raises(ValueError, match="not an error"):
        broker_error(0)


def test_broker_errors_pickle() -> None:
    error = broker_error(16, "moved")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is errors.NotCoordinatorError
    assert (again.code, again.message) == (16, "moved")


def test_protocol_layer_does_not_import_anyio() -> None:
    code = "import sys, kgroup.protocol; print('anyio' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
