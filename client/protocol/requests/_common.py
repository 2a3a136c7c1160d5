"""Pieces the request modules share: topic grouping, topic naming, response checks."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, cast

from kio.static.protocol import RequestPayload, ResponsePayload

from kgroup.errors import KafkaProtocolError
from kgroup.protocol.apis import SUPPORTED_VERSIONS, ApiKey, response_class
from kgroup.types import TopicPartition

if TYPE_CHECKING:
    # Only for annotations: negotiation imports api_versions, which imports this module.
    from kgroup.protocol.negotiation import NegotiatedVersions
__all__ = [
    "CodeAnswered",
    "Narrow",
    "by_topic",
    "partitions_by_id",
    "partitions_by_name",
    "topic_name",
    "unexpected",
]

_R = TypeVar("_R")
_A_contra = TypeVar("_A_contra", contravariant=True)


def by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partitions grouped by topic, topics and partitions sorted (the order Java sends)."""
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


class _ById(Protocol):
    """A response's topic entry naming its topic by id (the group heartbeats' assignments)."""

    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> tuple[int, ...]: ...


class _ByName(Protocol):
    """A response's topic entry naming its topic (the group describes' assignments)."""

    @property
    def topic_name(self) -> str: ...
    @property
    def partitions(self) -> tuple[int, ...]: ...


def partitions_by_id(entries: Iterable[_ById]) -> dict[uuid.UUID, tuple[int, ...]]:
    """An assignment as the members take it: topic id -> partitions (no id: skipped)."""
    return {
        e.topic_id: tuple(int(p) for p in e.partitions) for e in entries if e.topic_id is not None
    }


def partitions_by_name(entries: Iterable[_ByName]) -> frozenset[TopicPartition]:
    """An assignment as the group tools show it: the named partitions."""
    return frozenset(
        TopicPartition(str(e.topic_name), int(p)) for e in entries for p in e.partitions
    )


def topic_name(topic: object, names: Mapping[uuid.UUID, str]) -> str | None:
    """The name of a response's topic entry: its own ``name`` (before topic ids), or
    the name of its ``topic_id`` in ``names``; None when neither is known."""
    name: str | None = getattr(topic, "name", None)
    if name:
        return name
    topic_id: uuid.UUID | None = getattr(topic, "topic_id", None)
    return None if topic_id is None else names.get(topic_id)


def unexpected(payload: ResponsePayload, api: ApiKey) -> KafkaProtocolError:
    """The error for a response that is not one of ``api``'s negotiable versions."""
    return KafkaProtocolError(
        f"expected a {api.api_name} response, got {type(payload).__name__} "
        f"v{payload.__version__} of API key {payload.__api_key__}"
    )


class Narrow(Generic[_R]):
    """Checks that a response the transport returned is one of an API's response classes.

    The transport types every response as kio's ``ResponsePayload``; each request
    module has ``narrow: Narrow[Response] = Narrow(API)``, where ``Response`` is
    the union of the response classes of the versions kgroup negotiates, so that
    ``parse(narrow(payload))`` reads typed fields. ``Response`` exists for the
    type checker only: importing every version's classes cost a consumer about
    2 MiB of kio modules it never used (one version per API is negotiated), so
    the check looks up the class of the response's own version instead.
    """

    def __init__(self, api: ApiKey) -> None:
        self._api = api
        self._versions = SUPPORTED_VERSIONS[api]

    @property
    def classes(self) -> tuple[type[ResponsePayload], ...]:
        """The response classes of every version kgroup negotiates (imports them all)."""
        return tuple(
            response_class(self._api, v) for v in range(self._versions.min, self._versions.max + 1)
        )

    def __call__(self, payload: ResponsePayload) -> _R:
        """``payload`` as one of the API's responses.

        Raises:
            KafkaProtocolError: it is another API's response, or a version kgroup
                does not negotiate.
        """
        version = payload.__version__
        if (
            int(payload.__api_key__) == self._api
            and self._versions.min <= version <= self._versions.max
            and isinstance(payload, response_class(self._api, version))
        ):
            return cast(_R, payload)
        raise unexpected(payload, self._api)


class CodeAnswered(Protocol[_A_contra, _R]):
    """A request module built from a member's action and answered with an error code.

    :mod:`~kgroup.protocol.requests.heartbeat` and
    :mod:`~kgroup.protocol.requests.leave_group` are two: a session sends either
    the same way (``build``, ``narrow``, ``parse``) and hands the member the code.
    """

    def build(self, versions: NegotiatedVersions, action: _A_contra, /) -> RequestPayload:
        """The request ``action`` asks for, at the negotiated version."""
        ...

    @property
    def narrow(self) -> Narrow[_R]:
        """``payload`` as a response of this API."""
        ...

    def parse(self, response: _R, /) -> int:
        """The response's error code (0: done)."""
        ...
