"""The one exception hierarchy of kgroup.

Every exception kgroup raises on purpose derives from :class:`KgroupError`, so
``except kgroup.KgroupError`` catches them all. The tree::

    KgroupError
    ├── ConfigError                  bad or contradictory configuration (also a ValueError)
    ├── KafkaProtocolError           the wire: something the client and broker cannot agree on
    │   ├── MalformedResponseError   bytes that do not decode as the expected response
    │   │   ├── MalformedResponseConnectionError  ... so its connection was closed (retriable;
    │   │   │                                      also a KafkaConnectionError)
    │   │   ├── ClassicPayloadError  embedded classic subscription or assignment bytes
    │   │   └── CorruptRecordError   a fetched record batch that does not decode (names the
    │   │                            topic, partition and offset)
    │   └── UnsupportedVersionError  no API version both sides support
    ├── TransportError               the network
    │   ├── KafkaConnectionError     connect failed, connection lost
    │   ├── RequestTimeoutError      no response within the request timeout
    │   └── NoBrokersAvailableError  every bootstrap server failed
    ├── BrokerError                  the broker answered with an error code (generic: other codes)
    │   ├── RetriableBrokerError     Kafka marks the code retriable (generic: other retriable codes)
    │   │   ├── NotCoordinatorError, CoordinatorNotAvailableError,
    │   │   │   CoordinatorLoadInProgressError
    │   │   ├── UnknownTopicOrPartitionError, UnknownTopicIdError, LeaderNotAvailableError,
    │   │   │   NotLeaderOrFollowerError, FencedLeaderEpochError, UnknownLeaderEpochError
    │   │   ├── BrokerRequestTimedOutError   the broker's own timeout (error 7)
    │   │   └── UnstableOffsetCommitError
    │   ├── UnknownMemberIdError, FencedMemberEpochError, StaleMemberEpochError,
    │   │   UnreleasedInstanceIdError, FencedInstanceIdError, GroupMaxSizeReachedError,
    │   │   UnsupportedAssignorError, InvalidRegularExpressionError, GroupIdNotFoundError
    │   │   (UpgradeRefusedError: a classic group the broker would not convert),
    │   │   RebalanceInProgressError, IllegalGenerationError, MemberIdRequiredError,
    │   │   InconsistentGroupProtocolError, InvalidSessionTimeoutError, InvalidGroupIdError,
    │   │   NonEmptyGroupError
    │   ├── GroupAuthorizationFailedError, TopicAuthorizationFailedError,
    │   │   ClusterAuthorizationFailedError, TransactionalIdAuthorizationFailedError
    │   │   (also AuthorizationErrors)
    │   ├── InvalidRequestError, OffsetOutOfRangeError, OffsetMetadataTooLargeError,
    │   │   TopicAlreadyExistsError, UnknownServerError
    │   └── BrokerUnsupportedVersionError   error 35; also an UnsupportedVersionError
    ├── CommitFailedError            a commit refused because the group moved on without the
    │                                member (a classic generation ended, or a consumer-protocol
    │                                member's session or epoch did)
    ├── NothingToCommitError         commit() with explicit offsets of no owned partition (also
    │                                a RuntimeError)
    ├── InvalidSubscriptionError     subscribe() mixes a regex with names, names several regexes
    │                                or an empty or non-string topic (also a ValueError)
    ├── ConsumerClosedError          the consumer was closed
    ├── UnacknowledgedRecordsError   a share consumer's poll in explicit acknowledgement mode
    │                                before every record handed out was acknowledged (also a
    │                                RuntimeError)
    ├── InvalidAcknowledgementError  acknowledge() of a record not waiting for one, or under
    │                                implicit acknowledgement (also a ValueError)
    ├── WakeupError                  wakeup() interrupted a poll, consume or iteration
    ├── MixedAssignmentError         subscribe() and assign() mixed (also a RuntimeError)
    ├── AlreadyAssignedError         incremental_assign() of an assigned partition (also a
    │                                ValueError)
    ├── NotAssignedError             the partition is not assigned to this consumer (also a
    │                                ValueError)
    ├── LogTruncationError           committed offsets the leaders' logs no longer hold, with
    │                                auto.offset.reset=error (KIP-320): seek those partitions
    ├── SecurityError                a secured connection failed; fatal, never retried
    │   ├── TlsError                 the TLS handshake failed (untrusted, mismatched, expired)
    │   ├── AuthenticationError      SASL authentication failed (wrong credentials, refused token)
    │   ├── UnsupportedSaslMechanismError  the broker does not enable the mechanism
    │   ├── SecurityProtocolMismatchError  the listener speaks another security.protocol
    │   └── AuthorizationError       an ACL denied an operation (the four *AuthorizationFailedError
    │                                classes above are also BrokerErrors)
    ├── AssignorError                an assignor could not compute an assignment
    │   └── InvalidAssignmentError   an assignor's output breaks a rule (AssignmentViolation)
    ├── DataPlaneError               librdkafka stopped consuming a partition, or a lookup it
    │                                made failed (keeps librdkafka's error code)
    ├── GroupConfigRefusedError      the broker refused to set a group config key (names the
    │                                key, the value and the broker's reason)
    ├── DeserializationError         key.deserializer or value.deserializer raised on a
    │   │                            record; the consumer stays at it: seek past it to skip
    │   ├── KeyDeserializationError
    │   └── ValueDeserializationError
    ├── TelemetryError               telemetry went wrong (never in the consumer's hot path)
    │   └── TelemetryDecodeError     not a telemetry event this kgroup can read (also a
    │                                ValueError)
    ├── ReportError                  ``kgroup report`` could not produce the report
    │   ├── SparkMissingError        pyspark (or matplotlib) is not installed
    │   ├── ReportInputError         no files, no events, an unreadable topic
    │   └── ConnectorJarError        Spark's Kafka connector jars could not be resolved
    ├── ProduceFailedError           ``kgroup topics produce``: records not acknowledged
    ├── DemoFailedError              ``kgroup demo``: the group did not converge in time
    └── HarnessError                 kgroup.testing could not start or drive a broker
        ├── JavaNotFoundError
        ├── JarResolutionError
        └── BrokerStartError

:class:`BrokerError` keeps the broker's error ``code``, its protocol ``name``,
whether Kafka marks it ``retriable``, and the broker's ``message`` if it sent one.
Build one from a response's error code with :func:`broker_error`, which picks the
most specific class: each class names the code it stands for
(``class NotCoordinatorError(RetriableBrokerError, code=ErrorCode.NOT_COORDINATOR)``),
and :data:`ERROR_CLASSES` is the table those declarations make. The codes and
what kgroup knows of them are :mod:`kgroup.error_codes`. Names that would
collide with a transport error carry a ``Broker`` prefix
(``BrokerRequestTimedOutError`` is the broker's error code 7,
``RequestTimeoutError`` is kgroup's own wait running out).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from kgroup.error_codes import ErrorCode, Trait

if TYPE_CHECKING:
    # Annotations only: kgroup.types imports this module.
    from kgroup.types import TopicPartition, Truncation

__all__ = [
    "ERROR_CLASSES",
    "AlreadyAssignedError",
    "AssignmentViolation",
    "AssignorError",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerError",
    "BrokerRequestTimedOutError",
    "BrokerStartError",
    "BrokerUnsupportedVersionError",
    "ClassicPayloadError",
    "ClusterAuthorizationFailedError",
    "CommitFailedError",
    "ConfigError",
    "ConnectorJarError",
    "ConsumerClosedError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptRecordError",
    "DataPlaneError",
    "DemoFailedError",
    "DeserializationError",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FencedMemberEpochError",
    "GroupAuthorizationFailedError",
    "GroupConfigRefusedError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "HarnessError",
    "IllegalGenerationError",
    "InconsistentGroupProtocolError",
    "InvalidAcknowledgementError",
    "InvalidAssignmentError",
    "InvalidGroupIdError",
    "InvalidRegularExpressionError",
    "InvalidRequestError",
    "InvalidSessionTimeoutError",
    "InvalidSubscriptionError",
    "JarResolutionError",
    "JavaNotFoundError",
    "KafkaConnectionError",
    "KafkaProtocolError",
    "KeyDeserializationError",
    "KgroupError",
    "LeaderNotAvailableError",
    "LogTruncationError",
    "MalformedResponseConnectionError",
    "MalformedResponseError",
    "MemberIdRequiredError",
    "MixedAssignmentError",
    "NoBrokersAvailableError",
    "NonEmptyGroupError",
    "NotAssignedError",
    "NotCoordinatorError",
    "NotLeaderOrFollowerError",
    "NothingToCommitError",
    "OffsetMetadataTooLargeError",
    "OffsetOutOfRangeError",
    "ProduceFailedError",
    "RebalanceInProgressError",
    "ReportError",
    "ReportInputError",
    "RequestTimeoutError",
    "RetriableBrokerError",
    "SecurityError",
    "SecurityProtocolMismatchError",
    "SparkMissingError",
    "StaleMemberEpochError",
    "TelemetryDecodeError",
    "TelemetryError",
    "TlsError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TransactionalIdAuthorizationFailedError",
    "TransportError",
    "UnacknowledgedRecordsError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownServerError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnreleasedInstanceIdError",
    "UnstableOffsetCommitError",
    "UnsupportedAssignorError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "UpgradeRefusedError",
    "ValueDeserializationError",
    "WakeupError",
    "broker_error",
    "raise_for_error",
]

_C = ErrorCode


class KgroupError(Exception):
    """Root of every exception kgroup raises on purpose.

    Errors that carry fields (:class:`BrokerError`, :class:`TlsError` ...) are
    dataclasses: each field is declared once, typed, and is a constructor
    parameter; ``__post_init__`` writes the message. They are not frozen
    (raising and ``contextlib`` set attributes such as ``__traceback__``) and
    keep the exception's identity equality and message repr (``eq=False,
    repr=False``).
    """

    _pickled_fields: ClassVar[tuple[str, ...]] = ()
    """For an error built from arguments that are not its dataclass fields: the
    attributes that, in constructor order, rebuild it."""

    # An exception pickles its ``args`` (the message) by default, which a
    # constructor taking fields cannot take back: rebuild it from the fields.
    def __reduce__(self) -> str | tuple[Any, ...]:
        # Typed as a plain class: mypy takes KgroupError for a class that can
        # never be a dataclass and would drop the dataclass branch.
        cls: type[object] = type(self)
        if self._pickled_fields:
            names = self._pickled_fields
        elif dataclasses.is_dataclass(cls):
            names = tuple(f.name for f in dataclasses.fields(cls))
        else:
            return super().__reduce__()
        return (cls, tuple(getattr(self, name) for name in names))


class ConfigError(KgroupError, ValueError):
    """The configuration is invalid; the message names the key and what to do."""


class KafkaProtocolError(KgroupError):
    """The client and the broker cannot agree on the wire."""


class MalformedResponseError(KafkaProtocolError):
    """A response did not decode as the response the request expects."""


class UnsupportedVersionError(KafkaProtocolError):
    """No version of an API is supported by both kgroup and the broker."""


class TransportError(KgroupError):
    """A network-level failure. Always safe to retry on another connection."""


class KafkaConnectionError(TransportError):
    """Connecting failed, or an established connection was lost."""


class RequestTimeoutError(TransportError):
    """No response arrived within the request timeout."""


class NoBrokersAvailableError(TransportError):
    """None of the bootstrap servers could be reached."""


class ClassicPayloadError(MalformedResponseError):
    """Embedded subscription or assignment bytes that do not decode (or cannot be encoded)."""


@dataclasses.dataclass(eq=False, repr=False)
class CorruptRecordError(MalformedResponseError):
    """Fetched record bytes that do not decode: a bad checksum, a truncated batch, an
    unknown or failing compression codec, lengths that do not add up.

    Raised by the share data path's decoder (:mod:`kgroup.dataplane.share.records`)
    instead of whatever the byte reader or the codec library raised, so that one
    partition's bad bytes are a typed error the fetch path can act on (the Java
    client rejects such a batch's acquired records) rather than a crash.

    Attributes:
        topic: the partition's topic name.
        partition: the partition index.
        offset: the base offset of the batch that failed (or, when the bytes are
            too short to hold one, the offset the batch was expected at; -1 when
            not even that is known).
        reason: what was wrong, for people.
    """

    topic: str
    partition: int
    offset: int
    reason: str

    def __post_init__(self) -> None:
        super().__init__(
            f"corrupt record batch in {self.topic}[{self.partition}] at offset "
            f"{self.offset}: {self.reason}"
        )


class MalformedResponseConnectionError(MalformedResponseError, KafkaConnectionError):
    """A response did not decode, so kgroup closed the connection it arrived on.

    What a request raises when its response is malformed: a
    :class:`MalformedResponseError` (what happened, naming the API, version and
    field) and a :class:`KafkaConnectionError` (what to do: the request may be
    retried on a new connection, as after any lost connection). The other
    requests in flight on that connection fail with :class:`KafkaConnectionError`.
    """


@dataclasses.dataclass(eq=False, repr=False)
class BrokerError(KgroupError):
    """The broker answered a request with a non-zero error code.

    Attributes:
        code: the numeric Kafka error code.
        name: its protocol name in upper case (``NOT_COORDINATOR``).
        retriable: whether Kafka documents the error as retriable.
        message: the broker's error message, if the response carried one.
    """

    code: int
    name: str
    retriable: bool
    message: str | None = None

    def __init_subclass__(cls, *, code: ErrorCode | None = None, **kwargs: Any) -> None:
        # ``code=``: the class is the one :func:`broker_error` builds for that
        # code, so the code-to-class table is declared where the classes are.
        super().__init_subclass__(**kwargs)
        if code is None:
            return
        if code in _CLASSES:
            raise TypeError(f"{code.name} already has {_CLASSES[code].__name__}")
        _CLASSES[code] = cls

    def __post_init__(self) -> None:
        text = f"{self.name} (error code {self.code})"
        if self.message:
            text += f": {self.message}"
        super().__init__(text)


_CLASSES: dict[int, type[BrokerError]] = {}
ERROR_CLASSES: Mapping[int, type[BrokerError]] = MappingProxyType(_CLASSES)
"""The specific exception class of each code that has one (the ``code=`` of its class)."""


class RetriableBrokerError(BrokerError):
    """A broker error that Kafka marks retriable: the same request may succeed later."""


class NotCoordinatorError(RetriableBrokerError, code=_C.NOT_COORDINATOR):
    """NOT_COORDINATOR: the broker is not the coordinator of the group; look it up again."""


class CoordinatorNotAvailableError(RetriableBrokerError, code=_C.COORDINATOR_NOT_AVAILABLE):
    """COORDINATOR_NOT_AVAILABLE: the coordinator is unavailable; look it up again."""


class CoordinatorLoadInProgressError(RetriableBrokerError, code=_C.COORDINATOR_LOAD_IN_PROGRESS):
    """COORDINATOR_LOAD_IN_PROGRESS: the coordinator is loading the group; retry later."""


class UnknownTopicOrPartitionError(RetriableBrokerError, code=_C.UNKNOWN_TOPIC_OR_PARTITION):
    """UNKNOWN_TOPIC_OR_PARTITION: the broker does not know the topic or partition."""


class UnknownTopicIdError(RetriableBrokerError, code=_C.UNKNOWN_TOPIC_ID):
    """UNKNOWN_TOPIC_ID: the broker does not know the topic id."""


class LeaderNotAvailableError(RetriableBrokerError, code=_C.LEADER_NOT_AVAILABLE):
    """LEADER_NOT_AVAILABLE: a leader election is in progress."""


class NotLeaderOrFollowerError(RetriableBrokerError, code=_C.NOT_LEADER_OR_FOLLOWER):
    """NOT_LEADER_OR_FOLLOWER: the broker does not lead (or replicate) the partition."""


class FencedLeaderEpochError(RetriableBrokerError, code=_C.FENCED_LEADER_EPOCH):
    """FENCED_LEADER_EPOCH: the request's leader epoch is older than the broker's."""


class UnknownLeaderEpochError(RetriableBrokerError, code=_C.UNKNOWN_LEADER_EPOCH):
    """UNKNOWN_LEADER_EPOCH: the request's leader epoch is newer than the broker's."""


class BrokerRequestTimedOutError(RetriableBrokerError, code=_C.REQUEST_TIMED_OUT):
    """REQUEST_TIMED_OUT (error 7): the broker's own timeout for the request expired.

    Not to be confused with :class:`RequestTimeoutError`, kgroup's own wait for a response."""


class UnstableOffsetCommitError(RetriableBrokerError, code=_C.UNSTABLE_OFFSET_COMMIT):
    """UNSTABLE_OFFSET_COMMIT: a transactional commit for the partition is pending."""


class UnknownMemberIdError(BrokerError, code=_C.UNKNOWN_MEMBER_ID):
    """UNKNOWN_MEMBER_ID: the group does not know this member id."""


class FencedMemberEpochError(BrokerError, code=_C.FENCED_MEMBER_EPOCH):
    """FENCED_MEMBER_EPOCH: the member epoch is fenced; rejoin with epoch 0."""


class StaleMemberEpochError(BrokerError, code=_C.STALE_MEMBER_EPOCH):
    """STALE_MEMBER_EPOCH: an offset request carried an outdated member epoch."""


class UnreleasedInstanceIdError(BrokerError, code=_C.UNRELEASED_INSTANCE_ID):
    """UNRELEASED_INSTANCE_ID: another member still holds the static instance id."""


class FencedInstanceIdError(BrokerError, code=_C.FENCED_INSTANCE_ID):
    """FENCED_INSTANCE_ID: another member with the same static instance id replaced this one."""


class GroupMaxSizeReachedError(BrokerError, code=_C.GROUP_MAX_SIZE_REACHED):
    """GROUP_MAX_SIZE_REACHED: the group is full."""


class UnsupportedAssignorError(BrokerError, code=_C.UNSUPPORTED_ASSIGNOR):
    """UNSUPPORTED_ASSIGNOR: the broker has no server-side assignor by that name."""


class InvalidRegularExpressionError(BrokerError, code=_C.INVALID_REGULAR_EXPRESSION):
    """INVALID_REGULAR_EXPRESSION: the subscribed regular expression is invalid."""


class GroupIdNotFoundError(BrokerError, code=_C.GROUP_ID_NOT_FOUND):
    """GROUP_ID_NOT_FOUND: the group does not exist."""


class UpgradeRefusedError(GroupIdNotFoundError):
    """The coordinator would not move a live classic group to the consumer protocol.

    GROUP_ID_NOT_FOUND answering a ``group.protocol=consumer`` member's first
    heartbeat for a group that is a non-empty classic group. Its message gives
    the broker's reason (the migration policy, a custom assignor's user data,
    a non-consumer protocol type, the group size) and what to do about it; see
    docs/migration.md. Fatal to this consumer; the classic group goes on as
    before. ``kgroup migrate check GROUP`` finds every such reason in advance.
    """


class RebalanceInProgressError(BrokerError, code=_C.REBALANCE_IN_PROGRESS):
    """REBALANCE_IN_PROGRESS: the classic group is rebalancing; rejoin."""


class IllegalGenerationError(BrokerError, code=_C.ILLEGAL_GENERATION):
    """ILLEGAL_GENERATION: the classic generation id is outdated."""


class MemberIdRequiredError(BrokerError, code=_C.MEMBER_ID_REQUIRED):
    """MEMBER_ID_REQUIRED: rejoin with the member id the broker handed out."""


class InconsistentGroupProtocolError(BrokerError, code=_C.INCONSISTENT_GROUP_PROTOCOL):
    """INCONSISTENT_GROUP_PROTOCOL: the member's protocols do not match the group's."""


class InvalidSessionTimeoutError(BrokerError, code=_C.INVALID_SESSION_TIMEOUT):
    """INVALID_SESSION_TIMEOUT: the session timeout is outside the broker's bounds."""


class InvalidGroupIdError(BrokerError, code=_C.INVALID_GROUP_ID):
    """INVALID_GROUP_ID: the group id is not valid."""


class NonEmptyGroupError(BrokerError, code=_C.NON_EMPTY_GROUP):
    """NON_EMPTY_GROUP: the operation needs an empty group."""


class CommitFailedError(KgroupError):
    """A commit was refused because the group moved on without this member.

    As Java's ``CommitFailedException``: a classic member's generation ended
    (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) or is ending (REBALANCE_IN_PROGRESS),
    or a consumer-protocol member is no longer in the group at its epoch
    (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: its session ran out, it was
    fenced), so the partitions may have moved to another member and the
    commit cannot be made for them. Not fatal: catch it, poll again (the member rejoins and
    the rebalance callbacks run) and carry on; records since the last
    successful commit may be delivered again. The broker's error is the
    ``__cause__``.
    """


class InvalidSubscriptionError(KgroupError, ValueError):
    """The subscription mixes a regex with names, has more than one regex or a regex
    RE2 refuses, or names an empty or non-string topic."""


class NothingToCommitError(KgroupError, RuntimeError):
    """``commit(offsets=...)`` could commit none of the partitions it was given.

    The consumer is neither subscribed nor assigned, or it owns none of the
    partitions (not assigned yet, or moved to another member). The message
    names which. Returning an empty result instead once let an application
    believe its progress was saved.
    """


class UnacknowledgedRecordsError(KgroupError, RuntimeError):
    """A share consumer in explicit acknowledgement mode was polled while records the
    previous poll handed out were still unacknowledged.

    The Java client's rule (``IllegalStateException: All records must be
    acknowledged in explicit acknowledgement mode.``): acknowledge each with
    accept, release or reject first. Nothing was fetched or handed out.
    """


class InvalidAcknowledgementError(KgroupError, ValueError):
    """An acknowledgement the share consumer cannot take: the record was not handed out
    by this consumer, was already acknowledged, or the consumer acknowledges implicitly."""


class ConsumerClosedError(KgroupError):
    """The consumer was closed; it cannot be used any more."""


class WakeupError(KgroupError):
    """``wakeup()`` interrupted a poll, consume or iteration (as Java's WakeupException).

    Raised once per ``wakeup()``: by the call it interrupted, or by the next
    one if none was waiting. The consumer stays usable.
    """


class MixedAssignmentError(KgroupError, RuntimeError):
    """``subscribe()`` (group membership) and ``assign()`` (manual assignment) were mixed."""


class AlreadyAssignedError(KgroupError, ValueError):
    """``incremental_assign()`` of a partition this consumer already assigned itself."""


class NotAssignedError(KgroupError, ValueError):
    """The partition is not assigned to this consumer."""


@dataclasses.dataclass(eq=False, repr=False)
class LogTruncationError(KgroupError):
    """Committed offsets point past the end of their leader epoch: the logs were truncated.

    KIP-320, with ``auto.offset.reset=error``: an unclean leader election cut
    the records some committed offsets counted, and the log goes on with other
    records from the divergence point. An application that chose ``error``
    asked to decide any start offset itself, so kgroup does not move these
    partitions (as the Java client's ``LogTruncationException``): they stay
    assigned without fetching, and every ``poll()`` / ``consume()`` raises this
    until the application ``seek()`` s each of them (or they leave the
    assignment). Seeking to :attr:`divergent_offsets` reads every record the
    log holds after the truncation; ``auto.offset.reset=earliest`` or
    ``latest`` makes kgroup resume there by itself (with a warning).

    Attributes:
        truncations: per partition, the committed offset and its epoch, and the
            divergence point (offset and epoch), in partition order.
    """

    truncations: tuple[Truncation, ...]

    def __post_init__(self) -> None:
        cuts = "; ".join(
            f"{t.partition} was committed at offset {t.committed} (leader epoch "
            f"{t.committed_epoch}), but the leader's log diverges from it at offset "
            f"{t.resume_at} (the end of leader epoch {t.resume_epoch})"
            for t in self.truncations
        )
        seeks = ", ".join(f"seek({t.partition}, {t.resume_at})" for t in self.truncations)
        super().__init__(
            f"log truncation detected (an unclean leader election) and auto.offset.reset="
            f"error, so these partitions were not started: {cuts}. Choose where each starts "
            f"with seek() (the divergence point reads every record the log holds now: "
            f"{seeks}), or set auto.offset.reset to earliest or latest to resume at the "
            "divergence point automatically"
        )

    @property
    def divergent_offsets(self) -> dict[TopicPartition, int]:
        """The divergence point of each partition: the first offset the committed one may
        not count (Java's ``LogTruncationException.divergentOffsets()``)."""
        return {t.partition: t.resume_at for t in self.truncations}

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        """The truncated partitions, waiting for a ``seek()``."""
        return frozenset(t.partition for t in self.truncations)


class SecurityError(KgroupError):
    """A secured connection could not be made, or the principal was refused.

    Fatal to a consumer: raised from ``poll``, never retried, because the same
    credentials, certificates and ACLs give the same answer on the next try.
    Messages name the broker and the reason and never contain a secret.
    """


@dataclasses.dataclass(eq=False, repr=False)
class TlsError(SecurityError):
    """The TLS handshake with a broker failed.

    Attributes:
        broker: ``host:port`` of the broker.
        reason: what went wrong, in words (unknown CA, hostname mismatch, expired ...).
    """

    broker: str
    reason: str

    def __post_init__(self) -> None:
        super().__init__(f"TLS handshake with {self.broker} failed: {self.reason}")


@dataclasses.dataclass(eq=False, repr=False)
class AuthenticationError(SecurityError):
    """SASL authentication with a broker failed (wrong credentials, refused token).

    Attributes:
        mechanism: the SASL mechanism (``SCRAM-SHA-512`` ...).
        broker: ``host:port`` of the broker.
        reason: the broker's or kgroup's explanation.
    """

    mechanism: str
    broker: str
    reason: str

    def __post_init__(self) -> None:
        super().__init__(
            f"SASL {self.mechanism} authentication with {self.broker} failed: {self.reason}"
        )


@dataclasses.dataclass(eq=False, repr=False)
class UnsupportedSaslMechanismError(SecurityError):
    """The broker's listener does not enable the configured SASL mechanism.

    Attributes:
        mechanism: the mechanism kgroup asked for.
        broker: ``host:port`` of the broker.
        enabled: the mechanisms the listener enables.
    """

    mechanism: str
    broker: str
    enabled: tuple[str, ...]

    def __post_init__(self) -> None:
        listed = ", ".join(self.enabled) if self.enabled else "none"
        super().__init__(
            f"{self.broker} does not enable SASL mechanism {self.mechanism}; it enables: {listed} "
            "(set sasl.mechanism to one of them)"
        )


@dataclasses.dataclass(eq=False, repr=False)
class SecurityProtocolMismatchError(SecurityError):
    """The broker's listener speaks another ``security.protocol`` than the client.

    For example a PLAINTEXT client on a TLS port, a TLS client on a plaintext
    port, or SASL on a listener without SASL. The message says which and what to set.

    Attributes:
        broker: ``host:port`` of the broker.
        configured: the client's ``security.protocol``.
        explanation: what the listener speaks instead and what to set.
    """

    broker: str
    configured: str
    explanation: str

    def __post_init__(self) -> None:
        super().__init__(
            f"{self.broker} does not speak security.protocol={self.configured}: {self.explanation}"
        )


class AuthorizationError(SecurityError):
    """An ACL denied the authenticated principal an operation on a resource.

    The broker's ``*_AUTHORIZATION_FAILED`` codes raise the classes below, which
    are both :class:`BrokerError` and :class:`AuthorizationError`; where kgroup
    knows the resource and the operation, the message names them.
    """


class GroupAuthorizationFailedError(
    BrokerError, AuthorizationError, code=_C.GROUP_AUTHORIZATION_FAILED
):
    """GROUP_AUTHORIZATION_FAILED: the principal may not use the group."""


class TopicAuthorizationFailedError(
    BrokerError, AuthorizationError, code=_C.TOPIC_AUTHORIZATION_FAILED
):
    """TOPIC_AUTHORIZATION_FAILED: the principal may not use a topic."""


class ClusterAuthorizationFailedError(
    BrokerError, AuthorizationError, code=_C.CLUSTER_AUTHORIZATION_FAILED
):
    """CLUSTER_AUTHORIZATION_FAILED: the principal may not perform a cluster action."""


class TransactionalIdAuthorizationFailedError(
    BrokerError, AuthorizationError, code=_C.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
):
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the principal may not use the transactional id."""


class InvalidRequestError(BrokerError, code=_C.INVALID_REQUEST):
    """INVALID_REQUEST: the broker rejected the request as malformed or inconsistent."""


class OffsetOutOfRangeError(BrokerError, code=_C.OFFSET_OUT_OF_RANGE):
    """OFFSET_OUT_OF_RANGE: the offset is outside the partition's log."""


class OffsetMetadataTooLargeError(BrokerError, code=_C.OFFSET_METADATA_TOO_LARGE):
    """OFFSET_METADATA_TOO_LARGE: the committed metadata string is too long."""


class TopicAlreadyExistsError(BrokerError, code=_C.TOPIC_ALREADY_EXISTS):
    """TOPIC_ALREADY_EXISTS: a topic by that name exists already."""


class UnknownServerError(BrokerError, code=_C.UNKNOWN_SERVER_ERROR):
    """UNKNOWN_SERVER_ERROR: the broker failed unexpectedly."""


class BrokerUnsupportedVersionError(
    BrokerError, UnsupportedVersionError, code=_C.UNSUPPORTED_VERSION
):
    """UNSUPPORTED_VERSION (error 35): the broker does not support the request's version.

    Also an :class:`UnsupportedVersionError`, so one ``except`` clause catches both
    kgroup's own negotiation failing and the broker refusing a version.
    """


class AssignorError(KgroupError):
    """An assignor could not compute an assignment (for example, a subscribed topic is unknown).

    Attributes:
        assignor: the name of the assignor.
    """

    def __init__(self, assignor: str, message: str) -> None:
        self.assignor = assignor
        super().__init__(f"assignor {assignor!r}: {message}")
        self.detail = message

    _pickled_fields: ClassVar[tuple[str, ...]] = ("assignor", "detail")


class AssignmentViolation(enum.Enum):
    """The kinds of rule an assignment can break (see :class:`InvalidAssignmentError`)."""

    MISSING_PARTITION = "missing_partition"
    """A partition of a subscribed topic is assigned to nobody."""
    DUPLICATE_PARTITION = "duplicate_partition"
    """A partition is assigned more than once."""
    UNKNOWN_MEMBER = "unknown_member"
    """The assignment names a member that is not in the group."""
    UNSUBSCRIBED_TOPIC = "unsubscribed_topic"
    """A member gets a partition of a topic it did not subscribe to."""
    UNKNOWN_PARTITION = "unknown_partition"
    """A partition that the cluster metadata does not know."""
    DIRECT_TRANSFER = "direct_transfer"
    """Cooperative: a partition owned by one member is handed to another in the same round."""


class InvalidAssignmentError(AssignorError):
    """An assignor's output breaks a rule; the leader must not send it in SyncGroup.

    Attributes:
        assignor: the name of the assignor that produced the assignment.
        violation: which rule is broken.
        detail: the specifics (member ids, partitions) in words.
    """

    def __init__(self, assignor: str, violation: AssignmentViolation, detail: str) -> None:
        self.violation = violation
        super().__init__(assignor, f"invalid assignment ({violation.name}): {detail}")
        self.detail = detail

    _pickled_fields: ClassVar[tuple[str, ...]] = ("assignor", "violation", "detail")


class DataPlaneError(KgroupError):
    """librdkafka reported an error: one that stops consumption of a partition, or
    a lookup (watermarks, ``offsets_for_times``, ``list_topics``) that failed or
    timed out.

    Attributes:
        code: librdkafka's error code (``confluent_kafka.KafkaError``'s, for
            example ``_TIMED_OUT``), or None when kgroup refused on its own
            (``auto.offset.reset=error`` with no committed offset, say).
    """

    _pickled_fields = ("message", "code")

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclasses.dataclass(eq=False, repr=False)
class GroupConfigRefusedError(KgroupError):
    """The broker refused to set a group's config key (IncrementalAlterConfigs).

    Attributes:
        group_id: the group.
        key: the config key.
        value: the value asked for (None: a deletion).
        error: the broker's error, with its reason as its message
            (INVALID_CONFIG for an unknown key or a value out of the broker's bounds).
    """

    group_id: str
    key: str
    value: str | None
    error: BrokerError

    def __post_init__(self) -> None:
        super().__init__(
            f"group {self.group_id!r}: the broker refused {self.key}={self.value!r}: {self.error}"
        )


@dataclasses.dataclass(eq=False, repr=False)
class DeserializationError(KgroupError):
    """``key.deserializer`` or ``value.deserializer`` raised on a record.

    As the Java client's ``RecordDeserializationException``, no record is lost:
    the records before this one were returned by earlier polls, and the
    consumer's position stays at this record, so no commit (auto-commit, the
    one before a revocation, the one on close, ``commit()``) passes it. Every
    poll that reaches it raises this again until the application skips it with
    ``seek(error.topic_partition, error.offset + 1)`` (after dead-lettering
    :attr:`record`, say). The deserializer's exception is ``__cause__``.

    Attributes:
        topic_partition: the record's partition.
        offset: the record's offset.
        record: the record as fetched (a ``confluent_kafka.Message``, key and
            value still bytes).
        cause: the deserializer's exception (also ``__cause__``).
    """

    field: ClassVar[str] = "key or value"
    """Which deserializer raised: ``"key"`` or ``"value"``."""

    topic_partition: TopicPartition
    offset: int
    record: Any
    cause: BaseException

    def __post_init__(self) -> None:
        tp = self.topic_partition
        super().__init__(
            f"the {self.field} deserializer failed on {tp.topic}-{tp.partition} at offset "
            f"{self.offset}: {self.cause!r}; the consumer stays at this record: "
            f"seek({tp!r}, {self.offset + 1}) skips it"
        )


@dataclasses.dataclass(eq=False, repr=False)
class KeyDeserializationError(DeserializationError):
    """``key.deserializer`` raised on a record (see :class:`DeserializationError`)."""

    field: ClassVar[str] = "key"


@dataclasses.dataclass(eq=False, repr=False)
class ValueDeserializationError(DeserializationError):
    """``value.deserializer`` raised on a record (see :class:`DeserializationError`)."""

    field: ClassVar[str] = "value"


class TelemetryError(KgroupError):
    """Something about telemetry went wrong (never raised into the consumer's hot path).

    Bad telemetry configuration raises :class:`ConfigError`, like any other bad
    configuration.
    """


class TelemetryDecodeError(TelemetryError, ValueError):
    """A line or object is not a telemetry event this kgroup can read; the message says why."""


class ReportError(KgroupError):
    """``kgroup report`` could not produce the report; the message says why and what to do."""


class SparkMissingError(ReportError):
    """pyspark (or matplotlib) is not installed: install the ``report`` extra."""


class ReportInputError(ReportError):
    """The input is unusable: no files, no events, an unreadable topic."""


class ConnectorJarError(ReportError):
    """Spark's Kafka connector jars could not be resolved for the installed pyspark."""


class ProduceFailedError(KgroupError):
    """Some records of ``kgroup topics produce`` were not acknowledged by the broker."""


class DemoFailedError(KgroupError):
    """The demo's group did not reach the state it waits for in time."""


class HarnessError(KgroupError):
    """The test harness could not provide a broker."""


class JavaNotFoundError(HarnessError):
    """No Java runtime was found; the message says what to install."""


class JarResolutionError(HarnessError):
    """Maven could not resolve the Kafka jars; the message carries Maven's output."""


class BrokerStartError(HarnessError):
    """A broker process exited or did not become ready; the message has its log tail."""


def broker_error(code: int, message: str | None = None) -> BrokerError:
    """The exception for a broker's error ``code``, with the broker's ``message``.

    Returns the specific class from :data:`ERROR_CLASSES` if there is one, else
    :class:`RetriableBrokerError` or :class:`BrokerError` by Kafka's retriable
    flag. A code Kafka does not define (a newer broker) gets the generic,
    non-retriable class.

    Raises:
        ValueError: ``code`` is 0, which is not an error.
    """
    if code == ErrorCode.NONE:
        raise ValueError("error code 0 (NONE) is not an error")
    try:
        known = ErrorCode(code)
    except ValueError:
        return _foreign_error(code, message)
    retriable = Trait.RETRIABLE in known.traits
    cls = _CLASSES.get(known) or (RetriableBrokerError if retriable else BrokerError)
    return cls(int(known), known.name, retriable, message)


def _foreign_error(code: int, message: str | None) -> BrokerError:
    """A code kgroup does not tell apart: named and flagged from Kafka's complete list."""
    # Imported here: importing kgroup must not load the wire library (kio brings
    # its runtime along), and a code kgroup does not know arrived in a response
    # kio decoded, so kio is loaded by the time one needs a name.
    from kio.schema.errors import ErrorCode as KafkaErrorCode  # noqa: PLC0415

    try:
        kafka = KafkaErrorCode(code)
    except ValueError:
        return BrokerError(code, f"UNKNOWN_ERROR_CODE_{code}", False, message)
    cls = RetriableBrokerError if kafka.retriable else BrokerError
    return cls(code, kafka.name.upper(), kafka.retriable, message)


def raise_for_error(code: int, message: str | None = None) -> None:
    """Raise :func:`broker_error` of ``code`` unless it is 0 (NONE)."""
    if code != ErrorCode.NONE:
        raise broker_error(code, message)
