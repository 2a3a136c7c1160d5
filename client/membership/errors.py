"""Heartbeat error codes and how the new-protocol member reacts to each.

The membership package may import only the standard library and
:mod:`kgroup.types`, so it works with Kafka's numeric error codes and their
protocol names rather than with :mod:`kgroup.errors` classes; the runtime turns
the reported codes into typed exceptions.

The numbers are Kafka's (``org.apache.kafka.common.protocol.Errors``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "ERROR_CODES",
    "REACTIONS",
    "Reaction",
    "error_name",
    "reaction_for",
]

# Only the codes the member tells apart; everything else is "unknown" and fatal.
ERROR_CODES: Mapping[str, int] = MappingProxyType(
    {
        "UNKNOWN_SERVER_ERROR": -1,
        "NONE": 0,
        "REQUEST_TIMED_OUT": 7,
        "NETWORK_EXCEPTION": 13,
        "COORDINATOR_LOAD_IN_PROGRESS": 14,
        "COORDINATOR_NOT_AVAILABLE": 15,
        "NOT_COORDINATOR": 16,
        "UNKNOWN_MEMBER_ID": 25,
        "TOPIC_AUTHORIZATION_FAILED": 29,
        "GROUP_AUTHORIZATION_FAILED": 30,
        "UNSUPPORTED_VERSION": 35,
        "INVALID_REQUEST": 42,
        "GROUP_ID_NOT_FOUND": 69,
        "GROUP_MAX_SIZE_REACHED": 81,
        "FENCED_INSTANCE_ID": 82,
        "FENCED_MEMBER_EPOCH": 110,
        "UNRELEASED_INSTANCE_ID": 111,
        "UNSUPPORTED_ASSIGNOR": 112,
        "STALE_MEMBER_EPOCH": 113,
        "INVALID_REGULAR_EXPRESSION": 128,
    }
)

_NAMES: Mapping[int, str] = MappingProxyType({code: name for name, code in ERROR_CODES.items()})


class Reaction(enum.Enum):
    """What the member does when a heartbeat response carries an error code."""

    REDISCOVER = "rediscover coordinator, retry without backoff"
    RETRY_WITH_BACKOFF = "retry with backoff, keep state, next heartbeat full"
    FENCED = "lost callback, epoch 0, same member id, rejoin"
    REPORT_AND_RETRY = "report to the application (not fatal), retry with backoff"
    FATAL = "fatal: lost callback unless leaving, typed error from poll"
    FATAL_UNSUPPORTED_VERSION = "fatal; the marker for the classic fallback of group.protocol=auto"


REACTIONS: Mapping[int, Reaction] = MappingProxyType(
    {
        ERROR_CODES["NOT_COORDINATOR"]: Reaction.REDISCOVER,
        ERROR_CODES["COORDINATOR_NOT_AVAILABLE"]: Reaction.REDISCOVER,
        ERROR_CODES["COORDINATOR_LOAD_IN_PROGRESS"]: Reaction.RETRY_WITH_BACKOFF,
        # Transport-flavoured codes inside a response mean the same as a timeout.
        ERROR_CODES["REQUEST_TIMED_OUT"]: Reaction.RETRY_WITH_BACKOFF,
        ERROR_CODES["NETWORK_EXCEPTION"]: Reaction.RETRY_WITH_BACKOFF,
        ERROR_CODES["FENCED_MEMBER_EPOCH"]: Reaction.FENCED,
        ERROR_CODES["UNKNOWN_MEMBER_ID"]: Reaction.FENCED,
        ERROR_CODES["TOPIC_AUTHORIZATION_FAILED"]: Reaction.REPORT_AND_RETRY,
        ERROR_CODES["GROUP_AUTHORIZATION_FAILED"]: Reaction.FATAL,
        ERROR_CODES["INVALID_REQUEST"]: Reaction.FATAL,
        ERROR_CODES["GROUP_MAX_SIZE_REACHED"]: Reaction.FATAL,
        ERROR_CODES["UNSUPPORTED_ASSIGNOR"]: Reaction.FATAL,
        ERROR_CODES["INVALID_REGULAR_EXPRESSION"]: Reaction.FATAL,
        ERROR_CODES["UNRELEASED_INSTANCE_ID"]: Reaction.FATAL,
        ERROR_CODES["FENCED_INSTANCE_ID"]: Reaction.FATAL,
        ERROR_CODES["GROUP_ID_NOT_FOUND"]: Reaction.FATAL,
        ERROR_CODES["UNSUPPORTED_VERSION"]: Reaction.FATAL_UNSUPPORTED_VERSION,
    }
)


def reaction_for(code: int) -> Reaction:
    """The reaction to a non-zero heartbeat error code; unknown codes are fatal."""
    if code == 0:
        raise ValueError("error code 0 (NONE) is a success, not an error")
    return REACTIONS.get(code, Reaction.FATAL)


def error_name(code: int) -> str:
    """Kafka's protocol name for ``code``, or ``UNKNOWN_ERROR_<code>`` when not in the table."""
    return _NAMES.get(code, f"UNKNOWN_ERROR_{code}")
