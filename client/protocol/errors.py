"""Broker error codes to kgroup exceptions.

The classes live in :mod:`kgroup.errors` (so users import them from one place);
this module holds the table from kio's :class:`~kio.schema.errors.ErrorCode` to
them, and :func:`broker_error`, which builds the most specific one.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from kio.schema.errors import ErrorCode

from kgroup import errors

__all__ = ["ERROR_CLASSES", "broker_error", "raise_for_error"]

ERROR_CLASSES: Final[Mapping[ErrorCode, type[errors.BrokerError]]] = MappingProxyType(
    {
        ErrorCode.not_coordinator: errors.NotCoordinatorError,
        ErrorCode.coordinator_not_available: errors.CoordinatorNotAvailableError,
        ErrorCode.coordinator_load_in_progress: errors.CoordinatorLoadInProgressError,
        ErrorCode.unknown_topic_or_partition: errors.UnknownTopicOrPartitionError,
        ErrorCode.unknown_topic_id: errors.UnknownTopicIdError,
        ErrorCode.leader_not_available: errors.LeaderNotAvailableError,
        ErrorCode.not_leader_or_follower: errors.NotLeaderOrFollowerError,
        ErrorCode.fenced_leader_epoch: errors.FencedLeaderEpochError,
        ErrorCode.unknown_leader_epoch: errors.UnknownLeaderEpochError,
        ErrorCode.request_timed_out: errors.BrokerRequestTimedOutError,
        ErrorCode.unstable_offset_commit: errors.UnstableOffsetCommitError,
        ErrorCode.unknown_member_id: errors.UnknownMemberIdError,
        ErrorCode.fenced_member_epoch: errors.FencedMemberEpochError,
        ErrorCode.stale_member_epoch: errors.StaleMemberEpochError,
        ErrorCode.unreleased_instance_id: errors.UnreleasedInstanceIdError,
        ErrorCode.fenced_instance_id: errors.FencedInstanceIdError,
        ErrorCode.group_max_size_reached: errors.GroupMaxSizeReachedError,
        ErrorCode.unsupported_assignor: errors.UnsupportedAssignorError,
        ErrorCode.invalid_regular_expression: errors.InvalidRegularExpressionError,
        ErrorCode.group_id_not_found: errors.GroupIdNotFoundError,
        ErrorCode.rebalance_in_progress: errors.RebalanceInProgressError,
        ErrorCode.illegal_generation: errors.IllegalGenerationError,
        ErrorCode.member_id_required: errors.MemberIdRequiredError,
        ErrorCode.inconsistent_group_protocol: errors.InconsistentGroupProtocolError,
        ErrorCode.invalid_session_timeout: errors.InvalidSessionTimeoutError,
        ErrorCode.invalid_group_id: errors.InvalidGroupIdError,
        ErrorCode.non_empty_group: errors.NonEmptyGroupError,
        ErrorCode.group_authorization_failed: errors.GroupAuthorizationFailedError,
        ErrorCode.topic_authorization_failed: errors.TopicAuthorizationFailedError,
        ErrorCode.cluster_authorization_failed: errors.ClusterAuthorizationFailedError,
        ErrorCode.transactional_id_authorization_failed: (
            errors.TransactionalIdAuthorizationFailedError
        ),
        ErrorCode.invalid_request: errors.InvalidRequestError,
        ErrorCode.offset_out_of_range: errors.OffsetOutOfRangeError,
        ErrorCode.offset_metadata_too_large: errors.OffsetMetadataTooLargeError,
        ErrorCode.topic_already_exists: errors.TopicAlreadyExistsError,
        ErrorCode.unknown_server_error: errors.UnknownServerError,
        ErrorCode.unsupported_version: errors.BrokerUnsupportedVersionError,
    }
)
"""The specific exception class of every error code kgroup reacts to."""


def broker_error(code: int, message: str | None = None) -> errors.BrokerError:
    """The exception for a broker's error ``code``, with the broker's ``message``.

    Returns the specific class from :data:`ERROR_CLASSES` if there is one, else
    :class:`~kgroup.errors.RetriableBrokerError` or
    :class:`~kgroup.errors.BrokerError` by Kafka's retriable flag. A code kio
    does not know (a newer broker) gets the generic, non-retriable class.

    Raises:
        ValueError: ``code`` is 0, which is not an error.
    """
    if code == ErrorCode.none:
        raise ValueError("error code 0 (NONE) is not an error")
    try:
        known = ErrorCode(code)
    except ValueError:
        return errors.BrokerError(code, f"UNKNOWN_ERROR_CODE_{code}", False, message)
    cls = ERROR_CLASSES.get(known)
    if cls is None:
        cls = errors.RetriableBrokerError if known.retriable else errors.BrokerError
    return cls(int(known), known.name.upper(), known.retriable, message)


def raise_for_error(code: int, message: str | None = None) -> None:
    """Raise :func:`broker_error` of ``code`` unless it is 0 (NONE)."""
    if code != ErrorCode.none:
        raise broker_error(code, message)
