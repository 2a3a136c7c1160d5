"""What both members' reaction tables share, derived from the codes' traits.

The codes themselves, and what kgroup knows of each, are
:class:`kgroup.error_codes.ErrorCode` (a leaf module of the standard library
only, so membership may import it). Each protocol keeps its one table of
reactions (:mod:`kgroup.membership.consumer.reactions`,
:mod:`kgroup.membership.classic.reactions`), one row per code it reacts to in
its own way; the rows every group API's table shares come from here, so a code
is classified once, in its :class:`~kgroup.error_codes.Trait` flags.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

from kgroup.error_codes import ErrorCode, Trait, codes_with

__all__ = ["reaction_in", "shared_reactions"]

_R = TypeVar("_R", bound=enum.Enum)


def shared_reactions(*, rediscover: _R, retry: _R, fatal: _R) -> dict[int, _R]:
    """The rows every group API's table shares, from the codes' traits.

    Both protocols look the coordinator up again when it moved or is away
    (:attr:`~Trait.COORDINATOR_MOVED`), retry with backoff while it loads its
    state or when a transport-flavoured code arrives inside a response
    (:attr:`~Trait.TRANSIENT`: it means the same as a timeout), and stop on a
    :attr:`~Trait.FATAL` code. Each table adds its protocol's own rows, which
    take precedence.
    """
    rows: dict[int, _R] = dict.fromkeys(codes_with(Trait.FATAL), fatal)
    rows.update(dict.fromkeys(codes_with(Trait.COORDINATOR_MOVED), rediscover))
    rows.update(dict.fromkeys(codes_with(Trait.TRANSIENT), retry))
    return rows


def reaction_in(table: Mapping[int, _R], code: int, unknown: _R) -> _R:
    """A protocol's reaction to the non-zero ``code``: its entry in ``table``, else ``unknown``."""
    if code == ErrorCode.NONE:
        raise ValueError("error code 0 (NONE) is a success, not an error")
    return table.get(code, unknown)
