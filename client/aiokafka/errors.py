"""aiokafka's error classes, as :mod:`kgroup.aiokafka` raises them.

Named and shaped as ``aiokafka.errors``'s. When aiokafka is installed each
class here also derives from aiokafka's class of the same name, so an
application's ``except aiokafka.errors.CommitFailedError`` catches what the
facade raises; without aiokafka they stand alone with aiokafka's bases.

They are aiokafka's hierarchy, not :class:`kgroup.errors.KgroupError`'s: an
aiokafka application catches aiokafka's root (``KafkaError``), and kgroup's own
exceptions all live in :mod:`kgroup.errors`. The kgroup error a facade error
stands for is its ``__cause__``.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

__all__ = [
    "CommitFailedError",
    "ConsumerStoppedError",
    "IllegalOperation",
    "IllegalStateError",
    "KafkaConfigurationError",
    "KafkaError",
    "KafkaTimeoutError",
    "UnsupportedByKgroupError",
    "broker_error_class",
]


PEER_ERROR_NAMES = (
    "KafkaError",
    "IllegalStateError",
    "CommitFailedError",
    "KafkaTimeoutError",
    "KafkaConfigurationError",
    "ConsumerStoppedError",
    "IllegalOperation",
)
"""aiokafka's error classes the facade raises under the same names."""

# aiokafka's own bases: these two are not KafkaErrors there.
_NOT_KAFKA_ERRORS = frozenset({"ConsumerStoppedError", "IllegalOperation"})


def _peer_classes() -> dict[str, type[BaseException]]:
    """aiokafka's classes by name, or stand-ins with aiokafka's bases when it is absent."""
    try:
        peer: Any = importlib.import_module("aiokafka.errors")
    except ImportError:
        base = type("KafkaError", (RuntimeError,), {})
        classes: dict[str, type[BaseException]] = {"KafkaError": base}
        for name in PEER_ERROR_NAMES[1:]:
            parent = Exception if name in _NOT_KAFKA_ERRORS else base
            classes[name] = type(name, (parent,), {})
        return classes
    return {name: getattr(peer, name) for name in PEER_ERROR_NAMES}


_PEER: Any = _peer_classes()
# Bases are looked up at run time (aiokafka is optional): typed Any for mypy.
_KafkaError: Any = _PEER["KafkaError"]
_IllegalStateError: Any = _PEER["IllegalStateError"]
_CommitFailedError: Any = _PEER["CommitFailedError"]
_KafkaTimeoutError: Any = _PEER["KafkaTimeoutError"]
_KafkaConfigurationError: Any = _PEER["KafkaConfigurationError"]
_ConsumerStoppedError: Any = _PEER["ConsumerStoppedError"]
_IllegalOperation: Any = _PEER["IllegalOperation"]


class KafkaError(_KafkaError):  # type: ignore[misc]
    """aiokafka's root error class."""


class IllegalStateError(_IllegalStateError, KafkaError):  # type: ignore[misc]
    """A call the consumer's state does not allow (e.g. a partition that is not assigned)."""


class CommitFailedError(_CommitFailedError, KafkaError):  # type: ignore[misc]
    """The commit was refused: the group rebalanced without this member."""


class KafkaTimeoutError(_KafkaTimeoutError, KafkaError):  # type: ignore[misc]
    """A request or lookup did not finish in time (a commit, committed offsets, offsets)."""


class KafkaConfigurationError(_KafkaConfigurationError, KafkaError):  # type: ignore[misc]
    """An invalid constructor keyword or value."""


class UnsupportedByKgroupError(KafkaConfigurationError):
    """An aiokafka keyword kgroup cannot honour; the message names it and what to do instead."""


class ConsumerStoppedError(_ConsumerStoppedError):  # type: ignore[misc]
    """The consumer was stopped (before `start()` calls raise IllegalStateError)."""


class IllegalOperation(_IllegalOperation):  # type: ignore[misc]
    """An operation the consumer's mode does not allow."""


@functools.cache
def broker_error_class(code: int) -> type[KafkaError]:
    """The class aiokafka raises for broker error ``code``, under the facade's root.

    With aiokafka installed: a subclass of aiokafka's class for the code
    (``aiokafka.errors.for_code``, e.g. ``GroupAuthorizationFailedError``) and of
    :class:`KafkaError`, so both ``except aiokafka.errors.GroupAuthorizationFailedError``
    and ``except kgroup.aiokafka.errors.KafkaError`` catch it. Without aiokafka:
    :class:`KafkaError`.
    """
    try:
        peer: Any = importlib.import_module("aiokafka.errors")
    except ImportError:
        return KafkaError
    named: type[BaseException] = peer.for_code(code)
    made: type[KafkaError] = type(named.__name__, (named, KafkaError), {})
    return made
