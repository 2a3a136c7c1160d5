"""The rebalance listener: what the application is told when its partitions change."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from kgroup.types import CallbackKind, TopicPartition

__all__ = ["LISTENER_METHODS", "RebalanceListener", "check_listener", "listener_method"]


@runtime_checkable
class RebalanceListener(Protocol):
    """Told about changes of the consumer's assignment, always as deltas.

    Each method may be a plain function or a coroutine function (awaited by
    :class:`~kgroup.AsyncConsumer`, run on the consumer's event loop thread by
    :class:`~kgroup.Consumer` while the calling thread waits). Methods run
    inside ``poll()`` / ``consume()`` / iteration / ``close()`` of the
    application, never concurrently with the application's record processing,
    and never hold up heartbeats (those run in the background).

    - ``on_partitions_revoked(partitions)``: the partitions are taken away in a
      rebalance. They stopped fetching before the call; with auto-commit their
      consumed offsets were committed before the call. Commit your own
      processed offsets here (``consumer.commit(offsets)``): the partitions are
      still owned, so the commit is accepted.
    - ``on_partitions_assigned(partitions)``: newly added partitions; on the
      first assignment after joining even when empty. They start fetching (at
      the committed offset, or where ``auto.offset.reset`` says) after it
      returns, so a ``seek`` here decides where they start.
    - ``on_partitions_lost(partitions)``: the partitions were lost without a
      clean hand-over (fenced, poll timeout, fatal error); another member may
      own them already and commits for them are refused. Without this method
      ``on_partitions_revoked`` is called instead.

    Any method may be left out: missing ones do nothing (lost falls back to
    revoked); an object with none of them is a ``TypeError`` at ``subscribe()``.
    An exception raised by a method surfaces from the ``poll()`` that
    ran it; the rebalance step is retried on the next poll.
    """

    def on_partitions_revoked(
        self, partitions: frozenset[TopicPartition]
    ) -> Awaitable[None] | None: ...

    def on_partitions_assigned(
        self, partitions: frozenset[TopicPartition]
    ) -> Awaitable[None] | None: ...

    def on_partitions_lost(
        self, partitions: frozenset[TopicPartition]
    ) -> Awaitable[None] | None: ...


ListenerMethod = Callable[[frozenset[TopicPartition]], "Awaitable[None] | None"]


LISTENER_METHODS = tuple(kind.value for kind in CallbackKind)
"""The names a listener object is looked up by."""


def check_listener(listener: object | None) -> None:
    """Refuse a listener that has none of the listener methods.

    Such an object (a plain function, a confluent-kafka style callback) would
    never be called: the application would silently miss every rebalance.

    Raises:
        TypeError: naming the expected methods.
    """
    if listener is None:
        return
    if any(callable(getattr(listener, name, None)) for name in LISTENER_METHODS):
        return
    raise TypeError(
        f"listener {listener!r} has none of the listener methods "
        f"({', '.join(LISTENER_METHODS)}); pass an object with at least one of them"
    )


def listener_method(listener: object | None, kind: CallbackKind) -> ListenerMethod | None:
    """The listener's method for ``kind`` (lost falls back to revoked), or None."""
    if listener is None:
        return None
    method = getattr(listener, kind.value, None)
    if method is None and kind is CallbackKind.LOST:
        method = getattr(listener, CallbackKind.REVOKED.value, None)
    return method if callable(method) else None
