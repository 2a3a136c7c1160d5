"""Java semantics the Java assignors depend on: hash codes, HashMap order, Uuid order.

Public so that an assignor written in Python can match a Java one where the
outcome hangs on iteration order (kgroup's ``sticky`` and the consumer-protocol
assignors use it for that).

The broker's assignors iterate ``HashMap``s and ``HashSet``s, so which member gets
an extra partition depends on Java's iteration order. To reproduce the broker's
decisions we order things the way a ``java.util.HashMap`` iterates them: by
bucket (the spread hash code masked by the table size), then by insertion order
within a bucket.
"""

from __future__ import annotations

import sys
import uuid
from array import array
from collections.abc import Callable, Sequence
from operator import mul
from typing import TypeVar

__all__ = [
    "grown_capacity",
    "hash_order",
    "java_string_hash",
    "java_uuid_hash",
    "presized_capacity",
    "uuid_order_key",
]

K = TypeVar("K")

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


# String.hashCode() is sum(unit[i] * 31 ** (n - 1 - i)) mod 2**32 over the UTF-16
# code units. Evaluated as a dot product with precomputed powers (in C, through
# map and sum) rather than one Python-level step per character: the sticky
# assignor hashes every member id of the group on every rebalance.
_CHUNK = 64
_POWERS = [pow(31, k, 1 << 32) for k in range(_CHUNK + 1)]  # 31**k mod 2**32
_DESCENDING = _POWERS[_CHUNK - 1 :: -1]  # 31**(CHUNK-1) ... 31**0
# _WEIGHTS[n]: the weights of an n-unit string, 31**(n-1) ... 31**0 (n <= CHUNK)
_WEIGHTS = [tuple(_DESCENDING[_CHUNK - n :]) for n in range(_CHUNK + 1)]
_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


# Hash codes already computed: member ids and topic names recur rebalance after
# rebalance, and a leader of a large group hashes every member id each time.
# Bounded: past _HASHES_KEPT strings the cache starts over.
_HASHES_KEPT = 16_384
_hashes: dict[str, int] = {}


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` as an unsigned 32-bit value (over UTF-16 code units)."""
    h = _hashes.get(s)
    if h is None:
        h = _string_hash(s)
        if len(_hashes) >= _HASHES_KEPT:
            _hashes.clear()
        _hashes[s] = h
    return h


def _forget_hashes() -> None:
    """Drop the remembered hash codes (see :mod:`kgroup.assignors._caches`)."""
    _hashes.clear()


def _string_hash(s: str) -> int:
    if len(s) <= _CHUNK and s.isascii():
        # the common case, member ids and topic names: one unit per byte
        return int(sum(map(mul, s.encode("ascii"), _WEIGHTS[len(s)]))) & _MASK32
    units: Sequence[int] = s.encode("ascii") if s.isascii() else array("H", s.encode(_UTF16_NATIVE))
    h = 0
    for start in range(0, len(units), _CHUNK):
        chunk = units[start : start + _CHUNK]
        k = len(chunk)
        h = (h * _POWERS[k] + sum(map(mul, chunk, _DESCENDING[-k:]))) & _MASK32
    return h


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def java_uuid_hash(u: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode()`` as an unsigned 32-bit value."""
    msb, lsb = u.int >> 64, u.int & _MASK64
    x = msb ^ lsb
    return ((x >> 32) ^ x) & _MASK32


def uuid_order_key(u: uuid.UUID) -> tuple[int, int]:
    """A sort key matching Kafka's ``Uuid.compareTo`` (signed 64-bit halves)."""
    return (_signed64(u.int >> 64), _signed64(u.int & _MASK64))


def grown_capacity(size: int) -> int:
    """Table size of a default ``new HashMap<>()`` after ``size`` insertions."""
    capacity = 16
    while size > int(capacity * 0.75):
        capacity *= 2
    return capacity


def presized_capacity(size: int) -> int:
    """Table size of ``new HashSet<>(collection)`` for a collection of ``size`` elements."""
    wanted = max(int(size / 0.75) + 1, 16)
    capacity = 1
    while capacity < wanted:
        capacity *= 2
    return capacity


def hash_order(keys: Sequence[K], hash_code: Callable[[K], int], capacity: int) -> list[K]:
    """``keys`` in the iteration order of a Java HashMap of that capacity.

    Keys in the same bucket keep their order in ``keys`` (Java keeps insertion
    order within a bucket, barring buckets of eight or more, which become trees).
    """
    n = len(keys)
    mask = capacity - 1
    # One int per key, bucket * n + position: sorting them orders by bucket,
    # then by position (cheaper than sorting (bucket, position) tuples).
    order = sorted(((h ^ (h >> 16)) & mask) * n + i for i, h in enumerate(map(hash_code, keys)))
    return [keys[k % n] for k in order]
