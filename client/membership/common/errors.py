"""Kafka error codes, in one place for both members' reaction tables.

The membership package may import only the standard library and
:mod:`kgroup.types`, so it works with Kafka's numeric error codes and their
protocol names rather than with :mod:`kgroup.errors` classes; the runtime turns
the reported codes into typed exceptions. Each protocol has its one table of
reactions (:mod:`kgroup.membership.consumer.reactions`,
:mod:`kgroup.membership.classic.reactions`) keyed by these codes.

The numbers are Kafka's (``org.apache.kafka.common.protocol.Errors``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

__all__ = ["ERROR_CODES", "ErrorCode", "coordinator_reactions", "error_name", "reaction_in"]

_R = TypeVar("_R", bound=enum.Enum)


class ErrorCode(enum.IntEnum):
    """The codes the members tell apart; every other code is unknown (and fatal)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    REQUEST_TIMED_OUT = 7
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    INVALID_REGULAR_EXPRESSION = 128


ERROR_CODES: Mapping[str, int] = MappingProxyType({code.name: code.value for code in ErrorCode})
"""Protocol name -> code, for every :class:`ErrorCode`."""


def error_name(code: int) -> str:
    """Kafka's protocol name for ``code``, or ``UNKNOWN_ERROR_<code>`` when not in the table."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


def coordinator_reactions(*, rediscover: _R, retry: _R) -> dict[int, _R]:
    """The entries every group API's table shares: coordinator moves and transient failures.

    Both protocols look the coordinator up again when it moved or is away, and
    retry with backoff while it loads its state or when a transport-flavoured
    code arrives inside a response (it means the same as a timeout). Each
    table starts from these and adds its protocol's own codes.
    """
    return {
        ErrorCode.NOT_COORDINATOR: rediscover,
        ErrorCode.COORDINATOR_NOT_AVAILABLE: rediscover,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: retry,
        ErrorCode.REQUEST_TIMED_OUT: retry,
        ErrorCode.NETWORK_EXCEPTION: retry,
    }


def reaction_in(table: Mapping[int, _R], code: int, unknown: _R) -> _R:
    """A protocol's reaction to the non-zero ``code``: its entry in ``table``, else ``unknown``."""
    if code == ErrorCode.NONE:
        raise ValueError("error code 0 (NONE) is a success, not an error")
    return table.get(code, unknown)
