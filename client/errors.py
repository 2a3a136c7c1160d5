"""The one exception hierarchy of kgroup.

Every exception kgroup raises on purpose derives from :class:`KgroupError`, so
``except kgroup.KgroupError`` catches them all. The tree::

    KgroupError
    ├── ConfigError                  bad or contradictory configuration (also a ValueError)
    ├── KafkaProtocolError           the wire: something the client and broker cannot agree on
    │   ├── MalformedResponseError   bytes that do not decode as the expected response
    │   └── UnsupportedVersionError  no API version both sides support
    ├── TransportError               the network
    │   ├── KafkaConnectionError     connect failed, connection lost
    │   ├── RequestTimeoutError      no response within the request timeout
    │   └── NoBrokersAvailableError  every bootstrap server failed
    ├── BrokerError                  the broker answered with an error code
    │   └── (one subclass per error code the SDK reacts to; see kgroup.protocol.errors)
    └── HarnessError                 kgroup.testing could not start or drive a broker
        ├── JavaNotFoundError
        ├── JarResolutionError
        └── BrokerStartError

:class:`BrokerError` keeps the broker's error ``code``, its protocol ``name``,
whether Kafka marks it ``retriable``, and the broker's ``message`` if it sent one.
"""

from __future__ import annotations

__all__ = [
    "BrokerError",
    "BrokerStartError",
    "ConfigError",
    "HarnessError",
    "JarResolutionError",
    "JavaNotFoundError",
    "KafkaConnectionError",
    "KafkaProtocolError",
    "KgroupError",
    "MalformedResponseError",
    "NoBrokersAvailableError",
    "RequestTimeoutError",
    "TransportError",
    "UnsupportedVersionError",
]


class KgroupError(Exception):
    """Root of every exception kgroup raises on purpose."""


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


class BrokerError(KgroupError):
    """The broker answered a request with a non-zero error code.

    Attributes:
        code: the numeric Kafka error code.
        name: its protocol name in upper case (``NOT_COORDINATOR``).
        retriable: whether Kafka documents the error as retriable.
        message: the broker's error message, if the response carried one.
    """

    def __init__(self, code: int, name: str, retriable: bool, message: str | None = None) -> None:
        self.code = code
        self.name = name
        self.retriable = retriable
        self.message = message
        text = f"{name} (error code {code})"
        if message:
            text += f": {message}"
        super().__init__(text)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.code, self.name, self.retriable, self.message))


class HarnessError(KgroupError):
    """The test harness could not provide a broker."""


class JavaNotFoundError(HarnessError):
    """No Java runtime was found; the message says what to install."""


class JarResolutionError(HarnessError):
    """Maven could not resolve the Kafka jars; the message carries Maven's output."""


class BrokerStartError(HarnessError):
    """A broker process exited or did not become ready; the message has its log tail."""
