"""The Kafka protocol layer: frames, headers, correlation ids, version negotiation, errors,
and every request kgroup sends.

Built on kio's generated codecs; pure code over bytes, no I/O and no anyio.

- :mod:`~kgroup.protocol.apis`: the APIs kgroup uses and the versions it supports.
- :mod:`~kgroup.protocol.framing`: size prefix, headers, encode/decode of whole frames.
- :mod:`~kgroup.protocol.negotiation`: choosing versions from a broker's ApiVersions.
- :mod:`~kgroup.protocol.requests`: one module per API: build the request, parse the response.
- :mod:`~kgroup.protocol.classic_payload`: the subscription / assignment bytes
  embedded in JoinGroup and SyncGroup.
- :mod:`~kgroup.protocol.cluster`: the cluster metadata values (brokers, topics, partitions).
"""

# Also here, where docs/protocol.md first named them; they live in kgroup.errors.
from kgroup.errors import ERROR_CLASSES, broker_error, raise_for_error
from kgroup.protocol.apis import (
    SUPPORTED_VERSIONS,
    ApiKey,
    VersionRange,
    request_class,
    request_module,
    response_class,
    response_module,
)
from kgroup.protocol.framing import (
    FrameCodec,
    RequestFrame,
    ResponseFrame,
    decode_request,
    decode_response,
    decode_response_payload,
    encode_request,
    encode_response,
    request_header_class,
    response_header_class,
)
from kgroup.protocol.negotiation import (
    NegotiatedVersions,
    api_versions_request,
    api_versions_retry_version,
    broker_ranges,
    negotiate,
    pick_version,
)

__all__ = [
    "ERROR_CLASSES",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "FrameCodec",
    "NegotiatedVersions",
    "RequestFrame",
    "ResponseFrame",
    "VersionRange",
    "api_versions_request",
    "api_versions_retry_version",
    "broker_error",
    "broker_ranges",
    "decode_request",
    "decode_response",
    "decode_response_payload",
    "encode_request",
    "encode_response",
    "negotiate",
    "pick_version",
    "raise_for_error",
    "request_class",
    "request_header_class",
    "request_module",
    "response_class",
    "response_header_class",
    "response_module",
]
