"""Fuzzing response decoding: every API version kgroup negotiates, nothing but
MalformedResponseError, never an abort (issue 10).

The long run is ``python -m kgroup.protocol.fuzz --seconds 60``; this suite keeps
to a few seconds.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap

import kio_strategies  # noqa: F401  (registers strategies for kio's Records)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.consumer_group_heartbeat.v0.response import (
    ConsumerGroupHeartbeatResponse as ConsumerGroupHeartbeatResponseV0,
)
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.protocol import ResponsePayload

from kgroup.errors import MalformedResponseError
from kgroup.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    decode_response,
    encode_response,
    response_class,
)
from kgroup.protocol.fuzz import (
    CORRELATION_ID,
    Outcome,
    Target,
    mutate,
    random_frame,
    targets,
    try_frame,
)
from kgroup.protocol.structure import StructureError, check, locate

TARGETS = targets()
FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def frame_of(payload_hex: str) -> bytes:
    payload = bytes.fromhex(payload_hex)
    return len(payload).to_bytes(4, "big") + payload


def test_every_negotiated_version_is_fuzzed() -> None:
    assert {(t.api, t.version) for t in TARGETS} == {
        (api, version)
        for api, supported in SUPPORTED_VERSIONS.items()
        for version in range(supported.min, supported.max + 1)
    }


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_generated_frames_decode_and_the_walk_ends_where_kio_does(target: Target) -> None:
    rnd = random.Random(str(target))
    cls = target.response_cls
    header_size = 5 if cls.__header_schema__.__flexible__ else 4
    for _ in range(20):
        frame = random_frame(target, rnd)
        assert try_frame(frame, target) == Outcome.DECODED
        payload = frame[4:]
        _, size = entity_reader(cls)(payload, header_size)
        assert check(cls, payload, header_size) == header_size + size == len(payload)


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_generated_frames_with_unknown_tagged_fields_decode(target: Target) -> None:
    rnd = random.Random(f"unknown tags in {target}")
    for _ in range(20):
        assert try_frame(random_frame(target, rnd, unknown=True), target) == Outcome.DECODED


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_mutated_frames_decode_or_raise_malformed_response_error(target: Target) -> None:
    rnd = random.Random(f"mutations of {target}")
    outcomes = {Outcome.DECODED: 0, Outcome.MALFORMED: 0}
    seeds = [random_frame(target, rnd, unknown=i % 2 == 1) for i in range(6)]
    for _ in range(200):
        frame = mutate(rnd.choice(seeds), rnd, rnd.choice(seeds))
        outcomes[try_frame(frame, target)] += 1  # anything else raised fails the test
    assert outcomes[Outcome.MALFORMED] > 0


@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_broken_kio_encoded_responses_raise_only_malformed_response_error(
    data: st.DataObject,
) -> None:
    # Seeds from kio's own strategies, independent of the generator in kgroup.protocol.fuzz.
    target = data.draw(st.sampled_from(TARGETS))
    response: ResponsePayload = data.draw(st.from_type(target.response_cls))
    frame = encode_response(response, CORRELATION_ID)
    rnd = data.draw(st.randoms(use_true_random=False))
    try_frame(mutate(frame, rnd), target)


@FUZZ
@given(st.sampled_from(TARGETS), st.binary(max_size=200))
def test_random_bytes_raise_only_malformed_response_error(target: Target, data: bytes) -> None:
    try_frame(data, target)
    try_frame(len(data).to_bytes(4, "big") + data, target)
    try_frame(frame_of("00000007") + data, target)


def test_the_frame_that_aborted_python_is_a_malformed_response_naming_the_field() -> None:
    # Issue 10: kio's reader allocated ~250 GB from this array length, and Rust
    # aborted the process. Run in a child so that a regression fails this test
    # instead of killing the test run.
    script = textwrap.dedent(
        """
        from kgroup.errors import MalformedResponseError
        from kgroup.protocol import ApiKey, decode_response, response_class
        frame = bytes.fromhex("0000000e00000007000000059affffffff74")
        try:
            decode_response(frame, response_class(ApiKey.OFFSET_COMMIT, 10), 7)
        except MalformedResponseError as exc:
            print(exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "OffsetCommit v10 response" in done.stdout
    assert "field topics" in done.stdout
    assert "exceeds the 0 bytes left" in done.stdout


def heartbeat_v0(
    *, error: str = "0000", message: str = "00", member_id: str = "00", rest: str = "ff00"
) -> bytes:
    """A ConsumerGroupHeartbeat v0 response frame, field by field (hex)."""
    return frame_of(
        "00000007"
        "00"  # header: correlation id 7, no tagged fields
        "00000000"
        + error
        + message
        + member_id  # throttle, error code, message, member id
        + "00000005"
        "00001388"  # member epoch 5, heartbeat interval 5000 ms
         + rest  # assignment (ff: null) and the body's tagged fields
    )


HEARTBEAT_V0 = ConsumerGroupHeartbeatResponseV0


def test_null_array_the_schema_forbids_is_malformed_though_kio_reads_none() -> None:
    # assignment present (01), topic_partitions null (00), no tags, no tags.
    frame = heartbeat_v0(rest="01000000")
    read, _ = entity_reader(HEARTBEAT_V0)(frame[4:], 5)
    assert read.assignment is not None
    handed_on: object = read.assignment.topic_partitions  # what kio alone hands on: None
    assert handed_on is None
    with pytest.raises(
        MalformedResponseError,
        match=r"ConsumerGroupHeartbeat v0 response: field assignment\.topic_partitions: "
        r"null array",
    ):
        decode_response(frame, HEARTBEAT_V0, 7)


def test_array_longer_than_the_bytes_left_names_the_item_path() -> None:
    topic = "00" * 16  # topic id
    frame = heartbeat_v0(rest="0102" + topic + "8080808008000000")
    with pytest.raises(
        MalformedResponseError,
        match=r"field assignment\.topic_partitions\[0\]\.partitions: array of 2147483647 x 4",
    ):
        decode_response(frame, HEARTBEAT_V0, 7)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("ffffffffff7f", "unsigned varint longer than 5 bytes"),
        ("80", "truncated unsigned varint"),
        ("05616263", "length 4 exceeds the 3 bytes left"),
    ],
)
def test_bad_compact_string_lengths_name_the_field(body: str, message: str) -> None:
    # The frame ends in the error message (a compact nullable string).
    frame = frame_of("0000000700000000000000" + body)
    with pytest.raises(MalformedResponseError, match=rf"field error_message: {message}"):
        decode_response(frame, HEARTBEAT_V0, 7)


def test_value_kio_refuses_is_named_by_the_thorough_walk() -> None:
    bad_utf8 = heartbeat_v0(member_id="03ff41")
    with pytest.raises(MalformedResponseError, match=r"field member_id: string is not UTF-8"):
        decode_response(bad_utf8, HEARTBEAT_V0, 7)
    unknown_code = heartbeat_v0(error="7fff")
    with pytest.raises(MalformedResponseError, match=r"field error_code: error code 32767"):
        decode_response(unknown_code, HEARTBEAT_V0, 7)
    assert 32767 not in {int(code) for code in ErrorCode}


def test_unknown_tagged_fields_are_skipped_as_kafka_requires() -> None:
    plain = decode_response(heartbeat_v0(), HEARTBEAT_V0, 7).response
    # Tag 5 (one byte) and tag 7 (two bytes) in the body; kio alone raises on them.
    tagged = heartbeat_v0(rest="ff020501aa0702abcd")
    with pytest.raises(KeyError):
        entity_reader(HEARTBEAT_V0)(tagged[4:], 5)
    assert decode_response(tagged, HEARTBEAT_V0, 7).response == plain
    # In a nested entity: an assignment with no partitions and tag 9 (empty).
    nested = heartbeat_v0(rest="010101090000")
    response = decode_response(nested, HEARTBEAT_V0, 7).response
    assert isinstance(response, ConsumerGroupHeartbeatResponseV0)
    assert response.assignment is not None
    assert response.assignment.topic_partitions == ()


def test_tagged_fields_that_do_not_fit_are_malformed() -> None:
    oversized = heartbeat_v0(rest="ff01057f00")
    with pytest.raises(MalformedResponseError, match=r"\(tag 5\): size 127 exceeds"):
        decode_response(oversized, HEARTBEAT_V0, 7)
    # ApiVersions v3: no api keys, and in its known tag 0 (supported features) a
    # feature carrying unknown tag 5. Cutting it out would change tag 0's size.
    api_versions = frame_of("000000070000010000000001000a02026100010002010500")
    with pytest.raises(MalformedResponseError, match=r"supported_features \(tag 0\)"):
        decode_response(api_versions, response_class(ApiKey.API_VERSIONS, 3), 7)
    many = "".join(f"{tag:02x}00" for tag in range(10, 75))  # 65 unknown, empty tags
    with pytest.raises(MalformedResponseError, match="more than 64 unknown tagged fields"):
        decode_response(heartbeat_v0(rest="ff41" + many), HEARTBEAT_V0, 7)


def test_locate_agrees_with_check_on_valid_bytes() -> None:
    frame = heartbeat_v0()
    assert check(HEARTBEAT_V0, frame[4:], 5) == len(frame) - 4
    assert locate(HEARTBEAT_V0, frame[4:], 5) is None
    found = locate(HEARTBEAT_V0, frame[4:-1], 5)
    assert isinstance(found, StructureError)
    assert found.field == "(tagged fields)"


def test_long_fuzz_command_counts_frames_and_exits_cleanly() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kgroup.protocol.fuzz", "--seconds", "2", "--seed", "10"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 other exceptions, 0 worker crashes" in done.stdout
    tried = int(done.stdout.split(" frames tried")[0].rsplit(" ", 1)[1])
    assert tried > 0
