"""Every Kafka error code kgroup tells apart, each once, with what kgroup knows of it.

One row of :class:`ErrorCode` per code: Kafka's protocol name, Kafka's number
and the code's :class:`Trait` flags. Everything else that classifies codes is
derived from these rows:

- each protocol's *reaction* stays one row per code in that protocol's table
  (:mod:`kgroup.membership.consumer.reactions`,
  :mod:`kgroup.membership.classic.reactions`), which takes its shared rows
  (coordinator moved, transient, fatal) from the traits;
- the offsets manager's retry and fencing sets, the cluster client's
  coordinator-moved test, telemetry's fencing count, the simulator's
  expected fatal errors: :func:`codes_with`;
- the typed exception of a code: the class in :mod:`kgroup.errors` that names
  the code (``class NotCoordinatorError(RetriableBrokerError,
  code=ErrorCode.NOT_COORDINATOR)``), built by :func:`kgroup.errors.broker_error`.

This module imports only the standard library, so the sans-IO membership
machines may import it (it is a leaf value, like :mod:`kgroup.types`). That is
why it does not read kio: the wire library's ``kio.schema.errors.ErrorCode`` is
Kafka's *complete* list (generated from Kafka's message definitions), and
importing it costs the kio runtime. kgroup does not copy that list: a code not
here is one kgroup does not tell apart, and only where a name or Kafka's
retriable flag is wanted for such a code (:func:`kgroup.errors.broker_error`,
the protocol layer's decoding checks) is kio consulted. The numbers, names and
:attr:`Trait.RETRIABLE` flags here are pinned to kio's by
``tests/unit/test_error_code_tables.py``.

A new code: one row here; one row in each protocol's reaction table whose
reaction is its own (a fatal code needs none: its FATAL trait gives the row);
an exception class in :mod:`kgroup.errors` if users should catch it by type.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

__all__ = ["ERROR_CODES", "ErrorCode", "Trait", "codes_with", "error_name"]


class Trait(enum.Flag):
    """What kgroup knows of an error code, whichever request it answers."""

    RETRIABLE = enum.auto()
    """Kafka marks the code retriable (its ``RetriableException``)."""
    COORDINATOR_MOVED = enum.auto()
    """The group's coordinator is elsewhere or away: look it up again, then resend."""
    TRANSIENT = enum.auto()
    """The coordinator could not serve the request just now (loading its state, timed out,
    a network failure reported inside a response): resend after a backoff."""
    UNKNOWN_TOPIC = enum.auto()
    """The broker does not know a topic by the name or id sent (deleted, created again
    with a new id, not yet known everywhere): describe it again before resending."""
    FENCED = enum.auto()
    """The coordinator no longer has the member at this id, epoch or generation: the
    partitions it owned may be another member's now."""
    INSTANCE_CONFLICT = enum.auto()
    """Another process holds, or took over, the static member's ``group.instance.id``."""
    JOIN_STEP = enum.auto()
    """A step of a normal classic join, not a failure."""
    FATAL = enum.auto()
    """No retry can make the request succeed: a group member of either protocol stops
    (its configuration, its ACLs or another process must change first)."""


_R = Trait.RETRIABLE
_NO = Trait(0)


class ErrorCode(enum.IntEnum):
    """The codes kgroup tells apart: ``NAME = Kafka's number, traits``.

    Every other code is unknown to kgroup: fatal to a member, a generic
    :class:`~kgroup.errors.BrokerError` to everyone else.
    """

    value: int
    traits: Trait

    # Hidden from the type checker, which takes each member's value for the int
    # it becomes (as kio's ErrorCode does).
    if not TYPE_CHECKING:

        def __new__(cls, value: int, traits: Trait) -> ErrorCode:
            member = int.__new__(cls, value)
            member._value_ = value
            member.traits = traits
            return member

    UNKNOWN_SERVER_ERROR = -1, _NO
    NONE = 0, _NO
    OFFSET_OUT_OF_RANGE = 1, _NO
    UNKNOWN_TOPIC_OR_PARTITION = 3, _R | Trait.UNKNOWN_TOPIC
    LEADER_NOT_AVAILABLE = 5, _R
    NOT_LEADER_OR_FOLLOWER = 6, _R
    REQUEST_TIMED_OUT = 7, _R | Trait.TRANSIENT
    OFFSET_METADATA_TOO_LARGE = 12, _NO
    NETWORK_EXCEPTION = 13, _R | Trait.TRANSIENT
    COORDINATOR_LOAD_IN_PROGRESS = 14, _R | Trait.TRANSIENT
    COORDINATOR_NOT_AVAILABLE = 15, _R | Trait.COORDINATOR_MOVED
    NOT_COORDINATOR = 16, _R | Trait.COORDINATOR_MOVED
    ILLEGAL_GENERATION = 22, Trait.FENCED
    INCONSISTENT_GROUP_PROTOCOL = 23, Trait.FATAL
    INVALID_GROUP_ID = 24, Trait.FATAL
    UNKNOWN_MEMBER_ID = 25, Trait.FENCED
    INVALID_SESSION_TIMEOUT = 26, Trait.FATAL
    REBALANCE_IN_PROGRESS = 27, _NO
    TOPIC_AUTHORIZATION_FAILED = 29, _NO
    GROUP_AUTHORIZATION_FAILED = 30, Trait.FATAL
    CLUSTER_AUTHORIZATION_FAILED = 31, _NO
    UNSUPPORTED_VERSION = 35, Trait.FATAL
    TOPIC_ALREADY_EXISTS = 36, _NO
    INVALID_REQUEST = 42, Trait.FATAL
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53, _NO
    NON_EMPTY_GROUP = 68, _NO
    GROUP_ID_NOT_FOUND = 69, Trait.FATAL
    FENCED_LEADER_EPOCH = 74, _R
    UNKNOWN_LEADER_EPOCH = 75, _R
    MEMBER_ID_REQUIRED = 79, Trait.JOIN_STEP
    GROUP_MAX_SIZE_REACHED = 81, Trait.FATAL
    FENCED_INSTANCE_ID = 82, Trait.FENCED | Trait.INSTANCE_CONFLICT | Trait.FATAL
    UNSTABLE_OFFSET_COMMIT = 88, _R
    UNKNOWN_TOPIC_ID = 100, _R | Trait.UNKNOWN_TOPIC
    FENCED_MEMBER_EPOCH = 110, Trait.FENCED
    UNRELEASED_INSTANCE_ID = 111, Trait.INSTANCE_CONFLICT | Trait.FATAL
    UNSUPPORTED_ASSIGNOR = 112, Trait.FATAL
    STALE_MEMBER_EPOCH = 113, _NO
    # The share data path (KIP-932). INVALID_RECORD_STATE answers an acknowledgement of
    # a record this member no longer holds (its lock expired, another member acquired
    # it): per partition, never retried. The two session codes reopen the share
    # session at epoch 0; the limit is the broker's cap on share sessions.
    INVALID_RECORD_STATE = 121, _NO
    SHARE_SESSION_NOT_FOUND = 122, _R
    INVALID_SHARE_SESSION_EPOCH = 123, _R
    INVALID_REGULAR_EXPRESSION = 128, Trait.FATAL
    SHARE_SESSION_LIMIT_REACHED = 133, _R


ERROR_CODES: Mapping[str, int] = MappingProxyType({code.name: int(code) for code in ErrorCode})
"""Protocol name -> code, for every :class:`ErrorCode`."""


def codes_with(traits: Trait, *, without: Trait = _NO) -> frozenset[ErrorCode]:
    """The codes that have every one of ``traits`` and none of ``without``."""
    return frozenset(
        code for code in ErrorCode if traits in code.traits and not code.traits & without
    )


def error_name(code: int) -> str:
    """Kafka's protocol name for ``code``, or ``UNKNOWN_ERROR_<code>`` when not in the table."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"
