"""The garbage collector's young pass, run before a take instead of in the middle of it.

CPython's collector passes over its young generations every few hundred new
objects, and every object alive at a pass over the middle generation moves to
the oldest one. A take of many small records creates one tracked
``confluent_kafka.Message`` per record, so the pass that falls inside a take
finds hundreds of the batch's records alive and moves them all to the oldest
generation. Those moves are what schedule the full passes (CPython runs one
once the oldest generation has grown by a quarter), and a full pass walks the
whole process: in a process the size of one with kgroup in it, the full passes
took 10-15% of a consume loop's time at 100-byte records.

Run the middle pass just before the take when one is due during it: the
previous batch has usually been handed out and dropped by then, so the pass
finds little alive, little moves, and full passes become rare. Nothing else
changes: the pass is the one the interpreter was about to run a few hundred
allocations later, with its thresholds, and no object is kept from collection.
An application that turned the collector off (``gc.disable()``, a first
threshold of 0) is left alone.
"""

from __future__ import annotations

import gc

__all__ = ["young_pass_before_take", "young_pass_due"]

_TAKE_OVERHEAD = 64
"""Tracked objects a take allocates besides its records (the batch's list, the
data plane's bookkeeping, what other threads allocate meanwhile), a generous
count. Each record is one: a ``confluent_kafka.Message``."""


def young_pass_due(
    counts: tuple[int, int, int], thresholds: tuple[int, int, int], max_records: int
) -> bool:
    """Whether the collector's middle pass would run during a take of ``max_records``.

    ``counts`` and ``thresholds`` are ``gc.get_count()`` and
    ``gc.get_threshold()``. CPython passes over the first generation each time
    its count exceeds its threshold; each such pass adds one to the middle
    generation's count, and the middle generation is passed over instead (its
    objects moved to the oldest) at the first pass that finds that count above
    its threshold.

    Only when the pass would fall inside this take: running it any earlier adds
    middle passes, and a loop that keeps its last batch while it takes the next
    (``batch = consumer.consume(...)``) has a batch alive at every one of them.
    """
    first, middle, _ = thresholds
    if first <= 0:
        return False  # collection turned off by the threshold
    young, passes_so_far, _ = counts
    passes = (young + max(max_records, 0) + _TAKE_OVERHEAD) // (first + 1)
    # The k-th pass during the take finds passes_so_far + k - 1 in the count.
    return passes > 0 and passes_so_far + passes - 1 > middle


def young_pass_before_take(max_records: int) -> None:
    """Run the middle pass now if it would run during a take of ``max_records``."""
    if gc.isenabled() and young_pass_due(gc.get_count(), gc.get_threshold(), max_records):
        gc.collect(1)
