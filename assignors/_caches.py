"""What the classic assignors keep across calls, and a way to forget it.

Three bounded caches make a leader's repeated assignments cheaper; each holds
values that recur rebalance after rebalance:

- interned TopicPartition values per topic (``_common.topic_partitions``);
- Java string hash codes of member ids and topic names (``java_order``);
- compiled layouts of recurring sticky user-data shapes (``sticky``).

None changes a result. :func:`clear` empties them all, so that a benchmark (or a
test) can measure or check the first call of a process.
"""

from __future__ import annotations

from kgroup.assignors import _common, java_order, sticky

__all__ = ["clear"]


def clear() -> None:
    """Forget every cached value (results stay the same; the next call is slower)."""
    _common.forget_interned()
    java_order._forget_hashes()
    sticky._forget_shapes()
