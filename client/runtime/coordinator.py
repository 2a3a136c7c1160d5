"""One call to the group coordinator, with transport failures mapped once.

Every group request the sessions send (ConsumerGroupHeartbeat, JoinGroup,
SyncGroup, Heartbeat, LeaveGroup) goes through :func:`coordinator_call`. Its
outcome is one of:

- :class:`Answered`: the coordinator's response, checked to be one of the
  API's response classes (``narrow`` of its :mod:`kgroup.protocol.requests`
  module; any other answer counts as a broken connection);
- :class:`LookupRefused`: FindCoordinator itself failed with a broker error
  (authorization ...): the members react to it as to the same code in the
  group response;
- :class:`CallFailed`: no answer, with the members' :class:`FailureKind`
  (timeout, disconnected, unsupported version).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup.errors import (
    BrokerError,
    KafkaConnectionError,
    KafkaProtocolError,
    RequestTimeoutError,
    TransportError,
    UnsupportedVersionError,
)
from kgroup.membership import FailureKind
from kgroup.protocol import NegotiatedVersions
from kgroup.runtime.interfaces import TransportInterface

__all__ = ["Answered", "CallFailed", "LookupRefused", "coordinator_call"]


R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Answered(Generic[R]):
    """The coordinator answered (its own error codes are in the response)."""

    response: R = field(compare=False)


@dataclass(frozen=True, slots=True)
class LookupRefused:
    """FindCoordinator failed with a broker error: its ``code`` is the member's answer."""

    code: int
    message: str | None


@dataclass(frozen=True, slots=True)
class CallFailed:
    """No answer: what went wrong, as the members classify it."""

    kind: FailureKind
    detail: str


async def coordinator_call(
    client: TransportInterface,
    group_id: str,
    build: Callable[[NegotiatedVersions], RequestPayload],
    narrow: Callable[[ResponsePayload], R],
    *,
    timeout: float,
    follow_moves: bool,
) -> Answered[R] | LookupRefused | CallFailed:
    """Send the request ``build`` makes to the coordinator of ``group_id``.

    ``follow_moves``: a response saying the coordinator moved is resent to
    the new coordinator within ``timeout`` (the consumer protocol's
    heartbeat). Without it that response reaches the member, whose reaction
    table rediscovers the coordinator before its next request (the classic
    requests).
    """
    try:
        if follow_moves:
            payload = await client.coordinator_request(group_id, build, timeout=timeout)
        else:
            address = await client.coordinator(group_id)
            conn = await client.connection(address.node_id)
            payload = await conn.request(build(conn.versions), timeout=timeout)
        response = narrow(payload)
    except BrokerError as exc:
        return LookupRefused(exc.code, exc.message)
    except UnsupportedVersionError as exc:
        return CallFailed(FailureKind.UNSUPPORTED_VERSION, str(exc))
    except RequestTimeoutError as exc:
        return CallFailed(FailureKind.TIMEOUT, str(exc))
    except KafkaConnectionError as exc:
        if not follow_moves:
            # coordinator_request already forgets a coordinator it cannot reach.
            client.mark_coordinator_stale(group_id)
        return CallFailed(FailureKind.DISCONNECTED, str(exc))
    except (TransportError, KafkaProtocolError) as exc:
        return CallFailed(FailureKind.DISCONNECTED, str(exc))
    return Answered(response)
